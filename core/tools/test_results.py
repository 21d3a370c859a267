"""Test runs read from a command's output: passed or failed, counts, failing names.

Pure text in, :class:`TestRun` out; nothing is run here. ``run_command``
feeds every line of a command's output through a :class:`TestOutputParser`
while the command runs (so a summary or a failing name in the part of the
output that the cap drops still counts), and puts the result in its tool
result's ``meta["tests"]``; the ``tests`` fact is made from it (issue "Tools
that act", "Facts from tools").

Frameworks and what is read from each (``framework`` names):

- ``pytest``: the summary line (``4 failed, 2 passed, 1 skipped in 1.51s``,
  with or without the ``===`` rule; ``no tests ran``), the short test summary
  (``FAILED path::test - why``, ``ERROR path``), ``-v`` result lines and
  pytest-xdist's ``[gw0] [ 50%] FAILED path::test``.
- ``go``: ``--- FAIL:/PASS:/SKIP: Name (0.00s)`` (subtests too; a parent
  whose subtest failed is not counted again), the package lines (``ok``,
  ``FAIL pkg 0.01s``, ``FAIL pkg [build failed]``, ``? pkg [no test files]``)
  and ``go test -json`` events.
- ``cargo``: ``test name ... ok|FAILED|ignored`` and every ``test result:``
  line, summed over the test binaries and doc-tests; ``error: could not
  compile`` (the build failed); cargo-nextest's result lines and ``Summary``.
- ``jest``: ``Tests:`` and ``Test Suites:`` summaries, ``● Suite › test``
  failure headers, ``FAIL file`` (a suite that failed to run is named by
  its file). ``vitest``'s ``Tests``/``Test Files`` summaries and
  ``FAIL file > suite > test`` are read too.
- ``swift``: XCTest (``Test Case '...' passed|failed|skipped``, the last
  ``Executed N tests, with M failures``) and swift-testing (``Test x()
  failed after``, ``Test run with N tests passed|failed``); both kinds in
  one run are added together.

When no framework printed a summary but the command is a known test command
(``pytest``, ``go test``, ``cargo test``, ``jest``, ``swift test`` …) and it
exited non-zero, the run is ``failed`` with a note (the build failed, or the
run crashed or was cut). Otherwise output that holds no test run gives
``None``. ANSI colour codes and carriage returns are ignored. Lines longer
than :data:`MAX_LINE_CHARS` are read only up to that length; at most
:data:`MAX_NAMES` failing names are kept (``more_failing`` counts the rest).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["TestRun", "TestOutputParser", "parse_test_output", "framework_for_command",
           "MAX_NAMES", "MAX_LINE_CHARS"]

#: Failing test names kept in a :class:`TestRun`; the rest are only counted.
MAX_NAMES = 50
#: Test results one run keeps by name (go test), so memory stays bounded.
MAX_TRACKED = 10000
#: Characters of one output line that the parser reads; test lines are short.
MAX_LINE_CHARS = 4096

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]")


@dataclass
class TestRun:
    """One test run's result.

    - ``framework``: ``pytest``, ``go``, ``cargo``, ``jest``, ``vitest`` or ``swift``;
    - ``outcome``: ``passed``, ``failed`` or ``no tests``;
    - ``passed``, ``failed``, ``skipped``, ``errors``, ``total``: test counts,
      ``None`` where the output does not say (``go test`` without ``-v``
      lists only failures);
    - ``failing``: failing test names in the framework's own form
      (``tests/test_x.py::test_a``, ``TestTable/negative``,
      ``tests::it_works``, ``Suite › test``, ``Module.Class/testX``), at
      most :data:`MAX_NAMES`; ``more_failing``: how many more there were;
    - ``note``: why the result is partial (``the build failed`` …), or None.
    """

    __test__ = False  # not a pytest test class

    framework: str
    outcome: str
    passed: int | None = None
    failed: int | None = None
    skipped: int | None = None
    errors: int | None = None
    total: int | None = None
    failing: list[str] = field(default_factory=list)
    more_failing: int = 0
    note: str | None = None

    @property
    def ok(self) -> bool:
        """True when the run passed (``no tests`` is not a pass)."""
        return self.outcome == "passed"

    def counts_text(self) -> str:
        """``4 failed, 2 passed, 1 skipped`` (only the counts known and non-zero;
        ``0 passed`` when nothing is known)."""
        parts = []
        for label, n in (("failed", self.failed), ("errors", self.errors), ("passed", self.passed),
                         ("skipped", self.skipped)):
            if n:
                parts.append(f"{n} {'error' if label == 'errors' and n == 1 else label}")
        if not parts and self.total is not None:
            parts.append(f"{self.total} tests")
        return ", ".join(parts)

    def summary(self) -> str:
        """One line, as the ``tests`` fact's value: ``failed (pytest): 1 failed,
        2 passed; failing: tests/test_x.py::test_a``."""
        text = f"{self.outcome} ({self.framework})"
        counts = self.counts_text()
        if counts:
            text += f": {counts}"
        if self.failing:
            names = ", ".join(self.failing[:10])
            more = len(self.failing) - 10 + self.more_failing
            text += f"; failing: {names}" + (f" and {more} more" if more > 0 else "")
        if self.note:
            text += f" ({self.note})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the one-line ``summary`` added."""
        return {**asdict(self), "summary": self.summary()}


