"""The task panel (F3): the task, its objective and who set it."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .context_panel import ContextPanel, source_mark

__all__ = ["TaskPanel"]


class TaskPanel(ContextPanel):
    """The task and its objective, with who set it."""

    DEFAULT_CSS = """
    TaskPanel {
        height: auto;
        max-height: 9;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("Task", "f3", name=name, id=id, classes=classes)

    def show(self, task: Any) -> None:
        """Draw the task fact (or ``None``)."""
        if task is None:
            self.set_body(Text("No task.\n/task THE TASK; objective: …", style="dim"), empty=True)
            return
        head, sep, objective = task.value.partition("; objective: ")
        out = Text()
        out.append(head, style="bold")
        if sep:
            out.append("\nobjective: ", style="dim")
            out.append(objective)
        out.append("\n")
        out.append(f"{task.vid} ", style="dim")
        out.append_text(source_mark(task))
        self.set_body(out)
