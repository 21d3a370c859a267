"""Episodic memory in a real SQLite file: references, filters, FTS search, forget's cascade."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wisp.core.database import open_store
from wisp.core.episodes.forget import forget, forget_scope
from wisp.core.episodes.ids import MemoryIdError, format_memory_id, parse_memory_id
from wisp.core.episodes.query import (MemoryFilter, QueryError, find_memories, memory_search_query, get_memory,
                                      make_filter, memory_sources)
from wisp.core.store import Store
from tests.support.episodes_util import add_exchange, add_memory

LONDON = ZoneInfo("Europe/London")


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "wisp.db")
    yield s
    await s.close()


# --- references ---------------------------------------------------------------------


def test_reference_padding() -> None:
    assert format_memory_id(1) == "MEM-000001"
    assert format_memory_id(999999) == "MEM-999999"
    assert format_memory_id(1000000) == "MEM-1000000"
    assert format_memory_id(12345678) == "MEM-12345678"
    for bad in (0, -1, True):
        with pytest.raises(MemoryIdError):
            format_memory_id(bad)


@pytest.mark.parametrize("text, n", [("MEM-000001", 1), ("mem-12", 12), ("[MEM-000042]", 42), ("MEM-1000000.", 1000000),
                                      ("#7", 7), ("7", 7), (" MEM-999999 ", 999999)])
def test_reference_parsing(text: str, n: int) -> None:
    assert parse_memory_id(text) == n


@pytest.mark.parametrize("text", ["", "MEM-", "MEM-000000", "memory one", "MEM-12a", "FACT-1"])
def test_reference_parsing_refuses(text: str) -> None:
    with pytest.raises(MemoryIdError, match="MEM-000001|start at"):
        parse_memory_id(text)


async def test_numbers_pass_999999_and_are_never_reused(store: Store) -> None:
    x = await add_exchange(store)
    async with store.transaction() as db:
        await db.execute("UPDATE episode_counters SET value = 999998 WHERE name = 'memory'")
    a = await add_memory(store, "first", [x])
    y = await add_exchange(store, requested_at="2025-03-04T15:00:00.000000Z")
    b = await add_memory(store, "second", [y])
    assert (format_memory_id(a), format_memory_id(b)) == ("MEM-999999", "MEM-1000000")
    # forgetting the newest does not give its number out again (no max(id) + 1)
    await forget(store, b)
    z = await add_exchange(store, requested_at="2025-03-04T16:00:00.000000Z")
    c = await add_memory(store, "third", [z])
    assert format_memory_id(c) == "MEM-1000001"
    page = await find_memories(store.db, MemoryFilter())
    assert [m.ref for m in page.memories] == ["MEM-1000001", "MEM-999999"]


# --- filters and search --------------------------------------------------------------


async def seed(store: Store) -> dict[str, int]:
    ids = {}
    ids["launch"] = await add_memory(store, "Decided to launch the website on Friday after the DNS change.", [
        await add_exchange(store, "when do we launch?", workspace="website", transport="ask", channel="3",
                           requested_at="2025-03-04T14:05:00.000000Z")])
    ids["launched"] = await add_memory(store, "The assistant reported the website launched; check analytics.", [
        await add_exchange(store, "did it launch?", workspace="website", transport="tui", channel="5",
                           requested_at="2025-03-07T10:00:00.000000Z")])
    ids["milk"] = await add_memory(store, "Person asked to be reminded to buy milk; unfinished.", [
        await add_exchange(store, "groceries please", workspace="personal", transport="tui", channel="9",
                           requested_at="2025-03-06T08:00:00.000000Z")])
    ids["slack"] = await add_memory(store, "Launch checklist discussed in the channel.", [
        await add_exchange(store, "checklist", workspace="website", transport="mcp", channel="C0123456789",
                           thread="T1", requested_at="2025-03-05T12:00:00.000000Z")])
    return ids


async def test_list_is_newest_event_first_with_totals_and_paging(store: Store) -> None:
    ids = await seed(store)
    page = await find_memories(store.db, MemoryFilter(limit=2))
    assert page.total == 4
    assert [m.number for m in page.memories] == [ids["launched"], ids["milk"]]
    page2 = await find_memories(store.db, MemoryFilter(limit=2, offset=2))
    assert [m.number for m in page2.memories] == [ids["slack"], ids["launch"]] and page2.total == 4


async def test_filters_by_workspace_transport_channel(store: Store) -> None:
    ids = await seed(store)

    async def nums(**kw):
        return [m.number for m in (await find_memories(store.db, make_filter(LONDON, env={}, **kw))).memories]

    assert await nums(workspace="personal") == [ids["milk"]]
    assert await nums(workspace="website", transport="tui") == [ids["launched"]]
    assert await nums(channel="C0123456789") == [ids["slack"]]
    assert await nums(workspace="nowhere") == []
    # WISP_WORKSPACE is the default filter; --all-workspaces broadens it
    f = make_filter(LONDON, env={"WISP_WORKSPACE": "personal"})
    assert f.workspace == "personal"
    assert make_filter(LONDON, all_workspaces=True, env={"WISP_WORKSPACE": "personal"}).workspace is None
    assert make_filter(LONDON, workspace="website", env={"WISP_WORKSPACE": "personal"}).workspace == "website"
    with pytest.raises(QueryError):
        make_filter(LONDON, workspace="a", all_workspaces=True, env={})


async def test_search_is_fts_over_summaries_only_with_stemming(store: Store) -> None:
    ids = await seed(store)

    async def nums(text, **kw):
        page = await find_memories(store.db, make_filter(LONDON, text=text, env={}, **kw))
        return [m.number for m in page.memories], page.total

    # "launch" finds launch, launched (porter stemming) and the checklist, newest first
    assert await nums("launch") == ([ids["launched"], ids["slack"], ids["launch"]], 3)
    assert await nums("website launch") == ([ids["launched"], ids["launch"]], 2)
    assert await nums("launch", workspace="website", transport="mcp") == ([ids["slack"]], 1)
    # source exchanges are not searched: "groceries" is only in a request
    assert await nums("groceries") == ([], 0)
    # FTS syntax is read as words
    assert await nums('milk OR "launch') == ([], 0)
    assert await nums("milk*") == ([ids["milk"]], 1)
    with pytest.raises(QueryError):
        make_filter(LONDON, text="  ,,, ", env={})
    assert memory_search_query('a "b') == '"a" "b"'


@pytest.mark.parametrize("limit, offset", [(0, 0), (101, 0), (20, -1), ("x", 0)])
def test_paging_limits(limit, offset) -> None:
    with pytest.raises(QueryError):
        make_filter(LONDON, limit=limit, offset=offset, env={})
    assert make_filter(LONDON, limit=100, env={}).limit == 100
    assert make_filter(LONDON, env={}).limit == 20


# --- forget ----------------------------------------------------------------------------


async def test_forget_cascades_through_shared_sources(store: Store) -> None:
    """m1 —x1— m2 —x2— m3 are connected through shared sources; m4 stands apart."""
    x1 = await add_exchange(store, "one", requested_at="2025-03-04T10:00:00.000000Z")
    x2 = await add_exchange(store, "two", requested_at="2025-03-04T11:00:00.000000Z")
    x3 = await add_exchange(store, "three", requested_at="2025-03-04T12:00:00.000000Z")
    x4 = await add_exchange(store, "four", requested_at="2025-03-04T13:00:00.000000Z")
    x5 = await add_exchange(store, "five, never refined", requested_at="2025-03-04T14:00:00.000000Z")
    m1 = await add_memory(store, "m1", [x1])
    m2 = await add_memory(store, "m2", [x1, x2])
    m3 = await add_memory(store, "m3", [x2, x3])
    m4 = await add_memory(store, "m4", [x4])

    scope = await forget_scope(store.db, m3)  # from the far end, the whole chain
    assert sorted(m.number for m in scope.memories) == [m1, m2, m3]
    assert sorted(x.id for x in scope.exchanges) == [x1, x2, x3]
    assert await get_memory(store.db, m1) is not None  # a scope changes nothing

    removed = await forget(store, m1)
    assert sorted(removed.refs) == sorted(format_memory_id(n) for n in (m1, m2, m3))
    for n in (m1, m2, m3):
        assert await get_memory(store.db, n) is None
    assert (await get_memory(store.db, m4)).summary == "m4"
    assert [x.id for x in await memory_sources(store.db, m4)] == [x4]
    async with store.db.execute("SELECT id FROM episode_exchanges ORDER BY id") as cur:
        assert [r[0] for r in await cur.fetchall()] == [x4, x5]
    async with store.db.execute("SELECT COUNT(*) FROM episode_memory_sources") as cur:
        assert (await cur.fetchone())[0] == 1
    # the FTS index forgot them too
    page = await find_memories(store.db, MemoryFilter(text="m2"))
    assert page.total == 0
    assert await forget(store, m1) is None


async def test_fts_index_matches_the_table_after_changes(store: Store) -> None:
    ids = await seed(store)
    await forget(store, ids["milk"])
    conn = sqlite3.connect(store.path)
    try:
        conn.execute("INSERT INTO episode_memories_fts (episode_memories_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
