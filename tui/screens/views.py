"""Which view a slash command's result opens, if any."""

from __future__ import annotations

from typing import Any

from textual.screen import ModalScreen

from wisp.core.context.inspect import ContextReport
from wisp.core.context.show import ShowMaterial

from .inspect_context import InspectContextScreen
from .show import ShowScreen

__all__ = ["view_for"]


def view_for(result: Any) -> ModalScreen[None] | None:
    """The screen to open for a command's result: the context view for
    ``/inspect context`` (a :class:`~wisp.core.context.inspect.ContextReport`),
    the show view for ``/show …`` (a :class:`~wisp.core.context.show.ShowMaterial`);
    ``None`` (show its text in the chat) for anything else or an error."""
    if getattr(result, "error", False):
        return None
    data = getattr(result, "data", None)
    if isinstance(data, ContextReport):
        return InspectContextScreen(data)
    if isinstance(data, ShowMaterial):
        return ShowScreen(data)
    return None
