"""Helpers for the episodic-memory tests: exchanges and memories written straight into a real store."""

from __future__ import annotations

from typing import Any

from wisp.core.episodes.capture import Exchange, save_exchange
from wisp.core.episodes.ids import next_memory_number


async def add_exchange(store: Any, request: str = "a request", reply: str = "a reply", *,
                       workspace: str = "website", transport: str = "ask", channel: str = "1",
                       thread: str = "", conversation_id: int | None = 1,
                       requested_at: str = "2025-03-04T14:05:00.000000Z",
                       finished_at: str | None = None, outcome: str = "completed",
                       sender: str = "alice", model: str | None = "wisp-fake:latest",
                       error: str | None = None) -> int:
    """Save one finished exchange; returns its id."""
    return await save_exchange(store, Exchange(
        workspace=workspace, transport=transport, channel=channel, thread=thread, request=request,
        reply=reply, requested_at=requested_at, finished_at=finished_at or requested_at,
        conversation_id=conversation_id, outcome=outcome, sender=sender, model=model,
        endpoint="ollama http://127.0.0.1:1" if model else None, error=error))


async def add_memory(store: Any, summary: str, exchange_ids: list[int], *,
                     recorded_at: str = "2025-03-05T09:00:00.000000Z") -> int:
    """Record a memory from ``exchange_ids`` as refinement would (origin and
    event time from the sources, number from the counter); returns its number."""
    async with store.transaction() as db:
        marks = ",".join("?" * len(exchange_ids))
        async with db.execute(
                f"SELECT workspace, transport, channel, thread, conversation_id, MIN(requested_at),"
                f" MAX(finished_at) FROM episode_exchanges WHERE id IN ({marks})", exchange_ids) as cur:
            ws, tr, ch, th, conv, first, last = await cur.fetchone()
        number = await next_memory_number(db)
        await db.execute(
            "INSERT INTO episode_memories (id, summary, workspace, transport, channel, thread, conversation_id,"
            " event_at, event_end, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (number, summary, ws, tr, ch, th, conv, first, last, recorded_at))
        await db.executemany("INSERT INTO episode_memory_sources (memory_id, exchange_id) VALUES (?, ?)",
                             [(number, i) for i in exchange_ids])
    return number


def memory_reply(*blocks: tuple[str, str]) -> str:
    """A refinement reply in the strict format: ``(sources, summary)`` pairs."""
    return "\n".join(f"MEMORY {src}\n{summary}\nEND" for src, summary in blocks)
