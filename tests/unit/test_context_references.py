"""References, digests, the coverage check's items, test-run facts and the git
branch (issue "Layered context"): pure functions, plus .git folders on disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wisp.core.context.coverage import Item, extract_items, is_present, missing_items
from wisp.core.context.digest import digest_output, exit_status_of, first_error_line
from wisp.core.context.references import (reference_form, reference_text, recall_phrase,
                                          referenced_entries)
from wisp.core.context.testruns import looks_like_test_command, parse_test_output, fact_name_for_command
from wisp.core.context.workspace import current_branch, read_branch

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_x.py .F.                                                      [100%]

=================================== FAILURES ===================================
E       assert 1 == 2
=========================== short test summary info ============================
FAILED tests/test_x.py::test_b - assert 1 == 2
========================= 1 failed, 2 passed in 0.05s ==========================
"""


# --- reference forms ------------------------------------------------------------


def test_reference_with_the_memory_tool_names_the_recall() -> None:
    form = reference_form("run_command", has_memory=True, read_only=False)
    text = reference_text(40, "run_command", turn=6, form=form, content="a\nb\n", meta={"exit_status": 0})
    assert text == ('[output of entry 40 not repeated: run_command, turn 6; 2 lines, 4 bytes, exit status 0; '
                    'to see it: memory "recall entry 40"]')
    assert recall_phrase(7) == 'memory "recall entry 7"'


def test_reference_without_memory_for_a_tool_that_only_reads() -> None:
    form = reference_form("read_file", has_memory=False, read_only=True)
    text = reference_text(7, "read_file", turn=2, form=form, content="1\tx\n2\ty\n[end of file]")
    assert text.endswith("to see it, call read_file again]")
    assert "memory" not in text and "/show" not in text
    assert "3 lines" in text and "entry 7" in text


def test_reference_without_memory_for_a_command_or_an_edit() -> None:
    for read_only in (False, None):  # a command, and a tool wisp no longer has
        form = reference_form("run_command", has_memory=False, read_only=read_only)
        text = reference_text(9, "run_command", turn=3, form=form, content=PYTEST_FAIL, meta={"exit_status": 1})
        assert text.endswith("do not run it again to see it: ask the person, who can use /show entry 9]")
        assert "exit status 1" in text and 'first error: "E       assert 1 == 2"' in text
        assert "call run_command again" not in text


def test_referenced_entries_reads_every_form() -> None:
    text = ('[output of entry 40 not repeated: …; to see it: memory "recall entry 40"]\n'
            "- entry 9 (turn 3): run_command …; the person can /show entry 9\nsee entry 12 and entry 40")
    assert referenced_entries(text) == [40, 9, 12]


# --- digests --------------------------------------------------------------------------


def test_digest_counts_lines_and_bytes() -> None:
    d = digest_output("héllo\nworld\n", {}, read_only=True)
    assert (d.lines, d.bytes, d.exit_status, d.first_error) == (2, 13, None, None)
    assert digest_output("", {}).lines == 0
    assert digest_output("no newline at end", {}).lines == 1
    assert d.text() == "2 lines, 13 bytes"


def test_digest_exit_status_and_first_error_line() -> None:
    d = digest_output(PYTEST_FAIL, {"exit_status": 1}, read_only=False)
    assert d.exit_status == 1 and d.failed
    assert d.first_error == "E       assert 1 == 2"
    assert d.text().endswith('exit status 1, first error: "E       assert 1 == 2"')
    ok = digest_output("collected 2 items\n0 errors, no failures\nall good\n", {"exit_status": 0}, read_only=False)
    assert ok.exit_status == 0 and ok.first_error is None and not ok.failed
    assert exit_status_of({"returncode": "2"}) == 2 and exit_status_of({"exit_code": True}) is None


def test_a_file_that_was_read_is_not_searched_for_errors() -> None:
    source = "1\tclass ParseError(Exception):\n2\t    raise ValueError('invalid')\n[end of file]"
    assert digest_output(source, {}, read_only=True).first_error is None
    failed = digest_output("error: no file a.txt in /w", {"error": True}, read_only=True)
    assert failed.failed and failed.first_error == "error: no file a.txt in /w" and "failed" in failed.text()


def test_first_error_line_forms() -> None:
    assert first_error_line("ok\nTraceback (most recent call last):\n  x") == "Traceback (most recent call last):"
    assert first_error_line("fatal: not a git repository") == "fatal: not a git repository"
    assert first_error_line("src/a.py:3:1: F401 'os' imported but unused") == "src/a.py:3:1: F401 'os' imported but unused"
    assert first_error_line("a.c:3:5: warning: unused variable") is None
    assert first_error_line("Found 0 errors") is None
    long = first_error_line("error: " + "x" * 300)
    assert len(long) == 120 and long.endswith("…")


# --- coverage items ------------------------------------------------------------------


def test_items_found_in_turn_text() -> None:
    text = ("pytest tests/test_auth.py::test_login failed with E501 in src/app/main.py:42; commit 3f9a2c1b "
            "fixed it (see entry 7). ENOENT for config.toml; TestParseConfig too; AUTH-401 from the API. "
            "Version 1.2.3 on 2024/01/02, https://example.com/a/b.py, read/write and feature/login are words.")
    items = extract_items(text)
    assert Item("test", "tests/test_auth.py::test_login") in items
    assert Item("path", "src/app/main.py") in items and Item("path", "config.toml") in items
    assert Item("commit", "3f9a2c1b") in items and Item("entry", "entry 7") in items
    assert {Item("error_code", c) for c in ("E501", "ENOENT", "AUTH-401")} <= items
    assert Item("test", "TestParseConfig") in items
    texts = {i.text for i in items}
    assert not texts & {"1.2.3", "2024/01/02", "read/write", "feature/login", "https://example.com/a/b.py",
                        "tests/test_auth.py"}


