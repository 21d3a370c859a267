"""Ended turns rendered once: the composer's cache of their messages and token counts.

Issue 12, "Compose incrementally": an ended turn never changes, so the
messages it stands for in the request (with its tool outputs whole, or as
references) and their token estimate are rendered once, the first time a
request needs them, and kept in memory for the session and in the
``turn_renders`` table (the context's, migration ``m005_turn_renders`` in
:mod:`wisp.core.context.schema`) for the next process. A request then reads
the turns' rows, not their entries, and decodes nothing it decoded before.

A render is kept under a ``key`` of everything it depends on besides the
turn's entries, which do not change once the turn has ended: the render's
version (:data:`RENDER_VERSION`, raised when the reference forms or the
message shape change), the turn's state and end time (a turn begun again
would have new ones), and the tool flags that pick a reference's form
(:class:`~wisp.core.context.turns.ToolFlags`: whether the memory tool is
there, which tools only read). A row whose key differs is rendered again
and replaced. Tokens are kept uncalibrated; the composer multiplies them by
the model's ratio.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..tokens import estimate_messages
from .loops import collapse_loops
from .turns import ToolFlags, render_turn

__all__ = ["RENDER_VERSION", "TurnRender", "RenderCache", "flags_key", "render_key", "render"]

#: The version of the rendered form; raise it when render_turn, the references, the messages or the
#: token estimate (wisp.core.tokens) change. 2: the estimate counts by the text's kind (chars_per_token).
#: 3: loops collapsed (repeated failed calls, a reply stopped for repeating itself: wisp.core.context.loops).
#: 4: an edit's reference says what changed, and its call's long texts are not repeated.
RENDER_VERSION = 4


@dataclass(frozen=True)
class TurnRender:
    """One ended turn as the composer sends it: its chat ``messages``, the
    entry numbers standing as ``references``, and ``tokens``, wisp's
    uncalibrated estimate of the messages
    (:func:`wisp.core.tokens.estimate_messages`)."""

    messages: list[dict[str, Any]]
    references: list[int]
    tokens: int


def flags_key(flags: ToolFlags) -> str:
    """The part of a render's key that the tools decide (short, stable)."""
    data = json.dumps([RENDER_VERSION, flags.has_memory, sorted(flags.read_only.items())])
    return hashlib.sha1(data.encode()).hexdigest()[:16]


def render_key(turn: Any, flags: str) -> str:
    """The key of a render of ``turn`` (a :class:`wisp.core.store.Turn`:
    its ``state`` and ``ended_at``) under tool flags ``flags`` (:func:`flags_key`)."""
    return f"{flags}|{turn.state}|{turn.ended_at or ''}"


def render(number: int, entries: list[Any], flags: ToolFlags, *, whole: bool) -> TurnRender:
    """Render an ended turn (:func:`wisp.core.context.turns.render_turn`) and estimate it, its loops
    collapsed (:func:`wisp.core.context.loops.collapse_loops`: the store keeps every entry). Pure."""
    messages, refs = render_turn(number, collapse_loops(entries), flags, whole=whole)
    return TurnRender(messages, refs, estimate_messages(messages) if messages else 0)


class RenderCache:
    """The renders of a session's ended turns: in memory, and in the store
    (``store`` a :class:`wisp.core.store.Store`, whose connection reads and
    writes the context's ``turn_renders`` table).

    :meth:`lookup` gives the kept renders of some turns (reading the
    conversation's rows from the store once per session); :meth:`keep`
    keeps new ones (memory, then one transaction in the store).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        #: (conversation, turn number, whole) -> (key, render)
        self._memory: dict[tuple[int, int, bool], tuple[str, TurnRender]] = {}
        self._read: set[int] = set()  # conversations whose rows were read from the store

    async def _read_rows(self, conversation: int) -> None:
        """Read the conversation's kept renders from the store, once."""
        if conversation in self._read:
            return
        self._read.add(conversation)
        try:
            rows = await self.store.db.execute_fetchall(
                "SELECT turn_number, whole, key, messages, refs, tokens FROM turn_renders"
                " WHERE conversation_id = ?", (conversation,))
        except Exception:  # no table (a store opened without the context's steps): memory only
            return
        loads = json.loads
        for number, whole, key, messages, refs, tokens in rows:
            slot = (conversation, int(number), bool(whole))
            if slot not in self._memory:
                try:
                    self._memory[slot] = (key, TurnRender(loads(messages), loads(refs), int(tokens)))
                except (TypeError, ValueError):
                    continue  # a damaged row is rendered again

    async def lookup(self, conversation: int, wanted: Iterable[tuple[Any, bool]],
                     flags: ToolFlags) -> dict[tuple[int, bool], TurnRender]:
        """The kept renders of ``wanted`` turns, each ``(turn, whole)`` with
        ``turn`` a :class:`wisp.core.store.Turn`, as ``{(number, whole):
        render}``; a turn whose render is missing or stale is left out."""
        await self._read_rows(conversation)
        fk = flags_key(flags)
        memory = self._memory
        out: dict[tuple[int, bool], TurnRender] = {}
        for turn, whole in wanted:
            hit = memory.get((conversation, turn.number, whole))
            if hit is not None and hit[0] == render_key(turn, fk):
                out[(turn.number, whole)] = hit[1]
        return out

    async def keep(self, conversation: int, renders: Iterable[tuple[Any, bool, TurnRender]],
                   flags: ToolFlags) -> None:
        """Keep new renders, each ``(turn, whole, render)``: in memory, and in
        the store in one transaction (a store that cannot take them is left
        as it is: the renders are kept in memory)."""
        fk = flags_key(flags)
        rows = []
        for turn, whole, r in renders:
            key = render_key(turn, fk)
            self._memory[(conversation, turn.number, whole)] = (key, r)
            rows.append((conversation, turn.number, int(whole), key,
                         json.dumps(r.messages, ensure_ascii=False, separators=(",", ":")),
                         json.dumps(r.references), r.tokens))
        if not rows:
            return
        try:
            async with self.store.transaction() as db:
                await db.executemany(
                    "INSERT OR REPLACE INTO turn_renders (conversation_id, turn_number, whole, key, messages,"
                    " refs, tokens) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        except Exception:  # no table, or the database is busy or read-only: memory is enough for now
            pass

    def forget(self, conversation: int) -> None:
        """Drop a conversation's renders from memory (they are read again when needed)."""
        for slot in [s for s in self._memory if s[0] == conversation]:
            del self._memory[slot]
        self._read.discard(conversation)
