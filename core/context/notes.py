"""The model's notes and task proposals: checked when made, recorded when the turn ends.

What the memory tool's ``note`` and ``task`` verbs (and, later, the fact
distiller) write goes through :class:`ModelNotes`, the one place with these
rules (wisp-memory-tool.txt, "note" and "task"; issue "One core, built
once", "One path per rule"):

- at most :data:`NOTES_PER_TURN` (12) notes a turn, tasks included; the
  13th gets ``error: at most 12 notes a turn; the rest were not kept``;
- a note never replaces a fact the person or a tool set, and a task is
  refused, naming the task as it stands, when the person or a caller set
  one: both by :func:`~wisp.core.context.facts.outranks`, the precedence
  rule's one place;
- a kept note is recorded as the model's proposal (method ``noted``, or
  ``inferred`` for the distiller) when the turn ends (:meth:`ModelNotes.record`);
- a kept note's result is the reference's line, ``noted: tests ci = green``;
  the first one of a conversation adds ``(a proposal until the person keeps
  it)``, once, which is where it helps the model (it learns that a note does
  not outrank the person), and the facts layer marks each proposal after
  that, so repeating it on every note would only cost tokens.

It also answers the memory tool's reads of the layered context: a fact's
history, the task, the running summary's versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .. import events as ev
from .facts import FactBook, FactError, fact_event, history_text, outranks, parse_assignment, who_set
from .summary import SummaryBook
from .task import TaskBook, parse_task

__all__ = ["NOTES_PER_TURN", "NoteOutcome", "TaskView", "SummaryView", "ModelNotes", "fact_history"]

#: The model may note at most this many facts (tasks included) a turn (wisp-memory-tool.txt, "note").
NOTES_PER_TURN = 12


@dataclass(frozen=True)
class NoteOutcome:
    """What a note or task request did now: ``line`` (the result, ``noted: …``
    or ``error: …``) and ``kept`` (it will be recorded when the turn ends)."""

    line: str
    kept: bool


@dataclass(frozen=True)
class TaskView:
    """The task as it stands: ``value`` (``THE TASK; objective: …``), ``vid``
    (``c4``), ``who`` (``the person``, ``a caller``, ``a tool``, ``the
    model``), ``created_at`` (UTC ISO), ``turn``, ``proposal``."""

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


async def fact_history(facts: FactBook, conversation: int, query: str, *, for_model: bool = True) -> tuple[str, list[str]]:
    """A fact's history in the reference document's format, and the version
    ids it shows; or one line starting ``memory:`` (no ids) saying what the
    conversation knows. ``for_model`` False gives the person's form (``/fact
    history``: names ``/show entry N`` and has no end marker)."""
    groups = await facts.history(conversation, query)
    if not groups:
        known = await facts.subjects_known(conversation)
        if known:
            what = ", ".join(known)
        else:
            what = "no facts yet (note one: note entity release codename = BLUE HERON)" if for_model else "none yet"
        return f'memory: no fact "{query}"; the conversation knows: {what}', []
    vids = [f.vid for _, versions in groups for f in versions]
    if for_model:
        return history_text(query, groups), vids
    return history_text(query, groups, recall_hint="/show entry N shows what a fact came from.",
                        end_marker=None), vids


class ModelNotes:
    """The model's notes for one session (see the module doc).

    ``ModelNotes(facts, tasks, summaries)``: the conversation's
    :class:`~wisp.core.context.facts.FactBook`,
    :class:`~wisp.core.context.task.TaskBook` and
    :class:`~wisp.core.context.summary.SummaryBook`.
    """

    @classmethod
    def over(cls, store: Any, audit: Any = None) -> "ModelNotes":
        """The notes over ``store`` (a :class:`wisp.core.store.Store`) and
        ``audit`` (an :class:`wisp.core.audit.AuditLog` or ``None``), with
        their own books."""
        facts = FactBook(store, audit)
        return cls(facts, TaskBook(facts), SummaryBook(store, audit))

    def __init__(self, facts: FactBook, tasks: TaskBook, summaries: SummaryBook) -> None:
        self.facts = facts
        self.tasks = tasks
        self.summaries_book = summaries
        # (conversation, turn) -> kept notes, in order: ("fact", subject, name, value, entries, method)
        # or ("task", value, entries, method)
        self._kept: dict[tuple[int, int | None], list[tuple]] = {}
        # conversations whose model has been told that its notes are proposals
        self._told: set[int] = set()

    def _full(self, conversation: int, turn: int | None) -> NoteOutcome | None:
        if len(self._kept.get((conversation, turn), [])) >= NOTES_PER_TURN:
            return NoteOutcome(f"error: at most {NOTES_PER_TURN} notes a turn; the rest were not kept", False)
        return None

    async def note(self, conversation: int, turn: int | None, subject: str, name: str, value: str, *,
                   entries: Iterable[int] = (), method: str = "noted") -> NoteOutcome:
        """Check the model's note ``SUBJECT NAME = VALUE`` now and keep it to
        be recorded when the turn ends. ``note task …`` proposes the task."""
        text = f"{subject} {name} = {value}" if name else f"{subject} = {value}"
        try:
            subject, name, value = parse_assignment(text, command="note")
        except FactError as exc:
            return NoteOutcome(f"error: {exc}", False)
        if subject == "task":
            return await self.propose_task(conversation, turn, value, entries=entries, method=method)
        full = self._full(conversation, turn)
        if full is not None:
            return full
        current = await self.facts.current_of(conversation, subject, name)
        label = f"{subject} {name}" if name else subject
        if outranks(current, "model"):
            assert current is not None
            if current.value == value:
                return NoteOutcome(f"noted: {label} = {value} (already so, as {who_set(current)} set it)", False)
            return NoteOutcome(f"error: {who_set(current)} set {current.label}, and it stays: {current.value}", False)
        said = await self._proposal_said(conversation)
        self._kept.setdefault((conversation, turn), []).append(("fact", subject, name, value, tuple(entries), method))
        self._told.add(conversation)
        if said:
            return NoteOutcome(f"noted: {label} = {value}", True)
        return NoteOutcome(f"noted: {label} = {value} (a proposal until the person keeps it)", True)

    async def _proposal_said(self, conversation: int) -> bool:
        """Whether the model was already told, in this conversation, that its notes are
        proposals: by an earlier note's result this session, or by a noted fact it holds
        (the facts layer marks each proposal from then on)."""
        if conversation in self._told or any(k[0] == conversation and v for k, v in self._kept.items()):
            return True
        try:
            current = await self.facts.current(conversation)
        except Exception:
            return False
        return any(f.source == "model" and f.method == "noted" for f in current)

    async def propose_task(self, conversation: int, turn: int | None, text: str, *, entries: Iterable[int] = (),
                           method: str = "noted") -> NoteOutcome:
        """The model's ``task THE TASK; objective: …``: refused, naming the
        task that stays, when the person or a caller set one; else kept and
        recorded when the turn ends."""
        try:
            value = parse_task(text)
        except FactError:
            return NoteOutcome("error: write task THE TASK; objective: WHAT DONE LOOKS LIKE", False)
        full = self._full(conversation, turn)
        if full is not None:
            return full
        current = await self.tasks.current(conversation)
        if outranks(current, "model"):
            assert current is not None
            return NoteOutcome(f"error: {who_set(current)} set the task, and it stays: {current.value}", False)
        self._kept.setdefault((conversation, turn), []).append(("task", value, tuple(entries), method))
        return NoteOutcome(f"noted the task: {value}", True)

    async def record(self, conversation: int, turn: int) -> list[ev.FactChanged]:
        """Record the kept notes of ``conversation``'s ended turns as the
        model's proposals; returns a :class:`~wisp.core.events.FactChanged`
        for each that changed a fact."""
        events: list[ev.FactChanged] = []
        for key in [k for k in self._kept if k[0] == conversation]:
            at = key[1] if key[1] is not None else turn
            for kept in self._kept.pop(key):
                if kept[0] == "fact":
                    _, subject, name, value, entries, method = kept
                    outcome = await self.facts.record(conversation, subject, name, value, source="model",
                                                      method=method, turn=at, entries=entries)
                else:
                    _, value, entries, method = kept
                    outcome = (await self.tasks.set(conversation, value, source="model", method=method, turn=at,
                                                    entries=entries)).outcome
                if outcome is not None and outcome.recorded and outcome.fact:
                    events.append(fact_event(outcome.fact))
        return events

    async def recall_fact(self, conversation: int, query: str) -> tuple[str, list[str]]:
        """A fact's history for the model (see :func:`fact_history`)."""
        return await fact_history(self.facts, conversation, query)

    async def task(self, conversation: int) -> TaskView | None:
        """The task as it stands, or ``None``."""
        fact = await self.tasks.current(conversation)
        if fact is None:
            return None
        who = who_set(fact)
        if who.startswith("a tool"):
            who = "a tool"
        return TaskView(fact.value, fact.vid, who, fact.created_at, fact.turn, bool(fact.proposal))

    async def summaries(self, conversation: int) -> list[SummaryView]:
        """The running summary's versions, oldest first."""
        return [SummaryView(v.version, v.text, tuple(v.covers), v.created_at, v.model)
                for v in await self.summaries_book.versions(conversation)]
