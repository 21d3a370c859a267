"""``/search TEXT`` with several hits: pick one to jump to it (issue 16, "Search").

The hits are the ``data`` of the ``/search`` result (SQLite FTS5, read by
the core); picking one answers its turn and kind as ``"TURN:KIND"``.
"""

from __future__ import annotations

from typing import Any

from .picker import PickerScreen, PickItem

__all__ = ["SearchResultsScreen"]


class SearchResultsScreen(PickerScreen):
    """``hits`` (dicts with ``turn``, ``kind``, ``snippet``), ``text`` (what was searched)."""

    CSS_PATH = ["modal.tcss", "picker.tcss", "search_results.tcss"]
    BOX_ID = "search-box"
    PLACEHOLDER = "type to narrow the hits"

    def __init__(self, hits: list[dict[str, Any]], text: str) -> None:
        items = []
        for h in hits:
            who = "you" if h.get("kind") == "prompt" else "reply"
            snippet = str(h.get("snippet") or "").replace("**", "")
            items.append(PickItem(f"{h.get('turn')}:{h.get('kind')}", f"turn {h.get('turn')} ({who}): {snippet}",
                                  snippet))
        super().__init__(f"{len(hits)} hits for {text!r} in this conversation, newest first", items,
                         hint="Enter jumps to it · Esc closes · type to narrow")
