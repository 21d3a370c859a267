"""The model's reasoning, apart from its reply and collapsed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Collapsible, Static

from ..guard import Guarded

__all__ = ["ThinkingBlock"]

#: Streamed thinking is drawn at most this often (seconds), and only while the block is open.
THINKING_FRAME_S = 1 / 30


class ThinkingBlock(Guarded, Collapsible):
    """The model's reasoning: apart from the reply, collapsed by default.

    ``text`` is all the thinking so far; :meth:`append` adds a streamed piece.
    It is never part of the reply's text. Closed, it is one line: its text
    is made into a widget only when it is first opened, and streamed pieces
    are drawn at most :data:`THINKING_FRAME_S` apart (issue 12).
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
        super().__init__(title="thinking", collapsed=True, name=name, id=id, classes=classes)
        self._parts = [text] if text else []
        self._joined: str | None = text
        self._body: Static | None = None
        self._drawing = False

    @property
    def text(self) -> str:
        """All the thinking so far."""
        if self._joined is None:
            self._joined = "".join(self._parts)
            self._parts = [self._joined] if self._joined else []
        return self._joined

    def compose(self) -> ComposeResult:
        yield self._title
        if not self.collapsed:
            yield self._make_body()

    def _make_body(self) -> Collapsible.Contents:
        self._body = Static(self.text, markup=False, classes="thinking-text")
        return self.Contents(self._body)

    def _watch_collapsed(self, collapsed: bool) -> None:
        super()._watch_collapsed(collapsed)
        if not collapsed and self._body is None and self.is_mounted:
            self.mount(self._make_body())

    def append(self, piece: str) -> None:
        """Add a piece of streamed thinking."""
        self._parts.append(piece)
        self._joined = None
        if self._body is not None and not self._drawing:
            self._drawing = True
            self.set_timer(THINKING_FRAME_S, self._draw)

    def _draw(self) -> None:
        self._drawing = False
        if self._body is not None:
            self._body.update(self.text)
