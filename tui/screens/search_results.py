"""``/search TEXT`` with several hits: pick one to jump to it (issue 16, "Search").

The hits are the ``data`` of the ``/search`` result (SQLite FTS5, read by
the core: prompts, replies, tool calls and outputs, earlier versions marked);
picking one answers its turn and kind as ``"TURN:KIND"`` (an earlier
version's hit jumps to the turn that asked it again). Each hit's item is
named by its entry, so a hit of an earlier version and one of the current
version of the same turn are two items.
"""

from __future__ import annotations

from typing import Any

from .picker import PickerScreen, PickItem

__all__ = ["SearchResultsScreen", "hit_who", "jump_turn"]


def hit_who(hit: dict[str, Any]) -> str:
    """``you``, ``reply``, ``read_file call``, ``read_file output``: what a hit is."""
    kind = hit.get("kind")
    if kind == "prompt":
        return "you"
    if kind == "reply":
        return "reply"
    return f"{hit.get('tool') or 'tool'} {'call' if kind == 'tool_call' else 'output'}"


def jump_turn(hit: dict[str, Any]) -> int:
    """The turn a hit jumps to: its own, or for an earlier version the turn
    that asked it again (whose version bar shows the earlier one)."""
    if not hit.get("current", True) and hit.get("superseded_by") is not None:
        return int(hit["superseded_by"])
    return int(hit.get("turn") or 0)


class SearchResultsScreen(PickerScreen):
    """``hits`` (dicts with ``turn``, ``kind``, ``snippet``), ``text`` (what was searched)."""

    CSS_PATH = ["modal.tcss", "picker.tcss", "search_results.tcss"]
    BOX_ID = "search-box"
    PLACEHOLDER = "type to narrow the hits"

    def __init__(self, hits: list[dict[str, Any]], text: str) -> None:
        items = []
        for h in hits:
            snippet = str(h.get("snippet") or "").replace("**", "")
            old = "" if h.get("current", True) else f", an earlier version (turn {h.get('superseded_by')} asked it again)"
            # one id per hit: its entry (an earlier version's hit and the current one jump to the same turn)
            items.append(PickItem(f"{h.get('entry')}:{h.get('turn')}:{h.get('kind')}:{'now' if h.get('current', True) else 'old'}",
                                  f"turn {h.get('turn')}{old} ({hit_who(h)}): {snippet}", snippet,
                                  value=f"{jump_turn(h)}:{h.get('kind')}"))
        super().__init__(f"{len(hits)} hits for {text!r} in this conversation, newest first", items,
                         hint="Enter jumps to it · Esc closes · type to narrow")
