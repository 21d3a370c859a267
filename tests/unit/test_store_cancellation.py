"""Esc or quit during a store write never wedges the database (issue "Nothing runs, leaks, hangs or
is lost that shouldn't be", "Nothing is lost"): a write cancelled at every await point, more than 100
times, and while its BEGIN IMMEDIATE waits for another process's lock, never leaves the connection
inside a transaction, and the next write succeeds; opening (migrating) a database cancelled at every
await point leaves one that opens."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiosqlite
import pytest

from wisp.core.database import open_store
from wisp.core.store import Store


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


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "db" / "wisp.db")
    yield s
    await s.close()


# --- cancellation at every await point ---------------------------------------------------------------


class Canceller:
    """Counts the statements queued on aiosqlite connections and cancels the running task at the
    ``at``-th: after queueing it (the statement still runs on the connection's thread) or before."""

    def __init__(self) -> None:
        self.count = 0
        self.at = 0
        self.after_queueing = True
        self.sql: list[str] = []
        original = aiosqlite.Connection._execute

        async def spy(conn, fn, *args, **kwargs):
            self.count += 1
            self.sql.append(str(args[0]) if args else getattr(fn, "__name__", "?"))
            if self.count == self.at:
                asyncio.current_task().cancel()
                if not self.after_queueing:
                    await asyncio.sleep(0)  # the cancellation lands here, before the statement is queued
            return await original(conn, fn, *args, **kwargs)

        self.spy = spy

    def arm(self, at: int, after_queueing: bool) -> None:
        self.count, self.at, self.after_queueing, self.sql = 0, at, after_queueing, []


async def _settled(store: Store) -> bool:
    """Whether the store's connection is inside a transaction, once every statement queued has run."""
    async with store.db.execute("SELECT 1") as cur:  # the connection's thread runs statements in order
        await cur.fetchone()
    return store.db.in_transaction


async def test_a_write_cancelled_at_every_await_point_never_wedges_the_store(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    conv = await store.create_conversation("/w")
    turn = await store.begin_turn(conv.id)
    first = await store.add_entry(conv.id, turn.id, "prompt", "p")
    canceller = Canceller()
    monkeypatch.setattr(aiosqlite.Connection, "_execute", canceller.spy)

    async def feature_write() -> None:  # a feature's own table, through the store's transaction
        async with store.transaction() as db:
            await db.execute("INSERT OR REPLACE INTO token_calibration (model, ratio, samples, updated_at)"
                             " VALUES ('m', 1.0, 1, 'now')")
            await db.execute("UPDATE conversations SET title = 'x' WHERE id = ?", (conv.id,))

    async def turn_cycle() -> None:
        t = await store.begin_turn(conv.id)
        await store.end_turn(t.id, "done")

    writes = {
        "add_entry": lambda: store.add_entry(conv.id, turn.id, "notice", "n"),
        "update_entry": lambda: store.update_entry(first.id, content="q", meta={"k": 1}),
        "begin/end_turn": turn_cycle,
        "create_conversation": lambda: store.create_conversation("/v"),
        "set_entry_audit": lambda: store.set_entry_audit(first.id, None),
        "recover_open_turns": store.recover_open_turns,
        "feature transaction": feature_write,
    }
    cancelled = wedged = 0
    points: dict[str, int] = {}
    for name, write in writes.items():  # how many statements each write queues
        canceller.arm(0, True)
        await write()
        points[name] = canceller.count
    trials = [(name, at, after) for name in writes for at in range(1, points[name] + 1)
              for after in (True, False)]
    while len(trials) < 100:
        trials += trials
    for name, at, after in trials:
        canceller.arm(at, after)
        task = asyncio.ensure_future(writes[name]())
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
        canceller.arm(0, True)
        if await _settled(store):
            wedged += 1
            await store.db.execute("ROLLBACK")  # so that one failure does not hide the next
            continue
        await store.add_entry(conv.id, turn.id, "notice", "the next write")  # succeeds
    print(f"\nstore writes cancelled at every await point: {len(trials)} trials over {len(writes)} kinds of "
          f"write ({points} statements each), {cancelled} cancelled, {wedged} left in a transaction")
    assert cancelled >= 100, (cancelled, points)
    assert wedged == 0, f"{wedged} of {len(trials)} cancellations left the connection in a transaction"
    async with store.db.execute("PRAGMA integrity_check") as cur:
        assert (await cur.fetchone())[0] == "ok"


async def test_a_write_cancelled_while_begin_waits_for_another_process(store: Store,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    conv = await store.create_conversation("/w")
    canceller = Canceller()
    monkeypatch.setattr(aiosqlite.Connection, "_execute", canceller.spy)
    other = await aiosqlite.connect(store.path, isolation_level=None)
    try:
        wedged = 0
        for i in range(20):
            await other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            canceller.arm(0, True)
            task = asyncio.ensure_future(store.add_entry(conv.id, None, "notice", f"n{i}"))

            async def begin_queued():
                return "BEGIN IMMEDIATE" in canceller.sql
            await poll(begin_queued, what="the BEGIN to be waiting")
            task.cancel()  # Esc while BEGIN IMMEDIATE waits for the lock
            await other.execute("COMMIT")  # the other process is done: the BEGIN now runs
            with pytest.raises(asyncio.CancelledError):
                await task
            if await _settled(store):
                wedged += 1
                await store.db.execute("ROLLBACK")
            await store.add_entry(conv.id, None, "notice", "the next write")
        print(f"\nwrites cancelled while BEGIN waits for another connection's lock: 20, {wedged} left in a "
              "transaction")
        assert wedged == 0, f"{wedged} of 20 cancellations left the connection in a transaction"
        # and the other process can write: nothing holds the lock
        await other.execute("BEGIN IMMEDIATE")
        await other.execute("COMMIT")
    finally:
        await other.close()


async def test_opening_cancelled_at_every_await_point_leaves_a_database_that_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canceller = Canceller()
    monkeypatch.setattr(aiosqlite.Connection, "_execute", canceller.spy)
    canceller.arm(0, True)
    s = await open_store(tmp_path / "count.db")
    points = canceller.count  # the statements opening and migrating a new file queues
    steps = await s.migrations()
    await s.close()
    assert points > 20
    for at in range(1, points + 1):
        path = tmp_path / f"open{at}.db"
        canceller.arm(at, at % 2 == 0)
        with pytest.raises(asyncio.CancelledError):
            await open_store(path)
        canceller.arm(0, True)
        s = await open_store(path)  # the next open migrates what the cancelled one did not
        try:
            assert await s.migrations() == steps
            assert not await _settled(s)
            async with s.db.execute("PRAGMA integrity_check") as cur:
                assert (await cur.fetchone())[0] == "ok"
        finally:
            await s.close()
