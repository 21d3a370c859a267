"""Every server's quirks (issue 16, "Every server's quirks"), in the core.

OpenAIEndpoint against a real HTTP fake sending exactly the lines each server
sends: parallel tool calls that share an ``index`` (Ollama's /v1), whole calls
with neither index nor id (older Ollama), a failure as an SSE ``error:`` field
(llama.cpp before #16109) or after ``event: error``, empty ``data:`` frames, the
arguments sent whole again at the end (vLLM), an empty ``tool_calls`` entry (LM
Studio). The end-to-end side is in tests/unit/test_cli_conversations.py.
"""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from tests.support.fakes import FakeOpenAI, fault, raw
from wisp.core.model.base import BadRequest, ChatOptions, Done, StreamErrorObject, StreamText, ToolCallRequest
from wisp.core.model.openai import OpenAIEndpoint, join_arguments

USER = [{"role": "user", "content": "hi"}]


def sse(obj) -> dict:
    return raw("data: " + (obj if isinstance(obj, str) else json.dumps(obj)))


def chunk(delta: dict, finish: str | None = None) -> dict:
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def call_frag(index, name=None, args=None, id=None) -> dict:
    frag: dict = {"function": {}}
    if index is not None:
        frag["index"] = index
    if id is not None:
        frag["id"] = id
    if name is not None:
        frag["function"]["name"] = name
    if args is not None:
        frag["function"]["arguments"] = args
    return frag


async def stream(lines: list[dict]):
    with FakeOpenAI([fault.disconnect(*lines, clean=True)]) as srv:
        endpoint = OpenAIEndpoint(srv.base_url, "m", timeout_s=5, load_wait_s=1)
        events, error = [], None
        try:
            async for e in endpoint.stream_chat(USER, None, ChatOptions()):
                events.append(e)
        except Exception as exc:
            error = exc
        finally:
            await endpoint.aclose()
    return events, error


def calls(events) -> list[ToolCallRequest]:
    return [e for e in events if isinstance(e, ToolCallRequest)]


async def test_parallel_calls_sharing_one_index_are_told_apart_by_id() -> None:
    """Ollama's /v1 sends every call of a parallel batch with index 0 (ollama/ollama#15457)."""
    lines = [
        chunk({"tool_calls": [call_frag(0, "read_file", '{"path": "a.txt"}', id="call_a")]}),
        chunk({"tool_calls": [call_frag(0, "read_file", '{"path": "b.txt"}', id="call_b")]}),
        chunk({"tool_calls": [call_frag(0, "system_info", "{}", id="call_c")]}),
        chunk({}, "tool_calls"), sse("[DONE]"),
    ]
    events, error = await stream(lines)
    assert error is None
    assert calls(events) == [ToolCallRequest("call_a", "read_file", {"path": "a.txt"}),
                             ToolCallRequest("call_b", "read_file", {"path": "b.txt"}),
                             ToolCallRequest("call_c", "system_info", {})]
    assert events[-1] == Done("tool_calls")


async def test_fragments_of_one_call_with_its_id_repeated_stay_one_call() -> None:
    """A server that repeats the id (and name) on each fragment of one call (vLLM's GLM parsers)."""
    lines = [
        chunk({"tool_calls": [call_frag(0, "read_file", '{"pa', id="c1")]}),
        chunk({"tool_calls": [call_frag(0, "read_file", 'th": "a"}', id="c1")]}),
        chunk({}, "tool_calls"),
    ]
    events, error = await stream(lines)
    assert error is None and calls(events) == [ToolCallRequest("c1", "read_file", {"path": "a"})]


async def test_whole_calls_with_neither_index_nor_id_are_each_run() -> None:
    """Older Ollama: no index, no id, one whole call a chunk (ollama/ollama#7881)."""
    lines = [
        chunk({"tool_calls": [call_frag(None, "read_file", '{"path": "a"}')]}),
        chunk({"tool_calls": [call_frag(None, "read_file", '{"path": "b"}')]}),
        chunk({}, "stop"),
    ]
    events, error = await stream(lines)
    assert error is None
    assert [(c.name, c.arguments) for c in calls(events)] == [("read_file", {"path": "a"}), ("read_file", {"path": "b"})]
    assert events[-1] == Done("tool_calls")


