"""The layered context of one session: the request composed from the record, and the hooks around a turn.

:class:`ContextManager` is built once by :class:`wisp.core.session.Session`,
after the session knows its conversation's working directory, tools and
project instructions (issue "One core, built once"). The agent asks it:

- :meth:`ContextManager.prepare` before each request: the ``workdir`` and
  ``branch`` facts (a changed branch becomes a new version), ``tests``
  facts from test runs the turn's tools reported, and, when the oldest
  turns must leave the window, a running summary written through the side
  call handed in; then the request, composed once from the record
  (:class:`~wisp.core.context.composer.ComposedContext`: messages, tool
  schemas, layers, tokens, calibration);
- :meth:`ContextManager.record_usage` after each request: the endpoint's
  prompt count folded into the model's calibration;
- :meth:`ContextManager.after_turn` when a turn ends: the model's notes
  (:class:`~wisp.core.context.notes.ModelNotes`) recorded, test runs after
  the last request read.

:meth:`ContextManager.compose` composes the next request with no side effect
(``/inspect context``, ``wisp inspect context``). Nothing here imports
``core/model``: the model is reached only through the
:class:`~wisp.core.sidecall.SideCall` handed in, and the connection's state
is read from a :class:`ModelState`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Protocol

from .. import events as ev
from ..sidecall import SideCall
from ..tokens import window_from
from .calibration import Calibration, CalibrationState
from .composer import SYSTEM_RULES, ComposedContext, ComposeInputs, Composer, FactView, Room, build
from .facts import Fact, FactOutcome, fact_event, fact_line
from .notes import ModelNotes, fact_history
from .summary import SummaryVersion, turn_ranges, turns_named
from .turns import ToolFlags
from .usage import UsageBook
from .workspace import FileChange, current_branch, workdir_picture

#: How often the notice of a running summary being written gives its seconds (a small model takes
#: half a minute or more on two cores; a person should see that it is still working).
SUMMARY_TICK_S = 1.0


async def _tick_seconds(line: str, progress: Callable[[ev.AgentEvent], None]) -> None:
    """Until cancelled: every :data:`SUMMARY_TICK_S` seconds, the summary's
    notice again (its key: one line that changes) with the seconds so far."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(SUMMARY_TICK_S)
        progress(ev.Notice(f"{line}: {time.monotonic() - started:.0f} s so far.", key="summary-writing",
                           transient=True))


if TYPE_CHECKING:
    from .bookkeeping import FactDistiller, SideCost, TaskAssessor
    from .summariser import Summariser


def _assess_turns() -> int:
    """How many recent turns the task assessment reads (:data:`~wisp.core.context.bookkeeping.ASSESS_TURNS`)."""
    from .bookkeeping import ASSESS_TURNS

    return ASSESS_TURNS

__all__ = ["ContextManager", "ModelState", "PanelState", "Prepared"]


class ModelState(Protocol):
    """What the context reads of the session's connection to its model
    (:class:`wisp.core.model.link.ModelLink` is one): ``model`` (its name,
    ``""`` when not connected), ``reported_window`` (tokens the endpoint
    reported, or ``None``) and ``endpoint`` (``None`` while not connected)."""

    model: str
    reported_window: int | None
    endpoint: Any

    def window_advice(self, tokens: int) -> str:
        """How to raise the window to ``tokens`` for the endpoint in use."""
        ...

    def tool_layer(self, schemas: list[dict[str, Any]] | None) -> tuple[str, str] | None:
        """``(mode, text)``: how the next request gives ``schemas`` to the model
        (``native`` or ``prompted``) and the text the model reads of them."""
        ...

    def as_sent(self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]]
                ) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
        """``(mode, messages, tools)`` exactly as the next request sends them."""
        ...


@dataclass
class PanelState:
    """What the side panels show: current ``facts`` (task excluded, with their
    previous values), the ``task``, the ``summary`` version in effect and
    every version (``summaries``, newest first)."""

    facts: list[FactView] = field(default_factory=list)
    task: Fact | None = None
    summary: SummaryVersion | None = None
    #: Every version of the running summary, newest first (the F4 panel lists them).
    summaries: list[SummaryVersion] = field(default_factory=list)


