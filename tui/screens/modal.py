"""The base of wisp's modal screens: a box over the chat that Esc closes.

Every view that opens over the chat (help, the approval modal, the context
views, the memory list) derives from :class:`WispModal`: the screen centres
one box (``.modal-box``: a rounded border, the surface colour) and Esc
closes it with :meth:`WispModal.close_result`. Each screen keeps its own
layout in a ``.tcss`` beside its module, listed after ``modal.tcss`` in its
``CSS_PATH``.
"""

from __future__ import annotations

from typing import TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget

from ..guard import Guarded

__all__ = ["WispModal"]

ResultType = TypeVar("ResultType")


class WispModal(Guarded, ModalScreen[ResultType]):
    """A modal screen of wisp: one box, centred; Esc closes it.

    Subclasses yield their content from :meth:`compose_box`; the box is a
    ``BOX`` (a :class:`~textual.containers.Vertical` unless a subclass picks
    a scrolling one) with the id ``BOX_ID`` and the class ``modal-box``.
    """

    CSS_PATH = "modal.tcss"
    BINDINGS = [Binding("escape", "close", "Close")]

    #: The container of the box.
    BOX: type[Widget] = Vertical
    #: The box's id, for the screen's own stylesheet.
    BOX_ID: str | None = None

    def compose(self) -> ComposeResult:
        with self.BOX(id=self.BOX_ID, classes="modal-box"):
            yield from self.compose_box()

    def compose_box(self) -> ComposeResult:
        """The content of the box (override)."""
        yield from ()

    def close_result(self) -> ResultType | None:
        """What closing with Esc answers (``None`` unless a subclass says otherwise)."""
        return None

    def action_close(self) -> None:
        """Esc: close the screen with :meth:`close_result`."""
        self.dismiss(self.close_result())
