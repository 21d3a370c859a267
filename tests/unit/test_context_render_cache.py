"""Composing incrementally (issue 12): an ended turn is rendered once, kept in memory and in the
store, read back on reopening, rendered again only when what its render depends on changes, and a
request reads only the turns the running summary does not cover. The request is the same, byte for
byte, as one composed with nothing kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import wisp.core.context.composer as composer_module
from wisp.core import events as ev
from wisp.core.context.bookkeeping import ASSESS_TURNS
from wisp.core.context.composer import NotLoaded, build
from wisp.core.context.render_cache import RENDER_VERSION, flags_key, render_key
from wisp.core.context.turns import ToolFlags
from wisp.core.session import Session, SessionOptions
from wisp.core.tokens import estimate_messages
from tests.support.home import write_config
from tests.support.long_conversation import write_turns


@pytest.fixture
def home(wisp_home: Path) -> Path:
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": "http://127.0.0.1:9",
                             "model.name": "wisp-fake:latest", "model.context_window": 1_000_000})
    return wisp_home


class Counted:
    """Counts the renders the composer makes (wraps wisp.core.context.composer.render)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = composer_module.render

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(composer_module, "render", counted)


async def uncached(s: Session, conv: int) -> Any:
    """The request composed from the entries alone, with nothing kept or looked up."""
    cache = s.context.composer.renders

    async def nothing(*args: Any, **kwargs: Any) -> Any:
        return {}

    lookup, keep = cache.lookup, cache.keep
    cache.lookup, cache.keep = nothing, nothing  # type: ignore[method-assign]
    try:
        return build(await s.context._inputs(conv))
    finally:
        cache.lookup, cache.keep = lookup, keep  # type: ignore[method-assign]


def plain(ctx: Any) -> str:
    return json.dumps([ctx.messages, [(s.number, s.tokens, s.whole, s.references) for s in ctx.turns], ctx.total])


