"""Pages of a stored conversation for display, newest turns first to load.

A view (the TUI's chat pane) asks for the last ``limit`` turns before a
turn number and gets them in order with their entries, plus how many turns
come before them, so a 1,000-turn conversation opens without rendering
every message (issue "wisp runs end to end", "TUI").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TurnView:
    """One stored turn: ``number``, ``state`` and its entries in order."""

    number: int
    state: str
    entries: list[Any]


@dataclass
class TranscriptPage:
    """Turns in ascending order and ``earlier``, the count of turns before them."""

    turns: list[TurnView]
    earlier: int


async def load_page(store: Any, conversation_id: int, limit: int = 50,
                    before_number: int | None = None) -> TranscriptPage:
    """The last ``limit`` turns of the conversation before turn ``before_number``
    (all turns when None), with their entries: two queries whatever the length."""
    turns = await store.turns(conversation_id, limit=limit, before_number=before_number)
    if not turns:
        return TranscriptPage([], 0)
    by_turn = await store.turn_entries([t.id for t in turns])
    views = [TurnView(t.number, t.state, by_turn.get(t.id, [])) for t in turns]
    return TranscriptPage(views, earlier=max(0, turns[0].number - 1))


async def prompt_history(store: Any, conversation_id: int, limit: int = 200) -> list[str]:
    """The conversation's last ``limit`` prompts, oldest first, for Up/Down."""
    page = await load_page(store, conversation_id, limit=limit)
    return [e.content for t in page.turns for e in t.entries if e.kind == "prompt"]
