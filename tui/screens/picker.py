"""A list to pick from, with a filter line: the base of the model picker, Ctrl+R and /search's hits.

Type to narrow the list (every word must appear, any case), Up/Down to move,
Enter to pick, Esc to close without picking. The screen answers the ``value``
of the item picked (its ``id`` unless given; or ``None``). Items whose ids
repeat are shown once each all the same: the list's option ids are made unique.
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
    """One item: ``id`` (which item it is), ``label`` (what the list shows),
    ``search`` (the text the filter looks in; the label when empty) and
    ``value`` (what picking it answers; the id when empty). Two items may
    answer the same value (two hits that jump to the same turn)."""

    id: str
    label: str
    search: str = ""
    value: str = ""

    @property
    def answer(self) -> str:
        return self.value or self.id


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
        """The options of the items shown; an id that repeats gets a suffix
        (OptionList refuses duplicated ids, and the screen answers by index)."""
        seen: set[str] = set()
        options = []
        for item in self.shown:
            oid, n = item.id, 1
            while oid in seen:
                n += 1
                oid = f"{item.id}#{n}"
            seen.add(oid)
            options.append(Option(item.label, id=oid))
        return options

    def _list(self) -> OptionList | None:
        found = self.query(OptionList)
        return found.first() if found else None

    def on_mount(self) -> None:
        for box in self.query(Input):
            box.focus()
        olist = self._list()
        if olist is None:
            return
        ids = [item.id for item in self.shown]
        olist.highlighted = ids.index(self.current) if self.current in ids else (0 if ids else None)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.shown = [item for item in self.items if matches(item, event.value)]
        olist = self._list()
        if olist is None:
            return
        olist.clear_options()
        olist.add_options(self._options())
        olist.highlighted = 0 if self.shown else None

    def action_move(self, step: int) -> None:
        olist = self._list()
        if olist is None or not self.shown:
            return
        now = olist.highlighted if olist.highlighted is not None else -step
        olist.highlighted = max(0, min(len(self.shown) - 1, now + step))

    def action_pick(self) -> None:
        olist = self._list()
        if olist is not None and olist.highlighted is not None and self.shown:
            self.dismiss(self.shown[olist.highlighted].answer)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_pick()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.shown):
            self.dismiss(self.shown[event.option_index].answer)
