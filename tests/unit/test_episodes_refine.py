"""Refinement: grouping, batch limits, the reply format, failures retried, the lock in the database."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from wisp.core.database import open_store
from wisp.core.config import Config
from wisp.core.episodes.refine import (EXCERPT_BYTES, MAX_BATCH_BYTES, MAX_BATCH_EXCHANGES, MAX_SUMMARY_CHARS,
                                       Candidate, RefineFormatError, Refiner, batch_limits, build_messages,
                                       claim_batch, excerpt, format_block, group_key, parse_reply, plan_batch,
                                       read_status, record_batch, MEMORY_SCHEMA, STRICT_SCHEMA)
from wisp.core.episodes.query import MemoryFilter, find_memories, memory_sources
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.sidecall import EndpointSideCall
from wisp.core.store import Store
from tests.support.home import write_config
from tests.support.episodes_util import add_exchange, memory_reply
from tests.support.fakes import FakeOllama, fault, reply, text

UTC_TZ = ZoneInfo("UTC")


def cand(i: int, *, ws="website", conv=1, tr="ask", ch="1", th="", request="req", reply_text="rep",
         at: str | None = None) -> Candidate:
    data_req = request.encode()
    return Candidate(id=i, workspace=ws, conversation_id=conv, transport=tr, channel=ch, thread=th,
                     requested_at=at or f"2025-03-04T10:{i % 60:02d}:00.000000Z", outcome="completed",
                     request=request, request_bytes=len(data_req), reply=reply_text,
                     reply_bytes=len(reply_text.encode()))


# --- grouping and limits (pure) ----------------------------------------------------------


def test_grouping_only_joins_same_workspace_conversation_transport_channel_thread() -> None:
    cands = [
        cand(1), cand(2, ws="personal"), cand(3, conv=2), cand(4, tr="tui"), cand(5, ch="2"),
        cand(6, th="T9"), cand(7), cand(8),
    ]
    batch = plan_batch(cands, UTC_TZ)
    assert [c.id for c in batch] == [1, 7, 8]
    assert len({group_key(c) for c in cands}) == 6
    # skipping a group (it failed in this run) moves on to the next oldest group
    batch2 = plan_batch(cands, UTC_TZ, skip={group_key(cands[0])})
    assert [c.id for c in batch2] == [2]
    assert plan_batch(cands, UTC_TZ, skip={group_key(c) for c in cands}) == []


def test_batch_holds_at_most_40_exchanges() -> None:
    cands = [cand(i) for i in range(1, 61)]
    batch = plan_batch(cands, UTC_TZ)
    assert len(batch) == MAX_BATCH_EXCHANGES == 40
    assert [c.id for c in batch] == list(range(1, 41))


def test_batch_excerpts_are_4_kib_and_the_batch_48_kib() -> None:
    big = "é" * 9000  # 18,000 bytes: cut on a character boundary
    cands = [cand(i, request=big, reply_text="x" * 10_000) for i in range(1, 31)]
    batch = plan_batch(cands, UTC_TZ)
    blocks = [format_block(i, c, UTC_TZ) for i, c in enumerate(batch, 1)]
    total = sum(len(b.encode()) for b in blocks)
    assert total <= MAX_BATCH_BYTES == 48 * 1024
    assert len(batch) == 5  # 5 blocks of ~8.2 KiB fit, a sixth would not
    assert total + len(format_block(6, cands[5], UTC_TZ).encode()) > MAX_BATCH_BYTES
    req = excerpt(big, len(big.encode()))
    assert len(req.encode()) <= EXCERPT_BYTES == 4096
    assert "excerpt: the first" in req and "of 18000 bytes" in req
    assert req.startswith("é" * 100) and "\ufffd" not in req
    # the whole user message stays within 48 KiB plus its two short lines
    user = build_messages(batch, UTC_TZ)[1]["content"]
    assert len(user.encode()) <= MAX_BATCH_BYTES + 200


def test_a_smaller_context_window_shrinks_the_batch() -> None:
    assert batch_limits(None) == (MAX_BATCH_BYTES, EXCERPT_BYTES)
    assert batch_limits(131072) == (MAX_BATCH_BYTES, EXCERPT_BYTES)
    small_total, small_each = batch_limits(4096)
    assert small_total < MAX_BATCH_BYTES and small_each <= EXCERPT_BYTES
    assert (4096 - 1024 - 600) * 3 >= small_total


def test_the_first_exchange_always_fits() -> None:
    batch = plan_batch([cand(1, request="a" * 100_000), cand(2)], UTC_TZ, max_bytes=1000, excerpt_bytes=4096)
    assert [c.id for c in batch] == [1]


# --- the reply format ----------------------------------------------------------------------


def test_parse_the_strict_format() -> None:
    out = parse_reply(memory_reply(("1,2", "Agreed to launch Friday."), ("3", "Asked for a checklist; unfinished.")), 3)
    assert [(m.summary, m.sources) for m in out] == [("Agreed to launch Friday.", [1, 2]),
                                                     ("Asked for a checklist; unfinished.", [3])]


@pytest.mark.parametrize("reply_text, expected", [
    ("**MEMORY 1, 2**\nLaunch is Friday.\n**END**", [("Launch is Friday.", [1, 2])]),
    ("MEMORY: [1][3]\nLaunch is Friday.\nEND", [("Launch is Friday.", [1, 3])]),
    ("Memory 1-3: Launch is Friday.\nEnd.", [("Launch is Friday.", [1, 2, 3])]),
    ("MEMORY 2 and 4\nLaunch\nis Friday.", [("Launch\nis Friday.", [2, 4])]),  # no END: runs to the end
    ("MEMORY\nSources: 2\nLaunch is Friday.\nEND", [("Launch is Friday.", [2])]),
    ("MEMORY 1\nSummary: Launch is Friday.\nEND\nMEMORY 9\nOut of range.\nEND",
     [("Launch is Friday.", [1]), ("Out of range.", [1, 2, 3, 4])]),
    ("Here you go:\n```\nMEMORY 1\nLaunch is Friday.\nEND\n```\nHope this helps!", [("Launch is Friday.", [1])]),
    ("MEMORY 1\nLaunch is Friday.\nEND\nMEMORY 2\nLaunch is Friday.\nEND", [("Launch is Friday.", [1])]),
    ("MEMORY 1\nSummary 0 of the plan: ship it.\nEND", [("Summary 0 of the plan: ship it.", [1])]),
    ("MEMORY 1\nMemory use was high; the person wants it checked.\nEND",
     [("Memory use was high; the person wants it checked.", [1])]),
    ("Memory: the launch moved to Monday.", [("the launch moved to Monday.", [1, 2, 3, 4])]),
    ("NONE", []),
    ("none.", []),
    ("Nothing worth keeping.", []),
    ("MEMORY 1\nEND", []),
])
def test_parse_tolerates_what_small_models_write(reply_text: str, expected: list) -> None:
    assert [(m.summary, m.sources) for m in parse_reply(reply_text, 4)] == expected


@pytest.mark.parametrize("reply_text", ["", "   ", "The person asked about the launch and we agreed on Friday.",
                                        "I cannot help with that."])
def test_parse_refuses_a_reply_without_the_format(reply_text: str) -> None:
    with pytest.raises(RefineFormatError):
        parse_reply(reply_text, 3)


def test_summaries_are_capped_at_2000_characters() -> None:
    out = parse_reply("MEMORY 1\n" + "word " * 1000 + "\nEND", 1)
    assert len(out[0].summary) <= MAX_SUMMARY_CHARS and out[0].summary.endswith("…")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600), st.integers(1, 40))
def test_parse_never_fails_otherwise(reply_text: str, n: int) -> None:
    try:
        out = parse_reply(reply_text, n)
    except RefineFormatError:
        return
    for m in out:
        assert m.summary and len(m.summary) <= MAX_SUMMARY_CHARS
        assert m.sources and all(1 <= k <= n for k in m.sources)


# --- runs against the fake endpoint -------------------------------------------------------


def provider_for(srv: FakeOllama, window: int | None = None) -> EndpointSideCall:
    """The side call over the fake server, as a session's would be."""
    return EndpointSideCall(OllamaEndpoint(srv.base_url, "wisp-fake:latest", timeout_s=5, load_wait_s=1), window)


