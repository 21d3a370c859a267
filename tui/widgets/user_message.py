"""A prompt the person sent, as it stands in the conversation."""

from __future__ import annotations

from textual.widgets import Static

from ..guard import Guarded

__all__ = ["UserMessage"]


class UserMessage(Guarded, Static):
    """A prompt the person sent (plain text, never markup).

    ``text`` is the prompt; ``entry`` the number it was stored under
    (``None`` for a prompt that was not sent), so a view can point at
    ``/show entry N``.
    """

    DEFAULT_CSS = """
    UserMessage {
        margin: 1 0 0 8;
        padding: 0 1;
        background: $primary 20%;
        border-left: thick $primary;
    }
    """

    def __init__(self, text: str, entry: int | None = None, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(text, markup=False, name=name, id=id, classes=classes)
        self.text = text
        self.entry = entry
