"""A prompt the person sent, as it stands in the conversation.

A long prompt (a paste) is shown folded, its first lines and its size, and
opens on a click (issue 16, "Long pasted prompts are shown folded, with
their size, and open on click").
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from ..guard import Guarded

__all__ = ["UserMessage", "FOLD_LINES", "FOLD_CHARS", "folded_text"]

#: A prompt longer than this many lines, or characters, is shown folded.
FOLD_LINES = 12
FOLD_CHARS = 1200
#: How many of its first lines a folded prompt shows.
HEAD_LINES = 3


def folded_text(text: str) -> str | None:
    """The folded form of a long prompt (its first lines, then its size and
    how to open it), or ``None`` for a prompt short enough to show whole."""
    lines = text.splitlines()
    if len(lines) <= FOLD_LINES and len(text) <= FOLD_CHARS:
        return None
    head = "\n".join(line[:200] for line in lines[:HEAD_LINES])
    if len(head) > 400:
        head = head[:400] + "…"
    return (f"{head}\n▸ pasted text: {len(text):,} characters, {len(lines):,} line{'s' if len(lines) != 1 else ''}, folded "
            "(click to open)")


class UserMessage(Guarded, Static):
    """A prompt the person sent (plain text, never markup).

    ``text`` is the prompt; ``entry`` the number it was stored under
    (``None`` for a prompt that was not sent), so a view can point at
    ``/show entry N``. A long one starts ``folded`` (see the module doc); a
    click opens or folds it again.
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
        self._folded_text = folded_text(text)
        super().__init__(self._folded_text or text, markup=False, name=name, id=id, classes=classes)
        self.text = text
        self.entry = entry
        self.folded = self._folded_text is not None
        self.set_class(self.folded, "-folded")

    def on_click(self, event: Any) -> None:
        """Open a folded prompt, or fold it again."""
        if self._folded_text is None:
            return
        self.folded = not self.folded
        self.set_class(self.folded, "-folded")
        self.update(self._folded_text if self.folded else self.text)
