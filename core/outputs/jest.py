"""Jest and Vitest: the test run and the notable lines.

- Jest's run: the ``Tests:`` and ``Test Suites:`` summaries; failing names
  from the ``● Suite › test`` failure headers (a suite that failed to run is
  named by its file: ``./broken.test.js (failed to run)``, from the ``FAIL
  file`` line above it); the repeat under ``Summary of all failing tests``
  is not counted twice. todo and pending tests count as skipped.
- Vitest's run: the ``Tests``/``Test Files`` summaries and ``FAIL file >
  suite > test`` lines.
- Notable lines: each failure with the message under it; ``● Test suite
  failed to run`` is a root cause; ``Tests: 1 failed, 2 passed`` and the
  like kept.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, RANK_TEST, Doc, Finding, Reading, lines_after, shorten
from .testrun import Collector, TestRun, pairs

__all__ = ["JestRun", "VitestRun", "read_jest"]

_BULLET = re.compile(r"^\s*● (?P<title>.+?)\s*$")
_FILE = re.compile(r"^\s*(?P<res>FAIL|PASS)\s+(?P<path>\S+)(?:\s+\(.*\))?\s*$")
_TALLY = re.compile(r"^\s*(?:Tests|Test Suites|Test Files|Snapshots):\s+(?P<counts>.*\d.*)$")
_JEST_TESTS = re.compile(r"^Tests:\s+(.*\d+ total)\s*$")
_JEST_SUITES = re.compile(r"^Test Suites:\s+(.*\d+ total)\s*$")
_VITEST_TESTS = re.compile(r"^\s*Tests\s+(.+?)\s*\((\d+)\)\s*$")
_VITEST_FILES = re.compile(r"^\s*Test Files\s+(.+?)\s*\((\d+)\)\s*$")
_VITEST_FAIL = re.compile(r"^\s*FAIL\s+(?P<path>\S+)\s+>\s+(?P<title>.+?)\s*$")
_VITEST_X = re.compile(r"^\s*[×✕✗]\s+(?P<title>.+?)(?:\s+\d+\s*ms)?\s*$")
#: Bullets that are not failures.
_NOT_FAILURES = ("Validation", "Deprecation", "Console")
_SUITE_FAILED = "Test suite failed to run"


class JestRun(Collector):
    """Jest's run (see the module doc)."""

    framework = "jest"
    prefilter = r"Tests:|Test Suites:|\s*(?:PASS|FAIL)\s|\s*● "
    needles = ("test", "pass", "fail", "●")

    def __init__(self) -> None:
        super().__init__()
        self.suites: dict[str, int] = {}
        self.current_file: str | None = None
        self.suites_not_run = 0

    def line(self, line: str, number: int) -> None:
        if m := _JEST_TESTS.match(line):
            self.counts = pairs(m.group(1))
            self.summary_at(number)
        elif m := _JEST_SUITES.match(line):
            self.suites = pairs(m.group(1))
            self.summary_at(number)
        elif m := _FILE.match(line):
            self.current_file = m.group("path")
            self.evidence += 1
        elif m := _BULLET.match(line):
            name = m.group("title")
            if name.startswith(_NOT_FAILURES):
                return
            if name == _SUITE_FAILED:
                name = f"{self.current_file or 'a test suite'} (failed to run)"
                if name not in self.names.seen:
                    self.suites_not_run += 1
            self.names.add(name, number)
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None and not self.suites:
            return None
        c = self.counts or {}
        failed, passed = c.get("failed", 0), c.get("passed", 0)
        skipped = c.get("skipped", 0) + c.get("todo", 0) + c.get("pending", 0)
        suites_failed = self.suites.get("failed", 0)
        errors = self.suites_not_run or (suites_failed if suites_failed and not failed else 0)
        note = f"{errors} test suites failed to run" if errors else None
        return self.run(failed_any=bool(failed or suites_failed), passed=passed, failed=failed, skipped=skipped,
                        errors=errors, total=c.get("total", passed + failed + skipped), note=note)


