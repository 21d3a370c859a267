"""The model's reasoning, apart from its reply and collapsed."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

from ..guard import Guarded

__all__ = ["ThinkingBlock"]


class ThinkingBlock(Guarded, Collapsible):
    """The model's reasoning: apart from the reply, collapsed by default.

    ``text`` is all the thinking so far; :meth:`append` adds a streamed piece.
    It is never part of the reply's text.
    """

    DEFAULT_CSS = """
    ThinkingBlock {
        margin: 0;
        padding: 0;
        border: none;
        background: $boost;
        color: $text-muted;
    }
    ThinkingBlock .thinking-text {
        color: $text-muted;
        text-style: italic;
    }
    """

    def __init__(self, text: str = "", *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        self._body = Static(text, markup=False, classes="thinking-text")
        super().__init__(self._body, title="thinking", collapsed=True, name=name, id=id, classes=classes)
        self.text = text

    def append(self, piece: str) -> None:
        """Add a piece of streamed thinking."""
        self.text += piece
        self._body.update(self.text)
