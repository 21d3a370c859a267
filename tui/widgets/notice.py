"""A line from wisp itself: a wait, a warning, an error, a marker on a reply."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from ..guard import Guarded

__all__ = ["Notice", "LEVELS"]

#: A notice's levels; each is also a class (``-info``, ``-warning``, ``-error``) for styling.
LEVELS = ("info", "warning", "error")


class Notice(Guarded, Static):
    """One line (or a few) from wisp, not from the model.

    ``level`` is ``info``, ``warning`` or ``error``. Notices with one ``key``
    stand for one changing state (a wait while the server loads the model):
    the view replaces the text of the last one (:meth:`set_text`) instead of
    adding a line per change.
    """

    DEFAULT_CSS = """
    Notice {
        margin: 1 0 0 0;
        padding: 0 1;
        color: $text-muted;
    }
    Notice.-warning {
        color: $warning;
        border-left: thick $warning;
    }
    Notice.-error {
        color: $error;
        border-left: thick $error;
    }
    """

    text: reactive[str] = reactive("", layout=True)
    """The notice's text (plain, never markup)."""

    def __init__(self, text: str, level: str = "info", key: str | None = None, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        level = level if level in LEVELS else "info"
        super().__init__(text, markup=False, name=name, id=id, classes=classes)
        self.add_class(f"-{level}")
        self.level = level
        self.key = key
        self.set_reactive(Notice.text, text)

    def watch_text(self, text: str) -> None:
        self.update(text)

    def set_text(self, text: str) -> None:
        """Replace the notice's text (a changing state, such as a wait)."""
        self.text = text
