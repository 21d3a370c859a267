"""pytest: its test run and its report.

- The test run: the summary line (``4 failed, 2 passed, 1 skipped in
  1.51s``, with or without the ``===`` rule; ``no tests ran``); failing
  names from the short test summary (``FAILED path::test - why``, ``ERROR
  path``, ``XPASS(strict) path::test``), ``-v`` result lines and
  pytest-xdist's ``[gw0] [ 50%] FAILED path::test``. xpassed tests count as
  passed and xfailed ones as skipped. A failing test is cited at its
  section in ``FAILURES``/``ERRORS`` (``____ test_add ____``) when it has
  one, else at the line that names it.
- Notable lines: the ``FAILURES`` and ``ERRORS`` sections (one per test),
  the first ``E`` line of each as the point; collection errors as root
  causes; ``--tb=line`` and ``--tb=no`` outputs through the short test
  summary; the warnings summary tallied; the final ``== 2 failed, 48
  passed in 3.2s ==`` line kept.
"""

from __future__ import annotations

import re
from typing import Iterable

from .doc import RANK_ROOT, RANK_TEST, Doc, Finding, Reading
from .python import EXCEPTION, clip
from .testrun import MAX_TRACKED, Collector, TestRun, pairs

__all__ = ["PytestRun", "read_pytest"]

_HEADING = re.compile(r"^={2,} ?(.*?) ?={2,}$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_E_LINE = re.compile(r"^E\s{1,}(\S.*)$")
_LOCATION = re.compile(r"^(\S+\.py):(\d+): (\w[\w.]*)$")
_TB_LINE = re.compile(r"^(\S+\.py):(\d+): (.+)$")
_SUMMARY_ITEM = re.compile(r"^(FAILED|ERROR|XPASS\(strict\)) (\S.*?)(?: - (.*))?$")
_FINAL = re.compile(r"^=*\s*((?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|errors?|warnings?|rerun)"
                    r"(?:, )?)+) in \d+(?:\.\d+)?s\b")
_NONE = re.compile(r"^=*\s*no tests ran in \d")
_VERBOSE = re.compile(r"^(\S+::\S.*?) (FAILED|ERROR|PASSED|SKIPPED|XFAIL|XPASS)\b")
_XDIST = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (FAILED|ERROR) (\S+)")
_WARN_ITEM = re.compile(r"^\s+(\S+\.py):(\d+): (\w*Warning): (.*)$")


def _title(raw: str) -> str:
    """A section's test: ``ERROR at setup of test_x`` → ``test_x``."""
    title = raw.strip()
    if title.lower().startswith(("error at setup of ", "error at teardown of ")):
        return title.split(" of ", 1)[1].strip()
    return title


def _is_node(node: str) -> bool:
    """Whether a short-summary item names a test or a test file (not a logging line)."""
    return "::" in node or node.endswith(".py")


def _section_of(node: str, titles: Iterable[str]) -> str | None:
    """The section title of node id ``node``: its last part(s) (``Class.test``,
    ``test[param]``), or for a file the ``ERROR collecting`` section ending with it."""
    parts = node.split("::")
    candidates = {parts[-1], ".".join(parts[1:]) if len(parts) > 1 else parts[-1]}
    titles = list(titles)
    matched = next((t for t in titles if t in candidates), None)
    if node.endswith(".py") or "::" not in node:
        matched = matched or next((t for t in titles if t.endswith(node) or node.endswith(t)), None)
    return matched


class PytestRun(Collector):
    """pytest's run (see the module doc)."""

    framework = "pytest"
    needles = ("fail", "error", "warn", "test", "pass", "skip", "deselected", "___")
    prefilter = (r"=|_{3,} |FAILED |ERROR |XPASS|\S+::|\[gw\d+\]|\d+ (?:passed|failed|errors?|skipped|xfailed|"
                 r"xpassed|deselected|warnings?|rerun)\b|no tests ran")

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, int] = {}  # a FAILURES/ERRORS section's title -> its line
        self.in_sections = False

    def line(self, line: str, number: int) -> None:
        if m := _FINAL.match(line):
            self.counts = pairs(m.group(1))
            self.summary_at(number)
        elif _NONE.match(line):
            self.counts = {}
            self.summary_at(number)
        elif m := _HEADING.match(line):
            title = m.group(1).strip().lower()
            self.in_sections = title in ("failures", "errors")
            if title.startswith("test session starts"):
                self.evidence += 1
        elif self.in_sections and (m := _SECTION.match(line)):
            if len(self.sections) < MAX_TRACKED:
                self.sections.setdefault(_title(m.group(1)), number)
        elif m := _SUMMARY_ITEM.match(line):
            if _is_node(m.group(2)):
                self.names.add(m.group(2), number)
                self.evidence += 1
        elif m := _XDIST.match(line):
            self.names.add(m.group(2), number)
            self.evidence += 1
        elif m := _VERBOSE.match(line):
            if m.group(2) in ("FAILED", "ERROR"):
                self.names.add(m.group(1), number)
            self.evidence += 1

    def line_of(self, name: str) -> int:
        section = _section_of(name, self.sections)
        return self.sections[section] if section is not None else super().line_of(name)

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        c = self.counts
        failed, errors = c.get("failed", 0), c.get("error", 0)
        passed = c.get("passed", 0) + c.get("xpassed", 0)
        skipped = c.get("skipped", 0) + c.get("xfailed", 0)
        total = failed + errors + passed + skipped
        return self.run(passed=passed, failed=failed, skipped=skipped, errors=errors, total=total)