def test_items_are_matched_exactly_or_by_prefix() -> None:
    assert is_present(Item("commit", "3f9a2c1b0d4e5f6a"), "fixed in 3f9a2c1 yesterday")
    assert not is_present(Item("commit", "3f9a2c1b"), "fixed in 3f9a yesterday")
    assert is_present(Item("entry", "entry 7"), "outputs: entries 3, 7 and 9")
    assert is_present(Item("entry", "entry 7"), "- entry 7 (turn 2): read_file")
    assert not is_present(Item("entry", "entry 7"), "entry 17")
    assert missing_items({Item("path", "a/b.py"), Item("error_code", "E501")}, "a/b.py", "") == \
        [Item("error_code", "E501")]


# --- test runs --------------------------------------------------------------------------


def test_pytest_output_becomes_a_tests_value() -> None:
    run = parse_test_output(PYTEST_FAIL, 1, command="pytest -q tests/test_x.py")
    assert run is not None and not run.passed
    assert run.counts == {"failed": 1, "passed": 2} and run.failing == ("tests/test_x.py::test_b",)
    assert run.value() == "failed (exit status 1): 1 failed, 2 passed; failing: tests/test_x.py::test_b"
    passed = parse_test_output("===== 5 passed in 0.1s =====", 0)
    assert passed.passed and passed.value() == "passed (exit status 0): 5 passed"


def test_other_runners() -> None:
    go = parse_test_output("--- FAIL: TestParse (0.00s)\n--- PASS: TestOther (0.00s)\nFAIL\tpkg\t0.01s\n", 1)
    assert go.failing == ("TestParse",) and not go.passed
    cargo = parse_test_output("test a::b ... FAILED\ntest result: FAILED. 3 passed; 1 failed; 0 ignored", None)
    assert cargo.failing == ("a::b",) and not cargo.passed and cargo.counts["passed"] == 3
    unit = parse_test_output("FAIL: test_x (pkg.tests.T)\n----\nRan 4 tests in 0.01s\n\nFAILED (failures=1)", 1)
    assert unit.failing == ("pkg.tests.T.test_x",) and unit.counts == {"failed": 1, "passed": 3}
    jest = parse_test_output("  ● Suite › adds\nTests:       1 failed, 4 passed, 5 total\n", 1)
    assert jest.failing == ("Suite › adds",)
    assert parse_test_output("hello world", 0, command="ls -la") is None
    crashed = parse_test_output("Segmentation fault", 139, command="make test")
    assert crashed is not None and not crashed.passed and crashed.value() == "failed (exit status 139)"


def test_test_commands_and_names() -> None:
    assert looks_like_test_command("cd x && python -m pytest -q")
    assert looks_like_test_command("go test ./...") and looks_like_test_command("npm run test")
    assert not looks_like_test_command("git status")
    assert fact_name_for_command("PYTHONPATH=. pytest -q -x tests/") == "pytest tests/"
    long_value = parse_test_output(PYTEST_FAIL.replace("FAILED tests/test_x.py::test_b - assert 1 == 2",
                                                       "\n".join(f"FAILED tests/t.py::test_{i}" for i in range(80))), 1)
    assert len(long_value.value()) <= 500


# --- the branch -----------------------------------------------------------------------


def test_branch_from_git_head(tmp_path: Path) -> None:
    assert read_branch(tmp_path) is None
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/feature/login\n")
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    assert read_branch(sub) == "feature/login"  # found from a subdirectory
    (tmp_path / ".git" / "HEAD").write_text("3f9a2c1b0d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a\n")
    assert read_branch(tmp_path) == "detached at 3f9a2c1b0d4e"


def test_branch_of_a_worktree(tmp_path: Path) -> None:
    real = tmp_path / "repo.git" / "worktrees" / "wt"
    real.mkdir(parents=True)
    (real / "HEAD").write_text("ref: refs/heads/hotfix\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {real}\n")
    assert read_branch(wt) == "hotfix"


async def test_current_branch_with_real_git(tmp_path: Path) -> None:
    try:
        subprocess.run(["git", "init", "-q", "-b", "trunk", str(tmp_path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not installed")
    assert await current_branch(tmp_path) == "trunk"


def test_tests_fact_name_is_the_runner_and_its_targets() -> None:
    """Options and their values don't make a new fact (QA: `-p no:cacheprovider` became part of the name)."""
    assert fact_name_for_command("PYTHONPATH=. /x/.venv/bin/python -m pytest -q -p no:cacheprovider tests/unit") \
        == "pytest tests/unit"
    assert fact_name_for_command("cargo test --release") == "cargo test"
    assert fact_name_for_command("go test ./...") == "go test ./..."
    assert fact_name_for_command("make check") == "make check"


def test_a_stopped_or_timed_out_command_says_so_in_its_digest() -> None:
    """QA: a command stopped with Esc was referred to only by 'exit status -15'."""
    from wisp.core.context.digest import digest_output

    assert "stopped by the person, exit status -15" in digest_output("partial\n", {"exit_status": -15,
                                                                                  "stopped": True}).text()
    assert "timed out" in digest_output("x\n", {"exit_status": -9, "timed_out": True}).text()
    assert "stopped" not in digest_output("x\n", {"exit_status": 0}).text()
