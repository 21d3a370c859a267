"""A turn always ends, whatever moment it is cancelled: Esc right after Enter lands at any await point
of the turn's start (the claim of the conversation, recording the prompt, its audit link, the
TurnStarted event) or later, and the turn is closed as stopped, never left open for another wisp to be
refused by. Real store (SQLite file), real audit log, the fake Ollama endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiosqlite
import pytest

from wisp.core import events as ev
from wisp.core.session import Session, SessionOptions
from wisp.core.store import RECOVERED_ERROR


async def open_session(workdir: Path) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir))
    assert await session.connect(), session.endpoint_error
    return session


class CancelAt:
    """Counts the statements queued on aiosqlite connections while armed and, at the ``at``-th,
    cancels ``target`` (the turn's task: Esc), then lets the statement run, so that the cancellation
    lands at whatever the turn awaits there (a statement, a BEGIN, a COMMIT)."""

    def __init__(self) -> None:
        self.target: asyncio.Task | None = None
        self.at = 0
        self.count = 0
        self.fired = False
        self.sql: list[str] = []
        original = aiosqlite.Connection._execute

        async def spy(conn, fn, *args, **kwargs):
            if self.target is not None:
                self.count += 1
                self.sql.append(str(args[0]).split()[0] if args else getattr(fn, "__name__", "?"))
                if self.count == self.at and not self.target.done():
                    self.fired = True
                    self.target.cancel()
            return await original(conn, fn, *args, **kwargs)

        self.spy = spy

    def arm(self, target: asyncio.Task, at: int) -> None:
        self.target, self.at, self.count, self.fired, self.sql = target, at, 0, False, []

    def disarm(self) -> None:
        self.target = None


async def open_turns(session: Session) -> list[tuple]:
    return list(await session.store.db.execute_fetchall("SELECT id, number, state FROM turns WHERE state = 'open'"))


async def test_a_turn_cancelled_at_every_await_point_is_ended_and_leaves_no_open_turn(
        ollama_home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, srv = ollama_home
    cancel = CancelAt()
    monkeypatch.setattr(aiosqlite.Connection, "_execute", cancel.spy)
    async with await open_session(tmp_path) as s:
        conv = await s.ensure_conversation()
        await s.store.set_conversation_title(conv, "t")  # the first turn's title write is not part of a turn
        trials = stopped = left_open = 0
        start_points = 0
        where: list = []
        at = 0
        while True:
            at += 1
            started = asyncio.Event()

            async def one_turn() -> list:
                out = []
                async for item in s.run_turn(f"prompt {at}"):
                    out.append(item)
                    if isinstance(item, ev.TurnStarted):
                        started.set()
                return out

            task = asyncio.ensure_future(one_turn())
            cancel.arm(task, at)
            try:
                events = await task
            except asyncio.CancelledError:
                events = None
            fired = cancel.fired
            if not started.is_set() and fired:
                start_points += 1
            cancel.disarm()
            rows = await open_turns(s)
            if rows:
                left_open += 1
                where.append((at, cancel.sql[at - 1] if len(cancel.sql) >= at else None, started.is_set()))
                await s.store.db.execute("UPDATE turns SET state = 'stopped' WHERE state = 'open'")
            if not fired:  # the whole turn ran before the at-th statement: every point was tried
                assert events is not None and events[-1] == ev.TurnEnded(events[0].turn, "done")
                break
            trials += 1
            assert events is None, f"cancelled at statement {at} ({cancel.sql[-1:]}), the turn still ran"
            stopped += 1
            assert at < 400, "a turn that never ends without a cancellation"
        states = [r[0] for r in await s.store.db.execute_fetchall("SELECT state FROM turns ORDER BY id")]
    print(f"\ncancelled at each of {trials} statements of a turn ({start_points} before TurnStarted): "
          f"{left_open} left an open turn; states {sorted(set(states))}")
    assert trials >= 8 and start_points >= 4, (trials, start_points)
    assert left_open == 0, f"{left_open} of {trials} cancellations left the turn open: {where}"
    assert set(states) <= {"stopped", "done"}


async def test_events_abandoned_right_after_turn_started_end_the_turn(ollama_home, tmp_path: Path) -> None:
    """A view that stops reading at TurnStarted (Esc while it draws the prompt) closes the events; the
    turn is stopped at once, and the next turn (of this wisp or another) is not refused."""
    home, srv = ollama_home
    async with await open_session(tmp_path) as s:
        events = s.run_turn("hello")
        first = await events.__anext__()
        assert isinstance(first, ev.TurnStarted)
        await events.aclose()
        assert await open_turns(s) == []
        turn = (await s.store.turns(s.conversation_id))[0]
        assert turn.state == "stopped"
        again = [item async for item in s.run_turn("hello again")]
        assert again[-1] == ev.TurnEnded(2, "done")


async def test_events_abandoned_mid_reply_keep_the_reply_partial_in_the_store_and_the_audit_log(
        ollama_home, tmp_path: Path) -> None:
    """A view that stops reading while the reply streams: what had arrived is recorded as a stopped reply
    would be (partial, no longer streaming), with its audit event, not left as a streaming entry that no
    recovery visits (the turn is not open) and that the audit log never gets."""
    from wisp.core.audit import AuditLog
    from tests.support.fakes import trickled

    home, srv = ollama_home
    srv.push(trickled([f"w{k} " for k in range(200)], 0.005))
    async with await open_session(tmp_path) as s:
        events = s.run_turn("hello")
        seen = ""
        async for item in events:
            if isinstance(item, ev.TextDelta):
                seen += item.text
                if len(seen) >= 40:
                    break
        await events.aclose()
        assert await open_turns(s) == []
        turn = (await s.store.turns(s.conversation_id))[0]
        replies = [e for e in await s.store.entries(s.conversation_id, turn.id) if e.kind == "reply"]
        audit_dir = s.config.audit_dir
    assert turn.state == "stopped" and len(replies) == 1
    kept = replies[0]
    assert kept.content.startswith(seen) and kept.meta.get("partial") and not kept.meta.get("streaming"), kept
    audited = [e for e in AuditLog(audit_dir).iter_events() if e["kind"] == "response"]
    assert [e["payload"]["content"] for e in audited] == [kept.content]
    assert kept.audit_event_id == audited[0]["id"]


async def test_a_turn_this_process_left_open_is_stopped_by_its_next_claim(ollama_home, tmp_path: Path) -> None:
    """A turn whose ending was lost (open, owned by this live process, no longer running) would refuse
    every other wisp until this one exits; the next claim of the conversation stops it."""
    home, srv = ollama_home
    async with await open_session(tmp_path) as s:
        conv = await s.ensure_conversation()
        await s.store.db.execute(
            "INSERT INTO turns (conversation_id, number, state, started_at, owner) VALUES (?, 1, 'open', 'x', ?)",
            (conv, s.store._owner))
        turn = await s.store.begin_turn(conv)
        old = await s.store.get_turn(conv, 1)
        assert old.state == "stopped" and old.error == RECOVERED_ERROR
        assert [r[0] for r in await open_turns(s)] == [turn.id]  # only the turn it runs now
        await s.store.end_turn(turn.id, "done")


async def test_a_claim_never_stops_a_turn_another_open_store_of_this_process_runs(tmp_path: Path) -> None:
    """Two stores of one file in one process (wisp mcp serve keeps a session per conversation): the
    second's claim leaves the first's running turn open; once the first store is closed, its turn
    no longer runs, and the next claim stops it."""
    from wisp.core.database import open_store

    path = tmp_path / "wisp.db"
    first, second = await open_store(path), await open_store(path)
    try:
        conv = (await first.create_conversation(str(tmp_path))).id
        running = await first.begin_turn(conv)
        mine = await second.begin_turn(conv)
        assert (await second.turn_by_id(running.id)).state == "open"
        await second.end_turn(mine.id, "done")
        await first.close()
        again = await second.begin_turn(conv)
        assert (await second.turn_by_id(running.id)).state == "stopped"
        await second.end_turn(again.id, "done")
    finally:
        await second.close()
