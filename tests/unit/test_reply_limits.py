"""A reply's limits: the cap (model.max_tokens, by default the request's reserve), a reply
that repeats itself (stopped while it streams), and a model that repeats one failing tool
call (not run again; the turn ends at the third; later requests hold one collapsed
reference). Real fake servers on 127.0.0.1, a real store, and the real ``wisp`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.config import Config
from tests.support.fakes import FakeOllama, FakeOpenAI, reply, text, tool_call
from tests.support.home import write_config
from tests.unit.test_agent import open_session, run
from tests.unit.test_cli import wisp


def sent_cap(body: dict) -> int | None:
    """The reply cap a chat request carried, in either protocol."""
    return (body.get("options") or {}).get("num_predict") if "options" in body else body.get("max_tokens")


def capped(body: dict) -> dict:
    """A server that honours the cap it is sent: one token a piece, then ``length``."""
    cap = sent_cap(body) or 5000
    return reply(*["tok "] * cap, finish="length", usage=(50, cap))


def looping_call(body: dict) -> dict:
    """A model that repeats one failing call forever (read_file of a directory)."""
    return reply(tool_call("read_file", {"path": "src"}), finish="tool_calls")


@pytest.fixture(params=["ollama", "openai"])
def home(request, wisp_home: Path):
    cls = FakeOllama if request.param == "ollama" else FakeOpenAI
    with cls() as srv:
        write_config(wisp_home, {"model.provider": request.param, "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.load_wait_s": 10, "model.context_window": 8192})
        yield wisp_home, srv


# --- the cap ------------------------------------------------------------------------------------

async def test_a_reply_is_capped_at_the_reserve_unless_max_tokens_is_set(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        await run(s, "one")
        s.config.set("context.reserve", "300")
        await run(s, "two")
        s.config.set("model.max_tokens", "77")
        await run(s, "three")
    assert [sent_cap(b) for b in srv.chat_bodies] == [1024, 300, 77]


async def test_a_reply_that_ends_at_the_cap_is_kept_marked_and_names_the_key(home, tmp_path: Path) -> None:
    _, srv = home
    srv.responder = capped
    Config.load().set("context.reserve", "40")
    async with await open_session(tmp_path) as s:
        events = await run(s, "write a novel")
        entry = (await s.store.entries(s.conversation_id))[-1]
    assert events[-1].state == "cut"
    assert entry.kind == "reply" and entry.content == "tok " * 40 and entry.meta.get("cut") is True
    assert [(e.cut, e.repeated) for e in events if isinstance(e, ev.ReplyRecorded)] == [(True, False)]
    [note] = [e for e in events if isinstance(e, ev.Notice) and "output limit" in e.text]
    assert "40 tokens" in note.text and "model.max_tokens" in note.text and "context.reserve" in note.text


# --- a reply that repeats itself ------------------------------------------------------------------

LINE = "The file README.md says hello.\n"


async def test_a_reply_repeating_a_span_is_stopped_kept_and_marked(home, tmp_path: Path) -> None:
    _, srv = home
    srv.push(reply("Here it is:\n", *[LINE] * 2000, usage=(50, 9000)))
    async with await open_session(tmp_path) as s:
        events = await run(s, "Read the file README.md")
        shown = "".join(e.text for e in events if isinstance(e, ev.TextDelta))
        entry = [e for e in await s.store.entries(s.conversation_id) if e.kind == "reply"][-1]
        await run(s, "and now?")
    assert events[-1].state == "cut"
    assert 600 <= len(shown) < 600 + 48 + 2 * len(LINE) + 20  # stopped within one look of the rule
    assert entry.content == shown and entry.meta["cut"] is True  # kept as it arrived
    assert entry.meta["repeat"]["span"] == len(LINE) and entry.meta["repeat"]["start"] == len("Here it is:")  # its newline is the span's last
    [recorded] = [e for e in events if isinstance(e, ev.ReplyRecorded)]
    assert recorded.cut and recorded.repeated  # the screen marks it as stopped for repeating, not as cut
    [note] = [e for e in events if isinstance(e, ev.Notice) and "repeated" in e.text]
    assert "model.repeat_stop_chars" in note.text and "31-character span" in note.text
    # the next request sends one copy and a line saying it repeated, not the copies
    sent = [m for m in srv.chat_bodies[1]["messages"] if m["role"] == "assistant"][0]["content"]
    assert sent.count(LINE.strip()) == 1 and "repeated this 31-character span" in sent


async def test_repeat_stop_chars_0_never_stops_and_a_long_table_is_never_stopped(home, tmp_path: Path) -> None:
    _, srv = home
    rows = [f"| {i} | item {i * 7 % 13} | {i * 31 % 100}.00 |\n" for i in range(300)]
    srv.push(reply("| n | name | price |\n", "|---|---|---|\n", *rows))
    async with await open_session(tmp_path) as s:
        events = await run(s, "a table")
        assert events[-1].state == "done"
        s.config.set("model.repeat_stop_chars", "0")
        srv.push(reply(*[LINE] * 100))
        events = await run(s, "loop")
        assert events[-1].state == "done"
        assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == LINE * 100


# --- a failing call repeated ----------------------------------------------------------------------

async def test_a_model_repeating_one_failing_call_ends_the_turn_at_the_third(home, tmp_path: Path) -> None:
    _, srv = home
    (tmp_path / "src").mkdir()
    srv.responder = looping_call
    async with await open_session(tmp_path) as s:
        events = await run(s, "Hi! I'm working on an invoice calculator")
        results = [e for e in events if isinstance(e, ev.ToolResult)]
        entries = await s.store.entries(s.conversation_id)
        srv.responder = None
        srv.push(reply("ok"))
        await run(s, "next")
    assert len(srv.chat_bodies) == 4  # three requests in turn 1 (the third call ends it), one in turn 2
    assert [r.ok for r in results] == [False, False, False]
    assert "directory" in results[0].content
    assert "already failed in this turn" in results[1].content and "directory" in results[1].content
    assert "not run" in results[2].content
    [note] = [e for e in events if isinstance(e, ev.Notice) and "same call" in e.text]
    assert 'read_file {"path": "src"}' in note.text and events[-1].state == "done"
    # the second request told the model once, in the result; the store keeps all three calls
    assert [e.kind for e in entries].count("tool_call") == 3
    # the next turn's request holds one collapsed reference, not the pattern
    later = srv.chat_bodies[-1]["messages"]
    calls = [c for m in later if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    tools = [m["content"] for m in later if m["role"] == "tool"]
    assert len(calls) == 1 and len(tools) == 1
    assert tools[0].startswith("[the same call failed 3 times in this turn: read_file") and "directory" in tools[0]


async def test_calls_that_succeed_or_differ_are_untouched(home, tmp_path: Path) -> None:
    _, srv = home
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.push(*[reply(tool_call("read_file", {"path": "a.txt"}), finish="tool_calls")] * 3,
             *[reply(tool_call("read_file", {"path": f"missing{i}.txt"}), finish="tool_calls") for i in range(3)],
             reply("done"))
    async with await open_session(tmp_path) as s:
        events = await run(s, "go")
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    assert [r.ok for r in results] == [True] * 3 + [False] * 3
    assert not any("already failed" in r.content for r in results)
    assert not any(isinstance(e, ev.Notice) and "same call" in e.text for e in events)
    assert len(srv.chat_bodies) == 7 and events[-1].state == "done"


def test_wisp_ask_shows_the_loop_notice_and_the_cap(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "src").mkdir()
    srv.responder = looping_call
    r = wisp("ask", "read my project", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "wisp: The turn was ended: the model asked 3 times for the same call" in r.stderr
    assert len(srv.chat_bodies) == 3
    srv.responder = capped
    wisp("config", "set", "context.reserve", "25")
    r = wisp("ask", "write a lot", "--continue", cwd=tmp_path)
    assert r.stdout.strip() == ("tok " * 25).strip()
    assert "25 tokens the request kept for the reply" in r.stderr and "model.max_tokens" in r.stderr
    collapsed = [m["content"] for m in srv.chat_bodies[-1]["messages"] if m["role"] == "tool"]
    assert len(collapsed) == 1 and "failed 3 times" in collapsed[0]
    assert json.loads(json.dumps(srv.chat_bodies[-1]["options"]))["num_predict"] == 25
