"""OllamaEndpoint against a real HTTP fake of Ollama's API on 127.0.0.1."""

from __future__ import annotations

import socket

import pytest

from tests.support.fakes import FakeOllama, fault, raw, reply, text, thinking, tool_call, tool_calls
from wisp.core.model.base import (
    BadRequest,
    ChatOptions,
    Disconnected,
    Done,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedStream,
    ModelNotFound,
    ServerError,
    StreamErrorObject,
    StreamText,
    StreamThinking,
    ToolCallRequest,
    StreamUsage,
    Waiting,
)
from wisp.core.model.ollama import OllamaEndpoint, to_ollama_messages

USER = [{"role": "user", "content": "hello there"}]


def dead_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def collect(endpoint, messages=USER, tools=None, options=None):
    """All events of one reply, and the error it ended with (or None)."""
    events, error = [], None
    try:
        async for event in endpoint.stream_chat(messages, tools, options or ChatOptions(context_window=4096)):
            events.append(event)
    except Exception as exc:  # the test checks the type
        error = exc
    return events, error


def texts(events):
    return "".join(e.text for e in events if isinstance(e, StreamText))


def thoughts(events):
    return "".join(e.text for e in events if isinstance(e, StreamThinking))


@pytest.fixture
async def make():
    """make(srv, **kw) → an OllamaEndpoint for the fake, closed after the test."""
    made = []

    def factory(srv, model="wisp-fake:latest", **kw):
        kw.setdefault("timeout_s", 5)
        kw.setdefault("load_wait_s", 5)
        kw.setdefault("retry_base_s", 0.01)
        endpoint = OllamaEndpoint(srv.base_url if hasattr(srv, "base_url") else srv, model, **kw)
        made.append(endpoint)
        return endpoint

    yield factory
    for endpoint in made:
        await endpoint.aclose()


# --- normal replies ---------------------------------------------------------