# --- the command --------------------------------------------------------------

_COMMAND_HINTS: list[tuple[str, re.Pattern[str]]] = [
    ("pytest", re.compile(r"(?:^|[\s/;&|(])(?:py\.test|pytest)\b|-m\s+pytest\b")),
    ("go", re.compile(r"(?:^|[\s/;&|(])go\s+test\b")),
    ("cargo", re.compile(r"(?:^|[\s/;&|(])cargo\s+(?:\+\S+\s+)?(?:test|nextest)\b")),
    ("vitest", re.compile(r"(?:^|[\s/;&|(])vitest\b")),
    ("jest", re.compile(r"(?:^|[\s/;&|(])jest\b")),
    ("swift", re.compile(r"(?:^|[\s/;&|(])swift\s+test\b")),
]


def framework_for_command(command: str | None) -> str | None:
    """The framework a command line runs (``pytest -q`` → ``pytest``,
    ``go test ./...`` → ``go``), or None when it names none of them."""
    if not command:
        return None
    for name, rx in _COMMAND_HINTS:
        if rx.search(command):
            return name
    return None


# --- collectors, one per framework --------------------------------------------


def _pairs(text: str) -> dict[str, int]:
    """``'4 failed, 2 passed'`` → ``{'failed': 4, 'passed': 2}`` (plural ``errors`` → ``error``)."""
    out: dict[str, int] = {}
    for n, word in re.findall(r"(\d+) ([a-z]+)", text):
        key = word.rstrip("s") if word in ("errors", "warnings", "failures", "tests") else word
        out[key] = out.get(key, 0) + int(n)
    return out


