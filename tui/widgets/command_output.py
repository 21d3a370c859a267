"""A slash command's answer in the conversation, as Markdown."""

from __future__ import annotations

from textual.widgets import Markdown

from ..guard import Guarded

__all__ = ["CommandOutput"]


class CommandOutput(Guarded, Markdown):
    """The Markdown answer of a slash command (``/fact``, ``/config`` …);
    ``error`` marks a refusal or a mistake (class ``-error``). Nothing here
    is sent to the model."""

    DEFAULT_CSS = """
    CommandOutput {
        margin: 1 0 0 0;
        padding: 0 1;
        border-left: thick $secondary;
    }
    CommandOutput.-error {
        border-left: thick $error;
    }
    """

    def __init__(self, text: str, error: bool = False, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(text, name=name, id=id, classes=classes)
        self.error = error
        self.set_class(error, "-error")
