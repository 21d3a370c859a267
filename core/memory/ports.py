"""What the memory tool needs from the layered context: facts, the task, the running summary.

The tool reads and writes these only through a :class:`ContextPort`, so the
layered context (issue "Layered context", :mod:`wisp.core.context`) can
change underneath without touching the verbs. Two ports exist:

- :class:`ManagerPort` wraps a session's
  :class:`~wisp.core.context.manager.ContextManager`, which checks a note
  at once and records it as the model's proposal when the turn ends (its
  own after-turn hook, writing ``fact.recorded``);
- :class:`BookPort` works on a bare store (an agent made directly, tests):
  the same rules over :class:`~wisp.core.context.facts.FactBook` and
  :class:`~wisp.core.context.task.TaskBook`, with its own after-turn hook.

Rules kept by both (wisp-memory-tool.txt, "note", "task"): at most 12 notes
a turn, tasks included (the 13th gets ``error: at most 12 notes a turn; the
rest were not kept``); a note never replaces a fact the person or a tool
set (the result names it); a task is refused, naming the task as it stands,
when the person or a caller set one; notes are recorded when the turn ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .limits import MAX_NOTES_PER_TURN

__all__ = ["TaskView", "SummaryView", "NoteOutcome", "ContextPort", "ManagerPort", "BookPort", "port_for"]


@dataclass(frozen=True)
class TaskView:
    """The task as it stands: ``value`` (``THE TASK; objective: …``),
    ``vid`` (``c4``), ``who`` (``the person``, ``a caller``, ``a tool``,
    ``the model``), ``created_at`` (UTC ISO), ``turn``, ``proposal``."""

    value: str
    vid: str
    who: str
    created_at: str
    turn: int | None
    proposal: bool


@dataclass(frozen=True)
class SummaryView:
    """One running summary version: ``version``, ``text``, ``covers`` (turn
    numbers), ``created_at`` (UTC ISO), ``model``."""

    version: int
    text: str
    covers: tuple[int, ...]
    created_at: str
    model: str | None


@dataclass(frozen=True)
class NoteOutcome:
    """What a note or task request did now: ``line`` (the result, ``noted: …``
    or ``error: …``) and ``kept`` (it will be recorded when the turn ends)."""

    line: str
    kept: bool


class ContextPort(Protocol):
    """The layered context as the memory tool uses it. ``conversation`` is
    the store's conversation id, ``turn`` the turn number."""

    async def note(self, conversation: int, turn: int | None, subject: str, name: str, value: str) -> NoteOutcome:
        """Check and keep the model's note (recorded when the turn ends)."""
        ...

    async def propose_task(self, conversation: int, turn: int | None, value: str) -> NoteOutcome:
        """Check and keep the model's task proposal (recorded when the turn ends)."""
        ...

    async def recall_fact(self, conversation: int, query: str) -> tuple[str, list[str]]:
        """A fact's history in the reference's format (or one ``memory:`` line)
        and the version ids it shows."""
        ...

    async def task(self, conversation: int) -> TaskView | None:
        """The task as it stands, or ``None``."""
        ...

    async def summaries(self, conversation: int) -> list[SummaryView]:
        """The running summary's versions, oldest first."""
        ...


def _who(fact: Any) -> str:
    if fact.source == "person":
        return "a caller" if getattr(fact, "method", "") == "caller" else "the person"
    if fact.source == "tool":
        return "a tool"
    return "the model"


def _task_view(fact: Any) -> TaskView | None:
    if fact is None:
        return None
    return TaskView(fact.value, fact.vid, _who(fact), fact.created_at, fact.turn, bool(fact.proposal))


def _summary_view(v: Any) -> SummaryView:
    return SummaryView(v.version, v.text, tuple(v.covers), v.created_at, getattr(v, "model", None))


async def _fact_history(facts: Any, conversation: int, query: str) -> tuple[str, list[str]]:
    from ..context.facts import history_text

    groups = await facts.history(conversation, query)
    if not groups:
        known = await facts.subjects_known(conversation)
        what = ", ".join(known) if known else "no facts yet (note one: note entity release codename = BLUE HERON)"
        return f'memory: no fact "{query}"; the conversation knows: {what}', []
    return history_text(query, groups), [f.vid for _, versions in groups for f in versions]


