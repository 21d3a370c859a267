"""Token estimates without a tokenizer.

wisp counts tokens per layer before it sends a request. Where the endpoint
can count exactly (llama.cpp's ``/tokenize``), it does (see
``Endpoint.count_tokens``); everywhere else it uses this estimate, which the
endpoint's reported prompt tokens calibrate later (issue "Layered context";
issue 10, "Exact tokens").

The estimate follows how byte-pair tokenizers split text, instead of a flat
four characters a token, so that prose, code and logs are each estimated
well. The text is cut into pieces the way a BPE pre-tokenizer does (letter
runs, single digits, whitespace runs, punctuation runs), and each piece is
given a cost:

* a run of letters: 1 token, plus 1 for every 6 letters past the fourth,
  plus 1 for each lower-to-upper case change (``CamelCase`` splits);
* a digit: 1 token (most tokenizers split numbers into digits);
* whitespace: a single space is free (it joins the next word); any other run
  (newlines, indentation, tabs) is 1 token;
* punctuation: 1 token for every 3 ASCII characters of a run, and 1 for each
  non-ASCII character (2 for CJK and other characters from U+3000 on,
  which byte-level tokenizers split into bytes).

Measured against SmolLM2's tokenizer (``benchmarks/token_estimate.py``), the
mean error per 4 kB sample went from 12 % (prose), 12 % (code), 33 % (logs)
and 30 % (code with line numbers, as read_file shows it) with four
characters a token, to 6 %, 4 %, 6 % and 4 %.

Text longer than :data:`SAMPLE_ABOVE` characters is estimated from evenly
spaced samples, so that a 5 MB paste costs milliseconds, not seconds.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Characters a token, for the places that need a flat ratio (cutting text to
#: a budget). Representative of code and logs, which are most of what is cut.
CHARS_PER_TOKEN = 3.2
#: The context window (tokens) assumed when neither config nor the endpoint says (issue
#: "wisp runs end to end"); the one place this default lives.
DEFAULT_CONTEXT_WINDOW = 4096
MESSAGE_OVERHEAD = 4  # tokens of role markers and separators per message

#: Above this many characters, the estimate is made on samples (characters).
SAMPLE_ABOVE = 200_000
SAMPLES = 48
SAMPLE_CHARS = 4096

_PIECE = re.compile(r"[A-Za-z]+|[0-9]|\s+|[^\sA-Za-z0-9]+")
_CAMEL = re.compile(r"[a-z][A-Z]")
_WORD_FREE = 4  # letters covered by a word's first token
_WORD_STEP = 6.0  # letters a further token covers
_PUNCT_STEP = 3  # ASCII punctuation characters a token covers


def _cost(text: str) -> float:
    n = 0.0
    for m in _PIECE.finditer(text):
        piece = m.group()
        c = piece[0]
        if c.isascii() and c.isalpha():
            n += 1 + max(0, len(piece) - _WORD_FREE) / _WORD_STEP + len(_CAMEL.findall(piece))
        elif c.isdigit():
            n += 1
        elif c.isspace():
            if piece != " ":
                n += 1
        else:
            ascii_chars = 0
            for ch in piece:
                if ch.isascii():
                    ascii_chars += 1
                else:
                    n += 1 if ord(ch) < 0x3000 else 2
            n += -(-ascii_chars // _PUNCT_STEP)
    return n


def estimate_tokens(text: str, chars_per_token: float | None = None) -> int:
    """Estimated tokens in ``text`` (at least 1 for non-empty text, 0 for empty).

    With ``chars_per_token`` given, the old flat estimate ``len(text) /
    chars_per_token`` is used instead (for callers that calibrate a ratio of
    their own).
    """
    if not text:
        return 0
    if chars_per_token:
        return max(1, round(len(text) / chars_per_token))
    if len(text) <= SAMPLE_ABOVE:
        return max(1, round(_cost(text)))
    step = len(text) / SAMPLES
    sampled = 0.0
    chars = 0
    for i in range(SAMPLES):
        start = int(i * step)
        piece = text[start:start + SAMPLE_CHARS]
        sampled += _cost(piece)
        chars += len(piece)
    return max(1, round(sampled * len(text) / chars))


def chars_per_token(text: str) -> float:
    """This text's own characters a token, by :func:`estimate_tokens` (for cutting
    a text to a token budget); :data:`CHARS_PER_TOKEN` for empty text."""
    if not text:
        return CHARS_PER_TOKEN
    return len(text) / estimate_tokens(text)


def text_kind(text: str) -> str:
    """``"code"``, ``"log"`` or ``"prose"``: a rough kind, for calibrating per kind.

    Logs: many lines starting with a date, a time or a level word. Code: many
    symbols (``{}()[];=<>``) or indented lines. Prose: the rest.
    """
    sample = text[:SAMPLE_CHARS * 2]
    lines = [ln for ln in sample.splitlines() if ln.strip()]
    if not lines:
        return "prose"
    logish = sum(1 for ln in lines if _LOG_LINE.match(ln))
    if logish >= max(2, len(lines) * 0.3):
        return "log"
    symbols = sum(sample.count(ch) for ch in "{}()[];=<>")
    indented = sum(1 for ln in lines if ln.startswith(("    ", "\t")))
    if symbols > len(sample) * 0.03 or indented > len(lines) * 0.3:
        return "code"
    return "prose"


_LOG_LINE = re.compile(
    r"^\s*(\[?\d{4}[-/]\d\d[-/]\d\d|\[?\d\d:\d\d:\d\d|\[?(INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|E|W|I)\b[\]:]?)")


def estimate_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                      chars_per_token: float | None = None) -> int:
    """Estimated prompt tokens of a request: every message's content, tool calls
    and per-message overhead, plus the tool schemas as JSON."""
    total = 0
    for m in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(str(m.get("content") or ""), chars_per_token)
        for call in m.get("tool_calls") or []:
            total += estimate_tokens(json.dumps(call, ensure_ascii=False), chars_per_token)
    if tools:
        total += estimate_tokens(json.dumps(tools, ensure_ascii=False), chars_per_token)
    return total


def window_from(configured: int | None, reported: int | None = None,
                last_seen: int | None = None, cap: int | None = None) -> tuple[int, str]:
    """The context window (tokens) and where it came from, the one place
    this is decided (issue "One core, built once", "window resolution"):
    config ``model.context_window`` (``configured``), else what the
    connected endpoint reported (``reported``: the embedded server's
    ``n_ctx``, Ollama's ``/api/show``), else the last window seen for the
    model (``last_seen``, kept with its calibration, so ``wisp inspect
    context`` works without asking the endpoint), else
    :data:`DEFAULT_CONTEXT_WINDOW`. Sources are ``config
    model.context_window``, ``the endpoint``, ``last seen for this model``
    and ``default``. ``cap`` is a window the endpoint cannot go beyond
    whatever config says (the embedded server's ``n_ctx``, which wisp
    started it with, capped at the model's trained length): a larger
    window is cut to it, with the source ``the server's n_ctx (config asks
    N)``, so no request is planned for room the server does not have
    (issue "Real models, real work")."""
    window, source = DEFAULT_CONTEXT_WINDOW, "default"
    for value, name in ((configured, "config model.context_window"), (reported, "the endpoint"),
                        (last_seen, "last seen for this model")):
        if value:
            window, source = int(value), name
            break
    if cap and window > cap:
        return int(cap), f"the server's n_ctx ({source} asks {window:,})"
    return window, source
