"""What the server evaluated: each turn's prompt tokens and how many its cache served.

The composer orders a request so that the server's prompt cache keeps all
but its newest part (:mod:`wisp.core.context.composer`). This table lets a
person see that work: per conversation and turn, the requests the turn
made, the prompt tokens of its last request (``prompt``) and how many of
those the server took from its cache (``cached``), and the prompt tokens it
evaluated over the whole turn (``evaluated``: each request's prompt less
its cached part, summed). ``/inspect context`` and ``wisp inspect context``
show the last turn's beside the next request's size
(:mod:`wisp.core.context.inspect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from ..clock import utc_now

__all__ = ["TurnUsage", "UsageBook", "USAGE_SQL"]

USAGE_SQL = """
CREATE TABLE turn_usage (
    conversation_id  INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_number      INTEGER NOT NULL,
    requests         INTEGER NOT NULL DEFAULT 0,
    prompt_tokens    INTEGER,
    cached_tokens    INTEGER,
    evaluated_tokens INTEGER,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (conversation_id, turn_number)
);
"""


@dataclass(frozen=True)
class TurnUsage:
    """One turn's figures (tokens; see the module doc). ``cached`` is
    ``None`` when the server did not say what its cache served; ``evaluated``
    then counts the whole prompt, as ``wisp ask --json`` does."""

    turn: int
    requests: int
    prompt: int | None
    cached: int | None
    evaluated: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "requests": self.requests, "prompt_tokens": self.prompt,
                "cached_tokens": self.cached, "evaluated_tokens": self.evaluated}

    def line(self) -> str:
        """One line: ``last turn 7: the server evaluated 312 prompt tokens over 2 requests; its last
        request 4,850, 4,538 of them from its cache``."""
        over = f" over {self.requests} requests" if self.requests != 1 else ""
        head = f"last turn {self.turn}: the server evaluated {self.evaluated or 0:,} prompt tokens{over}"
        if self.cached is None:
            return f"{head}; it does not say what its cache served"
        if self.prompt is None:
            return head
        return f"{head}; its last request {self.prompt:,}, {self.cached:,} of them from its cache"


class UsageBook:
    """The ``turn_usage`` table of a :class:`wisp.core.store.Store`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def observe(self, conversation: int, turn: int | None, prompt: int | None, cached: int | None) -> None:
        """Fold one request of ``turn`` (its prompt tokens and the part the cache served) into the turn's figures."""
        if turn is None or prompt is None:
            return
        evaluated = max(0, prompt - (cached or 0))  # as wisp ask --json counts it: all of it when no cache is said
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO turn_usage (conversation_id, turn_number, requests, prompt_tokens, cached_tokens,"
                " evaluated_tokens, updated_at) VALUES (?, ?, 1, ?, ?, ?, ?)"
                " ON CONFLICT (conversation_id, turn_number) DO UPDATE SET requests = turn_usage.requests + 1,"
                " prompt_tokens = excluded.prompt_tokens, cached_tokens = excluded.cached_tokens,"
                " evaluated_tokens = turn_usage.evaluated_tokens + excluded.evaluated_tokens,"
                " updated_at = excluded.updated_at",
                (conversation, turn, prompt, cached, evaluated, utc_now()))

    async def turns(self, conversation: int) -> list[TurnUsage]:
        """Every turn's figures, oldest first."""
        rows = await self.store.db.execute_fetchall(
            "SELECT turn_number, requests, prompt_tokens, cached_tokens, evaluated_tokens FROM turn_usage"
            " WHERE conversation_id = ? ORDER BY turn_number", (conversation,))
        return [TurnUsage(int(r[0]), int(r[1]), r[2], r[3], r[4]) for r in rows]

    async def last(self, conversation: int) -> TurnUsage | None:
        """The last turn's figures, or ``None`` before any request was answered with a count."""
        rows = await self.turns(conversation)
        return rows[-1] if rows else None
