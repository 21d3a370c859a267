"""The agent loop against fake endpoints on 127.0.0.1, with a real store and audit log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.config import Config
from wisp.core.session import Session, SessionOptions
from wisp.core.transcript import load_turn, turn_events
from tests.support.home import write_config
from tests.support.fakes import FakeOllama, FakeOpenAI, fault, reply, text, thinking, tool_call


async def open_session(workdir: Path, **opts) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, **opts))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


def kinds(events: list) -> list[str]:
    return [type(e).__name__ for e in events]


@pytest.fixture(params=["ollama", "openai"])
def any_home(request, wisp_home: Path):
    cls = FakeOllama if request.param == "ollama" else FakeOpenAI
    with cls() as srv:
        write_config(wisp_home, {"model.provider": request.param, "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.load_wait_s": 10})
        yield wisp_home, srv


async def test_reply_streams_and_is_recorded_with_audit_events(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(text("Hel"), text("lo "), text("there"), usage=(40, 3)))
    async with await open_session(tmp_path) as s:
        events = await run(s, "hi")
        assert kinds(events)[0] == "TurnStarted"
        assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Hello there"
        usage = [e for e in events if isinstance(e, ev.Usage)]
        assert usage and usage[0].prompt == 40 and usage[0].completion == 3
        assert events[-1] == ev.TurnEnded(1, "done")
        entries = await s.store.entries(s.conversation_id)
        assert [(e.kind, e.content) for e in entries] == [("prompt", "hi"), ("reply", "Hello there")]
        for e in entries:
            event = s.audit.read(e.audit_ref)
            assert event is not None and event["payload"]["content"] == e.content
            assert event["conversation"] == s.conversation_id and event["entry"] == e.number
        turn = (await s.store.turns(s.conversation_id))[0]
        assert turn.state == "done" and turn.prompt_tokens == 40


async def test_tool_call_runs_and_result_goes_back(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    (tmp_path / "notes.txt").write_text("the codename is BLUE HERON\n")
    srv.push(reply(text("Let me look."), tool_call("read_file", {"path": "notes.txt"}), finish="tool_calls"),
             reply(text("It says BLUE HERON.")))
    async with await open_session(tmp_path) as s:
        events = await run(s, "what is in notes.txt?")
        calls = [e for e in events if isinstance(e, ev.ToolCall)]
        results = [e for e in events if isinstance(e, ev.ToolResult)]
        assert calls[0].name == "read_file" and calls[0].arguments == {"path": "notes.txt"}
        assert results[0].ok and "1\tthe codename is BLUE HERON" in results[0].content
        assert events[-1].state == "done"
        # the second request carries the call and its result
        second = srv.chat_bodies[1]["messages"]
        tool_msgs = [m for m in second if m["role"] == "tool"]
        assert "BLUE HERON" in tool_msgs[0]["content"]
        entries = await s.store.entries(s.conversation_id)
        assert [e.kind for e in entries] == ["prompt", "reply", "tool_call", "tool_result", "reply"]
        assert entries[2].audit_event_id and s.audit.read(entries[3].audit_ref)["kind"] == "tool.result"


async def test_ollama_gets_num_ctx_on_every_request(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    Config.load().set("model.context_window", "8192")
    srv.push(reply(tool_call("system_info", {"topic": "os"}), finish="tool_calls"), reply(text("ok")))
    async with await open_session(tmp_path) as s:
        await run(s, "which os?")
    assert len(srv.chat_bodies) == 2
    assert all(b["options"]["num_ctx"] == 8192 for b in srv.chat_bodies)


async def test_num_ctx_falls_back_to_api_show(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await open_session(tmp_path) as s:
        await run(s, "hello")
        assert s.context_window and s.context_window > 0
    assert srv.chat_bodies[0]["options"]["num_ctx"] == s.context_window


async def test_thinking_is_apart_and_never_sent_back(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(thinking("let me think"), text("<think>more</think>"), text("Answer.")))
    async with await open_session(tmp_path) as s:
        events = await run(s, "q1")
        assert "".join(e.text for e in events if isinstance(e, ev.ThinkingDelta)) == "let me thinkmore"
        assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Answer."
        await run(s, "q2")
    assistant = [m for m in srv.chat_bodies[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == "Answer."
    # the thinking's text is not sent back (the workdir fact names tmp_path, whose name holds "think")
    sent = str(srv.chat_bodies[1]["messages"])
    assert "let me think" not in sent and "<think>" not in sent and "more" not in sent


async def test_cut_reply_is_marked_cut(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(text("a long answer that"), finish="length"))
    async with await open_session(tmp_path) as s:
        events = await run(s, "go")
        assert events[-1].state == "cut"
        recorded = [e for e in events if isinstance(e, ev.ReplyRecorded)][0]
        assert recorded.cut
        entry = (await s.store.entries(s.conversation_id))[-1]
        assert entry.meta.get("cut") is True
        # the notice names the limit: here model.max_tokens is not set (a new user could not tell which)
        [note] = [e for e in events if isinstance(e, ev.Notice) and "output limit" in e.text]
        assert "model.max_tokens is not set" in note.text and "Ask it to go on" in note.text


async def test_a_reply_cut_inside_a_tool_call_shows_the_call_and_does_not_run_it(any_home, tmp_path: Path) -> None:
    """A reply cut by its output limit while the model writes a call (SmolLM2 with 12 tokens, in CI):
    the call is not run, the notice quotes it, and the turn keeps a reply entry saying so."""
    home, srv = any_home
    srv.push(reply(tool_call("read_file", {"path": "notes.txt"}), finish="length"))
    async with await open_session(tmp_path) as s:
        events = await run(s, "go")
        assert events[-1].state == "cut"
        assert not [e for e in events if isinstance(e, (ev.ToolCall, ev.ToolResult))]
        [note] = [e for e in events if isinstance(e, ev.Notice) and "output limit" in e.text]
        assert "writing a tool call, not run: read_file(" in note.text and "notes.txt" in note.text
        entries = await s.store.entries(s.conversation_id)
        assert [e.kind for e in entries] == ["prompt", "reply"]
        assert entries[-1].meta["cut"] is True and "before_tool_call" not in entries[-1].meta
        [written] = entries[-1].meta["cut_calls"]
        assert written.startswith("read_file(") and "notes.txt" in written
        # reopened, the turn says the same: the stored reply gives the notice back
        stored = turn_events(await load_turn(s.store, s.conversation_id, 1))
        [again] = [e for e in stored if isinstance(e, ev.Notice)]
        assert "output limit" in again.text and "writing a tool call, not run: read_file(" in again.text
    assert len(srv.chat_bodies) == 1  # nothing ran, so nothing went back to the model


FAULTS = [
    # not an overflow: one without a count is fitted again (tests/unit/test_refit_without_count.py)
    (fault.status(400, {"error": "invalid 'temperature': must be positive"}), "bad_request"),
    (fault.status(500, {"error": "internal"}), "server_error"),
    (fault.model_not_found(), "model_not_found"),
    (fault.malformed(text("partial ")), "malformed"),
    (fault.error_object(text("partial "), message="CUDA out of memory"), "stream_error"),
    (fault.disconnect(text("partial ")), "disconnected"),
]


@pytest.mark.parametrize("script,kind", FAULTS, ids=[k for _, k in FAULTS])
async def test_faults_end_turn_cleanly_and_keep_the_partial(any_home, tmp_path: Path, script, kind) -> None:
    home, srv = any_home
    srv.push(script)
    async with await open_session(tmp_path) as s:
        events = await run(s, "first")
        errors = [e for e in events if isinstance(e, ev.Error)]
        assert errors and errors[0].kind == kind, errors
        assert "\n" not in errors[0].message and errors[0].message
        assert events[-1] == ev.TurnEnded(1, "error")
        entries = await s.store.entries(s.conversation_id)
        if kind in ("malformed", "stream_error", "disconnected"):
            assert entries[-1].kind == "reply" and entries[-1].content == "partial "
            assert entries[-1].meta["partial"] is True
        # the conversation is intact: the next turn works
        events = await run(s, "second")
        assert events[-1].state == "done"
        assert "You said: second" in "".join(e.text for e in events if isinstance(e, ev.TextDelta))
        turns = await s.store.turns(s.conversation_id)
        assert [t.state for t in turns] == ["error", "done"]


async def test_unknown_model_lists_the_models(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.model_not_found())
    async with await open_session(tmp_path) as s:
        events = await run(s, "hi")
    err = [e for e in events if isinstance(e, ev.Error)][0]
    assert "wisp-fake-2:latest" in err.message


async def test_503_is_waited_out_and_shown(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(fault.unavailable(times=1))
    async with await open_session(tmp_path) as s:
        events = await run(s, "hello")
    notices = [e for e in events if isinstance(e, ev.Notice)]
    assert any("load the model" in n.text for n in notices)
    assert events[-1].state == "done"


async def test_timeout_is_an_error_not_a_hang(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 0.5})
        srv.push(fault.stall(text("slow ")))
        async with await open_session(tmp_path) as s:
            events = await run(s, "hello")
        assert [e.kind for e in events if isinstance(e, ev.Error)] == ["timeout"]


async def test_connection_refused_is_an_error_event(wisp_home: Path, tmp_path: Path) -> None:
    from wisp.core.model.ollama import OllamaEndpoint

    srv = FakeOllama().start()
    url = srv.base_url
    srv.stop()  # nothing listens on that port any more
    session = await Session.open(SessionOptions(workdir=tmp_path))
    async with session as s:
        s.link.endpoint = OllamaEndpoint(url, "wisp-fake:latest", timeout_s=2)
        events = await run(s, "hello")
        err = [e for e in events if isinstance(e, ev.Error)][0]
        assert err.kind == "unreachable" and url in err.message
        assert (await s.store.turns(s.conversation_id))[0].state == "error"


async def test_stop_records_what_had_arrived(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(fault.stall(text("the first words ")))
    async with await open_session(tmp_path) as s:
        got_text = asyncio.Event()
        seen: list = []

        async def consume() -> None:
            async for item in s.run_turn("tell me a story"):
                seen.append(item)
                if isinstance(item, ev.TextDelta):
                    got_text.set()

        task = asyncio.create_task(consume())
        await got_text.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        turns = await s.store.turns(s.conversation_id)
        assert turns[-1].state == "stopped"
        last = (await s.store.entries(s.conversation_id))[-1]
        assert last.content == "the first words " and last.meta["partial"] and last.meta["reason"] == "stopped"
        srv.stop()


async def test_max_steps_bounds_the_loop(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    Config.load().set("agent.max_steps", "3")
    for _ in range(5):
        srv.push(reply(tool_call("system_info", {"topic": "cpu"}), finish="tool_calls"))
    async with await open_session(tmp_path) as s:
        events = await run(s, "loop")
    assert len(srv.chat_bodies) == 3
    assert any(isinstance(e, ev.Notice) and "agent.max_steps" in e.text for e in events)


async def test_unknown_tool_and_bad_arguments_are_told_to_the_model(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(tool_call("teleport", {"to": "mars"}), finish="tool_calls"),
             reply(tool_call("read_file", {"file": "x"}), finish="tool_calls"),
             reply(text("sorry")))
    async with await open_session(tmp_path) as s:
        events = await run(s, "go")
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    assert not results[0].ok and "no tool named 'teleport'" in results[0].content
    assert not results[1].ok and "needs the argument 'path'" in results[1].content
    assert events[-1].state == "done"


async def test_explicit_tool_list_is_exactly_that(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    async with await open_session(tmp_path, tools=["system_info"]) as s:
        await run(s, "hi")
    body = srv.chat_bodies[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["system_info"]


async def test_silent_truncation_is_reported(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(text("ok"), usage=(50, 1)))
    async with await open_session(tmp_path) as s:
        events = await run(s, "word " * 2000)
    warnings = [e for e in events if isinstance(e, ev.Notice) and e.level == "warning"]
    assert warnings and "50 prompt tokens" in warnings[0].text and "context" in warnings[0].text


async def test_continue_and_resume_reopen_conversations(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    async with await open_session(tmp_path) as s:
        await run(s, "first conversation")
        first = s.conversation_id
    async with await open_session(tmp_path) as s:
        await run(s, "second conversation")
        second = s.conversation_id
    assert first != second
    async with await open_session(tmp_path, continue_last=True) as s:
        assert s.conversation_id == second
        await run(s, "more")
    # the model saw the earlier turn of the conversation it continued
    assert "second conversation" in str(srv.chat_bodies[-1]["messages"])
    async with await open_session(tmp_path, resume=first) as s:
        assert s.conversation_id == first
        await run(s, "again")
    assert "first conversation" in str(srv.chat_bodies[-1]["messages"])


async def test_a_turn_running_in_another_process_blocks_a_second(any_home, tmp_path: Path) -> None:
    import os
    import socket

    home, srv = any_home
    async with await open_session(tmp_path) as s:
        await run(s, "first")
        conv = s.conversation_id
        # another live process (our parent) has a turn open in this conversation
        owner = f"{socket.gethostname()}:{os.getppid()}"
        await s.store.db.execute(
            "INSERT INTO turns (conversation_id, number, state, started_at, owner) VALUES (?, 2, 'open', '2026-01-01T00:00:00Z', ?)",
            (conv, owner))
        events = await run(s, "second")
        assert [type(e).__name__ for e in events] == ["Error"]
        assert events[0].kind == "busy" and str(os.getppid()) in events[0].message
        assert len(srv.chat_bodies) == 1  # nothing was sent


async def test_config_changes_apply_from_the_next_turn(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    async with await open_session(tmp_path) as s:
        s.config.set("agent.max_steps", "1")
        for _ in range(3):
            srv.push(reply(tool_call("system_info", {"topic": "cpu"}), finish="tool_calls"))
        await run(s, "loop")
        assert len(srv.chat_bodies) == 1


async def test_only_thinking_and_no_answer_is_said(any_home, tmp_path: Path) -> None:
    home, srv = any_home
    srv.push(reply(text("<think>I could say many things")))
    async with await open_session(tmp_path) as s:
        events = await run(s, "hi")
    assert any(isinstance(e, ev.Notice) and "only thought" in e.text for e in events)


def overflow(prompt_tokens: int, window: int = 2048) -> dict:
    """The 400 llama.cpp's server sends for a prompt past its window (its own count in numbers)."""
    return fault.status(400, {"error": {"message": f"Requested tokens ({prompt_tokens}) exceed context window of "
                                                   f"{window}", "code": "context_length_exceeded",
                                        "n_prompt_tokens": prompt_tokens, "n_ctx": window}})