def read_pytest(doc: Doc, r: Reading) -> None:
    """pytest's report (see the module doc)."""
    heads = [i for i in doc.lines_with("=" * 3) if _HEADING.match(doc.lines[i])]
    summary_items = [i for i in doc.lines_with("FAILED ", "ERROR ", "XPASS")
                     if (m := _SUMMARY_ITEM.match(doc.lines[i])) and _is_node(m.group(2))]
    if not heads and not summary_items:
        return
    titles = {i: _HEADING.match(doc.lines[i]).group(1).strip().lower() for i in heads}  # type: ignore[union-attr]
    if not any(t in ("failures", "errors", "short test summary info", "warnings summary")
               or t.startswith("test session starts") or _FINAL.match(doc.lines[i])
               for i, t in titles.items()) and not summary_items:
        return
    r.saw("pytest")
    sections: dict[str, int] = {}  # test title -> finding line
    for k, i in enumerate(heads):
        title = titles[i]
        end = heads[k + 1] if k + 1 < len(heads) else doc.n
        r.claim(i + 1)
        if title in ("failures", "errors"):
            _pytest_sections(doc, r, i + 1, end, sections, errors=title == "errors")
        elif title == "warnings summary":
            _pytest_warnings(doc, r, i + 1, end)
        elif title == "short test summary info":
            for j in range(i + 1, end):
                m = _SUMMARY_ITEM.match(doc.lines[j])
                if m:
                    _summary_item(doc, r, j, m, sections)
        m = _FINAL.match(doc.lines[i])
        if m:
            r.tally(i + 1, "pytest: " + m.group(1).strip())
    for j in doc.lines_with(" FAILED", " ERROR", " PASSED", " SKIPPED", " XFAIL", " XPASS"):
        if _VERBOSE.match(doc.lines[j]):
            r.claim(j + 1)
    # -q / -rN outputs: summary items with no heading above them
    for j in summary_items:
        if j + 1 not in r.claimed:
            m = _SUMMARY_ITEM.match(doc.lines[j])
            if m:
                _summary_item(doc, r, j, m, sections)
    for j in doc.lines_with(" in "):
        m = _FINAL.match(doc.lines[j])
        if m and j + 1 not in r.claimed and re.match(r"^=*\s*\d", doc.lines[j]):
            r.tally(j + 1, "pytest: " + m.group(1).strip())


