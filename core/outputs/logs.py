"""Reader for logs: lines counted by severity, and the severe or rare messages.

A line's severity is the level word near its start (``ERROR``, ``WARN``,
``[error]``, ``level=warn``, ``"level":"error"``, glog's ``E0102``, Python
logging's ``WARNING:root:``). An output is a log when at least three
lines, and at least 30 % of its non-blank lines, carry one. Messages are
grouped by their template (numbers, ids, hex, quoted strings, addresses
and paths made alike), so ``connection refused to 10.0.0.5:5432`` seen 30
times is one message counted 30 times, cited at its first line. Severe
messages (error and worse) are listed in order of first appearance, with
the indented or unlevelled lines after one (a stack trace) as its own;
rare messages are the warnings whose template appears once or twice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .doc import Doc, Reading, shorten

_LEVEL_WORDS = ("TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|SEVERE|CRIT|CRITICAL|FATAL|ALERT|EMERG|PANIC|"
                "Trace|Debug|Info|Notice|Warn|Warning|Error|Fatal|Critical")
_LEVEL = re.compile(
    r"^(?:[^\n]{0,80}?(?<![\w/.-])(?P<a>" + _LEVEL_WORDS + r")(?![\w/.-])"
    r"|[^\n]{0,80}?\[(?P<b>trace|debug|info|notice|warn|warning|error|err|crit|alert|emerg|fatal)\]"
    r"|[^\n]{0,120}?\blevel=\"?(?P<c>\w+)"
    r"|[^\n]{0,200}?\"(?:level|severity|lvl|log\.level)\"\s*:\s*\"?(?P<d>\w+)\"?"
    r"|(?P<e>[IWEF])\d{4} \d\d:\d\d:\d\d"
    r"|(?P<f>[VDIWEF])/[\w.$-]+\(\s*\d+\):)",
    re.MULTILINE,
)
_NORMAL = {
    "trace": "TRACE", "debug": "DEBUG", "v": "DEBUG", "d": "DEBUG", "info": "INFO", "i": "INFO", "notice": "INFO",
    "warn": "WARN", "warning": "WARN", "w": "WARN", "error": "ERROR", "err": "ERROR", "severe": "ERROR",
    "e": "ERROR", "crit": "FATAL", "critical": "FATAL", "fatal": "FATAL", "alert": "FATAL", "emerg": "FATAL",
    "panic": "FATAL", "f": "FATAL",
    # pino's numeric levels
    "10": "TRACE", "20": "DEBUG", "30": "INFO", "40": "WARN", "50": "ERROR", "60": "FATAL",
}
#: Severity order, worst first.
ORDER = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_SEVERE = ("FATAL", "ERROR")
_TEMPLATE_SUBS = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<addr>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"\"[^\"]*\"|'[^']*'"), "<str>"),
    (re.compile(r"(?:/[\w.@-]+){2,}"), "<path>"),
    (re.compile(r"\d+(?:[.,:]\d+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
]
#: What comes before a level word that starts an exception's message instead of naming a level.
_EXCEPTION_BEFORE = re.compile(r"(?:Exception|Error|Throwable|Failure|Fault)\s*:\s*$")
_MSG_PREFIX = re.compile(r"^[\s:\]|)>-]+")
_GLOG_TAIL = re.compile(r"^(?:\.\d+)?\s+\d+\s+(?P<src>[\w.-]+:\d+)\]\s*")
_JSON_MSG = re.compile(r'"(?:msg|message|event)"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _level_of(m: re.Match[str]) -> str:
    word = next(g for g in m.groups() if g)
    return _NORMAL.get(word.lower(), "INFO")


def _message(line: str, start: int) -> str:
    """The message of a log line whose level ends at ``start``."""
    if line.lstrip().startswith("{"):
        m = _JSON_MSG.search(line)
        if m:
            try:
                return json.loads(f'"{m.group(1)}"')
            except ValueError:
                return m.group(1)
    rest = line[start:]
    g = _GLOG_TAIL.match(rest)
    if g:
        rest = f"{g.group('src')}: {rest[g.end():]}"
    return _MSG_PREFIX.sub("", rest) or line.strip()


def _template(message: str) -> str:
    t = message
    for pattern, repl in _TEMPLATE_SUBS:
        t = pattern.sub(repl, t)
    return t.strip()[:200]


@dataclass
class LogMessage:
    """One message template: its level, first line (1-based), count, last
    line, the first line's message text, and its continuation lines."""

    level: str
    first: int
    text: str
    count: int = 1
    last: int = 0
    continuation: list[int] = field(default_factory=list)