class _Names:
    """Failing names in order, without repeats, at most MAX_NAMES kept."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.names: list[str] = []
        self.more = 0

    def add(self, name: str) -> None:
        name = name.strip()
        if not name or name in self.seen:
            return
        if len(self.names) >= MAX_NAMES:
            if len(self.seen) < 10 * MAX_NAMES:
                self.seen.add(name)
            self.more += 1
            return
        self.seen.add(name)
        self.names.append(name)


class _Collector:
    framework = ""
    prefilter = ""

    def __init__(self) -> None:
        self.evidence = 0
        self.summary_seen = False
        self.order = -1  # line number of the last summary, to pick the latest

    def line(self, line: str, number: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def result(self) -> TestRun | None:  # pragma: no cover - abstract
        raise NotImplementedError


class _Pytest(_Collector):
    framework = "pytest"
    prefilter = (r"=|FAILED |ERROR |\S+::|\[gw\d+\]|\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|"
                 r"deselected|warnings?|rerun)\b|no tests ran")
    _summary = re.compile(r"^=*\s*((?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|errors?|"
                          r"warnings?|rerun)(?:, )?)+) in \d+(?:\.\d+)?s\b")
    _none = re.compile(r"^=*\s*no tests ran in \d")
    _short = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - .*)?$")
    _verbose = re.compile(r"^(\S+::\S.*?) (FAILED|ERROR|PASSED|SKIPPED|XFAIL|XPASS)\b")
    _xdist = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (FAILED|ERROR) (\S+)")
    _session = re.compile(r"^=+ test session starts =+$")

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] | None = None
        self.names = _Names()

    def line(self, line: str, number: int) -> None:
        if m := self._summary.match(line):
            self.counts = _pairs(m.group(1))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif self._none.match(line):
            self.counts = {}
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif self._session.match(line):
            self.evidence += 1
        elif m := self._short.match(line):
            if "::" in m.group(2) or m.group(2).endswith(".py"):
                self.names.add(m.group(2))
                self.evidence += 1
        elif m := self._xdist.match(line):
            self.names.add(m.group(2))
            self.evidence += 1
        elif m := self._verbose.match(line):
            if m.group(2) in ("FAILED", "ERROR"):
                self.names.add(m.group(1))
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        c = self.counts
        failed, errors = c.get("failed", 0), c.get("error", 0)
        passed = c.get("passed", 0) + c.get("xpassed", 0)
        skipped = c.get("skipped", 0) + c.get("xfailed", 0)
        total = failed + errors + passed + skipped
        outcome = "failed" if failed or errors else ("passed" if passed else "no tests")
        return TestRun("pytest", outcome, passed=passed, failed=failed, skipped=skipped, errors=errors,
                       total=total, failing=self.names.names, more_failing=self.names.more)


class _Go(_Collector):
    framework = "go"
    prefilter = r"\s*--- (?:FAIL|PASS|SKIP):|=== RUN|ok\s|FAIL\b|\?\s|\{"
    _test = re.compile(r"^\s*--- (FAIL|PASS|SKIP): (\S+) \(")
    _ok = re.compile(r"^ok\s+(\S+)\s+(?:\d+(?:\.\d+)?s|\(cached\))")
    _fail = re.compile(r"^FAIL\s+(\S+)\s+(?:\d+(?:\.\d+)?s|\[(\w+) failed\])")
    _none = re.compile(r"^\?\s+(\S+)\s+\[no test files\]")
    _json = re.compile(r'^\{.*"Action":\s*"(?:pass|fail|skip|build-fail)"')

    def __init__(self) -> None:
        super().__init__()
        self.tests: dict[str, str] = {}  # name -> PASS/FAIL/SKIP (last seen)
        self.ok_packages: list[str] = []
        self.failed_packages: dict[str, str | None] = {}  # package -> "build"/"setup"/None
        self.verbose = False  # -v or -json: every test is listed, so passes can be counted

    def _test_result(self, name: str, status: str) -> None:
        if len(self.tests) < MAX_TRACKED or name in self.tests:
            self.tests[name] = status

    def line(self, line: str, number: int) -> None:
        if m := self._test.match(line):
            self._test_result(m.group(2), m.group(1))
            self.evidence += 1
            if m.group(1) != "FAIL":
                self.verbose = True
        elif line.startswith("=== RUN"):
            self.verbose = True
        elif m := self._ok.match(line):
            self.ok_packages.append(m.group(1))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._fail.match(line):
            self.failed_packages[m.group(1)] = m.group(2)
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif self._none.match(line):
            self.evidence += 1
        elif self._json.match(line):
            try:
                event = json.loads(line)
            except ValueError:
                return
            action, pkg, test = event.get("Action"), event.get("Package"), event.get("Test")
            self.evidence += 1
            self.verbose = True
            status = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}.get(action)
            if test and status:
                self._test_result(test, status)
            elif action == "build-fail":
                self.failed_packages[str(event.get("ImportPath") or pkg)] = "build"
                self.summary_seen, self.order = True, number
            elif pkg and status:
                self.summary_seen, self.order = True, number
                if status == "FAIL":
                    self.failed_packages.setdefault(pkg, None)
                elif status == "PASS":
                    self.ok_packages.append(pkg)

    def result(self) -> TestRun | None:
        if not self.summary_seen and not self.tests:
            return None
        parents: set[str] = set()
        for name in self.tests:
            parts = name.split("/")
            parents.update("/".join(parts[:i]) for i in range(1, len(parts)))
        failing = _Names()
        failed = passed = skipped = 0
        for name, status in self.tests.items():
            if name in parents:
                # a parent counts only when it failed by itself, with no failing subtest
                child_failed = any(k.startswith(name + "/") and v == "FAIL" for k, v in self.tests.items())
                if status == "FAIL" and not child_failed:
                    failing.add(name)
                    failed += 1
                continue
            if status == "FAIL":
                failing.add(name)
                failed += 1
            elif status == "PASS":
                passed += 1
            elif status == "SKIP":
                skipped += 1
        notes = []
        for pkg, why in self.failed_packages.items():
            if why:
                failing.add(f"{pkg} [{why} failed]")
                notes.append(f"{pkg}: {why} failed")
            elif failed == 0:
                failing.add(pkg)  # the package failed without a failing test (a panic in init, TestMain)
        if self.failed_packages or failed:
            outcome = "failed"
        elif passed or self.ok_packages:
            outcome = "passed"
        else:
            outcome = "no tests"
        verbose = self.verbose
        note = "; ".join(notes) if notes else None
        if not verbose and self.ok_packages and outcome == "passed":
            note = f"{len(self.ok_packages)} packages ok; go test -v lists each test"
        return TestRun("go", outcome, passed=passed if verbose else None,
                       failed=failed if (verbose or self.failed_packages or failed) else None,
                       skipped=skipped if verbose else None,
                       total=(passed + failed + skipped) if verbose else None,
                       failing=failing.names, more_failing=failing.more, note=note)


class _Cargo(_Collector):
    framework = "cargo"
    prefilter = r"test |error|\s*(?:PASS|FAIL|SKIP|SIGSEGV|SIGABRT|SIGBUS|TIMEOUT|LEAK) \[|\s*Summary \["
    _test = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")
    _result = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; "
                         r"(\d+) measured; (\d+) filtered out")
    _compile = re.compile(r"^error: could not compile")
    _next = re.compile(r"^\s*(PASS|FAIL|SKIP|SIGSEGV|SIGABRT|SIGBUS|TIMEOUT|LEAK) \[\s*[\d.]+s\] (.+?)\s*$")
    _next_summary = re.compile(r"^\s*Summary \[\s*[\d.]+s\] (\d+) tests? run: (.*)$")

    def __init__(self) -> None:
        super().__init__()
        self.sums = {"passed": 0, "failed": 0, "ignored": 0}
        self.results = 0
        self.names = _Names()
        self.build_failed = False
        self.next_counts: dict[str, int] | None = None
        self.next_names = _Names()

    def line(self, line: str, number: int) -> None:
        if m := self._result.match(line):
            self.results += 1
            self.sums["passed"] += int(m.group(2))
            self.sums["failed"] += int(m.group(3))
            self.sums["ignored"] += int(m.group(4))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._test.match(line):
            if m.group(2) == "FAILED":
                self.names.add(m.group(1))
            self.evidence += 1
        elif self._compile.match(line):
            self.build_failed = True
            self.evidence += 1
        elif m := self._next_summary.match(line):
            counts = _pairs(m.group(2))
            counts["run"] = int(m.group(1))
            self.next_counts = counts
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._next.match(line):
            if m.group(1) not in ("PASS", "SKIP"):
                self.next_names.add(m.group(2))
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.next_counts is not None:
            c = self.next_counts
            failed = c.get("failed", 0) + c.get("timed", 0)
            passed, skipped = c.get("passed", 0), c.get("skipped", 0)
            outcome = "failed" if failed or self.next_names.names else ("passed" if passed else "no tests")
            return TestRun("cargo", outcome, passed=passed, failed=max(failed, len(self.next_names.names)),
                           skipped=skipped, total=c.get("run", passed + failed) + skipped,
                           failing=self.next_names.names, more_failing=self.next_names.more)
        if self.results:
            s = self.sums
            failed = s["failed"]
            outcome = "failed" if failed or self.build_failed else ("passed" if s["passed"] else "no tests")
            return TestRun("cargo", outcome, passed=s["passed"], failed=failed, skipped=s["ignored"],
                           total=s["passed"] + failed + s["ignored"], failing=self.names.names,
                           more_failing=self.names.more,
                           note="a target did not build" if self.build_failed else None)
        if self.build_failed:
            return TestRun("cargo", "failed", note="the build failed")
        return None


class _Jest(_Collector):
    framework = "jest"
    prefilter = r"Tests:|Test Suites:|\s*(?:PASS|FAIL)\s|\s*● "
    _tests = re.compile(r"^Tests:\s+(.*\d+ total)\s*$")
    _suites = re.compile(r"^Test Suites:\s+(.*\d+ total)\s*$")
    _file = re.compile(r"^\s*(PASS|FAIL)\s+(\S+\.[cm]?[jt]sx?)(?:\s|$)")
    _bullet = re.compile(r"^\s*● (.+?)\s*$")

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] | None = None
        self.suites: dict[str, int] = {}
        self.names = _Names()
        self.current_file: str | None = None
        self.suites_not_run = 0

    def line(self, line: str, number: int) -> None:
        if m := self._tests.match(line):
            self.counts = _pairs(m.group(1))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._suites.match(line):
            self.suites = _pairs(m.group(1))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._file.match(line):
            self.current_file = m.group(2)
            self.evidence += 1
        elif m := self._bullet.match(line):
            name = m.group(1)
            if name.startswith(("Validation", "Deprecation", "Console")):
                return
            if name == "Test suite failed to run":
                name = f"{self.current_file or 'a test suite'} (failed to run)"
                self.suites_not_run += 1
            self.names.add(name)
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None and not self.suites:
            return None
        c = self.counts or {}
        failed, passed = c.get("failed", 0), c.get("passed", 0)
        skipped = c.get("skipped", 0) + c.get("todo", 0) + c.get("pending", 0)
        suites_failed = self.suites.get("failed", 0)
        outcome = "failed" if failed or suites_failed else ("passed" if passed else "no tests")
        errors = self.suites_not_run or (suites_failed if suites_failed and not failed else 0)
        note = f"{errors} test suites failed to run" if errors else None
        return TestRun("jest", outcome, passed=passed, failed=failed, skipped=skipped,
                       errors=errors, total=c.get("total", passed + failed + skipped),
                       failing=self.names.names, more_failing=self.names.more, note=note)


class _Vitest(_Collector):
    framework = "vitest"
    prefilter = r"\s*(?:Tests|Test Files)\s|\s*FAIL\s"
    _tests = re.compile(r"^\s*Tests\s+(.+?)\s*\((\d+)\)\s*$")
    _files = re.compile(r"^\s*Test Files\s+(.+?)\s*\((\d+)\)\s*$")
    _fail = re.compile(r"^\s*FAIL\s+(\S+\.[cm]?[jt]sx? > .+?)\s*$")

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] | None = None
        self.files: dict[str, int] = {}
        self.names = _Names()

    def line(self, line: str, number: int) -> None:
        if m := self._tests.match(line):
            self.counts = _pairs(m.group(1))
            self.counts["total"] = int(m.group(2))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._files.match(line):
            self.files = _pairs(m.group(1))
            self.evidence += 1
        elif m := self._fail.match(line):
            self.names.add(m.group(1))
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.counts is None:
            return None
        c = self.counts
        failed, passed = c.get("failed", 0), c.get("passed", 0)
        skipped = c.get("skipped", 0) + c.get("todo", 0)
        outcome = "failed" if failed or self.files.get("failed") else ("passed" if passed else "no tests")
        return TestRun("vitest", outcome, passed=passed, failed=failed, skipped=skipped,
                       total=c.get("total"), failing=self.names.names, more_failing=self.names.more)


class _Swift(_Collector):
    framework = "swift"
    prefilter = r"Test Case '|\s*Executed \d|.{0,4}Test |.*error: "
    _case = re.compile(r"^Test Case '(.+?)' (passed|failed|skipped) \(")
    _executed = re.compile(r"^\s*Executed (\d+) tests?, with (?:(\d+) tests? skipped and )?(\d+) failures? "
                           r"\((\d+) unexpected\)")
    _run = re.compile(r"^.{0,4}Test run with (\d+) tests?(?: in \d+ suites?)? (passed|failed) after")
    _test = re.compile(r"^.{0,4}Test (.+?) (passed|failed) after [\d.]+ seconds")
    _skip = re.compile(r"^.{0,4}Test (.+?) skipped(?:[.:]|$)")
    _build = re.compile(r"error: (?:fatalError|emit-module command failed|compile command failed)")

    def __init__(self) -> None:
        super().__init__()
        self.xc: tuple[int, int, int] | None = None  # executed, skipped, failures
        self.st_total: int | None = None
        self.st_failed = 0
        self.st_skipped = 0
        self.st_outcome: str | None = None
        self.names = _Names()
        self.build_failed = False

    @staticmethod
    def _name(raw: str) -> str:
        m = re.match(r"^-\[(\S+) (\S+)\]$", raw)  # macOS: -[Module.Class testName]
        return f"{m.group(1)}/{m.group(2)}" if m else raw

    def line(self, line: str, number: int) -> None:
        if m := self._case.match(line):
            if m.group(2) == "failed":
                self.names.add(self._name(m.group(1)))
            self.evidence += 1
        elif m := self._executed.match(line):
            self.xc = (int(m.group(1)), int(m.group(2) or 0), int(m.group(3)))
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._run.match(line):
            self.st_total, self.st_outcome = int(m.group(1)), m.group(2)
            self.summary_seen, self.order = True, number
            self.evidence += 1
        elif m := self._test.match(line):
            if m.group(2) == "failed":
                self.names.add(m.group(1))
                self.st_failed += 1
            self.evidence += 1
        elif self._skip.match(line):
            self.st_skipped += 1
            self.evidence += 1
        elif self._build.search(line):
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
        outcome = "failed" if failed or self.names.names else ("passed" if passed else "no tests")
        return TestRun("swift", outcome, passed=passed, failed=failed, skipped=skipped, total=total,
                       failing=self.names.names, more_failing=self.names.more)


_COLLECTORS = (_Pytest, _Go, _Cargo, _Jest, _Vitest, _Swift)
_PREFILTER = re.compile("|".join(f"(?:{c.prefilter})" for c in _COLLECTORS))


class TestOutputParser:
    """Reads a command's output as it streams and says what test run it held.

    ``command`` (the command line, optional) names the framework to prefer
    when the output could be read several ways, and lets a run that printed
    no summary still count as failed from its exit status. Call
    :meth:`feed` with text pieces in order (any split, even mid-line), then
    :meth:`result`. Memory stays bounded whatever the output's size: one
    partial line of at most :data:`MAX_LINE_CHARS` characters and at most
    :data:`MAX_NAMES` names per framework.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, command: str | None = None) -> None:
        self.command = command
        self.hint = framework_for_command(command)
        self._collectors = [cls() for cls in _COLLECTORS]
        self._partial = ""
        self._skipping = False  # inside an over-long line
        self._lines = 0

    def feed(self, text: str) -> None:
        """Read another piece of output (``str``; decode bytes first)."""
        if not text:
            return
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        pieces = text.split("\n")
        last = pieces.pop()
        for i, piece in enumerate(pieces):
            if i == 0:
                if self._skipping:
                    self._skipping = False
                    self._partial = ""
                    continue
                piece = self._partial + piece
                self._partial = ""
            self._line(piece)
        if pieces:
            self._skipping = False
        if self._skipping:
            return
        self._partial += last
        if len(self._partial) > MAX_LINE_CHARS:
            self._line(self._partial[:MAX_LINE_CHARS])
            self._partial = ""
            self._skipping = True

    def gap(self) -> None:
        """Say that some output was not fed (it was skipped): the line in
        progress is dropped, and so is the start of the next piece up to its
        first line break."""
        self._partial = ""
        self._skipping = True

    def _line(self, line: str) -> None:
        self._lines += 1
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        if not _PREFILTER.match(line):
            return
        line = line.rstrip()
        for c in self._collectors:
            c.line(line, self._lines)

    def result(self, exit_status: int | None = None) -> TestRun | None:
        """The test run the output held, or None.

        ``exit_status`` (the command's) turns a known test command that
        printed no summary into a ``failed`` run when non-zero; it never
        turns a summary's ``failed`` into ``passed``.
        """
        if self._partial and not self._skipping:
            self._line(self._partial)
            self._partial = ""
        with_summary = [c for c in self._collectors if c.summary_seen]
        chosen: _Collector | None = None
        if self.hint:
            chosen = next((c for c in with_summary if c.framework == self.hint), None)
        if chosen is None and with_summary:
            chosen = max(with_summary, key=lambda c: (c.evidence, c.order))
        run = chosen.result() if chosen is not None else None
        if run is None and self.hint:
            # a test command whose build failed, with no summary (cargo, swift)
            run = next((c.result() for c in self._collectors if c.framework == self.hint and c.evidence), None)
        if run is None and self.hint and exit_status not in (None, 0):
            run = TestRun(self.hint, "failed",
                          note=f"no test summary in the output (exit status {exit_status}): "
                               "the build may have failed, or the run crashed or was cut")
        if run is not None and run.outcome == "passed" and exit_status not in (None, 0):
            # e.g. a coverage threshold: the tests passed, the command did not
            run.note = run.note or f"the tests passed but the command exited {exit_status}"
        return run


def parse_test_output(text: str, command: str | None = None,
                      exit_status: int | None = None) -> TestRun | None:
    """The test run in ``text`` (a whole output), or None; see :class:`TestOutputParser`."""
    parser = TestOutputParser(command)
    parser.feed(text)
    return parser.result(exit_status)
