"""The prompt input: a multi-line TextArea with chat-client keys.

Enter sends; Shift+Enter and Ctrl+J insert a newline; Up at the first line
and Down at the last line walk the history of prompts (issue "wisp runs end
to end", "Keys").
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from ..guard import Guarded

__all__ = ["PromptInput"]


class PromptInput(Guarded, TextArea):
    """Where the person types. Posts :class:`PromptInput.Submitted` on Enter.

    ``prompt_history`` holds the prompts sent, oldest first (the app fills it
    with the conversation's stored prompts when it opens one).
    """

    DEFAULT_CSS = """
    PromptInput {
        height: auto;
        max-height: 10;
        min-height: 3;
        margin: 0 1;
        border: round $primary 50%;
    }
    PromptInput:focus {
        border: round $primary;
    }
    """

    class Submitted(Message):
        """The person sent ``text`` (already stripped of surrounding blank lines)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, history: list[str] | None = None, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", name=name, id=id,
                         classes=classes)
        self.prompt_history: list[str] = list(history or [])
        self._history_index: int | None = None
        self._draft = ""

    def add_history(self, text: str) -> None:
        """Remember a sent prompt (consecutive repeats are kept once)."""
        if text and (not self.prompt_history or self.prompt_history[-1] != text):
            self.prompt_history.append(text)
        self._history_index = None

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        if key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text.strip("\n")
            if text.strip():
                self.add_history(text)
                self.clear()
                self.post_message(self.Submitted(text))
            return
        if key in ("shift+enter", "ctrl+j", "newline"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if key == "up" and self.cursor_at_first_line and self.prompt_history:
            event.stop()
            event.prevent_default()
            if self._history_index is None:
                self._draft = self.text
                self._history_index = len(self.prompt_history) - 1
            elif self._history_index > 0:
                self._history_index -= 1
            self._show(self.prompt_history[self._history_index])
            return
        if key == "down" and self.cursor_at_last_line and self._history_index is not None:
            event.stop()
            event.prevent_default()
            if self._history_index < len(self.prompt_history) - 1:
                self._history_index += 1
                self._show(self.prompt_history[self._history_index])
            else:
                self._history_index = None
                self._show(self._draft)
            return
        await super()._on_key(event)
