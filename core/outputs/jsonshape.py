"""Reader for JSON: what went wrong in it, if it says, then its shape.

An output that is one JSON document (an object or an array) is read for
its problems first: keys such as ``error``, ``errors``, ``exception`` or
``failureMessages`` with a value, and compound keys whose last word says
so (``writeErrors``, ``insertErrors``, SQS's ``Failed``) or whose first word
says their items were not done (DynamoDB's ``UnprocessedItems``), unless their first
word makes them a setting (``ignoreErrors``, ``allowFailures``); where the
items of such a key carry errors of their own, those are cited, the most
specific lines; ``status``/``state``/``result``/
``conclusion``/``outcome`` saying failed, error or timed out; ``ok`` or
``success`` false; failure counts above zero (``numFailedTests: 2``). Each
is cited at the line of its key. Then the shape: the top level's type and
size, each top-level key with its value's type (an array with its length
and the keys its objects have), and one level below, each cited at its
line. Lines are found by a small scanner over the text, since Python's
``json`` keeps no positions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .doc import Doc, shorten

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\]:,\n]')
_PROBLEM_KEY = re.compile(r"^(?:errors?|error_?(?:message|msg|code|detail|details|info|description)|exception|"
                          r"exceptions|failures?|failed_?(?:items|records|entries|rows|jobs|tasks|messages)|"
                          r"failuremessages?|fault|faults|fatal|rejected|rejections|invalid_?(?:items|rows|records)?|"
                          r"stderr|traceback|stack_?trace|panic|crash)$", re.IGNORECASE)
#: The last word of a compound key that holds what failed: ``writeErrors``, ``insertErrors``,
#: ``Failed`` (SQS), ``failed_records``, ``partialFailures``, ``rowExceptions``.
_PROBLEM_WORD = re.compile(r"^(?:errors?|failures?|failed|exceptions?|faults?|rejected|rejections)$", re.IGNORECASE)
#: First words that make such a key a setting, not a report (``ignoreErrors``, ``allowFailures``).
_SETTING_WORD = re.compile(r"^(?:ignore[ds]?|suppress(?:ed)?|allow(?:ed)?|expected|known|max|min|on|retry|handle|"
                           r"continue|skip|tolerate[ds]?|report|show|log|raise|throw|stop|fail|treat|include|"
                           r"exclude|mask|mute|silence|silent|no|without|any|accept|accepted|permit|permitted)$",
                           re.IGNORECASE)
#: First words that say the items under a compound key were not done (DynamoDB's ``UnprocessedItems``,
#: ``rejectedRows``, ``invalid_records``, ``failedMessages``).
_NOT_DONE_WORD = re.compile(r"^(?:failed|failing|unprocessed|rejected|invalid|errored|erroneous|undelivered|unsent|"
                            r"bounced)$", re.IGNORECASE)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _problem_key(key: str) -> bool:
    """Whether ``key`` names what went wrong: one of :data:`_PROBLEM_KEY`, a compound key whose
    first word says its items were not done (``UnprocessedItems``, ``rejectedRows``), or one
    whose last word says errors or failures (``writeErrors``, ``Failed``, ``insert_errors``)
    and whose first word does not make it a setting (``ignoreErrors``)."""
    if _PROBLEM_KEY.match(key):
        return True
    words = _WORDS.findall(key)
    if len(words) > 1 and _NOT_DONE_WORD.match(words[0]):
        return True
    return bool(words) and bool(_PROBLEM_WORD.match(words[-1])) and not _SETTING_WORD.match(words[0])


#: A numeric status that says an item failed: an HTTP error status.
_HTTP_STATUS_KEY = re.compile(r"^(?:status|status_?code|http_?status|http_?code)$", re.IGNORECASE)
#: The keys of an error object that say what went wrong, shown for it.
_MESSAGE_KEYS = ("message", "msg", "errmsg", "errMsg", "error_message", "reason", "detail", "description",
                 "error_description", "title", "errorMessage", "ErrorMessage", "Message", "Reason")
_KIND_KEYS = ("type", "code", "name", "errorCode", "ErrorCode", "Code", "kind")
_STATE_KEY = re.compile(r"^(?:status|state|result|conclusion|outcome|level|severity|health)$", re.IGNORECASE)
_BAD_STATE = re.compile(r"fail|error|fatal|crash|broken|timed[ _-]?out|timeout|cancel|abort|unhealthy|critical|"
                        r"reject|denied|declined|partial[_ -]?success|^partial$|^red$|^down$", re.IGNORECASE)
_OK_KEY = re.compile(r"^(?:ok|success|succeeded|passed|healthy)$", re.IGNORECASE)
_COUNT_KEY = re.compile(r"^(?:num\w*(?:fail|error)\w*|failed|failures|errors|error_?count|fail(?:ed|ure)_?count)$",
                        re.IGNORECASE)
MAX_SCAN_BYTES = 64 * 1024 * 1024


@dataclass
class JsonReading:
    """A JSON output read: ``value`` (decoded), ``lines`` (key path → 1-based
    line of the key), ``problems`` as ``(line, text)`` in line order, and
    ``shape`` as ``(line, text)`` lines."""

    value: Any
    lines: dict[tuple[Any, ...], int]
    problems: list[tuple[int, str]]
    shape: list[tuple[int, str]]


def try_json(doc: Doc) -> JsonReading | None:
    """Read ``doc`` as one JSON object or array, or ``None`` when it is not one.

    It is read as produced (:mod:`.prefixes`): without run_command's
    ``[exit status 0]`` and read_file's numbers and ``[end of file]``, which
    are wisp's, not the document's. A preamble of a few lines before it
    (``curl -i``'s status line and headers) is passed over; nothing but
    blank lines, or a few short lines (a client's status line, ``status=207``), may follow it.
    Key lines are the stored output's."""
    lines = doc.lines
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    starts = [first]
    if not lines[first].lstrip().startswith(("{", "[")):
        # a preamble: HTTP status and headers, a shell's echo of the command
        starts = [i for i in range(first + 1, min(len(lines), first + 40)) if lines[i].lstrip().startswith(("{", "["))][:3]
    for start in starts:
        text = "\n".join(lines[start:]).strip()
        if not text or text[0] not in "{[" or len(text) > MAX_SCAN_BYTES:
            continue
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, (dict, list)) or not _epilogue(text[end:]):
            continue
        text = text[:end]
        key_lines = _key_lines(text, start)
        problems: list[tuple[int, int, str]] = []
        _problems(value, (), key_lines, problems, 0)
        # messages (an error's text, a failure message, a list of failed items) first: they say
        # why; then bad states, then flags and failure counts (errors: true), each in line order
        problems.sort(key=lambda p: (p[0], p[1], p[2]))
        found = [(line, t) for _, line, t in problems]
        shape = _shape(value, key_lines, start + 1)
        return JsonReading(value, key_lines, found, shape)
    return None


#: What may follow a document on its own lines: a client's status line (``curl -w
#: '\nstatus=%{http_code}'``, ``HTTP 207``), a few short lines that are no second document.
MAX_EPILOGUE_LINES = 3


def _epilogue(rest: str) -> bool:
    """Whether ``rest``, what follows the document, may: nothing but blank lines, or at most
    :data:`MAX_EPILOGUE_LINES` short lines after a line break, none opening another document."""
    if not rest.strip():
        return True
    if not rest.startswith(("\n", "\r\n")):
        return False  # text on the document's own last line: not one document
    lines = [ln.strip() for ln in rest.splitlines() if ln.strip()]
    return len(lines) <= MAX_EPILOGUE_LINES and all(len(ln) <= 120 and ln[0] not in "{[" for ln in lines)


def _key_lines(text: str, offset_line: int) -> dict[tuple[Any, ...], int]:
    """Key path (keys and array indices) → 1-based line where that key is written."""
    out: dict[tuple[Any, ...], int] = {(): 1 + offset_line}
    line = 1 + offset_line
    stack: list[list[Any]] = []  # per container: [kind, key or index]
    expect_key = False
    pending: str | None = None
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok == "\n":
            line += 1
            continue
        if tok in "{[":
            stack.append(["o", None] if tok == "{" else ["a", 0])
            expect_key = tok == "{"
            continue
        if tok in "}]":
            if stack:
                stack.pop()
            expect_key = False
            continue
        if tok == ",":
            if stack and stack[-1][0] == "a":
                stack[-1][1] += 1
            expect_key = bool(stack) and stack[-1][0] == "o"
            continue
        if tok == ":":
            if pending is not None and stack:
                stack[-1][1] = pending
                path = tuple(s[1] for s in stack)
                if len(path) <= 3 or _problem_key(pending) or _STATE_KEY.match(pending) \
                        or _OK_KEY.match(pending) or _COUNT_KEY.match(pending):
                    out.setdefault(path, line)
            pending = None
            expect_key = False
            continue
        # a string
        if expect_key:
            try:
                pending = json.loads(tok)
            except ValueError:
                pending = tok.strip('"')
        else:
            pending = None
    return out


_KEY_AT_START = re.compile(r'^\s*"(?:[^"\\\n]|\\.)*"\s*:')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\]]')


