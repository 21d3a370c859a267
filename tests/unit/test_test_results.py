"""Test runs read from real-looking outputs of pytest, go test, cargo test, jest, vitest and swift test.

The files in tests/data/test_runs/ are outputs of real runs (pytest, cargo, jest) or written
after the tools' documented formats (go, swift, vitest, nextest); see core/tools/test_results.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wisp.core.tools.test_results import (
    MAX_NAMES, TestOutputParser, parse_test_output, framework_for_command,
)

from tests.support.home import DATA as DATA_ROOT

DATA = DATA_ROOT / "test_runs"

# file, command, exit status, framework, outcome, counts (passed, failed, skipped), failing names
CASES = [
    ("pytest_failed_quiet.txt", "pytest -q tests/test_calc.py", 1, "pytest", "failed", (2, 4, 1),
     ["tests/test_calc.py::test_add", "tests/test_calc.py::test_add_many[1-1-2]",
      "tests/test_calc.py::test_add_many[0-5-5]", "tests/test_calc.py::test_add_many[2-2-4]"]),
    ("pytest_failed_verbose.txt", "python -m pytest -v", 1, "pytest", "failed", (2, 4, 1),
     ["tests/test_calc.py::test_add", "tests/test_calc.py::test_add_many[1-1-2]",
      "tests/test_calc.py::test_add_many[0-5-5]", "tests/test_calc.py::test_add_many[2-2-4]"]),
    ("pytest_collection_error.txt", "pytest", 2, "pytest", "failed", (0, 0, 0), ["tests/test_broken.py"]),
    ("pytest_passed.txt", "pytest", 0, "pytest", "passed", (6, 0, 1), []),
    ("pytest_no_tests.txt", "pytest", 5, "pytest", "no tests", (0, 0, 0), []),
    ("go_failed.txt", "go test ./...", 1, "go", "failed", (None, 2, None),
     ["TestAdd", "TestTable/negative_numbers"]),
    ("go_verbose_passed.txt", "go test -v ./...", 0, "go", "passed", (5, 0, 1), []),
    ("go_json_failed.txt", "go test -json ./...", 1, "go", "failed", (1, 1, 1), ["TestAdd"]),
    ("go_build_failed.txt", "go test ./...", 1, "go", "failed", (None, 0, None),
     ["example.com/calc [build failed]"]),
    ("cargo_failed.txt", "cargo test", 101, "cargo", "failed", (1, 2, 1),
     ["tests::panics_on_purpose", "tests::it_multiplies"]),
    ("cargo_failed_nofailfast.txt", "cargo test --no-fail-fast", 101, "cargo", "failed", (3, 2, 1),
     ["tests::it_multiplies", "tests::panics_on_purpose"]),
    ("cargo_passed_with_doctests.txt", "cargo test", 0, "cargo", "passed", (5, 0, 1), []),
    ("cargo_nextest_failed.txt", "cargo nextest run", 100, "cargo", "failed", (3, 1, 1),
     ["calc tests::it_multiplies"]),
    ("jest_failed.txt", "npx jest", 1, "jest", "failed", (3, 1, 1),
     ["arithmetic › multiplies 2 * 3 to equal 6", "./broken.test.js (failed to run)"]),
    ("jest_failed_verbose.txt", "npx jest --verbose", 1, "jest", "failed", (3, 1, 1),
     ["arithmetic › multiplies 2 * 3 to equal 6"]),
    ("jest_passed_verbose.txt", "npm test", 0, "jest", "passed", (4, 0, 1), []),
    ("vitest_failed.txt", "npx vitest run", 1, "vitest", "failed", (4, 1, 0),
     ["src/sum.test.ts > sum > adds negative numbers"]),
    ("swift_xctest_linux_failed.txt", "swift test", 1, "swift", "failed", (1, 1, 1), ["CalcTests.testAdd"]),
    ("swift_xctest_macos_passed.txt", "swift test", 0, "swift", "passed", (2, 0, 0), []),
    ("swift_testing_failed.txt", "swift test", 1, "swift", "failed", (2, 1, 0), ["addition()"]),
]


@pytest.mark.parametrize("name,command,status,framework,outcome,counts,failing", CASES,
                         ids=[c[0] for c in CASES])
def test_reads_each_framework(name, command, status, framework, outcome, counts, failing) -> None:
    text = (DATA / name).read_text()
    for cmd in (command, None):  # with the command as a hint, and from the output alone
        run = parse_test_output(text, cmd, status)
        assert run is not None, (name, cmd)
        assert run.framework == framework and run.outcome == outcome, (cmd, run)
        assert (run.passed, run.failed, run.skipped) == counts, (cmd, run)
        assert run.failing == failing, (cmd, run)
        summary = run.summary()
        assert summary.startswith(f"{outcome} ({framework})")
        for n in failing[:10]:
            assert n in summary


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_any_split_of_the_stream_gives_the_same_result(name: str) -> None:
    text = (DATA / name).read_text()
    whole = parse_test_output(text, None, 0)
    for size in (1, 7, 64, 1000):
        parser = TestOutputParser(None)
        for i in range(0, len(text), size):
            parser.feed(text[i:i + size])
        assert parser.result(0) == whole, size


def test_build_failures_count_only_for_a_test_command() -> None:
    cargo = (DATA / "cargo_build_failed.txt").read_text()
    run = parse_test_output(cargo, "cargo test", 101)
    assert run is not None and run.outcome == "failed" and run.note == "the build failed"
    assert parse_test_output(cargo, "cargo build", 101) is None  # a build is not a test run
    swift = (DATA / "swift_build_failed.txt").read_text()
    run = parse_test_output(swift, "swift test", 1)
    assert run is not None and run.outcome == "failed" and run.note == "the build failed"
    assert parse_test_output(swift, "swift build", 1) is None


def test_no_summary_from_a_test_command_fails_by_exit_status() -> None:
    run = parse_test_output("Traceback (most recent call last):\n  boom\n", "pytest -x", 3)
    assert run is not None and run.outcome == "failed" and "exit status 3" in (run.note or "")
    assert parse_test_output("all good\n", "pytest", 0) is None
    assert parse_test_output("hello\nworld\n", "ls -l", 1) is None


def test_ordinary_output_is_not_a_test_run() -> None:
    text = "\n".join([
        "total 12", "drwxr-xr-x 2 dev dev 4096 May  2 10:00 src", "ERROR    root:app.py:10 it broke",
        "ok, done", "FAIL is a word too", "Tests: none written yet", "test of the emergency system",
    ])
    assert parse_test_output(text) is None


def test_pytest_logging_lines_are_not_test_names() -> None:
    text = ("ERROR    root:test_x.py:5 boom\n"
            "FAILED tests/test_x.py::test_a - assert 1 == 2\n"
            "1 failed in 0.01s\n")
    run = parse_test_output(text)
    assert run is not None and run.failing == ["tests/test_x.py::test_a"]


def test_colours_and_carriage_returns_are_ignored() -> None:
    text = ("\x1b[31mFAILED\x1b[0m tests/test_x.py::test_a - x\r\n"
            "\x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m3 passed\x1b[0m\x1b[31m in 0.10s\x1b[0m\r\n")
    run = parse_test_output(text)
    assert run is not None and (run.failed, run.passed) == (1, 3) and run.failing == ["tests/test_x.py::test_a"]


def test_failing_names_are_capped_and_counted() -> None:
    lines = [f"FAILED tests/test_many.py::test_{i}" for i in range(MAX_NAMES + 25)]
    run = parse_test_output("\n".join(lines) + f"\n{MAX_NAMES + 25} failed in 1.00s\n")
    assert run is not None and len(run.failing) == MAX_NAMES and run.more_failing == 25
    assert "and 65 more" in run.summary()  # 10 shown of 75


def test_a_long_line_does_not_hide_the_next_one() -> None:
    parser = TestOutputParser("pytest")
    parser.feed("x" * 1_000_000)
    parser.feed("\n2 passed in 0.01s\n")
    run = parser.result(0)
    assert run is not None and run.passed == 2


def test_passed_summary_with_a_failing_exit_keeps_passed_with_a_note() -> None:
    run = parse_test_output((DATA / "jest_passed_verbose.txt").read_text(), "npx jest", 1)
    assert run is not None and run.outcome == "passed" and "exited 1" in (run.note or "")


@pytest.mark.parametrize("command,framework", [
    ("pytest -q", "pytest"), ("python3 -m pytest tests", "pytest"), ("uv run pytest", "pytest"),
    ("go test ./...", "go"), ("cargo test --all", "cargo"), ("cargo nextest run", "cargo"),
    ("npx jest --ci", "jest"), ("npx vitest run", "vitest"), ("swift test --parallel", "swift"),
    ("ls -l", None), ("make", None), ("echo pytestish", None),
])
def test_command_hints(command: str, framework: str | None) -> None:
    assert framework_for_command(command) == framework
