"""swift build and swift test (XCTest and Swift Testing): the test run and the notable lines.

- The test run: XCTest (``Test Case '...' passed|failed|skipped``, the last
  ``Executed N tests, with [K tests skipped and] M failures``) and Swift
  Testing (``✘ Test x() failed after …``, ``✘ Test run with N tests
  failed after …``); both kinds in one run are added together. XCTest
  names a test ``Class.testX`` on Linux and ``-[Module.Class testX]`` on
  macOS, read as ``Module.Class.testX``. swift build's closing lines
  (``error: fatalError``, ``error: emit-module command failed``) with no
  summary: the build failed.
- Notable lines: swift build's compiler errors are GCC's form (read by
  :mod:`.cfamily`); what this adds: XCTest's ``/path/FooTests.swift:12:
  error: -[Pkg.FooTests testBar] : XCTAssertEqual failed: …`` (placed at the
  test, not the file) and Swift Testing's ``✘ Test bar() recorded an issue
  at Foo.swift:12:5: …``; ``Executed …`` and ``Test run with …`` kept; and
  swift build's closing lines (``N of M targets failed``), which followed
  from the errors.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_TEST, Doc, Finding, Reading, shorten
from .testrun import Collector, TestRun

__all__ = ["SwiftRun", "read_swift"]

_XCT = re.compile(r"^(?P<path>\S.*?\.swift):(?P<line>\d+): error: (?P<test>-\[[\w.]+ \w+\]|[\w.]+\.\w+|[\w.]+) : "
                  r"(?P<msg>.*)$")
_CASE = re.compile(r"^Test Case '(?P<test>[^']+)' (?P<res>failed|passed|started|skipped)\b")
_EXECUTED = re.compile(r"^\s*Executed (?P<n>\d+) tests?, with (?:(?P<skipped>\d+) tests? skipped and )?"
                       r"(?P<failures>\d+) failures? \(\d+ unexpected\)")
_SUITE = re.compile(r"^Test Suite '[^']+' (?:failed|passed|started) ")
_ST_ISSUE = re.compile(r"^\S{1,3}\s+Test (?P<test>\S.*?) recorded an issue(?: with \d+ arguments? [^@]*?)? at "
                       r"(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")
_ST_TEST = re.compile(r"^.{0,4}Test (?P<test>\S.*?) (?P<res>passed|failed) after [\d.]+ seconds?")
_ST_SKIPPED = re.compile(r"^.{0,4}Test (.+?) skipped(?:[.:]|$)")
_ST_SUITE = re.compile(r"^\S{1,3}\s+Suite \S+ (?:failed|passed|started)")
_ST_RUN = re.compile(r"^.{0,4}Test run with (?P<n>\d+) tests?(?: in \d+ suites?)? (?P<res>passed|failed) after")
_AFTER = re.compile(r"^error: (?:fatalError|emit-module command failed|\d+ of \d+ targets? failed|"
                    r"build had \d+ command failures?|compile command failed|link command failed|"
                    r"terminated\(\d+\))")


def _xct_name(test: str) -> str:
    """``-[Module.Class testX]`` (macOS) → ``Module.Class.testX``; Linux's ``Class.testX`` as it is."""
    m = re.match(r"^-\[([\w.]+) (\w+)\]$", test)
    return f"{m.group(1)}.{m.group(2)}" if m else test


class SwiftRun(Collector):
    """swift test's run (see the module doc)."""

    framework = "swift"
    prefilter = r"Test Case '|\s*Executed \d|.{0,4}Test |error: "
    needles = ("test", "error")

    def __init__(self) -> None:
        super().__init__()
        self.xc: tuple[int, int, int] | None = None  # executed, skipped, failures
        self.st_total: int | None = None
        self.st_failed = 0
        self.st_skipped = 0
        self.st_outcome: str | None = None
        self.build_failed = False

    def line(self, line: str, number: int) -> None:
        if m := _CASE.match(line):
            if m.group("res") == "failed":
                self.names.add(_xct_name(m.group("test")), number)
            self.evidence += 1
        elif m := _EXECUTED.match(line):
            self.xc = (int(m.group("n")), int(m.group("skipped") or 0), int(m.group("failures")))
            self.summary_at(number)
        elif m := _ST_RUN.match(line):
            self.st_total, self.st_outcome = int(m.group("n")), m.group("res")
            self.summary_at(number)
        elif m := _ST_TEST.match(line):
            if m.group("res") == "failed":
                self.names.add(m.group("test"), number)
                self.st_failed += 1
            self.evidence += 1
        elif _ST_SKIPPED.match(line):
            self.st_skipped += 1
            self.evidence += 1
        elif _AFTER.match(line):
            self.build_failed = True
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.xc is None and self.st_total is None:
            if self.build_failed:
                return TestRun("swift", "failed", note="the build failed")
            return None
        total = failed = skipped = 0
        if self.xc is not None:
            total += self.xc[0]
            skipped += self.xc[1]
            failed += self.xc[2]
        if self.st_total is not None:
            total += self.st_total
            failed += self.st_failed
            skipped += self.st_skipped
            if self.st_outcome == "failed" and not self.st_failed:
                failed += 1
        passed = max(0, total - failed - skipped)
        return self.run(failed_any=bool(failed or self.names.names), passed=passed, failed=failed, skipped=skipped,
                        total=total)


def read_swift(doc: Doc, r: Reading) -> None:
    """XCTest, Swift Testing and swift build's closing lines (see the module doc)."""
    lines = doc.lines_with(".swift:", "Test Case '", "Executed ", "Test run with", "recorded an issue",
                           "error: ", "failed after", "passed after", " Suite ")
    saw = False
    for i in lines:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _XCT.match(line)
        if m:
            saw = True
            test = _xct_name(m.group("test"))
            at = f"{m.group('path')}:{m.group('line')}"
            r.add(Finding(i + 1, "failure", test, f"failed {test} ({at}): {shorten(m.group('msg'), 200)}", RANK_TEST,
                          reader="xctest"))
            continue
        m = _CASE.match(line)
        if m:
            saw = True
            r.claim(i + 1)
            continue
        m = _EXECUTED.match(line)
        if m:
            saw = True
            r.tally(i + 1, "xctest: " + line.strip())
            continue
        m = _ST_ISSUE.match(line)
        if m:
            saw = True
            test = m.group("test")
            at = f"{m.group('path')}:{m.group('line')}:{m.group('col')}"
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].startswith((" ", "\t"))
                        and doc.lines[j].strip())
            r.add(Finding(i + 1, "failure", test, f"failed {test} ({at}): {shorten(m.group('msg'), 200)}", RANK_TEST,
                          ctx, reader="swift testing"))
            continue
        if _ST_SUITE.match(line):
            saw = True
            r.claim(i + 1)
            continue
        if _ST_RUN.match(line):
            saw = True
            r.tally(i + 1, "swift testing: " + line.split(" ", 1)[1].strip())
            continue
        m = _ST_TEST.match(line)
        if m and m.group("res") == "failed":
            saw = True
            r.claim(i + 1)
            continue
        if _AFTER.match(line):
            saw = True
            r.add(Finding(i + 1, "error", "swift build", shorten(line, 200), RANK_AFTER, reader="swift build"))
    for i in doc.lines_with("Test Suite '"):
        if _SUITE.match(doc.lines[i]):
            r.claim(i + 1)
    if saw:
        r.saw("swift")

