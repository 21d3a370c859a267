"""The conversation's task, with its objective: a fact of subject ``task``.

Rules (issue "Layered context", "Task"; wisp-memory-tool.txt, "task"):

- ``/task THE TASK; objective: WHAT DONE LOOKS LIKE`` sets the person's task;
  the objective may also follow ``. Objective:`` or ``, objective:``, and is
  kept with the task as one value, ``THE TASK; objective: WHAT DONE LOOKS
  LIKE``. The value is cut to 300 characters.
- The task is shown next to each request from the next turn on: a task
  recorded during (or after) turn N shows from turn N + 1
  (:func:`task_visible`).
- A task the person (or a caller) set is never replaced by the model's: the
  model's proposal is refused and the refusal names the task as it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .facts import TASK_MAX_CHARS, Fact, FactBook, FactError, FactOutcome, _strip_quotes, cap_value

__all__ = ["parse_task", "task_visible", "describe_task", "TaskBook", "TaskResult"]

_OBJECTIVE = re.compile(r"\s*(?:;|\.|,|:|-|—)?\s*\bobjective\s*:\s*", re.IGNORECASE)
_LEADING_OBJECTIVE = re.compile(r"^\s*objective\s*:", re.IGNORECASE)


def parse_task(text: str) -> str:
    """The task's stored value from what was typed (``/task``, the memory
    tool's ``task`` verb, an MCP caller's ``task``; the one parser of a
    task): whitespace collapsed, quotes dropped, the objective (after
    ``objective:``, ``; objective:``, ``. Objective:`` …) normalised to
    ``TASK; objective: OBJECTIVE``, cut to :data:`TASK_MAX_CHARS` (300)
    characters (wisp-memory-tool.txt, "task"). Raises :class:`FactError`
    when there is no task before the objective."""
    raw = _strip_quotes(" ".join((text or "").split()))
    if not raw or _LEADING_OBJECTIVE.match(raw):
        raise FactError("write /task THE TASK; objective: WHAT DONE LOOKS LIKE")
    m = _OBJECTIVE.search(raw)
    if m:
        task = raw[: m.start()].strip().rstrip(";.,:-—").strip()
        objective = _strip_quotes(raw[m.end():].strip())
        if not task:
            raise FactError("write /task THE TASK; objective: WHAT DONE LOOKS LIKE")
        value = f"{task}; objective: {objective}" if objective else task
    else:
        value = raw
    return cap_value(value, TASK_MAX_CHARS)


def task_visible(fact: Fact | None, turn: int | None) -> bool:
    """Whether the task fact shows in a request of turn ``turn``: from the
    turn after the one it was recorded in (``turn`` ``None`` means the next
    turn, as ``/inspect context`` composes it)."""
    if fact is None:
        return False
    if turn is None or fact.turn is None:
        return True
    return fact.turn < turn


@dataclass(frozen=True)
class TaskResult:
    """What a task change did: ``ok``, the ``text`` to show (the reference's
    forms: ``noted the task: …``, ``error: the person set the task, and it
    stays: …``), and the current task ``fact`` afterwards (or ``None``)."""

    ok: bool
    text: str
    fact: Fact | None
    outcome: FactOutcome | None = None


class TaskBook:
    """The task of each conversation, over a :class:`FactBook`."""

    def __init__(self, facts: FactBook) -> None:
        self.facts = facts

    async def current(self, conversation: int) -> Fact | None:
        """The current task fact, or ``None``."""
        return await self.facts.current_of(conversation, "task")

    async def set(self, conversation: int, text: str, *, source: str = "person", method: str = "set",
                  turn: int | None = None, entries: tuple[int, ...] = ()) -> TaskResult:
        """Set (``person``) or propose (``model``, method ``noted`` or
        ``inferred``) the task. A model's task never replaces the person's:
        the result is then an error naming the task that stays. Raises
        :class:`FactError` for an empty task."""
        value = parse_task(text)
        outcome = await self.facts.record(conversation, "task", "", value, source=source, method=method,
                                          turn=turn, entries=entries)
        if outcome.refused_by is not None:
            who = "the person" if outcome.refused_by.rank >= 3 else "a tool"
            return TaskResult(False, f"error: {who} set the task, and it stays: {outcome.refused_by.value}",
                              outcome.refused_by, outcome)
        if source == "model":
            return TaskResult(True, f"noted the task: {value}", outcome.fact, outcome)
        return TaskResult(True, f"task: {value}", outcome.fact, outcome)

    async def clear(self, conversation: int, *, turn: int | None = None) -> Fact | None:
        """Clear the task (``/task clear``): the current task is superseded
        without a replacement. Returns the cleared version, or ``None`` when
        there was no task."""
        current = await self.current(conversation)
        if current is None:
            return None
        return await self.facts.forget(conversation, current.number, turn=turn)


def describe_task(fact: Fact | None) -> str:
    """The task as ``/task`` shows it, with who set it and when it shows."""
    if fact is None:
        return "No task. Set one: `/task THE TASK; objective: WHAT DONE LOOKS LIKE`."
    who = {"person": "you", "tool": "a tool", "model": "the model"}.get(fact.source, fact.source)
    extra = " (a proposal; `/fact keep " + fact.vid + "` keeps it)" if fact.proposal else ""
    return f"**Task** ({fact.vid}, set by {who}{extra}): {fact.value}"