class VitestRun(Collector):
    """Vitest's run (see the module doc)."""

    framework = "vitest"
    prefilter = r"\s*(?:Tests|Test Files)\s|\s*FAIL\s"
    needles = ("test", "fail")

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, int] = {}

    def line(self, line: str, number: int) -> None:
        if m := _VITEST_TESTS.match(line):
            self.counts = pairs(m.group(1))
            self.counts["total"] = int(m.group(2))
            self.summary_at(number)
        elif m := _VITEST_FILES.match(line):
            self.files = pairs(m.group(1))
            self.evidence += 1
        elif m := _VITEST_FAIL.match(line):
            self.names.add(f"{m.group('path')} > {m.group('title')}", number)
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        c = self.counts
        failed, passed = c.get("failed", 0), c.get("passed", 0)
        skipped = c.get("skipped", 0) + c.get("todo", 0)
        return self.run(failed_any=bool(failed or self.files.get("failed")), passed=passed, failed=failed,
                        skipped=skipped, total=c.get("total"))


def read_jest(doc: Doc, r: Reading) -> None:
    """Jest's and Vitest's failures (see the module doc)."""
    bullets = [i for i in doc.lines_with("● ") if _BULLET.match(doc.lines[i])]
    files = [i for i in doc.lines_with("FAIL ", "PASS ") if _FILE.match(doc.lines[i])]
    vitest = [i for i in doc.lines_with("FAIL ") if _VITEST_FAIL.match(doc.lines[i])]
    tallies = [i for i in doc.lines_with("Tests:", "Test Suites:", "Tests ", "Test Files ")
               if _TALLY.match(doc.lines[i]) or re.match(r"^\s*(?:Tests|Test Files)\s+\d+ (?:failed|passed)", doc.lines[i])]
    if not (bullets or files or vitest or tallies):
        return
    r.saw("jest")
    current_file = None
    file_at = {i: _FILE.match(doc.lines[i]) for i in files}
    summary_start = next((i for i in doc.lines_with("Summary of all failing tests")), None)
    seen_titles: set[str] = set()
    stop = re.compile(r"^\s*● |^\s*(?:FAIL|PASS)\s+\S|^\s*(?:Tests|Test Suites):")
    events = sorted([(i, "file") for i in files] + [(i, "bullet") for i in bullets] + [(i, "vitest") for i in vitest])
    for i, kind in events:
        if kind == "file":
            m = file_at[i]
            assert m is not None
            r.claim(i + 1)
            if m.group("res") == "FAIL":
                current_file = m.group("path")
            continue
        if i + 1 in r.claimed:
            continue
        if kind == "vitest":
            m = _VITEST_FAIL.match(doc.lines[i])
            assert m is not None
            title = f"{m.group('path')} > {m.group('title')}"
        else:
            title = _BULLET.match(doc.lines[i]).group("title")  # type: ignore[union-attr]
            if title.startswith("Console"):
                r.claim(i + 1)
                continue
        ctx = lines_after(doc, i, 3, 10, stop=stop)
        # the whole block to the next bullet is the failure's
        j = i + 1
        while j < doc.n and j - i < 300 and not stop.match(doc.lines[j]):
            r.claim(j + 1)
            j += 1
        if title in seen_titles or (summary_start is not None and i > summary_start and title in seen_titles):
            r.claim(i + 1)
            continue
        seen_titles.add(title)
        first = doc.lines[ctx[0] - 1].strip() if ctx else ""
        if title == _SUITE_FAILED:
            place = current_file or "test suite"
            r.add(Finding(i + 1, "error", place, f"test suite {place} failed to run: {shorten(first, 200)}",
                          RANK_ROOT, ctx, reader="jest"))
            continue
        r.add(Finding(i + 1, "failure", title, f"failed {title}" + (f": {shorten(first, 200)}" if first else ""),
                      RANK_TEST, ctx, reader="jest"))
    for i in doc.lines_with("×", "✕", "✗"):
        m = _VITEST_X.match(doc.lines[i])
        if m and i + 1 not in r.claimed:
            r.claim(i + 1)
    for i in tallies:
        r.tally(i + 1, "jest: " + " ".join(doc.lines[i].split()))
    if summary_start is not None:
        r.claim(summary_start + 1)
