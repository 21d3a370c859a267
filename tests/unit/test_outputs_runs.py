"""Test runs read from real-looking outputs of pytest, go test, cargo test, jest, vitest and swift test
(wisp.core.outputs.runs and the format modules' collectors), the `tests` fact's value, and the fact
followed through real pytest runs.

The files in tests/data/test_runs/ are outputs of real runs (pytest, cargo, jest) or written
after the tools' documented formats (go, swift, vitest, nextest); see core/outputs/runs.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.outputs import MAX_NAMES, TestOutputParser, read_test_run, summarise
from wisp.core.session import Session, SessionOptions
from tests.support.fakes import reply, text, tool_call
from tests.support.home import DATA as DATA_ROOT, write_config

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
    ("gradle_failed.txt", "./gradlew test", 1, "gradle", "failed", (2, 2, 1),
     ["com.example.calc.AppTest.appHasAGreeting()", "com.example.calc.CalculatorTest.dividesByZero()"]),
]


@pytest.mark.parametrize("name,command,status,framework,outcome,counts,failing", CASES,
                         ids=[c[0] for c in CASES])
def test_reads_each_framework(name, command, status, framework, outcome, counts, failing) -> None:
    text = (DATA / name).read_text()
    for cmd in (command, None):  # with the command as a hint, and from the output alone
        run = read_test_run(text, status, cmd)
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
    whole = read_test_run(text, 0, None)
    for size in (1, 7, 64, 1000):
        parser = TestOutputParser(None)
        for i in range(0, len(text), size):
            parser.feed(text[i:i + size])
        assert parser.result(0) == whole, size


def test_build_failures_count_only_for_a_test_command() -> None:
    cargo = (DATA / "cargo_build_failed.txt").read_text()
    run = read_test_run(cargo, 101, "cargo test")
    assert run is not None and run.outcome == "failed" and run.note == "the build failed"
    assert read_test_run(cargo, 101, "cargo build") is None  # a build is not a test run
    swift = (DATA / "swift_build_failed.txt").read_text()
    run = read_test_run(swift, 1, "swift test")
    assert run is not None and run.outcome == "failed" and run.note == "the build failed"
    assert read_test_run(swift, 1, "swift build") is None


def test_no_summary_from_a_test_command_fails_by_exit_status() -> None:
    run = read_test_run("Traceback (most recent call last):\n  boom\n", 3, "pytest -x")
    assert run is not None and run.outcome == "failed" and "exit status 3" in (run.note or "")
    assert read_test_run("all good\n", 0, "pytest") is None
    assert read_test_run("hello\nworld\n", 1, "ls -l") is None


def test_ordinary_output_is_not_a_test_run() -> None:
    text = "\n".join([
        "total 12", "drwxr-xr-x 2 dev dev 4096 May  2 10:00 src", "ERROR    root:app.py:10 it broke",
        "ok, done", "FAIL is a word too", "Tests: none written yet", "test of the emergency system",
    ])
    assert read_test_run(text) is None


def test_pytest_logging_lines_are_not_test_names() -> None:
    text = ("ERROR    root:test_x.py:5 boom\n"
            "FAILED tests/test_x.py::test_a - assert 1 == 2\n"
            "1 failed in 0.01s\n")
    run = read_test_run(text)
    assert run is not None and run.failing == ["tests/test_x.py::test_a"]


def test_colours_and_carriage_returns_are_ignored() -> None:
    text = ("\x1b[31mFAILED\x1b[0m tests/test_x.py::test_a - x\r\n"
            "\x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m3 passed\x1b[0m\x1b[31m in 0.10s\x1b[0m\r\n")
    run = read_test_run(text)
    assert run is not None and (run.failed, run.passed) == (1, 3) and run.failing == ["tests/test_x.py::test_a"]


def test_failing_names_are_capped_and_counted() -> None:
    lines = [f"FAILED tests/test_many.py::test_{i}" for i in range(MAX_NAMES + 25)]
    run = read_test_run("\n".join(lines) + f"\n{MAX_NAMES + 25} failed in 1.00s\n")
    assert run is not None and len(run.failing) == MAX_NAMES and run.more_failing == 25
    assert "and 65 more" in run.summary()  # 10 shown of 75


def test_a_long_line_does_not_hide_the_next_one() -> None:
    parser = TestOutputParser("pytest")
    parser.feed("x" * 1_000_000)
    parser.feed("\n2 passed in 0.01s\n")
    run = parser.result(0)
    assert run is not None and run.passed == 2


def test_passed_summary_with_a_failing_exit_keeps_passed_with_a_note() -> None:
    run = read_test_run((DATA / "jest_passed_verbose.txt").read_text(), 1, "npx jest")
    assert run is not None and run.outcome == "passed" and "exited 1" in (run.note or "")


# --- the `tests` fact's value (moved from test_context_references.py) -----------------------

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_x.py .F.                                                      [100%]

=================================== FAILURES ===================================
E       assert 1 == 2
=========================== short test summary info ============================
FAILED tests/test_x.py::test_b - assert 1 == 2
========================= 1 failed, 2 passed in 0.05s ==========================
"""