async def test_streams_text_usage_and_done(make):
    with FakeOllama([reply("Hel", "lo", " you", usage=(31, 3))]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert [e for e in events if isinstance(e, StreamText)] == [StreamText("Hel"), StreamText("lo"), StreamText(" you")]
    assert events[-2:] == [StreamUsage(prompt_tokens=31, completion_tokens=3), Done("stop")]


async def test_request_body_sends_num_ctx_and_stream(make):
    with FakeOllama() as srv:
        await collect(make(srv), options=ChatOptions(context_window=16384, max_tokens=99, temperature=0.2))
        body = srv.chat_bodies[0]
    assert body["model"] == "wisp-fake:latest"
    assert body["stream"] is True
    assert body["options"]["num_ctx"] == 16384
    assert body["options"]["num_predict"] == 99
    assert body["options"]["temperature"] == 0.2
    assert "think" not in body
    assert "tools" not in body


async def test_num_ctx_comes_from_api_show_when_unset_and_is_cached(make):
    with FakeOllama(context_length=32768) as srv:
        endpoint = make(srv)
        await collect(endpoint, options=ChatOptions())
        await collect(endpoint, options=ChatOptions())
        assert [b["options"]["num_ctx"] for b in srv.chat_bodies] == [32768, 32768]
        shows = [r for r in srv.requests if r["path"] == "/api/show"]
    assert len(shows) == 1
    assert shows[0]["body"] == {"model": "wisp-fake:latest"}


async def test_context_length_reads_model_info(make):
    with FakeOllama(context_length=131072) as srv:
        assert await make(srv).context_length() == 131072


@pytest.mark.parametrize("think, expected", [("on", True), ("off", False), ("auto", None)])
async def test_think_option(make, think, expected):
    with FakeOllama() as srv:
        await collect(make(srv), options=ChatOptions(context_window=2048, think=think))
        body = srv.chat_bodies[0]
    if expected is None:
        assert "think" not in body
    else:
        assert body["think"] is expected


async def test_thinking_field_becomes_thinking_delta(make):
    with FakeOllama([reply(thinking("Let me "), thinking("see."), text("Four."))]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert thoughts(events) == "Let me see."
    assert texts(events) == "Four."


async def test_think_tags_in_content_split_across_chunks(make):
    with FakeOllama([reply("<thi", "nk>hidden", " plan</thi", "nk>\n\nThe answer")]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert thoughts(events) == "hidden plan"
    assert texts(events) == "The answer"


async def test_tool_calls_get_ids_and_object_arguments(make):
    script = [
        reply(
            tool_calls({"name": "read_file", "arguments": {"path": "a.txt", "limit": 3}},
                       {"name": "system_info", "arguments": {"topic": "cpu"}}),
            finish="stop",
        ),
        reply(tool_call("read_file", {"path": "b"}, id="given-id")),
    ]  # fmt: skip
    with FakeOllama(script) as srv:
        endpoint = make(srv)
        events, error = await collect(endpoint, tools=[{"type": "function", "function": {"name": "read_file"}}])
        second, _ = await collect(endpoint)
        body = srv.chat_bodies[0]
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", {"path": "a.txt", "limit": 3}),
        ("system_info", {"topic": "cpu"}),
    ]
    assert all(c.id for c in calls) and calls[0].id != calls[1].id
    assert events[-1] == Done("tool_calls")
    assert body["tools"] == [{"type": "function", "function": {"name": "read_file"}}]
    assert [e.id for e in second if isinstance(e, ToolCallRequest)] == ["given-id"]


async def test_string_arguments_are_decoded_or_kept_raw(make):
    line1 = '{"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{\\"a\\": 1}"}}]}, "done": false}'
    line2 = '{"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "g", "arguments": "{broken"}}]}, "done": false}'
    with FakeOllama([reply(raw(line1), raw(line2))]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert calls[0].arguments == {"a": 1} and calls[0].raw_arguments is None
    assert calls[1].arguments == {} and calls[1].raw_arguments == "{broken"


async def test_length_finish_is_reported(make):
    with FakeOllama([reply("cut sho", finish="length")]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events[-1] == Done("length")


async def test_default_reply_echoes_last_user_message(make):
    with FakeOllama() as srv:
        endpoint = make(srv)
        for word in ("one", "two", "three"):
            events, error = await collect(endpoint, [{"role": "user", "content": f"say {word}"}])
            assert error is None
            assert texts(events) == f"You said: say {word}"


async def test_messages_are_converted_to_ollama_shape(make):
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        {"role": "tool", "tool_call_id": "c9", "name": "system_info", "content": "cpu"},
    ]
    expected = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a"}}}]},
        {"role": "tool", "content": "file text", "tool_name": "read_file"},
        {"role": "tool", "content": "cpu", "tool_name": "system_info"},
    ]
    assert to_ollama_messages(messages) == expected
    with FakeOllama() as srv:
        await collect(make(srv), messages)
        assert srv.chat_bodies[0]["messages"] == expected


async def test_list_models(make):
    with FakeOllama(models=["a:1", "b:2"]) as srv:
        assert await make(srv).list_models() == ["a:1", "b:2"]


async def test_stream_can_be_closed_early_and_endpoint_reused(make):
    with FakeOllama([reply("a", "b", "c")]) as srv:
        endpoint = make(srv)
        stream = endpoint.stream_chat(USER, None, ChatOptions(context_window=2048))
        first = await anext(stream)
        await stream.aclose()
        events, error = await collect(endpoint)
    assert first == StreamText("a")
    assert error is None and texts(events) == "You said: hello there"


# --- faults -----------------------------------------------------------------


async def test_connection_refused(make):
    port = dead_port()
    endpoint = make(f"http://127.0.0.1:{port}")
    events, error = await collect(endpoint)
    assert isinstance(error, EndpointUnreachable)
    assert f"http://127.0.0.1:{port}" in str(error)
    assert "ollama serve" in str(error)
    assert "\n" not in str(error)
    with pytest.raises(EndpointUnreachable):
        await endpoint.list_models()


async def test_bad_url_is_unreachable(make):
    events, error = await collect(make("127.0.0.1:11434"))
    assert isinstance(error, EndpointUnreachable)
    assert "model.endpoint" in str(error)


async def test_stalled_stream_times_out(make):
    with FakeOllama([fault.stall("par", "tial")]) as srv:
        events, error = await collect(make(srv, timeout_s=0.3))
    assert texts(events) == "partial"
    assert isinstance(error, EndpointTimeout)
    assert "model.timeout_s" in str(error)


async def test_stall_before_any_content_times_out(make):
    with FakeOllama([fault.stall()]) as srv:
        events, error = await collect(make(srv, timeout_s=0.3))
    assert events == []
    assert isinstance(error, EndpointTimeout)


async def test_unknown_model_names_the_available_models(make):
    with FakeOllama(models=["llama3.2:latest", "qwen3:0.6b"], check_model=True) as srv:
        events, error = await collect(make(srv, model="nope:1b"), options=ChatOptions())
    assert isinstance(error, ModelNotFound)
    assert error.model == "nope:1b"
    assert error.available == ["llama3.2:latest", "qwen3:0.6b"]
    assert "nope:1b" in str(error) and "llama3.2:latest, qwen3:0.6b" in str(error)
    assert "ollama pull nope:1b" in str(error)


async def test_scripted_model_not_found(make):
    with FakeOllama([fault.model_not_found()], models=["x:1"]) as srv:
        events, error = await collect(make(srv, model="y"))
    assert isinstance(error, ModelNotFound)
    assert error.available == ["x:1"]


async def test_context_length_of_unknown_model(make):
    with FakeOllama(models=["x:1"], check_model=True) as srv:
        with pytest.raises(ModelNotFound):
            await make(srv, model="nope").context_length()


async def test_404_without_model_is_a_server_error(make):
    with FakeOllama([fault.status(404, "404 page not found")]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, ServerError) and not isinstance(error, ModelNotFound)
    assert error.status == 404
    assert "model.endpoint" in str(error)


async def test_http_400(make):
    with FakeOllama([fault.status(400, {"error": "registry.ollama.ai/library/x does not support tools"})]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, BadRequest)
    assert error.context_overflow is False
    assert "does not support tools" in str(error)


async def test_http_400_context_overflow(make):
    body = {"error": "the input length exceeds the context length"}
    with FakeOllama([fault.status(400, body)]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, BadRequest)
    assert error.context_overflow is True
    assert "model.context_window" in str(error)


@pytest.mark.parametrize("status", [500, 502])
async def test_http_5xx(make, status):
    with FakeOllama([fault.status(status, {"error": "llama runner process has terminated"})]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, ServerError)
    assert error.status == status
    assert "llama runner process has terminated" in str(error)


async def test_503_is_waited_out_with_waiting_events(make):
    with FakeOllama([fault.unavailable(times=3, then=reply("ready now"))]) as srv:
        events, error = await collect(make(srv, load_wait_s=5, retry_base_s=0.01))
        attempts = len(srv.chat_bodies)
    assert error is None
    waits = [e for e in events if isinstance(e, Waiting)]
    assert [w.attempt for w in waits] == [1, 2, 3]
    assert [w.delay_s for w in waits] == [0.01, 0.02, 0.04]
    assert all("503" in w.reason for w in waits)
    assert waits[0].waited_s <= waits[1].waited_s <= waits[2].waited_s
    assert attempts == 4
    assert texts(events) == "ready now"
    assert events[-1] == Done("stop")


async def test_503_beyond_load_wait_gives_up(make):
    with FakeOllama([fault.unavailable(times=1000)]) as srv:
        events, error = await collect(make(srv, load_wait_s=0.2, retry_base_s=0.05))
    assert isinstance(error, ServerError)
    assert error.status == 503
    assert "model.load_wait_s" in str(error)
    waits = [e for e in events if isinstance(e, Waiting)]
    assert waits and sum(w.delay_s for w in waits) <= 0.2 + 1e-9


async def test_load_wait_zero_does_not_retry(make):
    with FakeOllama([fault.unavailable(times=1)]) as srv:
        events, error = await collect(make(srv, load_wait_s=0))
    assert events == []
    assert isinstance(error, ServerError) and error.status == 503


async def test_malformed_line_keeps_partial_reply(make):
    with FakeOllama([fault.malformed("Hel", "lo", line="{not json at all")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Hello"
    assert isinstance(error, MalformedStream)
    assert "not json at all" in str(error)


@pytest.mark.parametrize("line", ["[1, 2]", '{"message": "a string", "done": false}', '"just a string"'])
async def test_odd_json_shapes_are_malformed(make, line):
    with FakeOllama([reply("ok", raw(line))]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, MalformedStream)


async def test_error_object_inside_stream(make):
    with FakeOllama([fault.error_object("Par", "tial", message="out of memory")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Partial"
    assert isinstance(error, StreamErrorObject)
    assert "out of memory" in str(error)


async def test_disconnect_mid_stream(make):
    with FakeOllama([fault.disconnect("Half a ", "reply")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Half a reply"
    assert isinstance(error, Disconnected)


async def test_stream_ending_before_done_line(make):
    with FakeOllama([fault.disconnect("Half", clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Half"
    assert isinstance(error, Disconnected)
    assert not any(isinstance(e, Done) for e in events)


ALL_FAULTS = [
    fault.status(400, {"error": "bad"}),
    fault.status(401, {"error": "unauthorised"}),
    fault.status(404, "404 page not found"),
    fault.model_not_found(),
    fault.status(429, {"error": "slow down"}),
    fault.status(500, "oops"),
    fault.unavailable(times=50),
    fault.malformed("a"),
    fault.error_object("a"),
    fault.disconnect("a"),
    fault.disconnect("a", clean=True),
    fault.stall("a"),
    reply(raw("\x00\xff garbage")),
]


async def test_nothing_but_endpoint_errors_escape(make):
    with FakeOllama(list(ALL_FAULTS)) as srv:
        endpoint = make(srv, timeout_s=0.3, load_wait_s=0.05)
        for entry in ALL_FAULTS:
            events, error = await collect(endpoint)
            assert isinstance(error, EndpointError), (entry, error)
            assert type(error) is not EndpointError, (entry, error)  # always a specific kind
            assert str(error) and "\n" not in str(error)


async def test_fake_runs_as_a_process_for_tmux_tests(tmp_path):
    import asyncio
    import json
    import sys
    from pathlib import Path

    script = tmp_path / "script.json"
    script.write_text(json.dumps([reply("from ", "the file")]))
    root = Path(__file__).resolve().parent.parent.parent
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.fakes.serve", "--protocol", "ollama", "--script", str(script),
        "--model", "solo:1", cwd=root, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        url = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode().strip()
        assert url.startswith("http://127.0.0.1:")
        endpoint = OllamaEndpoint(url, "solo:1", timeout_s=5)
        try:
            assert await endpoint.list_models() == ["solo:1"]
            first, _ = await collect(endpoint)
            second, _ = await collect(endpoint)
        finally:
            await endpoint.aclose()
        assert texts(first) == "from the file"
        assert texts(second) == "You said: hello there"
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
