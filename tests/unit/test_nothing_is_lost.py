"""Nothing is lost, in one process (issue "Nothing runs, leaks, hangs or is lost that shouldn't
be", "Nothing is lost"): streamed text is written as it arrives and kept after a crash, marked; a
turn claims its conversation atomically. Cancelled store writes: test_store_cancellation.py. The
real-process trials (kill -9 at random moments, two `wisp ask --continue` at the same instant) are
in test_nothing_is_lost_trials.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core import streamed
from wisp.core.database import open_store
from wisp.core.session import Session, SessionOptions
from wisp.core.store import RECOVERED_ERROR, RECOVERED_OUTPUT, ConversationBusy, Store
from wisp.core.streamed import STREAMING, StreamedEntry
from wisp.core.transcript import load_page, turn_events
from tests.support.fakes import reply, tool_call, trickled
from tests.support.home import write_config

WISP = str(Path(sys.executable).parent / "wisp")


async def poll(condition, limit_s: float = 10.0, what: str = "the condition"):
    """Await ``condition()`` (an async callable) until it is truthy; returns its value."""
    deadline = time.monotonic() + limit_s
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {limit_s} s")
        await asyncio.sleep(0.01)


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "db" / "wisp.db")
    yield s
    await s.close()


# --- a streamed entry ---------------------------------------------------------------------------


async def test_a_streamed_entry_is_stored_at_its_first_piece_then_in_batches(store: Store) -> None:
    conv = await store.create_conversation("/w")
    turn = await store.begin_turn(conv.id)
    entry = StreamedEntry(store, conv.id, turn.id, "reply", interval=0.1)
    await entry.add("first ")
    stored = await store.entry_by_id(entry.entry.id)
    assert stored.content == "first " and stored.meta == {STREAMING: True}  # stored before it is shown
    started = time.monotonic()
    for i in range(60):  # a stream of about 0.6 s
        await entry.add(f"w{i} ")
        await asyncio.sleep(0.01)
    elapsed = time.monotonic() - started

    async def caught_up():
        return (await store.entry_by_id(entry.entry.id)).content == entry.text
    await poll(caught_up, what="the last batch to be written")  # a pause in the stream is written too
    # one write to create, then at most one per interval (and one that caught up after the stream)
    assert 2 <= entry.writes <= 1 + elapsed / 0.1 + 2, entry.writes
    final = await entry.finish(meta={"cut": True})
    assert final.content == entry.text and final.meta == {"cut": True}
    assert (await store.entry_by_id(entry.entry.id)).meta == {"cut": True}


async def test_an_entry_no_piece_created_is_created_whole_at_the_end(store: Store) -> None:
    conv = await store.create_conversation("/w")
    turn = await store.begin_turn(conv.id)
    entry = StreamedEntry(store, conv.id, turn.id, "tool_result", tool_name="t", tool_call_id="c1")
    await entry.add("")
    assert entry.entry is None
    final = await entry.finish("the result", {"exit_status": 0})
    assert (final.kind, final.content, final.tool_call_id, final.meta) == (
        "tool_result", "the result", "c1", {"exit_status": 0})
    assert entry.writes == 1


async def test_a_reply_is_written_while_it_streams_and_audited_once(ollama_home, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home, srv = ollama_home
    monkeypatch.setattr(streamed, "WRITE_INTERVAL_S", 0.05)
    words = [f"word{i} " for i in range(40)]
    srv.push(trickled(words, 0.01))
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        shown = ""
        grew = False
        async for item in s.run_turn("tell me"):
            if isinstance(item, ev.TextDelta):
                shown += item.text
                replies = [e for e in await s.store.entries(s.conversation_id) if e.kind == "reply"]
                assert len(replies) == 1 and replies[0].meta.get(STREAMING)
                assert shown.startswith(replies[0].content) and replies[0].content  # stored as it streams
                grew = grew or len(replies[0].content) > len(words[0])
        assert grew, "the reply was not rewritten while it streamed"
        entries = await s.store.entries(s.conversation_id)
        assert [(e.kind, e.content) for e in entries] == [("prompt", "tell me"), ("reply", "".join(words))]
        assert entries[1].meta == {} and entries[1].audit_ref is not None
        responses = [e for e in s.audit.iter_events() if e["kind"] == "response"]
        assert len(responses) == 1 and responses[0]["payload"]["content"] == "".join(words)


async def test_a_commands_output_is_written_while_it_runs(ollama_home, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    home, srv = ollama_home
    monkeypatch.setattr(streamed, "WRITE_INTERVAL_S", 0.05)
    (tmp_path / "slow.py").write_text(
        "import sys, time\nfor i in range(30):\n    print(f'line {i}', flush=True)\n    time.sleep(0.01)\n")
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.name": "m",
                        "tools.enabled": ["run_command"], "tools.run_command.allow": [f"{sys.executable} slow.py"]})
    srv.push(reply(tool_call("run_command", {"command": f"{sys.executable} slow.py"}), finish="tool_calls"),
             reply("done"))
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        shown = ""
        seen_stored = False
        async for item in s.run_turn("run it"):
            if isinstance(item, ev.ToolOutput):
                shown += item.text
                results = [e for e in await s.store.entries(s.conversation_id) if e.kind == "tool_result"]
                assert len(results) == 1 and results[0].meta.get(STREAMING)
                assert shown.startswith(results[0].content) and results[0].content
                seen_stored = True
        assert seen_stored
        result = [e for e in await s.store.entries(s.conversation_id) if e.kind == "tool_result"]
        assert len(result) == 1 and STREAMING not in result[0].meta and result[0].meta["exit_status"] == 0
        assert "line 29" in result[0].content and "[exit status 0]" in result[0].content
        assert len([e for e in s.audit.iter_events() if e["kind"] == "tool.result"]) == 1


async def test_esc_during_a_streamed_reply_and_command_ends_each_entry_once(ollama_home, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home, srv = ollama_home
    monkeypatch.setattr(streamed, "WRITE_INTERVAL_S", 0.05)
    (tmp_path / "slow.py").write_text(
        "import time\nfor i in range(1000):\n    print(f'line {i}', flush=True)\n    time.sleep(0.01)\n")
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.name": "m",
                        "tools.enabled": ["run_command"], "tools.run_command.allow": [f"{sys.executable} slow.py"]})
    srv.push(trickled(["one ", "two ", "three "] + ["more "] * 500, 0.01),
             reply(tool_call("run_command", {"command": f"{sys.executable} slow.py"}), finish="tool_calls"))
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        for prompt, stop_at in (("talk", ev.TextDelta), ("run", ev.ToolOutput)):
            seen = 0

            async def consume() -> None:
                nonlocal seen
                async for item in s.run_turn(prompt):
                    if isinstance(item, stop_at):
                        seen += 1
                        if seen == 20:  # Esc: the task is cancelled while the turn awaits its next piece
                            asyncio.current_task().cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.ensure_future(consume())
        turns = await s.store.turns(s.conversation_id)
        assert [t.state for t in turns] == ["stopped", "stopped"]
        entries = await s.store.entries(s.conversation_id)
        assert [e.kind for e in entries] == ["prompt", "reply", "prompt", "tool_call", "tool_result"]
        answer, result = entries[1], entries[4]
        assert answer.meta == {"partial": True, "reason": "stopped"} and answer.content.startswith("one two")
        assert STREAMING not in result.meta and result.meta["stopped"] and "line 5" in result.content
        events = list(s.audit.iter_events())
        assert len([e for e in events if e["kind"] == "response"]) == 1
        assert len([e for e in events if e["kind"] == "tool.result"]) == 1
    assert not [t for t in asyncio.all_tasks() if "_write_batches" in repr(t)]


async def test_abandoned_turn_events_leave_no_writer_running(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(trickled(["a "] * 300, 0.01))
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        events = s.run_turn("go")
        async for item in events:
            if isinstance(item, ev.TextDelta):
                break
        assert [t for t in asyncio.all_tasks() if "_write_batches" in repr(t)]
        await events.aclose()  # the view went away
        assert not [t for t in asyncio.all_tasks() if "_write_batches" in repr(t) and not t.done()]


# --- after a crash --------------------------------------------------------------------------------


async def test_what_was_streaming_at_a_crash_is_kept_and_shown_stopped(store: Store) -> None:
    conv = await store.create_conversation("/w")
    turn = await store.begin_turn(conv.id)
    await store.add_entry(conv.id, turn.id, "prompt", "go")
    await store.add_entry(conv.id, turn.id, "tool_call", "{}", tool_name="run_command", tool_call_id="c1")
    await store.add_entry(conv.id, turn.id, "tool_result", "line 1\nline 2\n", tool_name="run_command",
                          tool_call_id="c1", meta={STREAMING: True})
    await store.add_entry(conv.id, turn.id, "reply", "the words so far", meta={STREAMING: True})
    # its process died (kill -9): the turn is open, owned by a dead pid
    await store.db.execute("UPDATE turns SET owner = ? WHERE id = ?",
                           (f"{socket.gethostname()}:{dead_pid()}", turn.id))
    page = await load_page(store, conv.id)
    before = turn_events(page.turns[0])  # not yet recovered: what had arrived, still running
    assert ev.ToolOutput("c1", "line 1\nline 2\n") in before
    assert not any(isinstance(e, (ev.ToolResult, ev.TurnEnded)) for e in before)

    async with await open_store(store.path) as reopened:  # wisp starts again
        assert await reopened.recover_open_turns() == [turn.id]
    page = await load_page(store, conv.id)
    view = page.turns[0]
    assert view.state == "stopped" and view.error == RECOVERED_ERROR
    result, answer = view.entries[2], view.entries[3]
    assert result.content == "line 1\nline 2\n\n" + RECOVERED_OUTPUT
    assert result.meta == {"partial": True, "reason": "exited", "error": True}
    assert answer.content == "the words so far" and answer.meta == {"partial": True, "reason": "exited"}
    events = turn_events(view)
    assert [type(e).__name__ for e in events] == [
        "TurnStarted", "ToolCall", "ToolResult", "TextDelta", "ReplyRecorded", "TurnEnded"]
    assert not events[2].ok and events[4].partial and events[5] == ev.TurnEnded(1, "stopped")
    assert events[3] == ev.TextDelta("the words so far")


# --- the atomic claim ---------------------------------------------------------------------------------


async def test_begin_turn_claims_the_conversation(store: Store) -> None:
    conv = await store.create_conversation("/w")
    mine = await store.begin_turn(conv.id)  # this process's own open turn does not block it
    await store.end_turn(mine.id, "done")
    held = await store.begin_turn(conv.id)
    host = socket.gethostname()
    for owner, busy in [(f"{host}:{os.getppid()}", True),     # a live other process
                        (f"{host}:{dead_pid()}", False),     # a process that died
                        (f"elsewhere.invalid:{os.getppid()}", False),  # another host
                        (None, False)]:
        await store.db.execute("UPDATE turns SET owner = ?, state = 'open' WHERE id = ?", (owner, held.id))
        if busy:
            with pytest.raises(ConversationBusy, match=f"process {os.getppid()}") as info:
                await store.begin_turn(conv.id)
            assert info.value.owner == owner and info.value.conversation_id == conv.id
            assert await store.count_turns(conv.id) == 2  # nothing was added
        else:
            extra = await store.begin_turn(conv.id)
            await store.end_turn(extra.id, "done")
        assert not store.db.in_transaction


async def test_a_claim_that_has_not_seen_the_last_turn_is_refused_and_adds_nothing(store: Store) -> None:
    """A view that showed the conversation up to turn ``seen`` may not claim it once another wisp has
    ended a later turn: it would send the model a turn it never showed (the second window's race)."""
    from wisp.core.store import ConversationMoved

    conv = await store.create_conversation("/w")
    assert (await store.begin_turn(conv.id, seen=0)).number == 1  # a new conversation: nothing to see
    await store.db.execute("UPDATE turns SET state = 'done' WHERE conversation_id = ?", (conv.id,))
    for seen in (0, -3):
        with pytest.raises(ConversationMoved, match="since this window showed turn") as info:
            await store.begin_turn(conv.id, seen=seen)
        assert (info.value.last, info.value.seen) == (1, seen)
        assert await store.count_turns(conv.id) == 1 and not store.db.in_transaction
    second = await store.begin_turn(conv.id, seen=1)  # it showed turn 1: the claim goes through
    await store.end_turn(second.id, "done")
    assert second.number == 2 and (await store.begin_turn(conv.id)).number == 3  # no seen: no check


def test_wisp_ask_continue_says_at_once_that_another_wisp_runs_the_conversation(wisp_home: Path,
                                                                                tmp_path: Path) -> None:
    """Found by a new user: the second wisp first waited for an endpoint the first kept busy, and said
    nothing. It must say so before it makes any request (README: "the second is told the conversation
    is busy")."""
    from tests.support.fakes import FakeOllama, fault, text

    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5,
                                 "model.reply_timeout_s": 60})
        srv.push(fault.stall(text("Once upon a time")))
        env = os.environ.copy()
        first = subprocess.Popen([WISP, "ask", "a story"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not srv.chat_bodies and time.monotonic() < deadline:  # poll: the first turn is streaming
                time.sleep(0.02)
            assert srv.chat_bodies, "the first wisp never asked"
            before = len(srv.requests)
            second = subprocess.run([WISP, "ask", "--continue", "hi", "--json"], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=30)
            after = len(srv.requests)
        finally:
            first.kill()
            first.communicate()
    assert second.returncode == 4  # busy: not an endpoint error (3), and nothing was sent
    assert "has a turn running in another wisp" in second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["kind"] == "busy"
    assert after == before  # not one request: no model list, no probe, no chat
