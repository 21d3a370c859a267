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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from .agents_md import AgentsMd, load_agents_md
from .audit import AuditLog
from .config import Config
from .database import audit_dir_of, open_store
from .session_options import SessionError, SessionOptions, unknown_conversation
from .store import Store
from .streamed import recover_open_turns
from .toolset import ToolChoice, choose_tools

if TYPE_CHECKING:
    from .agent import AgentSettings
    from .audit import AuditRef
    from .context.compaction import CompactPreview
    from .context.manager import PanelState
    from .context.summary import SummaryVersion
    from .transcript import Transcript
    from .mcp import McpServers
    from .tools.base import Tool
    from .episodes.refine import RefineReport
    from .sidecall import SideCall

# The parts a session builds (the model link, the tools, the context, the agent…) are imported when
# it builds them (Opening.build): a view can open the store and settle the conversation, and show it,
# before the rest of the core is loaded (issue 12, "Paint first, then open").

__all__ = ["Session", "SessionOptions", "SessionError", "Plan", "settle", "Opening"]


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
            raise unknown_conversation(options.resume)
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


@dataclass
class Opening:
    """A session half open: the config loaded, the store and the audit log
    open, the conversation settled (``plan``), nothing built yet. A view
    can read the stored conversation from ``store`` and show it while the
    rest of the core loads; :meth:`build` then makes the
    :class:`Session` (issue 12, "Paint first, then open"). :meth:`close`
    closes the store of an opening that is not built."""

    options: SessionOptions
    config: Config
    store: Store
    audit: AuditLog
    plan: Plan

    @classmethod
    async def start(cls, options: SessionOptions, config: Config | None = None) -> "Opening":
        """Load the config, open the store and the audit log, settle the
        conversation (:func:`settle`). Raises :class:`SessionError` (and
        :class:`wisp.core.config.ConfigError` for a bad config file)."""
        config = config or Config.load()
        if options.profile:
            config.use_profile(options.profile)  # ConfigError names the profiles there are
        store = await open_store(config.db_path, audit_dir_of(config))
        try:
            audit = AuditLog(config.audit_dir, enabled=bool(config.get("audit.enabled")),
                             max_bytes=int(config.get("audit.max_bytes")), keep=int(config.get("audit.keep")))
            # a dead process's open turns are stopped, and what they had streamed goes to the audit log too
            await recover_open_turns(store, audit)
            plan = await settle(options, config, store)
            return cls(options, config, store, audit, plan)
        except BaseException:
            await store.close()
            raise

    async def build(self) -> "Session":
        """Build the session's parts, each once (:class:`Session`), with the
        tools of the MCP servers the conversation names (listed from the tool
        cache when it can be; issue 15). If that raises, the store is still
        open: :meth:`close` it."""
        from .mcp import McpServers

        mcp = McpServers.from_config(self.config, self.plan.workdir)
        try:
            mcp_tools, _ = await mcp.tools_for(self.plan.tool_choice.names)
            return Session(self.options, self.config, self.store, self.audit, self.plan, mcp, tuple(mcp_tools))
        except BaseException:
            await mcp.close()
            raise

    @property
    def transcript(self) -> "Transcript":
        """The stored conversation as a view reads it (:class:`~wisp.core.transcript.Transcript`)."""
        from .transcript import Transcript

        return Transcript(self.store)

    async def close(self) -> None:
        """Close the store (an opening that will not be built)."""
        await self.store.close()


#: The modules :class:`Session` is built from (imported when it is built).
SESSION_PARTS = ("agent", "context.composer", "context.manager", "context.notes", "context.shapes",
                 "episodes.capture", "mcp", "mcp.manager", "memory.verbs", "model.link", "model.sidecall",
                 "tool_names", "tools.approval", "tools.edit_store", "tools.registry")


def preload() -> None:
    """Import :data:`SESSION_PARTS`, so that a caller can do it away from
    its event loop (the TUI does, in a thread, once the stored turns are on
    screen: importing them takes about a tenth of a second, during which a
    loop would not paint; issue 12, "Paint first, then open"). Building a
    session then imports nothing. Raises what an import raises."""
    import importlib

    for part in SESSION_PARTS:
        importlib.import_module(f"{__package__}.{part}")


