"""Exact tokens, cached prompt tokens, overflow errors in numbers, and advice that is true
for the endpoint in use (issue 10, "Exact tokens", "No request that cannot fit")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fakes import FakeOllama, FakeOpenAI, fault, text
from wisp.core.model._transport import overflow_numbers, suggest_window
from wisp.core.model.base import BadRequest, ChatOptions, StreamUsage
from wisp.core.model.embedded import EmbeddedEndpoint, EmbeddedSpec, SharedServer
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.openai import OpenAIEndpoint, usage_of


def openai(srv: FakeOpenAI) -> OpenAIEndpoint:
    return OpenAIEndpoint(srv.base_url, "wisp-fake", timeout_s=5, load_wait_s=1)


def tokenize_requests(srv: FakeOpenAI) -> list[str]:
    return [r["path"] for r in srv.requests if "tokenize" in r["path"]]


@pytest.mark.parametrize("kind, path", [("llama-cpp-python", "/extras/tokenize/count"), ("llama.cpp", "/tokenize")])
async def test_count_tokens_asks_the_servers_tokenizer_and_caches(kind: str, path: str) -> None:
    with FakeOpenAI(tokenize=kind) as srv:
        endpoint = openai(srv)
        try:
            assert await endpoint.count_tokens("one two three") == 3
            assert await endpoint.count_tokens("one two three") == 3  # cached
            assert await endpoint.count_tokens("four five") == 2
            assert await endpoint.count_tokens("") == 0
        finally:
            await endpoint.aclose()
    asked = tokenize_requests(srv)
    assert asked.count(path) == 2  # one per distinct text; the route that works is remembered
    if kind == "llama.cpp":
        assert asked[0] == "/extras/tokenize/count"  # tried first, once
        assert [r["body"] for r in srv.requests if r["path"] == "/tokenize"][0] == {
            "content": "one two three", "add_special": False}


async def test_count_tokens_is_none_where_the_server_cannot_count_and_asks_once() -> None:
    with FakeOpenAI() as srv:
        endpoint = openai(srv)
        try:
            assert await endpoint.count_tokens("a b") is None
            assert await endpoint.count_tokens("c d") is None
        finally:
            await endpoint.aclose()
    assert len(tokenize_requests(srv)) == 2  # both routes tried once, never again
    with FakeOllama() as srv:
        endpoint = OllamaEndpoint(srv.base_url, "m", timeout_s=5, load_wait_s=1)
        try:
            assert await endpoint.count_tokens("a b") is None
        finally:
            await endpoint.aclose()
        assert srv.requests == []


def test_usage_reads_cached_tokens_in_each_shape() -> None:
    assert usage_of({"usage": {"prompt_tokens": 900, "completion_tokens": 5,
                               "prompt_tokens_details": {"cached_tokens": 850}}}) == StreamUsage(900, 5, 850)
    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": 1}}) == StreamUsage(9, 1, None)
    # llama.cpp's llama-server: timings say what was evaluated and what came from the cache
    assert usage_of({"timings": {"prompt_n": 40, "cache_n": 860, "predicted_n": 7}}) == StreamUsage(900, 7, 860)
    assert usage_of({"choices": []}) is None
    assert StreamUsage(900, 5, 850).evaluated_tokens == 50
    assert StreamUsage(900, 5).evaluated_tokens == 900 and StreamUsage(None, 5).evaluated_tokens is None


def test_overflow_numbers_from_each_server() -> None:
    assert overflow_numbers("Requested tokens (10194) exceed context window of 8192") == (10194, 8192)
    assert overflow_numbers("This model's maximum context length is 8192 tokens. However, you requested "
                            "10250 tokens (10194 in the messages, 56 in the completion).") == (10194, 8192)
    assert overflow_numbers("This model's maximum context length is 4096 tokens, however you requested 5000 "
                            "tokens") == (5000, 4096)
    llama_cpp = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                           "type": "exceed_context_size_error", "n_prompt_tokens": 10194, "n_ctx": 8192}}
    assert overflow_numbers(llama_cpp["error"]["message"], llama_cpp) == (10194, 8192)
    assert overflow_numbers("context length exceeded") == (None, None)


@pytest.mark.parametrize("body", [
    {"error": {"message": "This model's maximum context length is 8192 tokens. However, you requested 10250 tokens "
                          "(10194 in the messages, 56 in the completion).", "code": "context_length_exceeded"}},
    {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
               "type": "exceed_context_size_error", "n_prompt_tokens": 10194, "n_ctx": 8192}},
])
async def test_an_overflow_says_what_happened_and_how_to_raise_this_servers_window(body: dict) -> None:
    with FakeOpenAI() as srv:
        srv.push(fault.status(400, body))
        endpoint = openai(srv)
        try:
            with pytest.raises(BadRequest) as info:
                async for _ in endpoint.stream_chat([{"role": "user", "content": "x"}], None, ChatOptions()):
                    pass
        finally:
            await endpoint.aclose()
    message = str(info.value)
    assert info.value.context_overflow and info.value.prompt_tokens == 10194 and info.value.window == 8192
    assert message.startswith("The prompt needed 10,194 tokens of the server's 8,192-token window.")
    assert "--ctx-size 16384" in message and "--n_ctx 16384" in message and "--max-model-len 16384" in message
    assert "misbehav" not in message and "\n" not in message


def test_window_advice_is_true_for_each_endpoint(tmp_path: Path) -> None:
    assert suggest_window(10194) == 16384 and suggest_window(100) == 4096
    ollama = OllamaEndpoint("http://127.0.0.1:1", "m")
    assert "model.context_window to 16384" in ollama.window_advice(10194) and "num_ctx" in ollama.window_advice(10194)
    other = OpenAIEndpoint("http://127.0.0.1:1", "m")
    assert "--ctx-size 16384" in other.window_advice(10194)

    def embedded(n_ctx: int, trained: int | None) -> EmbeddedEndpoint:
        server = SharedServer(EmbeddedSpec(tmp_path / "m.gguf", n_ctx, None, 60, trained), tmp_path,
                              base_url="http://127.0.0.1:1", model="m")
        return EmbeddedEndpoint(server)

    small = embedded(4096, 32768)
    assert "Set model.context_window to 16384 (wisp starts the embedded server again" in small.window_advice(10194)
    capped = embedded(4096, 8192)
    assert "model.context_window to 8192 (the most this model was trained on" in capped.window_advice(10194)
    full = embedded(8192, 8192)
    advice = full.window_advice(10194)
    assert "already its trained maximum of 8,192 tokens" in advice and "model.gguf" in advice
    assert str(tmp_path / "embedded") in full.log_advice()  # errors from the embedded server name its log
    for endpoint in (ollama, other, small, capped, full):
        assert "\n" not in endpoint.window_advice(10194)
