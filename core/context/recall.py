"""Looking up stored material in full: entries, turns, with where each was read from.

The one verbatim record is the audit log (wisp-memory-tool.txt, "Where the
content comes from"): an entry's content is read from the audit event that
recorded it (by its byte offset, no scan), and the store's own copy is the
fallback when the audit does not hold it (audit off, the file rotated away,
or an entry no event records on its own). Each result says which.

Used by ``/show`` and ``wisp inspect``, and meant for the memory tool's
``recall`` (issue "memory tool"): :func:`recall_entry`, :func:`recall_turn`,
:func:`entry_header` and :func:`stored_range` give it the header line and
the "nothing matches" line of the reference document's format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .facts import local_time

__all__ = ["RecalledEntry", "recall_entry", "recall_turn", "entry_header", "describe_entry", "stored_range",
           "FROM_AUDIT", "FROM_STORE"]

FROM_AUDIT = "from the audit log"
FROM_STORE = "from the conversation's store"


def describe_entry(entry: Any) -> str:
    """What an entry is, in words: ``prompt``, ``reply``, ``read_file call``,
    ``read_file output``, ``thinking``, ``notice``."""
    if entry.kind == "tool_call":
        return f"{entry.tool_name or 'tool'} call"
    if entry.kind == "tool_result":
        return f"{entry.tool_name or 'tool'} output"
    return entry.kind


@dataclass(frozen=True)
class RecalledEntry:
    """An entry with its content read back: ``entry`` (the store's
    :class:`~wisp.core.store.Entry`), ``turn`` (its turn number, or
    ``None``), ``content`` (the text), ``source`` (:data:`FROM_AUDIT` or
    :data:`FROM_STORE`)."""

    entry: Any
    turn: int | None
    content: str
    source: str

    @property
    def header(self) -> str:
        """``entry 4: read_file output, turn 2 at 14:05:12, from the audit log``."""
        return entry_header(self.entry, self.turn, self.source)

    @property
    def arguments(self) -> Any:
        """The tool call's arguments (for a call), else ``None``."""
        return self.entry.arguments


def entry_header(entry: Any, turn: int | None, source: str) -> str:
    """The header line of a recalled entry, as the reference document writes it."""
    where = f", turn {turn}" if turn is not None else ""
    when = local_time(entry.created_at)
    at = f" at {when}" if when else ""
    return f"entry {entry.number}: {describe_entry(entry)}{where}{at}, {source}"


def _from_audit(audit: Any, entry: Any) -> str | None:
    ref = entry.audit_ref
    if audit is None or ref is None:
        return None
    try:
        event = audit.read(ref)
    except OSError:
        return None
    if not event or event.get("entry") != entry.number:
        return None
    payload = event.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("content"), str):
        return payload["content"]
    return None


async def _turn_numbers(store: Any, turn_ids: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for tid in dict.fromkeys(turn_ids):
        turn = await store.turn_by_id(tid)
        if turn is not None:
            out[tid] = turn.number
    return out


async def recall_entry(store: Any, audit: Any, conversation: int, number: int) -> RecalledEntry | None:
    """Entry ``number`` of the conversation with its full content, read from
    the audit log when it holds it, else from the store; ``None`` when there
    is no such entry."""
    entry = await store.get_entry(conversation, number)
    if entry is None:
        return None
    turn = None
    if entry.turn_id is not None:
        t = await store.turn_by_id(entry.turn_id)
        turn = t.number if t is not None else None
    content = _from_audit(audit, entry)
    if content is None:
        return RecalledEntry(entry, turn, entry.content, FROM_STORE)
    return RecalledEntry(entry, turn, content, FROM_AUDIT)


async def recall_turn(store: Any, audit: Any, conversation: int, number: int) -> tuple[Any, list[RecalledEntry]] | None:
    """Turn ``number`` (the store's :class:`~wisp.core.store.Turn`) and its
    entries in order with their content (as :func:`recall_entry`), or
    ``None`` when there is no such turn."""
    turn = await store.get_turn(conversation, number)
    if turn is None:
        return None
    entries = await store.entries(conversation, turn.id)
    out = []
    for e in entries:
        content = _from_audit(audit, e)
        out.append(RecalledEntry(e, turn.number, e.content if content is None else content,
                                 FROM_STORE if content is None else FROM_AUDIT))
    return turn, out


async def stored_range(store: Any, conversation: int, current_turn: int | None = None) -> str:
    """What a conversation has stored, for a "nothing matches" line:
    ``entries 1–40 and turns 1–12 are stored`` (or ``nothing is stored yet``).

    ``current_turn`` is the turn in progress when the model asks (the memory
    tool): a turn's own entries are not stored until it ends, and the model
    has them whole until then (wisp-memory-tool.txt, "recall"), so only the
    entries and turns before it count. ``None`` (``/show``, between turns)
    counts everything."""
    entries, turns = await store.stored_ranges(conversation)
    if current_turn is not None:
        span = await store.entry_range_before(conversation, current_turn)
        if span is None:
            return ("nothing is stored yet: this is the first turn, and its entries are stored when it ends; "
                    "all of it is in view")
        entries = span
        turns = (turns[0], current_turn - 1) if turns is not None and turns[0] < current_turn else None
    if entries is None:
        return "nothing is stored yet"
    text = f"entries {entries[0]}–{entries[1]}"
    if turns is not None:
        text += f" and turns {turns[0]}–{turns[1]}"
    return text + " are stored"
