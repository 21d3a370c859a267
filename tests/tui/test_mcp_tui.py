"""Pilot tests of MCP tools in the TUI (issue 15): a real MCP server over stdio
(tests/support/mcp_server.py), the fake Ollama calling its tools. The read-only
tool runs without asking; the tool that acts asks first in the approval modal,
which shows the server, the tool and its arguments; a server that fails is named
in the status bar; the server is gone when wisp exits."""

from __future__ import annotations

import html
import json
from pathlib import Path

from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.screens import ApprovalScreen
from tests.support.fakes import reply, text, tool_call
from tests.support.mcp_helpers import add_config, pids, server_entry
from tests.support.pilot import SIZE, started, until
from tests.support.processes import wait_gone
from tests.tui.test_approval_tui import approval_events, modal, submit, turn_done


def call_turn(name: str, arguments: dict | None = None, after: str = "Done.") -> list[dict]:
    return [reply(tool_call(name, arguments or {}), finish="tool_calls"), reply(text(after))]


async def test_read_only_runs_and_the_acting_tool_asks_first(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    pidfile = tmp_path / "server.pids"
    add_config(home, {"mcpServers": {"t": server_entry(pidfile, trust=True)}})
    srv.push(*call_turn("mcp__t__status"),
             *call_turn("mcp__t__write_note", {"name": "n.txt", "text": "from the model"}),
             *call_turn("mcp__t__write_note", {"name": "m.txt", "text": "again"}))
    app = WispApp(SessionOptions(workdir=tmp_path, tools=["mcp__t"]))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "status?")
        await turn_done(pilot, app)
        assert not isinstance(app.screen, ApprovalScreen)  # read only: no question
        assert approval_events(home) == []
        await submit(pilot, app, "write a note")
        screen = await modal(pilot, app)
        shown = " ".join(str(w.render()) for w in screen.query("Static"))
        assert "MCP tool" in shown and "server t" in shown and "tool write_note" in shown
        assert '"name": "n.txt"' in shown and '"text": "from the model"' in shown
        assert str(tmp_path.resolve()) in shown
        svg = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "Always allow" in svg and "write_note" in svg
        await pilot.press("a")  # always, for this tool in this workspace
        await turn_done(pilot, app)
        assert (tmp_path / "n.txt").read_text() == "from the model"
        await submit(pilot, app, "and another")
        await turn_done(pilot, app)  # no modal: always allowed here
        assert (tmp_path / "m.txt").read_text() == "again"
        server = pids(pidfile)
        await pilot.press("ctrl+q")
    events = approval_events(home)
    assert [(e["choice"], e["source"], e["tool"], e["server"]) for e in events] == [
        ("always", "person", "mcp__t__write_note", "t"), ("allow_list", "workspace", "mcp__t__write_note", "t")]
    saved = json.loads((home / "approvals.json").read_text())
    assert [r["tool"] for r in saved["workspaces"][str(tmp_path.resolve())]] == ["mcp__t__write_note"]
    assert wait_gone(server) == []


async def test_a_failed_server_is_named_in_the_status_bar_and_the_chat_goes_on(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    add_config(home, {"mcpServers": {"gone": {"command": "wisp-no-such-mcp-server"}}})
    srv.push(*call_turn("mcp__gone__lookup", {}, "I could not look it up."))
    app = WispApp(SessionOptions(workdir=tmp_path, tools=["mcp__gone__lookup"]))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "look it up")
        await turn_done(pilot, app)
        assert "MCP server gone failed" in str(app.status.render())
        assert app.status.state == "ready"
        chat = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "I could not look it up." in chat and "wisp-no-such-mcp-server" in chat
