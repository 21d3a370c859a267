"""``wisp mcp serve``: wisp as an MCP server over stdio (issue 15, "wisp as an MCP server").

Another agent or an editor hands work to wisp and its layered context with
two tools, served by the official SDK's ``MCPServer``:

- ``respond(prompt, task?, conversation?)`` runs one turn in a wisp
  conversation (a new one, or ``conversation``), with its facts, running
  summary, memory and tools, and returns the reply with the conversation
  id. A ``task`` (``THE TASK; objective: …``) is recorded as the
  conversation's task with method ``caller``, ranked as the person's, so the
  model's ``task`` verb never replaces it (wisp-memory-tool.txt, "task").
  No person is there to ask: tools that act follow the allow lists, as in
  ``wisp ask`` (the session has no ``ask``). The session's transport is
  ``mcp``, so episodic capture records the exchange as such.
- ``inspect_context(conversation?)`` returns what ``wisp inspect context
  --json`` prints for that conversation (the last one by default), and
  makes no model request: the session is opened, never connected.

The server is scoped to one workspace: a conversation whose working
directory is not ``scope`` (``--workdir``, default the current directory)
or beneath it is refused by both tools with one line saying so, because a
caller handed one project must not read another's files through
``inspect_context`` or run commands in its directory through ``respond``.
``wisp mcp serve --all-workspaces`` (``scope`` ``None``) serves every
conversation.

Sessions are opened through ``open_session`` (handed in by the command
line, so this module does not reach up to the session) and kept, one per
conversation, until the server stops; turns of one conversation run one at
a time.
"""

# No ``from __future__ import annotations`` here: the SDK reads the tools'
# annotations to make their schemas, and they name types imported lazily.
import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

from .. import events as ev
from ..context.facts import FactError
from ..context.inspect import inspect_context

__all__ = ["WispMcp", "OpenSession"]

#: ``open_session(conversation, continue_last)``: an open session of that
#: conversation (``None``: a new one; with ``continue_last`` the newest).
#: Raises the session's error for an unknown conversation.
OpenSession = Callable[[int | None, bool], Awaitable[Any]]