@dataclass
class LogReading:
    """A log's severities (level → lines), its messages by template, and
    how many lines carried a level."""

    counts: dict[str, int]
    messages: list[LogMessage]
    levelled: int


def read_levels(doc: Doc) -> dict[int, tuple[str, int]]:
    """0-based line → (normalised level, offset where the message starts)."""
    out: dict[int, tuple[str, int]] = {}
    for m in _LEVEL.finditer(doc.text):
        i = doc.line_at(m.start())
        if i in out:
            continue
        if m.group("a") and _EXCEPTION_BEFORE.search(doc.text, doc.starts[i], m.start("a")):
            continue  # "BeanCreationException: Error creating bean …": an exception's message, not a level
        out[i] = (_level_of(m), m.end() - doc.starts[i])
    return out


def is_log(doc: Doc, levels: dict[int, tuple[str, int]] | None = None) -> bool:
    """Whether the output reads as a log (see the module doc)."""
    levels = read_levels(doc) if levels is None else levels
    if len(levels) < 3:
        return False
    non_blank = sum(1 for line in doc.lines if line.strip())
    return len(levels) * 10 >= 3 * max(1, non_blank)


def read_log(doc: Doc, r: Reading, levels: dict[int, tuple[str, int]] | None = None) -> LogReading:
    """Count severities and group messages (see the module doc); claims the
    severe messages' lines and their continuations in ``r``."""
    levels = read_levels(doc) if levels is None else levels
    counts: dict[str, int] = {}
    by_template: dict[tuple[str, str], LogMessage] = {}
    order: list[LogMessage] = []
    keys = sorted(levels)
    for idx, i in enumerate(keys):
        level, start = levels[i]
        counts[level] = counts.get(level, 0) + 1
        if level not in _SEVERE and level != "WARN":
            continue
        line = doc.lines[i]
        message = _message(line, start)
        key = (level, _template(message))
        msg = by_template.get(key)
        if msg is None:
            msg = LogMessage(level, i + 1, message.strip(), last=i + 1)
            by_template[key] = msg
            order.append(msg)
            if level in _SEVERE:
                nxt = keys[idx + 1] if idx + 1 < len(keys) else doc.n
                cont = [j for j in range(i + 1, min(nxt, i + 200)) if doc.lines[j].strip()]
                msg.continuation = [j + 1 for j in cont]
        else:
            msg.count += 1
            msg.last = i + 1
        if level in _SEVERE:
            r.claim(i + 1)
            if msg.first == i + 1:
                r.claim(*msg.continuation)
    return LogReading(counts, order, len(levels))


def severity_line(log: LogReading) -> str:
    """``severities: ERROR 37, WARN 120, INFO 12,201`` (worst first)."""
    parts = [f"{lvl} {log.counts[lvl]:,}" for lvl in ORDER if log.counts.get(lvl)]
    return "severities: " + (", ".join(parts) if parts else "none")


def message_line(msg: LogMessage) -> str:
    """``L1204 ERROR connection refused … (×30, last L9980)``."""
    extra = f" (×{msg.count:,}, last L{msg.last})" if msg.count > 1 else ""
    return f"L{msg.first} {msg.level} {shorten(msg.text, 200)}{extra}"


__all__ = ["ORDER", "LogMessage", "LogReading", "read_levels", "is_log", "read_log", "severity_line",
           "message_line"]
