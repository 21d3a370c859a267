"""Structured side calls (issue "Compaction you can see and trust", "Structured side calls"):
each request shape a schema takes (Ollama's ``format``; OpenAI-compatible ``response_format``
``json_schema``, then ``json_object`` with the schema as llama-cpp-python's server takes it), the
fall back to the plain request when a server refuses one (HTTP 400/422, an error object, an HTTP
500 that names the shape), remembered per endpoint in memory and in the context's table; and the
lenient reading of what comes back. Real HTTP against the fake servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from wisp.core.context.shapes import ShapeBook
from wisp.core.database import open_store
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.openai import OpenAIEndpoint
from wisp.core.model.sidecall import EndpointSideCall, ShapeForms
from wisp.core.sidecall import SideCallError, read_json_object
from tests.support.fakes import FakeOllama, FakeOpenAI, fault, reply, text

SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"],
          "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": "we chose httpx"}]
#: What llama-cpp-python's server answers to a response_format of type json_schema (measured on 0.3.x).
LLAMA_CPP_PYTHON_500 = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                                             "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                                             "'json_object'\"}", "type": "internal_server_error"}}


def openai_call(srv: FakeOpenAI, forms: ShapeForms | None = None) -> EndpointSideCall:
    return EndpointSideCall(OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1), 8192, forms)


def ollama_call(srv: FakeOllama, forms: ShapeForms | None = None) -> EndpointSideCall:
    return EndpointSideCall(OllamaEndpoint(srv.base_url, "wisp-fake:latest", timeout_s=5, load_wait_s=1), 8192,
                            forms)


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "wisp.db")
    yield s
    await s.close()


# --- the request shapes --------------------------------------------------------------------------


async def test_ollama_sends_the_schema_as_format() -> None:
    with FakeOllama([reply(text('{"summary": "httpx"}'))]) as srv:
        answer = await ollama_call(srv).complete(MESSAGES, max_tokens=64, schema=SCHEMA)
    body = srv.chat_bodies[0]
    assert answer == '{"summary": "httpx"}'
    assert body["format"] == SCHEMA
    assert "schema" not in body["options"] and "schema_form" not in body["options"]  # not an Ollama option
    assert body["think"] is False and "tools" not in body


async def test_openai_sends_response_format_json_schema() -> None:
    with FakeOpenAI([reply(text('{"summary": "httpx"}'))]) as srv:
        await openai_call(srv).complete(MESSAGES, max_tokens=64, schema=SCHEMA)
    body = srv.chat_bodies[0]
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "wisp_side_call", "strict": True, "schema": SCHEMA}}
    assert "schema" not in body and "schema_form" not in body


async def test_a_side_call_without_a_schema_asks_plainly() -> None:
    with FakeOpenAI([reply(text("fine"))]) as srv, FakeOllama([reply(text("fine"))]) as oll:
        await openai_call(srv).complete(MESSAGES, max_tokens=64)
        await ollama_call(oll).complete(MESSAGES, max_tokens=64)
    assert "response_format" not in srv.chat_bodies[0]
    assert "format" not in oll.chat_bodies[0]


# --- falling back, and remembering it ----------------------------------------------------------------


async def test_llama_cpp_python_refusing_json_schema_gets_json_object_and_it_is_remembered(store) -> None:
    """llama-cpp-python's server answers a json_schema response_format with HTTP 500 naming it;
    it takes {"type": "json_object", "schema": …}."""
    forms = ShapeForms(ShapeBook(store))
    with FakeOpenAI([fault.status(500, LLAMA_CPP_PYTHON_500), reply(text('{"summary": "a"}')),
                     reply(text('{"summary": "b"}'))]) as srv:
        call = openai_call(srv, forms)
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == '{"summary": "a"}'
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == '{"summary": "b"}'
    first, second, third = srv.chat_bodies
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert third["response_format"] == {"type": "json_object", "schema": SCHEMA}  # not asked again
    # remembered across sessions, per endpoint and model
    assert await ShapeBook(store).get(srv.base_url, "wisp-fake") == "json_object"
    rows = await ShapeBook(store).all()
    assert rows[0]["form"] == "json_object" and "json_schema refused" in rows[0]["reason"]


async def test_an_endpoint_that_knows_its_forms_is_asked_that_way_first() -> None:
    """The embedded server (llama-cpp-python) takes json_object: its endpoint says so, so a new
    server's first shaped side call is not a refusal; through the tool-mode wrapper too."""
    from wisp.core.model.embedded import EmbeddedEndpoint
    from wisp.core.model.sidecall import forms_for
    from wisp.core.model.tool_modes import ToolModeEndpoint

    assert EmbeddedEndpoint.shape_forms == ("json_object", "plain")
    with FakeOpenAI([reply(text('{"summary": "a"}'))]) as srv:
        endpoint = OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5)
        endpoint.shape_forms = EmbeddedEndpoint.shape_forms
        assert forms_for(ToolModeEndpoint(endpoint, "auto")) == ("json_object", "plain")
        call = EndpointSideCall(endpoint, 4096)
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == '{"summary": "a"}'
        await endpoint.aclose()
    [body] = srv.chat_bodies
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}


