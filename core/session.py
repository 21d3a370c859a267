"""One open wisp session: it settles its conversation first, then builds everything once.

The TUI, ``wisp ask`` and ``wisp inspect context`` all open a
:class:`Session`, so they share one path from settings to a running agent
(issue "One core, built once", "Session open resolves first, then builds
once"):

1. :meth:`Session.open` reads the config, opens the store and the audit log,
   and settles which conversation this is (new, ``--continue``,
   ``--resume``), its working directory and its tool list
   (:func:`settle`, giving a :class:`Plan`);
2. only then are the parts made, each once, each given what it needs when
   it is made: the model link and its side call, the model's notes, the
   tools (the memory tool with its binding), the layered context, the
   approvals, episodic capture and the agent. Nothing is re-bound or
   patched afterwards.

Opening never needs the endpoint: :meth:`Session.connect` resolves it
separately and reports a failure as a message instead of raising, so wisp
still opens with nothing answering (issue "wisp runs end to end",
"Embedded default").
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from . import events as ev
from .agent import Agent, AgentSettings
from .agents_md import AgentsMd, load_agents_md
from .audit import AuditLog
from .config import Config
from .context.composer import Room
from .context.manager import ContextManager
from .context.notes import ModelNotes
from .database import open_store
from .episodes.capture import Capture, Origin
from .episodes.refine import RefineReport, refine_with
from .mcp import McpServers
from .memory.verbs import MemoryBinding
from .model.link import ModelLink
from .model.sidecall import LinkSideCall
from .sidecall import SideCall
from .store import Store
from .tools.approval import Approvals, AskFunction, WorkspaceAllowList
from .tools.base import Tool
from .tools.registry import build_registry
from .tool_names import mcp_parts
from .toolset import ToolChoice, choose_tools

__all__ = ["Session", "SessionOptions", "SessionError", "Plan", "settle"]


@dataclass
class SessionOptions:
    """How a session starts. ``resume`` is a conversation id; ``continue_last``
    reopens the newest; ``tools`` is an explicit tool list (``--tool``), which
    is exactly that list; ``transport`` is ``tui``, ``ask`` or ``mcp``;
    ``ask`` is the person's answer to an approval (the TUI's modal; ``None``
    in ``wisp ask``, where only the allow list counts); ``channel``,
    ``thread`` and ``sender`` name the exchange's origin for episodic memory
    (``None``: the conversation, none, the local user). ``side_call`` is the
    :class:`~wisp.core.sidecall.SideCall` for wisp's own requests (``None``:
    the session's model, through its link; a test hands in a scripted one),
    and ``extra_tools`` are tools an embedding program gives beside the
    named ones (made already; they join the registry after them).
    ``continue_last`` takes the newest conversation of ``workdir``, or with
    ``continue_all`` the newest anywhere (issue 16, "The conversation of
    this directory"); ``model`` is a model for this session only (``wisp ask
    --model``), ``profile`` a profile of config ``profiles`` to use
    (``--profile``)."""

    workdir: Path = field(default_factory=Path.cwd)
    continue_last: bool = False
    continue_all: bool = False
    model: str | None = None
    profile: str | None = None
    resume: int | None = None
    tools: list[str] | None = None
    transport: str = "tui"
    ask: AskFunction | None = None
    channel: str | None = None
    thread: str | None = None
    sender: str | None = None
    side_call: SideCall | None = None
    extra_tools: tuple[Tool, ...] = ()


class SessionError(Exception):
    """A session could not open: a bad config, an unknown conversation or tool.
    The message is one line saying what to do."""


@dataclass(frozen=True)
class Plan:
    """What :func:`settle` decided before anything is built:
    ``conversation_id`` (``None`` for a new conversation, created at its
    first turn), ``workdir`` (the conversation's directory), ``agents_md``
    (its AGENTS.md, or ``None``), ``tool_choice`` (which tools and from
    where) and ``tools_kept`` (the list is the one the resumed conversation
    was started with by ``--tool``); ``note`` says which conversation
    ``--continue`` took and why, or ``None``."""

    conversation_id: int | None
    workdir: Path
    agents_md: AgentsMd | None
    tool_choice: ToolChoice
    tools_kept: bool = False
    note: str | None = None


async def settle(options: SessionOptions, config: Config, store: Store) -> Plan:
    """Settle the conversation, its working directory and its tools.

    ``--resume ID`` takes that conversation (:class:`SessionError` when there
    is none); ``--continue`` the newest of the working directory (with
    ``continue_all``, the newest anywhere; a new one when there is none, and
    :attr:`Plan.note` says which). A
    resumed conversation works in its own directory and keeps a tool list
    it was started with by ``--tool`` unless ``--tool`` is given again. The
    tools come from ``--tool``, else the directory's AGENTS.md ``tools:``
    line, else config ``tools.enabled`` (plus ``memory`` when
    ``context.memory`` is on): :func:`wisp.core.toolset.choose_tools`.
    Raises :class:`SessionError` for an unknown tool or an unreadable
    AGENTS.md tools line."""
    conversation = None
    note = None
    workdir = Path(options.workdir).resolve()
    if options.resume is not None:
        conversation = await store.get_conversation(options.resume)
        if conversation is None:
            raise SessionError(f"no conversation {options.resume}; `wisp conversations` lists them")
    elif options.continue_last:
        conversation = await store.last_conversation(None if options.continue_all else workdir)
        note = continue_note(conversation, workdir, options.continue_all)
    tools = options.tools
    kept = False
    if conversation is not None:
        if tools is None:  # a conversation started with --tool keeps exactly that list
            stored = await store.conversation_tools(conversation.id)
            if stored is not None:
                tools, kept = stored, True
        if conversation.workdir:
            workdir = Path(conversation.workdir)
    try:
        agents = load_agents_md(workdir)
        choice = choose_tools(tools, agents, config)
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    if kept:
        choice = ToolChoice(choice.names, choice.source, "--tool, kept by the conversation")
    elif choice.source == "config" and config.get("context.memory") and "memory" not in choice.names:
        # context.memory on: a conversation given every tool gets memory too; an
        # explicit list (--tool, AGENTS.md) is exactly that list (issue "The memory tool")
        choice = ToolChoice([*choice.names, "memory"], choice.source, choice.detail + " and context.memory")
    return Plan(conversation.id if conversation else None, workdir, agents, choice, kept, note)


def continue_note(conversation: Any, workdir: Path, everywhere: bool) -> str:
    """The line that says which conversation ``--continue`` took (issue 16)."""
    if conversation is None:
        if everywhere:
            return "No conversation is stored yet: starting a new one."
        return (f"No conversation in {workdir} yet: starting a new one "
                "(--continue --all continues the newest anywhere).")
    title = f" ({conversation.title})" if conversation.title else ""
    if everywhere:
        return f"Continuing conversation {conversation.id}{title}, the newest anywhere (in {conversation.workdir})."
    return (f"Continuing conversation {conversation.id}{title}, the newest in {workdir} "
            "(--all takes the newest anywhere, --resume ID another).")


class Session:
    """An open session. Use ``async with await Session.open(options)`` or call
    :meth:`close`.

    Attributes: ``config``, ``store``, ``audit``, ``plan``, ``workdir``,
    ``conversation_id`` (``None`` until the first turn of a new
    conversation), ``link`` (the :class:`~wisp.core.model.link.ModelLink`),
    ``side_call``, ``notes``, ``tools``, ``context``, ``approvals``,
    ``capture``, ``agent``, ``mcp`` (the MCP servers, :class:`McpServers`);
    and, for views, ``endpoint``,
    ``endpoint_label``, ``model_name``, ``endpoint_error``,
    ``context_window``, ``tool_choice``, ``tool_names``, ``tools_kept``,
    ``agents_md``, ``project_instructions`` (AGENTS.md's text, or ``None``)
    and ``startup_problems`` (one-line warnings to show).
    """

    def __init__(self, options: SessionOptions, config: Config, store: Store, audit: AuditLog, plan: Plan,
                 mcp: McpServers | None = None, mcp_tools: tuple[Tool, ...] = ()):
        self.options = options
        self.config = config
        self.store = store
        self.audit = audit
        self.plan = plan
        self.workdir = plan.workdir
        self.conversation_id = plan.conversation_id
        self.link = ModelLink(config)
        if options.model:
            self.link.choose_model(options.model)
        self.side_call: SideCall = options.side_call or LinkSideCall(self.link)
        self.notes = ModelNotes.over(store, audit)
        room = Room()  # the tokens the last request left: the context keeps it, the memory tool reads it
        # MCP servers' tools were listed by open() (issue 15); they join as ready-made tools
        self.mcp = mcp or McpServers({}, config=config, workdir=self.workdir)
        self.tools = build_registry([n for n in plan.tool_choice.names if mcp_parts(n) is None],
                                    memory=MemoryBinding(store, audit, self.notes, self.side_call,
                                                         lambda: self.link.context_window, config, room),
                                    extra=(*mcp_tools, *options.extra_tools))
        agents = plan.agents_md
        self.context = ContextManager(
            store, audit, config, workdir=self.workdir, tools=self.tools, model=self.link,
            side_call=self.side_call, notes=self.notes, room=room,
            instructions=(agents.instructions, str(agents.path) if agents.path else "AGENTS.md")
            if agents is not None and agents.instructions else (None, None))
        # Tools that act ask first (issue "Tools that act")
        self.approvals = Approvals(config, audit, WorkspaceAllowList(Path(config.path).parent / "approvals.json"),
                                   ask=options.ask, transport=options.transport)
        # Episodic memory: every exchange is captured (issue "Episodic memory")
        self.capture = Capture(store, config, self.workdir,
                               Origin(options.transport, options.channel, options.thread, options.sender),
                               self.link)
        self.agent = Agent(store=store, audit=audit, model=self.link, tools=self.tools, context=self.context,
                           workdir=self.workdir, config=config, approver=self.approvals,
                           observers=[self.capture], settings=self._settings())

    # -- what views read -----------------------------------------------------

    @property
    def tool_choice(self) -> ToolChoice:
        return self.plan.tool_choice

    @property
    def tool_names(self) -> list[str]:
        return list(self.plan.tool_choice.names)

    @property
    def tools_kept(self) -> bool:
        return self.plan.tools_kept

    @property
    def agents_md(self) -> AgentsMd | None:
        return self.plan.agents_md

    @property
    def project_instructions(self) -> str | None:
        return self.plan.agents_md.instructions if self.plan.agents_md else None

    @property
    def startup_notes(self) -> list[str]:
        """One-line notes to show at start: which conversation ``--continue`` took."""
        return [self.plan.note] if self.plan.note else []

    @property
    def profile(self) -> str | None:
        """The profile in use (``--profile``, ``/profile``), or ``None``."""
        return getattr(self.config, "profile", None)

    @property
    def startup_problems(self) -> list[str]:
        agents = list(self.plan.agents_md.problems) if self.plan.agents_md else []
        return agents + list(self.mcp.problems)

    @property
    def endpoint(self) -> Any:
        return self.link.endpoint

    @property
    def endpoint_label(self) -> str:
        return self.link.label

    @property
    def model_name(self) -> str:
        return self.link.model

    @property
    def endpoint_error(self) -> str | None:
        return self.link.error

    @property
    def context_window(self) -> int | None:
        return self.link.context_window

    def _settings(self) -> AgentSettings:
        return AgentSettings(max_steps=int(self.config.get("agent.max_steps")),
                             think=str(self.config.get("model.think")),
                             max_tokens=self.config.get("model.max_tokens"))

    # -- opening and closing -----------------------------------------------------

    @classmethod
    async def open(cls, options: SessionOptions, config: Config | None = None) -> "Session":
        """Load the config, open the store and the audit log, settle the
        conversation (:func:`settle`), then build the session. Raises
        :class:`SessionError` (and :class:`wisp.core.config.ConfigError` for a
        bad config file)."""
        config = config or Config.load()
        if options.profile:
            config.use_profile(options.profile)  # ConfigError names the profiles there are
        store = await open_store(config.db_path)
        try:
            await store.recover_open_turns()
            audit = AuditLog(config.audit_dir, enabled=bool(config.get("audit.enabled")),
                             max_bytes=int(config.get("audit.max_bytes")), keep=int(config.get("audit.keep")))
            plan = await settle(options, config, store)
            mcp = McpServers.from_config(config, plan.workdir)
            try:
                # only the servers the conversation names, each from the tool cache when it can be (issue 15)
                mcp_tools, _ = await mcp.tools_for(plan.tool_choice.names)
                return cls(options, config, store, audit, plan, mcp, tuple(mcp_tools))
            except BaseException:
                await mcp.close()
                raise
        except BaseException:
            await store.close()
            raise

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self, on_status: Callable[[str], Awaitable[Any] | Any] | None = None) -> bool:
        """Resolve the endpoint (which may start the embedded server) and its
        window (:meth:`wisp.core.model.link.ModelLink.connect`). ``on_status``
        gets a short line before slow steps. Returns False and sets
        ``endpoint_error`` on failure; never raises an endpoint error."""
        return await self.link.connect(on_status=on_status)

    async def close(self) -> None:
        """Stop the MCP servers this session started (and their children),
        close the endpoint's client, stop an embedded server, close the store."""
        await self.mcp.close()
        await self.link.close()
        await self.store.close()

    # -- turns -------------------------------------------------------------------------

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

    async def run_turn(self, prompt: str, supersedes: int | None = None) -> AsyncIterator[Any]:
        """Run one turn in the current conversation (see :meth:`Agent.run_turn`);
        ``supersedes`` names the turn it asks again in place of (``/retry``,
        ``/edit``).

        Settings (``agent.max_steps``, ``model.think``) are read afresh, so a
        ``/config set`` applies from this turn. A conversation whose turn
        another live wisp process is running gets an ``Error`` event of kind
        ``busy`` and no turn: two processes would interleave their turns. The
        check is the agent's first step, the atomic claim of
        :meth:`wisp.core.store.Store.begin_turn` (one transaction), so two
        processes started at the same instant cannot both pass it.
        """
        conversation = await self.ensure_conversation()
        self.agent.settings = self._settings()
        self.link.refresh()
        if await self.store.count_turns(conversation) == 0:
            await self.store.set_conversation_title(conversation, _title(prompt))
        # closed with this generator when a view abandons the turn's events, so the agent stops its writes
        async with aclosing(self.agent.run_turn(conversation, prompt, supersedes=supersedes)) as events:
            async for item in events:
                yield item
                if isinstance(item, ev.ToolResult) and item.meta.get("mcp_failure"):
                    # the model has its tool result; the person's views say which server failed (issue 15)
                    yield ev.McpServerFailed(str(item.meta.get("mcp_server")), str(item.meta["mcp_failure"]))
        await self.store.touch_conversation(conversation)

    async def refine_memory(self) -> RefineReport | None:
        """One run of episodic memory's refinement through this session's
        model (the TUI's timer). Never raises; ``None`` on an unexpected
        failure (issue "Episodic memory")."""
        return await refine_with(self.store, self.config, self.side_call, trigger="tui")


def _title(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line[:60] + ("…" if len(line) > 60 else "")
