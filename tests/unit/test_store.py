"""The SQLite store (issue "wisp runs end to end", "Storage and audit log")."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
import time

import pytest

from wisp.core import store as store_mod
from wisp.core.audit import AuditLog, AuditRef
from wisp.core.database import FEATURE_MIGRATIONS, open_store
from wisp.core.migrations import LEGACY_VERSION, NAMED_VERSION, sql_step
from wisp.core.store import (
    MIGRATIONS,
    RECOVERED_ERROR,
    Store,
    StoreError,
)

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "realhome"))
    monkeypatch.setenv("WISP_HOME", str(tmp_path / "wisp"))


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "db" / "wisp.db")
    yield s
    await s.close()


def pragma(path, name):
    con = sqlite3.connect(path)
    try:
        return con.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        con.close()


# --- opening ---------------------------------------------------------------------------


async def test_open_creates_private_file_with_wal_and_version(tmp_path):
    old = os.umask(0)
    try:
        s = await Store.open(tmp_path / "a" / "b" / "wisp.db")
    finally:
        os.umask(old)
    path = tmp_path / "a" / "b" / "wisp.db"
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
        async with s.db.execute("PRAGMA journal_mode") as cur:
            assert (await cur.fetchone())[0] == "wal"
        async with s.db.execute("PRAGMA busy_timeout") as cur:
            assert (await cur.fetchone())[0] == 5000
        async with s.db.execute("PRAGMA foreign_keys") as cur:
            assert (await cur.fetchone())[0] == 1
        assert await s.migrations() == {m.key for m in MIGRATIONS}
        c = await s.create_conversation("/w")
        await s.add_entry(c.id, None, "notice", "hi")
        wal = path.with_name("wisp.db-wal")
        assert wal.exists() and stat.S_IMODE(wal.stat().st_mode) == 0o600
    finally:
        await s.close()
    assert pragma(path, "journal_mode") == "wal"  # persistent
    assert pragma(path, "user_version") == NAMED_VERSION


async def test_async_context_manager(tmp_path):
    async with await Store.open(tmp_path / "w.db") as s:
        await s.create_conversation("/w")
    with pytest.raises(ValueError):  # closed
        await s.get_conversation(1)


V2 = """
ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
CREATE TABLE test_pins (id INTEGER PRIMARY KEY, conversation_id INTEGER REFERENCES conversations (id),
                    name TEXT NOT NULL);
CREATE TRIGGER test_pins_touch AFTER INSERT ON test_pins BEGIN
    UPDATE conversations SET updated_at = 'x' WHERE id = NEW.conversation_id;
    UPDATE conversations SET title = 'y' WHERE id = NEW.conversation_id;
