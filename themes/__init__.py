"""wisp.themes: .tcss styles and Textual themes."""

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

__all__ = ["STYLESHEET", "WISP_THEME"]
