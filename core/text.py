"""Text from outside, made safe where it goes: a terminal, or code that encodes UTF-8.

Rules (issue "Nothing runs, leaks, hangs or is lost that shouldn't be"):

- "Raw terminal escapes": a model's reply (or a command's output, or a
  server's error message) can hold control sequences: clear the screen, set
  the window title, write the clipboard (OSC 52), hide text. Written to a
  terminal, :func:`terminal_safe` shows every control character as a
  visible escape instead (``ESC`` becomes ``\\x1b``), so no sequence can
  start: C0 controls except newline and tab, DEL, C1 controls (U+0080 to
  U+009F, which include 8-bit CSI and OSC), and the bidirectional controls
  that reorder what is shown (U+202A to U+202E, U+2066 to U+2069, U+200E,
  U+200F, U+061C). A carriage return is dropped (a CRLF ends a line; a lone
  CR would overwrite it). :class:`TerminalText` applies it to a stream.
- "Nothing crashes": a lone surrogate (``\\ud800``: a Python string can hold
  one; UTF-8 cannot) becomes U+FFFD through :func:`without_surrogates`
  before text reaches a parser, the store or a screen.
- Search text is words, never syntax: :func:`fts_query` is the one rule that
  turns what a person or a model typed into an SQLite FTS5 query (the
  store's search of a conversation's record, and episodic memory's), and
  :func:`folded_words` reads a line's words the way that query matches them.
"""

from __future__ import annotations

import io
import re
import unicodedata
from typing import Any, TextIO

__all__ = ["terminal_safe", "shown_command", "shown_diff", "TerminalText", "without_surrogates", "search_words", "fts_query", "fold",
           "folded_words"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch == "\r":
        return ""
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character that a terminal would act on
    shown as a visible escape (``\\x1b``, ``\\x9b``, ``\\u202e``) and carriage
    returns dropped; newlines and tabs are kept. Pure; works on any piece
    of a stream, since no sequence survives a cut."""
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


#: Characters a command may hold that show as nothing (zero-width spaces and joiners, the word joiner, a BOM).
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
_COMMAND_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f" + _BIDI + _INVISIBLE + "]")
#: What marks the end of each line of a command shown for approval.
LINE_END = "⏎"


def _command_escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in "\t\r":
        return "\\t" if ch == "\t" else "\\r"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown_command(text: str) -> str:
    """``text`` (a command, or an MCP call's arguments) as an approval shows
    it, so that everything that would run can be seen: each line break is
    marked with :data:`LINE_END` before it, a run of two or more empty (or
    blank) lines is one line saying how many there were, and every control,
    tab, carriage return, bidirectional control (U+202E …) and invisible
    character (U+200B …) is a visible escape (``\\x1b``, ``\\r``,
    ``\\u202e``). So ``echo hello`` + 40 newlines + ``touch x`` shows three
    lines, the last ``touch x``; and U+202E cannot reorder what the person
    reads. Pure."""
    lines = [_COMMAND_UNSAFE.sub(_command_escape, line) for line in text.split("\n")]
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) - 1 and not lines[j].strip():
            j += 1
        blanks = j - i  # empty lines before the next one with words (the last line is never counted)
        if blanks >= 2:
            out.append(f"{LINE_END} … {blanks} empty lines …")
            i = j
            continue
        out.append(lines[i] + (LINE_END if i < len(lines) - 1 else ""))
        i += 1
    return "\n".join(out)


_DIFF_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + _INVISIBLE + "]")


def shown_diff(text: str) -> str:
    """``text`` (a diff of a file, shown for approval) with every control
    character, carriage return, bidirectional control and invisible
    character a visible escape, as :func:`shown_command` shows a command's,
    so that a line cannot hide or reorder what it changes; newlines and
    tabs are kept (a diff is read line by line, and code is indented with
    tabs). Pure."""
    return _DIFF_UNSAFE.sub(_command_escape, text) if _DIFF_UNSAFE.search(text) else text


def one_line(text: str | bytes, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters: whitespace folded,
    control characters shown as :func:`terminal_safe` shows them (a prompt's
    escape codes must reach no terminal and no pipe from a listing), cut with
    "…". ``bytes`` (a cut of stored text) are decoded, a character cut in
    two dropped. For titles and previews of prompts."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="ignore")
    line = terminal_safe(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (U+D800 to U+DFFF) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


class TerminalText(io.TextIOBase):
    """A text stream that writes through :func:`terminal_safe` to ``stream``
    (a terminal). Everything else (``flush``, ``fileno``, ``isatty``,
    ``encoding`` …) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:  # type: ignore[override]
        self._stream.write(without_surrogates(terminal_safe(text)))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


#: A word of search text: a run of letters, digits or ``_`` (what FTS5's unicode61 tokenizer keeps, near enough).
_SEARCH_WORD = re.compile(r"\w+")
#: At most this many words of a search are used (a pasted paragraph is not a query).
MAX_SEARCH_WORDS = 64


def search_words(text: str | None) -> list[str]:
    """The words of search text, in order (at most :data:`MAX_SEARCH_WORDS`):
    runs of letters, digits and ``_``; everything else (quotes, ``*``, ``:``,
    ``-``, parentheses, NUL) separates them."""
    return _SEARCH_WORD.findall(str(text or ""))[:MAX_SEARCH_WORDS]


def fts_query(text: str | None, *, prefix: bool = True, any_word: bool = False) -> str:
    """Search text as an SQLite FTS5 query; ``""`` when it holds no word.

    Each word (:func:`search_words`) becomes a quoted string, so FTS5's own
    syntax (``AND``, ``OR``, ``NEAR``, ``:``, ``-``, ``*``, quotes) is read as
    plain words and no text is a syntax error (SQLite FTS5 docs, "Full-text
    Query Syntax": strings). With ``prefix`` each is a prefix term
    (``"retr"*`` finds retry, retries); with ``any_word`` an entry need hold
    only one of them (``OR``), else every one (FTS5's implicit ``AND``)."""
    words = search_words(text)
    star = "*" if prefix else ""
    return (" OR " if any_word else " ").join('"' + w.replace('"', '""') + '"' + star for w in words)


def fold(text: str) -> str:
    """``text`` as FTS5's ``unicode61 remove_diacritics 2`` compares it:
    case folded, accents removed (``Tökyo`` → ``tokyo``)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def folded_words(text: str) -> list[str]:
    """The words of ``text`` (as :func:`search_words` reads them), folded (:func:`fold`)."""
    return _SEARCH_WORD.findall(fold(text))