async def test_an_ended_turn_is_rendered_once_then_read_from_memory_and_the_store(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Counted(monkeypatch)
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file", "run_command"])) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 30, output_lines=50)
        first = await s.context.compose(conv)
        assert counted.calls == 30
        again = await s.context.compose(conv)
        assert counted.calls == 30, "a second request rendered ended turns again"
        assert plain(again) == plain(first)
        # the request's estimate, summed as it is composed, is what counting the whole request gives
        assert again.estimated == estimate_messages(again.messages, again.tools or None) > 0
        # nothing kept: the same request, byte for byte
        assert plain(await uncached(s, conv)) == plain(first)
        counted.calls = 30
        await write_turns(s.store, conv, 2, output_lines=50, start=31)
        more = await s.context.compose(conv)
        assert counted.calls == 32 and len(more.turns) == 32, "only the two new turns are rendered"
    async with await Session.open(SessionOptions(workdir=tmp_path, resume=conv,
                                                 tools=["read_file", "run_command"])) as s:
        reopened = await s.context.compose(conv)
        assert counted.calls == 32, "reopening rendered again what the store kept"
        assert plain(reopened) == plain(more)


async def test_a_render_is_made_again_when_what_it_depends_on_changes(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference form depends on the tools (memory there or not, which tools only read): a
    conversation reopened with other tools is rendered again, and right."""
    counted = Counted(monkeypatch)
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["run_command"])) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 5, output_lines=50)
        without = await s.context.compose(conv)
    assert counted.calls == 5
    async with await Session.open(SessionOptions(workdir=tmp_path, resume=conv,
                                                 tools=["run_command", "memory"])) as s:
        with_memory = await s.context.compose(conv)
        assert counted.calls == 10
        assert plain(with_memory) != plain(without)
        assert 'memory \\"recall entry' in json.dumps(with_memory.messages)
        assert plain(await uncached(s, conv)) == plain(with_memory)


def test_the_key_names_everything_a_render_depends_on() -> None:
    class T:
        def __init__(self, state: str, ended_at: str | None) -> None:
            self.state, self.ended_at = state, ended_at

    plain_flags = flags_key(ToolFlags())
    assert flags_key(ToolFlags(has_memory=True)) != plain_flags
    assert flags_key(ToolFlags(read_only={"read_file": True})) != flags_key(ToolFlags(read_only={"read_file": False}))
    assert render_key(T("done", "t1"), plain_flags) != render_key(T("stopped", "t1"), plain_flags)
    assert render_key(T("done", "t1"), plain_flags) != render_key(T("done", "t2"), plain_flags)
    assert str(RENDER_VERSION) and render_key(T("done", "t1"), plain_flags) == render_key(T("done", "t1"), plain_flags)


async def test_only_the_turns_the_summary_does_not_cover_are_read(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=[])) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 40, output_lines=5)
        await s.context.summaries.record(conv, "turns 1-30 were about tests", covers=list(range(1, 31)),
                                         refs=[], items={}, model="m")
        asked: list[int] = []
        real = s.store.turns_after

        async def turns_after(conversation: int, after: int, limit: int) -> Any:
            asked.append(after)
            return await real(conversation, after, limit)

        monkeypatch.setattr(s.store, "turns_after", turns_after)
        entries_of: list[int] = []
        real_entries = s.store.turn_entries

        async def turn_entries(ids: Any) -> Any:
            ids = list(ids)
            entries_of.extend(ids)
            return await real_entries(ids)

        monkeypatch.setattr(s.store, "turn_entries", turn_entries)
        ctx = await s.context.compose(conv)
        assert asked == [30] and [t.number for t in ctx.turns] == list(range(31, 41))
        assert len(entries_of) == 10
        entries_of.clear()
        await s.context.compose(conv)
        assert entries_of == [], "a second request read entries of ended turns again"


async def test_fitting_sends_kept_recent_turns_as_references(
        wisp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first fitting step builds the request again with the recent turns' outputs as
    references, from the same inputs: with every render kept (reopened from the store), the
    turns go as references, not empty, and the request is the one composed with nothing kept."""
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": "http://127.0.0.1:9",
                             "model.name": "wisp-fake:latest", "model.context_window": 6000,
                             "context.recent_turns": 3})
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file", "run_command"])) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 5, output_lines=200)
        assert (await s.context.compose(conv)).over_budget  # three whole 200-line outputs do not fit
    counted = Counted(monkeypatch)
    async with await Session.open(SessionOptions(workdir=tmp_path, resume=conv,
                                                 tools=["read_file", "run_command"])) as s:
        prepared = await s.context.prepare(conv, 6)
        ctx = prepared.context
        assert counted.calls == 0, "kept renders were rendered again"
        assert not ctx.over_budget and ctx.recent_turns == 0
        assert [(t.number, t.whole, bool(t.references)) for t in ctx.turns] == [(n, False, True) for n in range(1, 6)]
        text = json.dumps(ctx.messages)
        assert all(f"question {n}:" in text for n in range(1, 6)) and "test_199" not in text
        assert any(isinstance(e, ev.Notice) and e.key == "fit" for e in prepared.events)
        inputs = await s.context._inputs(conv)
        fresh = await uncached(s, conv)
        assert plain(build(replace(inputs, recent_turns=0))) == plain(
            build(replace(await uncached_inputs(s, conv), recent_turns=0)))
        assert fresh.over_budget


async def uncached_inputs(s: Session, conv: int) -> Any:
    """The next request's inputs read from the entries alone, with nothing kept or looked up."""
    cache = s.context.composer.renders

    async def nothing(*args: Any, **kwargs: Any) -> Any:
        return {}

    lookup, keep = cache.lookup, cache.keep
    cache.lookup, cache.keep = nothing, nothing  # type: ignore[method-assign]
    try:
        return await s.context._inputs(conv)
    finally:
        cache.lookup, cache.keep = lookup, keep  # type: ignore[method-assign]


async def test_the_assessment_reads_the_turns_it_assesses_though_their_renders_are_kept(
        wisp_home: Path, tmp_path: Path) -> None:
    """With context.assess on, the last ASSESS_TURNS ended turns' entries are read (the assessment
    reads their prompts and replies), though their renders are kept; earlier turns are not read."""
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": "http://127.0.0.1:9",
                             "model.name": "wisp-fake:latest", "model.context_window": 1_000_000,
                             "context.assess": True})
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["run_command"])) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 10, output_lines=5)
        await s.context.compose(conv)  # every render kept
        inputs = await s.context._inputs(conv)
        read = {n: [e.kind for e in entries] for n, entries in inputs.ended if not isinstance(entries, NotLoaded)}
        assert sorted(read) == list(range(11 - ASSESS_TURNS, 11))
        assert all("prompt" in kinds and "reply" in kinds for kinds in read.values())
