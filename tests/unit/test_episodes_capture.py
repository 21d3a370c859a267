"""Capture: every exchange of a real Session against the fake endpoints, with its origin and outcome."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.database import open_store
from wisp.core.commands import run_command
from wisp.core.config import Config
from wisp.core.episodes.capture import (MAX_TEXT_BYTES, cap_text, finalize_pending, local_sender, project_name,
                                        workspace_for)
from wisp.core.episodes.query import _EX_COLS, _exchange
from wisp.core.session import Session, SessionOptions
from wisp.core.store import Store
from tests.support.home import write_config
from tests.support.fakes import FakeOllama, fault, reply, text, thinking, tool_call


async def open_session(workdir: Path, **opts) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, **opts))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


async def exchanges(store: Store) -> list:
    async with store.db.execute(f"SELECT {_EX_COLS} FROM episode_exchanges x ORDER BY x.id") as cur:
        return [_exchange(r) for r in await cur.fetchall()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "website"
    (root / ".git").mkdir(parents=True)
    sub = root / "src" / "pages"
    sub.mkdir(parents=True)
    return sub


async def test_a_completed_exchange_keeps_its_origin(ollama_home, project: Path) -> None:
    home, srv = ollama_home
    srv.push(reply(thinking("they want a date"), text("Let's launch on Friday.")))
    async with await open_session(project, transport="ask") as s:
        await run(s, "when should we launch?")
        [x] = await exchanges(s.store)
        turn = (await s.store.turns(s.conversation_id))[0]
    assert x.workspace == "website"  # the git top-level's name, not the subdirectory's
    assert (x.transport, x.channel, x.thread) == ("ask", str(s.conversation_id), "")
    assert x.conversation_id == s.conversation_id and x.turn_number == 1
    assert x.sender == local_sender() and x.sender
    assert x.model == "wisp-fake:latest" and srv.base_url in x.endpoint
    assert x.outcome == "completed" and x.error is None
    assert x.request == "when should we launch?"
    assert x.reply == "Let's launch on Friday."  # no reasoning
    assert x.requested_at == turn.started_at and x.finished_at >= x.requested_at
    assert x.finished_at.endswith("Z") and len(x.finished_at) == len(x.requested_at)


async def test_tool_calls_and_results_are_not_captured(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "notes.txt").write_text("SECRET TOOL OUTPUT 4242\n")
    srv.push(reply(text("Let me look."), tool_call("read_file", {"path": "notes.txt"}), finish="tool_calls"),
             reply(text("The file holds a number.")))
    async with await open_session(tmp_path, transport="tui") as s:
        await run(s, "what is in notes.txt?")
        [x] = await exchanges(s.store)
    assert x.request == "what is in notes.txt?" and x.reply == "The file holds a number."
    assert x.transport == "tui"
    assert "4242" not in x.request + x.reply and "read_file" not in x.reply


async def test_slash_commands_are_not_captured(ollama_home, tmp_path: Path) -> None:
    async with await open_session(tmp_path) as s:
        await run_command(s, "/help")
        await run_command(s, "/config get memory.enabled")
        await run_command(s, "/memory")
        assert await exchanges(s.store) == []


async def test_failed_and_timed_out_outcomes(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    Config.load().set("model.timeout_s", "0.5")
    srv.push(fault.status(500, {"error": "the model crashed"}))
    async with await open_session(tmp_path) as s:
        await run(s, "first")
        srv.push(fault.stall(text("partial answer")))
        events = await run(s, "second")
        assert any(isinstance(e, ev.Error) and e.kind == "timeout" for e in events), events
        failed, timed_out = await exchanges(s.store)
    assert failed.outcome == "failed" and "crashed" in failed.error
    assert timed_out.outcome == "timed out" and timed_out.reply == "partial answer"


async def test_a_stopped_turn_is_captured_as_stopped(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.stall(text("the first words ")))
    async with await open_session(tmp_path) as s:
        got_text = asyncio.Event()

        async def consume() -> None:
            async for item in s.run_turn("tell me a story"):
                if isinstance(item, ev.TextDelta):
                    got_text.set()

        task = asyncio.create_task(consume())
        await got_text.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        [x] = await exchanges(s.store)
        srv.stop()
    assert x.outcome == "stopped" and x.reply == "the first words " and x.request == "tell me a story"


async def test_request_and_reply_are_capped_at_64_kib_and_marked(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    big = "ü" * 40_000  # 80,000 bytes
    srv.push(reply(text("y" * 70_000)))
    async with await open_session(tmp_path) as s:
        await run(s, big)
        [x] = await exchanges(s.store)
    assert x.request_truncated and x.request_bytes == 80_000
    assert len(x.request.encode()) <= MAX_TEXT_BYTES and x.request.startswith("ü" * 1000)
    assert x.request.endswith("of 80000 bytes kept]") and "\ufffd" not in x.request
    assert x.reply_truncated and x.reply_bytes == 70_000 and len(x.reply.encode()) <= MAX_TEXT_BYTES
    assert "truncated by wisp" in x.reply


def test_cap_text_edges() -> None:
    assert cap_text("short") == ("short", 5, False)
    exact = "a" * MAX_TEXT_BYTES
    assert cap_text(exact) == (exact, MAX_TEXT_BYTES, False)
    stored, total, cut = cap_text(exact + "b")
    assert cut and total == MAX_TEXT_BYTES + 1 and len(stored.encode()) <= MAX_TEXT_BYTES
    stored, _, _ = cap_text("\ud800 lone surrogate")
    stored.encode("utf-8")  # storable


async def test_disabling_memory_stops_capture_from_the_next_turn(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await open_session(tmp_path) as s:
        await run(s, "captured")
        Config.load().set("memory.enabled", "off")  # as `wisp config set` in another process would
        await run(s, "not captured")
        Config.load().set("memory.enabled", "on")
        await run(s, "captured again")
        got = [x.request for x in await exchanges(s.store)]
    assert got == ["captured", "captured again"]


async def test_config_workspace_wins(ollama_home, project: Path) -> None:
    home, srv = ollama_home
    Config.load().set("memory.workspace", "personal")
    async with await open_session(project) as s:
        await run(s, "hi")
        [x] = await exchanges(s.store)
    assert x.workspace == "personal"


def test_workspace_names(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    assert project_name(tmp_path / "repo" / "a" / "b") == "repo"
    assert project_name(tmp_path / "plain") == "plain"
    wt = tmp_path / "worktree"
    wt.mkdir()
    (wt / ".git").write_text("gitdir: /elsewhere\n")  # a git worktree has a .git file
    assert project_name(wt) == "worktree"
    cfg = Config(tmp_path / "c.json", {"memory.workspace": "~/work/website"})
    assert workspace_for(tmp_path / "plain", cfg) == "website"


def test_a_turn_cut_short_by_a_killed_process_becomes_stopped(ollama_home, tmp_path: Path) -> None:
    """wisp is killed (SIGKILL) while the model answers: the exchange was saved
    as pending at the request, and the next run marks it stopped."""
    home, srv = ollama_home
    srv.push(fault.stall(text("half an ans")))
    wisp = str(Path(sys.executable).parent / "wisp")
    proc = subprocess.Popen([wisp, "ask", "a question that dies"], cwd=tmp_path, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not srv.chat_bodies:  # wait for the condition: the request reached the model
            assert proc.poll() is None and time.monotonic() < deadline, "wisp ask never sent its request"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    async def check() -> None:
        async with await open_store(home / "data" / "wisp.db") as store:
            [x] = await exchanges(store)
            assert x.outcome is None and x.request == "a question that dies"  # pending
            await store.recover_open_turns()
            assert await finalize_pending(store) == 1
            [x] = await exchanges(store)
            assert x.outcome == "stopped" and x.transport == "ask" and x.finished_at

    asyncio.run(check())
