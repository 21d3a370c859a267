"""When a change to a conversation's tools applies, said truly and the same everywhere.

wisp-memory-tool.txt: context.memory "applies from the next conversation". A conversation's tools
are settled when it is opened (:func:`wisp.core.session.settle`), so ``/config set context.memory
on`` and ``wisp config set context.memory true`` say so in one sentence
(:data:`wisp.core.config.TOOLS_APPLY`), and what it says happens: ``wisp ask --continue`` and
``--resume`` open an existing conversation again with the new tools, one started with ``--tool``
keeps its list, and a running conversation keeps the tools it was opened with (the TUI's side is
in tests/tui/test_memory_setting_tui.py). Real ``wisp`` processes against a fake endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.commands import run_command
from wisp.core.config import TOOLS_APPLY
from wisp.core.session import Session, SessionOptions

WISP = str(Path(sys.executable).parent / "wisp")


def wisp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, input="", timeout=60,
                          env=os.environ.copy())


def tools_sent(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def conversations() -> list[dict]:
    return json.loads(wisp("conversations", "--json").stdout)["conversations"]


@pytest.mark.parametrize("key, typed, shown", [("context.memory", "on", "true"),
                                                ("tools.enabled", '["read_file","memory"]', '["read_file", "memory"]')])
async def test_chat_and_the_command_line_say_the_same_sentence(ollama_home, tmp_path: Path, key: str, typed: str,
                                                               shown: str) -> None:
    r = wisp("config", "set", key, typed)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{key} = {shown}", TOOLS_APPLY]
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        result = await run_command(s, f"/config set {key} {typed}")
    assert result.text == f"Set `{key}` = `{shown}`. {TOOLS_APPLY}"
    assert "next request" not in result.text


async def test_a_key_read_on_every_request_still_says_so(ollama_home, tmp_path: Path) -> None:
    r = wisp("config", "set", "context.recent_turns", "2")
    assert r.stdout.splitlines() == ["context.recent_turns = 2"]
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        result = await run_command(s, "/config set context.recent_turns 3")
    assert result.text == "Set `context.recent_turns` = `3`. It applies from the next request."


def test_wisp_ask_continue_and_resume_take_the_change_in_an_existing_conversation(ollama_home, tmp_path) -> None:
    home, srv = ollama_home
    assert wisp("ask", "one", cwd=tmp_path).returncode == 0
    assert "memory" not in tools_sent(srv.chat_bodies[-1])
    assert wisp("config", "set", "context.memory", "true").returncode == 0
    r = wisp("ask", "two", "--continue", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "memory" in tools_sent(srv.chat_bodies[-1])
    (conv,) = conversations()
    assert conv["turn_count"] == 2  # the same conversation, opened again
    assert wisp("config", "set", "context.memory", "false").returncode == 0
    assert wisp("ask", "three", "--resume", str(conv["id"]), cwd=tmp_path).returncode == 0
    assert "memory" not in tools_sent(srv.chat_bodies[-1])
    assert conversations()[0]["turn_count"] == 3


def test_a_conversation_whose_tools_were_named_keeps_them(ollama_home, tmp_path) -> None:
    home, srv = ollama_home
    assert wisp("ask", "one", "--tool", "read_file", cwd=tmp_path).returncode == 0
    assert wisp("config", "set", "context.memory", "true").returncode == 0
    assert wisp("ask", "two", "--continue", cwd=tmp_path).returncode == 0
    assert tools_sent(srv.chat_bodies[-1]) == ["read_file"]


async def test_an_open_conversation_keeps_its_tools_and_the_next_one_has_the_change(ollama_home, tmp_path) -> None:
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        await run_command(s, "/config set context.memory on")
        [e async for e in s.run_turn("hello")]
        assert "memory" not in tools_sent(srv.chat_bodies[-1])
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:  # /new, or wisp again
        assert await s.connect()
        [e async for e in s.run_turn("hello again")]
        assert "memory" in tools_sent(srv.chat_bodies[-1])
