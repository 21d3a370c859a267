"""Every slash command answers with a line, whatever it is given (issue "Nothing runs, leaks, hangs
or is lost that shouldn't be", "Nothing crashes"): huge numbers, lone surrogates, quotes, ids past
2^63, through the command registry (core/commands.run_command) with a real session on a fake
endpoint. The hypothesis fuzz counts unhandled exceptions: it must be 0.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.commands import COMMANDS, CommandResult, run_command
from wisp.core.session import Session, SessionOptions
from tests.support.fakes import FakeOllama, reply, text, tool_call
from tests.support.home import write_config

HUGE = ["99999999999999999999999", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
        "1" + "0" * 400, "9" * 5000, "-1", "0", "1e999", "NaN", "\u0663", "\u00b2", "1_000", "+5", "0x10"]
TOKENS = HUGE + [
    "entry", "turn", "fact", "forget", "keep", "history", "clear", "show", "recall", "list", "search", "offset",
    "limit", "last", "top", "skip", "since", "until", "before", "workspace", "transport", "channel", "all",
    "workspaces", "--limit", "--offset", "limit:5", "offset=3", "c1", "c9223372036854775808", "C99999999999999999999",
    "MEM-000001", "MEM-99999999999999999999", "mem-1", "=", "==", "decision", "task", "entity", "preference",
    "tests", "workdir", "branch", "objective:", ";", "\ud800", "\udfff", "a\ud800b", "'", '"', "''", "\\",
    "\x00", "\x1b[2J", "\n", "\t", "today", "yesterday", "7d", "week", "2025-02-30", "9999-12-31", "0000-01-01",
    "context", "get", "set", "unset", "model.name", "ui.theme", "agent.max_steps", "tools.enabled", "on", "null",
    "\u202e", "\uff1b", "\U0001f600", "x" * 300,
]
NAMES = sorted(COMMANDS) + ["nope", "FACT", "Show", "\ud800", ""]

token = st.one_of(st.sampled_from(TOKENS), st.text(max_size=12),
                  st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(str))
command_line = st.builds(lambda name, words, sep: "/" + name + sep + " ".join(words),
                         st.sampled_from(NAMES), st.lists(token, max_size=6), st.sampled_from([" ", "  ", ""]))


@pytest.fixture
def session_loop(ollama_home, tmp_path: Path):
    """A real session with a conversation of one turn (a tool call and its result), on a fake Ollama,
    and the event loop it lives on."""
    home, srv = ollama_home
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                        "model.name": "wisp-fake:latest", "model.timeout_s": 5, "context.memory": True})
    (tmp_path / "notes.py").write_text("print('hi')\n")
    loop = asyncio.new_event_loop()

    async def open_session() -> Session:
        s = await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file", "memory"]))
        assert await s.connect()
        srv.push(reply(text("Reading."), tool_call("read_file", {"path": "notes.py"}), finish="tool_calls"),
                 reply(text("It prints hi.")))
        async for _ in s.run_turn("what does notes.py do?"):
            pass
        return s

    session = loop.run_until_complete(open_session())
    try:
        yield session, loop, srv
    finally:
        loop.run_until_complete(session.close())
        loop.close()


KNOWN = [
    "/export ~0", "/export ~nosuchuser/x.md", "/show entry 99999999999999999999999", "/show turn 99999999999999999999999", "/show entry -99999999999999999999",
    "/show turn 9223372036854775808", "/fact forget c9223372036854775808", "/fact keep c99999999999999999999999",
    "/memory offset 99999999999999999999999", "/memory limit 99999999999999999999999",
    "/memory show MEM-99999999999999999999", "/task \ud800", "/fact decision x = \ud800", "/fact \ud800 = y",
    "/fact history \ud800", "/show fact \ud800", "/config get \ud800", "/config set ui.theme \ud800",
    "/\ud800", "/memory \ud800 since 9999999999d", "/memory offset 9" + "9" * 5000, "/show entry " + "9" * 5000,
    "/config set agent.max_steps " + "9" * 5000, "/fact forget c" + "9" * 5000,
]


def check(result: object, line: str) -> None:
    assert isinstance(result, CommandResult), (line, result)
    assert isinstance(result.text, str) and result.text.strip(), line
    result.text.encode("utf-8")  # a screen or a terminal can show it


def test_the_reported_inputs_each_answer_with_a_line(session_loop) -> None:
    session, loop, srv = session_loop
    asked = len(srv.chat_bodies)
    for line in KNOWN:
        result = loop.run_until_complete(run_command(session, line))
        check(result, line)
    assert "no entry 99999999999999999999999" in loop.run_until_complete(
        run_command(session, "/show entry 99999999999999999999999")).text
    assert len(srv.chat_bodies) == asked  # no command asked the model anything


def fuzz(session_loop, examples: int) -> dict[str, int]:
    session, loop, srv = session_loop
    stats = {"examples": 0, "errors": 0, "unhandled": 0}
    failures: list[tuple[str, BaseException]] = []

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(line=command_line)
    def one(line: str) -> None:
        stats["examples"] += 1
        try:
            result = loop.run_until_complete(asyncio.wait_for(run_command(session, line), 30))
        except BaseException as exc:  # noqa: BLE001 - counted, then failed below
            stats["unhandled"] += 1
            failures.append((line, exc))
            raise
        check(result, line)
        stats["errors"] += bool(result.error)

    try:
        one()
    finally:
        print(f"\ncommand fuzz: {stats}")
    assert stats["unhandled"] == 0, failures[:3]
    assert stats["examples"] >= examples * 0.9
    return stats


def test_fuzzed_slash_commands_answer_with_a_line(session_loop) -> None:
    fuzz(session_loop, 300)


@pytest.mark.slow
def test_fuzzed_slash_commands_answer_with_a_line_5000(session_loop) -> None:
    stats = fuzz(session_loop, 5000)
    assert stats["examples"] >= 5000
