"""MCP both ways (issue 15), on the official Python SDK (the ``mcp`` package).

As a client: config ``mcpServers`` (:mod:`wisp.core.mcp_config`) names the
servers; :class:`McpServers` gives a conversation their tools as
``mcp__SERVER__TOOL`` (:class:`McpTool`), starts each server when it is
needed, calls it, and stops them all with the session. As a server:
``wisp mcp serve`` (:mod:`wisp.core.mcp.serve`) offers ``respond`` and
``inspect_context`` over stdio. ``wisp mcp list`` and ``wisp mcp serve``
are parsed in :mod:`wisp.core.mcp.cli`.
"""

from .connection import Connection, McpFailure, RemoteTool
from .content import render_result
from .manager import McpServers
from .tools import McpTool, describe_call, wisp_names

__all__ = ["Connection", "McpFailure", "RemoteTool", "McpServers", "McpTool", "describe_call", "wisp_names",
           "render_result"]
