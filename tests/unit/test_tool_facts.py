"""Facts from what tools saw (issue "Tools that act", "Facts from tools"): a scripted model
runs pytest through run_command in a scratch git repo against the fake endpoint; the `tests`
fact follows the runs, with its source entry; the `branch` fact follows git between turns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.session import Session, SessionOptions
from tests.support.home import write_config
from tests.support.fakes import reply, text, tool_call

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_zero():\n    assert add(0, 0) == 0\n")


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


PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


async def test_tests_fact_follows_pytest_runs(ollama_home, repo: Path) -> None:
    home, srv = ollama_home
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 10,
                        "tools.run_command.allow": [sys.executable], "tools.run_command.timeout_s": 120})
    srv.push(reply(tool_call("run_command", {"command": PYTEST}), finish="tool_calls"),
             reply(text("test_add fails.")),
             reply(tool_call("run_command", {"command": PYTEST}), finish="tool_calls"),
             reply(text("All pass now.")))
    async with await Session.open(SessionOptions(workdir=repo, tools=["run_command"])) as s:
        assert await s.connect()
        await run(s, "run the tests")
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

        # a model note does not replace the tool's fact
        outcome = await facts.record(conv, "tests", first.name, "passed, trust me", source="model")
        assert outcome.refused_by is not None and outcome.refused_by.number == first.number

        (repo / "calc.py").write_text(FIXED)
        await run(s, "I fixed it; run them again")
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


async def test_branch_fact_changes_between_turns(ollama_home, repo: Path) -> None:
    home, srv = ollama_home
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
        git(repo, "checkout", "-q", "-b", "feature/login")
        await run(s, "and now?")
        second = await s.context.facts.current_of(conv, "branch")
        assert second.value == "feature/login" and second.number > first.number
        assert (await s.context.facts.get(conv, first.number)).state == "superseded"
