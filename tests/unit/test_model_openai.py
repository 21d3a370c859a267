"""OpenAIEndpoint against a real HTTP fake of an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import socket

import pytest

from tests.support.fakes import FakeOpenAI, fault, raw, reply, text, thinking, tool_call, tool_calls
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
from wisp.core.model.openai import OpenAIEndpoint, to_openai_messages

USER = [{"role": "user", "content": "hello there"}]


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def collect(endpoint, messages=USER, tools=None, options=None):
    events, error = [], None
    try:
        async for event in endpoint.stream_chat(messages, tools, options or ChatOptions()):
            events.append(event)
    except Exception as exc:  # the test checks the type
        error = exc
    return events, error


def texts(events):
    return "".join(e.text for e in events if isinstance(e, StreamText))


def thoughts(events):
    return "".join(e.text for e in events if isinstance(e, StreamThinking))


def sse(obj) -> dict:
    """A raw SSE data line as a script step."""
    return raw("data: " + (obj if isinstance(obj, str) else json.dumps(obj)))


def delta(d: dict, finish=None) -> dict:
    return sse({"choices": [{"index": 0, "delta": d, "finish_reason": finish}]})


@pytest.fixture
async def make():
    made = []

    def factory(srv, model="wisp-fake", **kw):
        kw.setdefault("timeout_s", 5)
        kw.setdefault("load_wait_s", 5)
        kw.setdefault("retry_base_s", 0.01)
        endpoint = OpenAIEndpoint(srv.base_url if hasattr(srv, "base_url") else srv, model, **kw)
        made.append(endpoint)
        return endpoint

    yield factory
    for endpoint in made:
        await endpoint.aclose()


# --- normal replies ---------------------------------------------------------


async def test_streams_text_usage_and_done(make):
    with FakeOpenAI([reply("Hel", "lo", usage=(40, 2))]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert [e for e in events if isinstance(e, StreamText)] == [StreamText("Hel"), StreamText("lo")]
    assert events[-2:] == [StreamUsage(prompt_tokens=40, completion_tokens=2), Done("stop")]


async def test_request_body(make):
    with FakeOpenAI() as srv:
        tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
        await collect(make(srv), tools=tools, options=ChatOptions(max_tokens=50, temperature=0.1, context_window=999))
        body = srv.chat_bodies[0]
        headers = srv.requests[0]["headers"]
    assert body["model"] == "wisp-fake"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == tools
    assert body["max_tokens"] == 50 and body["temperature"] == 0.1
    assert "Authorization" not in headers


async def test_api_key_goes_in_bearer_header(make):
    with FakeOpenAI(api_key="sk-secret") as srv:
        endpoint = make(srv, api_key="sk-secret")
        events, error = await collect(endpoint)
        assert await endpoint.list_models() == ["wisp-fake", "wisp-fake-2"]
        assert srv.requests[0]["headers"]["Authorization"] == "Bearer sk-secret"
    assert error is None
    assert "sk-secret" not in repr(endpoint)


async def test_wrong_api_key_is_a_clear_error(make):
    with FakeOpenAI(api_key="sk-right") as srv:
        events, error = await collect(make(srv, api_key="sk-wrong"))
    assert isinstance(error, ServerError) and error.status == 401
    assert "model.api_key_env" in str(error)


async def test_base_url_with_v1_suffix(make):
    with FakeOpenAI([reply("ok")]) as srv:
        endpoint = make(srv.base_url + "/v1/")
        events, error = await collect(endpoint)
    assert error is None and texts(events) == "ok"
    assert endpoint.base_url == srv.base_url


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_thinking(make, field):
    with FakeOpenAI([reply(thinking("Hmm, ", field), thinking("two.", field), text("2"))]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert thoughts(events) == "Hmm, two."
    assert texts(events) == "2"


async def test_think_tags_in_content(make):
    with FakeOpenAI([reply("<", "think>why", "</", "think>", "Because")]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert thoughts(events) == "why"
    assert texts(events) == "Because"


async def test_tool_call_fragments_joined_by_index(make):
    args_a = {"path": "notes/today.md", "offset": 10, "limit": 20}
    args_b = {"topic": "memory"}
    script = [reply(tool_calls({"name": "read_file", "arguments": args_a, "id": "call_a"},
                               {"name": "system_info", "arguments": args_b, "id": "call_b"},
                               interleave=True, fragment=3), finish="tool_calls", usage=(50, 20))]  # fmt: skip
    with FakeOpenAI(script) as srv:
        events, error = await collect(make(srv))
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert calls == [
        ToolCallRequest("call_a", "read_file", args_a),
        ToolCallRequest("call_b", "system_info", args_b),
    ]
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolCallRequest", "ToolCallRequest", "StreamUsage", "Done"]
    assert events[-1] == Done("tool_calls")


async def test_single_character_fragments(make):
    args = {"text": "quote \" and unicode é ✓"}
    with FakeOpenAI([reply("Let me look.", tool_call("memory", args, fragment=1), finish="tool_calls")]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert texts(events) == "Let me look."
    [call] = [e for e in events if isinstance(e, ToolCallRequest)]
    assert call.name == "memory" and call.arguments == args and call.id


async def test_tool_calls_without_finish_reason_are_emitted_at_done(make):
    steps = [
        delta({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a"'}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
        sse("[DONE]"),
    ]
    with FakeOpenAI([fault.disconnect(*steps, clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events == [ToolCallRequest("c0", "f", {"a": 1}), Done("tool_calls")]


async def test_undecodable_arguments_are_kept_raw(make):
    steps = [
        delta({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a": '}}]}),
        delta({}, finish="tool_calls"),
        sse("[DONE]"),
    ]
    with FakeOpenAI([fault.disconnect(*steps, clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events[0] == ToolCallRequest("c0", "f", {}, raw_arguments='{"a": ')


async def test_length_finish_is_reported(make):
    with FakeOpenAI([reply("cut sho", finish="length")]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert texts(events) == "cut sho"
    assert events[-1] == Done("length")


async def test_finish_without_done_marker_is_accepted(make):
    steps = [delta({"content": "Hi"}), delta({}, finish="stop")]
    with FakeOpenAI([fault.disconnect(*steps, clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events == [StreamText("Hi"), Done("stop")]


async def test_usage_in_every_chunk_reports_the_last(make):
    def chunk(content, completion, finish=None):
        return sse({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": completion}})  # fmt: skip

    steps = [chunk("a", 1), chunk("b", 2), chunk("", 3, finish="stop"), sse("[DONE]")]
    with FakeOpenAI([fault.disconnect(*steps, clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events == [StreamText("a"), StreamText("b"), StreamUsage(9, 3), Done("stop")]


async def test_no_usage_is_fine(make):
    with FakeOpenAI([reply("x", usage=None)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events == [StreamText("x"), Done("stop")]


async def test_sse_comments_and_other_fields_are_ignored(make):
    steps = [raw(": keep-alive"), raw("event: message"), raw("id: 7"), delta({"content": "ok"}), delta({}, "stop"),
             sse("[DONE]")]  # fmt: skip
    with FakeOpenAI([fault.disconnect(*steps, clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert error is None
    assert events == [StreamText("ok"), Done("stop")]


async def test_non_streamed_json_answer_is_understood(make):
    script = [reply(thinking("t"), text("whole "), text("answer"), tool_call("f", {"x": 1}, id="c1"), usage=(7, 3))]
    with FakeOpenAI(script) as srv:
        events, error = await collect(make(srv), options=ChatOptions(extra={"stream": False}))
        assert srv.chat_bodies[0]["stream"] is False
    assert error is None
    assert thoughts(events) == "t"
    assert texts(events) == "whole answer"
    assert ToolCallRequest("c1", "f", {"x": 1}) in events
    assert events[-2:] == [StreamUsage(7, 3), Done("tool_calls")]


async def test_messages_are_converted_to_openai_shape(make):
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "file text"},
    ]
    expected = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
    ]  # fmt: skip
    assert to_openai_messages(messages) == expected
    with FakeOpenAI() as srv:
        await collect(make(srv), messages)
        sent = srv.chat_bodies[0]["messages"]
    assert sent == expected
    assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}


async def test_list_models_and_no_context_length(make):
    with FakeOpenAI(models=["m1", "m2"]) as srv:
        endpoint = make(srv)
        assert await endpoint.list_models() == ["m1", "m2"]
        assert await endpoint.context_length() is None


# --- faults -----------------------------------------------------------------


async def test_connection_refused(make):
    port = dead_port()
    events, error = await collect(make(f"http://127.0.0.1:{port}"))
    assert isinstance(error, EndpointUnreachable)
    assert f"http://127.0.0.1:{port}" in str(error)
    assert "llama_cpp.server" in str(error) and "model.endpoint" in str(error)


async def test_stalled_stream_times_out(make):
    with FakeOpenAI([fault.stall("some ", "text")]) as srv:
        events, error = await collect(make(srv, timeout_s=0.3))
    assert texts(events) == "some text"
    assert isinstance(error, EndpointTimeout)


async def test_unknown_model_names_the_available_models(make):
    with FakeOpenAI(models=["smollm2", "qwen"], check_model=True) as srv:
        events, error = await collect(make(srv, model="gpt-9"))
    assert isinstance(error, ModelNotFound)
    assert error.available == ["smollm2", "qwen"]
    assert "gpt-9" in str(error) and "smollm2, qwen" in str(error)


async def test_model_not_found_code_on_400(make):
    body = {"error": {"message": "no such thing", "code": "model_not_found"}}
    with FakeOpenAI([fault.status(400, body)], models=["a"]) as srv:
        events, error = await collect(make(srv, model="b"))
    assert isinstance(error, ModelNotFound) and error.available == ["a"]


async def test_vllm_style_missing_model(make):
    body = {"object": "error", "message": "The model `b` does not exist.", "type": "NotFoundError", "code": 404}
    with FakeOpenAI([fault.status(404, body)], models=["a"]) as srv:
        events, error = await collect(make(srv, model="b"))
    assert isinstance(error, ModelNotFound)


async def test_404_without_model_is_a_server_error(make):
    with FakeOpenAI([fault.status(404, {"detail": "Not Found"})]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, ServerError) and not isinstance(error, ModelNotFound)
    assert error.status == 404


async def test_http_400(make):
    body = {"error": {"message": "temperature must be positive", "type": "invalid_request_error"}}
    with FakeOpenAI([fault.status(400, body)]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, BadRequest) and not error.context_overflow
    assert "temperature must be positive" in str(error)


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "the request exceeds the available context size, try increasing it",
        "Requested tokens (3000) exceed context window of 2048",
        "too many tokens in prompt",
    ],
)
async def test_http_400_context_overflow(make, message):
    with FakeOpenAI([fault.status(400, {"error": {"message": message, "code": 400}})]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, BadRequest) and error.context_overflow


@pytest.mark.parametrize("status", [500, 504])
async def test_http_5xx(make, status):
    with FakeOpenAI([fault.status(status)]) as srv:
        events, error = await collect(make(srv))
    assert isinstance(error, ServerError) and error.status == status


async def test_503_is_waited_out_with_waiting_events(make):
    loading = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
    with FakeOpenAI([fault.unavailable(times=2, body=loading, then=reply("loaded"))]) as srv:
        events, error = await collect(make(srv, load_wait_s=5, retry_base_s=0.01))
    assert error is None
    waits = [e for e in events if isinstance(e, Waiting)]
    assert [w.attempt for w in waits] == [1, 2]
    assert "Loading model" in waits[0].reason
    assert events[:2] == waits
    assert texts(events) == "loaded"


async def test_503_beyond_load_wait_gives_up(make):
    with FakeOpenAI([fault.unavailable(times=1000)]) as srv:
        events, error = await collect(make(srv, load_wait_s=0.15, retry_base_s=0.05))
    assert isinstance(error, ServerError) and error.status == 503
    assert any(isinstance(e, Waiting) for e in events)


async def test_malformed_event(make):
    with FakeOpenAI([fault.malformed("Par", "tial", line="{oops")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Partial"
    assert isinstance(error, MalformedStream)
    assert "{oops" in str(error)


async def test_non_sse_line_is_malformed(make):
    with FakeOpenAI([reply("a", raw("<html>proxy error</html>"))]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "a"
    assert isinstance(error, MalformedStream)


async def test_error_object_inside_stream(make):
    with FakeOpenAI([fault.error_object("Par", message="CUDA out of memory")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Par"
    assert isinstance(error, StreamErrorObject)
    assert "CUDA out of memory" in str(error)


async def test_disconnect_mid_stream(make):
    with FakeOpenAI([fault.disconnect("Half", " a reply")]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Half a reply"
    assert isinstance(error, Disconnected)


async def test_stream_ending_before_finish(make):
    with FakeOpenAI([fault.disconnect("Half", clean=True)]) as srv:
        events, error = await collect(make(srv))
    assert texts(events) == "Half"
    assert isinstance(error, Disconnected)


async def test_disconnect_during_tool_call_fragments(make):
    steps = [delta({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a"'}}]})]
    with FakeOpenAI([fault.disconnect(*steps)]) as srv:
        events, error = await collect(make(srv))
    assert events == []  # a half-received call is never emitted
    assert isinstance(error, Disconnected)


ALL_FAULTS = [
    fault.status(400, {"error": {"message": "bad"}}),
    fault.status(403, "forbidden"),
    fault.status(404, "nope"),
    fault.model_not_found(),
    fault.status(500),
    fault.unavailable(times=50),
    fault.malformed("a"),
    fault.error_object("a"),
    fault.disconnect("a"),
    fault.disconnect("a", clean=True),
    fault.stall("a"),
    reply(raw("garbage")),
    reply(raw('data: {"choices": "not a list"}')),
    reply(raw('data: {"choices": [{"delta": {"tool_calls": [{"index": "x"}]}}]}')),
]


async def test_nothing_but_endpoint_errors_escape(make):
    with FakeOpenAI(list(ALL_FAULTS)) as srv:
        endpoint = make(srv, timeout_s=0.3, load_wait_s=0.05)
        for entry in ALL_FAULTS:
            events, error = await collect(endpoint)
            assert isinstance(error, EndpointError), (entry, error)
            assert type(error) is not EndpointError, (entry, error)
            assert str(error) and "\n" not in str(error)


async def test_fake_runs_as_a_process_for_tmux_tests():
    import asyncio
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.fakes.serve", "--protocol", "openai", "--api-key", "k",
        cwd=root, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        url = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode().strip()
        endpoint = OpenAIEndpoint(url, "wisp-fake", api_key="k", timeout_s=5)
        try:
            events, error = await collect(endpoint, [{"role": "user", "content": "ping"}])
        finally:
            await endpoint.aclose()
        assert error is None and texts(events) == "You said: ping"
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
