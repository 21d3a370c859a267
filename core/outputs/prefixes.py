"""An output as its program produced it: wisp's own lines, read_file's numbers and per-line prefixes taken off.

A stored output is not what the program wrote. run_command ends it with
wisp's own lines (``[exit status 1]``, ``[timed out after 60 s: …]``, a note
that bytes were dropped), read_file numbers every line (``12<TAB>text``) and
ends with ``[end of file]`` or the next page's ``[more: …]``, and what ran
under a build system or a process manager carries a prefix on every line:
Docker BuildKit's step and seconds (``#12 3.456 ``), docker compose's,
foreman's and honcho's process names (``api-1  | ``, ``09:14:02 web.1  | ``),
pm2's id and name (``0|api      | ``), concurrently's (``[api] ``, ``[0] ``),
Heroku's source and dyno (``app[web.1]: ``),
journald's time, host and unit (``Jun 12 08:00:01 edge-03 app[812]: ``),
kubectl's ``[pod/NAME/CONTAINER] ``, a build runner's package and task
(``@acme/api:build: ``), and timestamps (CI runners, Jenkins). A reader that
looks for ``error[E0433]`` at the start of a line, or for a traceback's
indentation, sees none of it until these are taken off.

:func:`produced` does that without changing the numbering: line ``k`` stays
line ``k`` of the stored output, so a point's ``L154`` is still the stored
output's line 154 (wisp-memory-tool.txt, "summarise": "the stored output's
numbering"). wisp's own lines become blank; a prefix is taken off each line
that has it. A process-name prefix also names the line's stream: when two
or more processes write into one output their lines interleave (a web
server's access line in the middle of a worker's traceback), so the
readers read each stream on its own (:attr:`Produced.streams`).

A prefix family is taken off only when it is the output's own shape: at
least two lines, and at least a fifth of the non-blank lines (BuildKit's and
journald's forms are distinctive enough that two lines suffice), so that
one line that happens to start with a time is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Produced", "produced", "OWN_TRAILER", "EXIT_MARK"]

#: wisp's own lines at the end of a stored output (run_command's and read_file's).
OWN_TRAILER = re.compile(
    r"^(?:\[exit status:? [^\]]*\]|\[ended by signal \w+\]|\[end of file\]|"
    r"\[more: (?:lines \d+-\d+ of \d+|from line \d+)[^\]]*\]|\[line \d+ goes on past this page[^\]]*\]|"
    r"\[the output is not valid UTF-8[^\]]*\]|\[the output was [\d,]+ bytes; [^\]]*\]|"
    r"\[stopped by the person[^\]]*\]|\[timed out after [^\]]*\]|\[processes the command left running[^\]]*\]|"
    r"\[sandbox[^\]]*\]|\[[^\]\n]*\bsandbox\b[^\]\n]*\]|\(no output\))$")
#: read_file's first line on a page that starts inside a line.
_FROM_BYTE = re.compile(r"^\[from byte [\d,]+: the rest of line \d+\]$")
#: run_command's exit status line.
EXIT_MARK = re.compile(r"^\[exit status (-?\d+)\]$")
#: read_file's own line numbers (``12<TAB>text``).
_OWN_NUMBER = re.compile(r"^(\d{1,9})\t")

_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| ?UTC)?"


@dataclass(frozen=True)
class _Family:
    """One kind of per-line prefix: ``name``, the ``pattern`` that matches it
    at a line's start (a group ``name`` holds the stream's name, if it has
    one), and ``min_share``, the share of non-blank lines it must be on."""

    name: str
    pattern: re.Pattern[str]
    min_share: float = 0.2


_FAMILIES = [
    # GitHub Actions and other CI runners: an ISO time before every line
    _Family("timestamp", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")),
    # Jenkins' timestamper and the like: a bracketed ISO time
    _Family("timestamp", re.compile(r"^\[" + _ISO + r"\] ")),
    # a plain ISO time (supervisord, many loggers): the level after it is still read
    _Family("timestamp", re.compile(r"^" + _ISO + r" +(?=\S)")),
    # Docker BuildKit, plain progress: step number and seconds since the step started
    _Family("buildkit", re.compile(r"^(?P<name>#\d+) \d+\.\d+(?: |$)"), 0.0),
    # journald (short, short-precise, short-iso, short-monotonic): time, host, unit and pid
    _Family("journald", re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?|" + _ISO +
                                   r"|\[ *\d+\.\d+\]) [\w.-]+ (?P<name>[\w@.\-/]+)(?:\[\d+\])?: ?"), 0.0),
    # foreman, honcho, overmind: time, process name, bar
    _Family("process", re.compile(r"^\d\d:\d\d:\d\d(?:\.\d+)? (?P<name>[\w.@/-]+)\s*\| ?")),
    # docker compose (v1 and v2), kubectl --prefix without brackets, concurrently with names
    _Family("process", re.compile(r"^(?P<name>[A-Za-z][\w.@/-]*)\s+\| ?")),
    # pm2 logs: the process's id and name, then a bar (``0|api      | ``)
    _Family("process", re.compile(r"^(?P<name>\d+\|[\w.@/-]+)\s*\| ?")),
    # Heroku's and syslog's source and process after the time (``app[web.1]: ``, ``heroku[router]: ``)
    _Family("process", re.compile(r"^(?P<name>[A-Za-z][\w.-]*\[[\w.-]+\]): ")),
    # kubectl logs --prefix
    _Family("process", re.compile(r"^\[(?P<name>pod/[^\]\s]+)\] ")),
    # concurrently, npm-run-all, lerna: the process's name or index in brackets (``[api] ``, ``[0] ``)
    _Family("process", re.compile(r"^\[(?P<name>[\w.@/:-]{1,40})\] ")),
    # turbo, pnpm -r, lerna, nx: package and task
    _Family("package", re.compile(r"^(?P<name>@?[\w.-]+(?:/[\w.-]+)?[:#][A-Za-z][\w.-]*): ")),
]
_LEVEL_NAME = re.compile(r"^(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL|SEVERE|E|W|I|D)(?:[:#]|$)",
                         re.IGNORECASE)
#: A time-only prefix BuildKit puts on the lines it repeats under `` > [step] RUN …:`` after a failure.
_BUILDKIT_RECAP = re.compile(r"^\d+\.\d{3}(?: |$)")
_BUILDKIT_RECAP_HEAD = re.compile(r"^ > \[.*\]( .*)?:$")


@dataclass
class Produced:
    """What :func:`produced` made of a stored output's lines.

    ``lines``: as many as were given, each as the program wrote it (wisp's
    own lines blank); ``own``: 0-based indices of wisp's own lines;
    ``exit_status``: the status in run_command's ``[exit status N]`` line,
    or ``None``; ``numbered``: read_file's numbers were taken off;
    ``prefixes``: the prefix families taken off, in order; ``streams``:
    stream name → 0-based indices of its lines, when lines of two or more
    named processes interleave (else empty)."""

    lines: list[str]
    own: set[int] = field(default_factory=set)
    exit_status: int | None = None
    numbered: bool = False
    prefixes: list[str] = field(default_factory=list)
    streams: dict[str, list[int]] = field(default_factory=dict)


def produced(lines: list[str]) -> Produced:
    """The output as produced (see the module doc) from its stored lines
    (already without terminal colours). Never raises; the result has as
    many lines as ``lines``."""
    out = list(lines)
    p = Produced(out)
    _own_lines(p)
    _own_numbers(p)
    names: list[str | None] = [None] * len(out)
    for _ in range(3):  # prefixes nest: a timestamp before a process name before BuildKit's step
        took = False
        for fam in _FAMILIES:
            if _take(p, fam, names):
                took = True
        if not took:
            break
    if "buildkit" in p.prefixes:
        _buildkit_recap(p)
    _streams(p, names)
    return p


def _own_lines(p: Produced) -> None:
    """Blank wisp's own lines: the trailer run_command and read_file write at the end, and read_file's first line."""
    lines = p.lines
    k = len(lines) - 1
    while k >= 0 and (not lines[k].strip() or OWN_TRAILER.match(lines[k].strip())):
        if lines[k].strip():
            m = EXIT_MARK.match(lines[k].strip())
            if m and p.exit_status is None:
                p.exit_status = int(m.group(1))
            p.own.add(k)
            lines[k] = ""
        k -= 1
    if lines and _FROM_BYTE.match(lines[0].strip()):
        p.own.add(0)
        lines[0] = ""


def _own_numbers(p: Produced) -> None:
    """Take off read_file's numbers: every line not wisp's own starts with its
    number and a tab, the numbers counting up by one. One such line is enough
    when wisp's own end of file or next page follows it (a compact JSON file)."""
    idx = [i for i in range(len(p.lines)) if i not in p.own]
    if not idx:
        return
    first = _OWN_NUMBER.match(p.lines[idx[0]])
    if first is None:
        return
    start = int(first.group(1))
    for k, i in enumerate(idx[:5000]):
        m = _OWN_NUMBER.match(p.lines[i])
        if m is None or int(m.group(1)) != start + k:
            return
    if len(idx) < 2 and not p.own:
        return
    for i in idx:
        p.lines[i] = _OWN_NUMBER.sub("", p.lines[i], count=1)
    p.numbered = True


