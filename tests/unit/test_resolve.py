"""resolve_endpoint: explicit providers, and auto over fakes bound to their own ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.fakes import FakeOllama, FakeOpenAI, reply
from wisp.core.model.base import ChatOptions, NoEndpoint, StreamText
from wisp.core.model.embedded import EmbeddedServer
from wisp.core.model.ollama import OllamaEndpoint
from wisp.core.model.openai import OpenAIEndpoint
from wisp.core.model.resolve import EndpointSettings, resolve_endpoint


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
async def closing():
    """closing(resolved) registers a ResolvedEndpoint to close after the test."""
    opened = []

    def register(resolved):
        opened.append(resolved)
        return resolved

    yield register
    for resolved in opened:
        await resolved.aclose()


async def first_text(endpoint) -> str:
    out = ""
    async for event in endpoint.stream_chat([{"role": "user", "content": "ping"}], None, ChatOptions(context_window=512)):
        if isinstance(event, StreamText):
            out += event.text
    return out


async def test_auto_prefers_ollama(closing):
    with FakeOllama(models=["llama3.2:latest", "other:1"]) as oll, FakeOpenAI() as oai:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(provider="auto"), ollama_url=oll.base_url, openai_url=oai.base_url, embedded=False))  # fmt: skip
        assert isinstance(resolved.endpoint, OllamaEndpoint)
        assert resolved.endpoint.base_url == oll.base_url
        assert resolved.model == "llama3.2:latest"
        assert resolved.label == f"ollama {oll.base_url}"
        assert resolved.embedded is None
        assert await first_text(resolved.endpoint) == "You said: ping"
        assert oai.requests == []


async def test_auto_falls_back_to_openai(closing):
    with FakeOpenAI(models=["qwen", "smol"]) as oai:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(), ollama_url=dead_url(), openai_url=oai.base_url, embedded=False))  # fmt: skip
        assert isinstance(resolved.endpoint, OpenAIEndpoint)
        assert resolved.model == "qwen"
        assert resolved.label == f"openai {oai.base_url}"
        assert await first_text(resolved.endpoint) == "You said: ping"


async def test_auto_skips_an_ollama_without_models(closing):
    with FakeOllama(models=[]) as oll, FakeOpenAI() as oai:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(), ollama_url=oll.base_url, openai_url=oai.base_url, embedded=False))  # fmt: skip
        assert resolved.provider == "openai"


async def test_auto_ignores_a_server_of_the_other_protocol(closing):
    # an OpenAI-only server at the Ollama URL answers 404 on /api/tags and is not taken for Ollama
    with FakeOpenAI() as oai:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(), ollama_url=oai.base_url, openai_url=oai.base_url, embedded=False))  # fmt: skip
        assert resolved.provider == "openai"


async def test_auto_with_endpoint_set_probes_that_url(closing):
    with FakeOpenAI(models=["m"]) as oai:
        resolved = closing(await resolve_endpoint(
            {"provider": "auto", "endpoint": oai.base_url}, ollama_url=dead_url(), openai_url=dead_url()))  # fmt: skip
        assert resolved.provider == "openai" and resolved.endpoint.base_url == oai.base_url


async def test_auto_keeps_the_configured_name(closing):
    with FakeOllama() as oll:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(name="mine:7b"), ollama_url=oll.base_url, openai_url=dead_url(), embedded=False))  # fmt: skip
        assert resolved.model == "mine:7b"


async def test_nothing_answers_gives_one_clear_message():
    with pytest.raises(NoEndpoint) as info:
        await resolve_endpoint(EndpointSettings(), ollama_url=dead_url(), openai_url=dead_url(), embedded=False)
    message = str(info.value)
    assert "\n" not in message
    assert "ollama serve" in message and "ollama pull" in message
    assert "pip install 'wisp[local]'" in message


class FakeEmbedded(EmbeddedServer):
    """Stands in for llama.cpp's server: a FakeOpenAI started and stopped the same way."""

    def __init__(self):
        super().__init__()
        self.fake = FakeOpenAI(models=["SmolLM2-135M-Instruct.Q4_1"])
        self.started_with = "unset"
        self.stopped = False

    async def start(self, gguf_path=None):
        self.started_with = gguf_path
        self.fake.start()
        self.base_url, self.model = self.fake.base_url, "SmolLM2-135M-Instruct.Q4_1"
        return self.base_url

    async def stop(self, grace_s=5.0):
        self.stopped = True
        self.fake.stop()


async def test_auto_starts_the_embedded_default_last():
    fake = FakeEmbedded()
    statuses = []
    resolved = await resolve_endpoint(
        EndpointSettings(gguf="/models/x.gguf"),
        ollama_url=dead_url(),
        openai_url=dead_url(),
        embedded_factory=lambda: fake,
        on_status=statuses.append,
    )
    try:
        assert resolved.embedded is fake
        assert fake.started_with == "/models/x.gguf"
        assert resolved.provider == "openai"
        assert resolved.model == "SmolLM2-135M-Instruct.Q4_1"
        assert resolved.label == f"embedded llama.cpp {fake.base_url}"
        assert statuses and "embedded" in statuses[0]
        assert await first_text(resolved.endpoint) == "You said: ping"
    finally:
        await resolved.aclose()
    assert fake.stopped


