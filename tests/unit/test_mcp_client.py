"""wisp as an MCP client (issue 15), against a real MCP server started over stdio
(tests/support/mcp_server.py, written with the SDK's own server API) and the fake
Ollama endpoint on 127.0.0.1, which calls its tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.commands import run_command
from wisp.core.context.inspect import inspect_context
from wisp.core.session import Session, SessionError, SessionOptions
from tests.support.fakes import reply, text, tool_call
from tests.support.mcp_helpers import add_config, pids, server_entry
from tests.support.processes import alive, wait_gone

WISP = str(Path(sys.executable).parent / "wisp")


def call_turn(name: str, arguments: dict | None = None, after: str = "Done.") -> list[dict]:
    return [reply(tool_call(name, arguments or {}), finish="tool_calls"), reply(text(after))]


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


@pytest.fixture
def mcp_home(ollama_home, tmp_path: Path):
    home, srv = ollama_home
    pidfile = tmp_path / "server.pids"
    # trusted: its read-only tools run without asking (an untrusted server's word is not taken:
    # tests/unit/test_mcp_hostile.py)
    add_config(home, {"mcpServers": {"t": server_entry(pidfile, trust=True)}})
    return home, srv, pidfile


async def test_read_only_runs_the_acting_tool_is_refused_without_anyone_to_ask(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    srv.push(*call_turn("mcp__t__status", {"verbose": True}, "It is clean."),
             *call_turn("mcp__t__write_note", {"name": "n.txt", "text": "hi"}, "Could not."))
    session = await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t"], transport="ask"))
    try:
        assert [n for n in session.tools.names if n.startswith("mcp__t__")] == [
            "mcp__t__status", "mcp__t__write_note", "mcp__t__crash", "mcp__t__slow", "mcp__t__picture"]
        assert await session.connect()
        first = await run(session, "status?")
        result = next(e for e in first if isinstance(e, ev.ToolResult))
        assert result.ok and result.content.startswith("status: clean, 3 files tracked")
        assert f"cwd={tmp_path.resolve()}" in result.content  # the server runs in the conversation's directory
        second = await run(session, "write a note")
        refused = next(e for e in second if isinstance(e, ev.ToolResult))
        assert not refused.ok and "was not run" in refused.content and "tools.mcp.allow" in refused.content
        assert refused.meta["approval"]["choice"] == "needs_approval"
        assert not (tmp_path / "n.txt").exists()
        assert [e.state for e in second if isinstance(e, ev.TurnEnded)] == ["done"]
        # the schemas went to the model with every request
        names = [t["function"]["name"] for t in srv.chat_bodies[0]["tools"]]
        assert "mcp__t__status" in names and "mcp__t__write_note" in names
        # the results are stored entries, and references once their turn has ended
        entries = await session.store.entries(session.conversation_id)
        stored = [e for e in entries if e.kind == "tool_result"]
        assert [e.tool_name for e in stored] == ["mcp__t__status", "mcp__t__write_note"]
        report = await inspect_context(session.context, session.conversation_id)
        sent = json.dumps(report.messages)
        assert f"output of entry {stored[0].number} not repeated: mcp__t__status" in sent
        assert "call mcp__t__status again" in sent  # read only: the model may call it again
        assert "status: clean, 3 files tracked cwd" not in sent
        server, child = pids(pidfile)
        assert alive(server) and alive(child)
    finally:
        await session.close()
    assert wait_gone([server, child]) == []  # the server and its child end with the session


async def test_the_allow_list_lets_an_acting_tool_run_and_audits_it(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    add_config(home, {"tools": {"mcp": {"allow": ["mcp__t__write_note"]}}})
    srv.push(*call_turn("mcp__t__write_note", {"name": "n.txt", "text": "hello"}))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t__write_note"],
                                                 transport="ask")) as session:
        assert session.tools.names == ["mcp__t__write_note"]
        assert await session.connect()
        items = await run(session, "write it")
    result = next(e for e in items if isinstance(e, ev.ToolResult))
    assert result.ok and result.meta["approval"] == {"allowed": True, "choice": "allow_list", "source": "config",
                                                      "prefix": "mcp__t__write_note"}
    assert (tmp_path / "n.txt").read_text() == "hello"
    audit = [json.loads(line) for f in sorted((home / "data").rglob("audit-*.jsonl"))
             for line in f.read_text().splitlines() if line.strip()]
    approval = [e["payload"] for e in audit if e["kind"] == "approval"]
    assert approval and approval[0]["server"] == "t" and approval[0]["arguments"] == {"name": "n.txt", "text": "hello"}
    assert [e["payload"]["tool_name"] for e in audit if e["kind"] == "tool.result"] == ["mcp__t__write_note"]


async def test_a_server_crashing_mid_call_is_a_clear_tool_result_and_the_turn_goes_on(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    add_config(home, {"tools": {"mcp": {"allow": ["mcp__t"]}}})
    srv.push(reply(tool_call("mcp__t__crash", {}), finish="tool_calls"),
             reply(tool_call("mcp__t__status", {}), finish="tool_calls"), reply(text("Recovered.")))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t"], transport="ask")) as session:
        assert await session.connect()
        items = await run(session, "crash it")
        first_pids = pids(pidfile)
    results = [e for e in items if isinstance(e, ev.ToolResult)]
    assert not results[0].ok
    assert "MCP server t exited during the call to crash" in results[0].content
    assert "goes on" in results[0].content
    failed = [e for e in items if isinstance(e, ev.McpServerFailed)]
    assert [f.server for f in failed] == ["t"]
    assert results[1].ok and results[1].content.startswith("status: clean")  # started again for the next call
    assert [e.state for e in items if isinstance(e, ev.TurnEnded)] == ["done"]
    assert any(isinstance(e, ev.ReplyRecorded) and e.text == "Recovered." for e in items)
    assert wait_gone(first_pids) == []


async def test_a_call_that_takes_too_long_times_out(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    add_config(home, {"tools": {"mcp": {"timeout_s": 0.5}}})
    srv.push(*call_turn("mcp__t__slow", {"seconds": 30}))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t__slow"], transport="ask")) as session:
        assert await session.connect()
        items = await run(session, "wait")
    result = next(e for e in items if isinstance(e, ev.ToolResult))
    assert not result.ok and "did not answer slow within 0.5 s" in result.content
    assert any(isinstance(e, ev.McpServerFailed) for e in items)


async def test_other_content_is_named_with_its_size(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    srv.push(*call_turn("mcp__t__picture"))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t__picture"], transport="ask")) as s:
        assert await s.connect()
        items = await run(s, "draw")
    result = next(e for e in items if isinstance(e, ev.ToolResult))
    assert result.content == "[image/png image, 100 bytes; not shown]\na tiny picture"
    assert result.meta["content"] == {"image": 1, "text": 1}


async def test_a_missing_server_gives_the_model_a_clear_result(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    add_config(home, {"mcpServers": {"gone": {"command": "wisp-no-such-mcp-server"}}})
    srv.push(*call_turn("mcp__gone__lookup", {"q": "x"}))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__gone__lookup"],
                                                 transport="ask")) as session:
        assert any("wisp-no-such-mcp-server" in p and "not found" in p for p in session.startup_problems)
        assert session.tools.names == ["mcp__gone__lookup"]
        assert await session.connect()
        items = await run(session, "look it up")
    result = next(e for e in items if isinstance(e, ev.ToolResult))
    assert not result.ok and "the command 'wisp-no-such-mcp-server' is not found" in result.content
    assert [e.server for e in items if isinstance(e, ev.McpServerFailed)] == ["gone"]
    assert [e.state for e in items if isinstance(e, ev.TurnEnded)] == ["done"]


async def test_an_unknown_server_stops_the_session_like_an_unknown_tool(ollama_home, tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="mcp__nope__x.*names the MCP server 'nope'"):
        await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__nope__x"]))


async def test_the_server_gets_no_secrets_only_what_env_names(mcp_home, tmp_path: Path, monkeypatch) -> None:
    home, srv, pidfile = mcp_home
    monkeypatch.setenv("WISP_TEST_SECRET", "hunter2")
    monkeypatch.setenv("MY_MARKER", "from-wisp")
    add_config(home, {"mcpServers": {"t": server_entry(pidfile, trust=True, env={"WISP_TEST_MARKER": "${MY_MARKER}!"})}})
    srv.push(*call_turn("mcp__t__status", {"verbose": True}))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t__status"], transport="ask")) as s:
        assert await s.connect()
        items = await run(s, "status")
    result = next(e for e in items if isinstance(e, ev.ToolResult))
    assert "secret=absent" in result.content and "marker=from-wisp!" in result.content


async def test_tools_lists_mcp_tools_with_their_cost_and_the_cache_defers_the_start(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t"], transport="ask")) as session:
        result = await run_command(session, "/tools")
        rows = {r["name"]: r for r in result.data["tools"]}
        assert rows["mcp__t__status"]["read_only"] and not rows["mcp__t__write_note"]["read_only"]
        assert rows["mcp__t__write_note"]["tokens"] > 0
        assert "`mcp__t__write_note` | acts (asks first)" in result.text
    first = pids(pidfile)
    assert wait_gone(first) == []
    pidfile.unlink()
    # the tool list is cached: the next session has the tools without starting the server
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__t"], transport="ask")) as session:
        assert "mcp__t__status" in session.tools.names
        assert not pidfile.exists()
        srv.push(*call_turn("mcp__t__status"))
        assert await session.connect()
        items = await run(session, "status")
        assert next(e for e in items if isinstance(e, ev.ToolResult)).ok
        assert pidfile.exists()  # started by the call


def test_wisp_ask_refuses_then_runs_when_allowed_and_the_server_is_gone_after(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    srv.push(reply(tool_call("mcp__t__status", {}), tool_call("mcp__t__write_note", {"name": "a.txt", "text": "x"}),
                   finish="tool_calls"), reply(text("ok")))
    r = subprocess.run([WISP, "ask", "--tool", "mcp__t", "go"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "wisp: not run, it needs approval: t: write_note" in r.stderr
    assert "wisp config set tools.mcp.allow '[\"mcp__t__write_note\"]'" in r.stderr
    assert not (tmp_path / "a.txt").exists()
    assert wait_gone(pids(pidfile)) == []  # wisp exited: the server and its child are gone
    add_config(home, {"tools": {"mcp": {"allow": ["mcp__t__write_note"]}}})
    srv.push(reply(tool_call("mcp__t__write_note", {"name": "a.txt", "text": "x"}), finish="tool_calls"),
             reply(text("ok")))
    r = subprocess.run([WISP, "ask", "--tool", "mcp__t", "go"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a.txt").read_text() == "x"
    assert wait_gone(pids(pidfile)) == []


def test_wisp_mcp_list_shows_servers_states_and_tools(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    add_config(home, {"mcpServers": {"t": server_entry(pidfile, trust=True), "gone": {"command": "wisp-no-such-mcp-server"},
                                     "off": {"command": "x", "disabled": True}}})
    r = subprocess.run([WISP, "mcp", "list", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr  # a server failed
    rows = {row["name"]: row for row in json.loads(r.stdout)["servers"]}
    assert rows["t"]["state"] == "running"
    assert {t["name"]: t["read_only"] for t in rows["t"]["tools"]}["mcp__t__status"] is True
    assert rows["gone"]["state"] == "failed" and "not found" in rows["gone"]["error"]
    assert rows["off"]["state"] == "disabled"
    assert wait_gone(pids(pidfile)) == []
    r = subprocess.run([WISP, "mcp", "list"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "mcp__t__write_note" in r.stdout and "acts, asks first" in r.stdout and "gone  (stdio" in r.stdout


def test_a_bad_entry_is_a_config_error_naming_the_key(wisp_home: Path, tmp_path: Path) -> None:
    add_config(wisp_home, {"mcpServers": {"git": {"command": "uvx", "args": "mcp-server-git"}}})
    r = subprocess.run([WISP, "config", "list"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert 'mcpServers.git.args expects a list of strings, such as ["mcp-server-git"]; got "mcp-server-git"' in r.stderr


async def test_a_remote_server_over_streamable_http_gets_its_headers(ollama_home, tmp_path: Path, monkeypatch) -> None:
    import socket
    import time

    home, srv = ollama_home
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = Path(__file__).resolve().parent.parent / "support" / "mcp_http_server.py"
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # poll until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the HTTP MCP server did not start"
                time.sleep(0.05)
        monkeypatch.setenv("REMOTE_TOKEN", "t0ken")
        add_config(home, {"mcpServers": {"remote": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp",
                                                    "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
                                                    "trust": True}}})
        srv.push(*call_turn("mcp__remote__whoami"))
        async with await Session.open(SessionOptions(workdir=tmp_path, tools=["mcp__remote"],
                                                     transport="ask")) as session:
            assert session.tools.names == ["mcp__remote__whoami"]
            assert await session.connect()
            items = await run(session, "who am I?")
        result = next(e for e in items if isinstance(e, ev.ToolResult))
        assert result.ok and result.content == "authorization=Bearer t0ken"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_mcp_tools_are_chosen_like_any_tool_in_agents_md_and_config(mcp_home, tmp_path: Path) -> None:
    home, srv, pidfile = mcp_home
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text('# Project\n\ntools: ["read_file", "mcp__t__status"]\n')
    async with await Session.open(SessionOptions(workdir=project, transport="ask")) as session:
        assert session.tool_choice.source == "AGENTS.md"
        assert session.tools.names == ["read_file", "mcp__t__status"]
    add_config(home, {"tools": {"enabled": ["mcp__t__picture", "system_info"]}})
    async with await Session.open(SessionOptions(workdir=tmp_path, transport="ask")) as session:
        assert session.tool_choice.source == "config"
        assert session.tools.names == ["system_info", "mcp__t__picture"]  # wisp's own first, then the servers'