def test_pytest_output_becomes_a_tests_value() -> None:
    run = read_test_run(PYTEST_FAIL, 1, command="pytest -q tests/test_x.py")
    assert run is not None and not run.ok
    assert (run.failed, run.passed) == (1, 2) and run.failing == ["tests/test_x.py::test_b"]
    assert run.value() == "failed (exit status 1): 1 failed, 2 passed; failing: tests/test_x.py::test_b"
    passed = read_test_run("===== 5 passed in 0.1s =====", 0)
    assert passed.ok and passed.value() == "passed (exit status 0): 5 passed"


def test_other_runners() -> None:
    go = read_test_run("--- FAIL: TestParse (0.00s)\n--- PASS: TestOther (0.00s)\nFAIL\tpkg\t0.01s\n", 1)
    assert go.failing == ["TestParse"] and not go.ok
    cargo = read_test_run("test a::b ... FAILED\ntest result: FAILED. 3 passed; 1 failed; 0 ignored", None)
    assert cargo.failing == ["a::b"] and not cargo.ok and cargo.passed == 3
    unit = read_test_run("FAIL: test_x (pkg.tests.T)\n----\nRan 4 tests in 0.01s\n\nFAILED (failures=1)", 1)
    assert unit.failing == ["pkg.tests.T.test_x"] and (unit.failed, unit.passed, unit.errors) == (1, 3, 0)
    jest = read_test_run("  ● Suite › adds\nTests:       1 failed, 4 passed, 5 total\n", 1)
    assert jest.failing == ["Suite › adds"]
    assert read_test_run("hello world", 0, command="ls -la") is None
    crashed = read_test_run("Segmentation fault", 139, command="make test")
    assert crashed is not None and not crashed.ok and crashed.value() == "failed (exit status 139)"


def test_a_runner_wisp_cannot_read_passes_or_fails_by_its_exit_status() -> None:
    """testruns (the fact's old reader) said so; test_results (run_command's) said nothing: the merged
    reading says it for both, so a fixed `make check` supersedes its failed fact."""
    for command, runner in (("make check", "make check"), ("cd app && tox -e py311", "tox"), ("npm test", "npm test"),
                            ("mvn  test -q", "mvn test")):
        failed = read_test_run("something broke\n", 2, command)
        passed = read_test_run("all fine\n", 0, command)
        assert failed is not None and failed.outcome == "failed" and failed.value() == "failed (exit status 2)"
        assert passed is not None and passed.outcome == "passed" and passed.value() == "passed (exit status 0)"
        assert failed.framework == passed.framework == runner
    assert read_test_run("all fine\n", None, "make check") is None  # no exit status, no summary: nothing to say