def value_span(lines: list[str], line: int, limit: int = 2000) -> tuple[int, int]:
    """The 1-based lines ``(first, last)`` the value of the key on 1-based ``line`` spans: to
    where the object or array it opens closes (strings skipped), else that line alone. At most
    ``limit`` lines; a line past the end gives ``(line, line)``."""
    if not 0 < line <= len(lines):
        return line, line
    depth = 0
    opened = False
    text = lines[line - 1]
    key = _KEY_AT_START.match(text)  # the value starts after the key, whose name may hold a colon
    start = key.end() if key else 0
    for k in range(line - 1, min(len(lines), line - 1 + limit)):
        chunk = lines[k][start:] if k == line - 1 else lines[k]
        for m in _STRING_OR_BRACKET.finditer(chunk):
            tok = m.group(0)
            if tok in "{[":
                depth += 1
                opened = True
            elif tok in "}]":
                depth -= 1
                if opened and depth <= 0:
                    return line, k + 1
        if not opened and k == line - 1:
            return line, line  # a scalar on the key's line
    return line, line


def _line_of(lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get((), 1)


def _preview(value: Any, limit: int = 160) -> str:
    if isinstance(value, str):
        return shorten(value.splitlines()[0] if value.strip() else value, limit)
    try:
        return shorten(json.dumps(value, ensure_ascii=False), limit)
    except (TypeError, ValueError):
        return shorten(str(value), limit)


def _path_text(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top)"


def _empty(value: Any) -> bool:
    return value in (None, False, "", 0) or (isinstance(value, (list, dict)) and not value)


def _error_text(value: Any) -> str:
    """An error value as a point shows it: an error object's kind and message
    (``document_parsing_exception: failed to parse field``), a list's first
    item and how many there are, else the value itself."""
    if isinstance(value, dict):
        kind = next((str(value[k]) for k in _KIND_KEYS if isinstance(value.get(k), (str, int))
                     and not isinstance(value.get(k), bool)), "")
        msg = next((str(value[k]) for k in _MESSAGE_KEYS if isinstance(value.get(k), str) and value[k].strip()), "")
        if msg or kind:
            return _preview(f"{kind}: {msg}" if kind and msg else (msg or kind))
        # an item that names what failed and holds why one level down (Elasticsearch's
        # failures[].cause, a batch item's error): why, then which item
        for key in ("cause", "error", "err", "exception", "fault", "reason", "caused_by", "errors"):
            inner = value.get(key)
            if isinstance(inner, (dict, list)) and inner:
                which = next((f"{k} {value[k]}" for k in ("id", "_id", "Id", "index", "key", "name", "custom_id")
                              if isinstance(value.get(k), (str, int)) and not isinstance(value.get(k), bool)), "")
                return _preview(_error_text(inner) + (f" ({which})" if which else ""))
    if isinstance(value, list) and value:
        more = f" (+{len(value) - 1} more)" if len(value) > 1 else ""
        return _error_text(value[0]) + more
    return _preview(value)


def _problems(value: Any, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int], out: list[tuple[int, int, str]],
              depth: int) -> None:
    if depth > 12 or len(out) > 200:
        return
    if isinstance(value, dict):
        for key, v in value.items():
            p = (*path, key)
            k = str(key)
            plain = bool(_PROBLEM_KEY.match(k))
            if plain or _problem_key(k):
                if isinstance(v, bool):
                    if v and plain:  # "errors": true says only that something below failed
                        out.append((2, _line_of(lines, p), f"{_path_text(p)}: true"))
                    continue
                if isinstance(v, (int, float)):
                    if v > 0 and plain:
                        out.append((2, _line_of(lines, p), f"{_path_text(p)}: {v}"))
                    continue
                if not _empty(v):
                    if isinstance(v, (list, dict)) and _holds_problems(v):
                        # the items say what went wrong themselves (BigQuery's insertErrors hold each
                        # row's errors): the most specific report is theirs, as with a bulk's items
                        _problems(v, p, lines, out, depth + 1)
                    else:
                        out.append((0, _line_of(lines, p), f"{_path_text(p)}: {_error_text(v)}"))
                    continue
            if _STATE_KEY.match(k) and isinstance(v, str) and _BAD_STATE.search(v):
                out.append((1, _line_of(lines, p), f"{_path_text(p)}: {v}" + _sibling_hint(value)))
            elif _HTTP_STATUS_KEY.match(k) and isinstance(v, int) and not isinstance(v, bool) and 400 <= v < 600:
                out.append((1, _line_of(lines, p), f"{_path_text(p)}: {v}" + _sibling_hint(value)))
            elif _OK_KEY.match(k) and v is False:
                out.append((2, _line_of(lines, p), f"{_path_text(p)}: false" + _sibling_hint(value)))
            elif _COUNT_KEY.match(k) and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                out.append((2, _line_of(lines, p), f"{_path_text(p)}: {v}"))
            _problems(v, p, lines, out, depth + 1)
    elif isinstance(value, list):
        for idx, v in enumerate(value[:5000]):
            _problems(v, (*path, idx), lines, out, depth + 1)


