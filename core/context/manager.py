"""The layered context of one session: facts, task, running summary, composer, hooks.

:class:`ContextManager` is what a :class:`wisp.core.session.Session` plugs
into its agent (issue "Layered context"):

- ``agent.composer`` = :meth:`ContextManager.compose_messages` (the
  request's messages from the layers);
- ``agent.before_request`` gets :meth:`ContextManager.before_request`,
  which, before each request, records the ``workdir`` and ``branch`` facts
  (a changed branch becomes a new version), records ``tests`` facts from
  test runs the turn's tools reported, folds the last request's reported
  prompt tokens into the model's calibration, and writes a running summary
  when the oldest turns must leave the window;
- ``agent.after_turn`` gets :meth:`ContextManager.after_turn`, which
  records the model's notes and task proposals of the turn
  (wisp-memory-tool.txt: "recorded when the turn ends") and calibrates.

Public API for tools (issue "memory tool", issue "Tools that act"):
:meth:`record_fact`, :meth:`record_test_run`, :meth:`note`,
:meth:`propose_task`, :meth:`recall_fact`, and the books ``facts``
(:class:`~wisp.core.context.facts.FactBook`), ``tasks``
(:class:`~wisp.core.context.task.TaskBook`), ``summaries``
(:class:`~wisp.core.context.summary.SummaryBook`); entries and turns are
read with :mod:`wisp.core.context.recall`. Events for changes made by tools
during a turn are queued and yielded by the next hook, so views refresh.

The manager never imports Textual and calls the endpoint only for the
running summary's side call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .. import events as ev
from ..outputs import fact_name_for_command, read_test_run
from .calibration import Calibration, CalibrationState
from .composer import ComposedContext, Composer, FactView
from .facts import Fact, FactBook, FactError, FactOutcome, fact_line, history_text, parse_assignment
from .summariser import Summariser
from .summary import SummaryBook, SummaryVersion, turn_ranges
from .task import TaskBook, TaskResult, parse_task
from .turns import ToolFlags
from .workspace import current_branch

__all__ = ["ContextManager", "PanelState", "DEFAULT_CONTEXT_WINDOW", "NOTES_PER_TURN"]

#: The window (tokens) when neither config, endpoint nor calibration knows it.
DEFAULT_CONTEXT_WINDOW = 4096
#: The model may note at most this many facts (and tasks) a turn (wisp-memory-tool.txt, "note").
NOTES_PER_TURN = 12


@dataclass
class PanelState:
    """What the side panels show: current ``facts`` (task excluded, with their
    previous values), the ``task`` and the latest ``summary`` version."""

    facts: list[FactView] = field(default_factory=list)
    task: Fact | None = None
    summary: SummaryVersion | None = None


def fact_event(fact: Fact, action: str = "recorded") -> ev.FactChanged:
    """The :class:`~wisp.core.events.FactChanged` event for a fact version."""
    return ev.FactChanged(conversation=fact.conversation_id, fact=fact.vid, subject=fact.subject, name=fact.name,
                          value=fact.value, source=fact.source, action=action, proposal=fact.proposal)


def _with_status(summary: str, status: int | None) -> str:
    """``failed (pytest): …`` → ``failed (pytest, exit status 1): …``."""
    if status is None or "exit status" in summary:
        return summary
    head, sep, rest = summary.partition(")")
    if sep and "(" in head:
        return f"{head}, exit status {status}){rest}"
    return f"{summary} (exit status {status})"


class ContextManager:
    """The layered context for one session.

    ``ContextManager(session)`` reads, when it needs them, the session's
    ``store``, ``audit``, ``config``, ``agent`` (its settings' system rules
    and context window, its tool registry and endpoint), ``workdir``,
    ``context_window``, ``model_name`` and ``conversation_id``. Set
    :attr:`instructions` (and :attr:`instructions_source`, e.g. the path of
    AGENTS.md) to give the project's instructions a layer; a session
    attribute ``project_instructions`` is read when it is not set.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        store, audit = session.store, session.audit
        self.facts = FactBook(store, audit)
        self.tasks = TaskBook(self.facts)
        self.summaries = SummaryBook(store, audit)
        self.calibration = Calibration(store)
        self.composer = Composer(store, self.facts, self.summaries)
        self.summariser = Summariser(store, self.summaries, lambda: getattr(session.agent, "endpoint", None), audit)
        self.instructions: str | None = None
        self.instructions_source: str | None = None
        self._pending: list[ev.AgentEvent] = []
        self._scanned: dict[int, int] = {}
        self._seen_usage: Any = None
        self._notes: dict[tuple[int, int | None], list[tuple[str, Any]]] = {}
        self._over_budget_warned: dict[int, int] = {}

    # -- wiring ------------------------------------------------------------------

    def install(self, agent: Any) -> None:
        """Plug into ``agent``: its composer and a before-request and an after-turn hook."""
        agent.composer = self.compose_messages
        if self.before_request not in agent.before_request:
            agent.before_request.append(self.before_request)
        if self.after_turn not in agent.after_turn:
            agent.after_turn.append(self.after_turn)

    @property
    def store(self) -> Any:
        return self.session.store

    @property
    def audit(self) -> Any:
        return self.session.audit

    def _config(self, key: str, default: Any) -> Any:
        try:
            value = self.session.config.get(key)
        except Exception:
            return default
        return default if value is None else value

    def flags(self) -> ToolFlags:
        """The reference forms' view of the conversation's tools."""
        return ToolFlags.from_registry(self.session.agent.tools)

    def project_instructions(self) -> tuple[str | None, str | None]:
        """``(text, source)`` of the project's instructions, or ``(None, None)``."""
        if self.instructions:
            return self.instructions, self.instructions_source
        value = getattr(self.session, "project_instructions", None)
        if isinstance(value, str) and value.strip():
            path = getattr(getattr(self.session, "agents_md", None), "path", None)
            return value, (str(path) if path else "AGENTS.md")
        text = getattr(value, "text", None)
        if isinstance(text, str) and text.strip():
            return text, str(getattr(value, "path", "") or "") or None
        return None, None

    async def model(self, conversation: int | None) -> str | None:
        """The model's name: the session's, else the conversation's stored one."""
        if getattr(self.session, "model_name", ""):
            return self.session.model_name
        if conversation is not None:
            conv = await self.store.get_conversation(conversation)
            if conv is not None:
                return conv.model
        return None

    async def window(self, conversation: int | None) -> tuple[int, str]:
        """The context window (tokens) and where it came from: config
        ``model.context_window``, the endpoint (a connected session), the last
        window seen for the model (calibration table), or the default."""
        configured = self._config("model.context_window", None)
        if configured:
            return int(configured), "config model.context_window"
        live = getattr(self.session.agent.settings, "context_window", None) or getattr(self.session, "context_window", None)
        if live:
            return int(live), "the endpoint"
        state = await self.calibration.get(await self.model(conversation))
        if state.context_window:
            return int(state.context_window), "last seen for this model"
        return DEFAULT_CONTEXT_WINDOW, "default"

    # -- composing ------------------------------------------------------------------

    async def compose(self, conversation: int) -> ComposedContext:
        """The next request of ``conversation`` with its layers (no side effects)."""
        model = await self.model(conversation)
        window, source = await self.window(conversation)
        cal = await self.calibration.get(model)
        text, src = self.project_instructions()
        return await self.composer.compose(
            conversation, system_rules=self.session.agent.settings.system_rules, registry=self.session.agent.tools,
            window=window, reserve=int(self._config("context.reserve", 1024)),
            recent_turns=int(self._config("context.recent_turns", 0)), ratio=cal.effective, instructions=text,
            instructions_source=src, window_source=source, model=model, calibration_samples=cal.samples)

    async def compose_messages(self, conversation: int) -> list[dict[str, Any]]:
        """``agent.composer``: the messages of the next request."""
        ctx = await self.compose(conversation)
        self.session.agent.calibrated_ratio = ctx.ratio  # the agent's window check and status use it too
        return ctx.messages

    async def calibration_state(self, conversation: int | None) -> CalibrationState:
        """The model's calibration."""
        return await self.calibration.get(await self.model(conversation))

    # -- hooks --------------------------------------------------------------------------

    def _drain(self) -> list[ev.AgentEvent]:
        out, self._pending = self._pending, []
        return out

    async def before_request(self, conversation: int, turn: int) -> list[ev.AgentEvent]:
        """``agent.before_request``: workdir and branch facts, tests facts,
        calibration, and a running summary when turns must leave the window."""
        events = self._drain()
        events += await self.observe_workspace(conversation, turn)
        events += await self.scan_test_runs(conversation, turn)
        await self._calibrate(conversation)
        events += await self.summarise_if_needed(conversation, turn)
        return events

    async def after_turn(self, record: Any) -> list[ev.AgentEvent]:
        """``agent.after_turn``: the turn's notes and task proposals are
        recorded, test runs after the last request are read, calibration."""
        conversation, turn = record.conversation, record.turn
        events = self._drain()
        events += await self.scan_test_runs(conversation, turn)
        events += await self._record_notes(conversation, turn)
        await self._calibrate(conversation)
        self._over_budget_warned.pop(conversation, None)
        return events

    async def _calibrate(self, conversation: int) -> None:
        usage = getattr(self.session.agent, "last_usage", None)
        model = await self.model(conversation)
        window = getattr(self.session.agent.settings, "context_window", None)
        if usage is not None and usage is not self._seen_usage:
            self._seen_usage = usage
            await self.calibration.observe(model, usage.prompt, usage.estimated_prompt)
        if window:
            state = await self.calibration.get(model)
            if state.context_window != window:
                await self.calibration.remember_window(model, window)

    async def observe_workspace(self, conversation: int, turn: int | None) -> list[ev.AgentEvent]:
        """Record the ``workdir`` fact (the conversation's directory) and the
        ``branch`` fact (from git) when they differ from the current ones."""
        events: list[ev.AgentEvent] = []
        workdir = str(getattr(self.session, "workdir", "") or "")
        if workdir:
            outcome = await self.facts.record(conversation, "workdir", "", workdir, source="tool",
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
        flags = self.flags()
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
            if isinstance(tests, dict) and tests.get("summary"):
                # run_command read the run already (wisp.core.outputs)
                outcome = await self.record_fact(
                    conversation, "tests", fact_name_for_command(command) if command.strip() else
                    str(tests.get("framework") or e.tool_name or "tests"),
                    _with_status(str(tests["summary"]), status), source="tool", method="tested",
                    tool=e.tool_name or "tool", turn=turn, entries=[e.number], notify=False)
            else:
                outcome = await self.record_test_run(conversation, command=command, output=e.content,
                                                     exit_status=status, turn=turn, entry=e.number,
                                                     tool=e.tool_name or "tool", notify=False)
            if outcome is not None and outcome.recorded and outcome.fact:
                events.append(fact_event(outcome.fact))
        return events

    async def summarise_if_needed(self, conversation: int, turn: int | None) -> list[ev.AgentEvent]:
        """Write running summary versions when the oldest turns must leave the
        window; events for each version, and a notice for turns kept whole,
        a failed side call, or a request still over its budget."""
        ctx = await self.compose(conversation)
        if not ctx.must_leave:
            return []
        facts_text = "\n".join(fact_line(v.fact) for v in ctx.facts)
        if ctx.task is not None:
            facts_text += "\n" + fact_line(ctx.task)
        else:
            task = await self.tasks.current(conversation)
            if task is not None:
                facts_text += "\n" + fact_line(task)
        outcome = await self.summariser.ensure(ctx, flags=ctx.flags, facts_text=facts_text, model=ctx.model,
                                               context_window=ctx.window, turn=turn)
        events: list[ev.AgentEvent] = []
        for v in outcome.versions:
            events.append(ev.SummaryChanged(conversation, v.version, tuple(v.covers)))
        if outcome.failed:
            events.append(ev.Notice(f"The running summary could not be written ({outcome.failed}); the older "
                                    "turns stay whole and the previous summary stays.", level="warning"))
        elif outcome.kept_whole:
            missing = ", ".join(outcome.missing[:8]) + ("…" if len(outcome.missing) > 8 else "")
            n = len(outcome.kept_whole)
            which = f"turn{'s' if n != 1 else ''} {turn_ranges(outcome.kept_whole)} stay{'s' if n == 1 else ''}"
            events.append(ev.Notice(f"The running summary left out {missing}, so {which} whole in the window.",
                                    level="warning"))
        after = await self.compose(conversation) if outcome.versions else ctx
        if after.over_budget and turn is not None and self._over_budget_warned.get(conversation) != turn:
            self._over_budget_warned[conversation] = turn
            events.append(ev.Notice(
                f"This request needs about {after.total:,} tokens of a {after.budget:,}-token budget "
                f"(window {after.window:,} less {after.reserve:,} reserved); turns leave the window only once "
                "a running summary covers them. /inspect context shows what takes the room.", level="warning"))
        return events

    # -- the API for tools and commands ------------------------------------------------

    async def record_fact(self, conversation: int, subject: str, name: str, value: str, *, source: str,
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

    async def record_test_run(self, conversation: int, *, command: str, output: str, exit_status: int | None,
                              turn: int | None, entry: int | None, tool: str = "run_command",
                              notify: bool = True) -> FactOutcome | None:
        """Record the ``tests`` fact of a test run (result and failing tests,
        :func:`wisp.core.outputs.read_test_run`), named after the command; ``None``
        when the output is not a test run. Recording the same result from the
        same entry twice changes nothing."""
        run = read_test_run(output, exit_status, command)
        if run is None:
            return None
        name = fact_name_for_command(command) if command.strip() else (tool or "tests")
        return await self.record_fact(conversation, "tests", name, run.value(), source="tool", method="tested",
                                      tool=tool, turn=turn, entries=[entry] if entry is not None else [],
                                      notify=notify)

    async def note(self, conversation: int, text: str, *, turn: int | None, entries: Iterable[int] = ()) -> str:
        """The model's ``note SUBJECT NAME = VALUE`` (wisp-memory-tool.txt,
        "note"): checks it now and returns the result line (``noted: …`` or
        ``error: …``); a kept note is recorded when the turn ends, as the
        model's proposal. ``note task …`` proposes the task."""
        try:
            subject, name, value = parse_assignment(text, command="note")
        except FactError as exc:
            return f"error: {exc}"
        if subject == "task":
            return await self.propose_task(conversation, value, turn=turn, entries=entries)
        key = (conversation, turn)
        if len(self._notes.get(key, [])) >= NOTES_PER_TURN:
            return f"error: at most {NOTES_PER_TURN} notes a turn; the rest were not kept"
        current = await self.facts.current_of(conversation, subject, name)
        label = f"{subject} {name}" if name else subject
        if current is not None and current.rank > 1:
            who = "the person" if current.rank >= 3 else f"a tool ({current.tool or 'tool'})"
            if current.value == value:
                return f"noted: {label} = {value} (already so, as {who} set it)"
            return f"error: {who} set {current.label}, and it stays: {current.value}"
        self._notes.setdefault(key, []).append(("fact", (subject, name, value, tuple(entries))))
        return f"noted: {label} = {value} (a proposal until the person keeps it)"

    async def propose_task(self, conversation: int, text: str, *, turn: int | None,
                           entries: Iterable[int] = (), method: str = "noted") -> str:
        """The model's ``task THE TASK; objective: …``: refused (naming the task
        that stays) when the person or a caller set one; else kept and
        recorded when the turn ends. Returns the result line."""
        try:
            value = parse_task(text)
        except FactError:
            return "error: write task THE TASK; objective: WHAT DONE LOOKS LIKE"
        key = (conversation, turn)
        if len(self._notes.get(key, [])) >= NOTES_PER_TURN:
            return f"error: at most {NOTES_PER_TURN} notes a turn; the rest were not kept"
        current = await self.tasks.current(conversation)
        if current is not None and current.rank > 1:
            return f"error: the person set the task, and it stays: {current.value}"
        self._notes.setdefault(key, []).append(("task", (value, method, tuple(entries))))
        return f"noted the task: {value}"

    async def _record_notes(self, conversation: int, turn: int) -> list[ev.AgentEvent]:
        events: list[ev.AgentEvent] = []
        for key in [k for k in self._notes if k[0] == conversation]:
            for kind, data in self._notes.pop(key):
                if kind == "fact":
                    subject, name, value, entries = data
                    outcome = await self.facts.record(conversation, subject, name, value, source="model",
                                                      method="noted", turn=key[1] or turn, entries=entries)
                else:
                    value, method, entries = data
                    result: TaskResult = await self.tasks.set(conversation, value, source="model", method=method,
                                                              turn=key[1] or turn, entries=entries)
                    outcome = result.outcome
                if outcome is not None and outcome.recorded and outcome.fact:
                    events.append(fact_event(outcome.fact))
        return events

    async def recall_fact(self, conversation: int, query: str, *, for_model: bool = True) -> str:
        """A fact's history in the reference document's format, or one line
        starting ``memory:`` saying what the conversation knows."""
        groups = await self.facts.history(conversation, query)
        if not groups:
            known = await self.facts.subjects_known(conversation)
            what = ", ".join(known) if known else "none yet"
            return f'memory: no fact "{query}"; the conversation knows: {what}'
        if for_model:
            return history_text(query, groups)
        return history_text(query, groups, recall_hint="/show entry N shows what a fact came from.",
                            end_marker=None)

    async def panel_state(self, conversation: int | None) -> PanelState:
        """What the side panels show for ``conversation`` (empty for ``None``)."""
        if conversation is None:
            return PanelState()
        views = await self.composer.fact_views(conversation)
        return PanelState(facts=[v for v in views if v.fact.subject != "task"],
                          task=next((v.fact for v in views if v.fact.subject == "task"), None),
                          summary=await self.summaries.latest(conversation))
