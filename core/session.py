"""One open wisp session: config, store, audit log, endpoint, tools and agent.

The TUI and ``wisp ask`` both open a :class:`Session`, so they share one
path from settings to a running agent. Opening never needs the endpoint:
:meth:`Session.connect` resolves it separately and reports a failure as a
message instead of raising, so wisp still opens with nothing answering
(issue "wisp runs end to end", "Embedded default").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from . import events as ev
from .agent import Agent, AgentSettings
from .audit import AuditLog
from .config import Config
from .model import base as mb
from .model.resolve import EndpointSettings, resolve_endpoint
from .tool_modes import apply_tool_mode
from .store import Store
from .agents_md import load_agents_md
from .tools import ToolRegistry, build_registry
from .tools.approval import Approvals, WorkspaceAllowList
from .toolset import choose_tools

DEFAULT_CONTEXT_WINDOW = 4096  # tokens, when neither config nor endpoint says


@dataclass
class SessionOptions:
    """How a session starts. ``resume`` is a conversation id; ``continue_last``
    reopens the newest; ``tools`` is an explicit tool list (``--tool``), which
    is exactly that list; ``transport`` is ``tui`` or ``ask``."""

    workdir: Path = field(default_factory=Path.cwd)
    continue_last: bool = False
    resume: int | None = None
    tools: list[str] | None = None
    transport: str = "tui"


class SessionError(Exception):
    """A session could not open: a bad config, an unknown conversation or tool.
    The message is one line saying what to do."""


class Session:
    """An open session. Use ``async with await Session.open(options)`` or call
    :meth:`close`. Attributes: ``config``, ``store``, ``audit``, ``agent``,
    ``conversation_id`` (None until the first turn of a new conversation),
    ``endpoint_label``, ``model_name``, ``endpoint_error`` (str or None),
    ``tool_choice`` (which tools and from where), ``project_instructions``
    (AGENTS.md's text, or None), ``startup_problems`` and ``approvals``
    (the :class:`~wisp.core.tools.approval.Approvals`; the TUI sets its
    ``ask``)."""

    def __init__(self, options: SessionOptions, config: Config, store: Store, audit: AuditLog):
        self.options = options
        self.config = config
        self.store = store
        self.audit = audit
        self.workdir = Path(options.workdir).resolve()
        self.conversation_id: int | None = None
        #: True when the tool list is the one the resumed conversation was started with.
        self.tools_kept = False
        self.endpoint: mb.Endpoint | None = None
        self.endpoint_label = "not connected"
        self.model_name = ""
        self.endpoint_error: str | None = None
        self.context_window: int | None = None
        self._resolved: Any = None
        registry = self._load_project()
        self.agent = Agent(
            store=store, audit=audit, endpoint=None, tools=registry, workdir=self.workdir,
            config=config,
            settings=AgentSettings(max_steps=int(config.get("agent.max_steps")),
                                   think=str(config.get("model.think"))),
        )
        # Tools that act ask first; AGENTS.md's instructions reach the model (issue "Tools that act").
        self.approvals = Approvals(config, audit, WorkspaceAllowList(Path(config.path).parent / "approvals.json"),
                                   ask=None, transport=options.transport)
        self.agent.approver = self.approvals
        self.agent.project_instructions = self.project_instructions
        # The layered context composes every request (issue "Layered context").
        from .context.manager import ContextManager
        self.context = ContextManager(self)
        self.context.install(self.agent)
        if "memory" in self.tool_names:  # the model's memory tool reads this session's record (issue "The memory tool")
            from .memory.tool import attach_memory
            attach_memory(self)
        # Episodic memory: every exchange is captured (issue "Episodic memory").
        from .episodes.capture import install_capture
        install_capture(self)

    def _load_project(self) -> ToolRegistry:
        """Read the working directory's AGENTS.md and choose the tools: sets
        ``agents_md``, ``tool_choice``, ``tool_names``, ``project_instructions``
        (AGENTS.md without its tools line, or None) and ``startup_problems``
        (one-line warnings to show). Raises :class:`SessionError` for an
        unknown tool or an unreadable tools line (issue "Tools that act")."""
        try:
            self.agents_md = load_agents_md(self.workdir)
            self.tool_choice = choose_tools(self.options.tools, self.agents_md, self.config)
            if (self.tool_choice.source == "config" and self.config.get("context.memory")
                    and "memory" not in self.tool_choice.names):
                # context.memory on: a conversation given every tool gets memory too; an
                # explicit list (--tool, AGENTS.md) is exactly that list (issue "The memory tool")
                self.tool_choice.names.append("memory")
                self.tool_choice.detail += " and context.memory"
            registry = build_registry(self.tool_choice.names)
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        self.tool_names = self.tool_choice.names
        self.project_instructions = self.agents_md.instructions if self.agents_md else None
        self.startup_problems = list(self.agents_md.problems) if self.agents_md else []
        return registry

    @classmethod
    async def open(cls, options: SessionOptions, config: Config | None = None) -> "Session":
        """Load the config, open the store and the audit log, and pick the
        conversation (``--continue``/``--resume``). Raises :class:`SessionError`
        (and :class:`wisp.core.config.ConfigError` for a bad config file)."""
        config = config or Config.load()
        store = await Store.open(config.db_path)
        await store.recover_open_turns()
        audit = AuditLog(config.audit_dir, enabled=bool(config.get("audit.enabled")),
                         max_bytes=int(config.get("audit.max_bytes")), keep=int(config.get("audit.keep")))
        try:
            session = cls(options, config, store, audit)
            if options.resume is not None:
                conv = await store.get_conversation(options.resume)
                if conv is None:
                    raise SessionError(f"no conversation {options.resume}; "
                                       "`wisp conversations` lists them")
                session.conversation_id = conv.id
            elif options.continue_last:
                conv = await store.last_conversation()
                if conv is not None:
                    session.conversation_id = conv.id
        except BaseException:
            await store.close()
            raise
        if session.conversation_id is not None:
            conv = await store.get_conversation(session.conversation_id)
            if options.tools is None:  # a conversation started with --tool keeps exactly that list
                kept = await store.conversation_tools(session.conversation_id)
                if kept is not None:
                    session.options.tools = kept
                    session.tools_kept = True
            if conv is not None and (conv.workdir or session.tools_kept):
                session.workdir = Path(conv.workdir or session.workdir)
                session.agent.workdir = session.workdir
                try:  # the conversation's own directory has its own AGENTS.md
                    session.agent.tools = session._load_project()
                except SessionError:
                    await store.close()
                    raise
                session.agent.project_instructions = session.project_instructions
                if session.tools_kept:
                    session.tool_choice.detail = "--tool, kept by the conversation"
        return session

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def endpoint_settings(self) -> EndpointSettings:
        """The endpoint settings from config ``model.*`` (and the data dir, where the
        shared embedded server keeps its files)."""
        return EndpointSettings.from_config(self.config)

    async def connect(self, on_status: Callable[[str], Any] | None = None) -> bool:
        """Resolve the endpoint (which may start the embedded server) and the
        context window (config ``model.context_window``, else what the endpoint
        says, else the embedded server's ``n_ctx``, else 4,096 tokens).
        ``on_status`` gets a short line before slow steps. Returns False and
        sets ``endpoint_error`` on failure; never raises an endpoint error."""
        try:
            resolved = await resolve_endpoint(self.endpoint_settings(), on_status=on_status)
        except mb.EndpointError as exc:
            self.endpoint_error = str(exc)
            self.endpoint_label = "no endpoint"
            return False
        self._resolved = resolved
        # tools reach the model natively or by the prompted protocol (issue 10)
        self.endpoint = apply_tool_mode(resolved.endpoint, self.config.get("model.tool_mode"))
        self.endpoint_label = resolved.label
        self.model_name = resolved.endpoint.model
        # the embedded server's n_ctx wins: it cannot take more (issue 10)
        window = resolved.context_window or self.config.get("model.context_window")
        if window is None:
            try:
                window = await resolved.endpoint.context_length()
            except mb.EndpointError:
                window = None
        self.context_window = int(window or DEFAULT_CONTEXT_WINDOW)
        self.agent.endpoint = self.endpoint
        self.agent.settings.context_window = self.context_window
        self.endpoint_error = None
        return True

    async def ensure_conversation(self) -> int:
        """The current conversation's id, creating it on first use."""
        if self.conversation_id is None:
            conv = await self.store.create_conversation(
                str(self.workdir), model=self.model_name or None,
                endpoint=self.endpoint_label if self.endpoint else None)
            self.conversation_id = conv.id
            if self.tool_choice.source == "command line":
                await self.store.set_conversation_tools(conv.id, list(self.tool_choice.names))
            self.audit.write("conversation.created", {"workdir": str(self.workdir),
                                                      "transport": self.options.transport},
                             conversation=conv.id)
        return self.conversation_id

    async def run_turn(self, prompt: str) -> AsyncIterator[Any]:
        """Run one turn in the current conversation (see :meth:`Agent.run_turn`).

        Settings (``agent.max_steps``, ``model.think``) are read afresh, so a
        ``/config set`` applies from this turn. A conversation whose turn
        another live wisp process is running gets an ``Error`` event of kind
        ``busy`` and no turn: two processes would interleave their turns.
        """
        conversation = await self.ensure_conversation()
        self.agent.settings.max_steps = int(self.config.get("agent.max_steps"))
        self.agent.settings.think = str(self.config.get("model.think"))
        if self.endpoint is not None:
            apply_tool_mode(self.endpoint, self.config.get("model.tool_mode"))
        owner = await self.store.running_elsewhere(conversation)
        if owner is not None:
            yield ev.Error("busy", f"Conversation {conversation} has a turn running in another wisp "
                                   f"(process {owner.rpartition(':')[2]}); wait for it to end, or start a "
                                   "new conversation.")
            return
        if await self.store.count_turns(conversation) == 0:
            await self.store.set_conversation_title(conversation, _title(prompt))
        async for item in self.agent.run_turn(conversation, prompt):
            yield item
        await self.store.touch_conversation(conversation)

    async def close(self) -> None:
        """Close the endpoint's client, stop an embedded server, close the store."""
        if self.endpoint is not None:
            try:
                await self.endpoint.aclose()
            except Exception:
                pass
        if self._resolved is not None and getattr(self._resolved, "embedded", None) is not None:
            await self._resolved.embedded.stop()
        await self.store.close()


def _title(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line[:60] + ("…" if len(line) > 60 else "")


def api_key_from_env(name: str | None) -> str | None:
    """The API key from the environment variable ``name`` (never stored)."""
    return os.environ.get(name) if name else None