class _NeverCalled:
    async def info(self):
        raise AssertionError("no endpoint should be resolved when nothing awaits")

    async def complete(self, *args, **kwargs):
        raise AssertionError("no model call should be made when nothing awaits")


never_called = _NeverCalled()


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "wisp.db")
    yield s
    await s.close()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    write_config(tmp_path, {"memory.timezone": "Europe/London"})
    return Config.load(tmp_path / "config.json")


async def awaiting(store: Store) -> list[tuple[int, int]]:
    async with store.db.execute(
            "SELECT id, attempts FROM episode_exchanges WHERE batch_id IS NULL ORDER BY id") as cur:
        return [tuple(r) for r in await cur.fetchall()]


async def test_nothing_new_means_no_model_call(store: Store, config: Config) -> None:
    report = await Refiner(store, config, never_called).run()
    assert report.outcome == "nothing new" and report.model_calls == 0
    status = await read_status(store.db)
    assert status["last_job"]["outcome"] == "nothing new"


async def test_a_failed_batch_is_retried_and_a_recorded_one_never_again(store: Store, config: Config) -> None:
    a = await add_exchange(store, "plan the launch", "Friday it is.", requested_at="2025-03-04T10:00:00.000000Z")
    b = await add_exchange(store, "and the DNS?", "I changed it (reported).", requested_at="2025-03-04T10:05:00.000000Z")
    with FakeOllama([fault.status(500), reply(memory_reply(("1,2", "Agreed to launch Friday; DNS change reported.")))]) as srv:
        first = await Refiner(store, config, provider_for(srv)).run()
        assert first.outcome == "failed" and first.memories == [] and first.model_calls == 1
        assert "server_error" in first.errors[0]
        assert await awaiting(store) == [(a, 1), (b, 1)]  # left for later, the attempt counted

        second = await Refiner(store, config, provider_for(srv)).run()
        assert second.outcome == "completed" and second.memories == ["MEM-000001"]
        assert await awaiting(store) == []
        sources = await memory_sources(store.db, 1)
        assert [x.id for x in sources] == [a, b]
        assert len(srv.chat_bodies) == 2
        body = srv.chat_bodies[-1]
        assert body["think"] is False and "tools" not in body
        assert "plan the launch" in body["messages"][1]["content"]

        third = await Refiner(store, config, provider_for(srv)).run()
        assert third.outcome == "nothing new" and len(srv.chat_bodies) == 2
    status = await read_status(store.db)
    assert status["memories"] == 1 and status["awaiting"] == 0 and status["last_job"]["outcome"] == "nothing new"


