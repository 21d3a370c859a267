"""Facts: what the conversation knows, with versions, sources and precedence.

Rules (issue "Layered context", "Facts"; wisp-memory-tool.txt, "note" and
"recall"):

- A fact has a subject (one of :data:`SUBJECTS`), a name (``""`` when the
  subject needs none, such as ``branch``), a value, a version id (``c1``,
  ``c2`` …, counted per conversation), a source (``person``, ``tool`` or
  ``model``), a method (``set``, ``observed``, ``noted``, ``inferred``,
  ``tested``), a time, a state (``current`` or ``superseded``) and the
  entries it came from.
- Precedence: the person's fact is above a tool's, a tool's above the
  model's (:data:`RANK`). A fact from a lower source never replaces one from
  a higher source: :meth:`FactBook.record` refuses it and names the fact
  that stands. A model's note the person kept (``/fact keep ID``) ranks as
  the person's.
- A model's note is a proposal until the person keeps it.
- ``forget`` supersedes a fact without replacing it.
- Recording the value a fact already has from the same source changes
  nothing (so the branch, checked before every request, only gets a new
  version when it changes).
- Every change (recorded, forgotten, kept) writes a ``fact.recorded`` audit
  event.

This module holds the rules and the queries (on ``store.db``); it never
calls the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

from .. import events as ev
from ..store import fits
from ..clock import utc_now

__all__ = [
    "SUBJECTS",
    "SOURCES",
    "RANK",
    "NAMED_SUBJECTS",
    "UNNAMED_SUBJECTS",
    "FACT_MAX_CHARS",
    "TASK_MAX_CHARS",
    "FactError",
    "Fact",
    "FactOutcome",
    "FactBook",
    "parse_assignment",
    "parse_fact_id",
    "local_time",
    "fact_line",
    "history_text",
]

#: Subjects a fact may have (issue "Layered context", "Facts").
SUBJECTS = ("task", "decision", "preference", "entity", "tests", "workdir", "branch")
#: Sources, highest first.
SOURCES = ("person", "tool", "model")
#: Precedence of sources: a higher rank is never replaced by a lower one.
RANK = {"person": 3, "tool": 2, "model": 1}
#: Subjects whose facts must be named (``entity release codename = …``).
NAMED_SUBJECTS = ("entity", "decision")
#: Subjects with one value and no name.
UNNAMED_SUBJECTS = ("task", "workdir", "branch")
#: A fact's value is cut to this many characters (wisp's own limit, so one
#: fact cannot fill the window); the task to :data:`TASK_MAX_CHARS`.
FACT_MAX_CHARS = 500
#: The task is cut to 300 characters (issue "Layered context", "Task").
TASK_MAX_CHARS = 300

_EXAMPLE = "entity release codename = BLUE HERON"


def cap_value(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, ending ``…`` when cut: the one
    place a fact's or the task's length cap is applied (the task's 300 is
    wisp-memory-tool.txt's, "task")."""
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def outranks(current: "Fact | None", source: str) -> bool:
    """The precedence rule, in its one place: True when ``current`` (the
    fact as it stands, or ``None``) may not be replaced by a value from
    ``source`` (``person``, ``tool`` or ``model``). The person's fact is
    never replaced by a tool's, nor a tool's by the model's; a kept model
    note ranks as the person's (issue "Layered context", "Facts";
    wisp-memory-tool.txt, "note"). Raises ``KeyError`` for an unknown source."""
    return current is not None and current.rank > RANK[source]


def who_set(fact: "Fact") -> str:
    """Who set ``fact``, as result lines name them: ``the person``, ``a
    caller`` (an MCP caller's task), ``a tool (git)`` or ``the model``."""
    if fact.rank >= RANK["person"]:
        return "a caller" if fact.method == "caller" else "the person"
    if fact.source == "tool":
        return f"a tool ({fact.tool})" if fact.tool else "a tool"
    return "the model"


class FactError(ValueError):
    """Bad fact input (an unknown subject, a missing name or value, an unknown
    or unsuitable fact id). The message is one line saying what to write."""


