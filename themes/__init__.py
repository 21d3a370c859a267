"""wisp.themes: the theme, the app-wide stylesheet and the highlighting style.

Each widget keeps its own look in its ``DEFAULT_CSS`` (``wisp.tui.widgets``)
and each screen in a ``.tcss`` beside it (``wisp.tui.screens``); here is
what the whole app shares: the colours (:data:`WISP_THEME`), the layout of
the main screen (:data:`STYLESHEET`) and the pygments style of highlighted
text (:data:`SYNTAX_THEME`).
"""

from __future__ import annotations

from pathlib import Path

from textual.theme import Theme

#: The stylesheet of the main screen.
STYLESHEET: Path = Path(__file__).with_name("wisp.tcss")

#: wisp's default theme: dark, with a calm blue accent.
WISP_THEME = Theme(
    name="wisp",
    primary="#5fafd7",
    secondary="#87afaf",
    accent="#d7af5f",
    warning="#d7af00",
    error="#e06c75",
    success="#98c379",
    background="#1b1d23",
    surface="#23262e",
    panel="#2b2f38",
    dark=True,
)

#: The pygments style of highlighted requests and entries (/inspect context, /show).
SYNTAX_THEME = "monokai"

__all__ = ["STYLESHEET", "SYNTAX_THEME", "WISP_THEME"]
