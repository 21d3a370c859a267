"""MCP both ways (issue 15), on the official Python SDK (the ``mcp`` package).

As a client: config ``mcpServers`` (:mod:`wisp.core.mcp_config`) names the
servers; :class:`McpServers` gives a conversation their tools as
``mcp__SERVER__TOOL`` (:class:`McpTool`), starts each server when it is
needed, calls it, and stops them all with the session. As a server:
``wisp mcp serve`` (:mod:`wisp.core.mcp.serve`) offers ``respond`` and
``inspect_context`` over stdio. ``wisp mcp list`` and ``wisp mcp serve``
are parsed in :mod:`wisp.core.mcp.cli`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import Connection, McpFailure, RemoteTool
    from .content import render_result
    from .manager import McpServers
    from .tools import McpTool, describe_call, wisp_names

#: Where each name lives: a name loads its module when it is first used (PEP 562), so a session
#: with no MCP server imports the manager alone (issue 12, "wisp ask one turn").
_WHERE = {"Connection": "connection", "McpFailure": "connection", "RemoteTool": "connection",
          "render_result": "content", "McpServers": "manager", "McpTool": "tools", "describe_call": "tools",
          "wisp_names": "tools"}

__all__ = ["Connection", "McpFailure", "RemoteTool", "McpServers", "McpTool", "describe_call", "wisp_names",
           "render_result"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