class Session:
    """An open session. Use ``async with await Session.open(options)`` or call
    :meth:`close`.

    Attributes: ``config``, ``store``, ``audit``, ``plan``, ``workdir``,
    ``conversation_id`` (``None`` until the first turn of a new
    conversation), ``link`` (the :class:`~wisp.core.model.link.ModelLink`),
    ``side_call``, ``notes``, ``tools``, ``context``, ``approvals``,
    ``capture``, ``agent``, ``mcp`` (the MCP servers, :class:`McpServers`),
    ``edits`` (the :class:`~wisp.core.tools.edit_store.EditBook` of file edits);
    and, for views, ``endpoint``,
    ``endpoint_label``, ``model_name``, ``endpoint_error``,
    ``context_window``, ``tool_choice``, ``tool_names``, ``tools_kept``,
    ``agents_md``, ``project_instructions`` (AGENTS.md's text, or ``None``)
    and ``startup_problems`` (one-line warnings to show).
    """

    def __init__(self, options: SessionOptions, config: Config, store: Store, audit: AuditLog, plan: Plan,
                 mcp: "McpServers | None" = None, mcp_tools: "tuple[Tool, ...]" = ()):
        from .agent import Agent
        from .context.composer import Room
        from .context.manager import ContextManager
        from .context.notes import ModelNotes
        from .episodes.capture import Capture, Origin
        from .mcp import McpServers
        from .memory.verbs import MemoryBinding
        from .model.link import ModelLink
        from .context.shapes import ShapeBook
        from .model.sidecall import LinkSideCall, ShapeForms
        from .tool_names import mcp_parts
        from .tools.approval import Approvals, WorkspaceAllowList
        from .tools.edit_store import EditBook
        from .tools.registry import build_registry

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
        # a side call that needs a shape remembers, per endpoint, which form the server takes
        self.side_call: "SideCall" = options.side_call or LinkSideCall(self.link, ShapeForms(ShapeBook(store)))
        self.notes = ModelNotes.over(store, audit)
        room = Room()  # the tokens the last request left: the context keeps it, the memory tool reads it
        # every edit's bytes before and after, for /undo and the workdir fact
        self.edits = EditBook(store, audit)
        # MCP servers' tools were listed by open() (issue 15); they join as ready-made tools
        self.mcp = mcp or McpServers({}, config=config, workdir=self.workdir)
        self.tools = build_registry([n for n in plan.tool_choice.names if mcp_parts(n) is None],
                                    memory=MemoryBinding(store, audit, self.notes, self.side_call,
                                                         lambda: self.link.context_window, config, room),
                                    edits=self.edits, extra=(*mcp_tools, *options.extra_tools))
        agents = plan.agents_md
        self.context = ContextManager(
            store, audit, config, workdir=self.workdir, tools=self.tools, model=self.link,
            side_call=self.side_call, notes=self.notes, room=room, file_changes=self.edits.file_changes,
            instructions=(agents.instructions, str(agents.path) if agents.path else "AGENTS.md")
            if agents is not None and agents.instructions else (None, None))
        # Tools that act ask first (issue "Tools that act")
        self.approvals = Approvals(config, audit, WorkspaceAllowList(Path(config.path).parent / "approvals.json"),
                                   ask=options.ask, transport=options.transport, allow_edits=options.allow_edits)
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

    async def settle_open_turns(self) -> list[int]:
        """Stop the turns another wisp left open when its process died (a
        ``wisp ask`` whose pipe was closed, ``kill -9``), keeping and auditing
        what they had streamed, as a start does
        (:func:`~wisp.core.streamed.recover_open_turns`); a live wisp's turn
        stays open. Returns their ids. Raises what the store raises."""
        return await recover_open_turns(self.store, self.audit)

    # -- what the screen shows: the TUI reads the record through these only ------------

    @property
    def transcript(self) -> "Transcript":
        """This session's conversations as a view reads them
        (:class:`~wisp.core.transcript.Transcript`)."""
        from .transcript import Transcript

        return Transcript(self.store)

    async def panel_state(self) -> "PanelState":
        """What the facts, task and running summary panels show for the
        current conversation (:meth:`~wisp.core.context.manager.ContextManager.panel_state`)."""
        return await self.context.panel_state(self.conversation_id)

    async def apply_compaction(self, preview: "CompactPreview") -> "SummaryVersion":
        """Record the running summary ``preview`` proposed (``/compact``'s Enter):
        :func:`~wisp.core.context.compaction.apply_compaction`. Raises its
        :class:`~wisp.core.context.compaction.CompactError`."""
        from .context.compaction import apply_compaction

        return await apply_compaction(self.context, preview)

    def report_error(self, where: str, error: str, trace: str) -> "AuditRef | None":
        """Write an internal error of a view (``where`` it happened, ``error``
        in a line, the traceback) to the audit log as a ``tui.error`` audit
        event; its reference, or ``None`` when the log could not be written."""
        try:
            return self.audit.write("tui.error", {"where": where, "error": error, "traceback": trace},
                                    conversation=self.conversation_id)
        except Exception:
            return None

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

    def _settings(self) -> "AgentSettings":
        from .agent import AgentSettings

        return AgentSettings(max_steps=int(self.config.get("agent.max_steps")),
                             think=str(self.config.get("model.think")),
                             max_tokens=self.config.get("model.max_tokens"),
                             repeat_stop_chars=int(self.config.get("model.repeat_stop_chars")))

    # -- opening and closing -----------------------------------------------------

    @classmethod
    async def open(cls, options: SessionOptions, config: Config | None = None) -> "Session":
        """Load the config, open the store and the audit log, settle the
        conversation (:func:`settle`), then build the session
        (:meth:`Opening.start`, then :meth:`Opening.build`). Raises
        :class:`SessionError` (and :class:`wisp.core.config.ConfigError` for a
        bad config file)."""
        opening = await Opening.start(options, config)
        try:
            return await opening.build()
        except BaseException:
            await opening.close()
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

    async def run_turn(self, prompt: str, supersedes: int | None = None, *,
                       seen: int | None = None) -> AsyncIterator[Any]:
        """Run one turn in the current conversation (see :meth:`Agent.run_turn`);
        ``supersedes`` names the turn it asks again in place of (``/retry``,
        ``/edit``); ``seen``, the last turn number the caller's view shows (a
        turn another wisp ended since gives an ``Error`` of kind ``moved``).

        Settings (``agent.max_steps``, ``model.think``) are read afresh, so a
        ``/config set`` applies from this turn. A conversation whose turn
        another live wisp process is running gets an ``Error`` event of kind
        ``busy`` and no turn: two processes would interleave their turns. The
        check is the agent's first step, the atomic claim of
        :meth:`wisp.core.store.Store.begin_turn` (one transaction), so two
        processes started at the same instant cannot both pass it.
        """
        from . import events as ev

        conversation = await self.ensure_conversation()
        self.agent.settings = self._settings()
        self.link.refresh()
        if await self.store.count_turns(conversation) == 0:
            await self.store.set_conversation_title(conversation, _title(prompt))
        # closed with this generator when a view abandons the turn's events, so the agent stops its writes
        async with aclosing(self.agent.run_turn(conversation, prompt, supersedes=supersedes, seen=seen)) as events:
            async for item in events:
                yield item
                if isinstance(item, ev.ToolResult) and item.meta.get("mcp_failure"):
                    # the model has its tool result; the person's views say which server failed (issue 15)
                    yield ev.McpServerFailed(str(item.meta.get("mcp_server")), str(item.meta["mcp_failure"]))
        await self.store.touch_conversation(conversation)

    async def refine_memory(self) -> "RefineReport | None":
        """One run of episodic memory's refinement through this session's
        model (the TUI's timer). Never raises; ``None`` on an unexpected
        failure (issue "Episodic memory")."""
        from .episodes.refine import refine_with

        return await refine_with(self.store, self.config, self.side_call, trigger="tui")


def _title(prompt: str) -> str:
    """A conversation's title from its first prompt: one line, at most 61 characters."""
    from .text import one_line

    return one_line(prompt, 61)