@pytest.mark.parametrize("refusal", [
    fault.status(400, {"error": {"message": "response_format is not supported", "type": "invalid_request_error"}}),
    fault.status(422, {"detail": [{"msg": "extra fields not permitted", "loc": ["body", "response_format"]}]}),
    fault.error_object(message="failed to parse grammar"),
], ids=["http-400", "http-422", "error-object"])
async def test_a_server_refusing_every_shape_is_asked_plainly_and_remembered(store, refusal) -> None:
    with FakeOpenAI([refusal, refusal, reply(text("a plain summary")), reply(text("again plain"))]) as srv:
        call = openai_call(srv, ShapeForms(ShapeBook(store)))
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == "a plain summary"
        # a new session over the same database asks plainly at once
        later = openai_call(srv, ShapeForms(ShapeBook(store)))
        assert await later.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == "again plain"
    shapes = [b.get("response_format", {}).get("type") for b in srv.chat_bodies]
    assert shapes == ["json_schema", "json_object", None, None]
    assert await ShapeBook(store).get(srv.base_url, "wisp-fake") == "plain"


async def test_ollama_refusing_format_is_asked_plainly(store) -> None:
    with FakeOllama([fault.status(400, {"error": "invalid format: schema not supported"}),
                     reply(text("plain")), reply(text("plain again"))]) as srv:
        call = ollama_call(srv, ShapeForms(ShapeBook(store)))
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == "plain"
        assert await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA) == "plain again"
    assert [("format" in b) for b in srv.chat_bodies] == [True, False, False]
    assert await ShapeBook(store).get(srv.base_url, "wisp-fake:latest") == "plain"


async def test_errors_that_are_not_a_refusal_are_raised_and_nothing_is_remembered(store) -> None:
    forms = ShapeForms(ShapeBook(store))
    overflow = fault.status(400, {"error": {"message": "the request exceeds the context window (n_ctx 4096)"}})
    crash = fault.status(500, {"error": {"message": "CUDA out of memory"}})
    with FakeOpenAI([overflow, crash]) as srv:
        call = openai_call(srv, forms)
        with pytest.raises(SideCallError) as info:
            await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA)
        assert info.value.kind == "bad_request" and "context window" in str(info.value)
        with pytest.raises(SideCallError) as info:
            await call.complete(MESSAGES, max_tokens=64, schema=SCHEMA)
        assert info.value.kind == "server_error"
    assert len(srv.chat_bodies) == 2  # one try each: neither was a refusal of the shape
    assert await ShapeBook(store).get(srv.base_url, "wisp-fake") is None and forms.known == {}