@dataclass
class Prepared:
    """The next request, composed once (:attr:`context`), and the events of
    what preparing it changed (facts, summary versions, notices)."""

    context: ComposedContext
    events: list[ev.AgentEvent] = field(default_factory=list)


def _with_status(summary: str, status: int | None) -> str:
    """``failed (pytest): …`` → ``failed (pytest, exit status 1): …``."""
    if status is None or "exit status" in summary:
        return summary
    head, sep, rest = summary.partition(")")
    if sep and "(" in head:
        return f"{head}, exit status {status}){rest}"
    return f"{summary} (exit status {status})"


class ContextManager:
    """The layered context for one session (see the module doc).

    ``store``, ``audit`` and ``config`` are the session's; ``workdir`` its
    conversation's directory; ``tools`` the conversation's
    :class:`~wisp.core.tools.ToolRegistry` (its schemas and which tools only
    read); ``model`` a :class:`ModelState`; ``side_call`` the
    :class:`~wisp.core.sidecall.SideCall` for the running summary (``None``:
    none is written); ``notes`` the session's
    :class:`~wisp.core.context.notes.ModelNotes` (whose books this uses);
    ``instructions`` the project's instructions and their source
    (AGENTS.md's path), or ``(None, None)``; ``room`` the :class:`Room` it
    keeps the last request's free tokens in (shared with the memory tool);
    ``file_changes`` an async function of a conversation that says what
    wisp's edits did to the working directory's files
    (:class:`~wisp.core.context.workspace.FileChange` rows, for the
    ``workdir`` fact; ``None``: no edits are kept).
    """

    def __init__(self, store: Any, audit: Any, config: Any, *, workdir: Path, tools: Any, model: ModelState,
                 side_call: SideCall | None, notes: ModelNotes,
                 instructions: tuple[str | None, str | None] = (None, None),
                 system_rules: str = SYSTEM_RULES, room: Room | None = None,
                 file_changes: Callable[[int], Awaitable[list[FileChange]]] | None = None) -> None:
        self.store = store
        self.audit = audit
        self.config = config
        self.workdir = str(workdir)
        self.tools = tools
        self.model_state = model
        self.notes = notes
        self.facts = notes.facts
        self.tasks = notes.tasks
        self.summaries = notes.summaries_book
        self.calibration = Calibration(store)
        self.usage = UsageBook(store)
        #: Per conversation, the start of its last request's system message (the rules and the
        #: project's instructions), which the fact distiller's side call sends first.
        self.prefixes: dict[int, str] = {}
        self.composer = Composer(store, self.facts, self.summaries)
        self.side_call = side_call
        #: Per conversation, the cost of wisp's own side calls around its last turn, by kind.
        self.costs: dict[int, dict[str, SideCost]] = {}
        self.instructions, self.instructions_source = instructions
        self.system_rules = system_rules
        #: The room the last prepared request left (the memory tool reads it).
        self.room = room if room is not None else Room()
        self.file_changes = file_changes
        self.flags = ToolFlags.from_registry(tools)
        self._pending: list[ev.AgentEvent] = []
        self._scanned: dict[int, int] = {}
        self._over_budget_warned: dict[int, int] = {}

    # The side calls' writers are made at their first use, and their modules imported then: a
    # request that needs none of them (`wisp ask`'s first turn) loads none (issue 12).

    @functools.cached_property
    def summariser(self) -> "Summariser":
        """The running summary's writer (:class:`~wisp.core.context.summariser.Summariser`)."""
        from .summariser import Summariser

        return Summariser(self.store, self.summaries, self.side_call, self.audit)

    @functools.cached_property
    def distiller(self) -> "FactDistiller":
        """The fact distiller (``context.distill``; :class:`~wisp.core.context.bookkeeping.FactDistiller`)."""
        from .bookkeeping import FactDistiller

        return FactDistiller(self.side_call, self.notes, int(self._config("context.distill_tokens", 1024)))

    @functools.cached_property
    def assessor(self) -> "TaskAssessor":
        """The task assessment (``context.assess``; :class:`~wisp.core.context.bookkeeping.TaskAssessor`)."""
        from .bookkeeping import TaskAssessor

        return TaskAssessor(self.side_call, self.notes)

    def _config(self, key: str, default: Any) -> Any:
        try:
            value = self.config.get(key)
        except Exception:
            return default
        return default if value is None else value

    async def model(self, conversation: int | None) -> str | None:
        """The model's name: the connected one, else the conversation's stored one."""
        if self.model_state.model:
            return self.model_state.model
        if conversation is not None:
            conv = await self.store.get_conversation(conversation)
            if conv is not None:
                return conv.model
        return None

    async def window(self, conversation: int | None, model: str | None = None) -> tuple[int, str]:
        """The context window (tokens) and where it came from
        (:func:`wisp.core.tokens.window_from`)."""
        reported = self.model_state.reported_window if self.model_state.endpoint is not None else None
        last_seen = None
        if not self._config("model.context_window", None) and not reported:
            last_seen = (await self.calibration.get(model or await self.model(conversation))).context_window
        cap = getattr(self.model_state, "window_cap", None) if self.model_state.endpoint is not None else None
        return window_from(self._config("model.context_window", None), reported, last_seen, cap=cap)

    # -- composing ------------------------------------------------------------------

    async def _inputs(self, conversation: int, squeeze: float = 1.0) -> ComposeInputs:
        """The next request's inputs; with ``context.assess`` on, the entries of
        the turns the assessment reads are loaded too (issue 12: an ended turn
        rendered before is otherwise not read). ``squeeze`` multiplies the
        calibration ratio for this composition only (see :meth:`prepare`)."""
        model = await self.model(conversation)
        window, source = await self.window(conversation, model)
        cal = await self.calibration.get(model)
        return await self.composer.inputs(
            conversation, system_rules=self.system_rules, registry=self.tools, window=window,
            reserve=int(self._config("context.reserve", 1024)),
            recent_turns=int(self._config("context.recent_turns", 0)), ratio=cal.effective * squeeze,
            instructions=self.instructions, instructions_source=self.instructions_source, window_source=source,
            model=model, calibration_samples=cal.samples, tool_layer=getattr(self.model_state, "tool_layer", None),
            entries_of_last=_assess_turns() if self._config("context.assess", False) else 0)

    async def inputs(self, conversation: int) -> ComposeInputs:
        """What the next request of ``conversation`` is composed from
        (:class:`~wisp.core.context.composer.ComposeInputs`), with no side effect."""
        return await self._inputs(conversation)

    async def compose(self, conversation: int) -> ComposedContext:
        """The next request of ``conversation`` with its layers, composed
        from the record with no side effect (``/inspect context``)."""
        return build(await self._inputs(conversation))

    async def prepare(self, conversation: int, turn: int,
                      progress: Callable[[ev.AgentEvent], None] | None = None, *,
                      squeeze: float = 1.0) -> Prepared:
        """Before each request of turn ``turn``: record the workspace and test
        facts, write a running summary when turns must leave the window, and
        compose the request once (see the module doc). Never raises for the
        side call's failure (it becomes a notice). ``progress`` gets a
        transient notice before a running summary is asked of the model, so
        the person sees why the reply has not started. ``squeeze`` (> 1)
        counts every layer that many times larger, for this request only: the
        agent's second try after the server counted a request wisp estimated
        to fit as over the window (text wisp's estimate undercounts, such as
        base64; issue "Real models, real work": no request that cannot fit)."""
        events = self._drain()
        events += await self.observe_workspace(conversation, turn)
        events += await self.scan_test_runs(conversation, turn)
        inputs = await self._inputs(conversation, squeeze)
        if self._config("context.assess", False):
            more, inputs = await self._assess(conversation, turn, inputs)
            events += more
        ctx = build(inputs)
        done: list[str] = []
        if ctx.over_budget and inputs.recent_turns and ctx.recent_turns:
            # fitting step 1: the older tool outputs become references, recent turns included
            whole = [t.number for t in ctx.turns if t.whole]
            inputs = dataclasses.replace(inputs, recent_turns=0)
            ctx = build(inputs)
            done.append(f"the outputs of turn{'s' if len(whole) != 1 else ''} {turn_ranges(whole)} went as "
                        "references")
        if ctx.must_leave:
            # fitting step 2: the running summary takes over old turns
            ticking = None
            if progress is not None:
                writing = self.summariser.plan(ctx)
                line = (f"Writing the running summary of {turns_named(writing)}, so that they can leave the "
                        "model's window; the reply starts after it")
                progress(ev.Notice(line + ".", key="summary-writing", transient=True))
                ticking = asyncio.ensure_future(_tick_seconds(line, progress))
            try:
                more, ctx = await self._summarise(inputs, ctx, turn)
            finally:
                if ticking is not None:
                    ticking.cancel()
            events += more
        if ctx.over_budget and inputs.current is not None:
            # fitting step 3 for the rest: the turns that could leave have left (or no summary could be
            # written of them), so the current turn is cut to the room they leave
            left = set(ctx.left)
            ctx = build(dataclasses.replace(inputs, summary=ctx.summary, cut_to_room=True,
                                            ended=[t for t in inputs.ended if t[0] not in left]))
        shown = ctx.cut[:3]
        for c in shown:  # fitting step 3: a paste or an output too big for the window goes cut
            what = "your prompt" if c.kind == "prompt" else "a tool's output"
            done.append(f"entry {c.number} ({what}, {c.chars:,} characters) went with its head and tail only "
                        f"(/show entry {c.number} shows it whole)")
        if len(ctx.cut) > len(shown):
            done.append(f"{len(ctx.cut) - len(shown)} more of this turn's outputs went cut or as references")
        if done and not ctx.over_budget:
            events.append(ev.Notice(f"To fit the model's window ({ctx.budget:,}-token budget): "
                                    + "; ".join(done) + ".", key="fit"))
        # a result of this turn (a recalled page) may take the room older turns and the summary give up
        self.room.left = max(ctx.tokens_left, ctx.turn_room if ctx.turn_room is not None else ctx.tokens_left)
        self.prefixes[conversation] = ctx.prefix
        return Prepared(ctx, events)

    def overflow_message(self, ctx: ComposedContext) -> str:
        """Why ``ctx`` cannot fit even after fitting, and what to change: the
        layers no turn can free, biggest first, each with its fix, and how to
        raise the window for the endpoint in use (issue "Real models, real
        work": "say exactly which layer is too big and what to change")."""
        fixes = {"tools": "give fewer tools (--tool NAME, or a tools: line in AGENTS.md)",
                 "instructions": f"shorten the project's instructions ({self.instructions_source or 'AGENTS.md'})",
                 "facts": "forget some (/fact, then /fact forget ID)", "task": "shorten it (/task …)",
                 "summary": "start a new conversation (/new), or raise the window",
                 "system": "raise the window", "current": "send less at once (a shorter prompt)"}
        rows = sorted((layer for layer in ctx.layers if layer.tokens and layer.key in fixes),
                      key=lambda layer: -layer.tokens)
        named = [f"{layer.name} {layer.tokens:,} tokens: {fixes[layer.key]}" for layer in rows
                 if layer.tokens >= max(1, ctx.budget // 10)][:3] or \
            [f"{layer.name} {layer.tokens:,} tokens" for layer in rows[:1]]
        return (f"This request cannot fit the model's window: even with every older turn summarised and every "
                f"large output cut, it needs about {ctx.total:,} tokens of a {ctx.budget:,}-token budget (window "
                f"{ctx.window:,} less {ctx.reserve:,} reserved for the reply). The biggest parts: "
                + "; ".join(named) + f". Or: {self.model_state.window_advice(ctx.total + ctx.reserve)}.")

    async def record_usage(self, conversation: int, reported: int | None, estimated: int | None,
                           turn: int | None = None, cached: int | None = None) -> None:
        """Fold one request's reported prompt tokens (``reported``) against
        wisp's estimate of it (``estimated``, uncalibrated) into the model's
        calibration, remember the window in use for the model, and add the
        request to ``turn``'s figures (``cached``: the prompt tokens the
        server's cache served; :class:`~wisp.core.context.usage.UsageBook`)."""
        await self.usage.observe(conversation, turn, reported, cached)
        model = await self.model(conversation)
        await self.calibration.observe(model, reported, estimated)
        if self.model_state.endpoint is not None:
            window, _ = await self.window(conversation, model)
            state = await self.calibration.get(model)
            if state.context_window != window:
                await self.calibration.remember_window(model, window)

    async def record_floor(self, conversation: int, floor: float | None) -> CalibrationState:
        """Raise the model's planning floor to ``floor`` (server tokens ÷ wisp's
        estimate, learned from a request the server refused for size without a
        count, or the refit it then took; see
        :meth:`~wisp.core.context.calibration.Calibration.observe_floor`), and
        return the calibration the next request is planned with."""
        model = await self.model(conversation)
        return await self.calibration.observe_floor(model, floor) or await self.calibration.get(model)

    async def calibration_state(self, conversation: int | None) -> CalibrationState:
        """The model's calibration."""
        return await self.calibration.get(await self.model(conversation))

    # -- hooks --------------------------------------------------------------------------

    def _drain(self) -> list[ev.AgentEvent]:
        out, self._pending = self._pending, []
        return out

    async def after_turn(self, record: Any) -> list[ev.AgentEvent]:
        """When a turn has ended: test runs after its last request are read,
        and the model's notes and task proposals are recorded
        (wisp-memory-tool.txt: "recorded when the turn ends")."""
        conversation, turn = record.conversation, record.turn
        events = self._drain()
        events += await self.scan_test_runs(conversation, turn)
        if self._config("context.distill", False) and record.state in ("done", "cut"):
            events += await self._distill(record)
        events += await self.notes.record(conversation, turn)
        self._over_budget_warned.pop(conversation, None)
        return events

    async def _distill(self, record: Any) -> list[ev.AgentEvent]:
        """The fact distiller on the ended turn (issue "The model's own bookkeeping")."""
        t = await self.store.get_turn(record.conversation, record.turn)
        entries = await self.store.entries(record.conversation, t.id) if t is not None else []
        prompt = next((e for e in entries if e.kind == "prompt"), None)
        reply = next((e for e in reversed(entries) if e.kind == "reply"), None)
        done = await self.distiller.distill(record.conversation, record.turn, record.prompt, record.reply,
                                            prompt_entry=prompt.number if prompt else None,
                                            reply_entry=reply.number if reply else None,
                                            prefix=self.prefixes.get(record.conversation, ""))
        cost = self._cost(record.conversation, done.cost)
        return [cost] if cost.calls else []

    async def _assess(self, conversation: int, turn: int, inputs: ComposeInputs) -> tuple[list[ev.AgentEvent],
                                                                                        ComposeInputs]:
        """The assessment before a request: the task inferred from the recent
        turns, recorded as the model's unless the person set one."""
        recent = []
        for number, entries in inputs.ended[-_assess_turns():]:
            prompt = next((e.content for e in entries if e.kind == "prompt"), "")
            reply = next((e.content for e in reversed(entries) if e.kind == "reply"), "")
            recent.append((number, prompt or "", reply or ""))
        if inputs.current is not None:
            number, entries = inputs.current
            recent.append((number, next((e.content for e in entries if e.kind == "prompt"), "") or "", ""))
        events, cost = await self.assessor.assess(conversation, turn, recent)
        out: list[ev.AgentEvent] = [*events, self._cost(conversation, cost)] if cost.calls else list(events)
        if events:  # the task changed: compose with it
            inputs = await self._inputs(conversation)
        return out, inputs

    def _cost(self, conversation: int, cost: SideCost) -> ev.SideCallCost:
        self.costs.setdefault(conversation, {})[cost.kind] = cost
        return ev.SideCallCost(cost.kind, cost.calls, cost.tokens, round(cost.seconds, 3))

    async def _summarise(self, inputs: ComposeInputs, ctx: ComposedContext,
                         turn: int) -> tuple[list[ev.AgentEvent], ComposedContext]:
        """Write running summary versions for the turns that must leave
        ``ctx``'s window; the events (versions, notices) and the request
        built again from the same inputs with the new summary (no reload)."""
        conversation = ctx.conversation
        facts_text = "\n".join(fact_line(v.fact) for v in ctx.facts)
        task = ctx.task or inputs.task
        if task is not None:
            facts_text += "\n" + fact_line(task)
        outcome = await self.summariser.ensure(ctx, flags=ctx.flags, facts_text=facts_text, model=ctx.model,
                                               context_window=ctx.window, turn=turn,
                                               loaded=inputs.loaded_entries(), task=task.value if task else "")
        events: list[ev.AgentEvent] = []
        for v in outcome.versions:
            events.append(ev.SummaryChanged(conversation, v.version, tuple(v.covers)))
        before = set(ctx.summary.covers) if ctx.summary is not None else set()
        # the turns this summary takes over (the notices name these, as "Writing …" did)
        covered = turns_named(sorted({t for v in outcome.versions for t in v.covers} - before))
        if outcome.dropped and outcome.versions:
            events.append(ev.Notice(f"The model's running summary of {covered} was not used: {outcome.dropped}. "
                                    "wisp wrote it from the turns' identifiers and your own words (F4 shows it).",
                                    level="warning"))
        elif outcome.failed and outcome.versions:
            events.append(ev.Notice(f"The model could not write the running summary ({outcome.failed}); wisp "
                                    f"wrote it from the turns' identifiers and your own words, so {covered} "
                                    "leave the window (F4 shows it).", level="warning"))
        elif outcome.failed:
            events.append(ev.Notice(f"The running summary could not be written ({outcome.failed}); the older "
                                    "turns stay whole and the previous summary stays.", level="warning"))
        elif outcome.completed:
            shown = ", ".join(outcome.completed[:6]) + ("…" if len(outcome.completed) > 6 else "")
            events.append(ev.Notice(f"The model's running summary of {covered} left out {shown}; wisp kept "
                                    "them in it itself (F4 shows which part it wrote).", key="summary-completed"))
        after = ctx
        if outcome.versions:
            latest = outcome.versions[-1]
            covered = set(latest.covers)
            after = build(dataclasses.replace(inputs, summary=latest,
                                              ended=[t for t in inputs.ended if t[0] not in covered]))
        if after.over_budget and self._over_budget_warned.get(conversation) != turn:
            self._over_budget_warned[conversation] = turn
            events.append(ev.Notice(
                f"This request needs about {after.total:,} tokens of a {after.budget:,}-token budget "
                f"(window {after.window:,} less {after.reserve:,} reserved); turns leave the window only once "
                "a running summary covers them. /inspect context shows what takes the room.", level="warning"))
        return events, after

    # -- facts from tools -----------------------------------------------------------------

    async def observe_workspace(self, conversation: int, turn: int | None) -> list[ev.AgentEvent]:
        """Record the ``workdir`` fact (the conversation's directory, and the
        files wisp's edits changed in it: :func:`~wisp.core.context.workspace.workdir_picture`)
        and the ``branch`` fact (from git) when they differ from the current ones."""
        events: list[ev.AgentEvent] = []
        workdir = self.workdir
        if workdir:
            changes = await self.file_changes(conversation) if self.file_changes is not None else []
            outcome = await self.facts.record(conversation, "workdir", "", workdir_picture(workdir, changes),
                                              source="tool",
                                              method="observed", tool="workdir", turn=turn)
            if outcome.recorded and outcome.fact:
                events.append(fact_event(outcome.fact))
            branch = await current_branch(workdir)
            if branch:
                outcome = await self.facts.record(conversation, "branch", "", branch, source="tool",
                                                  method="observed", tool="git", turn=turn)
                if outcome.recorded and outcome.fact:
                    events.append(fact_event(outcome.fact))
        return events

    async def scan_test_runs(self, conversation: int, turn: int) -> list[ev.AgentEvent]:
        """Record ``tests`` facts from the tool outputs of turn ``turn`` not
        read yet: outputs of tools that do not only read, whose output reads
        as a test run or whose call's ``command`` runs tests."""
        t = await self.store.get_turn(conversation, turn)
        if t is None:
            return []
        flags = self.flags
        events: list[ev.AgentEvent] = []
        last = self._scanned.get(conversation, 0)
        entries = await self.store.entries(conversation, t.id)
        calls = {e.tool_call_id: e for e in entries if e.kind == "tool_call"}
        for e in entries:
            if e.kind != "tool_result" or e.number <= last:
                continue
            self._scanned[conversation] = max(self._scanned.get(conversation, 0), e.number)
            if flags.read_only.get(e.tool_name or "") is True:
                continue
            call = calls.get(e.tool_call_id)
            args = call.arguments if call is not None and isinstance(call.arguments, dict) else {}
            command = str(args.get("command") or args.get("cmd") or "")
            meta = e.meta or {}
            command = command or str(meta.get("command") or "")
            status = meta.get("exit_status", meta.get("exit_code"))
            status = status if isinstance(status, int) and not isinstance(status, bool) else None
            tests = meta.get("tests")
            from ..outputs import fact_name_for_command  # the output readers load with the first tool output

            if isinstance(tests, dict) and tests.get("summary"):
                # run_command read the run already (wisp.core.outputs)
                outcome = await self._record_fact(
                    conversation, "tests", fact_name_for_command(command) if command.strip() else
                    str(tests.get("framework") or e.tool_name or "tests"),
                    _with_status(str(tests["summary"]), status), source="tool", method="tested",
                    tool=e.tool_name or "tool", turn=turn, entries=[e.number], notify=False)
            else:
                outcome = await self._record_test_run(conversation, command=command, output=e.content,
                                                     exit_status=status, turn=turn, entry=e.number,
                                                     tool=e.tool_name or "tool", notify=False)
            if outcome is not None and outcome.recorded and outcome.fact:
                events.append(fact_event(outcome.fact))
        return events

    async def _record_fact(self, conversation: int, subject: str, name: str, value: str, *, source: str,
                          method: str = "", tool: str | None = None, turn: int | None = None,
                          entries: Iterable[int] = (), notify: bool = True) -> FactOutcome:
        """Record a fact with the precedence rules (:meth:`FactBook.record`).
        With ``notify`` a :class:`~wisp.core.events.FactChanged` is queued
        for the next hook (views refresh)."""
        outcome = await self.facts.record(conversation, subject, name, value, source=source, method=method,
                                          tool=tool, turn=turn, entries=entries)
        if notify and outcome.recorded and outcome.fact:
            self._pending.append(fact_event(outcome.fact))
        return outcome

    async def _record_test_run(self, conversation: int, *, command: str, output: str, exit_status: int | None,
                              turn: int | None, entry: int | None, tool: str = "run_command",
                              notify: bool = True) -> FactOutcome | None:
        """Record the ``tests`` fact of a test run (result and failing tests,
        :func:`wisp.core.outputs.read_test_run`), named after the command; ``None``
        when the output is not a test run. Recording the same result from the
        same entry twice changes nothing."""
        from ..outputs import fact_name_for_command, read_test_run

        run = read_test_run(output, exit_status, command)
        if run is None:
            return None
        name = fact_name_for_command(command) if command.strip() else (tool or "tests")
        return await self._record_fact(conversation, "tests", name, run.value(), source="tool", method="tested",
                                      tool=tool, turn=turn, entries=[entry] if entry is not None else [],
                                      notify=notify)

    # -- what commands read -----------------------------------------------------------------

    async def recall_fact(self, conversation: int, query: str, *, for_model: bool = True) -> str:
        """A fact's history in the reference document's format, or one line
        starting ``memory:`` saying what the conversation knows
        (:func:`~wisp.core.context.notes.fact_history`)."""
        return (await fact_history(self.facts, conversation, query, for_model=for_model))[0]

    async def panel_state(self, conversation: int | None) -> PanelState:
        """What the side panels show for ``conversation`` (empty for ``None``)."""
        if conversation is None:
            return PanelState()
        views = await self.composer.fact_views(conversation)
        versions = await self.summaries.versions(conversation)
        return PanelState(facts=[v for v in views if v.fact.subject != "task"],
                          task=next((v.fact for v in views if v.fact.subject == "task"), None),
                          summary=None if not versions or versions[-1].empty else versions[-1],
                          summaries=list(reversed(versions)))
