"""The help screen (F1): keys and slash commands, from :func:`wisp.core.commands.help_text`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from wisp.core.commands import help_text


class HelpScreen(ModalScreen[None]):
    """Keys and commands. Esc, F1 or q closes it."""

    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80%; max-width: 100; height: 80%; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown("# wisp\n\n" + help_text() + "\n\nPress Esc to close.")