class WispMcp:
    """The tools ``wisp mcp serve`` offers, over sessions from ``open_session``.
    ``scope``: the workspace whose conversations (its directory and those
    beneath it) are served; ``None`` serves every conversation."""

    def __init__(self, open_session: OpenSession, scope: Path | None = None) -> None:
        self._open = open_session
        self.scope = Path(scope).resolve() if scope is not None else None
        self._sessions: dict[int, Any] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def in_scope(self, workdir: Any) -> bool:
        """Whether a conversation of ``workdir`` (a path) is this server's to serve."""
        if self.scope is None:
            return True
        try:
            where = Path(workdir).resolve()
        except (TypeError, ValueError, OSError):
            return False
        return where == self.scope or self.scope in where.parents

    async def _open_scoped(self, conversation: int | None, continue_last: bool) -> Any:
        """Open a session; a conversation outside the scope is closed again
        and refused with ``ValueError`` (one line: whose it is, and the flag)."""
        session = await self._open(conversation, continue_last)
        if session.conversation_id is not None and not self.in_scope(session.workdir):
            await session.close()
            raise ValueError(
                f"conversation {session.conversation_id} belongs to {session.workdir}, outside this server's "
                f"workspace {self.scope}; this server serves only that workspace's conversations (start "
                "wisp mcp serve with --all-workspaces to serve every one)")
        return session

    async def _session(self, conversation: int | None) -> Any:
        if conversation is not None and conversation in self._sessions:
            return self._sessions[conversation]
        session = await self._open_scoped(conversation, False)
        if session.conversation_id is not None:
            self._remember(session)
        return session

    def _remember(self, session: Any) -> None:
        old = self._sessions.get(session.conversation_id)
        if old is not None and old is not session:
            return
        self._sessions[session.conversation_id] = session
        self._locks.setdefault(session.conversation_id, asyncio.Lock())

    async def respond(self, prompt: str, task: str | None = None, conversation: int | None = None) -> dict[str, Any]:
        """Run one turn; returns ``{"reply", "conversation", "turn", "state",
        "error", "tools"}`` (``tools``: the tool calls' names, in order;
        ``error``: one line, or ``None``). Raises ``ValueError`` for an
        empty prompt, an unreadable task, an unknown conversation or no endpoint."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty")
        try:
            session = await self._session(conversation)
        except Exception as exc:  # SessionError and its kin: one line back to the caller
            raise ValueError(str(exc)) from None
        if session.endpoint is None and not await session.connect():
            if session.conversation_id not in self._sessions:
                await session.close()
            raise ValueError(f"no model endpoint: {session.endpoint_error}")
        conv = await session.ensure_conversation()
        self._remember(session)
        async with self._locks[conv]:
            if task is not None and task.strip():
                try:
                    turn = await session.store.count_turns(conv)
                    await session.context.tasks.set(conv, task, source="person", method="caller", turn=turn)
                except FactError as exc:
                    raise ValueError(f"{exc} (the task, as respond's task)") from None
            reply, state, error, turn_no, tools = "", "done", None, None, []
            async for item in session.run_turn(prompt):
                if isinstance(item, ev.TurnStarted):
                    turn_no = item.turn
                elif isinstance(item, ev.ReplyRecorded):
                    reply = item.text
                elif isinstance(item, ev.ToolCall):
                    tools.append(item.name)
                elif isinstance(item, ev.Error):
                    error = item.message
                elif isinstance(item, ev.TurnEnded):
                    state = item.state
        return {"reply": reply, "conversation": conv, "turn": turn_no, "state": state, "error": error,
                "tools": tools}

    async def inspect(self, conversation: int | None = None) -> dict[str, Any]:
        """What ``wisp inspect context --json`` prints for ``conversation``
        (the newest by default), composed without a model request. Raises
        ``ValueError`` for an unknown conversation or none stored."""
        if conversation is not None and conversation in self._sessions:
            session, opened = self._sessions[conversation], False
        else:
            try:
                session = await self._open_scoped(conversation, conversation is None)
            except Exception as exc:
                raise ValueError(str(exc)) from None
            opened = True
        try:
            if session.conversation_id is None:
                raise ValueError("no conversation is stored yet; start one with respond")
            report = await inspect_context(session.context, session.conversation_id)
            return report.to_dict()
        finally:
            if opened:
                await session.close()

    async def close(self) -> None:
        """Close every session (and so stop the MCP servers they started)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            try:
                await session.close()
            except Exception:
                pass

    def server(self) -> Any:
        """The SDK's ``MCPServer`` with the two tools."""
        from mcp.server.mcpserver import MCPServer
        from mcp.types import CallToolResult, TextContent, ToolAnnotations

        from .. import __version__

        # log_level WARNING: at the SDK's INFO, the root logger takes every library's INFO lines, and
        # httpx's name each request's URL (a password in model.endpoint's) on stderr
        server = MCPServer("wisp", version=__version__, log_level="WARNING", instructions=(
            "wisp runs turns of a local model's conversation with its layered context: facts, task, running "
            "summary, memory and tools. Call respond to hand it work, inspect_context to see what its model "
            "would be given."))

        def _error(text: str) -> CallToolResult:
            return CallToolResult(content=[TextContent(type="text", text=f"error: {text}")], is_error=True)

        @server.tool(name="respond", annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
        async def respond(prompt: str, task: str | None = None, conversation: int | None = None) -> CallToolResult:
            """Run one turn of a wisp conversation and return the reply and the conversation id.

            prompt: what to ask. task: pins the conversation's task, as "THE TASK; objective: WHAT DONE LOOKS
            LIKE"; the model cannot replace it. conversation: the id a previous respond returned, to go on.
            """
            try:
                out = await self.respond(prompt, task, conversation)
            except ValueError as exc:
                return _error(str(exc))
            text = out["reply"] or "(the model gave no reply)"
            if out["error"]:
                text += f"\n[error: {out['error']}]"
            text += f"\n[wisp conversation {out['conversation']}, turn {out['turn']}]"
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=out,
                                  is_error=out["state"] == "error")

        @server.tool(name="inspect_context", annotations=ToolAnnotations(read_only_hint=True))
        async def inspect_context_tool(conversation: int | None = None) -> CallToolResult:
            """What wisp's model would be given next in a conversation, layer by layer, as `wisp inspect
            context --json` prints it. Makes no model request. conversation: its id (default: the newest)."""
            try:
                report = await self.inspect(conversation)
            except ValueError as exc:
                return _error(str(exc))
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(report, ensure_ascii=False))],
                                  structured_content=report)

        return server

    async def serve_stdio(self) -> None:
        """Serve over this process's stdin and stdout until the client leaves."""
        try:
            await self.server().run_stdio_async()
        finally:
            await self.close()
