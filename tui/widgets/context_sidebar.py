"""The side panels of the layered context: facts, task and running summary.

Issue "Layered context", "Seeing it, at no model cost": the panels update
live as things change (the app redraws them on ``FactChanged`` and
``SummaryChanged`` events, at the end of each turn and after each slash
command) and are toggled from the keyboard (F2 facts, F3 task, F4
summary). The data comes from
:meth:`wisp.core.context.manager.ContextManager.panel_state`; the panels
only draw it.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical

from ..guard import Guarded
from .context_panel import ContextPanel
from .facts_panel import FactsPanel
from .summary_panel import SummaryPanel
from .task_panel import TaskPanel

__all__ = ["ContextSidebar", "PANELS", "NARROW_WIDTH"]

#: Panel names, the key that toggles each, and its widget id.
PANELS = {"facts": ("f2", "facts-panel"), "task": ("f3", "task-panel"), "summary": ("f4", "summary-panel")}

#: Below this terminal width (columns) the panels fold away and F2–F4 open
#: them over the chat (issue 16, "Narrow terminals").
NARROW_WIDTH = 100


class ContextSidebar(Guarded, Vertical):
    """The three panels in a column beside the chat. Hidden when all three
    are. In a terminal narrower than :data:`NARROW_WIDTH` they fold away
    and, opened with F2–F4, lie over the chat (class ``-overlay``) instead
    of taking its width."""

    DEFAULT_CSS = """
    ContextSidebar {
        width: 38;
        height: 1fr;
    }
    ContextSidebar > .-empty {
        height: auto;
    }
    ContextSidebar.-overlay {
        layer: overlay;
        dock: right;
        background: $surface;
        border-left: tall $accent 50%;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.facts_panel = FactsPanel(id=PANELS["facts"][1])
        self.task_panel = TaskPanel(id=PANELS["task"][1])
        self.summary_panel = SummaryPanel(id=PANELS["summary"][1])

    def on_mount(self) -> None:
        self.fit_width(self.app.size.width)

    def fit_width(self, width: int) -> None:
        """Fold the panels away when the terminal becomes narrower than
        :data:`NARROW_WIDTH` (F2–F4 open them over the chat), and put them
        back beside the chat when it is wide again."""
        narrow = width < NARROW_WIDTH
        if narrow == self.has_class("-overlay"):
            return
        self.set_class(narrow, "-overlay")
        if narrow:  # the chat needs the room; F2–F4 bring the panels back, over it
            self.display = False
        else:
            self.display = any(p.display for p in (self.facts_panel, self.task_panel, self.summary_panel))

    def compose(self) -> ComposeResult:
        yield self.facts_panel
        yield self.task_panel
        yield self.summary_panel

    def panel(self, name: str) -> ContextPanel:
        """The panel called ``facts``, ``task`` or ``summary``."""
        return {"facts": self.facts_panel, "task": self.task_panel, "summary": self.summary_panel}[name]

    def toggle(self, name: str) -> bool:
        """Show or hide one panel; returns whether it is shown now."""
        panel = self.panel(name)
        if not self.display:  # hidden (all panels off, or a narrow terminal): show it with this panel
            self.display = True
            panel.display = True
            return True
        panel.display = not panel.display
        self.display = any(p.display for p in (self.facts_panel, self.task_panel, self.summary_panel))
        return bool(panel.display)

    def show_state(self, state: Any) -> None:
        """Draw a :class:`~wisp.core.context.manager.PanelState`."""
        self.facts_panel.show(state.facts)
        self.task_panel.show(state.task)
        self.summary_panel.show(state.summary)
