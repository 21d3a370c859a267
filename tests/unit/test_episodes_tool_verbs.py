"""The model's episodic verbs: `memories QUERY` (filters as words) and `recall MEM-…`."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from wisp.core.database import open_store
from wisp.core.config import Config
from wisp.core.episodes.dates import DateError
from wisp.core.episodes.query import QueryError
from wisp.core.episodes.tool_verbs import (memories, parse_memories_request, recall, run_episodic_verb)
from wisp.core.store import Store
from tests.support.home import write_config
from tests.support.episodes_util import add_exchange, add_memory

LONDON = ZoneInfo("Europe/London")
NOW = datetime(2025, 3, 7, 12, 0, tzinfo=timezone.utc)  # Friday


@pytest.fixture
async def env(tmp_path: Path):
    write_config(tmp_path, {"memory.timezone": "Europe/London"})
    config = Config.load(tmp_path / "config.json")
    store = await open_store(tmp_path / "wisp.db")
    x1 = await add_exchange(store, "when do we launch the website?", "Friday.", workspace="website", channel="3",
                            requested_at="2025-03-04T14:05:00.000000Z")
    x2 = await add_exchange(store, "buy milk", "Noted.", workspace="personal", transport="tui", channel="9",
                            requested_at="2025-03-06T08:00:00.000000Z", outcome="failed", error="the model crashed")
    await add_memory(store, "Decided to launch the website on Friday.", [x1])
    await add_memory(store, "Asked to be reminded to buy milk; the reply failed, so it is unfinished.", [x2])
    for i in range(12):
        x = await add_exchange(store, f"launch step {i}", workspace="website", channel="3",
                               requested_at=f"2025-02-{10 + i:02d}T10:00:00.000000Z")
        await add_memory(store, f"Launch step {i} was reported done.", [x])
    yield store, config
    await store.close()


def test_parse_filters_written_as_words() -> None:
    f = parse_memories_request("memories launch workspace website since 7d limit 10", LONDON, env={}, now=NOW)
    assert (f.text, f.workspace, f.limit) == ("launch", "website", 10)
    assert f.since == datetime(2025, 2, 28, 12, 0, tzinfo=timezone.utc)
    f = parse_memories_request("website launch --workspace=website transport:ask channel C0123 offset 20",
                               LONDON, env={}, now=NOW)
    assert (f.text, f.workspace, f.transport, f.channel, f.offset) == ("website launch", "website", "ask",
                                                                       "C0123", 20)
    f = parse_memories_request("memories last 10", LONDON, env={"WISP_WORKSPACE": "personal"}, now=NOW)
    assert f.limit == 10 and f.text is None and f.workspace == "personal"
    f = parse_memories_request("all workspaces", LONDON, env={"WISP_WORKSPACE": "personal"}, now=NOW)
    assert f.workspace is None
    f = parse_memories_request("workspace personal this week", LONDON, env={}, now=NOW)
    assert f.since == datetime(2025, 3, 3, 0, 0, tzinfo=timezone.utc) and f.until is None
    f = parse_memories_request("deploy yesterday", LONDON, env={}, now=NOW)
    assert f.text == "deploy" and f.since == datetime(2025, 3, 6, tzinfo=timezone.utc)
    assert f.until == datetime(2025, 3, 7, tzinfo=timezone.utc)
    f = parse_memories_request("last week", LONDON, env={}, now=NOW)
    assert (f.since, f.until) == (datetime(2025, 2, 24, tzinfo=timezone.utc), datetime(2025, 3, 3, tzinfo=timezone.utc))
    f = parse_memories_request("since 7 days until 2025-03-06", LONDON, env={}, now=NOW)
    assert f.until == datetime(2025, 3, 6, tzinfo=timezone.utc) and f.text is None
    assert parse_memories_request("limit 500", LONDON, env={}).limit == 100
    with pytest.raises(DateError):
        parse_memories_request("since the launch", LONDON, env={})
    with pytest.raises(QueryError):
        parse_memories_request("limit ten", LONDON, env={})
    with pytest.raises(QueryError):
        parse_memories_request("launch workspace", LONDON, env={})


async def test_memories_lists_and_searches(env) -> None:
    store, config = env
    out = await memories(store, config, "memories launch workspace website limit 3", env={})
    lines = out.splitlines()
    assert lines[0].startswith('memories 1-3 of 13 matching "launch" in workspace website, newest first')
    assert lines[1].startswith("MEM-000001 Tue 2025-03-04 14:05 GMT · website · ask · channel 3 · 1 source: Decided")
    assert lines[-2] == '[more: memory "memories launch workspace website limit 3 offset 3"]'
    assert lines[-1] == 'memory "recall MEM-000001" shows one in full with its source exchanges.'
    nxt = await memories(store, config, "memories launch workspace website limit 3 offset 3", env={})
    assert nxt.splitlines()[0].startswith("memories 4-6 of 13")
    assert "[more:" in nxt and "offset 6" in nxt
    listed = await memories(store, config, "memories workspace personal", env={})
    assert "milk" in listed and "[more:" not in listed


async def test_memories_says_what_there_is_when_nothing_matches(env, tmp_path: Path) -> None:
    store, config = env
    out = await memories(store, config, "memories zebra", env={})
    assert out.startswith("memory: no memories matching \"zebra\" in all workspaces. There are 14 in all")
    assert "personal, website" in out
    empty = await open_store(tmp_path / "empty.db")
    try:
        assert (await memories(empty, config, "memories", env={})).startswith("memory: there are no memories yet")
    finally:
        await empty.close()
    bad = await memories(store, config, "memories since someday", env={})
    assert bad.startswith("error: ") and "memories launch workspace website since 7d limit 10" in bad


async def test_recall_gives_the_memory_with_its_sources(env) -> None:
    store, config = env
    out = await recall(store, config, "recall MEM-000002")
    lines = out.splitlines()
    assert lines[0] == "MEM-000002: memory of Thu 2025-03-06 08:00 GMT (Europe/London), recorded Wed 2025-03-05 09:00 GMT"
    assert lines[1] == "origin: workspace personal, transport tui, channel 9, thread none, conversation 1"
    assert "Asked to be reminded to buy milk" in out
    assert "sources: 1 exchange, oldest first:" in out
    assert "failed (the model crashed), sender alice" in out
    assert "request:\nbuy milk\nreply:\nNoted." in out
    assert lines[-1] == "[end of what recall found]"
    assert (await recall(store, config, "MEM-2")) == out
    assert (await recall(store, config, "recall MEM-000099")).startswith("memory: no memory MEM-000099")
    assert (await recall(store, config, "recall")).startswith("error: write recall MEM-000001")
    assert (await recall(store, config, "recall the launch")).startswith("error:")


async def test_recall_caps_long_sources(env) -> None:
    store, config = env
    xs = [await add_exchange(store, "r" * 10_000, "p" * 10_000, requested_at=f"2025-03-01T0{i}:00:00.000000Z")
          for i in range(6)]
    n = await add_memory(store, "Long work.", xs)
    out = await recall(store, config, f"recall MEM-{n}")
    assert len(out.encode()) < 30_000
    assert "excerpt: the first" in out and "more exchanges not shown" in out
    assert out.endswith("[end of what recall found]")


async def test_dispatch(env) -> None:
    store, config = env
    assert (await run_episodic_verb(store, config, "memories milk", env={})).startswith("memories 1-1 of 1")
    assert (await run_episodic_verb(store, config, "recall MEM-000001")).startswith("MEM-000001: memory of")
    assert await run_episodic_verb(store, config, "recall entry 7") is None  # the memory tool's own verb
    assert await run_episodic_verb(store, config, "note project codename = X") is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=st.text(max_size=80))
async def test_no_request_raises(env, request: str) -> None:
    store, config = env
    for out in (await memories(store, config, "memories " + request, env={}),
                await recall(store, config, "recall " + request)):
        assert out.split(" ", 1)[0] in ("memories", "memory:", "error:") or out.startswith("MEM-")