def user_text(body: dict) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


async def test_a_request_the_server_counts_over_the_window_is_fitted_again_to_its_count(tmp_path: Path,
                                                                                      wisp_home: Path) -> None:
    """A new user's 108 kB paste of base64: wisp cut it to its estimate, the server counted 1.45 × that,
    and the turn failed every time. Now the server's count sizes a second try (once)."""
    import base64

    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.context_window": 2048})
        paste = base64.b64encode(bytes(range(256)) * 300).decode()
        srv.push(overflow(3000), reply(text("It is base64."), usage=(1500, 4)))
        async with await open_session(tmp_path) as s:
            events = await run(s, paste)
            stored = (await s.store.entries(s.conversation_id))[0]
        first, second = srv.chat_bodies
    assert events[-1] == ev.TurnEnded(1, "done") and not [e for e in events if isinstance(e, ev.Error)]
    assert stored.content == paste  # kept whole, as ever
    [refit] = [e for e in events if isinstance(e, ev.Notice) and "The server counted 3,000 tokens" in e.text]
    assert refit.key == "fit" and "fitting the request again" in refit.text
    # the second try carries less of the paste, in proportion to the server's count
    assert len(user_text(second)) < len(user_text(first)) * 0.8


async def test_a_request_refused_again_is_an_error_after_two_tries(tmp_path: Path, wisp_home: Path) -> None:
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.context_window": 2048})
        srv.push(overflow(3000), overflow(2900), reply(text("never sent")))
        async with await open_session(tmp_path) as s:
            events = await run(s, "z" * 40_000)
        assert len(srv.chat_bodies) == 2
    [error] = [e for e in events if isinstance(e, ev.Error)]
    assert "2,900 tokens" in error.message and events[-1].state == "error"


