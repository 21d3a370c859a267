"""One connection to one MCP server, on the official SDK's ``mcp.Client``.

The SDK's client is an async context manager whose task groups must be
entered and left by the same task, while wisp calls tools from whichever
task runs the turn and closes from whichever closes the session. So each
connection has a task of its own that holds the client open (enters it,
lists the tools, waits to be told to stop, leaves it); calls are made on the
held client from the caller's task, which the SDK allows.

Rules (issue 15, "MCP both ways", "Lifecycle"):

- A local server runs as ``command args…`` in its own process group, in the
  conversation's directory unless config gives ``cwd``, with only
  :data:`wisp.core.mcp_config.SAFE_ENV` of wisp's environment and what
  ``env`` names. Its stderr goes to ``<data dir>/mcp-logs/SERVER.log``
  (mode 0600), never to the terminal, rotated at a bounded size
  (:mod:`wisp.core.mcp.stderr_log`).
- Stopping closes its stdin, waits, then ends its process group (the SDK's
  shutdown, the protocol's order); then any process still carrying this
  connection's mark in its environment (a child that outlived the server,
  or left its group) is ended too, on systems with ``/proc``.
- A server that exits during a call is noticed by its pid, even when a
  child still holds its stdout open, so the call ends at once.
- Every failure is an :class:`McpFailure` with a one-line message the model
  and the person can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..processes import pid_alive
from ..redact import taken_secrets
from ..mcp_config import SAFE_ENV, HttpServer, MissingVariable, ServerSpec, StdioServer, expand_env

__all__ = ["McpFailure", "RemoteTool", "Connection", "OWNER_VARIABLE"]

#: The variable that marks a server's processes as this connection's.
OWNER_VARIABLE = "WISP_MCP_OWNER"
#: The most pages of ``tools/list`` read from one server.
MAX_PAGES = 50
#: The most tools taken from one server.
MAX_TOOLS = 256
#: Seconds the SDK's own shutdown may take before the connection's task is cancelled.
STOP_GRACE_S = 8.0


class McpFailure(Exception):
    """A server could not do what was asked. ``kind``: ``missing`` (the
    command is not found), ``start`` (it did not start or list its tools),
    ``crashed`` (it exited), ``timeout``, ``malformed`` (it sent what the
    protocol does not allow), ``refused`` (it answered with a JSON-RPC
    error: the server is fine, the call was not), ``too_large`` (its answer
    was over the cap on one message, and dropped unread), ``no_tool``. ``server``
    names it; the message is one line. :attr:`server_failed` is true for
    the kinds after which the server is not usable (the status bar says so)."""

    def __init__(self, kind: str, server: str, message: str) -> None:
        super().__init__(" ".join(message.split()))
        self.kind = kind
        self.server = server

    @property
    def server_failed(self) -> bool:
        return self.kind in ("missing", "start", "crashed", "timeout", "malformed")


@dataclass(frozen=True)
class RemoteTool:
    """A tool as its server lists it: ``name`` (the server's), ``description``,
    ``input_schema`` (JSON schema of the arguments), ``read_only`` (its
    annotations say ``readOnlyHint: true``) and ``title``."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool = False
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the tool cache stores it."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "readOnlyHint": self.read_only, "title": self.title}

    @classmethod
    def from_dict(cls, data: Any) -> "RemoteTool | None":
        """From :meth:`to_dict`'s shape or a server's ``tools/list`` entry
        (camelCase or the SDK's snake_case); ``None`` when it is not a tool."""
        if not isinstance(data, dict):
            return None
        name = data.get("name")
        if not isinstance(name, str) or not name or len(name) > 256:
            return None
        schema = data.get("inputSchema", data.get("input_schema"))
        if not isinstance(schema, dict):
            schema = {"type": "object", "properties": {}}
        schema = dict(schema)
        schema.pop("$schema", None)
        schema["type"] = "object"  # both chat APIs want an object's schema
        if not isinstance(schema.get("properties"), dict):
            schema["properties"] = {}
        notes = data.get("annotations") if isinstance(data.get("annotations"), dict) else {}
        read_only = data.get("readOnlyHint", notes.get("readOnlyHint", notes.get("read_only_hint")))
        description = data.get("description")
        title = data.get("title")
        return cls(name, description if isinstance(description, str) else "", schema, read_only is True,
                   title if isinstance(title, str) else None)


def _line(exc: BaseException) -> str:
    """One line for ``exc``: the first exception inside a group (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def marked_processes(mark: str) -> list[int]:
    """The pids whose environment holds ``WISP_MCP_OWNER=mark`` (Linux's
    ``/proc``; empty elsewhere). Only this user's processes can be read."""
    needle = f"{OWNER_VARIABLE}={mark}".encode()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def _end_marked(mark: str, grace_s: float = 2.0) -> None:
    """SIGTERM every process carrying ``mark``, then SIGKILL those left after ``grace_s``."""
    import time

    pids = [p for p in marked_processes(mark) if p != os.getpid()]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if pid_alive(p)]
        if pids:
            time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def stdio_environment(spec: StdioServer, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a stdio server starts with: :data:`SAFE_ENV` of
    ``environ`` (wisp's), then ``spec.env`` with ``${NAME}`` filled in from
    ``environ`` (and from the keys wisp took out of its environment when it
    read them, :func:`wisp.core.redact.taken_secrets`: config may hand one on
    by name). Nothing else of wisp's environment is passed on. Raises
    :class:`MissingVariable` for a ``${NAME}`` not set."""
    source = dict(os.environ if environ is None else environ)
    env = {k: source[k] for k in SAFE_ENV if k in source and not source[k].startswith("()")}
    named = {**taken_secrets(), **source} if environ is None else source
    for name, value in spec.env:
        env[name] = expand_env(value, named)
    return env


class Connection:
    """One server: started by :meth:`start`, called by :meth:`call`, ended by
    :meth:`stop`. ``state`` is ``stopped``, ``starting``, ``running`` or
    ``failed`` (``error`` says why); ``tools`` the listed
    :class:`RemoteTool` s; ``pid`` the local server's process (``None`` for
    a remote one, or where ``/proc`` is missing)."""

    def __init__(self, spec: ServerSpec, *, cwd: Path, log_dir: Path | None = None,
                 max_output_bytes: int = 262144) -> None:
        self.spec = spec
        #: ``tools.mcp.max_output_bytes``: one message from a server, local or
        #: remote, is read up to :func:`~wisp.core.mcp.bounded.message_cap_for` of it.
        self.max_output_bytes = int(max_output_bytes)
        self.cwd = cwd
        self.log_dir = log_dir
        self.state = "stopped"
        self.error: str | None = None
        self.tools: list[RemoteTool] = []
        self.pid: int | None = None
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._mark = ""
        self._log: Any = None  # the StderrLog of a local server's stderr
        self._devnull: Any = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def log_path(self) -> Path | None:
        return self.log_dir / f"{self.name}.log" if self.log_dir is not None else None

    def _fail(self, kind: str, message: str) -> McpFailure:
        self.state, self.error = "failed", message
        return McpFailure(kind, self.name, message)

    def _last_log_line(self) -> str:
        path = self.log_path
        if path is None:
            return ""
        try:
            lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return f" (the last line of its log: {lines[-1][:200]})" if lines else ""

    def _transport(self) -> tuple[Any, Any]:
        """The SDK transport to enter, and an HTTP client to close (or ``None``)."""
        spec = self.spec
        if isinstance(spec, StdioServer):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            env = stdio_environment(spec)
            self._mark = f"{os.getpid()}-{secrets.token_hex(6)}"
            env[OWNER_VARIABLE] = self._mark
            command = os.path.expanduser(spec.command)
            if shutil.which(command, path=env.get("PATH")) is None:
                raise self._fail("missing", f"MCP server {self.name}: the command {spec.command!r} is not found "
                                            "(check mcpServers." + self.name + ".command and PATH)")
            cwd = Path(os.path.expanduser(spec.cwd)) if spec.cwd else self.cwd
            if not cwd.is_dir():
                raise self._fail("missing", f"MCP server {self.name}: its directory {cwd} does not exist")
            if self.log_dir is not None:
                from .stderr_log import StderrLog

                self.log_dir.mkdir(parents=True, exist_ok=True)
                self._log = StderrLog(self.log_path)  # type: ignore[arg-type]
                errlog = self._log.writer
            else:
                self._log = None
                self._devnull = errlog = open(os.devnull, "w")
            params = StdioServerParameters(command=command, args=list(spec.args), env=env, cwd=str(cwd),
                                           encoding_error_handler="replace")
            return stdio_client(params, errlog=errlog), None
        assert isinstance(spec, HttpServer)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from .bounded import SSE_EVENT_SLACK, bounded_http_client, message_cap_for

        headers = {k: expand_env(v, {**taken_secrets(), **os.environ}) for k, v in spec.headers}
        # one answer is read up to the cap a local server's is (bounded.CappedBody), its events too
        cap = message_cap_for(self.max_output_bytes)
        http = bounded_http_client(cap, headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        return streamable_http_client(spec.url, http_client=http, max_sse_event_size=cap + SSE_EVENT_SLACK), http

    async def start(self, timeout_s: float) -> list[RemoteTool]:
        """Start the server and list its tools, within ``timeout_s`` seconds.
        Returns the tools; raises :class:`McpFailure` (``missing``,
        ``start``, ``timeout``, ``malformed``), leaving nothing running."""
        if self.state == "running":
            return self.tools
        self.state, self.error, self.pid = "starting", None, None
        self._stop = asyncio.Event()
        try:
            transport, http = self._transport()
        except MissingVariable as exc:
            raise self._fail("start", f"MCP server {self.name}: its config names ${{{exc.args[0]}}}, which wisp's "
                                      "environment does not have; set it, or write the value in config") from None
        ready: asyncio.Future[list[RemoteTool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(transport, http, ready), name=f"mcp-{self.name}")
        try:
            tools = await asyncio.wait_for(asyncio.shield(ready), timeout_s)
        except asyncio.TimeoutError:
            await self.stop()
            raise self._fail("timeout", f"MCP server {self.name} did not start and list its tools within "
                                        f"{timeout_s:g} s (config tools.mcp.start_timeout_s){self._last_log_line()}") \
                from None
        except McpFailure as exc:
            await self.stop()
            self.state, self.error = "failed", str(exc)
            raise
        except asyncio.CancelledError:
            await self.stop()
            raise
        except Exception as exc:
            await self.stop()
            raise self._fail("start", f"MCP server {self.name} did not start: {_line(exc)}"
                                      f"{self._last_log_line()}") from None
        self.tools = tools
        self.state = "running"
        if self._log is not None:
            self._log.started()  # the server has its stderr: the pipe ends when it (and its children) do
        if isinstance(self.spec, StdioServer) and self._mark:
            found = await asyncio.to_thread(marked_processes, self._mark)
            mine = [p for p in found if _parent(p) == os.getpid()]  # the server; its children are its own
            self.pid = mine[0] if mine else None
        return tools

    async def _own(self, transport: Any, http: Any, ready: "asyncio.Future[list[RemoteTool]]") -> None:
        """The task that holds the SDK client open until :meth:`stop`."""
        from mcp import Client
        from mcp.types import Implementation
        from pydantic import ValidationError

        from .. import __version__

        from .bounded import MESSAGE_CAP, install, message_cap_for

        if http is None:  # a local server: its stdout is read through BoundedLines
            install()
            MESSAGE_CAP.set(message_cap_for(self.max_output_bytes))
        try:
            async with AsyncExitStack() as stack:
                if http is not None:
                    await stack.enter_async_context(http)
                client = await stack.enter_async_context(
                    Client(transport, client_info=Implementation(name="wisp", version=__version__), cache=None))
                try:
                    tools = await self._list(client)
                except ValidationError as exc:
                    raise McpFailure("malformed", self.name, f"MCP server {self.name} listed its tools in a form "
                                     f"the protocol does not allow: {_line(exc)}") from None
                self._client = client
                if not ready.done():
                    ready.set_result(tools)
                await self._stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(McpFailure("start", self.name, f"MCP server {self.name} was stopped "
                                                                   "while starting"))
            raise
        except BaseException as exc:  # the failure is the caller's to report, not this task's
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, McpFailure) else McpFailure(
                    "start", self.name, f"MCP server {self.name} did not start: {_line(exc)}"
                                        f"{self._last_log_line()}"))
        finally:
            self._client = None

    async def _list(self, client: Any) -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                remote = RemoteTool.from_dict(tool.model_dump(by_alias=True, exclude_none=True))
                if remote is not None and len(tools) < MAX_TOOLS:
                    tools.append(remote)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """Call ``tool`` with ``arguments``; returns the SDK's
        ``CallToolResult``. Raises :class:`McpFailure`: ``crashed`` when the
        server exits or the connection closes (the connection is then
        stopped, and the next call starts it again), ``timeout`` after
        ``timeout_s`` seconds (the call is abandoned, the server kept),
        ``malformed``, or ``refused`` for the server's JSON-RPC error."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        from .bounded import TOO_LARGE_CODE, message_cap_for

        client = self._client
        if client is None or self.state != "running":
            raise McpFailure("crashed", self.name, f"MCP server {self.name} is not running")
        call = asyncio.ensure_future(client.call_tool(tool, arguments, read_timeout_seconds=timeout_s))
        watch = asyncio.ensure_future(self._watch_exit()) if self.pid else None
        waiting = {call} | ({watch} if watch else set())
        try:
            done, _ = await asyncio.wait(waiting, timeout=timeout_s + 1.0, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            if watch is not None:
                watch.cancel()
        if call not in done:
            call.cancel()
            if watch is not None and watch in done:
                await self.stop()
                raise self._fail("crashed", f"MCP server {self.name} exited during the call to {tool}; it is "
                                            f"started again at the next call{self._last_log_line()}")
            raise McpFailure("timeout", self.name, f"MCP server {self.name} did not answer {tool} within "
                                                   f"{timeout_s:g} s (config tools.mcp.timeout_s); the call was "
                                                   "abandoned")
        try:
            return call.result()
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                await self.stop()
                raise self._fail("crashed", f"MCP server {self.name} closed the connection during the call to "
                                            f"{tool}; it is started again at the next call"
                                            f"{self._last_log_line()}") from None
            if exc.code == TOO_LARGE_CODE:
                data = exc.data if isinstance(exc.data, dict) else {}
                size, cap = data.get("bytes"), data.get("cap", message_cap_for(self.max_output_bytes))
                said = (f" of {'more than ' if data.get('more') else ''}{size:,} bytes" if isinstance(size, int)
                        else "")
                raise McpFailure("too_large", self.name, f"MCP server {self.name} answered {tool} with a message"
                                 f"{said}, too big: wisp reads at most {cap:,} bytes of one (4 × config "
                                 f"tools.mcp.max_output_bytes = {self.max_output_bytes:,}, at least 16 MB) and "
                                 "dropped it unread. Ask the tool for less, or raise tools.mcp.max_output_bytes"
                                 ) from None
            if exc.code == REQUEST_TIMEOUT:
                raise McpFailure("timeout", self.name, f"MCP server {self.name} did not answer {tool} within "
                                                       f"{timeout_s:g} s (config tools.mcp.timeout_s)") from None
            raise McpFailure("refused", self.name, f"MCP server {self.name} refused {tool}: {_line(exc)}") from None
        except ValidationError as exc:
            raise McpFailure("malformed", self.name, f"MCP server {self.name} answered {tool} in a form the "
                                                     f"protocol does not allow: {_line(exc)}") from None
        except (TimeoutError, asyncio.TimeoutError):
            raise McpFailure("timeout", self.name, f"MCP server {self.name} did not answer {tool} within "
                                                   f"{timeout_s:g} s (config tools.mcp.timeout_s)") from None
        except Exception as exc:
            raise McpFailure("malformed", self.name, f"MCP server {self.name} failed on {tool}: "
                                                     f"{type(exc).__name__}: {_line(exc)}") from None

    async def _watch_exit(self) -> None:
        """Return when the server's process has exited (polled: the SDK owns the process)."""
        assert self.pid is not None
        while pid_alive(self.pid):
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Stop the server and its children; never raises. Safe to call twice."""
        task, self._task = self._task, None
        self._stop.set()
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
            if task not in done:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if self._mark:
            await asyncio.to_thread(_end_marked, self._mark)
        if self._log is not None:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(self._log.close)
            self._log = None
        if self._devnull is not None:
            with contextlib.suppress(OSError):
                self._devnull.close()
            self._devnull = None
        self._client = None
        self.pid = None
        if self.state in ("running", "starting"):
            self.state = "stopped"
