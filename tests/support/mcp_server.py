"""A small real MCP server for the tests, written with the SDK's own server
API (``mcp.server.mcpserver.MCPServer``) and served over stdio (issue 15).

Tools: ``status`` (read-only: ``readOnlyHint: true``), ``write_note`` (acts:
writes a file in its working directory), ``crash`` (the process exits at
once, mid-call), ``slow`` (answers after ``seconds``), ``picture`` (an image
and a text block).

Run as ``python -m tests.support.mcp_server PIDFILE``: it starts a child
process (``sleep``) and writes ``SERVER_PID CHILD_PID`` to PIDFILE, so a test
can check both are gone after wisp exits. ``WISP_TEST_SECRET`` in its
environment is reported by ``status`` (so a test can see it was not passed on).
"""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

server = MCPServer("wisp-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def status(verbose: bool = False) -> str:
    """Report the test repository's status (reads only)."""
    secret = os.environ.get("WISP_TEST_SECRET", "absent")
    extra = f" cwd={os.getcwd()} secret={secret} marker={os.environ.get('WISP_TEST_MARKER', 'none')}" \
        if verbose else ""
    return f"status: clean, 3 files tracked{extra}"


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write a note file in the working directory (acts)."""
    with open(os.path.join(os.getcwd(), name), "w") as fh:
        fh.write(text)
    return f"wrote {len(text)} characters to {name}"


@server.tool()
def crash() -> str:
    """Exit at once, in the middle of the call."""
    os._exit(7)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await anyio.sleep(seconds)
    return "finally"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> list:
    """An image and a caption."""
    return [Image(data=b"\x89PNG" + b"\x00" * 96, format="png"), "a tiny picture"]


def main() -> None:
    # the child keeps the server's stdout open, as a real server's helpers do: wisp must still
    # notice the server's own exit, and end the child when it stops the server
    child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write(f"{os.getpid()} {child.pid}")
    print("wisp-test MCP server starting", file=sys.stderr)
    server.run()


if __name__ == "__main__":
    main()