async def test_sse_error_field_shows_the_server_message() -> None:
    """llama.cpp before #16109 sent a failure as ``error: {...}``, not ``data:``."""
    lines = [chunk({"content": "Par"}),
             raw('error: {"code": 500, "message": "failed to parse grammar",'
                 ' "type": "server_error"}'),
             sse("[DONE]")]
    events, error = await stream(lines)
    assert events == [StreamText("Par")]
    assert isinstance(error, StreamErrorObject)
    assert "failed to parse grammar" in str(error)


async def test_sse_error_field_with_an_overflow_reads_as_one() -> None:
    """The same field saying the prompt did not fit is the overflow every endpoint error names (with advice)."""
    lines = [chunk({"content": "Par"}),
             raw('error: {"code": 400, "message": "the request exceeds the available context size",'
                 ' "type": "invalid_request_error"}'),
             sse("[DONE]")]
    events, error = await stream(lines)
    assert events == [StreamText("Par")]
    assert isinstance(error, BadRequest) and error.context_overflow
    assert "the request exceeds the available context size" in str(error)


async def test_sse_error_field_with_plain_text_is_shown() -> None:
    events, error = await stream([raw("error: model crashed while loading")])
    assert isinstance(error, StreamErrorObject) and "model crashed while loading" in str(error)


async def test_event_error_then_data_shows_the_message() -> None:
    lines = [raw("event: error\ndata: " + json.dumps({"message": "out of memory on device 0"}))]
    events, error = await stream(lines)
    assert isinstance(error, StreamErrorObject) and "out of memory on device 0" in str(error)


async def test_an_event_type_lasts_one_event_only() -> None:
    lines = [raw("event: message"), chunk({"content": "ok"}), raw(""), chunk({}, "stop"), sse("[DONE]")]
    events, error = await stream(lines)
    assert error is None and events == [StreamText("ok"), Done("stop")]


async def test_empty_data_frames_are_skipped() -> None:
    lines = [raw("data:"), chunk({"content": "hi"}), raw("data: "), chunk({}, "stop"), sse("[DONE]")]
    events, error = await stream(lines)
    assert error is None and events == [StreamText("hi"), Done("stop")]


async def test_arguments_sent_whole_again_at_the_end_are_taken_once() -> None:
    """vLLM's end-of-stream flush re-sends the whole arguments (vllm-project/vllm#42167)."""
    whole = '{"date": "2025-03-26", "amount": 300}'
    lines = [
        chunk({"tool_calls": [call_frag(0, "log", '{"date": "2025-03-26"', id="c1")]}),
        chunk({"tool_calls": [call_frag(0, None, whole)]}, "tool_calls"),
    ]
    events, error = await stream(lines)
    assert error is None and calls(events) == [ToolCallRequest("c1", "log", {"date": "2025-03-26", "amount": 300})]


async def test_an_empty_tool_calls_entry_is_no_call() -> None:
    """LM Studio can send a tool_calls entry with an empty id and no function (lmstudio-bug-tracker#830)."""
    lines = [chunk({"content": "Done."}), chunk({"tool_calls": [{"index": 0, "id": "", "type": "function"}]}),
             chunk({}, "stop"), sse("[DONE]")]
    events, error = await stream(lines)
    assert error is None and calls(events) == [] and events[-1] == Done("stop")


# --- the arguments' joining, for any arguments and any cut -------------------------------

_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(args=st.dictionaries(st.text(max_size=6), _values, max_size=4), cuts=st.lists(st.integers(0, 200), max_size=6),
       repeat=st.sampled_from(["none", "last", "twice"]))
def test_joined_fragments_give_the_arguments(args, cuts, repeat) -> None:
    text = json.dumps(args)
    points = sorted({min(c, len(text)) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    if repeat == "last":  # the whole object sent again at the end
        parts.append(text)
    elif repeat == "twice":
        parts = [text, text]
    assert json.loads(join_arguments(parts)) == args


@given(parts=st.lists(st.text(max_size=20), max_size=5))
def test_joining_never_raises(parts) -> None:
    assert isinstance(join_arguments(parts), str)