class ManagerPort:
    """A session's :class:`~wisp.core.context.manager.ContextManager` as a port."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    async def note(self, conversation: int, turn: int | None, subject: str, name: str, value: str) -> NoteOutcome:
        text = f"{subject} {name} = {value}" if name else f"{subject} = {value}"
        line = await self.manager.note(conversation, text, turn=turn)
        return NoteOutcome(line, line.startswith("noted"))

    async def propose_task(self, conversation: int, turn: int | None, value: str) -> NoteOutcome:
        line = await self.manager.propose_task(conversation, value, turn=turn)
        return NoteOutcome(line, line.startswith("noted"))

    async def recall_fact(self, conversation: int, query: str) -> tuple[str, list[str]]:
        return await _fact_history(self.manager.facts, conversation, query)

    async def task(self, conversation: int) -> TaskView | None:
        return _task_view(await self.manager.tasks.current(conversation))

    async def summaries(self, conversation: int) -> list[SummaryView]:
        return [_summary_view(v) for v in await self.manager.summaries.versions(conversation)]


class BookPort:
    """The port over a bare store and audit log (no session): the same rules
    as :class:`ManagerPort`, with the turn's notes recorded by
    :meth:`after_turn` (install it in ``agent.after_turn``)."""

    def __init__(self, store: Any, audit: Any = None) -> None:
        from ..context.facts import FactBook
        from ..context.summary import SummaryBook
        from ..context.task import TaskBook

        self.facts = FactBook(store, audit)
        self.tasks = TaskBook(self.facts)
        self.summary_book = SummaryBook(store, audit)
        self._pending: dict[tuple[int, int | None], list[tuple[str, tuple[Any, ...]]]] = {}

    def _count(self, conversation: int, turn: int | None) -> int:
        return len(self._pending.get((conversation, turn), []))

    async def note(self, conversation: int, turn: int | None, subject: str, name: str, value: str) -> NoteOutcome:
        if self._count(conversation, turn) >= MAX_NOTES_PER_TURN:
            return NoteOutcome(f"error: at most {MAX_NOTES_PER_TURN} notes a turn; the rest were not kept", False)
        current = await self.facts.current_of(conversation, subject, name)
        if current is not None and current.rank > 1 and current.value != value:
            who = "the person" if current.rank >= 3 else f"a tool ({current.tool or 'tool'})"
            return NoteOutcome(f"error: {who} set {current.label}, and it stays: {current.value}", False)
        self._pending.setdefault((conversation, turn), []).append(("fact", (subject, name, value)))
        label = f"{subject} {name}" if name else subject
        return NoteOutcome(f"noted: {label} = {value} (a proposal until the person keeps it)", True)

    async def propose_task(self, conversation: int, turn: int | None, value: str) -> NoteOutcome:
        if self._count(conversation, turn) >= MAX_NOTES_PER_TURN:
            return NoteOutcome(f"error: at most {MAX_NOTES_PER_TURN} notes a turn; the rest were not kept", False)
        current = await self.tasks.current(conversation)
        if current is not None and current.rank > 1:
            return NoteOutcome(f"error: {_who(current)} set the task, and it stays: {current.value}", False)
        self._pending.setdefault((conversation, turn), []).append(("task", (value,)))
        return NoteOutcome(f"noted the task: {value}", True)

    async def recall_fact(self, conversation: int, query: str) -> tuple[str, list[str]]:
        return await _fact_history(self.facts, conversation, query)

    async def task(self, conversation: int) -> TaskView | None:
        return _task_view(await self.tasks.current(conversation))

    async def summaries(self, conversation: int) -> list[SummaryView]:
        return [_summary_view(v) for v in await self.summary_book.versions(conversation)]

    async def after_turn(self, record: Any) -> list[Any]:
        """Record the ended turn's notes as the model's proposals (method
        ``noted``); :class:`~wisp.core.context.facts.FactBook` writes each
        one's ``fact.recorded`` audit event. Returns no events."""
        for key in [k for k in self._pending if k[0] == record.conversation]:
            for kind, data in self._pending.pop(key):
                turn = key[1] if key[1] is not None else record.turn
                if kind == "fact":
                    subject, name, value = data
                    await self.facts.record(record.conversation, subject, name, value, source="model",
                                            method="noted", turn=turn)
                else:
                    await self.tasks.set(record.conversation, data[0], source="model", method="noted", turn=turn)
        return []


def port_for(session: Any = None, *, store: Any = None, audit: Any = None) -> ContextPort | None:
    """The port for a session (its context manager) or, without one, a
    :class:`BookPort` over ``store``; ``None`` when the layered context
    cannot be used (its modules missing)."""
    manager = getattr(session, "context", None) if session is not None else None
    if manager is not None and hasattr(manager, "note") and hasattr(manager, "propose_task"):
        return ManagerPort(manager)
    try:
        return BookPort(store if store is not None else session.store,
                        audit if audit is not None else getattr(session, "audit", None))
    except Exception:
        return None
