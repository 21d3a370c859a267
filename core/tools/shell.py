"""How wisp hands a command to ``/bin/sh``, and which commands it can prove *simple*.

Issue "Nothing runs, leaks, hangs or is lost that shouldn't be", "Security":
the allow list (config ``tools.run_command.allow`` and the TUI's "always
allow" prefixes) may only vouch for a command that ``/bin/sh`` runs as
exactly one program with exactly the words wisp saw. The old check parsed
with :mod:`shlex` rules, which ``sh`` does not use (``ls a#; touch PWNED``:
shlex saw a comment, sh ran ``touch``). This module decides with the POSIX
shell's own grammar (POSIX.1-2017, XCU 2.2 "Quoting", 2.3 "Token
Recognition", 2.6 "Word Expansions", 2.9.1 "Simple Commands"), and rejects
whatever it cannot prove simple; a rejected command is not refused, it just
always needs the person's approval.

A command is simple when all of these hold:

- it is printable ASCII, with spaces and tabs between words: no line break,
  carriage return, NUL or other control character (C0, DEL, C1), and no
  character beyond ASCII (lookalikes such as ``；`` U+FF1B or ``ǀ`` U+01C0,
  invisible and bidirectional controls, and multibyte encodings whose bytes a
  shell in another locale could read differently);
- no unquoted operator: ``;`` ``&`` ``|`` ``<`` ``>`` ``(`` ``)``, so no
  lists, pipes, background jobs, redirections, here-documents, here-strings
  (``<<<``), subshells or process substitution (``<(…)``) -- except the one
  word ``2>&1`` after the program name, which only joins standard error to
  standard output (``run_command`` joins them anyway) and adds no word;
- no expansion: ``$`` and backquote are refused unquoted and inside double
  quotes (parameters ``$X`` ``${X}``, commands ``$(…)`` and backquotes,
  arithmetic ``$((…))``, bash's ``$'…'`` and ``$"…"``). Parameter expansion
  counts: ``ls $MY_API_KEY`` would print a secret;
- no unquoted ``#`` (a comment at the start of a word, which hides the rest
  of the line from a reader but not from the shell), ``~`` (tilde
  expansion), ``*`` ``?`` ``[`` ``]`` (pathname expansion would make the
  word list depend on the files present), ``{`` ``}`` (bash's brace
  expansion and grouping: bash may be ``/bin/sh``) or ``!`` (pipeline
  negation);
- quotes are closed, and read as ``sh`` reads them: inside single quotes
  every character is itself; inside double quotes a backslash escapes only
  ``$`` backquote ``"`` and ``\\`` and is otherwise kept; outside quotes a
  backslash makes the next character itself (``\\;`` is the word ``;``);
- the first word is not an assignment (``A=b cmd``, bash's ``A+=b``), nor
  a reserved word (``if``, ``for``, ``time``, ``function``, …), nor begins
  with ``%`` (bash resumes a job for ``%1``, even quoted: found by the
  property test).

:func:`shell_argv` is how ``run_command`` starts the shell; the property
test runs the same argv against the real ``/bin/sh``.
"""

from __future__ import annotations

import re

__all__ = ["NotSimple", "simple_words", "simple_command_words", "is_simple_command", "shell_argv", "SHELL"]

#: The shell every command runs under.
SHELL = "/bin/sh"

#: Words the shell reads as grammar when they come first (POSIX 2.4, plus
#: bash's and ksh's); a command starting with one is never simple.
RESERVED = frozenset({
    "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then", "until", "while",
    "function", "select", "time", "coproc", "namespace",
})

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
#: What an unquoted character means when it is refused (every one not in it
#: is an ordinary word character).
_REFUSED = {
    ";": "`;` ends a command and starts another",
    "&": "`&` runs a command in the background or chains commands (&&)",
    "|": "`|` pipes into another command (or chains with ||)",
    "<": "`<` redirects input (here-documents and here-strings too, and process substitution)",
    ">": "`>` redirects output",
    "(": "`(` starts a subshell or a function",
    ")": "`)` ends a subshell",
    "$": "`$` expands a variable, a command or arithmetic",
    "`": "a backquote runs a command",
    "#": "`#` can start a comment, which hides the rest of the line",
    "~": "`~` expands to a home directory",
    "*": "`*` expands to the names of files",
    "?": "`?` expands to the names of files",
    "[": "`[` expands to the names of files",
    "]": "`]` belongs to a file name pattern",
    "{": "`{` groups commands or expands braces (bash)",
    "}": "`}` groups commands or expands braces (bash)",
    "!": "`!` negates a command",
}