def _holds_problems(value: Any) -> bool:
    """Whether the items of ``value`` (a list, or an object's values) carry problem keys of their
    own with something in them."""
    items = value[:50] if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict) and any(_problem_key(str(k)) and not _empty(v) and not isinstance(v, (bool, int, float))
                                          for k, v in item.items()):
            return True
    return False


def _sibling_hint(obj: dict[str, Any]) -> str:
    """What failed and why, from the keys beside a bad status, so the point says it."""
    parts = []
    for keys in (("name", "title", "fullName", "nodeid", "test", "id"), ("message", "msg", "reason", "error",
                                                                         "description", "detail")):
        for key in keys:
            v = obj.get(key)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
                parts.append(f"{key} {_preview(v, 100)}")
                break
    return f" ({'; '.join(parts)})" if parts else ""


def _type_of(value: Any) -> str:
    if isinstance(value, dict):
        return f"object with {len(value):,} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        if not value:
            return "empty array"
        kinds = {type(v).__name__ for v in value[:200]}
        if kinds == {"dict"}:
            keys: dict[str, None] = {}
            for v in value[:200]:
                for k in v:
                    keys.setdefault(str(k), None)
            names = list(keys)
            shown = ", ".join(names[:8]) + (f", … ({len(names)} keys)" if len(names) > 8 else "")
            return f"array of {len(value):,} objects with keys {shown}"
        names = sorted({_scalar(v) for v in value[:200]})
        return f"array of {len(value):,} {'/'.join(names)}s"
    return _scalar(value) + (f" {_preview(value, 60)}" if isinstance(value, (int, float, bool)) or value is None
                             else f" {_preview(value, 60)!s}" if isinstance(value, str) and len(value) <= 60 else "")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _shape(value: Any, lines: dict[tuple[Any, ...], int], first: int = 1) -> list[tuple[int, str]]:
    """The shape as ``(line, text)``: the top level at ``first`` (the 1-based
    line the document starts on), then its keys and one level below."""
    out: list[tuple[int, str]] = [(first, f"JSON: {_type_of(value)}")]
    if isinstance(value, dict):
        for key, v in list(value.items())[:40]:
            out.append((_line_of(lines, (key,)), f"  \"{key}\": {_type_of(v)}"))
            if isinstance(v, dict):
                for k2, v2 in list(v.items())[:8]:
                    out.append((_line_of(lines, (key, k2)), f"    \"{k2}\": {_type_of(v2)}"))
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for key, v in list(value[0].items())[:20]:
            out.append((_line_of(lines, (0, key)), f"  [0].\"{key}\": {_type_of(v)}"))
    return out


__all__ = ["JsonReading", "try_json", "value_span"]