@pytest.mark.parametrize("name", ["nonexistent:1b", "llama3.2", "SmolLM2-135M-Instruct.Q4_1 "])
async def test_the_embedded_server_never_answers_as_another_model(name: str) -> None:
    """Nothing else answered and the embedded server serves one GGUF file: a model name asked for
    (--model, model.name) that is not its model is refused, not recorded as if it answered (a new
    user's `wisp ask --model nonexistent:1b` answered on SmolLM2 and was recorded as nonexistent:1b)."""
    fake = FakeEmbedded()
    settings = EndpointSettings(gguf="/models/x.gguf", name=name)
    kwargs = dict(ollama_url=dead_url(), openai_url=dead_url(), embedded_factory=lambda: fake)
    if name.strip() == "SmolLM2-135M-Instruct.Q4_1":  # its own name, as config may hold it: served
        resolved = await resolve_endpoint(settings, **kwargs)
        try:
            assert resolved.model == "SmolLM2-135M-Instruct.Q4_1"
        finally:
            await resolved.aclose()
        return
    with pytest.raises(NoEndpoint) as info:
        await resolve_endpoint(settings, **kwargs)
    message = str(info.value)
    assert f'"{name}"' in message and "serves only SmolLM2-135M-Instruct.Q4_1" in message
    assert "wisp config unset model.name" in message and "--model" in message
    assert fake.stopped  # the server started for the request is not left behind


async def test_a_name_the_shared_server_does_not_serve_is_refused_before_finding_or_starting_it(
        tmp_path: Path, monkeypatch) -> None:
    """A new user's `wisp ask --model nope`, while the shared server was busy, waited 120 s and then blamed
    the busy server: the name is checked against the GGUF's own first, with nothing found or started."""
    import wisp.core.model.embedded as embedded

    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(embedded, "server_importable", lambda: True)

    async def never(*args, **kwargs):
        raise AssertionError("the shared server was looked for")

    monkeypatch.setattr(embedded, "ensure_shared_server", never)
    with pytest.raises(NoEndpoint) as info:
        await resolve_endpoint(EndpointSettings(gguf=str(gguf), name="nope", data_dir=str(tmp_path)),
                               ollama_url=dead_url(), openai_url=dead_url())
    assert '"nope"' in str(info.value) and "serves only SmolLM2-135M-Instruct.Q4_1" in str(info.value)


async def test_explicit_ollama_with_name_makes_no_request(closing):
    with FakeOllama() as oll:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(provider="ollama", endpoint=oll.base_url, name="x:1")))  # fmt: skip
        assert oll.requests == []
        assert isinstance(resolved.endpoint, OllamaEndpoint) and resolved.model == "x:1"


async def test_explicit_ollama_without_name_takes_first_model(closing):
    with FakeOllama(models=["first:1", "second:2"]) as oll:
        resolved = closing(await resolve_endpoint({"provider": "ollama", "endpoint": oll.base_url}))
        assert resolved.model == "first:1"


async def test_explicit_ollama_with_no_models(closing):
    with FakeOllama(models=[]) as oll:
        with pytest.raises(NoEndpoint, match="ollama pull"):
            await resolve_endpoint({"provider": "ollama", "endpoint": oll.base_url})


async def test_explicit_openai_reads_api_key_from_env(closing, monkeypatch):
    monkeypatch.setenv("WISP_TEST_KEY", "sk-from-env")
    with FakeOpenAI(api_key="sk-from-env") as oai:
        settings = EndpointSettings(provider="openai", endpoint=oai.base_url, api_key_env="WISP_TEST_KEY")
        resolved = closing(await resolve_endpoint(settings))
        assert resolved.model == "wisp-fake"
        assert await first_text(resolved.endpoint) == "You said: ping"
        assert all(r["headers"].get("Authorization") == "Bearer sk-from-env" for r in oai.requests)
    assert "sk-from-env" not in repr(settings) + repr(resolved.endpoint) + resolved.label


async def test_explicit_openai_without_the_key_is_refused(closing, monkeypatch):
    monkeypatch.delenv("WISP_TEST_KEY", raising=False)
    with FakeOpenAI([reply("x")], api_key="sk-from-env") as oai:
        from wisp.core.model.base import ServerError

        with pytest.raises(ServerError, match="api_key_env"):
            await resolve_endpoint(EndpointSettings(provider="openai", endpoint=oai.base_url, api_key_env="WISP_TEST_KEY"))


async def test_explicit_provider_down_is_unreachable():
    from wisp.core.model.base import EndpointUnreachable

    with pytest.raises(EndpointUnreachable, match="ollama serve"):
        await resolve_endpoint(EndpointSettings(provider="ollama", endpoint=dead_url()))


async def test_unknown_provider():
    with pytest.raises(NoEndpoint, match="ollama, openai or auto"):
        await resolve_endpoint(EndpointSettings(provider="bard"))


async def test_settings_timeouts_reach_the_endpoint(closing):
    with FakeOllama() as oll:
        resolved = closing(await resolve_endpoint(
            EndpointSettings(provider="ollama", endpoint=oll.base_url, name="m", timeout_s=7, load_wait_s=3)))  # fmt: skip
        assert resolved.endpoint.timeout_s == 7 and resolved.endpoint.load_wait_s == 3