def test_long_values_are_cut_with_the_names_counted() -> None:
    many = PYTEST_FAIL.replace("FAILED tests/test_x.py::test_b - assert 1 == 2",
                               "\n".join(f"FAILED tests/t.py::test_{i}" for i in range(80)))
    value = read_test_run(many, 1).value()
    assert len(value) <= 500
    assert value.startswith("failed (exit status 1): 1 failed, 2 passed; failing: tests/t.py::test_0, ")
    assert value.endswith(" more")
    total = int(value.rsplit(" and ", 1)[1].split()[0]) + value.count("tests/t.py::")
    assert total == 80


def test_the_summary_and_the_value_say_the_same_run() -> None:
    """meta["tests"]["summary"] and the fact's own value differ in form only (framework or exit status)."""
    run = read_test_run(PYTEST_FAIL, 1, "pytest")
    assert run.to_dict()["summary"] == "failed (pytest): 1 failed, 2 passed; failing: tests/test_x.py::test_b"
    assert run.value().split(": ", 1)[1] == run.summary().split(": ", 1)[1]
    assert run.to_dict()["exit_status"] == 1


# --- the `tests` fact through real pytest runs (moved from test_tool_facts.py) ---------------

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_zero():\n    assert add(0, 0) == 0\n")
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=wisp test", "-c", "user.email=test@example.invalid",
                           "-c", "init.defaultBranch=main", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "calc"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "calc.py").write_text(BUGGY)
    (repo / "test_calc.py").write_text(TESTS)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "calc")
    return repo


async def test_tests_fact_follows_pytest_runs(ollama_home, repo: Path) -> None:
    """Facts from what tools saw (issue "Tools that act", "Facts from tools"): a scripted model runs
    pytest through run_command; the `tests` fact follows the runs, with its source entry."""
    home, srv = ollama_home
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 10,
                        "tools.run_command.allow": [f"{sys.executable} -m pytest"], "tools.run_command.timeout_s": 120})
    srv.push(reply(tool_call("run_command", {"command": PYTEST}), finish="tool_calls"),
             reply(text("test_add fails.")),
             reply(tool_call("run_command", {"command": PYTEST}), finish="tool_calls"),
             reply(text("All pass now.")))
    async with await Session.open(SessionOptions(workdir=repo, tools=["run_command"])) as s:
        assert await s.connect()
        [item async for item in s.run_turn("run the tests")]
        conv = s.conversation_id
        facts = s.context.facts
        tests = [f for f in await facts.current(conv) if f.subject == "tests"]
        assert len(tests) == 1, tests
        first = tests[0]
        assert first.value.startswith("failed (pytest") and "test_calc.py::test_add" in first.value
        assert "1 failed, 1 passed" in first.value and "test_zero" not in first.value
        assert first.source == "tool" and first.tool == "run_command"
        result_entry = next(e for e in await s.store.entries(conv) if e.kind == "tool_result")
        assert first.entries == (result_entry.number,)
        assert result_entry.meta["tests"]["failing"] == ["test_calc.py::test_add"]
        # summarise names the same failing test as the fact, from the stored output
        stored = summarise(result_entry.content, result_entry.meta)
        assert "1 failing test: test_calc.py::test_add (L" in stored.text

        # a model note does not replace the tool's fact
        outcome = await facts.record(conv, "tests", first.name, "passed, trust me", source="model")
        assert outcome.refused_by is not None and outcome.refused_by.number == first.number

        (repo / "calc.py").write_text(FIXED)
        [item async for item in s.run_turn("I fixed it; run them again")]
        now = await facts.current_of(conv, "tests", first.name)
        assert now is not None and now.number > first.number
        assert now.value.startswith("passed (pytest") and "2 passed" in now.value
        old = await facts.get(conv, first.number)
        assert old.state == "superseded" and old.superseded_by == now.number
        second_result = [e for e in await s.store.entries(conv) if e.kind == "tool_result"][-1]
        assert now.entries == (second_result.number,)

        # the person's fact does replace it
        outcome = await facts.record(conv, "tests", first.name, "flaky on CI", source="person")
        assert outcome.recorded and outcome.superseded.number == now.number
