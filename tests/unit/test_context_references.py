"""References, digests, the coverage check's items and the git branch (issue "Layered context"):
pure functions, plus .git folders on disk. (The `tests` fact's reading: test_outputs_runs.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wisp.core.context.coverage import Item, extract_items, is_present, missing_items
from wisp.core.context.digest import digest_output, exit_status_of, first_error_line
from wisp.core.context.references import (reference_form, reference_text, recall_phrase,
                                          referenced_entries)
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


def test_a_stopped_or_timed_out_command_says_so_in_its_digest() -> None:
    """QA: a command stopped with Esc was referred to only by 'exit status -15'."""
    from wisp.core.context.digest import digest_output

    assert "stopped by the person, exit status -15" in digest_output("partial\n", {"exit_status": -15,
                                                                                  "stopped": True}).text()
    assert "timed out" in digest_output("x\n", {"exit_status": -9, "timed_out": True}).text()
    assert "stopped" not in digest_output("x\n", {"exit_status": 0}).text()


async def test_branch_fact_changes_between_turns(ollama_home, tmp_path: Path) -> None:
    """The `branch` fact follows git between turns (moved from test_tool_facts.py, whose `tests`
    fact half is in test_outputs_runs.py)."""
    from wisp.core.session import Session, SessionOptions

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=wisp test", "-c", "user.email=test@example.invalid",
                        "-c", "init.defaultBranch=main", *args], cwd=repo, check=True, capture_output=True)

    repo = tmp_path / "calc"
    repo.mkdir()
    git("init", "-q")
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git("add", ".")
    git("commit", "-q", "-m", "calc")

    async def run(session: Session, prompt: str) -> list:
        return [item async for item in session.run_turn(prompt)]

    async with await Session.open(SessionOptions(workdir=repo, tools=[])) as s:
        assert await s.connect()
        await run(s, "hello")
        conv = s.conversation_id
        first = await s.context.facts.current_of(conv, "branch")
        assert first is not None and first.value == "main" and first.source == "tool"
        workdir = await s.context.facts.current_of(conv, "workdir")
        assert workdir is not None and workdir.value == str(repo.resolve())
        await run(s, "again, same branch")
        assert (await s.context.facts.current_of(conv, "branch")).number == first.number  # unchanged
        git("checkout", "-q", "-b", "feature/login")
        await run(s, "and now?")
        second = await s.context.facts.current_of(conv, "branch")
        assert second.value == "feature/login" and second.number > first.number
        assert (await s.context.facts.get(conv, first.number)).state == "superseded"
