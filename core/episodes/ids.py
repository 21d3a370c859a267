"""Memory references: ``MEM-`` plus at least six digits, never reused.

Rules (issue "Episodic memory across conversations", "IDs"; the reference
``enso-episodic-memory.txt``): six digits is the minimum padding, so
``MEM-999999`` is followed by ``MEM-1000000``; a deleted number is not given
again. Numbers come from the ``memory`` row of ``episode_counters``, bumped
inside the transaction that stores the memory, never from ``max(id)``: after
the newest memory is forgotten, ``max(id)`` would hand its number out again.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PREFIX", "MIN_DIGITS", "MemoryIdError", "format_memory_id", "parse_memory_id",
           "looks_like_memory_id", "next_memory_number"]

PREFIX = "MEM-"
#: Minimum digits after the prefix.
MIN_DIGITS = 6

_ID = re.compile(r"^\s*\[?\s*(?:MEM)?\s*[-_#:]?\s*0*(\d{1,18})\s*\]?\s*[.,;:!?]?\s*$", re.IGNORECASE)
_STRICT = re.compile(r"^MEM-\d+$", re.IGNORECASE)


class MemoryIdError(ValueError):
    """Text that is not a memory reference; the message says the form to use."""


def format_memory_id(number: int) -> str:
    """``12`` → ``"MEM-000012"``; ``1000000`` → ``"MEM-1000000"``. Raises
    :class:`MemoryIdError` for a number below 1."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise MemoryIdError(f"a memory number is a whole number from 1, not {number!r}")
    return f"{PREFIX}{number:0{MIN_DIGITS}d}"


def parse_memory_id(text: str) -> int:
    """The number of a reference: ``"MEM-000012"`` → ``12``.

    Lenient about what people and small models type: case, missing padding
    (``MEM-12``), brackets, a trailing full stop, ``#12`` or a bare ``12``.
    Raises :class:`MemoryIdError` (saying to write ``MEM-000001``) for
    anything else, or for ``MEM-000000``.
    """
    m = _ID.match(str(text or ""))
    if not m:
        raise MemoryIdError(
            f"{str(text)[:40]!r} is not a memory reference; write it like MEM-000001 "
            "(`wisp memory list` shows them)")
    n = int(m.group(1))
    if n < 1:
        raise MemoryIdError("memory numbers start at MEM-000001")
    return n


def looks_like_memory_id(text: str) -> bool:
    """Whether ``text`` is written as ``MEM-<digits>`` (the strict form)."""
    return bool(_STRICT.match(str(text or "").strip()))


async def next_memory_number(db: Any) -> int:
    """Bump the ``memory`` counter and return the new number.

    ``db`` is an aiosqlite connection inside a write transaction (the one
    that stores the memory), so two refiners never get the same number and
    a rolled-back memory does not spend one.
    """
    await db.execute(
        "INSERT INTO episode_counters (name, value) VALUES ('memory', 1)"
        " ON CONFLICT (name) DO UPDATE SET value = value + 1")
    async with db.execute("SELECT value FROM episode_counters WHERE name = 'memory'") as cur:
        row = await cur.fetchone()
    return int(row[0])