async def test_an_overflow_the_server_does_not_count_is_tried_again_with_a_margin(tmp_path: Path,
                                                                                 wisp_home: Path) -> None:
    """No count to size a second try by: it is planned with a larger margin instead (at most twice;
    tests/unit/test_refit_without_count.py has the rest)."""
    with FakeOpenAI() as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.context_window": 2048})
        srv.push(fault.status(400, {"error": "the input length exceeds the context length"}), reply(text("yes")))
        async with await open_session(tmp_path) as s:
            events = await run(s, "hello")
        assert len(srv.chat_bodies) == 2
    assert events[-1].state == "done"
    assert any(isinstance(e, ev.Notice) and "refit 1 of 2" in e.text for e in events)


async def test_a_prompt_larger_than_the_window_is_sent_cut_and_kept_whole(any_home, tmp_path: Path) -> None:
    """Issue "Real models, real work", fitting step 3: a paste too big for the window is kept whole in the
    store and the audit log; the request carries its head and tail and says how to see the rest."""
    from wisp.core.tokens import estimate_messages

    home, srv = any_home
    Config.load().set("model.context_window", "1024")
    paste = "".join(f"line {i} of the paste\n" for i in range(3000))
    async with await open_session(tmp_path) as s:
        events = await run(s, paste)
        stored = (await s.store.entries(s.conversation_id))[0]
    assert events[-1].state == "done" and stored.kind == "prompt" and stored.content == paste
    body = srv.chat_bodies[-1]
    assert estimate_messages(body["messages"], body.get("tools")) <= 1024
    from wisp.core.context.composer import context_part, person_part

    user = person_part(body["messages"][-1]["content"])  # the prompt, before the facts at its end
    assert user.startswith("line 0 of the paste") and user.rstrip().endswith("line 2999 of the paste")
    assert "are left out so the request fits the model's window" in user and "/show entry 1" in user
    fit = next(e for e in events if isinstance(e, ev.Notice) and e.key == "fit")
    assert "entry 1 (your prompt" in fit.text and "/show entry 1 shows it whole" in fit.text


