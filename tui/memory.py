"""``/memory`` in the TUI: a list of recent memories, and one memory in full.

The screens only draw what :mod:`wisp.core.episodes.commands` returns: the
list comes from the ``/memory`` result's ``data``, and selecting a memory
runs ``/memory show MEM-…`` through :func:`wisp.core.commands.run_command`
(no SQL here). Issue "Episodic memory across conversations", "In the TUI".
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, OptionList, Static
from textual.widgets.option_list import Option

from wisp.core.commands import run_command

__all__ = ["MemoryScreen", "MemoryDetailScreen"]


def _option_text(m: dict[str, Any]) -> str:
    when = (m.get("event_local") or m.get("event_at") or "")[:16].replace("T", " ")
    origin = f"{m.get('workspace', '')} · {m.get('transport', '')} · channel {m.get('channel', '')}"
    return f"{m['id']}  {when}  {origin}\n  {m.get('preview', '')}"


class MemoryDetailScreen(ModalScreen[None]):
    """One memory in full (Markdown from ``/memory show``). Esc goes back to the list."""

    BINDINGS = [Binding("escape,q,backspace", "dismiss", "Back")]
    DEFAULT_CSS = """
    MemoryDetailScreen { align: center middle; }
    MemoryDetailScreen > VerticalScroll { width: 90%; max-width: 120; height: 90%; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, ref: str, markdown: str, error: bool = False) -> None:
        super().__init__()
        self.ref = ref
        self.markdown = markdown
        self.error = error

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="memory-detail"):
            yield Markdown(self.markdown + "\n\n*Esc goes back to the list.*", id="memory-markdown")


class MemoryScreen(ModalScreen[None]):
    """Recent memories as a list; Enter (or a click) opens one. Esc closes."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    MemoryScreen { align: center middle; }
    MemoryScreen > Vertical { width: 90%; max-width: 120; height: 85%; border: round $accent;
        background: $surface; padding: 0 1; }
    MemoryScreen #memory-header { color: $text-muted; padding: 0 0 1 0; }
    MemoryScreen OptionList { height: 1fr; }
    """

    def __init__(self, session: Any, data: dict[str, Any]) -> None:
        super().__init__()
        self.session = session
        self.data = data
        self.memories: list[dict[str, Any]] = list(data.get("memories") or [])

    def compose(self) -> ComposeResult:
        total = self.data.get("total", len(self.memories))
        f = self.data.get("filters") or {}
        where = f"workspace {f['workspace']}" if f.get("workspace") else "all workspaces"
        search = f' matching "{f["search"]}"' if f.get("search") else ""
        with Vertical():
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