async def test_a_reply_not_in_the_format_is_kept_as_one_unstructured_memory(store: Store, config: Config) -> None:
    """Issue "Compaction you can see and trust": a non-empty reply that is not the format becomes one
    memory of the batch, with its sources, marked unstructured; it is never dropped silently."""
    await add_exchange(store, "one", workspace="website", channel="1")
    await add_exchange(store, "two", workspace="personal", channel="2", requested_at="2025-03-04T15:00:00.000000Z")
    with FakeOllama([reply("Sure! The person talked about things."), reply("MEMORY 1\nAsked two.\nEND")]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.outcome == "completed" and report.memories == ["MEM-000001", "MEM-000002"]
    assert report.fallbacks == {"unstructured": 1} and report.model_calls == 2
    page = await find_memories(store.db, MemoryFilter())
    got = sorted((m.workspace, m.summary, m.unstructured) for m in page.memories)
    assert got == [("personal", "Asked two.", False), ("website", "Sure! The person talked about things.", True)]
    assert [x.request for x in await memory_sources(store.db, 1)] == ["one"]
    assert await awaiting(store) == []
    status = await read_status(store.db)
    assert status["fell_back"] == 1 and status["fallbacks"] == {"unstructured": 1} and status["unstructured"] == 1


async def test_refinement_asks_for_its_shape_and_reads_the_json_memories(store: Store, config: Config) -> None:
    """Issue "Compaction you can see and trust", "Structured side calls": the memories' schema goes as
    Ollama's ``format``; the JSON answer becomes memories with their sources."""
    await add_exchange(store, "We decided the website launch is on Friday.", "Noted: Friday.")
    await add_exchange(store, "Also email the team on Thursday.", "Drafted.", requested_at="2025-03-04T14:06:00.000000Z")
    answer = json.dumps({"memories": [{"sources": [1], "summary": "Decided: the website launch is on Friday."},
                                      {"sources": [2, 9], "summary": "The team is to be emailed on Thursday."}]})
    with FakeOllama([reply(text(answer))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert srv.chat_bodies[0]["format"] == MEMORY_SCHEMA
    assert report.memories == ["MEM-000001", "MEM-000002"] and report.fallbacks == {}
    assert [x.request for x in await memory_sources(store.db, 1)] == ["We decided the website launch is on Friday."]
    assert [x.id for x in await memory_sources(store.db, 2)] == [2]  # 9 is no exchange of the batch: dropped


@pytest.mark.parametrize("first", ["", "NONE", '{"memories": []}'], ids=["empty", "none", "empty-list"])
async def test_nothing_kept_of_a_stated_decision_is_asked_again_strictly(store: Store, config: Config,
                                                                          first: str) -> None:
    """An empty or NONE reply for a batch whose requests state a decision is retried once with a
    stricter prompt (quoting it, and a schema that wants at least one memory)."""
    await add_exchange(store, "We decided the website launch is on Friday.", "Got it.")
    again = json.dumps({"memories": [{"sources": [1], "summary": "The website launch is on Friday (decided)."}]})
    with FakeOllama([reply(text(first)), reply(text(again))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.model_calls == 2 and report.memories == ["MEM-000001"] and report.fallbacks == {"retried": 1}
    strict = srv.chat_bodies[1]
    assert strict["format"] == STRICT_SCHEMA and STRICT_SCHEMA["properties"]["memories"]["minItems"] == 1
    asked = strict["messages"][-1]["content"]
    assert 'state a decision' in asked and '[1] "We decided the website launch is on Friday."' in asked
    assert strict["messages"][-2]["role"] == "assistant"
    status = await read_status(store.db)
    assert status["fallbacks"] == {"retried": 1} and status["awaiting"] == 0


async def test_nothing_after_the_strict_retry_keeps_what_the_person_stated(store: Store, config: Config) -> None:
    """Asked twice, the model kept nothing of exchanges that state a correction and unfinished work: wisp
    keeps those statements as memories, in the person's words (SmolLM2 once answered '] }}' twice)."""
    await add_exchange(store, "Actually, the launch moves to Monday; that was wrong.", "OK.")
    await add_exchange(store, "We still need to write the release notes later.", "Sure.",
                       requested_at="2025-03-04T14:06:00.000000Z", outcome="failed", error="timeout")
    with FakeOllama([reply(text("NONE")), reply(text(""))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.outcome == "completed" and 2 <= len(report.memories) <= 3 and report.fallbacks == {"stated": 1}
    asked = srv.chat_bodies[1]["messages"][-1]["content"]
    assert "a correction" in asked and "unfinished work" in asked and "ended failed" in asked
    assert await awaiting(store) == []  # recorded, not tried again and again
    assert (await read_status(store.db))["fell_back"] == 1


async def test_routine_exchanges_answered_with_nothing_are_not_asked_again(store: Store, config: Config) -> None:
    await add_exchange(store, "thanks!", "You're welcome.")
    with FakeOllama([reply(text(""))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.model_calls == 1 and report.memories == [] and report.fallbacks == {}
    assert await awaiting(store) == []


async def test_a_strict_retry_answered_in_prose_is_kept_unstructured(store: Store, config: Config) -> None:
    await add_exchange(store, "We'll ship on Friday.", "OK.")
    with FakeOllama([reply(text("NONE")), reply(text("The person said they will ship on Friday."))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.fallbacks == {"unstructured": 1}
    page = await find_memories(store.db, MemoryFilter())
    assert [(m.summary, m.unstructured) for m in page.memories] == [("The person said they will ship on Friday.",
                                                                      True)]


def test_memory_status_says_how_many_batches_fell_back(wisp_home: Path) -> None:
    """``wisp memory status`` shows how many batches fell back, and how."""
    import asyncio

    async def seed() -> None:
        s = await open_store(Config.load().db_path)
        try:
            await add_exchange(s, "We decided to use SQLite.", "OK.")
            await add_exchange(s, "hello", "hi", workspace="other", channel="2")
            with FakeOllama([reply(text("")), reply(text("")), reply(text("Small talk."))]) as srv:
                await Refiner(s, Config.load(), provider_for(srv)).run()
        finally:
            await s.close()

    asyncio.run(seed())
    wisp = str(Path(sys.executable).parent / "wisp")
    r = subprocess.run([wisp, "memory", "status"], capture_output=True, text=True, env=os.environ.copy(), timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("Fell back:"))
    assert "2 batches" in line and "1 kept the model's answer as it came" in line and \
        "1 kept what the person stated" in line
    r = subprocess.run([wisp, "memory", "status", "--json"], capture_output=True, text=True, env=os.environ.copy(),
                       timeout=60)
    data = json.loads(r.stdout)
    assert data["fell_back"] == 2 and data["fallbacks"] == {"unstructured": 1, "stated": 1}


async def test_none_records_the_batch_with_no_memory(store: Store, config: Config) -> None:
    await add_exchange(store, "thanks!", "You're welcome.")
    with FakeOllama([reply("NONE")]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
        assert report.outcome == "completed" and report.memories == [] and report.exchanges == 1
        assert (await Refiner(store, config, provider_for(srv)).run()).model_calls == 0
    assert await awaiting(store) == []


async def test_several_workspaces_in_one_run_without_merging(store: Store, config: Config) -> None:
    for i, ws in enumerate(["website", "personal", "website", "personal"]):
        await add_exchange(store, f"{ws} request {i}", workspace=ws, channel=ws,
                           requested_at=f"2025-03-04T1{i}:00:00.000000Z")
    with FakeOllama([reply(memory_reply(("1,2", "Website work."))), reply(memory_reply(("1-2", "Personal work.")))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
        assert report.batches == 2 and report.model_calls == 2
        for body in srv.chat_bodies:
            content = body["messages"][1]["content"]
            assert ("website request" in content) != ("personal request" in content)
    page = await find_memories(store.db, MemoryFilter())
    assert sorted((m.workspace, m.sources) for m in page.memories) == [("personal", 2), ("website", 2)]


async def test_the_memory_date_is_its_earliest_source_request(store: Store, config: Config) -> None:
    await add_exchange(store, "late", requested_at="2025-03-05T09:00:00.000000Z",
                       finished_at="2025-03-05T09:01:00.000000Z")
    await add_exchange(store, "early", requested_at="2025-03-04T23:30:00.000000Z",
                       finished_at="2025-03-04T23:31:00.000000Z")
    with FakeOllama([reply(memory_reply(("2", "Only the later one.")))]) as srv:
        await Refiner(store, config, provider_for(srv)).run()
    m = (await find_memories(store.db, MemoryFilter())).memories[0]
    assert m.event_at == "2025-03-05T09:00:00.000000Z" and m.event_end == "2025-03-05T09:01:00.000000Z"
    assert m.recorded_at > "2025-03-05"


async def test_disabled_memory_does_not_refine(store: Store, config: Config, tmp_path: Path) -> None:
    await add_exchange(store)
    config.set("memory.enabled", "off")
    report = await Refiner(store, config, never_called).run()
    assert report.outcome == "disabled"
    assert (await read_status(store.db))["last_job"] is None


async def test_an_unreachable_endpoint_stops_the_run_and_keeps_everything(store: Store, config: Config) -> None:
    await add_exchange(store, "a", channel="1")
    await add_exchange(store, "b", channel="2")
    with FakeOllama() as srv:
        url = srv.base_url
    gone = EndpointSideCall(OllamaEndpoint(url, "m", timeout_s=1, load_wait_s=0))
    report = await Refiner(store, config, gone).run()
    assert report.outcome == "failed" and report.model_calls == 1  # stopped after the first refusal
    assert len(await awaiting(store)) == 2


# --- the lock -----------------------------------------------------------------------------------


class GatedEndpoint:
    """Wraps an endpoint; its first call waits until ``gate`` is set."""

    def __init__(self, inner: Any, gate: asyncio.Event, entered: asyncio.Event) -> None:
        self.inner, self.gate, self.entered = inner, gate, entered
        self.model = inner.model

    async def stream_chat(self, messages, tools, options):
        self.entered.set()
        await self.gate.wait()
        async for item in self.inner.stream_chat(messages, tools, options):
            yield item


async def test_two_refiners_never_take_the_same_batch(tmp_path: Path, config: Config) -> None:
    db = tmp_path / "shared.db"
    store_a = await open_store(db)
    store_b = await open_store(db)  # a second connection, as a second process has
    try:
        for i in range(3):
            await add_exchange(store_a, f"website {i}", workspace="website", channel="1",
                               requested_at=f"2025-03-04T10:0{i}:00.000000Z")
        for i in range(2):
            await add_exchange(store_a, f"personal {i}", workspace="personal", channel="2",
                               requested_at=f"2025-03-04T11:0{i}:00.000000Z")
        gate, entered = asyncio.Event(), asyncio.Event()
        with FakeOllama([reply(memory_reply(("1-2", "Personal."))), reply(memory_reply(("1-3", "Website.")))]) as srv:
            gated = EndpointSideCall(GatedEndpoint(OllamaEndpoint(srv.base_url, "wisp-fake:latest", timeout_s=5),
                                                   gate, entered))

            run_a = asyncio.create_task(Refiner(store_a, config, gated, max_batches=1).run())
            await entered.wait()  # A holds the website batch and is inside its model call
            report_b = await Refiner(store_b, config, provider_for(srv)).run()
            assert report_b.exchanges == 2 and report_b.memories == ["MEM-000001"]  # only the personal batch
            assert "personal 0" in srv.chat_bodies[0]["messages"][1]["content"]
            gate.set()
            report_a = await run_a
            assert report_a.exchanges == 3 and report_a.memories == ["MEM-000002"]
            assert len(srv.chat_bodies) == 2
        async with store_a.db.execute(
                "SELECT exchange_id, COUNT(*) FROM episode_memory_sources GROUP BY exchange_id") as cur:
            counts = dict(await cur.fetchall())
        assert sorted(counts) == [1, 2, 3, 4, 5] and set(counts.values()) == {1}
        async with store_a.db.execute("SELECT state, COUNT(*) FROM episode_batches GROUP BY state") as cur:
            assert dict(await cur.fetchall()) == {"recorded": 2}
    finally:
        await store_a.close()
        await store_b.close()


async def test_a_claim_by_a_dead_process_is_released(store: Store, config: Config) -> None:
    x = await add_exchange(store, "orphaned")
    live = f"{socket.gethostname()}:{os.getpid()}:livelive"
    claimed = await claim_batch(store, live, None, UTC_TZ)
    assert [c.id for c in claimed.candidates] == [x]
    assert await claim_batch(store, "someone-else", None, UTC_TZ) is None  # held by a live refiner
    dead = f"{socket.gethostname()}:{2 ** 22 + 12345}:deadbeef"  # no such pid: the refiner is gone
    async with store.transaction() as db:
        await db.execute("UPDATE episode_batches SET owner = ? WHERE id = ?", (dead, claimed.id))
    with FakeOllama([reply(memory_reply(("1", "Recovered.")))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.memories == ["MEM-000001"]
    # the dead refiner cannot record its stale batch afterwards
    from wisp.core.episodes.refine import ParsedMemory
    with pytest.raises(RuntimeError, match="released"):
        await record_batch(store, claimed, dead, [ParsedMemory("late", [1])], None)


def test_two_refine_processes_on_one_file(ollama_home, tmp_path: Path) -> None:
    """Two `wisp memory refine` processes at once: every group is refined once."""
    home, srv = ollama_home
    db = home / "data" / "wisp.db"

    async def seed() -> None:
        async with await open_store(db) as s:
            for g in range(8):
                for i in range(2):
                    await add_exchange(s, f"group {g} request {i}", workspace=f"ws{g % 2}", channel=str(g),
                                       conversation_id=g, requested_at=f"2025-03-04T1{g}:0{i}:00.000000Z")

    asyncio.run(seed())
    srv.push(*[reply(memory_reply(("1,2", f"Summary {k}."))) for k in range(8)])
    wisp = str(Path(sys.executable).parent / "wisp")
    procs = [subprocess.Popen([wisp, "memory", "refine", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=os.environ.copy()) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    reports = [json.loads(o[0]) for o in outs]
    assert sum(r["batches"] for r in reports) == 8
    assert sum(r["model_calls"] for r in reports) == len(srv.chat_bodies) == 8

    async def check() -> None:
        async with await open_store(db) as s:
            async with s.db.execute("SELECT exchange_id, COUNT(*) FROM episode_memory_sources GROUP BY exchange_id") as cur:
                counts = dict(await cur.fetchall())
            assert len(counts) == 16 and set(counts.values()) == {1}
            async with s.db.execute("SELECT COUNT(*) FROM episode_memories") as cur:
                assert (await cur.fetchone())[0] == 8

    asyncio.run(check())


def test_a_summary_without_a_word_is_no_memory() -> None:
    """SmolLM2's broken JSON once left a memory reading ``] }}``."""
    from wisp.core.episodes.refine import read_memories

    assert read_memories('{"memories": [{"summary": "] }}", "sources": [1]}]}', 2) == []
    kept = read_memories('{"memories": [{"summary": "We launch on Friday.", "sources": [1]}]}', 2)
    assert [m.summary for m in kept] == ["We launch on Friday."]


async def test_a_memory_about_something_else_is_dropped_and_the_statement_kept(store: Store, config: Config) -> None:
    """SmolLM2 answered a batch stating a launch day with memories about turning a website on and off."""
    await add_exchange(store, "We decided the website launch is on Friday. Please remember that.", "Noted.")
    off = json.dumps({"memories": [{"summary": "How to switch a router off and on again in one minute, with "
                                               "cables, lights and the vendor's support hotline.", "sources": [1]}]})
    with FakeOllama([reply(text(off)), reply(text(off))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.model_calls == 2 and report.fallbacks == {"stated": 1} and len(report.memories) == 1
    status = await read_status(store.db)
    assert status["fallbacks"] == {"stated": 1}


async def test_a_decision_no_memory_names_is_kept_beside_the_models_memories(store: Store, config: Config) -> None:
    """SmolLM2 kept "Read docs/part80.txt and name one word in it" of exchanges that decided a launch day:
    a memory about the exchanges, which leaves out what the person decided. The decision is kept beside
    it, in the person's words; a memory that names it needs nothing beside it."""
    await add_exchange(store, "We decided the website launch is on Friday. Please remember that.", "Noted.")
    await add_exchange(store, "Read docs/part80.txt and name one word in it.", "The word is client.",
                       requested_at="2025-03-04T14:06:00.000000Z")
    beside = json.dumps({"memories": [{"summary": "The person asked to read docs/part80.txt and name one word "
                                                  "in it; the word was client.", "sources": [2]}]})
    with FakeOllama([reply(text(beside))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.model_calls == 1 and len(report.memories) == 2 and report.fallbacks == {"stated-beside": 1}
    texts = [m.summary for m in (await find_memories(store.db, MemoryFilter())).memories]
    assert any("part80" in t for t in texts)
    assert 'The person said: "We decided the website launch is on Friday."' in texts  # one sentence each


@pytest.mark.parametrize("summary", ["The website launch is on Friday.", "Launch day: Friday, for the website."])
async def test_a_memory_that_names_the_decision_needs_nothing_beside_it(store: Store, config: Config,
                                                                        summary: str) -> None:
    await add_exchange(store, "We decided the website launch is on Friday. Please remember that.", "Noted.")
    named = json.dumps({"memories": [{"summary": summary, "sources": [1]}]})
    with FakeOllama([reply(text(named))]) as srv:
        report = await Refiner(store, config, provider_for(srv)).run()
    assert report.memories == ["MEM-000001"] and report.fallbacks == {}


def test_names_statement_leaves_out_the_words_that_mark_a_statement() -> None:
    from wisp.core.episodes.refine import ParsedMemory, names_statement, plainly_stated

    said = "We decided the website launch is on Friday. Please remember that."
    assert names_statement(said, [ParsedMemory("Launch on Friday.", [1])])
    assert not names_statement(said, [ParsedMemory("We decided to remember that, please.", [1])])
    assert plainly_stated(said) and not plainly_stated("You should always read the docs first.")
