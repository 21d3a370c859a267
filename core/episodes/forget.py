"""Forgetting: a memory, its source exchanges, and every memory they connect.

Rules (issue "Episodic memory across conversations", "forget"; the
reference ``enso-episodic-memory.txt``, "Corrections and forgetting"):

- ``wisp memory forget MEM-000001 --yes`` permanently deletes the memory,
  its source exchanges, and every other memory connected to them through
  shared source exchanges, transitively (memory → its sources → the other
  memories of those sources → their sources → …). It can remove more than
  one memory, so it prints everything it removed.
- Without ``--yes`` it only computes and prints that scope and refuses.
- Forgotten numbers are never given again (the counter is not touched).
- It does not erase the conversation's own entries, turns, or the audit
  log, which are wisp's record of the conversation, not memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..store import in_chunks
from .ids import format_memory_id
from .query import Memory, SourceExchange, _EX_COLS, _MEM_COLS, _exchange, _memory

__all__ = ["ForgetScope", "forget_scope", "forget"]


@dataclass
class ForgetScope:
    """What forgetting one memory removes: ``memories`` and ``exchanges``
    (each oldest first). ``target`` is the memory asked for."""

    target: int
    memories: list[Memory] = field(default_factory=list)
    exchanges: list[SourceExchange] = field(default_factory=list)

    @property
    def refs(self) -> list[str]:
        """The ``MEM-…`` references in scope."""
        return [format_memory_id(m.number) for m in self.memories]


async def _ids(db: Any, sql: str, ids: set[int]) -> set[int]:
    out: set[int] = set()
    for chunk, marks in in_chunks(sorted(ids)):
        async with db.execute(sql.format(marks=marks), chunk) as cur:
            out.update(r[0] for r in await cur.fetchall())
    return out


async def _closure(db: Any, number: int) -> tuple[set[int], set[int]]:
    memories = {number}
    exchanges: set[int] = set()
    frontier = {number}
    while frontier:
        new_ex = await _ids(db, "SELECT exchange_id FROM episode_memory_sources WHERE memory_id IN ({marks})",
                            frontier) - exchanges
        exchanges |= new_ex
        if not new_ex:
            break
        frontier = await _ids(db, "SELECT memory_id FROM episode_memory_sources WHERE exchange_id IN ({marks})",
                              new_ex) - memories
        memories |= frontier
    return memories, exchanges


async def forget_scope(db: Any, number: int) -> ForgetScope | None:
    """The scope of forgetting memory ``number`` (see the module docstring),
    or ``None`` when there is no such memory. ``db`` is an aiosqlite
    connection; nothing is changed."""
    async with db.execute("SELECT 1 FROM episode_memories WHERE id = ?", (number,)) as cur:
        if await cur.fetchone() is None:
            return None
    mems, exs = await _closure(db, number)
    scope = ForgetScope(number)
    rows: list[Any] = []
    for chunk, marks in in_chunks(sorted(mems)):
        async with db.execute(f"SELECT {_MEM_COLS} FROM episode_memories m WHERE m.id IN ({marks})", chunk) as cur:
            rows.extend(await cur.fetchall())
    scope.memories = sorted((_memory(r) for r in rows), key=lambda m: (m.event_at, m.number))
    rows = []
    for chunk, marks in in_chunks(sorted(exs)):
        async with db.execute(f"SELECT {_EX_COLS} FROM episode_exchanges x WHERE x.id IN ({marks})", chunk) as cur:
            rows.extend(await cur.fetchall())
    scope.exchanges = sorted((_exchange(r) for r in rows), key=lambda x: (x.requested_at, x.id))
    return scope


async def forget(store: Any, number: int) -> ForgetScope | None:
    """Delete memory ``number`` with its whole scope in one transaction and
    return what was removed (``None`` when there is no such memory). The
    scope is computed again inside the transaction, so a memory recorded
    meanwhile on a shared source goes too. ``store`` is a
    :class:`wisp.core.store.Store`."""
    async with store.transaction() as db:
        scope = await forget_scope(db, number)
        if scope is None:
            return None
        mem_ids = [m.number for m in scope.memories]
        ex_ids = [x.id for x in scope.exchanges]
        for chunk, marks in in_chunks(mem_ids):
            await db.execute(f"DELETE FROM episode_memories WHERE id IN ({marks})", chunk)
        for chunk, marks in in_chunks(ex_ids):
            await db.execute(f"DELETE FROM episode_exchanges WHERE id IN ({marks})", chunk)
    return scope