def _take(p: Produced, fam: _Family, names: list[str | None]) -> bool:
    """Take ``fam``'s prefix off the lines that have it, when it is the output's shape."""
    lines = p.lines
    non_blank = [i for i, line in enumerate(lines) if line.strip()]
    if len(non_blank) < 2:
        return False
    sample = non_blank[:4000]
    hits = [i for i in sample if fam.pattern.match(lines[i])]
    if len(hits) < 2 or len(hits) < fam.min_share * len(sample):
        return False
    if fam.name in ("process", "package") and fam.pattern.pattern.startswith(("^(?P<name>", "^\\[(?P<name>[")):
        # "name | text", "name:task: text": a table, a shell pipe or a logger's "INFO:app:" look
        # alike; a process manager's or a build runner's names are few, repeat, and are no level
        found = {fam.pattern.match(lines[i]).group("name") for i in hits}  # type: ignore[union-attr]
        if len(found) * 3 > len(hits) + 2 or any(_LEVEL_NAME.match(n) for n in found):
            return False
    for i in range(len(lines)):
        m = fam.pattern.match(lines[i])
        if m is None:
            continue
        name = m.groupdict().get("name")
        if name and names[i] is None:
            names[i] = name
        lines[i] = lines[i][m.end():]
    p.prefixes.append(fam.name)
    return True


def _buildkit_recap(p: Produced) -> None:
    """After a failed step BuildKit repeats its last lines under `` > [step] RUN …:``
    with only the seconds before each: take those off too."""
    inside = False
    for i, line in enumerate(p.lines):
        if _BUILDKIT_RECAP_HEAD.match(line):
            inside = True
            continue
        if inside:
            if line.startswith("------"):
                inside = False
                continue
            m = _BUILDKIT_RECAP.match(line)
            if m:
                p.lines[i] = line[m.end():]


def _streams(p: Produced, names: list[str | None]) -> None:
    """The streams of an output two or more named processes wrote into, when their lines interleave."""
    by: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        by.setdefault(name or "", []).append(i)
    named = [k for k in by if k]
    if len(named) < 2:
        return
    switches = sum(1 for a, b in zip(names, names[1:]) if a and b and a != b)
    if switches <= len(named) - 1:
        return  # one after the other: read as written
    p.streams = by
