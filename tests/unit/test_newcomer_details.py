"""What a new user trips over in their first minutes, each checked where it can fail: the examples in
errors parse, an endpoint's name reads right inside a sentence, one rule counts a conversation's
turns, /tools says what it counts beside F5's figure, `wisp eval --list` cites no internal document,
the embedded server runs on every core, and its restart is said, with seconds, before the reply.

Real parts: the fake Ollama and OpenAI-compatible servers on 127.0.0.1, real SQLite files under the
isolated WISP_HOME, a real HTTP server standing in for the embedded llama.cpp host.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.support.fakes import FakeOllama, FakeOpenAI, reply
from tests.support.standin_server import DeadSharedServer
from tests.support.home import write_config
from wisp.core.cli import main
from wisp.core.commands import run_command
from wisp.core.config import Config, ConfigError
from wisp.core.conversations import ArchiveError, count_turns, fork, turns_phrase
from wisp.core.model.base import StreamText, Waiting
from wisp.core.model.embedded import EmbeddedEndpoint
from wisp.core.model.llama_host import INFO_NAME, model_settings, parse_args, usable_cores
from wisp.core.model.openai import OpenAIEndpoint
from wisp.core.session import Session, SessionOptions
from tests.unit.test_conversations import open_session, run  # noqa: F401 (one session opener for these tests)


@pytest.fixture
def home(wisp_home: Path):
    with FakeOllama(models=["wisp-fake:latest"]) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5, "model.load_wait_s": 5})
        yield wisp_home, srv


def example_json(message: str) -> object:
    """The JSON example an error message gives (from its first ``{"profiles"``, balanced)."""
    start = message.index('{"profiles"')
    depth = 0
    for i, ch in enumerate(message[start:], start):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            tail = message[i + 1:]
            assert not tail.lstrip().startswith("}"), f"an extra brace after the example: {message!r}"
            return json.loads(message[start:i + 1])
    raise AssertionError(f"the example never closes: {message!r}")


# --- the examples in errors -----------------------------------------------------------------


def test_the_profile_errors_example_is_json_with_no_extra_brace(wisp_home: Path) -> None:
    config = Config.load()
    with pytest.raises(ConfigError) as caught:
        config.use_profile("work")
    assert example_json(str(caught.value)) == {"profiles": {"work": {"provider": "ollama", "model": "qwen3:8b"}}}


async def test_the_profile_commands_example_is_json(home, tmp_path: Path) -> None:
    async with await open_session(tmp_path) as s:
        result = await run_command(s, "/profile")
    assert "No profiles yet" in result.text
    assert example_json(result.text)["profiles"]["work"]["model"] == "qwen3"


# --- an endpoint's name inside a sentence ---------------------------------------------------


async def test_cannot_connect_names_the_server_in_lower_case_mid_sentence() -> None:
    port = FakeOpenAI().start()
    url = port.base_url
    port.stop()  # nothing listens there now
    endpoint = OpenAIEndpoint(url, "m", timeout_s=2)
    try:
        with pytest.raises(Exception) as caught:
            await endpoint.list_models()
    finally:
        await endpoint.aclose()
    message = str(caught.value)
    assert message.startswith("Cannot connect to the OpenAI-compatible server at"), message
    assert "The " not in message.split(" at ")[0]


def test_a_name_within_a_sentence_keeps_a_proper_name() -> None:
    from wisp.core.model.ollama import OllamaEndpoint

    assert OllamaEndpoint("http://127.0.0.1:1", "m").name_within() == "Ollama"
    assert OpenAIEndpoint("http://127.0.0.1:1", "m").name_within() == "the OpenAI-compatible server"
    assert EmbeddedEndpoint.display_name.startswith("The ")  # it opens sentences elsewhere


# --- one rule for counting turns -------------------------------------------------------------


def test_the_turn_count_rule() -> None:
    turns = [{"superseded_by": 2}, {"superseded_by": None}, {"superseded_by": None}, {"superseded_by": 5},
             {"superseded_by": None}]
    assert count_turns(turns) == (3, 2)
    assert turns_phrase(3, 2) == "3 turns and 2 earlier versions"
    assert turns_phrase(1) == "1 turn" and turns_phrase(2, 1) == "2 turns and 1 earlier version"


async def test_conversations_export_and_fork_count_the_same_turns(home, tmp_path: Path, capsys) -> None:
    """3 turns on screen, one of them asked again with /retry: turn numbers run to 4, the record holds
    4 versions; every view says 3 turns (and names the earlier version apart)."""
    _, srv = home
    srv.push(reply("one"), reply("two"), reply("two, again"), reply("three"))
    async with await open_session(tmp_path) as s:
        await run(s, "first")
        await run(s, "second")
        await run(s, "second", supersedes=2)
        await run(s, "third")
        cid = s.conversation_id
        listed = {c.id: c.turn_count for c in await s.store.list_conversations()}
        exported = await run_command(s, f"/export md {tmp_path / 'out.md'}")
        forked = await run_command(s, "/fork")
        with pytest.raises(ArchiveError) as missing:
            await fork(s.store, s.audit, cid, 9)
    assert listed[cid] == 3
    assert "(3 turns and 1 earlier version)" in exported.text, exported.text
    assert "(3 turns and 1 earlier version)" in forked.text, forked.text
    assert "3 turns and 1 earlier version, numbered up to 4" in str(missing.value)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["conversations"]) == 0  # its own event loop
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[2] for r in rows if r[0] == str(cid)] == ["3"]  # ID, UPDATED, TURNS, TITLE


# --- /tools against F5 --------------------------------------------------------------------


async def test_tools_says_what_it_counts_and_gives_f5s_figure(home, tmp_path: Path) -> None:
    _, srv = home
    srv.push(reply("ok"))
    async with await open_session(tmp_path, tools=["read_file", "system_info"]) as s:
        await run(s, "hello")
        result = await run_command(s, "/tools")
        from wisp.core.context.inspect import inspect_context

        report = await inspect_context(s.context, s.conversation_id)
    layer = next(r for r in report.rows if r.key == "tools")
    assert layer.tokens > 0
    assert result.data["layer_tokens"] == layer.tokens
    assert f"**{layer.tokens:,}** tokens" in result.text
    assert "each tool's schema alone" in result.text and "F5's tools layer" in result.text


# --- wisp eval --list --------------------------------------------------------------------------


def test_eval_list_cites_no_internal_document(wisp_home: Path, capsys) -> None:
    assert main(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "routing" in out and "sustained" in out
    for internal in ("wisp-memory-tool", ".txt", "issue", "EvalTests", "checkpoint", "enso"):
        assert internal.lower() not in out.lower(), internal


# --- the embedded server: every core, and a restart said ---------------------------------------


def test_the_embedded_server_runs_on_every_usable_core() -> None:
    import os

    assert usable_cores() == len(os.sched_getaffinity(0))
    base = ["--state-dir", "d", "--model", "m.gguf", "--alias", "m", "--n-ctx", "512"]
    settings = model_settings(parse_args(base))
    assert settings["n_threads"] == settings["n_threads_batch"] == usable_cores()
    settings = model_settings(parse_args([*base, "--n-threads", "1"]))
    assert settings["n_threads"] == settings["n_threads_batch"] == 1
    from llama_cpp.server.settings import ModelSettings

    assert ModelSettings(**settings).n_threads == 1  # the names are llama-cpp-python's


async def test_a_restart_of_the_embedded_server_is_said_with_its_seconds(tmp_path: Path) -> None:
    with FakeOpenAI([reply("hello again")]) as srv:
        server = DeadSharedServer(srv.base_url, tmp_path)
        endpoint = EmbeddedEndpoint(server, timeout_s=5)
        try:
            stream = endpoint.stream_chat([{"role": "user", "content": "hi"}], None)
            first = await anext(stream)
            # said before the start has finished: the server is still down
            assert isinstance(first, Waiting) and not server.alive
            assert "had stopped" in first.reason and "starting it again" in first.reason
            server.may_start.set()
            rest = [e async for e in stream]
        finally:
            await endpoint.aclose()
    waits = [e for e in rest if isinstance(e, Waiting)]
    assert waits and re.search(r"answers again, after \d+\.\d s", waits[-1].reason)
    assert "".join(e.text for e in rest if isinstance(e, StreamText)) == "hello again"
    # a server that runs is not started and nothing is said
    with FakeOpenAI([reply("still here")]) as srv:
        server = DeadSharedServer(srv.base_url, tmp_path)
        server.alive = True
        (tmp_path / INFO_NAME).write_text(json.dumps({"base_url": srv.base_url}))
        endpoint = EmbeddedEndpoint(server, timeout_s=5)
        try:
            events = [e async for e in endpoint.stream_chat([{"role": "user", "content": "hi"}], None)]
        finally:
            await endpoint.aclose()
    assert server.starts == 0 and not any(isinstance(e, Waiting) for e in events)


async def test_the_turn_says_the_restart_before_the_reply(wisp_home: Path, tmp_path: Path) -> None:
    """The agent turns the restart into a notice (key ``wait``: the TUI's status bar and chat line,
    `wisp ask`'s stderr) before the reply."""
    from wisp.core import events as ev
    from wisp.core.model.tool_modes import apply_tool_mode

    with FakeOpenAI([reply("back")]) as srv:
        write_config(wisp_home,
                     {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "wisp-fake",
                      "model.timeout_s": 5})
        async with await open_session(tmp_path) as s:
            server = DeadSharedServer(srv.base_url, tmp_path)
            server.may_start.set()
            s.link.endpoint = apply_tool_mode(EmbeddedEndpoint(server, name="wisp-fake", timeout_s=5), "native")
            events = await run(s, "are you there?")
    notices = [e for e in events if isinstance(e, ev.Notice) and e.key == "wait"]
    assert notices and "starting it again" in notices[0].text
    assert "answers again" in notices[-1].text
    first_text = next(i for i, e in enumerate(events) if isinstance(e, ev.TextDelta))
    assert events.index(notices[0]) < first_text


def test_wisp_ask_says_the_restart_as_it_begins_and_when_it_ends(wisp_home: Path, tmp_path: Path, capsys,
                                                                   monkeypatch) -> None:
    """`wisp ask`'s stderr: one line as the restart begins, one with its seconds once the server answers
    (no line a second between)."""
    from wisp.core.model.tool_modes import apply_tool_mode

    with FakeOpenAI([reply("back")]) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.timeout_s": 5})
        connect = Session.connect

        async def connect_then_die(self, on_status=None):  # connected, and then the server died
            ok = await connect(self, on_status)
            server = DeadSharedServer(srv.base_url, tmp_path)
            server.may_start.set()
            self.link.endpoint = apply_tool_mode(EmbeddedEndpoint(server, name="wisp-fake", timeout_s=5), "native")
            return ok

        monkeypatch.setattr(Session, "connect", connect_then_die)
        monkeypatch.chdir(tmp_path)
        assert main(["ask", "are you there?"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "back"
    lines = [line for line in out.err.splitlines() if "embedded llama.cpp server" in line]
    assert len(lines) == 2, out.err
    assert "starting it again" in lines[0] and re.search(r"answers again, after \d+\.\d s", lines[1])


def test_model_embedded_threads_reaches_the_server_command(wisp_home: Path, tmp_path: Path) -> None:
    from wisp.core.model.embedded import EmbeddedSpec, _host_args
    from wisp.core.model.resolve import EndpointSettings

    config = Config.load()
    assert config.get("model.embedded_threads") == 0
    assert EndpointSettings.from_config(config).embedded_threads == 0
    config.set("model.embedded_threads", 1)
    assert EndpointSettings.from_config(Config.load()).embedded_threads == 1
    with pytest.raises(ConfigError):
        config.set("model.embedded_threads", -1)

    def host(threads: int) -> list[str]:
        spec = EmbeddedSpec(tmp_path / "m.gguf", 2048, threads=threads)
        args = _host_args(tmp_path, spec.gguf, "m", spec.n_ctx, None, 1, tmp_path / "log", detach=True,
                          threads=spec.threads)
        return args

    ones = host(1)
    assert ones[ones.index("--n-threads") + 1] == "1"
    parsed = parse_args(ones[ones.index("--state-dir"):])
    assert model_settings(parsed)["n_threads"] == 1
    assert "--n-threads" not in host(0)  # the host then takes every usable core
    assert model_settings(parse_args(host(0)[host(0).index("--state-dir"):]))["n_threads"] == usable_cores()
    # the setting is no part of the shared server's key: the window and format are
    assert EmbeddedSpec(tmp_path / "m.gguf", 2048, threads=1).key() == EmbeddedSpec(tmp_path / "m.gguf", 2048).key()
