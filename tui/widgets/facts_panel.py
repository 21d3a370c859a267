"""The facts panel (F2): the current facts, each with its id and source."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .context_panel import ContextPanel, source_mark

__all__ = ["FactsPanel"]


class FactsPanel(ContextPanel):
    """The current facts, one a line, each with its id and source mark, and
    the value it replaced."""

    DEFAULT_CSS = """
    FactsPanel {
        height: 1fr;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("Facts", "f2", name=name, id=id, classes=classes)

    def show(self, facts: list[Any]) -> None:
        """Draw ``facts`` (:class:`~wisp.core.context.composer.FactView` list)."""
        if not facts:
            self.set_body(Text("No facts yet.\n/fact SUBJECT NAME = VALUE", style="dim"), empty=True)
            return
        out = Text()
        for i, view in enumerate(facts):
            f = view.fact
            if i:
                out.append("\n")
            out.append(f"{f.vid} ", style="dim")
            out.append(f.label, style="bold")
            out.append(" = ")
            out.append(f.value)
            out.append(" ")
            out.append_text(source_mark(f))
            if view.previous is not None and view.previous != f.value:
                out.append(f"\n   before: {view.previous}", style="dim")
        self.set_body(out)
