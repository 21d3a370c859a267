"""A small MCP server over streamable HTTP on 127.0.0.1, written with the SDK's
own server API (issue 15): ``python tests/support/mcp_http_server.py PORT``.
Its one tool, ``whoami`` (read-only), answers with the Authorization header it got."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("wisp-http-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> str:
    """Say which Authorization header the request carried."""
    request = ctx.request_context.request
    return f"authorization={request.headers.get('authorization') if request is not None else None}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
