"""The help screen (F1): keys and slash commands, from :func:`wisp.core.commands.help_text`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Markdown

from wisp.core.commands import help_text

from .modal import WispModal

__all__ = ["HelpScreen"]


class HelpScreen(WispModal[None]):
    """Keys and commands. Esc, F1 or q closes it."""

    CSS_PATH = ["modal.tcss", "help.tcss"]
    BINDINGS = [Binding("f1,q", "close", "Close")]
    BOX = VerticalScroll
    BOX_ID = "help-box"

    def compose_box(self) -> ComposeResult:
        yield Markdown("# wisp\n\n" + help_text() + "\n\nPress Esc to close.")