class NotSimple(ValueError):
    """The command is not one the allow list can vouch for; ``str(exc)`` (and
    ``reason``) says why in one line, such as "`;` ends a command and starts
    another"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _screen(command: str) -> None:
    """Refuse characters that are not printable ASCII (tab allowed)."""
    for position, ch in enumerate(command):
        code = ord(ch)
        if 0x20 <= code < 0x7F or ch == "\t":
            continue
        if ch in "\n\r":
            raise NotSimple("a line break separates commands")
        if code == 0:
            raise NotSimple("a NUL character cannot be passed to a command")
        if code < 0x20 or 0x7F <= code <= 0x9F:
            raise NotSimple(f"a control character (U+{code:04X}) at position {position + 1}")
        raise NotSimple(f"a character beyond ASCII (U+{code:04X}) at position {position + 1}, which "
                        "may look like another or be read differently by the shell")


def simple_words(command: str) -> list[str]:
    """The words ``/bin/sh`` would run ``command`` with -- program first --
    when it is a simple command (see the module docstring); raises
    :class:`NotSimple` saying why when it is not.

    ``simple_words("git log -n 3 'a b'")`` → ``["git", "log", "-n", "3", "a b"]``.
    """
    if not isinstance(command, str):
        raise NotSimple("the command is not text")
    _screen(command)
    words: list[str] = []
    current: list[str] | None = None  # the word being read, None between words
    start = 0  # where the current word began
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c in " \t":
            if current is not None:
                words.append("".join(current))
                current = None
            i += 1
            continue
        if current is None:
            current, start = [], i
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise NotSimple("a ' quote is not closed")
            current.append(command[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise NotSimple('a " quote is not closed')
                d = command[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and command[i + 1] in '$`"\\':
                    current.append(command[i + 1])
                    i += 2
                    continue
                if d in "$`":
                    raise NotSimple(_REFUSED[d] + ", inside double quotes too")
                current.append(d)  # a backslash before anything else is kept, as sh keeps it
                i += 1
        elif c == "\\":
            if i + 1 >= n:
                raise NotSimple("a backslash at the end continues the command on a next line")
            current.append(command[i + 1])
            i += 2
        elif c == ">" and words and start == i - 1 and command[start] == "2" \
                and command.startswith(">&1", i) and (i + 3 == n or command[i + 3] in " \t"):
            current = None  # the word 2>&1: standard error joins standard output; it is no word
            i += 3
        elif c in _REFUSED:
            raise NotSimple(_REFUSED[c])
        else:
            current.append(c)
            i += 1
    if current is not None:
        words.append("".join(current))
    if not words:
        raise NotSimple("there is no command")
    first = words[0]
    if _ASSIGNMENT.match(first):
        raise NotSimple(f"{first.split('=', 1)[0]}= sets a variable for the command")
    if first in RESERVED:
        raise NotSimple(f"{first!r} is a word of the shell's grammar, not a program")
    if first.startswith("%"):
        raise NotSimple(f"bash reads {first!r} as a job to resume (fg), not a program")
    return words


def simple_command_words(command: str) -> list[str] | None:
    """:func:`simple_words`, or ``None`` when ``command`` is not simple."""
    try:
        return simple_words(command)
    except NotSimple:
        return None


def is_simple_command(command: str) -> bool:
    """True when ``command`` is one program with plain words (see the module docstring)."""
    return simple_command_words(command) is not None


def shell_argv(command: str) -> list[str]:
    """The argv that runs ``command`` under :data:`SHELL`: ``["/bin/sh", "-c",
    "--", command]``. The ``--`` keeps a command that begins with ``-`` from
    being read as the shell's own options (``sh -c '-x'`` is "-c requires an
    argument", and worse options exist)."""
    return [SHELL, "-c", "--", command]
