"""``/memory`` in the TUI: the recent memories as a list.

The screen only draws what :mod:`wisp.core.episodes.commands` returns: the
list comes from the ``/memory`` result's ``data``, and selecting a memory
runs ``/memory show MEM-…`` through :func:`wisp.core.commands.run_command`
(no SQL here) and opens :class:`~wisp.tui.screens.memory_detail.MemoryDetailScreen`.
Issue "Episodic memory across conversations", "In the TUI".
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from wisp.core.commands import run_command

from .memory_detail import MemoryDetailScreen
from .modal import WispModal

__all__ = ["MemoryScreen"]


def _option_text(m: dict[str, Any]) -> str:
    when = (m.get("event_local") or m.get("event_at") or "")[:16].replace("T", " ")
    origin = f"{m.get('workspace', '')} · {m.get('transport', '')} · channel {m.get('channel', '')}"
    return f"{m['id']}  {when}  {origin}\n  {m.get('preview', '')}"


class MemoryScreen(WispModal[None]):
    """Recent memories (``data`` of a ``/memory`` result) as a list; Enter
    (or a click) opens one. Esc or q closes."""

    CSS_PATH = ["modal.tcss", "memory_list.tcss"]
    BINDINGS = [Binding("q", "close", "Close")]
    BOX_ID = "memory-box"

    def __init__(self, session: Any, data: dict[str, Any]) -> None:
        super().__init__()
        self.session = session
        self.data = data
        self.memories: list[dict[str, Any]] = list(data.get("memories") or [])

    def compose_box(self) -> ComposeResult:
        total = self.data.get("total", len(self.memories))
        f = self.data.get("filters") or {}
        where = f"workspace {f['workspace']}" if f.get("workspace") else "all workspaces"
        search = f' matching "{f["search"]}"' if f.get("search") else ""
        yield Static(f"Memory: {len(self.memories)} of {total}{search} ({where}; times in "
                     f"{self.data.get('timezone', '')}), newest first. Enter opens one; Esc closes.",
                     id="memory-header", markup=False)
        yield OptionList(*[Option(_option_text(m), id=m["id"]) for m in self.memories], id="memory-list")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        ref = event.option.id or ""
        result = await run_command(self.session, f"/memory show {ref}")
        await self.app.push_screen(MemoryDetailScreen(ref, result.text, result.error))
