"""`wisp mcp serve` driven by the official SDK's own client over stdio (issue 15,
"wisp as an MCP server"), against the fake Ollama endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.fakes import reply, text, tool_call
from tests.support.mcp_helpers import add_config

WISP = str(Path(sys.executable).parent / "wisp")


@asynccontextmanager
async def served(home: Path, workdir: Path, *extra: str) -> AsyncIterator[Client]:
    env = {k: os.environ[k] for k in ("WISP_HOME", "HOME", "XDG_DATA_HOME", "PATH") if k in os.environ}
    params = StdioServerParameters(command=WISP, args=["mcp", "serve", "--workdir", str(workdir), *extra], env=env)
    with open(workdir / "serve.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


def exchanges(home: Path) -> list[tuple]:
    dbs = sorted(home.parent.rglob("wisp.db"))
    with sqlite3.connect(dbs[0]) as db:
        return db.execute("SELECT transport FROM episode_exchanges ORDER BY id").fetchall()


async def test_respond_returns_the_reply_and_a_second_respond_continues(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply(text("Hello from the model.")))
    async with served(home, tmp_path) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"respond", "inspect_context"}
        first = await client.call_tool("respond", {"prompt": "hi there"})
        assert not first.is_error
        out = first.structured_content
        assert out["reply"] == "Hello from the model." and out["turn"] == 1 and out["state"] == "done"
        assert first.content[0].text.startswith("Hello from the model.")
        assert f"wisp conversation {out['conversation']}" in first.content[0].text
        second = await client.call_tool("respond", {"prompt": "and again", "conversation": out["conversation"]})
        assert second.structured_content["conversation"] == out["conversation"]
        assert second.structured_content["turn"] == 2
        assert second.structured_content["reply"] == "You said: and again"
        # the second request carried the first turn: the conversation went on
        sent = json.dumps(srv.chat_bodies[-1]["messages"])
        assert "hi there" in sent and "Hello from the model." in sent
        bad = await client.call_tool("respond", {"prompt": "x", "conversation": 999})
        assert bad.is_error and "no conversation 999" in bad.content[0].text
    assert [row[0] for row in exchanges(home)] == ["mcp", "mcp"]  # episodic capture: transport mcp


async def test_a_task_given_is_pinned_against_the_models_task_verb(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    add_config(home, {"context": {"memory": True}})
    srv.push(reply(tool_call("memory", {"request": "task rewrite everything; objective: it is new"}),
                   finish="tool_calls"), reply(text("Understood.")))
    async with served(home, tmp_path) as client:
        out = (await client.call_tool("respond", {"prompt": "please help",
                                                  "task": "fix the CI build; objective: the tests pass"}
                                      )).structured_content
        assert out["tools"] == ["memory"] and out["reply"] == "Understood."
        report = (await client.call_tool("inspect_context", {"conversation": out["conversation"]})).structured_content
    results = [json.dumps(m) for m in srv.chat_bodies[1]["messages"] if m.get("role") == "tool"]
    assert any("a caller set the task, and it stays: fix the CI build; objective: the tests pass" in r
               for r in results)
    messages = report["request"]["messages"]
    assert "fix the CI build; objective: the tests pass" in json.dumps(messages)
    assert "rewrite everything" not in json.dumps([m for m in messages if m.get("role") == "system"])


async def test_inspect_context_makes_no_model_request(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with served(home, tmp_path) as client:
        empty = await client.call_tool("inspect_context", {})
        assert empty.is_error and "no conversation is stored yet" in empty.content[0].text
        conv = (await client.call_tool("respond", {"prompt": "remember this"})).structured_content["conversation"]
        asked = len(srv.requests)  # every request the endpoint saw, chat or not
        result = await client.call_tool("inspect_context", {"conversation": conv})
        latest = await client.call_tool("inspect_context", {})
        assert len(srv.requests) == asked
    report = result.structured_content
    assert {"layers", "request", "conversation"} <= set(report) and report["conversation"] == conv
    assert "remember this" in json.dumps(report["request"]["messages"])
    assert latest.structured_content["request"] == report["request"]
    assert json.loads(result.content[0].text) == report


async def test_a_server_serves_only_its_workspaces_conversations(ollama_home, tmp_path: Path) -> None:
    """--workdir A: another workspace's conversation is refused by both tools (its files are not read,
    no turn runs in its directory); A's own, and one beneath A, are served; --all-workspaces serves B."""
    home, srv = ollama_home
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    (b / "secret.txt").write_text("B-ONLY-CONTENT\n")
    async with served(home, b) as client:
        conv_b = (await client.call_tool("respond", {"prompt": "read secret.txt"})).structured_content["conversation"]
    async with served(home, a / "sub") as client:
        conv_sub = (await client.call_tool("respond", {"prompt": "in sub"})).structured_content["conversation"]
    requests = len(srv.chat_bodies)
    async with served(home, a) as client:
        seen = await client.call_tool("inspect_context", {"conversation": conv_b})
        assert seen.is_error and f"conversation {conv_b} belongs to {b}" in seen.content[0].text
        assert "--all-workspaces" in seen.content[0].text and "B-ONLY-CONTENT" not in seen.content[0].text
        ran = await client.call_tool("respond", {"prompt": "run something", "conversation": conv_b})
        assert ran.is_error and f"conversation {conv_b} belongs to {b}" in ran.content[0].text
        assert len(srv.chat_bodies) == requests  # no turn ran in B
        below = await client.call_tool("inspect_context", {"conversation": conv_sub})
        assert not below.is_error
        mine = await client.call_tool("respond", {"prompt": "hello A"})
        assert not mine.is_error and mine.structured_content["conversation"] not in (conv_b, conv_sub)
    async with served(home, a, "--all-workspaces") as client:
        wide = await client.call_tool("inspect_context", {"conversation": conv_b})
        assert not wide.is_error and wide.structured_content["conversation"] == conv_b
