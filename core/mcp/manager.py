"""A session's MCP servers: which tools a conversation gets, starting servers
when they are needed, calling them, and stopping them all (issue 15).

How the tool list is known when the session builds its registry, while
servers start only when needed: :meth:`McpServers.tools_for` takes each
server the conversation names from the tool cache
(:class:`~wisp.core.mcp.cache.ToolCache`, filled by ``wisp mcp list`` and
every earlier start) when the cache holds a list for the server as it is
configured now; the server itself then starts at the conversation's first
call of one of its tools. Only a server the cache does not know is started
while the session opens, to list its tools. A session that names no MCP
tool starts nothing. The running server's own list is what a call is
checked against, and it refreshes the cache for the next session.

A server that cannot be listed leaves a one-line problem for the person;
the tools the conversation named one by one (``mcp__git__status``) stay,
and their calls tell the model the server is not there, so the
conversation goes on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..tool_names import mcp_parts

if TYPE_CHECKING:
    from ..mcp_config import ServerSpec
    from .cache import ToolCache
    from .connection import Connection, RemoteTool
    from .tools import McpTool

# The connections, the tools, the cache and the settings' parser are imported where a server is
# used: a session whose config names no MCP server loads none of them (issue 12, "wisp ask one turn").

__all__ = ["McpServers"]


class McpServers:
    """The MCP servers of one session.

    ``specs`` are config ``mcpServers`` (:func:`parse_mcp_servers`);
    ``config`` gives the timeouts and the output budget (read at each
    call); ``workdir`` is where a local server runs unless its entry says
    ``cwd``; ``cache`` the tool cache (``None``: none); ``log_dir`` where
    servers' stderr goes (``None``: nowhere)."""

    def __init__(self, specs: dict[str, ServerSpec], *, config: Any = None, workdir: Path | None = None,
                 cache: ToolCache | None = None, log_dir: Path | None = None) -> None:
        self.specs = dict(specs)
        self.config = config
        self.workdir = Path(workdir or Path.cwd())
        self.cache = cache
        self.log_dir = log_dir
        self.connections: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        #: One-line problems :meth:`tools_for` found, for the person.
        self.problems: list[str] = []

    @classmethod
    def from_config(cls, config: Any, workdir: Path | None = None) -> "McpServers":
        """The servers config ``mcpServers`` has, with the cache beside the
        config file and logs beside the database. A config whose entry is
        malformed has none (config validation has said why already). No
        ``mcpServers``: none, and no cache."""
        raw = config.get("mcpServers")
        if not raw:
            return cls({}, config=config, workdir=workdir)
        from ..mcp_config import McpConfigError, parse_mcp_servers
        from .cache import ToolCache

        try:
            specs = parse_mcp_servers(raw)
        except McpConfigError:
            specs = {}
        home = Path(config.path).parent
        return cls(specs, config=config, workdir=workdir, cache=ToolCache(home / "mcp-tools.json"),
                   log_dir=Path(config.db_path).parent / "mcp-logs")

    # -- settings ---------------------------------------------------------------

    def _setting(self, key: str, default: float) -> float:
        try:
            value = self.config.get(key) if self.config is not None else None
        except Exception:
            value = None
        return float(value) if value is not None else default

    def call_timeout(self) -> float:
        """Seconds a call may take (config ``tools.mcp.timeout_s``)."""
        return self._setting("tools.mcp.timeout_s", 60.0)

    def start_timeout(self) -> float:
        """Seconds a server may take to start and list (``tools.mcp.start_timeout_s``)."""
        return self._setting("tools.mcp.start_timeout_s", 30.0)

    def max_output_bytes(self) -> int:
        """Bytes of text kept from one result (``tools.mcp.max_output_bytes``)."""
        return int(self._setting("tools.mcp.max_output_bytes", 262144))

    # -- servers ---------------------------------------------------------------

    def connection(self, server: str) -> Connection:
        """The connection of ``server`` (made, not started). ``KeyError`` for an unknown one."""
        from .connection import Connection

        if server not in self.connections:
            self.connections[server] = Connection(self.specs[server], cwd=self.workdir, log_dir=self.log_dir,
                                                     max_output_bytes=self.max_output_bytes())
            self._locks[server] = asyncio.Lock()
        return self.connections[server]

    async def ensure(self, server: str) -> list[RemoteTool]:
        """Start ``server`` unless it runs; its live tools. Raises
        :class:`McpFailure`. Keeps the cache up to date."""
        from ..mcp_config import fingerprint
        from .connection import McpFailure

        if server not in self.specs:
            raise McpFailure("missing", server, f"MCP server {server} is not in config mcpServers")
        if self._closed:
            raise McpFailure("crashed", server, f"MCP server {server}: wisp is closing")
        conn = self.connection(server)
        async with self._locks[server]:
            if conn.state == "running":
                return conn.tools
            tools = await conn.start(self.start_timeout())
        if self.cache is not None:
            self.cache.put(server, fingerprint(self.specs[server]), tools)
        return tools

    async def live_tool(self, server: str, remote: str) -> RemoteTool:
        """``server``'s tool ``remote`` as the running server lists it,
        starting the server if need be. Raises :class:`McpFailure`
        (``no_tool`` when the server no longer has it)."""
        from .connection import McpFailure

        tools = await self.ensure(server)
        for tool in tools:
            if tool.name == remote:
                return tool
        have = ", ".join(t.name for t in tools) or "none"
        raise McpFailure("no_tool", server, f"MCP server {server} has no tool {remote!r} now (it has {have})")

    async def call(self, server: str, remote: str, arguments: dict[str, Any]) -> Any:
        """Call ``remote`` on ``server`` (started if need be) within config
        ``tools.mcp.timeout_s``; the SDK's ``CallToolResult``. Raises :class:`McpFailure`."""
        await self.ensure(server)
        return await self.connection(server).call(remote, arguments, self.call_timeout())

    async def close(self) -> None:
        """Stop every server this session started, with its children. Never raises."""
        self._closed = True
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)

    # -- the conversation's tools ----------------------------------------------

    async def _listing(self, server: str) -> tuple[list[RemoteTool] | None, str | None]:
        from ..mcp_config import fingerprint
        from .connection import McpFailure

        if self.cache is not None:
            cached = self.cache.get(server, fingerprint(self.specs[server]))
            if cached is not None:
                return cached, None
        try:
            return await self.ensure(server), None
        except McpFailure as failure:
            return None, str(failure)

    async def tools_for(self, names: Iterable[str]) -> tuple[list[McpTool], list[str]]:
        """The MCP tools for the tool list ``names`` (wisp's own names are
        skipped): ``mcp__SERVER`` gives all of a server's tools,
        ``mcp__SERVER__TOOL`` one. Returns the tools in the order named and
        one-line problems (a server that could not be listed, a tool a
        server does not have). Servers are listed at once, each from the
        cache when it can be."""
        wanted: dict[str, list[str | None]] = {}
        for name in names:
            parts = mcp_parts(name)
            if parts is not None and parts[0] in self.specs:
                wanted.setdefault(parts[0], []).append(name if parts[1] is not None else None)
        if not wanted:
            self.problems = []
            return [], []
        from .tools import McpTool, wisp_names

        listings = await asyncio.gather(*(self._listing(s) for s in wanted))
        tools: list[McpTool] = []
        problems: list[str] = []
        seen: set[str] = set()
        for (server, picks), (listing, problem) in zip(wanted.items(), listings):
            if listing is None:
                problems.append(f"{problem}; its tools are left out of this conversation"
                                if None in picks else f"{problem}; its tools say so when called")
                for pick in picks:
                    if pick is not None and pick not in seen:
                        seen.add(pick)
                        remote = pick.split("__", 2)[2]
                        tools.append(McpTool(self, server, pick, remote, None, problem))
                continue
            names_map = wisp_names(server, [t.name for t in listing])
            by_remote = {t.name: t for t in listing}
            chosen = list(names_map) if None in picks else [p for p in picks if p is not None]
            for wisp_name in chosen:
                if wisp_name in seen:
                    continue
                if wisp_name not in names_map:
                    have = ", ".join(names_map) or "none"
                    problems.append(f"MCP server {server} has no tool {wisp_name} (it has {have}); "
                                    "`wisp mcp list` shows them")
                    continue
                seen.add(wisp_name)
                remote = names_map[wisp_name]
                tools.append(McpTool(self, server, wisp_name, remote, by_remote[remote]))
        self.problems = list(problems)
        return tools, problems

    # -- views -------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """One dict per configured server: ``name``, ``transport``,
        ``where`` (command line or URL), ``state`` (``not started``,
        ``running``, ``failed``, ``stopped``), ``error``, ``pid`` and
        ``tools`` (the listed tools, from the running server or the cache:
        ``name`` as wisp names it, ``remote``, ``read_only`` (its
        ``readOnlyHint``: the server's claim), ``trusted`` (config trusts
        the server, so the claim is believed), ``description``)."""
        if not self.specs:
            return []
        from ..mcp_config import fingerprint
        from .tools import wisp_names

        rows = []
        for name, spec in self.specs.items():
            conn = self.connections.get(name)
            listing = conn.tools if conn is not None and conn.tools else (
                self.cache.get(name, fingerprint(spec)) if self.cache is not None else None) or []
            names_map = wisp_names(name, [t.name for t in listing])
            by_remote = {t.name: t for t in listing}
            rows.append({
                "name": name, "transport": spec.transport, "where": spec.where,
                "state": conn.state if conn is not None else "not started",
                "error": conn.error if conn is not None else None,
                "pid": conn.pid if conn is not None else None,
                "tools": [{"name": w, "remote": r, "read_only": by_remote[r].read_only,
                           "trusted": getattr(spec, "trust", False) is True,
                           "description": by_remote[r].description} for w, r in names_map.items()],
            })
        return rows
