"""The line under a reply that has versions: which one is shown, and Left/Right to switch.

Issue 16, "Retry, edit, fork. Nothing is overwritten": ``/retry`` and
``/edit`` keep the old turn as an earlier version; this bar shows "version
2 of 2" under the reply and, focused (click it, or Tab to it), Left and
Right show the earlier or later version in its place. The app draws the
version (:meth:`wisp.tui.conversation_actions.ConversationActions.show_version`);
the bar only asks for it.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from ..guard import Guarded

__all__ = ["VersionBar"]


class VersionBar(Guarded, Static, can_focus=True):
    """``versions``: the turn numbers of every version, oldest first;
    ``shown``: the one on screen. Posts :class:`VersionBar.Switch` for
    Left/Right (or a click on an arrow)."""

    DEFAULT_CSS = """
    VersionBar {
        margin: 0 4 0 0;
        padding: 0 1;
        height: 1;
        color: $text-muted;
    }
    VersionBar:focus {
        color: $text;
        background: $accent 20%;
    }
    """

    BINDINGS = [Binding("left", "step(-1)", "Earlier version", show=False),
                Binding("right", "step(1)", "Later version", show=False)]

    class Switch(Message):
        """Show version ``number`` (a turn number) in place of the one shown."""

        def __init__(self, bar: "VersionBar", number: int) -> None:
            super().__init__()
            self.bar = bar
            self.number = number

    def __init__(self, versions: list[int], shown: int | None = None) -> None:
        super().__init__(markup=False)
        self.versions = list(versions)
        self.shown = shown if shown is not None else self.versions[-1]
        self.add_class(f"versions-of-{self.versions[-1]}")
        self.update(self.label())

    @property
    def slot(self) -> int:
        """The current version's number: the turn the bar stands for."""
        return self.versions[-1]

    @property
    def position(self) -> int:
        """1-based position of the version shown."""
        return self.versions.index(self.shown) + 1

    def label(self) -> str:
        n, total = self.position, len(self.versions)
        left = "◀" if n > 1 else " "
        right = "▶" if n < total else " "
        now = "" if n == total else f" (turn {self.shown}, replaced)"
        return f"{left} version {n} of {total}{now} {right}   ←/→ here to switch · /retry asks again"

    def show(self, number: int) -> None:
        """Mark ``number`` as the version on screen."""
        self.shown = number
        self.update(self.label())

    def action_step(self, step: int) -> None:
        """Left/Right: ask for the earlier or later version."""
        i = self.versions.index(self.shown) + step
        if 0 <= i < len(self.versions):
            self.post_message(self.Switch(self, self.versions[i]))

    def on_click(self, event: Any) -> None:
        """A click focuses the bar; on ◀ it asks for the earlier version, on ▶ the later one."""
        self.focus()
        x = event.x - 1  # the padding
        arrow = self.label().find("▶")
        if x <= 0:
            self.action_step(-1)
        elif arrow >= 0 and abs(x - arrow) <= 1:
            self.action_step(1)