def _pytest_sections(doc: Doc, r: Reading, start: int, end: int, sections: dict[str, int], *,
                     errors: bool) -> None:
    """The per-test sections between ``start`` and ``end`` (0-based, end excluded)."""
    heads = [j for j in range(start, end) if _SECTION.match(doc.lines[j])]
    if not heads:  # --tb=line: "path.py:42: message" lines
        for j in range(start, end):
            m = _TB_LINE.match(doc.lines[j])
            if m:
                r.add(Finding(j + 1, "failure", m.group(1), f"failed at {m.group(1)}:{m.group(2)}: {clip(m.group(3))}",
                              RANK_TEST, reader="pytest"))
        return
    for k, h in enumerate(heads):
        stop = heads[k + 1] if k + 1 < len(heads) else end
        raw = _SECTION.match(doc.lines[h]).group(1).strip()  # type: ignore[union-attr]
        title = _title(raw)
        r.claim_range(h + 1, stop)
        e_lines = [j for j in range(h + 1, stop) if _E_LINE.match(doc.lines[j])]
        location = None
        for j in range(h + 1, stop):
            m = _LOCATION.match(doc.lines[j])
            if m:
                location = (j, f"{m.group(1)}:{m.group(2)}")
        collecting = title.lower().startswith("error collecting")
        setup = title != raw
        stage = ""
        if setup:
            stage = "setup" if raw.lower().startswith("error at setup") else "teardown"
        place = title
        if collecting:
            place = title[len("ERROR collecting "):].strip() or title
        rank = RANK_ROOT if collecting else RANK_TEST
        kind = "error" if (collecting or setup or errors) else "failure"
        if e_lines:
            first = e_lines[0]
            message = _E_LINE.match(doc.lines[first]).group(1)  # type: ignore[union-attr]
            context = [j + 1 for j in (first + 1, first + 2) if j < stop and _E_LINE.match(doc.lines[j])]
            if location and location[0] not in e_lines[:3]:
                context.append(location[0] + 1)
        else:
            exc = [j for j in range(h + 1, stop) if EXCEPTION.match(doc.lines[j])]
            first = exc[-1] if exc else h
            message = doc.lines[first].strip()
            context = []
        where = f" ({location[1]})" if location else ""
        verb = "error collecting" if collecting else (f"error at {stage} of" if stage else
                                                      "error in" if kind == "error" else "failed")
        name = place if collecting else title
        text = f"{verb} {name}{where}: {clip(message)}"
        r.add(Finding(first + 1, kind, place, text, rank, tuple(sorted(set(context))), reader="pytest"))
        sections[title] = first + 1


def _summary_item(doc: Doc, r: Reading, j: int, m: re.Match[str], sections: dict[str, int]) -> None:
    kind_word, node, message = m.group(1), m.group(2), (m.group(3) or "").strip()
    r.claim(j + 1)
    matched = _section_of(node, sections)
    if matched is not None:
        # name the section's finding by the full node id
        for f in r.findings:
            if f.line == sections[matched] and f.place == matched:
                f.place = node
        return
    if kind_word == "ERROR" and "::" not in node:
        r.add(Finding(j + 1, "error", node, f"error collecting {node}: {clip(message)}", RANK_ROOT,
                      reader="pytest"))
        return
    r.add(Finding(j + 1, "failure" if kind_word != "ERROR" else "error", node,
                  f"{'failed' if kind_word != 'ERROR' else 'error in'} {node}" + (f": {clip(message)}" if message else ""),
                  RANK_TEST, reader="pytest"))


def _pytest_warnings(doc: Doc, r: Reading, start: int, end: int) -> None:
    for j in range(start, end):
        m = _WARN_ITEM.match(doc.lines[j])
        r.claim(j + 1)
        if m:
            r.add(Finding(j + 1, "warning", m.group(1), f"{m.group(3)} at {m.group(1)}:{m.group(2)}: "
                          f"{clip(m.group(4))}", reader="pytest"))


