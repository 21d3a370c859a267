"""wisp.themes: the themes, the app-wide stylesheet and the highlighting style.

Each widget keeps its own look in its ``DEFAULT_CSS`` (``wisp.tui.widgets``)
and each screen in a ``.tcss`` beside it (``wisp.tui.screens``); here is
what the whole app shares: the colours (:data:`WISP_THEME`, dark, and
:data:`WISP_LIGHT_THEME`, light), the layout of the main screen
(:data:`STYLESHEET`) and the pygments style of highlighted text
(:func:`syntax_theme`, which follows the theme).

Config ``ui.theme`` (issue 16, "Themes") takes ``dark``, ``light``, ``auto``
or any Textual theme's name; :func:`resolve_theme` turns it into the name
of a theme to use. ``auto`` reads the terminal's background from
``COLORFGBG`` (set by rxvt, Konsole, iTerm2 and others, ``"15;0"``: the
foreground and background colour numbers) where it is set, else dark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

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

#: wisp's light theme: the same hues, deep enough to read on white.
WISP_LIGHT_THEME = Theme(
    name="wisp-light",
    primary="#1f6f9f",
    secondary="#4f7f7f",
    accent="#9a6a00",
    warning="#8f6b00",
    error="#b3303b",
    success="#2f7d32",
    background="#fbfbf8",
    surface="#f1f1ec",
    panel="#e4e5df",
    foreground="#1f2328",
    dark=False,
)

#: Both of wisp's themes, dark first (Ctrl+T cycles them).
WISP_THEMES = (WISP_THEME, WISP_LIGHT_THEME)

#: The pygments style of highlighted requests and entries (/inspect context, /show) on a dark theme.
SYNTAX_THEME = "monokai"
#: The same on a light theme.
SYNTAX_THEME_LIGHT = "friendly"


def syntax_theme(dark: bool) -> str:
    """The pygments style for code on a dark or a light theme."""
    return SYNTAX_THEME if dark else SYNTAX_THEME_LIGHT


def background_is_light(env: Mapping[str, str] | None = None) -> bool | None:
    """Whether the terminal's background is light, from ``COLORFGBG``
    (``"fg;bg"`` or ``"fg;default;bg"`` colour numbers; 7 and 9–15 are
    light); ``None`` when it cannot be read."""
    value = (env if env is not None else os.environ).get("COLORFGBG", "")
    last = value.split(";")[-1].strip() if value else ""
    if not last.isdigit():
        return None
    bg = int(last)
    return bg == 7 or 9 <= bg <= 15


def resolve_theme(name: str | None, available: set[str] | frozenset[str],
                  env: Mapping[str, str] | None = None) -> str:
    """The theme to use for config ``ui.theme`` ``name``: ``dark`` →
    ``wisp``, ``light`` → ``wisp-light``, ``auto`` (or nothing) → one of
    them from the terminal's background (dark when unknown), a name in
    ``available`` → itself, anything else → ``wisp``."""
    name = (name or "auto").strip()
    if name == "auto":
        name = "light" if background_is_light(env) else "dark"
    if name == "dark":
        return WISP_THEME.name
    if name == "light":
        return WISP_LIGHT_THEME.name
    return name if name in available else WISP_THEME.name


def theme_problem(name: str | None, available: set[str] | frozenset[str]) -> str | None:
    """What is wrong with config ``ui.theme`` ``name`` when this wisp has no
    such theme (a name written by hand in config.json, which the file's load
    does not check: it may name a theme of a newer wisp), else ``None``.
    :func:`resolve_theme` uses wisp's dark theme for it."""
    name = (name or "auto").strip()
    if name in ("auto", "dark", "light") or name in available:
        return None
    return (f'ui.theme "{name[:40]}" in the config file is not a theme here, so wisp\'s dark theme is used; '
            "/config set ui.theme NAME (Ctrl+T cycles them) takes dark, light, auto or a theme's name.")


__all__ = ["STYLESHEET", "SYNTAX_THEME", "SYNTAX_THEME_LIGHT", "WISP_THEME", "WISP_LIGHT_THEME", "WISP_THEMES",
           "background_is_light", "resolve_theme", "syntax_theme", "theme_problem"]
