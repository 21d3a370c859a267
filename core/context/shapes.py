"""Which form of shaped output each endpoint's side calls take, kept across sessions.

Issue "Compaction you can see and trust", "Structured side calls": a side
call that needs a shape asks for it with the endpoint's own constrained
decoding and falls back to the plain request when the server refuses it,
"and remember that per endpoint". The side call keeps it in memory for the
session (:class:`wisp.core.model.sidecall.ShapeForms`); :class:`ShapeBook`
keeps it in the context's ``side_call_shapes`` table (migration
``m003_side_call_shapes``), per endpoint URL and model, so the next session
does not ask a refusing server again. A remembered form older than
:data:`SHAPE_TTL` is forgotten, so a server upgraded meanwhile is asked for
the shape once more.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ..clock import utc_text
from ..sidecall import SHAPE_FORMS

__all__ = ["ShapeBook", "SHAPE_TTL"]

#: A remembered form is trusted this long.
SHAPE_TTL = timedelta(days=30)


class ShapeBook:
    """The ``side_call_shapes`` table of a :class:`wisp.core.store.Store`: a
    :class:`wisp.core.sidecall.ShapeMemory`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def get(self, endpoint: str, model: str) -> str | None:
        """The form remembered for ``endpoint`` (its base URL) and ``model``,
        or ``None`` (none, an unknown form, or older than :data:`SHAPE_TTL`)."""
        cutoff = utc_text(datetime.now(timezone.utc) - SHAPE_TTL)
        row = next(iter(await self.store.db.execute_fetchall(
            "SELECT form FROM side_call_shapes WHERE endpoint = ? AND model = ? AND updated_at >= ?",
            (endpoint, model, cutoff))), None)
        return str(row[0]) if row and row[0] in SHAPE_FORMS else None

    async def put(self, endpoint: str, model: str, form: str, reason: str = "") -> None:
        """Remember ``form`` (one of :data:`wisp.core.sidecall.SHAPE_FORMS`;
        raises ``ValueError`` for another) with its ``reason``."""
        if form not in SHAPE_FORMS:
            raise ValueError(f"unknown form of shaped output {form!r}")
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO side_call_shapes (endpoint, model, form, reason, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (endpoint, model) DO UPDATE SET form = excluded.form, reason = excluded.reason,"
                " updated_at = excluded.updated_at",
                (endpoint, model, form, reason[:500], utc_text(datetime.now(timezone.utc))))

    async def all(self) -> list[dict[str, Any]]:
        """Every remembered form, newest first, as dicts (endpoint, model, form, reason, updated_at)."""
        async with self.store.db.execute(
                "SELECT endpoint, model, form, reason, updated_at FROM side_call_shapes ORDER BY updated_at DESC"
        ) as cur:
            rows = await cur.fetchall()
        return [dict(zip(("endpoint", "model", "form", "reason", "updated_at"), r)) for r in rows]
