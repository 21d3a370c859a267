"""MCP servers' tools as wisp tools: ``mcp__SERVER__TOOL`` (issue 15, "Tools").

:func:`wisp_names` turns a server's tool names into names both chat APIs
take (``^[a-zA-Z0-9_-]{1,64}$``): characters outside the set become ``_``,
a name too long is cut and given a short digest, and two tools that come
out the same are told apart by a number. :class:`McpTool` is such a tool in
a conversation's registry; it is an ordinary tool (its calls and results
are entries and audit events like any other), and:

- a tool whose annotations say ``readOnlyHint: true`` runs as read_file
  does, without asking, only when config trusts its server
  (``mcpServers.NAME.trust: true``): an annotation is the server's claim,
  and a hostile server marks a tool that deletes files read only;
- any other asks first through the session's approvals, as run_command
  does (:class:`wisp.core.tools.approval.Approvals`): the person in the
  TUI, or config ``tools.mcp.allow`` in ``wisp ask`` and ``wisp mcp
  serve``;
- what the server answers, or why it could not, is the tool result
  (:mod:`wisp.core.mcp.content`); a server that is missing, crashed, timed
  out or answered out of protocol puts ``mcp_failure`` in the result's
  meta, which the session turns into a
  :class:`~wisp.core.events.McpServerFailed` event for the status bar.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..tool_names import MAX_TOOL_NAME, MCP_PREFIX
from ..tools.approval import ApprovalRequest
from ..tools.base import ToolContext, ToolResult
from .connection import McpFailure, RemoteTool
from .content import render_result

__all__ = ["McpTool", "wisp_names", "describe_call"]

_BAD = re.compile(r"[^A-Za-z0-9_-]")
#: The most characters of a server's description a tool keeps (its schema
#: goes with every request).
MAX_DESCRIPTION = 1024


def wisp_names(server: str, remote: list[str]) -> dict[str, str]:
    """``{wisp name: the server's name}`` for ``server``'s tools ``remote``,
    in order. Each wisp name is ``mcp__SERVER__TOOL``, at most
    :data:`~wisp.core.tool_names.MAX_TOOL_NAME` characters of letters,
    digits, ``_`` and ``-``, and unique; the same list always gives the
    same names."""
    head = f"{MCP_PREFIX}{server}__"
    room = MAX_TOOL_NAME - len(head)
    out: dict[str, str] = {}
    for name in remote:
        base = _BAD.sub("_", name) or "tool"
        if len(base) > room:
            digest = hashlib.sha256(name.encode()).hexdigest()[:6]
            base = base[: room - 7] + "_" + digest
        candidate, n = head + base, 2
        while candidate in out:
            suffix = f"_{n}"
            candidate = head + base[: room - len(suffix)] + suffix
            n += 1
        out[candidate] = name
    return out


def describe_call(server: str, tool: str, arguments: dict[str, Any]) -> str:
    """One line naming the call, as the approval's ``command`` and lists
    show it: ``git: commit {"message": "fix"}``."""
    try:
        args = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        args = str(arguments)
    return f"{server}: {tool} {args}"


class McpTool:
    """One MCP server's tool in a conversation, calling through ``servers``
    (the session's :class:`~wisp.core.mcp.manager.McpServers`). ``name`` is its wisp name;
    ``server`` and ``remote`` the server and the tool's own name;
    ``description`` and ``parameters`` as listed (from the cache or the
    running server); ``claims_read_only`` its ``readOnlyHint``, ``trusted``
    whether config trusts the server, ``read_only`` both. A tool made for a
    server that could not be listed (``remote_tool`` ``None``) takes any
    arguments, and its calls say why the server is not there."""

    def __init__(self, servers: Any, server: str, name: str, remote_name: str,
                 remote_tool: RemoteTool | None, problem: str | None = None) -> None:
        self.servers = servers
        self.server = server
        self.name = name
        self.remote = remote_name
        spec = getattr(servers, "specs", {}).get(server)
        self.trusted = getattr(spec, "trust", False) is True
        if remote_tool is not None:
            text = remote_tool.description or remote_tool.title or f"{remote_name} (MCP server {server})"
            self.description = text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"
            self.parameters: dict[str, Any] = remote_tool.input_schema
            self.claims_read_only = remote_tool.read_only
            self.read_only = remote_tool.read_only and self.trusted
        else:
            self.claims_read_only = False
            self.description = f"{remote_name} from MCP server {server}, which is not available: {problem or ''}"
            self.parameters = {"type": "object", "properties": {}, "additionalProperties": True}
            self.read_only = False

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Ask first unless read-only by a trusted server's word, call the
        server, render its answer. Never raises for a server's fault: the
        result says what happened."""
        meta: dict[str, Any] = {"mcp_server": self.server, "mcp_tool": self.remote}
        try:
            live = await self.servers.live_tool(self.server, self.remote)
        except McpFailure as failure:
            return self._failed(failure, meta)
        command = describe_call(self.server, self.remote, arguments)
        if not (live.read_only and self.trusted):
            meta["command"] = command
            acts = ("says it only reads, but its server is not trusted (mcpServers." + self.server + ".trust)"
                    if live.read_only else "acts")
            if ctx.approve is None:
                return ToolResult(f"error: {self.name} {acts}, and nothing here can approve it; it did not run",
                                  ok=False, meta=meta)
            approval = await ctx.approve(ApprovalRequest(
                tool=self.name, command=command, workdir=ctx.workdir, conversation_id=ctx.conversation_id,
                turn=ctx.turn, server=self.server, arguments=dict(arguments)))
            meta["approval"] = approval.to_dict()
            if not approval.allowed:
                if approval.choice == "needs_approval":
                    text = (f"error: {self.name} was not run: it {acts}, and no one is here to approve it. It "
                            f"runs here only when config tools.mcp.allow names {self.name} or "
                            f"mcp__{self.server}.")
                elif approval.choice == "stopped":
                    text = f"error: {self.name} was not run: the turn was stopped"
                else:
                    text = f"error: the person denied running {self.name}; it did not run"
                return ToolResult(text, ok=False, meta=meta)
        try:
            result = await self.servers.call(self.server, self.remote, arguments)
        except McpFailure as failure:
            return self._failed(failure, meta)
        rendered = render_result(result, self.servers.max_output_bytes())
        meta["content"] = rendered.kinds
        if not rendered.ok:
            return ToolResult(f"error: {self.server}'s {self.remote} says: {rendered.text}", ok=False, meta=meta)
        return ToolResult(rendered.text, ok=True, meta=meta)

    def _failed(self, failure: McpFailure, meta: dict[str, Any]) -> ToolResult:
        meta["mcp_error"] = failure.kind
        if failure.server_failed:
            meta["mcp_failure"] = str(failure)
        return ToolResult(f"error: {failure} The conversation goes on without this result.", ok=False, meta=meta)
