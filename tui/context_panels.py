"""Side panels of the layered context: facts, task and running summary.

Issue "Layered context", "Seeing it, at no model cost": the panels update
live as things change (the app refreshes them on ``FactChanged`` and
``SummaryChanged`` events, at the end of each turn and after each slash
command) and are toggled from the keyboard (F2 facts, F3 task, F4
summary). A fact from each source is marked as such (you, tool NAME,
model), and a proposal as a proposal. The data comes from
:meth:`wisp.core.context.manager.ContextManager.panel_state`; this module
only draws it.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

__all__ = ["ContextSidebar", "FactsPanel", "TaskPanel", "SummaryPanel", "source_mark", "PANELS"]

#: Panel names, the key that toggles each, and its widget id.
PANELS = {"facts": ("f2", "facts-panel"), "task": ("f3", "task-panel"), "summary": ("f4", "summary-panel")}

#: Below this terminal width (columns) the panels start hidden.
NARROW_WIDTH = 90

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


class _Panel(VerticalScroll):
    """A bordered, scrolling panel with one Static body."""

    def __init__(self, title: str, key: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = title
        self.border_subtitle = key.upper()
        self.body = Static("", markup=False, classes="context-panel-body")
        self.plain = ""

    def compose(self) -> ComposeResult:
        yield self.body

    def set_body(self, content: Text, empty: bool = False) -> None:
        self.plain = content.plain
        self.body.update(content)
        self.set_class(empty, "-empty")


class FactsPanel(_Panel):
    """The current facts, one a line, each with its id and source mark."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Facts", "f2", **kwargs)

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


class TaskPanel(_Panel):
    """The task and its objective, with who set it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Task", "f3", **kwargs)

    def show(self, task: Any) -> None:
        """Draw the task fact (or ``None``)."""
        if task is None:
            self.set_body(Text("No task.\n/task THE TASK; objective: …", style="dim"), empty=True)
            return
        value = task.value
        head, sep, objective = value.partition("; objective: ")
        out = Text()
        out.append(head, style="bold")
        if sep:
            out.append("\nobjective: ", style="dim")
            out.append(objective)
        out.append("\n")
        out.append(f"{task.vid} ", style="dim")
        out.append_text(source_mark(task))
        self.set_body(out)


class SummaryPanel(_Panel):
    """The latest running summary: its version, the turns it covers, its text."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Running summary", "f4", **kwargs)

    def show(self, summary: Any) -> None:
        """Draw the latest :class:`~wisp.core.context.summary.SummaryVersion` (or ``None``)."""
        if summary is None:
            self.set_body(Text("None yet: every turn fits in the window.", style="dim"), empty=True)
            return
        from wisp.core.context.summary import turn_ranges

        out = Text()
        out.append(f"version {summary.version} · covers turns {turn_ranges(summary.covers)}", style="bold")
        if summary.kept_whole:
            out.append(f"\nkept whole: turns {turn_ranges(summary.kept_whole)}", style="yellow")
        out.append("\n")
        out.append(summary.text)
        if summary.refs:
            out.append(f"\n{len(summary.refs)} tool outputs stand as references", style="dim")
        self.set_body(out)


class ContextSidebar(Vertical):
    """The three panels in a column beside the chat. Hidden when all three are."""

    DEFAULT_CSS = """
    ContextSidebar { width: 38; height: 1fr; }
    ContextSidebar > _Panel { border: round $secondary 60%; padding: 0 1; scrollbar-size-vertical: 1; }
    ContextSidebar > FactsPanel { height: 1fr; }
    ContextSidebar > TaskPanel { height: auto; max-height: 9; }
    ContextSidebar > SummaryPanel { height: 1fr; }
    ContextSidebar > .-empty { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.facts_panel = FactsPanel(id="facts-panel")
        self.task_panel = TaskPanel(id="task-panel")
        self.summary_panel = SummaryPanel(id="summary-panel")

    def on_mount(self) -> None:
        if self.app.size.width < NARROW_WIDTH:  # the chat needs the room; F2–F4 bring the panels back
            self.display = False

    def compose(self) -> ComposeResult:
        yield self.facts_panel
        yield self.task_panel
        yield self.summary_panel

    def panel(self, name: str) -> _Panel:
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