async def test_fixed_layers_too_big_are_named_and_nothing_is_sent(any_home, tmp_path: Path) -> None:
    """Issue "Real models, real work": when the window is too small for the layers no turn can free, say
    which layer and what to change; send nothing; the conversation goes on once it fits."""
    home, srv = any_home
    Config.load().set("model.context_window", "1024")
    (tmp_path / "AGENTS.md").write_text("Follow the house style.\n" + "Always write tidy code. " * 800)
    async with await open_session(tmp_path) as s:
        sent = len(srv.chat_bodies)
        events = await run(s, "hello")
        error = next(e for e in events if isinstance(e, ev.Error))
        assert error.kind == "too_big" and events[-1].state == "error"
        assert "project instructions" in error.message and "AGENTS.md" in error.message
        assert "model.context_window" in error.message
        assert len(srv.chat_bodies) == sent  # nothing went to the endpoint
        s.config.set("model.context_window", "16384")
        again = await run(s, "hello again")
        assert again[-1].state == "done" and len(srv.chat_bodies) == sent + 1


async def test_a_huge_tool_output_is_cut_to_fit_the_window_in_its_own_turn(ollama_home, tmp_path: Path) -> None:
    """QA: a tool output larger than the window went whole into the next request, to be dropped unseen."""
    from wisp.core.tokens import estimate_messages

    home, srv = ollama_home
    Config.load().set("model.context_window", "4096")
    (tmp_path / "big.log").write_text("".join(f"log line {i}: all is well\n" for i in range(20000)))
    srv.push(reply(tool_call("read_file", {"path": "big.log", "limit": 20000}), finish="tool_calls"),
             reply(text("done")))
    async with await open_session(tmp_path) as s:
        s.config.set("tools.read_file.max_bytes", "2000000")
        events = await run(s, "read big.log")
    assert events[-1].state == "done"
    second = srv.chat_bodies[1]
    assert estimate_messages(second["messages"], second.get("tools")) <= 4096
    tool_msg = next(m for m in second["messages"] if m["role"] == "tool")
    assert "are left out so the request fits" in tool_msg["content"]
    assert tool_msg["content"].startswith("1\tlog line 0")
    assert not any(isinstance(e, ev.Notice) and "more than the model's window" in e.text for e in events)
