"""One memory in full, from ``/memory show MEM-…`` (issue "Episodic memory", "In the TUI")."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Markdown

from .modal import WispModal

__all__ = ["MemoryDetailScreen"]


class MemoryDetailScreen(WispModal[None]):
    """The memory ``ref`` in full (``markdown`` from ``/memory show``;
    ``error`` when that refused). Esc, q or Backspace goes back to the list."""

    CSS_PATH = ["modal.tcss", "memory_detail.tcss"]
    BINDINGS = [Binding("q,backspace", "close", "Back")]
    BOX = VerticalScroll
    BOX_ID = "memory-detail"

    def __init__(self, ref: str, markdown: str, error: bool = False) -> None:
        super().__init__()
        self.ref = ref
        self.markdown = markdown
        self.error = error

    def compose_box(self) -> ComposeResult:
        yield Markdown(self.markdown + "\n\n*Esc goes back to the list.*", id="memory-markdown")
