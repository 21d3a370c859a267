"""``wisp mcp list [--json]`` and ``wisp mcp serve`` (issue 15).

``wisp mcp list`` starts every server config ``mcpServers`` has (at once,
each within ``tools.mcp.start_timeout_s``), shows its state and its tools
(as conversations name them, read only or acting), keeps the lists in the
tool cache, and stops them all. Exit 0, or 2 when a server failed.
``wisp mcp serve`` serves :class:`~wisp.core.mcp.serve.WispMcp` over stdio,
scoped to ``--workdir``'s conversations unless ``--all-workspaces``;
the command line hands in how a session opens, so this module does not
reach up to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ..config import Config
from .manager import McpServers
from .serve import OpenSession, WispMcp

__all__ = ["add_mcp_parser", "list_servers", "run_mcp"]


def add_mcp_parser(sub: Any) -> None:
    """Add ``mcp list`` and ``mcp serve`` to the subcommands ``sub``."""
    mcp = sub.add_parser("mcp", help="MCP servers: list them, or serve wisp over MCP")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", metavar="list|serve", parser_class=type(mcp))
    lst = mcp_sub.add_parser("list", help="each configured MCP server, its state and its tools")
    lst.add_argument("--json", action="store_true")
    srv = mcp_sub.add_parser("serve", help="serve wisp over MCP on stdio (tools: respond, inspect_context)")
    srv.add_argument("--workdir", type=Path, default=None,
                     help="the working directory of new conversations (default: the current one)")
    srv.add_argument("--all-workspaces", action="store_true",
                     help="serve the conversations of every working directory (default: only --workdir's "
                          "and those beneath it)")
    srv.add_argument("--tool", action="append", metavar="NAME", dest="tools", default=None,
                     help="give new conversations exactly these tools (repeatable)")


async def list_servers(config: Config, workdir: Path) -> list[dict[str, Any]]:
    """Start every configured server, list it, stop it: the rows of
    :meth:`McpServers.status`, plus ``disabled`` entries."""
    servers = McpServers.from_config(config, workdir)
    try:
        await asyncio.gather(*(servers.ensure(name) for name in servers.specs), return_exceptions=True)
        rows = servers.status()
    finally:
        await servers.close()
    raw = config.get("mcpServers") or {}
    for name, entry in raw.items():
        if name not in servers.specs and isinstance(entry, dict) and entry.get("disabled") is True:
            rows.append({"name": name, "transport": "http" if "url" in entry else "stdio",
                         "where": entry.get("url") or entry.get("command"), "state": "disabled", "error": None,
                         "pid": None, "tools": []})
    return rows


def _print_rows(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print('No MCP servers are configured. Add one under "mcpServers" in config.json, such as '
              '{"git": {"command": "uvx", "args": ["mcp-server-git"]}}.')
        return
    for row in rows:
        state = row["state"]
        if state == "running" or (state == "stopped" and row["tools"]):
            state = f"ok, {len(row['tools'])} tool{'s' if len(row['tools']) != 1 else ''}"
        elif state == "failed":
            state = f"failed: {row['error']}"
        print(f"{row['name']}  ({row['transport']}: {row['where']})  {state}")
        for tool in row["tools"]:
            kind = ("read only" if tool.get("trusted") else "says read only, asks first") \
                if tool["read_only"] else "acts, asks first"
            text = " ".join((tool["description"] or "").split())
            text = text if len(text) <= 70 else text[:69] + "…"
            print(f"  {tool['name']:<40} {kind:<17} {text}")


#: The libraries whose INFO lines name request URLs (a URL's password, a token in a query) or
#: every request: ``wisp mcp serve`` keeps them at WARNING, whatever the SDK sets the root logger to.
QUIET_LOGGERS = ("mcp", "httpx", "httpcore", "httpx2", "uvicorn", "uvicorn.access", "uvicorn.error", "sse_starlette")


def quiet_libraries() -> None:
    """Set :data:`QUIET_LOGGERS` to WARNING (what ``wisp mcp serve`` logs on stderr)."""
    import logging

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def run_mcp(args: argparse.Namespace, open_session: OpenSession) -> int:
    """Run ``wisp mcp list`` or ``wisp mcp serve``; returns the exit code."""
    sub = getattr(args, "mcp_command", None)
    if sub == "list":
        config = Config.load()
        rows = asyncio.run(list_servers(config, Path.cwd()))
        if args.json:
            print(json.dumps({"servers": rows}, ensure_ascii=False, indent=2))
        else:
            _print_rows(rows)
        return 2 if any(r["state"] == "failed" for r in rows) else 0
    if sub == "serve":
        Config.load()  # a bad config stops here, with its one line, before serving
        quiet_libraries()
        scope = None if getattr(args, "all_workspaces", False) else (getattr(args, "workdir", None) or Path.cwd())
        asyncio.run(WispMcp(open_session, scope=scope).serve_stdio())
        return 0
    print("wisp: error: say what to do: wisp mcp list, or wisp mcp serve", file=sys.stderr)
    return 2
