"""The model's own bookkeeping: the fact distiller after a turn, and the assessment before a request.

Two side calls the reference document names (wisp-memory-tool.txt: "as the
fact distiller, the running summary, and triage are run"; "with the
per-request assessment on, the model's task is also inferred before each
request"), built here for issue "The model's own bookkeeping":

- :class:`FactDistiller` (config ``context.distill``): after a turn ends,
  it reads the turn's prompt and final reply, cut to
  ``context.distill_tokens``, and proposes the facts the turn established,
  of the subjects the model may note (decision, preference, entity, task),
  each with the entry it came from. When neither the prompt nor the reply
  states a decision, preference or name
  (:func:`wisp.core.statements.states_something`), no model call is
  made. Proposals are the model's, method ``inferred``, through
  :class:`~wisp.core.context.notes.ModelNotes`: the precedence rule and the
  limit of 12 a turn hold as for notes.
- :class:`TaskAssessor` (config ``context.assess``): before each request in
  chat, it infers the conversation's task and objective from the recent
  turns and records it as the model's (method ``inferred``), unless the
  person or a caller set one. It is skipped when nothing changed since the
  last assessment (same turns, same task).

Both ask through the :class:`~wisp.core.sidecall.SideCall` handed in, with
a JSON schema for the endpoints that constrain their output, and read a
plain answer too. Each call's cost (estimated tokens in and out, seconds)
is returned as a :class:`SideCost` for ``/inspect context`` and the status
line.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..sidecall import SideCall, SideCallError, read_json_object, side_messages
from ..tokens import CHARS_PER_TOKEN, estimate_tokens
from .facts import FactError, parse_assignment
from .notes import ModelNotes, NoteOutcome
from ..statements import states_something
from .task import parse_task

__all__ = ["DISTILL_SUBJECTS", "DISTILL_SCHEMA", "TASK_SCHEMA", "SideCost", "Distilled", "FactDistiller",
           "TaskAssessor", "parse_proposals"]

#: The subjects the distiller may propose (the ones the model may note).
DISTILL_SUBJECTS = ("decision", "preference", "entity", "task")

DISTILL_RULES = (
    "You read one turn of a conversation and list the facts it established that are worth keeping: "
    "decisions the person made or agreed to, their preferences, the names of things (codenames, people, "
    "services), and the task they set. Only what the turn states; nothing you guess. Give each fact a "
    "subject (decision, preference, entity or task), a short name and its value. If the turn states none, "
    "give none."
)
#: The JSON schema of the distiller's answer (Ollama ``format``, OpenAI ``response_format``).
DISTILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "maxItems": 12, "items": {
        "type": "object",
        "properties": {"subject": {"type": "string", "enum": list(DISTILL_SUBJECTS)},
                       "name": {"type": "string"}, "value": {"type": "string"}},
        "required": ["subject", "name", "value"]}}},
    "required": ["facts"],
}

ASSESS_RULES = (
    "You read the recent turns of a conversation and say what task the person is working on and what done "
    "looks like, in one line: THE TASK; objective: WHAT DONE LOOKS LIKE. If no task is clear, answer NONE."
)
#: The JSON schema of the assessment's answer.
TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string"}, "objective": {"type": "string"}},
    "required": ["task", "objective"],
}
#: Tokens the distiller's answer may use.
DISTILL_ANSWER_TOKENS = 256
#: Tokens the assessment's answer may use.
ASSESS_ANSWER_TOKENS = 96
#: The recent turns an assessment reads.
ASSESS_TURNS = 4


@dataclass(frozen=True)
class SideCost:
    """What one kind of side call cost in a turn: ``kind`` (``distiller``,
    ``assessment``), ``calls``, ``tokens`` (estimated, prompt and answer) and
    ``seconds`` (wall clock)."""

    kind: str
    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        """``distiller: 1 call, about 412 tokens, 1.8 s`` (or ``no model call``)."""
        if not self.calls:
            return f"{self.kind}: no model call"
        return (f"{self.kind}: {self.calls} call{'s' if self.calls != 1 else ''}, about {self.tokens:,} tokens, "
                f"{self.seconds:.1f} s")


@dataclass
class Distilled:
    """What a distillation did: the ``proposals`` kept (result lines) and
    ``refused`` (lines of proposals the rules refused), and its ``cost``."""

    proposals: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    cost: SideCost = field(default_factory=lambda: SideCost("distiller"))


def _cut(text: str, tokens: int) -> str:
    limit = max(200, int(tokens * CHARS_PER_TOKEN))
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters not shown …]\n{text[-half:]}"


_SUBJECT_WORD = re.compile(r"\b(?:" + "|".join(DISTILL_SUBJECTS) + r")\b", re.IGNORECASE)


def parse_proposals(answer: str) -> list[tuple[str, str, str]]:
    """``(subject, name, value)`` from the distiller's answer: the JSON of
    :data:`DISTILL_SCHEMA`, or, from a model that answered in prose, lines
    written as a note (``decision csv separator = semicolon``). Never
    raises; unknown subjects are left out."""
    out: list[tuple[str, str, str]] = []
    text = (answer or "").strip()
    data = read_json_object(text)
    if isinstance(data, dict) and isinstance(data.get("facts"), list):
        for item in data["facts"]:
            if not isinstance(item, dict):
                continue
            subject = str(item.get("subject") or "").strip().lower()
            name, value = str(item.get("name") or "").strip(), str(item.get("value") or "").strip()
            if subject in DISTILL_SUBJECTS and value:
                out.append((subject, name, value))
        return out
    for line in text.splitlines():
        at = _SUBJECT_WORD.search(line)  # "Sure! decision deploy day = Friday": from the subject on
        if at is None:
            continue
        line = line[at.start():].strip()
        if "=" not in line and ":" not in line:
            continue
        try:
            subject, name, value = parse_assignment(line, command="note")
        except FactError:
            continue
        if subject in DISTILL_SUBJECTS:
            out.append((subject, name, value))
    return out


class FactDistiller:
    """Proposes the facts a turn established (see the module doc).
    ``FactDistiller(side_call, notes, budget_tokens)``."""

    def __init__(self, side_call: SideCall | None, notes: ModelNotes, budget_tokens: int = 1024) -> None:
        self.side_call = side_call
        self.notes = notes
        self.budget_tokens = budget_tokens

    async def distill(self, conversation: int, turn: int, prompt: str, reply: str, *,
                      prompt_entry: int | None, reply_entry: int | None, prefix: str = "") -> Distilled:
        """Distil turn ``turn`` of ``conversation`` (its ``prompt`` and final
        ``reply`` and their entry numbers). ``prefix`` is the start of the
        chat's system message, sent first so that the server's cache serves
        it (:func:`~wisp.core.sidecall.side_messages`). Proposals are kept in
        the notes (the caller records them). Never raises for the side call's
        failure."""
        out = Distilled()
        if self.side_call is None or not states_something(prompt, reply):
            return out  # nothing of the kind was stated: no model call
        half = max(64, self.budget_tokens // 2)
        user = (f"The person (entry {prompt_entry}):\n{_cut(prompt, half)}\n\n"
                f"The assistant's reply (entry {reply_entry}):\n{_cut(reply, half)}")
        messages = side_messages(DISTILL_RULES, user, prefix)
        started = time.monotonic()
        try:
            answer = await self.side_call.complete(messages, max_tokens=DISTILL_ANSWER_TOKENS, schema=DISTILL_SCHEMA)
        except SideCallError as exc:
            out.refused.append(f"the distiller's side call failed: {exc}")
            answer = ""
        out.cost = SideCost("distiller", 1, estimate_tokens(DISTILL_RULES + user) + estimate_tokens(answer),
                            time.monotonic() - started)
        for subject, name, value in parse_proposals(answer):
            entry = prompt_entry if _said_in(value, prompt) or reply_entry is None else reply_entry
            entries = tuple(e for e in (entry,) if e is not None)
            if subject == "task":
                result: NoteOutcome = await self.notes.propose_task(conversation, turn, value, entries=entries,
                                                                    method="inferred")
            else:
                result = await self.notes.note(conversation, turn, subject, name, value, entries=entries,
                                               method="inferred")
            (out.proposals if result.kept else out.refused).append(result.line)
        return out


def _said_in(value: str, text: str) -> bool:
    words = [w for w in re.findall(r"\w+", value.lower()) if len(w) > 2]
    return bool(words) and sum(w in text.lower() for w in words) * 2 >= len(words)


class TaskAssessor:
    """Infers the conversation's task before each request (see the module
    doc). ``TaskAssessor(side_call, notes)``."""

    def __init__(self, side_call: SideCall | None, notes: ModelNotes) -> None:
        self.side_call = side_call
        self.notes = notes
        self._last: dict[int, tuple[Any, ...]] = {}

    async def assess(self, conversation: int, turn: int, recent: list[tuple[int, str, str]]) -> tuple[
            list[ev.FactChanged], SideCost]:
        """Before a request of turn ``turn``: ``recent`` is the last turns as
        ``(turn, prompt, reply)``. Returns the events of a task recorded and
        the cost. Skipped, at no model cost, when the person or a caller set
        the task, or when the turns and the task are the ones last assessed."""
        cost = SideCost("assessment")
        current = await self.notes.tasks.current(conversation)
        if self.side_call is None or (current is not None and current.source == "person"):
            return [], cost
        signature = (tuple(t for t, _, _ in recent), current.vid if current is not None else None)
        if not recent or self._last.get(conversation) == signature:
            return [], cost
        self._last[conversation] = signature
        lines = [f"Turn {t}:\nperson: {_cut(p, 200)}\nassistant: {_cut(r, 200)}" for t, p, r in recent]
        if current is not None:
            lines.append(f"The task as it stands: {current.value}")
        messages = [{"role": "system", "content": ASSESS_RULES}, {"role": "user", "content": "\n\n".join(lines)}]
        started = time.monotonic()
        try:
            answer = await self.side_call.complete(messages, max_tokens=ASSESS_ANSWER_TOKENS, schema=TASK_SCHEMA)
        except SideCallError:
            answer = ""
        cost = SideCost("assessment", 1, estimate_tokens(ASSESS_RULES + messages[1]["content"])
                        + estimate_tokens(answer), time.monotonic() - started)
        value = _task_from(answer)
        if value is None or (current is not None and current.value == value):
            return [], cost
        result = await self.notes.propose_task(conversation, turn, value, method="inferred")
        if not result.kept:
            return [], cost
        return await self.notes.record(conversation, turn), cost


def _task_from(answer: str) -> str | None:
    """The task's value from the assessment's answer (JSON or a line), or ``None``."""
    text = (answer or "").strip()
    if not text or text.upper().startswith("NONE"):
        return None
    data = read_json_object(text)
    if isinstance(data, dict):
        task, objective = str(data.get("task") or "").strip(), str(data.get("objective") or "").strip()
        if not task or task.upper() == "NONE":
            return None
        text = f"{task}; objective: {objective}" if objective else task
    try:
        return parse_task(text.splitlines()[0] if "{" not in text else text)
    except FactError:
        return None