async def test_the_plain_request_failing_too_raises_its_error() -> None:
    refuse = fault.status(422, {"detail": "response_format"})
    with FakeOpenAI([refuse, refuse, fault.status(403)]) as srv:  # HTTP 403 on the plain request
        with pytest.raises(SideCallError) as info:
            await openai_call(srv).complete(MESSAGES, max_tokens=64, schema=SCHEMA)
    assert info.value.kind == "server_error" and "403" in str(info.value)


async def test_a_form_remembered_long_ago_is_tried_afresh(store) -> None:
    book = ShapeBook(store)
    await book.put("http://x", "m", "plain", "refused")
    async with store.transaction() as db:
        await db.execute("UPDATE side_call_shapes SET updated_at = '2020-01-01T00:00:00.000000Z'")
    assert await book.get("http://x", "m") is None
    with pytest.raises(ValueError):
        await book.put("http://x", "m", "yaml")


# --- reading the reply -----------------------------------------------------------------------------------


def test_read_json_object_reads_fenced_wrapped_and_cut_replies() -> None:
    assert read_json_object('{"summary": "x"}') == {"summary": "x"}
    assert read_json_object('Sure!\n```json\n{"summary": "x"}\n```') == {"summary": "x"}
    assert read_json_object('{"summary": "we chose htt') == {"summary": "we chose htt"}
    assert read_json_object('{"memories": [{"sources": [1], "summary": "a"}, {"sourc') == \
        {"memories": [{"sources": [1], "summary": "a"}]}
    assert read_json_object("The person asked about httpx.") is None
    assert read_json_object("") is None and read_json_object("[1, 2]") is None


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.data())
def test_read_json_object_whole_is_itself_and_cut_never_raises(obj: dict, data: st.DataObject) -> None:
    """Outside input: a reply is any text; read whole it is the object, cut anywhere it is a dict or None."""
    dumped = json.dumps(obj)
    assert read_json_object(dumped) == obj
    cut = data.draw(st.integers(min_value=0, max_value=len(dumped)))
    got = read_json_object(dumped[:cut])
    assert got is None or isinstance(got, dict)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_read_json_object_never_raises_on_any_text(reply_text: str) -> None:
    got = read_json_object(reply_text)
    assert got is None or isinstance(got, dict)


# --- the reply's room, as the server counts the prompt ---------------------------------------------


async def test_a_side_calls_reply_gets_only_the_room_the_counted_prompt_leaves() -> None:
    """CI's real-model chat: a summary side call, sized by wisp's estimate of a base64 paste (which
    SmolLM2 counts at 1.4 × it), asked for 9,129 tokens of an 8,192-token window with its reply."""
    from wisp.core.model.sidecall import TEMPLATE_TOKENS

    words = " ".join(["word"] * 1500)  # the fake server counts words: 1,500 + the system's 1
    messages = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": words}]
    with FakeOpenAI([reply(text("fine"))], tokenize="llama-cpp-python") as srv:
        call = EndpointSideCall(OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1), 2048)
        await call.complete(messages, max_tokens=1000)
    assert srv.chat_bodies[0]["max_tokens"] == 2048 - (1501 + 2 * TEMPLATE_TOKENS)


async def test_a_side_call_whose_counted_prompt_fills_the_window_is_not_sent() -> None:
    from wisp.core.sidecall import SideCallError

    messages = [{"role": "user", "content": " ".join(["word"] * 2040)}]
    with FakeOpenAI([reply(text("never"))], tokenize="llama-cpp-python") as srv:
        call = EndpointSideCall(OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1), 2048)
        with pytest.raises(SideCallError) as info:
            await call.complete(messages, max_tokens=500)
    assert info.value.kind == "context_overflow" and srv.chat_bodies == []


async def test_a_server_that_cannot_count_keeps_the_asked_room() -> None:
    with FakeOpenAI([reply(text("fine"))]) as srv:
        call = EndpointSideCall(OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1), 2048)
        await call.complete([{"role": "user", "content": "hi"}], max_tokens=700)
    assert srv.chat_bodies[0]["max_tokens"] == 700
