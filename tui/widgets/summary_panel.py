"""The running summary panel (F4): the latest version, the turns it covers, its text."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .context_panel import ContextPanel

__all__ = ["SummaryPanel"]


class SummaryPanel(ContextPanel):
    """The latest running summary: its version, the turns it covers, the
    turns kept whole, its text and how many tool outputs stand as references."""

    DEFAULT_CSS = """
    SummaryPanel {
        height: 1fr;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("Running summary", "f4", name=name, id=id, classes=classes)

    def show(self, summary: Any) -> None:
        """Draw the latest :class:`~wisp.core.context.summary.SummaryVersion` (or ``None``)."""
        from wisp.core.context.summary import turn_ranges  # the context loads after the first frame

        if summary is None:
            self.set_body(Text("None yet: every turn fits in the window.", style="dim"), empty=True)
            return
        out = Text()
        out.append(f"version {summary.version} · covers turns {turn_ranges(summary.covers)}", style="bold")
        if summary.kept_whole:
            out.append(f"\nkept whole: turns {turn_ranges(summary.kept_whole)}", style="yellow")
        out.append("\n")
        out.append(summary.text)
        if summary.refs:
            out.append(f"\n{len(summary.refs)} tool outputs stand as references", style="dim")
        self.set_body(out)
