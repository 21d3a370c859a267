"""The names of the tools wisp has: a leaf, so that config validation can read
them without loading a tool (issue "One core, built once": "Validate config
against a leaf list of tool names"). Config validation and :func:`wisp.core.toolset.choose_tools` read it; :mod:`wisp.core.tools.registry` maps
each to its class, and a test checks the two agree.

It is also the one place of the rule for the names of MCP servers' tools
(issue 15, "MCP both ways"): a server's tools are named
``mcp__SERVER__TOOL``, the form Claude Code uses, and a conversation may
name ``mcp__SERVER`` for all of a server's tools. Every name fits both chat
APIs' limit, OpenAI's ``^[a-zA-Z0-9_-]{1,64}$`` (Ollama takes the same).
"""

from __future__ import annotations

import re
from typing import Collection

#: Every tool wisp has, in the order ``/tools`` and errors list them.
TOOL_NAMES: tuple[str, ...] = ("read_file", "system_info", "run_command", "edit_file", "memory")

#: What every MCP tool name begins with.
MCP_PREFIX = "mcp__"
#: The longest tool name both chat APIs accept (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).
MAX_TOOL_NAME = 64
#: The longest server name, so that ``mcp__SERVER__`` leaves at least 25
#: characters of a 64-character name for the tool.
MAX_SERVER_NAME = 32
#: A server name as config ``mcpServers`` may key it: letters, digits, ``-``
#: and single ``_`` between them (``__`` separates server from tool).
SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
#: A whole tool name as a chat API accepts it.
API_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def server_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an MCP server (``None`` when it can): it must
    be 1 to :data:`MAX_SERVER_NAME` characters of letters, digits, ``-`` and
    single ``_``, so that ``mcp__SERVER__TOOL`` is a name both chat APIs take."""
    if not isinstance(name, str) or not name:
        return "a server name must not be empty"
    if len(name) > MAX_SERVER_NAME:
        return f"the server name {name[:40]!r} is longer than {MAX_SERVER_NAME} characters"
    if not SERVER_NAME.match(name):
        return (f"the server name {name[:40]!r} may hold only letters, digits, - and single _ "
                "(rename it, such as \"my-server\")")
    return None


def mcp_parts(name: str) -> tuple[str, str | None] | None:
    """``mcp__git__status`` → ``("git", "status")``; ``mcp__git`` → ``("git",
    None)``; ``None`` for a name that is not of the MCP form (a wisp tool, or
    a malformed ``mcp__`` name)."""
    if not isinstance(name, str) or not name.startswith(MCP_PREFIX):
        return None
    rest = name[len(MCP_PREFIX):]
    server, sep, tool = rest.partition("__")
    if server_name_problem(server) is not None:
        return None
    if not sep:
        return server, None
    if not tool or not API_TOOL_NAME.match(name):
        return None
    return server, tool


def tool_name_problem(name: str, servers: Collection[str] | None = None) -> str | None:
    """Why ``name`` is not a tool a conversation can be given, or ``None``.

    A name is one of :data:`TOOL_NAMES`, or ``mcp__SERVER`` (all of a
    server's tools) or ``mcp__SERVER__TOOL`` (one of them). ``servers`` are
    the servers config ``mcpServers`` has; ``None`` skips that check (config
    validation of ``tools.enabled``, which does not see ``mcpServers``).
    Whether the server has that tool is known only once its tools are listed.
    """
    if name in TOOL_NAMES:
        return None
    parts = mcp_parts(name)
    if parts is None:
        if isinstance(name, str) and name.startswith(MCP_PREFIX):
            return (f"{name!r} is not an MCP tool name; write mcp__SERVER for all of a server's tools or "
                    "mcp__SERVER__TOOL for one")
        return f"{name!r} is not a wisp tool"
    if servers is not None and parts[0] not in servers:
        have = ", ".join(sorted(servers)) or "none"
        return f"{name!r} names the MCP server {parts[0]!r}, which config mcpServers does not have (it has {have})"
    return None
