"""``tests`` facts from a test run's output: its result and its failing tests.

Issue "Layered context", "Facts": a tool records ``tests`` from a test
run's output, its result and its failing tests. This module reads the output
of the common runners (pytest, unittest, go test, cargo test, jest/vitest,
and any command whose exit status is known) into a :class:`TestRun`; the
context manager records it as a fact of subject ``tests`` (source ``tool``,
method ``tested``), named after the command without its options.

Value form (cut to 500 characters with the failing tests first cut)::

    failed (exit status 1): 2 failed, 10 passed; failing: tests/test_a.py::test_x, tests/test_b.py::test_y
    passed (exit status 0): 12 passed
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

__all__ = ["TestRun", "parse_test_output", "looks_like_test_command", "fact_name_for_command"]

_TEST_COMMAND = re.compile(
    r"(^|[\s;&|/])(pytest|py\.test|tox|nox|unittest|go\s+test|cargo\s+(test|nextest)|npm\s+(run\s+)?test|"
    r"yarn\s+(run\s+)?test|pnpm\s+(run\s+)?test|jest|vitest|mocha|rspec|make\s+(test|check)|ctest|"
    r"swift\s+test|mvn\s+test|gradle\w*\s+test|dotnet\s+test|phpunit|bats|prove|mix\s+test|deno\s+test|"
    r"bun\s+test)(\s|$)",
    re.IGNORECASE,
)
_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", re.MULTILINE)
_COUNTS = re.compile(r"(\d+) (failed|passed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in", re.MULTILINE)
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)\b(?: \((.*?)\))?", re.MULTILINE)
_UNITTEST_FAILED = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)", re.MULTILINE)
_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)", re.MULTILINE)
_GO_PASS = re.compile(r"^\s*--- PASS: (\S+)", re.MULTILINE)
_CARGO_RESULT = re.compile(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed")
_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED", re.MULTILINE)
_JEST_TESTS = re.compile(r"^Tests:\s+(.*?)\s*$", re.MULTILINE)
_JEST_FAILED = re.compile(r"^\s*● (.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class TestRun:
    """A test run read from output: ``passed`` (bool), ``exit_status`` (or
    ``None``), ``counts`` (``{"failed": 2, "passed": 10}``) and ``failing``
    (test names, in order)."""

    __test__ = False  # not a pytest class

    passed: bool
    exit_status: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failing: tuple[str, ...] = ()

    def value(self, limit: int = 500) -> str:
        """The ``tests`` fact's value (see the module doc), at most ``limit`` characters."""
        head = "passed" if self.passed else "failed"
        if self.exit_status is not None:
            head += f" (exit status {self.exit_status})"
        order = ["failed", "errors", "error", "passed", "skipped", "xfailed", "xpassed"]
        counts = ", ".join(f"{self.counts[k]} {k}" for k in order if self.counts.get(k))
        text = head + (f": {counts}" if counts else "")
        if self.failing:
            names = list(self.failing)
            while names:
                candidate = text + "; failing: " + ", ".join(names)
                if len(candidate) <= limit:
                    return candidate
                names.pop()
            return (text + f"; failing: {len(self.failing)} tests")[:limit]
        return text[:limit]


def looks_like_test_command(command: str) -> bool:
    """Whether a command line runs tests (pytest, go test, cargo test, npm test, make test …)."""
    return bool(_TEST_COMMAND.search(command or ""))


def fact_name_for_command(command: str) -> str:
    """The ``tests`` fact's name for a command, at most 60 characters.

    For a runner wisp knows (:func:`wisp.core.tools.test_results.framework_for_command`)
    it is the runner and the targets named (``pytest tests/unit`` for
    ``PYTHONPATH=. .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit``),
    so reruns with other options update one fact; otherwise the command's
    words without options and environment assignments.
    """
    from ..tools.test_results import framework_for_command

    try:
        words = shlex.split(command or "")
    except ValueError:
        words = (command or "").split()
    framework = framework_for_command(command)
    if framework is not None:
        runner = {"go": "go test", "cargo": "cargo test", "swift": "swift test"}.get(framework, framework)
        targets = [w for w in words[1:] if not w.startswith("-") and not re.match(r"^\w+=", w)
                   and ("/" in w or "::" in w or re.search(r"\.(py|js|ts|tsx|go|rs|swift)$", w))
                   and not re.search(r"(^|/)(python[\d.]*|node|npx)$", w)]
        name = " ".join([runner, *targets])
    else:
        kept = [w for w in words if not w.startswith("-") and not re.match(r"^\w+=", w)]
        name = " ".join(kept) or (command or "tests").strip()
    return name if len(name) <= 60 else name[:59] + "…"


def _dedupe(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


def parse_test_output(output: str, exit_status: int | None = None, *, command: str = "") -> TestRun | None:
    """A :class:`TestRun` from a runner's output, or ``None`` when the output
    is not recognisably a test run (and ``command`` does not run tests).

    The result is the exit status when known (0 is passed), else what the
    runner's summary says.
    """
    text = output or ""
    counts: dict[str, int] = {}
    failing: list[str] = []
    recognised = False
    m = None
    for m in _PYTEST_SUMMARY.finditer(text):
        pass
    if m is not None:
        recognised = True
        for n, word in _COUNTS.findall(m.group(1)):
            key = "errors" if word.startswith("error") else ("warnings" if word.startswith("warning") else word)
            counts[key] = counts.get(key, 0) + int(n)
        failing += _PYTEST_FAILED.findall(text)
    ran = _UNITTEST_RAN.search(text)
    if ran and not recognised:
        recognised = True
        res = _UNITTEST_RESULT.findall(text)
        total = int(ran.group(1))
        bad = 0
        if res:
            status, detail = res[-1]
            for key, n in re.findall(r"(failures|errors)=(\d+)", detail or ""):
                counts["failed" if key == "failures" else "errors"] = int(n)
                bad += int(n)
        counts["passed"] = max(0, total - bad)
        failing += [f"{cls}.{name}" for name, cls in _UNITTEST_FAILED.findall(text)]
    cargo = _CARGO_RESULT.findall(text)
    if cargo and not recognised:
        recognised = True
        counts["passed"] = sum(int(p) for _, p, _ in cargo)
        counts["failed"] = sum(int(f) for _, _, f in cargo)
        failing += _CARGO_FAILED.findall(text)
    go_fail = _GO_FAIL.findall(text)
    if (go_fail or _GO_PASS.search(text) or re.search(r"^(ok|FAIL)\s+\S+\s+[\d.]+s", text, re.MULTILINE)) \
            and not recognised:
        recognised = True
        counts["failed"] = len(go_fail)
        counts["passed"] = len(_GO_PASS.findall(text))
        failing += go_fail
    jest = _JEST_TESTS.search(text)
    if jest and not recognised:
        recognised = True
        for n, word in _COUNTS.findall(jest.group(1)):
            counts[word] = int(n)
        failing += _JEST_FAILED.findall(text)
    if not recognised and not looks_like_test_command(command):
        return None
    if exit_status is not None:
        passed = exit_status == 0
    elif recognised:
        passed = not counts.get("failed") and not counts.get("errors") and not failing
    else:
        return None
    return TestRun(passed=passed, exit_status=exit_status, counts={k: v for k, v in counts.items() if v},
                   failing=_dedupe(failing))
