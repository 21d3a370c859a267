"""Ctrl+R: search the history of prompts, newest first (issue 16, "Ctrl+R over the prompt history").

Picking one puts it back in the prompt input, to send or change.
"""

from __future__ import annotations

from .picker import PickerScreen, PickItem

__all__ = ["HistorySearchScreen"]


def _label(prompt: str) -> str:
    one = " ".join(prompt.split())
    return one if len(one) <= 100 else one[:99] + "…"


class HistorySearchScreen(PickerScreen):
    """``history``: the prompts sent, oldest first (the prompt input's)."""

    CSS_PATH = ["modal.tcss", "picker.tcss", "history_search.tcss"]
    BOX_ID = "history-box"
    PLACEHOLDER = "type words of an earlier prompt"

    def __init__(self, history: list[str]) -> None:
        newest = list(dict.fromkeys(reversed(history)))  # newest first, each prompt once
        self.prompts = {str(i): p for i, p in enumerate(newest)}
        items = [PickItem(str(i), _label(p), p) for i, p in enumerate(newest)]
        super().__init__(f"Earlier prompts ({len(items)}), newest first", items,
                         hint="Enter puts it in the input · Esc closes · type to filter")
