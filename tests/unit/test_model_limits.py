"""The endpoints' limits (issue "Nothing runs, leaks, hangs or is lost that shouldn't be"):

- a server that keeps the connection alive but never finishes (blank lines, SSE comments) is ended
  by model.reply_timeout_s, beside the idle timeout, with a clear error naming the setting, and
  KeepAlive events let the UI show the wait;
- every number an endpoint sends is clamped, so a prompt_eval_count past 2^63 ends a turn normally.

Against real fake servers on 127.0.0.1 (tests/support/fakes).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wisp.core import events as ev
from wisp.core.model import base as mb
from wisp.core.model._transport import MAX_COUNT, clamp_count
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.openai import OpenAIEndpoint
from wisp.core.session import Session, SessionOptions
from tests.support.fakes import FakeOllama, FakeOpenAI, fault, make_server, raw, reply, text
from tests.support.home import write_config


def endpoint(srv, **kw):
    cls = OllamaEndpoint if isinstance(srv, FakeOllama) else OpenAIEndpoint
    return cls(srv.base_url, "wisp-fake", **kw)


async def collect(ep, limit_s: float = 20.0):
    """The events of one reply and the error that ended it; fails (not hangs) past ``limit_s``."""
    events, error = [], None

    async def run() -> None:
        async for item in ep.stream_chat([{"role": "user", "content": "hi"}], None,
                                         mb.ChatOptions(context_window=2048)):
            events.append(item)

    try:
        await asyncio.wait_for(run(), limit_s)
    except mb.EndpointError as exc:
        error = exc
    return events, error


@pytest.mark.parametrize("protocol,line", [("ollama", None), ("openai", None), ("openai", "\n"),
                                           ("ollama", " \n")])
async def test_a_trickling_server_is_ended_by_the_reply_deadline(protocol: str, line: str | None) -> None:
    with make_server(protocol, [fault.trickle(text("Hel"), text("lo"), every=0.1, line=line)]) as srv:
        ep = endpoint(srv, timeout_s=1.0, reply_timeout_s=1.5)  # idle timeout never fires: 0.1 s apart
        started = time.monotonic()
        events, error = await collect(ep)
        took = time.monotonic() - started
        await ep.aclose()
    assert isinstance(error, mb.EndpointTimeout), error
    assert "did not finish the reply within 1.5 s" in str(error) and "model.reply_timeout_s" in str(error)
    assert "sending only keep-alives" in str(error)
    assert "".join(e.text for e in events if isinstance(e, mb.StreamText)) == "Hello"  # what came is kept
    waits = [e for e in events if isinstance(e, mb.KeepAlive)]
    assert waits and all(w.limit_s == 1.5 and 0 < w.waited_s < 1.6 for w in waits)
    assert 1.4 < took < 6


async def test_the_deadline_fires_between_two_lines() -> None:
    with FakeOpenAI([fault.trickle(text("Hel"), every=4.0)]) as srv:
        ep = endpoint(srv, timeout_s=10.0, reply_timeout_s=1.0)
        started = time.monotonic()
        events, error = await collect(ep)
        took = time.monotonic() - started
        await ep.aclose()
    assert isinstance(error, mb.EndpointTimeout) and "within 1 s" in str(error)
    assert "keep-alives" not in str(error) and took < 3.0, took


async def test_without_keep_alives_the_idle_timeout_still_answers_first() -> None:
    with FakeOllama([fault.stall(text("Hel"))]) as srv:
        ep = endpoint(srv, timeout_s=0.5, reply_timeout_s=30)
        events, error = await collect(ep)
        await ep.aclose()
    assert isinstance(error, mb.EndpointTimeout) and "sent nothing more of the reply for 0.5 s" in str(error)


async def test_a_normal_stream_gives_no_keep_alive_events() -> None:
    for srv_cls in (FakeOllama, FakeOpenAI):
        with srv_cls([reply("a", "b", "c")]) as srv:
            ep = endpoint(srv, reply_timeout_s=30)
            events, error = await collect(ep)
            await ep.aclose()
        assert error is None and not [e for e in events if isinstance(e, mb.KeepAlive)]


async def test_pings_between_the_data_of_a_streaming_reply_are_no_wait() -> None:
    """sse-starlette (llama-cpp-python's server) sends ``: ping`` comments every 15 s while the reply
    streams; a new user saw "Waiting for the reply" in the middle of the reply. A keep-alive is a wait
    only when no data has come for KEEP_ALIVE_EVERY_S."""
    from tests.support.fakes import pause

    steps = []
    for i in range(14):  # 2.1 s of data, a ping after every piece
        steps += [pause(0.15), text(f"w{i} "), raw(": ping - 2026-12-01 12:00:00\n\n")]
    with FakeOpenAI([reply(*steps)]) as srv:
        ep = endpoint(srv, reply_timeout_s=30)
        events, error = await collect(ep)
        await ep.aclose()
    assert error is None
    assert "".join(e.text for e in events if isinstance(e, mb.StreamText)).startswith("w0 w1 ")
    assert not [e for e in events if isinstance(e, mb.KeepAlive)]


async def test_a_slow_json_answer_is_bounded_too() -> None:
    """/api/show (a plain request) falls under the same deadline."""
    with FakeOllama([fault.trickle(every=0.1)]) as srv:
        ep = OllamaEndpoint(srv.base_url, "m", timeout_s=1.0, reply_timeout_s=1.0)
        started = time.monotonic()
        events, error = await collect(ep)
        await ep.aclose()
    assert isinstance(error, mb.EndpointTimeout) and time.monotonic() - started < 6


async def test_a_whole_turn_ends_with_an_error_naming_the_setting(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOpenAI([fault.trickle(text("partial "), every=0.1)]) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.timeout_s": 1,
                                 "model.reply_timeout_s": 1.2})
        async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
            assert await s.connect()
            items = [item async for item in s.run_turn("hello")]
            entries = await s.store.entries(s.conversation_id)
    errors = [i for i in items if isinstance(i, ev.Error)]
    assert len(errors) == 1 and errors[0].kind == "timeout" and "model.reply_timeout_s" in errors[0].message
    assert isinstance(items[-1], ev.TurnEnded) and items[-1].state == "error"
    replies = [e for e in entries if e.kind == "reply"]
    assert replies and replies[-1].content == "partial "
    # the wait is shown while it lasts: one changing notice that names the setting and Esc
    waits = [i for i in items if isinstance(i, ev.Notice) and i.key == "reply-wait"]
    assert waits and "model.reply_timeout_s" in waits[-1].text and "Esc" in waits[-1].text


# --- numbers an endpoint sends -------------------------------------------------------------------------


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=30),
                 st.just("9" * 5000), st.just(10 ** 400)))
def test_clamp_count_never_raises_and_stays_in_range(value) -> None:
    got = clamp_count(value)
    assert got is None or (isinstance(got, int) and not isinstance(got, bool) and 0 <= got <= MAX_COUNT)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        assert got == value


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
async def test_a_huge_token_count_does_not_crash_the_turn(protocol: str, wisp_home: Path, tmp_path: Path) -> None:
    huge = 2 ** 64 + 7
    with make_server(protocol, [reply("ok", usage=(huge, 10 ** 30))]) as srv:
        write_config(wisp_home, {"model.provider": protocol, "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5})
        async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
            assert await s.connect()
            items = [item async for item in s.run_turn("hello")]
            turns = await s.store.turns(s.conversation_id)
    assert isinstance(items[-1], ev.TurnEnded) and items[-1].state == "done", items
    usage = next(i for i in items if isinstance(i, ev.Usage))
    assert usage.prompt == MAX_COUNT and usage.completion == MAX_COUNT
    assert turns[-1].state == "done"


async def test_odd_numbers_in_a_stream_are_read_not_raised() -> None:
    lines = ['{"message": {"role": "assistant", "content": "x"}, "done": false}',
             '{"message": {"role": "assistant", "content": ""}, "done": true, "prompt_eval_count": 1e400, '
             '"eval_count": "12", "done_reason": "stop"}']
    with FakeOllama([{"fault": "disconnect", "steps": [raw(line) for line in lines], "clean": True}]) as srv:
        ep = endpoint(srv)
        events, error = await collect(ep)
        await ep.aclose()
    assert error is None
    usage = next(e for e in events if isinstance(e, mb.StreamUsage))
    assert usage.prompt_tokens is None and usage.completion_tokens == 12


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
async def test_lone_surrogates_from_an_endpoint_become_replacement_characters(protocol: str) -> None:
    import json

    if protocol == "ollama":
        lines = [json.dumps({"message": {"role": "assistant", "content": "a\ud800b", "thinking": "\udfff"},
                             "done": False})]
    else:
        lines = ["data: " + json.dumps({"choices": [{"delta": {"content": "a\ud800b", "reasoning_content": "\udfff"},
                                                     "finish_reason": None}]})]
    with make_server(protocol, [{"steps": [raw(line) for line in lines], "finish": "stop"}]) as srv:
        ep = endpoint(srv)
        events, error = await collect(ep)
        await ep.aclose()
    assert error is None
    assert [e.text for e in events if isinstance(e, mb.StreamText)] == ["a\ufffdb"]
    assert [e.text for e in events if isinstance(e, mb.StreamThinking)] == ["\ufffd"]


async def test_a_directory_listing_with_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    import os

    from wisp.core.tools.base import ToolContext
    from wisp.core.tools.read_file import ReadFile

    os.makedirs(tmp_path / "d")
    open(os.path.join(os.fsencode(tmp_path / "d"), b"bad\xff.txt"), "w").close()
    r = await ReadFile().run({"path": "d"}, ToolContext(workdir=tmp_path, config=None))
    assert not r.ok and "bad\ufffd.txt" in r.content
    r.content.encode("utf-8")
