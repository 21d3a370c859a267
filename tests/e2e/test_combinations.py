"""Every feature with every other (issue "One core, built once", "A combination suite").

Every memory verb (recall, note, task, summarise, condense, memories), ``/fact``,
``/task``, ``/show`` and ``inspect context`` are run:

- in a new conversation, in the second turn of the same process, after
  ``--continue`` and after ``--resume ID``;
- in the TUI (Pilot) and in ``wisp ask`` (the real command, as a process);
- with the memory tool given by config (``context.memory``), by ``--tool
  memory`` and by an AGENTS.md ``tools:`` line.

The model is a fake Ollama on 127.0.0.1 scripted to call the memory tool;
each answer must be the verb's own (never "not attached", never an error),
and the memory tool must be in the request the endpoint received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import FakeOllama, reply, text, tool_call
from tests.support.home import DATA, write_config
from tests.support.pilot import SIZE, send, started, until
from wisp.core.config import Config
from wisp.core.database import open_store
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp

WISP = str(Path(sys.executable).parent / "wisp")
BUILD_LOG = (DATA / "summarise" / "gcc_link_undefined.txt").read_text()
SOURCES = ["config", "--tool", "AGENTS.md"]
NOT_ATTACHED = "not attached"


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def first_turn_script(log_entry: int) -> list[dict]:
    """Turn A: read the build log, then note, task and summarise it."""
    return [
        reply(tool_call("read_file", {"path": "build.log"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": "note entity release codename = BLUE HERON"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": "task fix the link step; objective: make succeeds"}),
              finish="tool_calls"),
        reply(tool_call("memory", {"request": f"summarise entry {log_entry}"}), finish="tool_calls"),
        reply(text("Done with the first look.")),
    ]


def later_turn_script(log_entry: int) -> list[dict]:
    """A later turn: recall the log, the fact and the task; condense (one side
    call of the same model answers it); episodic memories; an overview."""
    return [
        reply(tool_call("memory", {"request": f"recall entry {log_entry}"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": "recall fact codename"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": "recall task"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": f"condense entry {log_entry}: why did the link step fail"}),
              finish="tool_calls"),
        reply(text("The link step failed: an undefined reference.")),  # the condense side call's answer
        reply(tool_call("memory", {"request": "memories link step"}), finish="tool_calls"),
        reply(tool_call("memory", {"request": f"summarise entry {log_entry} overview"}), finish="tool_calls"),
        reply(text("Done with the second look.")),
    ]


def check_first_turn(results: list[str]) -> None:
    assert len(results) == 3, results
    note, task, summary = results
    assert note == "noted: entity release codename = BLUE HERON (a proposal until the person keeps it)"
    assert task == "noted the task: fix the link step; objective: make succeeds"
    assert "undefined reference" in summary and not summary.startswith(("error:", "memory:"))


def check_later_turn(results: list[str]) -> None:
    assert len(results) == 6, results
    recalled, fact, task, condensed, memories, overview = results
    assert "undefined reference" in recalled and not recalled.startswith(("error:", "memory:"))
    assert "BLUE HERON" in fact and fact.startswith('fact "codename"')
    assert "fix the link step" in task and task.startswith("task (")
    assert condensed.startswith("condensed by the model") and "undefined reference" in condensed
    assert not memories.startswith("error:") and NOT_ATTACHED not in memories
    assert overview.startswith("overview (exact readers, no model): 21 lines")


def setup(home: Path, workdir: Path, srv: FakeOllama, source: str) -> list[str]:
    """Configure the home and workdir so the memory tool comes from ``source``;
    returns the extra command-line words (``--tool …``) that source needs."""
    values: dict[str, Any] = {"model.provider": "ollama", "model.endpoint": srv.base_url,
                              "model.name": "wisp-fake:latest", "model.timeout_s": 10, "model.load_wait_s": 2,
                              "memory.timezone": "UTC"}
    if source == "config":
        values.update({"context.memory": True, "tools.enabled": ["read_file"]})
    write_config(home, values)
    (workdir / "build.log").write_text(BUILD_LOG)
    if source == "AGENTS.md":
        (workdir / "AGENTS.md").write_text('Be brief.\n\ntools: ["read_file", "memory"]\n')
    return ["--tool", "read_file", "--tool", "memory"] if source == "--tool" else []


# --- wisp ask ----------------------------------------------------------------------------------------


def ask(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WISP, "ask", "--json", *args], capture_output=True, text=True, cwd=workdir,
                          timeout=120, env=dict(os.environ))


def events_of(run: subprocess.CompletedProcess) -> list[dict]:
    assert run.returncode == 0, (run.stdout, run.stderr)
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def memory_results(events: list[dict]) -> list[str]:
    out = [e["content"] for e in events if e["event"] == "tool_result" and e["name"] == "memory"]
    assert not any(NOT_ATTACHED in r for r in out), out
    return out


def command(workdir: Path, *args: str) -> dict:
    run = ask(workdir, *args)
    assert run.returncode == 0, (run.stdout, run.stderr)
    data = json.loads(run.stdout.strip().splitlines()[-1])
    assert data["event"] == "command" and not data["error"], data
    return data


@pytest.mark.e2e
@pytest.mark.parametrize("source", SOURCES)
def test_wisp_ask_new_continue_resume(wisp_home: Path, tmp_path: Path, source: str) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    with FakeOllama() as srv:
        flags = setup(wisp_home, workdir, srv, source)
        # a new conversation: entries 1 prompt, 2 read_file call, 3 its output
        srv.push(*first_turn_script(3))
        events = events_of(ask(workdir, *flags, "Look at build.log"))
        check_first_turn(memory_results(events))
        conversation = next(e["conversation"] for e in events if e["event"] == "turn_started")
        assert all("memory" in tool_names(b) for b in srv.chat_bodies if b.get("tools"))
        # --continue: the next process, the same conversation, the same tools
        srv.push(*later_turn_script(3))
        check_later_turn(memory_results(events_of(ask(workdir, *flags, "--continue", "What broke?"))))
        # --resume ID, from another directory: the conversation's own directory and tools
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        srv.push(*later_turn_script(3))
        check_later_turn(memory_results(events_of(ask(elsewhere, *flags, "--resume", str(conversation),
                                                      "And again?"))))
        # the slash commands, at no model cost, in each case
        requests = len(srv.chat_bodies)
        assert "BLUE HERON" in command(workdir, *flags, "--continue", "/fact")["text"]
        assert command(workdir, *flags, "--resume", str(conversation), "/fact decision db = sqlite")["text"]
        assert "fix the link step" in command(workdir, *flags, "--continue", "/task")["text"]
        assert "undefined reference" in command(workdir, *flags, "--resume", str(conversation),
                                                "/show entry 3")["text"]
        report = command(workdir, *flags, "--continue", "/inspect context")["data"]
        layers = {row["key"]: row for row in report["layers"]}
        assert layers["facts"]["items"] >= 2 and layers["tools"]["items"] == 2
        inspect = subprocess.run([WISP, "inspect", "context", "--conversation", str(conversation), "--json"],
                                 capture_output=True, text=True, cwd=workdir, timeout=60)
        assert inspect.returncode == 0, inspect.stderr
        messages = json.loads(inspect.stdout)["request"]["messages"]
        # the rules in the system message; the facts last, where the next prompt begins (the cache keeps the rest)
        assert "memory tool" in messages[0]["content"] and 'decision db = "sqlite"' in messages[-1]["content"]
        assert len(srv.chat_bodies) == requests  # commands and inspect asked the model nothing


# --- the TUI ---------------------------------------------------------------------------------------


async def tui_command(pilot, app: WispApp, line: str) -> None:
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await pilot.pause()


async def memory_answers(app_conversation: int, turn: int) -> list[str]:
    """The memory tool results of ``turn``, read from the store the app wrote."""
    async with await open_store(Config.load().db_path) as store:
        t = await store.get_turn(app_conversation, turn)
        entries = await store.entries(app_conversation, t.id)
    out = [e.content for e in entries if e.kind == "tool_result" and e.tool_name == "memory"]
    assert not any(NOT_ATTACHED in r for r in out), out
    return out


async def tui_views(pilot, app: WispApp) -> None:
    """/fact, /task, /show and /inspect context in the open app."""
    await tui_command(pilot, app, "/fact decision queue = redis")
    await until(pilot, lambda: "queue" in app.query_one("ContextSidebar").facts_panel.plain, "the facts panel")
    await tui_command(pilot, app, "/task")
    for line, screen in (("/show entry 3", "ShowScreen"), ("/inspect context", "InspectContextScreen")):
        await tui_command(pilot, app, line)
        await until(pilot, lambda: type(app.screen).__name__ == screen, line)
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ != screen, f"{line} to close")


@pytest.mark.parametrize("source", SOURCES)
async def test_tui_new_second_turn_continue_resume(wisp_home: Path, tmp_path: Path, source: str) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    with FakeOllama() as srv:
        flags = setup(wisp_home, workdir, srv, source)
        tools = ["read_file", "memory"] if flags else None
        # a new conversation, then its second turn in the same process
        app = WispApp(SessionOptions(workdir=workdir, tools=tools))
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, app)
            srv.push(*first_turn_script(3))
            await send(pilot, app, "Look at build.log")
            srv.push(*later_turn_script(3))
            await send(pilot, app, "What broke?")
            await tui_views(pilot, app)
            conversation = app.session.conversation_id
        check_first_turn(await memory_answers(conversation, 1))
        check_later_turn(await memory_answers(conversation, 2))
        assert all("memory" in tool_names(b) for b in srv.chat_bodies if b.get("tools"))
        # --continue, and --resume ID from another directory
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        for turn, options in ((3, SessionOptions(workdir=workdir, tools=tools, continue_last=True)),
                              (4, SessionOptions(workdir=elsewhere, tools=tools, resume=conversation))):
            app = WispApp(options)
            async with app.run_test(size=SIZE) as pilot:
                await started(pilot, app)
                assert app.session.conversation_id == conversation
                srv.push(*later_turn_script(3))
                await send(pilot, app, f"Turn {turn}: and now?")
                await tui_views(pilot, app)
            check_later_turn(await memory_answers(conversation, turn))
