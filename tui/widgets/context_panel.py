"""The base of the layered context's side panels, and the source mark of a fact.

Issue "Layered context", "Seeing it, at no model cost": a fact from each
source is marked as such (you, tool NAME, model), and a proposal as a
proposal (:func:`source_mark`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..guard import Guarded

__all__ = ["ContextPanel", "source_mark"]

_SOURCE_STYLE = {"person": "bold green", "tool": "bold cyan", "model": "bold magenta"}


def source_mark(fact: Any) -> Text:
    """The source mark of a fact: ``[you]``, ``[tool git]``, ``[model]``, and
    ``proposal`` (``/fact keep ID``) for a model's note not yet kept."""
    label = {"person": "you", "tool": f"tool {fact.tool}" if fact.tool else "tool", "model": "model"}.get(
        fact.source, fact.source)
    mark = Text(f"[{label}]", style=_SOURCE_STYLE.get(fact.source, "bold"))
    if fact.proposal:
        mark.append(" proposal", style="bold yellow reverse")
        mark.append(f" /fact keep {fact.vid}", style="yellow")
    elif fact.kept_at:
        mark.append(" kept", style="green")
    return mark


class ContextPanel(Guarded, VerticalScroll):
    """A bordered, scrolling panel with one body: ``title`` on its top border,
    the ``key`` that toggles it on its bottom one. ``plain`` is the body as
    plain text; the class ``-empty`` marks a panel with nothing to show."""

    DEFAULT_CSS = """
    ContextPanel {
        border: round $secondary 60%;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, title: str, key: str, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = title
        self.border_subtitle = key.upper()
        self.body = Static("", markup=False, classes="context-panel-body")
        self.plain = ""

    def compose(self) -> ComposeResult:
        yield self.body

    def set_body(self, content: Text, empty: bool = False) -> None:
        """Draw ``content``; ``empty`` when it only says there is nothing yet."""
        self.plain = content.plain
        self.body.update(content)
        self.set_class(empty, "-empty")
