"""Reader for swift build and swift test (XCTest and Swift Testing).

swift build's compiler errors are GCC's form (read by :mod:`.cfamily`);
what this adds: XCTest's ``/path/FooTests.swift:12: error: -[Pkg.FooTests
testBar] : XCTAssertEqual failed: …`` (placed at the test, not the file),
``Test Case '…' failed`` and ``Executed 3 tests, with 1 failure``; Swift
Testing's ``✘ Test bar() recorded an issue at Foo.swift:12:5: …`` and
``✘ Test run with 3 tests failed``; and swift build's closing lines
(``error: fatalError``, ``error: emit-module command failed``, ``N of M
targets failed``), which followed from the errors.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_TEST, Doc, Finding, Reading, shorten

_XCT = re.compile(r"^(?P<path>\S.*?\.swift):(?P<line>\d+): error: (?P<test>-\[[\w.]+ \w+\]|[\w.]+\.\w+|[\w.]+) : "
                  r"(?P<msg>.*)$")
_CASE = re.compile(r"^Test Case '(?P<test>[^']+)' (?P<res>failed|passed|started|skipped)")
_EXECUTED = re.compile(r"^\s*Executed (?P<n>\d+) tests?, with (?P<f>\d+) failures? .*$")
_SUITE = re.compile(r"^Test Suite '[^']+' (?:failed|passed|started) ")
_ST_ISSUE = re.compile(r"^\S{1,3}\s+Test (?P<test>\S.*?) recorded an issue(?: with \d+ arguments? [^@]*?)? at "
                       r"(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")
_ST_FAILED = re.compile(r"^\S{1,3}\s+Test (?P<test>\S.*?) failed after [\d.]+ seconds?")
_ST_SUITE = re.compile(r"^\S{1,3}\s+Suite \S+ (?:failed|passed|started)")
_ST_RUN = re.compile(r"^\S{1,3}\s+Test run with \d+ tests? (?:in \d+ suites? )?(?:failed|passed) .*$")
_AFTER = re.compile(r"^error: (?:fatalError|emit-module command failed|\d+ of \d+ targets? failed|"
                    r"build had \d+ command failures?|compile command failed|link command failed|"
                    r"terminated\(\d+\))")


def _xct_name(test: str) -> str:
    m = re.match(r"^-\[([\w.]+) (\w+)\]$", test)
    return f"{m.group(1)}.{m.group(2)}" if m else test


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
            r.fail_test(test, i + 1)
            continue
        m = _CASE.match(line)
        if m:
            saw = True
            r.claim(i + 1)
            if m.group("res") == "failed":
                r.fail_test(_xct_name(m.group("test")), i + 1)
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
            r.fail_test(test, i + 1)
            continue
        if _ST_SUITE.match(line):
            saw = True
            r.claim(i + 1)
            continue
        m = _ST_FAILED.match(line)
        if m and not m.group("test").startswith("run with"):
            saw = True
            r.claim(i + 1)
            r.fail_test(m.group("test"), i + 1)
            continue
        if _ST_RUN.match(line):
            saw = True
            r.tally(i + 1, "swift testing: " + line.split(" ", 1)[1].strip())
            continue
        if _AFTER.match(line):
            saw = True
            r.add(Finding(i + 1, "error", "swift build", shorten(line, 200), RANK_AFTER, reader="swift build"))
    for i in doc.lines_with("Test Suite '"):
        if _SUITE.match(doc.lines[i]):
            r.claim(i + 1)
    if saw:
        r.saw("swift")


__all__ = ["read_swift"]
