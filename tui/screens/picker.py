"""A list to pick from, with a filter line: the base of the model picker, Ctrl+R and /search's hits.

Type to narrow the list (every word must appear, any case), Up/Down to move,
Enter to pick, Esc to close without picking. The screen answers the ``id`` of
the item picked (or ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from .modal import WispModal

__all__ = ["PickerScreen", "PickItem", "matches"]


@dataclass(frozen=True)
class PickItem:
    """One item: ``id`` (what picking it answers), ``label`` (what the list
    shows) and ``search`` (the text the filter looks in; the label when empty)."""

    id: str
    label: str
    search: str = ""


def matches(item: PickItem, query: str) -> bool:
    """Whether every word of ``query`` appears in the item's text, any case."""
    hay = (item.search or item.label).lower()
    return all(word in hay for word in query.lower().split())


class PickerScreen(WispModal[str]):
    """``title`` above the list, ``items`` in it, ``hint`` below; ``current``
    is the id to highlight first. Subclasses set ``BOX_ID`` and their own
    ``.tcss``."""

    CSS_PATH = ["modal.tcss", "picker.tcss"]
    BINDINGS = [Binding("down", "move(1)", show=False), Binding("up", "move(-1)", show=False),
                Binding("enter", "pick", show=False)]
    BOX_ID = "picker-box"
    #: What the filter line says while empty.
    PLACEHOLDER = "type to filter"

    def __init__(self, title: str, items: list[PickItem], *, current: str | None = None, hint: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.items = list(items)
        self.current = current
        self.hint = hint or "Enter picks · Esc closes · type to filter"
        self.shown: list[PickItem] = list(self.items)

    def compose_box(self) -> ComposeResult:
        yield Static(self.title_text, classes="view-head", markup=False)
        yield Input(placeholder=self.PLACEHOLDER, id="picker-filter")
        yield OptionList(*self._options(), id="picker-list")
        yield Static(self.hint, classes="view-foot", markup=False)

    def _options(self) -> list[Option]:
        return [Option(item.label, id=item.id) for item in self.shown]

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        olist = self.query_one(OptionList)
        ids = [item.id for item in self.shown]
        olist.highlighted = ids.index(self.current) if self.current in ids else (0 if ids else None)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.shown = [item for item in self.items if matches(item, event.value)]
        olist = self.query_one(OptionList)
        olist.clear_options()
        olist.add_options(self._options())
        olist.highlighted = 0 if self.shown else None

    def action_move(self, step: int) -> None:
        olist = self.query_one(OptionList)
        if not self.shown:
            return
        now = olist.highlighted if olist.highlighted is not None else -step
        olist.highlighted = max(0, min(len(self.shown) - 1, now + step))

    def action_pick(self) -> None:
        olist = self.query_one(OptionList)
        if olist.highlighted is not None and self.shown:
            self.dismiss(self.shown[olist.highlighted].id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_pick()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)
