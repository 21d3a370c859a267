"""The welcome an empty chat shows: the model and endpoint in use, three things to try, F1.

Issue 16, "What a person reaches for first": "An empty chat shows a short
welcome". It goes away when the first turn starts.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..guard import Guarded

__all__ = ["Welcome", "TRY"]

#: Three things to try, as (what to type, what it does).
TRY = (
    ("what files are in this directory?", "ask; it may read them"),
    ("/model", "pick another model"),
    ("/fact decision tone = brief", "a fact it sees every turn"),
)


class Welcome(Guarded, Static):
    """A few lines for an empty conversation. :meth:`show_model` fills in
    the model and endpoint once they are known."""

    DEFAULT_CSS = """
    Welcome {
        margin: 1 2 0 2;
        padding: 1 2;
        border: round $primary 60%;
        height: auto;
        color: $text;
    }
    """

    def __init__(self, model: str = "", endpoint: str = "", *, id: str | None = "welcome") -> None:
        super().__init__(id=id)
        self.model = model
        self.endpoint = endpoint
        #: The connect failed: no model answers (the error line below says why).
        self.failed = False
        self.update(self._text())

    def _text(self) -> Text:
        out = Text()
        out.append("wisp", style="bold")
        out.append(" · you see everything the model is given\n\n")
        if self.model:
            out.append("Model ", style="dim")
            out.append(self.model, style="bold")
            out.append(" at ", style="dim")
            out.append(f"{self.endpoint}\n\n")
        elif self.failed:
            out.append("No model endpoint answers yet: the line below says why and what to do.\n\n", style="dim")
        else:
            out.append(f"Connecting: {self.endpoint or 'looking for a model endpoint'}…\n\n", style="dim")
        out.append("Try:\n")
        for typed, why in TRY:
            out.append("  • ")
            out.append(typed, style="bold")
            out.append(f"  — {why}\n", style="dim")
        out.append("\nF1 lists every command and key.", style="dim")
        return out

    def show_model(self, model: str, endpoint: str, *, failed: bool = False) -> None:
        """Name the model and endpoint in use (``failed``: none answers)."""
        self.model, self.endpoint, self.failed = model, endpoint, failed
        self.update(self._text())
