"""summarise: the notable lines or an overview of a stored output, by exact readers and no model.

Rules (wisp-memory-tool.txt, "summarise"; issue 4, "Verbs"):

- A build or test output in a format a reader knows (pytest, unittest, go
  test, cargo and rustc, gcc, clang and make, CMake, tsc, ESLint, npm and
  Jest, Maven and javac, swift build and swift test): the errors grouped by
  file or test, root causes first, the first of each with its line and the
  lines after it, the later ones in the same place counted under it; the
  warnings tallied; the test run and its failing tests as the ``tests``
  fact reads them (:mod:`.runs`: the two cannot disagree); the runners'
  own totals.
- A log: its severities, and the severe and rare messages.
- JSON: what it reports as wrong, then its shape.
- Anything else: the lines that mention an error, or failing that the first
  and last lines.
- Every point cites its line as ``L154`` in the stored output's numbering
  (:func:`.doc.split_stored_lines`), so ``recall entry N from line 154``
  lands on it.
- Both end with what no reader explained: failure-looking lines that no
  reader accounted for.
- The overview: the size, how it ended (the exit status in the entry's meta,
  else its last line), the kinds of line counted, the lines that look like
  headings with their numbers, the first and last lines; for JSON, its
  shape first, as in the notable lines.
- Both fit the token budget (estimated at four characters a token): the
  lines under points go first, then the later places, which are named in a
  count.

Public: :func:`summarise` → :class:`Summary`; :func:`analyse` for the
readers' findings without the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..tokens import estimate_tokens
from .cargo import read_cargo
from .cfamily import read_cc, read_linker, read_make
from .cmake import read_cmake
from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten, split_stored_lines
from .eslint import read_eslint
from .go import read_go
from .java import read_java_traces, read_kotlin, read_maven
from .jest import read_jest
from .jsonshape import JsonReading, try_json, value_span
from .logs import LogReading, is_log, message_line, read_levels, read_log, severity_line
from .managed import read_docker, read_services
from .node import read_bundlers, read_node
from .npm import read_npm
from .other import read_bare_errors
from .pytest import read_pytest
from .python import read_pip, read_tracebacks
from .runs import NEEDLES, read_lines
from .swift import read_swift
from .tsc import read_tsc
from .unittest import read_unittest

__all__ = ["Summary", "Analysis", "analyse", "summarise", "split_stored_lines", "TOOLCHAIN_READERS",
           "RUNTIME_READERS"]

Reader = Callable[[Doc, Reading], None]
#: Readers of build and test tools, in the order they run: a line one of
#: them claims is left alone by the later ones, so the more specific run first.
TOOLCHAIN_READERS: list[Reader] = [
    read_pytest, read_unittest, read_jest, read_go, read_cargo, read_swift, read_kotlin, read_maven, read_tsc,
    read_eslint, read_bundlers, read_cmake, read_cc, read_linker, read_make, read_pip, read_npm, read_docker,
]
#: Readers of what any program prints when it fails at run time.
RUNTIME_READERS: list[Reader] = [read_tracebacks, read_java_traces, read_node, read_services, read_bare_errors]

_FAILURE_WORDS = ("error", "exception", "traceback", "fail", "fatal", "panic", "segmentation fault", "denied",
                  "cannot ", "can't ", "unable to", "no such file", "not found", "abort", "killed", "undefined")
_FAILURE = re.compile(
    r"\berror|\bexception\b|traceback \(most recent|\bfail(?:ed|ure|ing|s)?\b|\bfatal\b|\bpanic|"
    r"segmentation fault|\bdenied\b|\bcannot\b|\bcan't\b|\bunable to\b|no such file|\bnot found\b|"
    r"\babort(?:ed|ing)?\b|\bkilled\b|\bundefined (?:reference|symbol)", re.IGNORECASE)
_NOT_FAILURE = re.compile(
    r"\b(?:0|no|zero|without) (?:errors?|failures?|failed|warnings?)\b|\berrors?[=:] ?0\b|\bfail(?:ed|ures)?[=:] ?0\b|"
    r"\b0 failed\b|-Werror|-Wno-error|error\.h\b|_error\b|\berror_\w+|fail_?fast|\bonerror\b|"
    r"\b(?:test|check|handle|log|raise|on|is|has|expect)_?errors?\b|\bErrorProne\b|\bpassed\b.*\b0 failed",
    re.IGNORECASE)
_HEADING = re.compile(
    r"^(?:={3,}.*|_{3,} .+ _{3,}|-{3,} .+ -{3,}|#{1,6} \S.*|\*{3,} .*|##\[group\].*|::group::.*|Step \d+/\d+ ?:.*|"
    r"#\d+ \[.*\].*|> Task \S+.*|\[INFO\] -{3,} .* -{3,}|\[INFO\] Building \S.*|\[INFO\] BUILD \w+|"
    r"(?:failures|Failures|FAILURES|Summary of all failing tests|short test summary info):?|"
    r"Running \S+|Test Suite '.*' started.*|--- (?:FAIL|PASS): \S+.*|FAIL \S+|PASS \S+|# \S+)$")
_TEST_RESULT = re.compile(r"\bPASSED\b|\bFAILED\b|--- (?:PASS|FAIL|SKIP)|\.\.\. (?:ok|FAILED|ignored)\b|"
                          r"^\s*[✓✔✕✗✘×]|^(?:ok|FAIL)\s+\S+\s|^Test Case '|^\s*(?:PASS|FAIL) \S|<<< (?:FAILURE|ERROR)!|"
                          r"\bXFAIL\b|\bSKIPPED\b")
_FRAME = re.compile(r'^\s+File ".+", line \d+|^\s+at \S|^\tat |^\s+\S+\.go:\d+ \+0x|^\s*#\d+ +0x[0-9a-f]+|'
                    r"^\s+\d+: 0x[0-9a-f]+|^\s{2,}\d+: \S+::")
_PROGRESS = re.compile(r"^\s*\[\s*\d+(?:/\d+|%)\]|\b\d{1,3}(?:\.\d+)?%|^\s*(?:Compiling|Downloading|Downloaded|"
                       r"Building|Installing|Fetching|Resolving|Linking|Checking|Collecting|Processing|Preparing|"
                       r"Unpacking|Setting up|Get:\d+|Updating|Finished|Scanning|Generating|Copying|Creating|Writing|"
                       r"Pulling|Extracting|Verifying)\b|^\s*(?:CC|CXX|LD|AR|AS|CCLD|CXXLD|GEN)\s+\S")


@dataclass
class Analysis:
    """What the readers made of an output.

    ``doc``: the output as lines; ``reading``: the findings; ``mode``:
    ``build`` (a build or test tool's format), ``log``, ``json``, or
    ``other``; ``log`` and ``json`` the log's or JSON's reading in those
    modes; ``failure_lines``: 1-based lines that look like a failure;
    ``unexplained``: those no reader accounted for.
    """

    doc: Doc
    reading: Reading
    mode: str
    log: LogReading | None = None
    json: JsonReading | None = None
    failure_lines: list[int] = field(default_factory=list)
    unexplained: list[int] = field(default_factory=list)
    shown_generic: list[int] = field(default_factory=list)


@dataclass
class Summary:
    """A summary: ``text`` (what the tool returns), ``kind`` (``notable`` or
    ``overview``), ``mode`` (see :class:`Analysis`), ``readers`` (names of
    the readers that recognised something), ``first_cited`` (the line the
    first point cites, or ``None``) and ``unexplained`` (how many
    failure-looking lines no reader explained)."""

    text: str
    kind: str
    mode: str
    readers: list[str]
    first_cited: int | None
    unexplained: int


def analyse(text: str, meta: dict[str, Any] | None = None) -> Analysis:
    """Run the readers over ``text`` (a stored output; ``meta`` its entry's
    meta, for the exit status and the command) and decide what it is.

    The failing tests are the test run's (:func:`.runs.read_lines`, the same
    reading as the ``tests`` fact's), each cited at the line that names it;
    with no run, those the format that named the most did. Never raises
    for any text."""
    doc = Doc(text, meta)
    reading = Reading()
    _test_run(doc, reading)
    js = try_json(doc)
    if js is not None:
        for line, _ in js.problems:
            # the whole value a problem stands for is accounted for: its message and fields
            # are what the point says, not failure-looking lines no reader explained
            first, last = value_span(doc.lines, line)
            reading.claim_range(first, last)
        reading.saw("json")
        analysis = Analysis(doc, reading, "json", json=js)
        _unexplained(analysis)
        return analysis
    toolchain = _read_streams(doc, reading)
    if reading.test_run is not None and not reading.readers:
        reading.saw(reading.test_run.framework)
    if toolchain:
        analysis = Analysis(doc, reading, "build")
    else:
        levels = read_levels(doc)
        if is_log(doc, levels):
            reading.saw("log")
            analysis = Analysis(doc, reading, "log", log=read_log(doc, reading, levels))
        elif reading.findings:
            analysis = Analysis(doc, reading, "build")
        else:
            analysis = Analysis(doc, reading, "other")
    _unexplained(analysis)
    return analysis


def _read_streams(doc: Doc, reading: Reading) -> bool:
    """Run the toolchain readers, then the runtime readers, over ``doc``, or
    over each of its streams when processes' lines interleave (a worker's
    traceback is read without the web server's lines between its own);
    returns whether a toolchain reader recognised something."""
    toolchain = bool(reading.failing_tests or reading.test_run)
    subs = doc.stream_docs()
    if subs == [doc]:
        for reader in TOOLCHAIN_READERS:
            reader(doc, reading)
        toolchain = toolchain or bool(reading.findings or reading.tallies)
        for reader in RUNTIME_READERS:
            reader(doc, reading)
        return toolchain
    for sub in subs:
        part = Reading()
        for reader in TOOLCHAIN_READERS:
            reader(sub, part)
        toolchain = toolchain or bool(part.findings or part.tallies)
        for reader in RUNTIME_READERS:
            reader(sub, part)
        reading.merge(part, sub.numbers)
    return toolchain


def _test_run(doc: Doc, r: Reading) -> None:
    """Put the test run's failing tests (and the run) in ``r``."""
    command = doc.meta.get("command")
    run, parser = read_lines(doc.lines, doc.exit_status, command if isinstance(command, str) else None,
                             candidates=doc.lines_with(*NEEDLES))
    r.test_run = run
    source = parser.failing_seen()
    if source is None:
        return
    names = run.failing if run is not None else source.names.names
    r.failing_tests = {name: source.line_of(name) for name in names}
    r.more_failing = run.more_failing if run is not None else source.names.more


def _failure_lines(doc: Doc) -> list[int]:
    out = []
    for i in doc.lines_with(*_FAILURE_WORDS, lower=True):
        line = doc.lines[i]
        if len(line) > 2000:
            line = line[:2000]
        if _FAILURE.search(line) and not _NOT_FAILURE.search(line):
            out.append(i + 1)
    return out


def _unexplained(a: Analysis) -> None:
    a.reading.claim(*(line for line in a.reading.failing_tests.values() if line))  # listed, so accounted for
    a.failure_lines = _failure_lines(a.doc)
    claimed = a.reading.claimed
    a.unexplained = [ln for ln in a.failure_lines if ln not in claimed]


# -- formatting -------------------------------------------------------------------


def _size(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes:,} bytes"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:,.0f} KiB"
    return f"{n_bytes / (1024 * 1024):,.1f} MiB"


def _ending(doc: Doc) -> str:
    status = doc.exit_status
    if doc.meta.get("timed_out"):
        return "timed out" + (f" (exit status {status})" if status is not None else "")
    if status is not None:
        return f"exit status {status} ({'succeeded' if status == 0 else 'failed'})"
    return ""


def _last_line(doc: Doc) -> str:
    """The last line that is the output's (not wisp's own), quoted as stored, as every cited line
    is, so that it reads as ``recall entry N from line K`` shows it."""
    for i in range(doc.n - 1, -1, -1):
        if doc.lines[i].strip():
            return f"L{i + 1}: {_raw(doc, i + 1)}"
    return "nothing"


def _head(kind: str, doc: Doc, with_end_line: bool) -> str:
    parts = [f"{doc.n:,} line{'s' if doc.n != 1 else ''}", _size(doc.size)]
    head = f"{kind} (exact readers, no model): " + ", ".join(parts)
    ending = _ending(doc)
    if ending:
        head += f"; {ending}"
    elif with_end_line:
        head += f"; it ended with {_last_line(doc)}"
    return head


def _raw(doc: Doc, line: int, limit: int = 160) -> str:
    """Line ``line`` (1-based) as stored (without terminal colours, and without read_file's own
    number, which the ``L`` number already says), indentation kept, cut to ``limit`` characters."""
    if not 0 < line <= doc.n:
        return ""
    text = doc.stored_lines[line - 1]
    if doc.self_numbered:
        text = re.sub(r"^\d{1,9}\t", "", text, count=1)
    text = text.rstrip().expandtabs(4)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _unexplained_line(a: Analysis, hint: str | None) -> str:
    u = a.unexplained
    if not a.failure_lines:
        return "what no reader explained: nothing; no line looks like a failure"
    if not u:
        return "what no reader explained: nothing; every failure-looking line was read"
    examples = "; ".join(f"L{ln}: {_raw(a.doc, ln, 120)}" for ln in u[:2])
    text = f"what no reader explained: {_plural(len(u), 'failure-looking line')}, such as {examples}"
    if hint:
        text += f" ({hint})"
    return text


@dataclass
class _Group:
    place: str
    findings: list[Finding]

    @property
    def head(self) -> Finding:
        rank = min(f.rank for f in self.findings)
        return min((f for f in self.findings if f.rank == rank), key=lambda f: f.line)

    @property
    def key(self) -> tuple[int, int]:
        h = self.head
        return (h.rank, h.line)


def _groups(findings: list[Finding]) -> list[_Group]:
    by_place: dict[str, _Group] = {}
    for f in sorted(findings, key=lambda f: f.line):
        by_place.setdefault(f.place, _Group(f.place, [])).findings.append(f)
    return sorted(by_place.values(), key=lambda g: g.key)


def _fits(lines: list[str], budget: int) -> bool:
    return estimate_tokens("\n".join(lines)) <= budget


def _build_body(a: Analysis, budget: int, head: list[str], tail: list[str]) -> list[str]:
    r = a.reading
    errors = [f for f in r.findings if f.kind != "warning"]
    warnings = [f for f in r.findings if f.kind == "warning"]
    followed: list[Finding] = []
    if any(f.rank != RANK_AFTER for f in errors):
        # what only followed from the errors (make: *** … Error 1) is named
        # after them, not counted as errors of its own
        followed = sorted((f for f in errors if f.rank == RANK_AFTER), key=lambda f: f.line)
        errors = [f for f in errors if f.rank != RANK_AFTER]
    groups = _groups(errors)
    n_fail = sum(1 for f in errors if f.kind == "failure")
    lead: list[str] = []
    if groups:
        what = "error" if not n_fail else ("failing test" if n_fail == len(errors) else "error and test failure")
        whats = {"error": "errors", "failing test": "failing tests",
                 "error and test failure": "errors and test failures"}[what]
        lead.append(f"{len(errors):,} {what if len(errors) == 1 else whats} in {_plural(len(groups), 'place')}; "
                    "the first of each, root causes first:")
    elif r.failing_tests:
        lead.append("no error lines found by the readers")
    else:
        lead.append("no errors or failing tests found by the readers")
    extras: list[str] = []
    if r.test_run is not None:
        extras.append(f"test run: {r.test_run.headline()}")
    if r.failing_tests:
        names = sorted(r.failing_tests.items(), key=lambda kv: kv[1])
        total = len(names) + r.more_failing
        extras.append(f"{_plural(total, 'failing test')}: " + ", ".join(
            f"{n} (L{ln})" if ln else n for n, ln in names[:12]) + (f", +{total - 12} more" if total > 12 else ""))
    if warnings:
        counts: dict[str, int] = {}
        for w in warnings:
            counts[w.place] = counts.get(w.place, 0) + 1
        top = sorted(counts.items(), key=lambda kv: -kv[1])
        first = min(w.line for w in warnings)
        extras.append(f"{_plural(len(warnings), 'warning')}, the first at L{first} ("
                      + ", ".join(f"{p} ×{c}" for p, c in top[:6]) + (f", +{len(top) - 6} more places" if len(top) > 6
                                                                        else "") + ")")
    if followed:
        extras.insert(0, "what followed from them: " + "; ".join(f"L{f.line} {shorten(f.text, 100)}" for f in followed[:3])
                      + (f"; +{len(followed) - 3} more" if len(followed) > 3 else ""))
    for line, text in r.tallies:
        extras.append(f"{text} (L{line})" if line else text)

    def render(n_groups: int, ctx_upto: int) -> list[str]:
        out: list[str] = []
        for gi, g in enumerate(groups[:n_groups]):
            h = g.head
            more = len(g.findings) - 1
            suffix = f" (+{more} more in {g.place})" if more else ""
            out.append(f"L{h.line} {h.text}{suffix}")
            if gi < ctx_upto:
                for c in h.context:
                    shown = _raw(a.doc, c)
                    if shown.strip() and shown.strip() in h.text:
                        continue  # the point already says it
                    out.append(f"  L{c}: {shown}")
        rest = groups[n_groups:]
        if rest:
            names = ", ".join(f"{g.place} (L{g.head.line})" for g in rest[:8])
            out.append(f"+{_plural(len(rest), 'more place')} not shown: {names}" + (", …" if len(rest) > 8 else ""))
        return out

    n, ctx = len(groups), len(groups)
    body = render(n, ctx)
    while not _fits(head + lead + body + extras + tail, budget):
        if ctx > 1:
            ctx -= 1
        elif n > 1:
            n -= 1
            ctx = min(ctx, n)
        elif ctx == 1:
            ctx = 0
        elif extras:
            extras.pop()
        else:
            break
        body = render(n, ctx)
    return lead + body + extras


#: Readers whose findings in a log are the program's own failures (an exception with its
#: trace, a panic, a crash), which say why, rather than another copy of a levelled line.
_EXPLAINING = ("python traceback", "java", "node", "go", "crash", "linker", "compiler", "cargo", "pip")


def _log_body(a: Analysis, budget: int, head: list[str], tail: list[str]) -> list[str]:
    log = a.log
    assert log is not None
    lead = [f"read as a log: {log.levelled:,} of {a.doc.n:,} lines carry a level", severity_line(log)]
    severe = [m for m in log.messages if m.level in ("FATAL", "ERROR")]
    rare = [m for m in log.messages if m.level == "WARN" and m.count <= 2]
    # an exception, panic or crash a reader explained under a severe message says why it
    # happened: the point cites it, with the message's line under it; the log is in time order,
    # so the first severe message (or explained failure) is its root cause
    explained = [f for f in a.reading.findings if f.kind != "warning" and f.rank == RANK_ROOT
                 and f.reader in _EXPLAINING]
    covered = {c for m in severe for c in m.continuation} | {m.first for m in severe}
    runtime = [f for f in a.reading.findings if f.line not in covered and f.kind != "warning"
               and f.rank != RANK_AFTER]
    items: list[tuple[int, str, tuple[int, ...]]] = []
    for m in severe:
        inner = [f for f in explained if f.line in m.continuation or f.line == m.first]
        if inner:
            g = _groups(inner)[0].head  # the root cause among them (a chain's cause, a group's first)
            ctx = tuple(x for x in (*g.context[:1], m.first) if x != g.line)
            times = f" (×{m.count:,}, last L{m.last})" if m.count > 1 else ""
            items.append((m.first, f"L{g.line} {g.text}{times}", ctx))
            continue
        items.append((m.first, message_line(m), tuple(m.continuation[:2])))
    for f in runtime:
        items.append((f.line, f"L{f.line} {f.text}", f.context[:2]))
    items.sort(key=lambda t: t[0])

    def render(n: int, ctx: int, n_rare: int) -> list[str]:
        out: list[str] = []
        if items:
            out.append("severe messages, the first of each, in order:")
        else:
            out.append("no error or fatal messages")
        for k, (_, text, c) in enumerate(items[:n]):
            out.append(text)
            if k < ctx:
                out.extend(f"  L{x}: {_raw(a.doc, x)}" for x in c)
        if len(items) > n:
            out.append(f"+{len(items) - n} more severe messages, the next at L{items[n][0]}")
        if rare[:n_rare]:
            out.append("rare messages (warnings seen once or twice):")
            out.extend(message_line(m) for m in rare[:n_rare])
        return out

    n, ctx, n_rare = len(items), len(items), min(5, len(rare))
    body = render(n, ctx, n_rare)
    while not _fits(head + lead + body + tail, budget):
        if n_rare:
            n_rare -= 1
        elif ctx > 1:
            ctx -= 1
        elif n > 1:
            n -= 1
            ctx = min(ctx, n)
        elif ctx:
            ctx = 0
        else:
            break
        body = render(n, ctx, n_rare)
    return lead + body


def _json_body(a: Analysis, budget: int, head: list[str], tail: list[str]) -> list[str]:
    js = a.json
    assert js is not None
    problems = [f"L{ln} {text}" for ln, text in js.problems]
    shape = [f"L{ln} {text.strip()}" if not text.startswith("  ") else f"L{ln} {text.strip()}" for ln, text in js.shape]
    lead = ["read as JSON"]
    p_head = ["what it reports as wrong:"] if problems else ["nothing in it reports a failure"]
    n_p, n_s = len(problems), len(shape)

    def render() -> list[str]:
        out = p_head + problems[:n_p]
        if len(problems) > n_p:
            out.append(f"+{len(problems) - n_p} more, the next at {problems[n_p].split(' ', 1)[0]}")
        out.append("its shape:")
        out.extend(shape[:n_s])
        if len(shape) > n_s:
            out.append(f"+{len(shape) - n_s} more keys")
        return out

    body = render()
    while not _fits(head + lead + body + tail, budget) and (n_s > 1 or n_p > 1):
        if n_s > 1:
            n_s -= 1
        else:
            n_p -= 1
        body = render()
    return lead + body


def _other_body(a: Analysis, budget: int, head: list[str], tail: list[str]) -> list[str]:
    doc = a.doc
    lead = ["no reader knew this output's format"]
    errors = a.failure_lines
    if errors:
        n = len(errors)
        while True:
            body = [f"{_plural(len(errors), 'line')} mention an error; the first of them:"]
            body += [f"L{ln} {_raw(doc, ln)}" for ln in errors[:n]]
            if n < len(errors):
                body.append(f"+{len(errors) - n} more, the next at L{errors[n]}")
            if _fits(head + lead + body + tail, budget) or n <= 1:
                break
            n = max(1, n // 2 if n > 8 else n - 1)
        a.shown_generic = errors[:n]
        return lead + body
    k = 5
    while True:
        first = [i for i in range(doc.n) if doc.lines[i].strip()][:k]
        last = [i for i in range(doc.n - 1, -1, -1) if doc.lines[i].strip()][:k][::-1]
        last = [i for i in last if i not in first]
        body = ["no line mentions an error; the first and last lines:"]
        body += [f"L{i + 1} {_raw(doc, i + 1)}" for i in first]
        if last:
            if last[0] > (first[-1] if first else -1) + 1:
                body.append("…")
            body += [f"L{i + 1} {_raw(doc, i + 1)}" for i in last]
        if _fits(head + lead + body + tail, budget) or k == 1:
            return lead + body
        k -= 1


def _first_cited(lines: list[str]) -> int | None:
    for line in lines:
        m = re.match(r"^L(\d+) ", line)
        if m:
            return int(m.group(1))
    return None


def _hard_fit(lines: list[str], budget: int) -> list[str]:
    """Make the text fit: first each line cut to 200, then 120 characters (a long last line, what
    no reader explained, must not push the first point out), then lines dropped from the end,
    keeping the first and the last."""
    if _fits(lines, budget):
        return lines
    for limit in (200, 120):
        lines = [shorten(x, limit) if len(x) > limit else x for x in lines]
        if _fits(lines, budget):
            return lines
    keep_last = lines[-1]
    out = list(lines[:-1])
    while out and not _fits(out + ["…", keep_last], budget):
        out.pop()
    out = [shorten(x, 200) for x in out]
    return out + ["…", keep_last] if out else [shorten(lines[0], budget * 4), shorten(keep_last, budget * 2)]


def summarise(text: str, meta: dict[str, Any] | None = None, *, overview: bool = False,
              budget_tokens: int = 1000, hint: str | None = None,
              analysis: Analysis | None = None) -> Summary:
    """The notable lines (or with ``overview`` the overview) of a stored
    output ``text`` whose entry meta is ``meta`` (for its exit status),
    within ``budget_tokens`` tokens. ``hint`` is added to the line about
    what no reader explained (the tool names condense there). Never raises
    for any text."""
    a = analysis or analyse(text, meta)
    if overview:
        return _overview(a, budget_tokens, hint)
    head = [_head("notable lines", a.doc, with_end_line=False)]
    tail = [_unexplained_line(a, hint)]
    if a.mode == "json":
        body = _json_body(a, budget_tokens, head, tail)
    elif a.mode == "log":
        body = _log_body(a, budget_tokens, head, tail)
    elif a.mode == "build":
        readers = [x for x in a.reading.readers if x not in ("error lines",)] or a.reading.readers
        head.append("read as: " + ", ".join(readers))
        body = _build_body(a, budget_tokens, head, tail)
    else:
        body = _other_body(a, budget_tokens, head, tail)
        a.unexplained = [ln for ln in a.unexplained if ln not in set(a.shown_generic)]
        tail = [_unexplained_line(a, hint)]
    lines = _hard_fit(head + body + tail, budget_tokens)
    return Summary("\n".join(lines), "notable", a.mode, list(a.reading.readers), _first_cited(lines),
                   len(a.unexplained))


# -- the overview ---------------------------------------------------------------------


def _kinds(a: Analysis) -> list[tuple[str, int]]:
    doc = a.doc
    taken: set[int] = set()
    out: list[tuple[str, int]] = []

    def count(name: str, lines: set[int]) -> None:
        fresh = lines - taken
        taken.update(fresh)
        if fresh:
            out.append((name, len(fresh)))

    count("blank", {i for i, line in enumerate(doc.lines) if not line.strip()})
    count("error", {ln - 1 for ln in a.failure_lines})
    warn = {i for i in doc.lines_with("warn", lower=True) if re.search(r"\bwarn(?:ing)?s?\b", doc.lines[i], re.I)}
    count("warning", warn)
    tests = {i for i in doc.lines_with("PASS", "FAIL", " ok", "ok ", "✓", "✔", "✕", "✗", "✘", "×", "Test Case '",
                                        "<<<", "XFAIL", "SKIP") if _TEST_RESULT.search(doc.lines[i])}
    count("test result", tests)
    frames = {i for i in doc.lines_with('File "', " at ", "\tat ", ".go:", "0x") if _FRAME.match(doc.lines[i])}
    count("stack frame", frames)
    progress = {i for i in doc.lines_with("%", "[", "Compiling", "Downloading", "Downloaded", "Building", "Installing",
                                          "Fetching", "Resolving", "Linking", "Checking", "Collecting", "Processing",
                                          "Preparing", "Unpacking", "Setting up", "Get:", "Updating", "Finished",
                                          "Scanning", "Generating", "Copying", "Creating", "Writing", "Pulling",
                                          "Extracting", "Verifying", "CC ", "CXX ", "LD ", "AR ", "GEN ")
                if _PROGRESS.search(doc.lines[i])}
    count("progress", progress)
    if a.log is not None:
        for level in ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"):
            pass  # severities are given on their own line
    rest = doc.n - len(taken)
    if rest:
        out.append(("other", rest))
    return out


def _headings(doc: Doc) -> list[int]:
    cands = doc.lines_with("===", "___", "---", "# ", "***", "##[group]", "::group::", "Step ", "#", "> Task ",
                           "[INFO] ", "ailures", "FAILURES", "short test summary", "Running ", "Test Suite '",
                           "FAIL ", "PASS ")
    return [i + 1 for i in cands if len(doc.lines[i]) <= 200 and _HEADING.match(doc.lines[i].rstrip())]


def _overview(a: Analysis, budget: int, hint: str | None) -> Summary:
    doc = a.doc
    head = [_head("overview", doc, with_end_line=True)]
    if _ending(doc):
        head.append(f"last line {_last_line(doc)}")
    what = {"build": "read as: " + ", ".join(a.reading.readers), "log": "read as a log", "json": "read as JSON",
            "other": "no reader knew this output's format"}[a.mode]
    kinds = _kinds(a)
    body_fixed = [what, "kinds of line: " + ", ".join(f"{n:,} {k}" for k, n in kinds)]
    if a.log is not None:
        body_fixed.append(severity_line(a.log))
    # JSON's overview is its shape (wisp-memory-tool.txt: "for JSON, its shape"): a document's
    # headings and first lines say little of it, its keys and their types say what it holds
    shape = [f"L{ln} {text.strip()}" for ln, text in a.json.shape] if a.json is not None else []
    heads = _headings(doc)
    nonblank = [i for i in range(min(doc.n, 2000)) if doc.lines[i].strip()]
    tail_lines = []
    for i in range(doc.n - 1, max(-1, doc.n - 2000), -1):
        if doc.lines[i].strip():
            tail_lines.append(i)
            if len(tail_lines) >= 3:
                break
    tail_lines.reverse()
    tail = [_unexplained_line(a, hint)]
    n_heads, k, n_shape = min(len(heads), 12), 3, len(shape)

    def render() -> list[str]:
        out: list[str] = []
        if shape:
            out.append("its shape:")
            out.extend(shape[:n_shape])
            if len(shape) > n_shape:
                out.append(f"+{len(shape) - n_shape} more keys")
        if heads:
            out.append(f"{_plural(len(heads), 'line')} that look like headings:")
            out.extend(f"L{ln} {_raw(doc, ln, 120)}" for ln in heads[:n_heads])
            if len(heads) > n_heads:
                out.append(f"+{len(heads) - n_heads} more, the next at L{heads[n_heads]}")
        else:
            out.append("no line looks like a heading")
        first = nonblank[:k]
        out.append("first lines:")
        out.extend(f"L{i + 1} {_raw(doc, i + 1)}" for i in first)
        last = [i for i in tail_lines[-k:] if i not in first]
        if last:
            out.append("last lines:")
            out.extend(f"L{i + 1} {_raw(doc, i + 1)}" for i in last)
        return out

    body = render()
    while not _fits(head + body_fixed + body + tail, budget) and (n_heads > 1 or k > 1 or n_shape > 1):
        if n_shape > 8:
            n_shape = max(8, n_shape // 2)
        elif n_heads > 3:
            n_heads = max(3, n_heads // 2)
        elif k > 1:
            k -= 1
        elif n_heads > 1:
            n_heads -= 1
        else:
            n_shape -= 1
        body = render()
    lines = _hard_fit(head + body_fixed + body + tail, budget)
    return Summary("\n".join(lines), "overview", a.mode, list(a.reading.readers), _first_cited(lines),
                   len(a.unexplained))