END;
"""


PINS = sql_step("pins", "m001_pins", V2)


async def test_a_feature_step_runs_once_and_whole(tmp_path):
    path = tmp_path / "w.db"
    async with await Store.open(path) as s:
        c = await s.create_conversation("/w", title="kept")
    async with await Store.open(path, [PINS]) as s:
        assert "pins.m001_pins" in await s.migrations()
        assert (await s.get_conversation(c.id)).title == "kept"
        async with s.transaction() as db:
            await db.execute("INSERT INTO test_pins (conversation_id, name) VALUES (?, 'n')", (c.id,))
        async with s.db.execute("SELECT pinned, title, updated_at FROM conversations") as cur:
            assert tuple(await cur.fetchone()) == (0, "y", "x")  # the trigger came whole
    # opening again runs nothing more (a second ALTER would fail)
    async with await Store.open(path, [PINS]) as s:
        assert "pins.m001_pins" in await s.migrations()


async def test_every_owner_keeps_its_own_steps(tmp_path):
    async with await open_store(tmp_path / "w.db") as s:
        done = await s.migrations()
    owners = {k.split(".")[0] for k in done}
    assert owners == {"store", "context", "episodes", "edits"}
    assert done == {m.key for m in (*MIGRATIONS, *FEATURE_MIGRATIONS)}
    assert all(m.name.startswith("m0") for m in (*MIGRATIONS, *FEATURE_MIGRATIONS))


def _legacy_database(path, version: int) -> None:
    """A database as a wisp of the numbered scheme left it at ``version``."""
    async def make() -> None:
        import aiosqlite
        steps = sorted((m for m in (*MIGRATIONS, *FEATURE_MIGRATIONS) if (m.legacy_version or 99) <= version),
                       key=lambda m: m.legacy_version)
        async with aiosqlite.connect(path, isolation_level=None) as db:
            for step in steps:
                await step.apply(db)
            await db.execute(f"PRAGMA user_version = {version}")
    return make()


@pytest.mark.parametrize("version", [1, 2, 3, LEGACY_VERSION])
async def test_a_numbered_database_is_taken_over_without_running_a_step_twice(tmp_path, version):
    path = tmp_path / "w.db"
    await _legacy_database(path, version)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO conversations (workdir, created_at, updated_at) VALUES ('/old', 'a', 'b')")
    con.commit()
    con.close()
    async with await open_store(path) as s:  # an ALTER or CREATE run twice would fail here
        assert (await s.get_conversation(1)).workdir == "/old"
        assert await s.migrations() == {m.key for m in (*MIGRATIONS, *FEATURE_MIGRATIONS)}
        await s.set_conversation_tools(1, ["read_file"])
    assert pragma(path, "user_version") == NAMED_VERSION


async def test_version_zero_file_is_migrated(tmp_path):
    path = tmp_path / "w.db"
    sqlite3.connect(path).close()  # an empty database, user_version 0
    assert pragma(path, "user_version") == 0
    async with await open_store(path) as s:
        assert await s.migrations() == {m.key for m in (*MIGRATIONS, *FEATURE_MIGRATIONS)}
        assert (await s.create_conversation("/w")).id == 1


async def test_failed_migration_leaves_the_database_as_it_was(tmp_path):
    path = tmp_path / "w.db"
    async with await Store.open(path):
        pass
    bad = sql_step("pins", "m001_bad", "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1);")
    with pytest.raises(StoreError, match="migration pins.m001_bad failed"):
        await Store.open(path, [bad])
    con = sqlite3.connect(path)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    steps = {r[0] for r in con.execute("SELECT owner || '.' || name FROM _migrations")}
    con.close()
    assert "half_done" not in names and "pins.m001_bad" not in steps


async def test_newer_db_is_refused(tmp_path):
    path = tmp_path / "w.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {LEGACY_VERSION + 5}")
    con.close()
    with pytest.raises(StoreError, match="newer than this wisp"):
        await Store.open(path)


async def test_a_step_this_wisp_does_not_know_is_refused(tmp_path):
    path = tmp_path / "w.db"
    async with await Store.open(path, [PINS]):
        pass
    with pytest.raises(StoreError, match="pins.m001_pins, which this wisp does not know"):
        await Store.open(path, [sql_step("pins", "m000_other", "SELECT 1;")])


# --- conversations -----------------------------------------------------------------------


async def test_conversation_fields_and_times(store):
    c = await store.create_conversation("/work/x", model="m", endpoint="http://e", title="t")
    got = await store.get_conversation(c.id)
    assert got == c
    assert (got.workdir, got.model, got.endpoint, got.title) == ("/work/x", "m", "http://e", "t")
    assert TIME.match(got.created_at) and got.created_at == got.updated_at
    assert await store.get_conversation(999) is None
    await store.set_conversation_title(c.id, "new")
    assert (await store.get_conversation(c.id)).title == "new"
    with pytest.raises(StoreError):
        await store.set_conversation_title(999, "x")
    with pytest.raises(StoreError):
        await store.touch_conversation(999)


async def test_list_newest_updated_first_with_counts_and_preview(store):
    assert await store.list_conversations() == []
    assert await store.last_conversation() is None
    a = await store.create_conversation("/a")
    b = await store.create_conversation("/b")
    c = await store.create_conversation("/c")
    assert [x.id for x in await store.list_conversations()] == [c.id, b.id, a.id]
    assert (await store.last_conversation()).id == c.id

    t = await store.begin_turn(a.id)  # activity moves a conversation to the top
    await store.add_entry(a.id, t.id, "prompt", "first question")
    await store.add_entry(a.id, t.id, "reply", "answer")
    t2 = await store.begin_turn(a.id)
    await store.add_entry(a.id, t2.id, "prompt", "  a long\n\nsecond   question " + "x" * 200)
    listed = await store.list_conversations()
    assert [x.id for x in listed] == [a.id, c.id, b.id]
    assert (await store.last_conversation()).id == a.id
    top = listed[0]
    assert top.turn_count == 2
    assert top.last_prompt.startswith("a long second question xxx")
    assert len(top.last_prompt) <= 80 and top.last_prompt.endswith("…")
    assert listed[1].turn_count == 0 and listed[1].last_prompt is None

    await store.touch_conversation(b.id)
    assert [x.id for x in await store.list_conversations(limit=2)] == [b.id, a.id]


# --- turns and entries -----------------------------------------------------------------------


async def test_turn_and_entry_numbering(store):
    a = await store.create_conversation("/a")
    b = await store.create_conversation("/b")
    t1 = await store.begin_turn(a.id)
    e1 = await store.add_entry(a.id, t1.id, "prompt", "p1")
    e2 = await store.add_entry(a.id, t1.id, "tool_call", "", tool_name="read_file",
                               tool_call_id="c1", arguments={"path": "x.py"})
    e3 = await store.add_entry(a.id, t1.id, "tool_result", "out", tool_name="read_file",
                               tool_call_id="c1", meta={"exit": 0})
    tb = await store.begin_turn(b.id)
    eb = await store.add_entry(b.id, tb.id, "prompt", "other")
    t2 = await store.begin_turn(a.id)
    e4 = await store.add_entry(a.id, t2.id, "prompt", "p2")
    n = await store.add_entry(a.id, None, "notice", "outside a turn")

    assert (t1.number, t2.number, tb.number) == (1, 2, 1)
    assert [e.number for e in (e1, e2, e3, e4, n)] == [1, 2, 3, 4, 5]
    assert eb.number == 1
    assert t1.state == "open" and TIME.match(t1.started_at) and t1.ended_at is None

    got = await store.get_entry(a.id, 2)
    assert got == e2
    assert got.arguments == {"path": "x.py"} and got.meta == {}
    assert (await store.get_entry(a.id, 3)).meta == {"exit": 0}
    assert await store.get_entry(a.id, 99) is None
    assert await store.entry_by_id(e4.id) == e4
    assert [e.number for e in await store.entries(a.id)] == [1, 2, 3, 4, 5]
    assert [e.number for e in await store.entries(a.id, t1.id)] == [1, 2, 3]
    assert (await store.get_turn(a.id, 2)).id == t2.id
    assert await store.turn_by_id(tb.id) == tb


async def test_entry_errors(store):
    a = await store.create_conversation("/a")
    b = await store.create_conversation("/b")
    tb = await store.begin_turn(b.id)
    with pytest.raises(StoreError, match="an entry is one of"):
        await store.add_entry(a.id, None, "shout", "x")
    with pytest.raises(StoreError, match="no turn"):
        await store.add_entry(a.id, tb.id, "prompt", "x")
    with pytest.raises(StoreError, match="no conversation"):
        await store.add_entry(999, None, "prompt", "x")
    with pytest.raises(StoreError, match="no conversation"):
        await store.begin_turn(999)
    # nothing half-written: numbering is unaffected
    assert (await store.add_entry(a.id, None, "prompt", "x")).number == 1


async def test_end_turn(store):
    a = await store.create_conversation("/a")
    t = await store.begin_turn(a.id)
    done = await store.end_turn(t.id, "cut", prompt_tokens=120, completion_tokens=30)
    assert (done.state, done.prompt_tokens, done.completion_tokens) == ("cut", 120, 30)
    assert TIME.match(done.ended_at)
    err = await store.end_turn(t.id, "error", error="connection refused")
    assert (err.state, err.error, err.prompt_tokens) == ("error", "connection refused", 120)
    for bad in ("open", "finished"):
        with pytest.raises(StoreError, match="a turn ends as one of"):
            await store.end_turn(t.id, bad)
    with pytest.raises(StoreError, match="no turn"):
        await store.end_turn(999, "done")


async def test_update_entry_and_audit_ref(store, tmp_path):
    a = await store.create_conversation("/a")
    t = await store.begin_turn(a.id)
    e = await store.add_entry(a.id, t.id, "reply", "partial", meta={"x": 1, "y": 2})
    u = await store.update_entry(e.id, content="partial reply", meta={"stopped": True, "y": None})
    assert u.content == "partial reply" and u.meta == {"x": 1, "stopped": True}
    u = await store.update_entry(e.id, meta={"cut": True})
    assert u.content == "partial reply" and u.meta == {"x": 1, "stopped": True, "cut": True}
    with pytest.raises(StoreError):
        await store.update_entry(999, content="x")

    assert e.audit_ref is None
    log = AuditLog(tmp_path / "audit")
    ref = log.write("response", {"text": "partial reply"}, conversation=a.id, turn=t.id, entry=e.id)
    await store.set_entry_audit(e.id, ref)
    got = await store.get_entry(a.id, e.number)
    assert got.audit_ref == ref
    assert (got.audit_event_id, got.audit_file, got.audit_offset) == (ref.event_id, ref.file, ref.offset)
    assert log.read(got.audit_ref)["payload"]["text"] == "partial reply"
    await store.set_entry_audit(e.id, None)
    assert (await store.entry_by_id(e.id)).audit_ref is None
    with pytest.raises(StoreError):
        await store.set_entry_audit(999, AuditRef("ev-x", "audit-000001.jsonl", 0))


async def test_two_stores_on_one_file_number_without_clashes(tmp_path):
    path = tmp_path / "w.db"
    s1 = await Store.open(path)
    s2 = await Store.open(path)
    try:
        c = await s1.create_conversation("/a")
        turns = await asyncio.gather(*[(s1 if i % 2 else s2).begin_turn(c.id) for i in range(20)])
        assert sorted(t.number for t in turns) == list(range(1, 21))
        entries = await asyncio.gather(
            *[(s1 if i % 2 else s2).add_entry(c.id, turns[i].id, "prompt", str(i)) for i in range(20)]
        )
        assert sorted(e.number for e in entries) == list(range(1, 21))
    finally:
        await s1.close()
        await s2.close()


# --- paging ----------------------------------------------------------------------------------


async def _fill(store, conversation_id, n_turns, per_turn=3):
    """n_turns ended turns with per_turn entries each, inserted in one transaction."""
    now = store_mod.utc_now()
    async with store.transaction() as db:
        for n in range(1, n_turns + 1):
            cur = await db.execute(
                "INSERT INTO turns (conversation_id, number, state, started_at, ended_at)"
                " VALUES (?, ?, 'done', ?, ?)", (conversation_id, n, now, now))
            tid = cur.lastrowid
            await db.executemany(
                "INSERT INTO entries (conversation_id, turn_id, number, kind, content, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(conversation_id, tid, (n - 1) * per_turn + k + 1,
                  ("prompt", "tool_result", "reply")[k % 3], f"turn {n} entry {k}", now)
                 for k in range(per_turn)],
            )


async def test_paging_turns(store):
    a = await store.create_conversation("/a")
    for _ in range(120):
        t = await store.begin_turn(a.id)
        await store.end_turn(t.id, "done")
    assert await store.count_turns(a.id) == 120
    last = await store.turns(a.id, limit=50)
    assert [t.number for t in last] == list(range(71, 121))
    before = await store.turns(a.id, limit=50, before_number=last[0].number)
    assert [t.number for t in before] == list(range(21, 71))
    first = await store.turns(a.id, limit=50, before_number=before[0].number)
    assert [t.number for t in first] == list(range(1, 21))
    assert await store.turns(a.id, limit=50, before_number=1) == []
    assert [t.number for t in await store.turns(a.id)] == list(range(1, 121))
    assert [t.number for t in await store.turns(a.id, before_number=4)] == [1, 2, 3]


async def test_last_50_of_1000_turns_in_two_queries(store):
    a = await store.create_conversation("/a")
    other = await store.create_conversation("/b")
    await _fill(store, a.id, 1000)
    await _fill(store, other.id, 10)
    assert await store.count_turns(a.id) == 1000

    statements: list[str] = []
    await store.db.set_trace_callback(statements.append)
    start = time.perf_counter()
    turns = await store.turns(a.id, limit=50)
    by_turn = await store.turn_entries([t.id for t in turns])
    elapsed = time.perf_counter() - start
    await store.db.set_trace_callback(None)

    assert len(statements) == 2
    assert [t.number for t in turns] == list(range(951, 1001))
    assert list(by_turn) == [t.id for t in turns]
    assert all(len(v) == 3 for v in by_turn.values())
    assert by_turn[turns[-1].id][0].content == "turn 1000 entry 0"
    assert [e.number for e in by_turn[turns[0].id]] == [2851, 2852, 2853]
    assert elapsed < 0.5, elapsed

    # the plan uses the indexes, not a scan of the table
    async with store.db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM entries WHERE turn_id IN (1, 2) ORDER BY turn_id, number"
    ) as cur:
        plan = " ".join(str(tuple(r)) for r in await cur.fetchall())
    assert "entries_turn" in plan


async def test_turn_entries_empty_and_missing(store):
    a = await store.create_conversation("/a")
    t = await store.begin_turn(a.id)
    assert await store.turn_entries([]) == {}
    assert await store.turn_entries([t.id, 12345]) == {t.id: [], 12345: []}


# --- recovery -------------------------------------------------------------------------------


async def test_recover_open_turns_after_a_crash(tmp_path):
    path = tmp_path / "w.db"
    s = await Store.open(path)
    c = await s.create_conversation("/a")
    done = await s.begin_turn(c.id)
    await s.end_turn(done.id, "done")
    crashed = await s.begin_turn(c.id)
    await s.add_entry(c.id, crashed.id, "reply", "half a rep")
    await s.close()  # the process "crashed" before end_turn

    s = await Store.open(path)
    try:
        assert await s.recover_open_turns() == [crashed.id]
        running = await s.begin_turn(c.id)  # this store's own, still running
        t = await s.turn_by_id(crashed.id)
        assert (t.state, t.error) == ("stopped", RECOVERED_ERROR) and t.ended_at
        assert (await s.turn_by_id(done.id)).state == "done"
        assert (await s.turn_by_id(running.id)).state == "open"
        assert await s.recover_open_turns() == []
        assert (await s.entries(c.id, crashed.id))[0].content == "half a rep"  # kept
    finally:
        await s.close()


async def test_recover_leaves_a_live_process_alone(store):
    c = await store.create_conversation("/a")
    live = await store.begin_turn(c.id)
    dead = await store.begin_turn(c.id)
    other_host = await store.begin_turn(c.id)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    try:
        async with store.transaction() as db:
            await db.execute("UPDATE turns SET owner = ? WHERE id = ?", (f"{host}:{proc.pid}", live.id))
            await db.execute("UPDATE turns SET owner = ? WHERE id = ?", (f"{host}:{gone.pid}", dead.id))
            await db.execute("UPDATE turns SET owner = 'elsewhere:1' WHERE id = ?", (other_host.id,))
        store._running.clear()  # as if begun by another store, since closed
        store._live_here.clear()
        assert sorted(await store.recover_open_turns()) == sorted([dead.id, other_host.id])
        assert (await store.turn_by_id(live.id)).state == "open"
    finally:
        proc.kill()
        proc.wait()
    assert await store.recover_open_turns() == [live.id]


def test_a_long_id_list_is_bound_in_runs_the_database_accepts() -> None:
    """One rule for lists too long for one ``IN (…)``: runs of at most IN_LIST_MAX, each with its marks."""
    from wisp.core.store import IN_LIST_MAX, in_chunks

    runs = list(in_chunks(range(2 * IN_LIST_MAX + 1)))
    assert [len(c) for c, _ in runs] == [IN_LIST_MAX, IN_LIST_MAX, 1]
    assert all(m.count("?") == len(c) for c, m in runs)
    assert [x for c, _ in runs for x in c] == list(range(2 * IN_LIST_MAX + 1))
    assert list(in_chunks([])) == []