def local_time(iso: str | None) -> str:
    """``HH:MM:SS`` in local time for a stored UTC ISO time (``""`` for none)."""
    if not iso:
        return ""
    try:
        dt = datetime.strptime(iso.replace("Z", ""), "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        try:
            dt = datetime.fromisoformat(iso.replace("Z", ""))
        except ValueError:
            return iso
    return dt.replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M:%S")


def _utc_now() -> str:
    return utc_now()


@dataclass(frozen=True)
class Fact:
    """One version of a fact.

    ``id`` (the row id), ``conversation_id``, ``number`` (the version id is
    :attr:`vid`, ``"c" + number``), ``subject``, ``name`` (``""`` for none),
    ``value``, ``source`` (``person``/``tool``/``model``), ``method``,
    ``tool`` (the tool that observed it, for a tool's fact), ``state``
    (``current``/``superseded``), ``proposal`` (a model's note not yet
    kept), ``kept_at``, ``forgotten``, ``turn`` (the turn number it was
    recorded in, or after; ``None`` before any), ``entries`` (entry numbers
    it came from), ``superseded_by`` (the number of the version that
    replaced it), ``created_at`` (UTC ISO), ``audit_event_id``.
    """

    id: int
    conversation_id: int
    number: int
    subject: str
    name: str
    value: str
    source: str
    method: str = ""
    tool: str | None = None
    state: str = "current"
    proposal: bool = False
    kept_at: str | None = None
    forgotten: bool = False
    turn: int | None = None
    entries: tuple[int, ...] = ()
    superseded_by: int | None = None
    superseded_at: str | None = None
    created_at: str = ""
    audit_event_id: str | None = None

    @property
    def vid(self) -> str:
        """The version id, ``c`` + number (``c3``)."""
        return f"c{self.number}"

    @property
    def key(self) -> tuple[str, str]:
        """``(subject, name)``: what identifies the fact across versions."""
        return (self.subject, self.name)

    @property
    def label(self) -> str:
        """``subject name`` (``tests ci``), or the subject alone for an unnamed fact."""
        return f"{self.subject} {self.name}" if self.name else self.subject

    @property
    def rank(self) -> int:
        """Precedence: the source's :data:`RANK`; a kept model note ranks as the person's."""
        if self.source == "model" and self.kept_at:
            return RANK["person"]
        return RANK.get(self.source, 0)

    @property
    def current(self) -> bool:
        return self.state == "current"

    def source_label(self, *, in_facts_layer: bool = False) -> str:
        """The source as the reference document writes it: ``person``,
        ``tool run_command, turn 2, entry 9``, ``model, noted, turn 4, entry 12``.

        A noted fact names the entry of the memory call that noted it, so that
        its history has something to recall (``- c2 [model, noted, turn 2,
        entry 12] at …``). ``in_facts_layer``: the form of the facts layer's
        lines and ``/fact``, where a noted fact reads ``model, noted, turn 4``
        (wisp-memory-tool.txt, "note": "In facts' lines a noted fact's source
        reads model, noted, turn 4"): the call holds only the note the value
        already says, so naming it in every request would cost tokens for
        nothing; a tool's fact keeps its entry there, which holds the output."""
        parts: list[str]
        if self.source == "tool":
            parts = [f"tool {self.tool}" if self.tool else "tool"]
        elif self.source == "model":
            parts = ["model", self.method or "noted"]
        else:
            parts = ["person"]
        if self.turn:
            parts.append(f"turn {self.turn}")
        if self.entries and not (in_facts_layer and self.source == "model" and self.method == "noted"):
            word = "entry" if len(self.entries) == 1 else "entries"
            parts.append(f"{word} {', '.join(str(e) for e in self.entries)}")
        return ", ".join(parts)

    def state_label(self) -> str:
        """``current``, ``current, a proposal``, ``superseded by c9``, ``forgotten``."""
        if self.forgotten:
            return "forgotten"
        if self.state == "superseded":
            return f"superseded by c{self.superseded_by}" if self.superseded_by else "superseded"
        if self.proposal:
            return "current, a proposal until the person keeps it"
        if self.kept_at:
            return "current, kept by the person"
        return "current"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``id`` as the version id (``c3``)."""
        return {
            "id": self.vid, "subject": self.subject, "name": self.name, "value": self.value,
            "source": self.source, "method": self.method, "tool": self.tool, "state": self.state,
            "proposal": self.proposal, "kept": bool(self.kept_at), "forgotten": self.forgotten,
            "turn": self.turn, "entries": list(self.entries),
            "superseded_by": f"c{self.superseded_by}" if self.superseded_by else None,
            "time": self.created_at,
        }

    def to_record(self) -> dict[str, Any]:
        """Every stored field but the row id, as :meth:`FactBook.restore`
        takes it back (``wisp export``'s JSON: issue 16)."""
        return {
            "number": self.number, "subject": self.subject, "name": self.name, "value": self.value,
            "source": self.source, "method": self.method, "tool": self.tool, "state": self.state,
            "proposal": self.proposal, "kept_at": self.kept_at, "forgotten": self.forgotten, "turn": self.turn,
            "entries": list(self.entries), "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at, "created_at": self.created_at,
            "audit_event_id": self.audit_event_id,
        }

    def as_of(self, moment: str) -> "Fact":
        """This version as it stood at ``moment`` (UTC ISO text, as the
        store writes times): a supersession, a forgetting or a keeping
        that came later is undone. The version must have been recorded
        before ``moment``."""
        changes: dict[str, Any] = {}
        if self.superseded_at is not None and self.superseded_at >= moment:
            changes.update(state="current", superseded_by=None, superseded_at=None, forgotten=False)
        if self.kept_at is not None and self.kept_at >= moment:
            changes.update(proposal=True, kept_at=None)
        return Fact(**{**self.__dict__, **changes}) if changes else self


@dataclass(frozen=True)
class FactOutcome:
    """What :meth:`FactBook.record` did.

    ``fact``: the version recorded (or, when ``unchanged``, the current one);
    ``superseded``: the version it replaced, if any; ``refused_by``: the
    higher-source fact that stands when the new one was refused;
    ``unchanged``: the same value from the same source was current already.
    """

    fact: Fact | None
    superseded: Fact | None = None
    refused_by: Fact | None = None
    unchanged: bool = False

    @property
    def recorded(self) -> bool:
        return self.fact is not None and not self.unchanged and self.refused_by is None


_COLS = ("id, conversation_id, number, subject, name, value, source, method, tool, state, proposal,"
         " kept_at, forgotten, turn, entries, superseded_by, superseded_at, created_at, audit_event_id")


def _fact(row: Any) -> Fact:
    r = tuple(row)
    try:
        entries = tuple(int(x) for x in json.loads(r[14] or "[]"))
    except (TypeError, ValueError):
        entries = ()
    return Fact(id=r[0], conversation_id=r[1], number=r[2], subject=r[3], name=r[4], value=r[5],
                source=r[6], method=r[7] or "", tool=r[8], state=r[9], proposal=bool(r[10]),
                kept_at=r[11], forgotten=bool(r[12]), turn=r[13], entries=entries,
                superseded_by=r[15], superseded_at=r[16], created_at=r[17], audit_event_id=r[18])


def parse_fact_id(text: str) -> int:
    """The number of a version id as typed (``c7``, ``C7`` or ``7``).
    Raises :class:`FactError` otherwise."""
    m = re.fullmatch(r"\s*[cC]?(\d+)\s*", text or "")
    if not m:
        raise FactError(f"{text!r} is not a fact id; fact ids look like c7 (/fact lists them)")
    if len(m.group(1)) > 30:  # no fact has such a number (and int() refuses past 4,300 digits)
        raise FactError(f"no fact c{m.group(1)[:20]}… in this conversation; /fact lists the current ones")
    return int(m.group(1))


def _strip_quotes(text: str) -> str:
    t = text.strip()
    while len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'`“”":
        t = t[1:-1].strip()
    if len(t) >= 2 and t[0] == "“" and t[-1] == "”":
        t = t[1:-1].strip()
    return t


def parse_assignment(text: str, *, command: str = "/fact") -> tuple[str, str, str]:
    """``SUBJECT [NAME] = VALUE`` → ``(subject, name, value)``.

    Also reads the forms a small model writes (wisp-memory-tool.txt, "note"):
    ``SUBJECT: NAME = VALUE`` and ``SUBJECT NAME: VALUE`` with no ``=``.
    Quotes around the value (and the name) are dropped. The subject is
    matched case-insensitively. ``command`` is how examples in errors begin
    (``/fact`` for the person, ``note`` for the model).

    Raises :class:`FactError` for an unknown subject, a missing name where the
    subject needs one (:data:`NAMED_SUBJECTS`), or a missing value.
    """
    raw = " ".join((text or "").split())
    example = f"{command} {_EXAMPLE}"
    if not raw:
        raise FactError(f"write {command} SUBJECT NAME = VALUE, such as {example}")
    m = re.match(r"^([A-Za-z_-]+)\s*:?\s*(.*)$", raw)
    if not m:
        raise FactError(f"write {command} SUBJECT NAME = VALUE, such as {example}")
    subject = m.group(1).lower()
    rest = m.group(2)
    if subject not in SUBJECTS:
        raise FactError(f"no subject {subject} to {'note' if command == 'note' else 'set'}; use one of "
                        f"{', '.join(SUBJECTS)}, such as {example}")
    if "=" in rest:
        name, _, value = rest.partition("=")
    elif ":" in rest:
        name, _, value = rest.partition(":")
    else:
        raise FactError(f"write {command} SUBJECT NAME = VALUE, such as {example}")
    name = _strip_quotes(name).strip(" :")
    value = _strip_quotes(value)
    if not value:
        raise FactError(f"give {subject} a value after the =, such as {example}")
    if subject in NAMED_SUBJECTS and not name:
        raise FactError(f"say which {subject} it is before the =, such as "
                        f"{command} {subject} {'release codename = BLUE HERON' if subject == 'entity' else 'http library = httpx'}")
    if subject in UNNAMED_SUBJECTS:
        name = ""
    return subject, name, value


class FactBook:
    """Facts of every conversation in one store, with the rules above.

    ``FactBook(store, audit)``: ``store`` is a :class:`wisp.core.store.Store`
    (its ``db`` connection is used), ``audit`` a
    :class:`wisp.core.audit.AuditLog` or ``None``. Methods raise
    :class:`FactError` for bad input; database errors propagate.
    """

    def __init__(self, store: Any, audit: Any = None) -> None:
        self.store = store
        self.audit = audit

    # -- reading ---------------------------------------------------------------

    async def _all(self, sql: str, params: Iterable[Any]) -> list[Fact]:
        params = tuple(params)
        if not fits(params):  # c9223372036854775808 names no fact
            return []
        return [_fact(r) for r in await self.store.db.execute_fetchall(sql, params)]

    async def current(self, conversation: int, *, include_task: bool = True) -> list[Fact]:
        """The current facts of a conversation (proposals included), ordered by
        subject as in :data:`SUBJECTS`, then name."""
        facts = await self._all(f"SELECT {_COLS} FROM facts WHERE conversation_id = ? AND state = 'current'"
                                " ORDER BY number", (conversation,))
        order = {s: i for i, s in enumerate(SUBJECTS)}
        facts.sort(key=lambda f: (order.get(f.subject, 99), f.name.lower(), f.number))
        return [f for f in facts if include_task or f.subject != "task"]

    async def current_of(self, conversation: int, subject: str, name: str = "") -> Fact | None:
        """The current version of one fact, or ``None``."""
        rows = await self._all(f"SELECT {_COLS} FROM facts WHERE conversation_id = ? AND subject = ?"
                               " AND name = ? AND state = 'current' ORDER BY number DESC LIMIT 1",
                               (conversation, subject, name))
        return rows[0] if rows else None

    async def all(self, conversation: int) -> list[Fact]:
        """Every version of every fact, oldest first."""
        return await self._all(f"SELECT {_COLS} FROM facts WHERE conversation_id = ? ORDER BY number",
                               (conversation,))

    async def get(self, conversation: int, number: int) -> Fact | None:
        """Version ``c<number>``, or ``None``."""
        rows = await self._all(f"SELECT {_COLS} FROM facts WHERE conversation_id = ? AND number = ?",
                               (conversation, number))
        return rows[0] if rows else None

    async def history(self, conversation: int, query: str) -> list[tuple[tuple[str, str], list[Fact]]]:
        """Every version of the facts ``query`` names, grouped by fact, oldest first.

        ``query`` matches (case-insensitively) a fact's name, its subject when
        it has no name, ``subject name`` written out, or a version id
        (``c3``); failing those, a subject alone lists every fact of it, and
        then the facts whose name holds every word of ``query`` (the
        reference document's guide pairs ``recall fact codename`` with
        ``note entity release codename = …``). Returns ``[((subject, name), [versions…]), …]`` ordered by
        the first version; an empty list when nothing matches.
        """
        q = " ".join((query or "").split()).strip().strip("\"'").lower()
        facts = await self.all(conversation)
        keys: list[tuple[str, str]] = []
        if re.fullmatch(r"c\d+", q):
            for f in facts:
                if f.vid == q:
                    keys.append(f.key)
        for f in facts:
            label = f.label.lower()
            if f.key in keys:
                continue
            if f.name.lower() == q or label == q or (not f.name and f.subject == q):
                keys.append(f.key)
        if not keys:  # a subject alone lists every fact of it
            for f in facts:
                if f.subject == q and f.key not in keys:
                    keys.append(f.key)
        words = set(q.split())
        if not keys and words:  # the words of a name: "codename" finds "release codename"
            for f in facts:
                if words <= set(f.name.lower().split()) and f.key not in keys:
                    keys.append(f.key)
        return [(k, [f for f in facts if f.key == k]) for k in keys]

    async def as_of(self, conversation: int, moment: str | None) -> list[Fact]:
        """Every version recorded before ``moment`` (UTC ISO text), each as
        it stood then (:meth:`Fact.as_of`); with ``None``, :meth:`all`.
        ``/fork`` carries a conversation's facts as they stood at the turn
        it forks from (issue 16)."""
        facts = await self.all(conversation)
        if moment is None:
            return facts
        return [f.as_of(moment) for f in facts if f.created_at < moment]

    async def count(self, conversation: int) -> int:
        """How many fact versions a conversation has (``wisp conversations rm`` says so)."""
        return len(await self.all(conversation))

    async def restore(self, conversation: int, records: Iterable[dict[str, Any]]) -> int:
        """Store fact versions as they were (:meth:`Fact.to_record`'s
        shape: numbers, states, sources and times kept; new row ids), in one
        transaction, into a conversation that has none yet (``wisp import``,
        ``/fork``). No audit event is written: the versions keep the ids of
        the events that recorded them. Returns how many were stored. Raises
        :class:`FactError` for an unknown subject or source, and for a
        conversation that already has facts."""
        rows = []
        for r in records:
            if r.get("subject") not in SUBJECTS:
                raise FactError(f"no subject {r.get('subject')!r}; use one of {', '.join(SUBJECTS)}")
            if r.get("source") not in RANK:
                raise FactError(f"no source {r.get('source')!r}; a fact comes from one of {', '.join(SOURCES)}")
            rows.append((conversation, int(r["number"]), r["subject"], str(r.get("name") or ""), str(r["value"]),
                         r["source"], str(r.get("method") or ""), r.get("tool"),
                         "superseded" if r.get("state") == "superseded" else "current",
                         int(bool(r.get("proposal"))), r.get("kept_at"), int(bool(r.get("forgotten"))),
                         r.get("turn"), json.dumps([int(e) for e in r.get("entries") or []]),
                         r.get("superseded_by"), r.get("superseded_at"), r.get("created_at") or _utc_now(),
                         r.get("audit_event_id")))
        if not rows:
            return 0
        async with self.store.transaction() as db:
            async with db.execute("SELECT COUNT(*) FROM facts WHERE conversation_id = ?", (conversation,)) as cur:
                if (await cur.fetchone())[0]:
                    raise FactError(f"conversation {conversation} has facts already; restore into a new one")
            await db.executemany(
                "INSERT INTO facts (conversation_id, number, subject, name, value, source, method, tool, state,"
                " proposal, kept_at, forgotten, turn, entries, superseded_by, superseded_at, created_at,"
                " audit_event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    async def subjects_known(self, conversation: int) -> list[str]:
        """The labels of the facts a conversation knows (for "nothing matches" messages)."""
        return sorted({f.label for f in await self.all(conversation)})

    # -- writing ---------------------------------------------------------------

    async def record(self, conversation: int, subject: str, name: str, value: str, *, source: str,
                     method: str = "", tool: str | None = None, turn: int | None = None,
                     entries: Iterable[int] = (), proposal: bool | None = None) -> FactOutcome:
        """Record a version of fact ``(subject, name)`` with the precedence rules.

        ``source`` is ``person``, ``tool`` or ``model``; ``method`` how it was
        had (``set`` for the person, ``observed`` for workdir/branch, ``tested``
        for a test run, ``noted``/``inferred`` for the model); ``tool`` the
        observing tool; ``turn`` the turn number; ``entries`` the entry
        numbers it came from. ``proposal`` defaults to true for the model.
        The value is cut to :data:`TASK_MAX_CHARS` for the task and
        :data:`FACT_MAX_CHARS` otherwise.

        Returns a :class:`FactOutcome`: refused (``refused_by``) when a
        higher-source fact is current; ``unchanged`` when the same value from
        the same source is current; else the new version, which supersedes
        the current one. Writes a ``fact.recorded`` audit event for a change.
        Raises :class:`FactError` for an unknown subject or source or an
        empty value.
        """
        subject = (subject or "").strip().lower()
        if subject not in SUBJECTS:
            raise FactError(f"no subject {subject!r}; use one of {', '.join(SUBJECTS)}")
        if source not in RANK:
            raise FactError(f"no source {source!r}; a fact comes from one of {', '.join(SOURCES)}")
        name = "" if subject in UNNAMED_SUBJECTS else " ".join((name or "").split())
        value = " ".join(str(value or "").split()) if subject == "task" else str(value or "").strip()
        if not value:
            raise FactError(f"give {subject} a value")
        value = cap_value(value, TASK_MAX_CHARS if subject == "task" else FACT_MAX_CHARS)
        if proposal is None:
            proposal = source == "model"
        entries_t = tuple(int(e) for e in entries)
        now = _utc_now()
        async with self.store.transaction() as db:
            row = next(iter(await db.execute_fetchall(
                f"SELECT {_COLS} FROM facts WHERE conversation_id = ? AND subject = ? AND name = ?"
                " AND state = 'current' ORDER BY number DESC LIMIT 1", (conversation, subject, name))), None)
            current = _fact(row) if row else None
            if outranks(current, source):
                return FactOutcome(None, refused_by=current)
            if (current is not None and current.value == value and current.source == source
                    and current.proposal == bool(proposal)):
                return FactOutcome(current, unchanged=True)
            ((number,),) = await db.execute_fetchall(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM facts WHERE conversation_id = ?", (conversation,))
            number = int(number)
            cur = await db.execute(
                "INSERT INTO facts (conversation_id, number, subject, name, value, source, method, tool,"
                " state, proposal, turn, entries, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'current', ?, ?, ?, ?)",
                (conversation, number, subject, name, value, source, method or "", tool, int(bool(proposal)),
                 turn, json.dumps(list(entries_t)), now),
            )
            new_id = cur.lastrowid
            if current is not None:
                await db.execute("UPDATE facts SET state = 'superseded', superseded_by = ?, superseded_at = ?"
                                 " WHERE id = ?", (number, now, current.id))
        fact = Fact(new_id, conversation, number, subject, name, value, source, method or "", tool, "current",
                    bool(proposal), None, False, turn, entries_t, None, None, now)
        superseded = None
        if current is not None:
            superseded = Fact(**{**current.__dict__, "state": "superseded", "superseded_by": number,
                                 "superseded_at": now})
        fact = await self._audit(fact, "recorded", turn, supersedes=current.vid if current else None)
        return FactOutcome(fact, superseded=superseded)

    async def forget(self, conversation: int, fact_id: str | int, *, turn: int | None = None) -> Fact:
        """Supersede a current fact without replacing it (``/fact forget ID``).

        Returns the forgotten version. Raises :class:`FactError` for an unknown
        id or a version that is not current (naming the one that is).
        """
        fact = await self._current_by_id(conversation, fact_id)
        now = _utc_now()
        async with self.store.transaction() as db:
            await db.execute("UPDATE facts SET state = 'superseded', forgotten = 1, superseded_at = ?"
                             " WHERE id = ?", (now, fact.id))
        fact = Fact(**{**fact.__dict__, "state": "superseded", "forgotten": True, "superseded_at": now})
        return await self._audit(fact, "forgotten", turn, store_ref=False)

    async def keep(self, conversation: int, fact_id: str | int, *, turn: int | None = None) -> Fact:
        """Keep a model's proposal (``/fact keep ID``): it stops being a
        proposal and from then on ranks as the person's fact.

        Raises :class:`FactError` for an unknown id, a superseded version, or
        a fact that is not a proposal.
        """
        fact = await self._current_by_id(conversation, fact_id)
        if not fact.proposal:
            raise FactError(f"{fact.vid} is not a proposal; only the model's notes wait to be kept")
        now = _utc_now()
        async with self.store.transaction() as db:
            await db.execute("UPDATE facts SET proposal = 0, kept_at = ? WHERE id = ?", (now, fact.id))
        fact = Fact(**{**fact.__dict__, "proposal": False, "kept_at": now})
        return await self._audit(fact, "kept", turn, store_ref=False)

    async def _current_by_id(self, conversation: int, fact_id: str | int) -> Fact:
        number = fact_id if isinstance(fact_id, int) else parse_fact_id(str(fact_id))
        fact = await self.get(conversation, number)
        if fact is None:
            raise FactError(f"no fact c{number} in this conversation; /fact lists the current ones")
        if not fact.current:
            if fact.forgotten:
                raise FactError(f"c{number} is already forgotten")
            raise FactError(f"c{number} is superseded by c{fact.superseded_by}; use that id")
        return fact

    async def _audit(self, fact: Fact, action: str, turn: int | None, supersedes: str | None = None,
                     store_ref: bool = True) -> Fact:
        if self.audit is None:
            return fact
        payload = {"action": action, **fact.to_dict()}
        if supersedes:
            payload["supersedes"] = supersedes
        ref = self.audit.write("fact.recorded", payload, conversation=fact.conversation_id, turn=turn)
        if ref is not None and store_ref:
            async with self.store.transaction() as db:
                await db.execute("UPDATE facts SET audit_event_id = ? WHERE id = ?", (ref.event_id, fact.id))
            fact = Fact(**{**fact.__dict__, "audit_event_id": ref.event_id})
        return fact


# -- rendering -------------------------------------------------------------------


def fact_event(fact: Fact, action: str = "recorded") -> ev.FactChanged:
    """The :class:`~wisp.core.events.FactChanged` event for a fact version."""
    return ev.FactChanged(conversation=fact.conversation_id, fact=fact.vid, subject=fact.subject, name=fact.name,
                          value=fact.value, source=fact.source, action=action, proposal=fact.proposal)


def fact_line(fact: Fact, *, with_id: bool = True) -> str:
    """One current fact as the facts layer and ``/fact`` write it:
    ``branch = main [tool git, turn 3; c2]``, with ``a proposal`` marked."""
    label = fact.label
    tail = fact.source_label(in_facts_layer=True)
    if fact.proposal:
        tail += "; a proposal"
    elif fact.kept_at:
        tail += "; kept by the person"
    if with_id:
        tail += f"; {fact.vid}"
    return f"{label} = {fact.value} [{tail}]"


def history_text(query: str, groups: list[tuple[tuple[str, str], list[Fact]]], *,
                 recall_hint: str | None = 'memory "recall entry N" shows what a fact came from.',
                 end_marker: str | None = "[end of what recall found]") -> str:
    """A fact's history in the reference document's format (wisp-memory-tool.txt,
    "recall"): a header naming how many facts matched, then per fact its
    versions oldest first, each with id, source, time, value and state::

        fact "ci": 1 subject
        tests ci: 2 versions, oldest first:
        - c3 [tool run_command, turn 2, entry 9] at 11:02:10: failed (exit status 1); superseded by c9
        - c9 [tool run_command, turn 11, entry 30] at 11:07:40: passed; current
        memory "recall entry N" shows what a fact came from.
        [end of what recall found]

    ``recall_hint`` (the line naming how to see a source entry) and
    ``end_marker`` are left out when ``None``. ``groups`` is
    :meth:`FactBook.history`'s result; an empty list gives ``""``.
    """
    if not groups:
        return ""
    n = len(groups)
    lines = [f'fact "{query}": {n} subject{"s" if n != 1 else ""}']
    for (subject, name), versions in groups:
        label = f"{subject} {name}" if name else subject
        count = len(versions)
        lines.append(f"{label}: {count} version{'s' if count != 1 else ''}, oldest first:")
        for f in versions:
            lines.append(f"- {f.vid} [{f.source_label()}] at {local_time(f.created_at)}: {f.value}; "
                         f"{f.state_label()}")
    if recall_hint and any(f.entries for _, vs in groups for f in vs):
        lines.append(recall_hint)
    if end_marker:
        lines.append(end_marker)
    return "\n".join(lines)
