"""The chat pane: the conversation, drawn from the agent's events.

:class:`ChatPane` maps the events of :mod:`wisp.core.events` to widgets
through one method, :meth:`TurnRenderer.show`, for a live turn as it
streams and for stored turns loaded from the store (which
:func:`wisp.core.transcript.turn_events` turns back into the same events).
So the markers of a reply (cut, stopped, incomplete) are written in one
place, :meth:`TurnRenderer.mark`, and a resumed conversation looks as it
did live (issue 9, "The TUI renders events").

A long conversation is shown from its last turns, as many as fill the
screen (issue 12, "Open what is seen"): scrolling up to the first turn
shown, or "Show earlier turns", loads the ones before it, and the view
stays where it was. A stored tool block is one line until opened, a stored
reply is parsed once and drawn only where it is seen
(:class:`~wisp.tui.widgets.ReplyText`). The pane is anchored to
its end (Textual's ``anchor()``): it follows a streaming reply until the
person scrolls up, and again once they scroll back down. Its widgets sit in
one column (``#chat-log``) at least as tall as the pane, so a short
conversation starts at the top, not at the bottom as a bare anchored pane
would put it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget

from ..guard import Guarded

if TYPE_CHECKING:
    from textual.widgets import Button

    from wisp.core import events as ev

    from .assistant_message import AssistantMessage
    from ..turn_renderer import TurnRenderer

__all__ = ["ChatPane", "TurnRenderer", "MARKERS", "TOOL_STOPPED", "estimate_rows"]


def __getattr__(name: str) -> Any:
    """``TurnRenderer``, ``MARKERS`` and ``TOOL_STOPPED`` live in :mod:`wisp.tui.turn_renderer`
    (loaded with the first turn drawn, not with the first frame)."""
    if name in ("TurnRenderer", "MARKERS", "TOOL_STOPPED"):
        from .. import turn_renderer

        return getattr(turn_renderer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Rows of the screen's height to fill with the last turns when a conversation opens
#: (twice the pane's height, so the first scroll up has turns to show).
FILL_SCREENS = 2
#: When the view comes within this many rows of the first (or last) stored turn shown, the turns
#: before (or after) it are loaded.
LOAD_ROWS = 3
#: At most this many stored turns are mounted at once: loading more above unmounts the newest ones
#: (far below the view), loading more below unmounts the oldest, so a 10,000-turn conversation
#: scrolls as lightly as a short one (issue 12, "Open what is seen").
MAX_TURNS_MOUNTED = 60


def estimate_rows(turn: Any, width: int) -> int:
    """About how many rows a stored turn (:class:`~wisp.core.transcript.TurnView`)
    takes at ``width`` columns, without drawing it: its prompt and replies
    wrapped, one line a tool block or thinking (closed), two a notice."""
    width = max(20, width - 8)
    rows = 0
    for e in turn.entries:
        if e.kind in ("prompt", "reply"):
            text = e.content or ""
            rows += 1 + sum(max(1, math.ceil(len(line) / width)) for line in text.split("\n"))
        elif e.kind in ("tool_call", "thinking"):
            rows += 1
        elif e.kind == "notice":
            rows += 2
    return rows


class ChatPane(Guarded, VerticalScroll):
    """The scrolling conversation.

    :meth:`show_event` draws a live event at the end. Stored turns are shown
    through the same :class:`TurnRenderer`, as a window of at most
    :data:`MAX_TURNS_MOUNTED` turns: :meth:`show_last_turns` opens a
    conversation with the turns that fill the screen, :meth:`show_turns`
    adds stored turns (``above`` the window, or below it), and
    :meth:`show_window` replaces the window (Ctrl+Home, Ctrl+End). Posts
    :class:`LoadEarlier` when the person scrolls up to the first stored
    turn shown or asks for earlier turns, :class:`LoadLater` when they
    scroll down to the last one of a window that does not reach the end.
    """

    DEFAULT_CSS = """
    ChatPane {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    ChatPane > #chat-log {
        height: auto;
        min-height: 100%;
    }
    ChatPane #load-earlier {
        width: 100%;
        margin: 0 0 1 0;
    }
    ChatPane #load-later {
        width: 100%;
        margin: 1 0 0 0;
    }
    """

    class LoadEarlier(Message):
        """The person asked to see the turns before the first one shown."""

    class LoadLater(Message):
        """The person scrolled down to the last stored turn shown, and more follow it."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.earlier_button: Button | None = None
        self.later_button: Button | None = None
        #: The column of the conversation's widgets, in order.
        self.log_column = Vertical(id="chat-log")
        self._live: TurnRenderer | None = None
        #: Stored turns loaded but not mounted yet (the rest of the first page), oldest first.
        self._kept: list[Any] = []
        #: The stored turns mounted, in order: (turn number, its widgets).
        self._window: list[tuple[int, list[Widget]]] = []
        #: Turns before the first stored turn shown (kept ones included), and after the last one.
        self.earlier = 0
        self.later = 0
        self._loading = False
        self._generation = 0  # counts the times the window was replaced
        #: The live turn being drawn: its number and its widgets (in the window too), or ``None``.
        self._live_turn: tuple[int, list[Widget]] | None = None
        #: Called with the stored turns (:class:`~wisp.core.transcript.TurnView`) once they are
        #: mounted (the app puts a bar under each turn that has versions, issue 16).
        self.turns_drawn: Callable[[list[Any]], Awaitable[None]] | None = None

    def compose(self) -> ComposeResult:
        yield self.log_column

    def on_mount(self) -> None:
        self.anchor()

    @property
    def shown(self) -> list[Widget]:
        """The conversation's widgets, in order (the "Show earlier turns" button first when shown)."""
        return list(self.log_column.children)

    @property
    def first_turn_shown(self) -> int | None:
        """The number of the first stored turn shown, or ``None``."""
        return self._window[0][0] if self._window else None

    @property
    def last_turn_shown(self) -> int | None:
        """The number of the last stored turn shown, or ``None``."""
        return self._window[-1][0] if self._window else None

    def _last_shown(self) -> Widget | None:
        children = self.log_column.children
        return children[-1] if children else None

    async def add(self, widget: Widget) -> None:
        """Mount ``widget`` at the end (the anchor keeps the end in view unless the person scrolled up)."""
        if self._live_turn is not None:
            self._live_turn[1].append(widget)
        await self.log_column.mount(widget)

    @property
    def live(self) -> "TurnRenderer":
        """The renderer of the live turn (made with the first one)."""
        if self._live is None:
            from ..turn_renderer import TurnRenderer

            self._live = TurnRenderer(self.add, self._last_shown, live=True)
        return self._live

    async def show_event(self, event: "ev.AgentEvent") -> None:
        """Draw one event of the live turn at the end (its widgets join the
        window of turns shown, like a stored turn's)."""
        live = self._live or self.live
        kind = type(event).__name__
        if kind == "TurnStarted":
            self._live_turn = (event.turn, [])  # type: ignore[attr-defined]
            self._window.append(self._live_turn)
        await live.show(event)
        if kind == "TurnEnded":
            self._live_turn = None

    @property
    def streaming(self) -> bool:
        """True while a live turn is being drawn."""
        return self._live_turn is not None

    async def _draw(self, turns: Iterable[Any]) -> list[tuple[int, list[Widget]]]:
        """The widgets of stored turns (:class:`~wisp.core.transcript.TurnView`), turn by turn."""
        from wisp.core.transcript import turn_events

        from ..turn_renderer import TurnRenderer

        out: list[tuple[int, list[Widget]]] = []
        for turn in turns:
            widgets: list[Widget] = []

            async def keep(widget: Widget, widgets: list[Widget] = widgets) -> None:
                widgets.append(widget)

            renderer = TurnRenderer(keep, lambda widgets=widgets: widgets[-1] if widgets else None)
            for event in turn_events(turn):
                await renderer.show(event)
            out.append((turn.number, widgets))
        return out

    async def show_turns(self, turns: Iterable[Any], *, above: bool = False) -> None:
        """Draw stored turns, mounted at once: with ``above``, just above the
        first stored turn shown (earlier turns; the view stays where it
        was, and the newest turns of the window are unmounted beyond
        :data:`MAX_TURNS_MOUNTED`); else below the last stored turn shown."""
        turns = list(turns)
        drawn = [d for d in await self._draw(turns) if d[1]]
        if not drawn:
            return
        widgets = [w for _, ws in drawn for w in ws]
        column = self.log_column
        if above:
            anchor = self._window[0][1][0] if self._window else self.later_button
            if anchor is None and self.earlier_button is not None:
                index = column.children.index(self.earlier_button) + 1
                anchor = column.children[index] if index < len(column.children) else None
            with self._view_kept():
                if anchor is not None:
                    await column.mount_all(widgets, before=anchor)
                else:
                    await column.mount_all(widgets)
            self._window[:0] = drawn
            if len(self._window) > MAX_TURNS_MOUNTED:
                gone = self._window[MAX_TURNS_MOUNTED:]
                del self._window[MAX_TURNS_MOUNTED:]
                await column.remove_children(self._widgets_of(gone))
                await self.note_later(self.later + len(gone))
        elif self.later_button is not None:  # the window stops short of the end: just below it
            await column.mount_all(widgets, before=self.later_button)
        else:  # the window reaches the end (turns another process added come after what is shown)
            await column.mount_all(widgets)
        if not above:
            self._window.extend(drawn)
            if len(self._window) > MAX_TURNS_MOUNTED:
                gone = self._window[:len(self._window) - MAX_TURNS_MOUNTED]
                del self._window[:len(gone)]
                with self._view_kept():
                    await column.remove_children(self._widgets_of(gone))
                await self.note_earlier(self.earlier + len(gone))
        if self.turns_drawn is not None:
            shown = {number for number, _ in self._window}
            await self.turns_drawn([t for t in turns if t.number in shown])

    def _widgets_of(self, turns: list[tuple[int, list[Widget]]]) -> list[Widget]:
        """The widgets on screen of window ``turns``: those drawn for them,
        and a turn's version bar with the widgets of the version it shows in
        the turn's place (issue 16; class ``versions-of-N``, ``turn-V``)."""
        out: dict[int, Widget] = {}
        column = self.log_column
        for number, widgets in turns:
            found = [*widgets, *column.query(f".versions-of-{number}")]
            for bar in list(found[len(widgets):]):
                for version in getattr(bar, "versions", []):
                    found.extend(column.query(f".turn-{version}"))
            for w in found:
                if w.parent is column:
                    out[id(w)] = w
        return list(out.values())

    class _ViewKept:
        """Keeps what the person sees in place while rows above it come or go."""

        def __init__(self, pane: "ChatPane") -> None:
            self.pane = pane

        def __enter__(self) -> None:
            pane = self.pane
            self.height = pane.virtual_size.height
            self.y = pane.scroll_y
            self.following = not pane.is_mounted or pane.scroll_y >= pane.max_scroll_y

        def __exit__(self, *exc: Any) -> None:
            if not self.following:  # following the end: the anchor keeps it
                pane = self.pane
                pane.call_after_refresh(pane._keep_view, self.height, self.y, pane._generation)

    def _view_kept(self) -> "ChatPane._ViewKept":
        return self._ViewKept(self)

    def _keep_view(self, before_height: int, before_y: float, generation: int) -> None:
        if generation != self._generation:  # the window was replaced since: nothing to keep
            return
        moved = self.virtual_size.height - before_height
        if moved:
            self.scroll_to(y=max(0, before_y + moved), animate=False, immediate=True)

    async def show_last_turns(self, turns: list[Any]) -> int:
        """Open a conversation: mount the last of ``turns`` (oldest first) that
        fill about :data:`FILL_SCREENS` screens, keep the others for the first
        scroll up; returns how many were kept."""
        height = self.size.height or self.app.size.height
        width = self.size.width or self.app.size.width
        budget = max(10, FILL_SCREENS * height)
        rows = 0
        start = len(turns)
        while start > 0 and rows < budget:
            start -= 1
            rows += estimate_rows(turns[start], width)
        self._kept = list(turns[:start])
        await self.show_turns(turns[start:])
        return len(self._kept)

    async def show_window(self, turns: list[Any], *, earlier: int, later: int) -> None:
        """Replace the stored turns shown with ``turns`` (Ctrl+Home: the first
        ones; Ctrl+End: the last ones), ``earlier`` and ``later`` being the
        counts before and after them."""
        gone = self._widgets_of(self._window)
        self._generation += 1
        self._window = []
        self._kept = []
        if gone:
            await self.log_column.remove_children(gone)
        await self.note_later(later)
        await self.show_turns(turns)
        await self.note_earlier(earlier)

    async def show_kept_turns(self, count: int) -> bool:
        """Mount up to ``count`` of the turns kept from the first page above
        the first shown; False when none are kept."""
        if not self._kept:
            return False
        turns, self._kept = self._kept[-count:], self._kept[:-count]
        await self.note_earlier(self.earlier - len(turns))
        await self.show_turns(turns, above=True)
        return True

    async def note_earlier(self, count: int) -> None:
        """``count`` turns come before the first shown: show (or update, or
        hide when none) the button that loads them."""
        self.earlier = max(0, count)
        if self.earlier:
            await self.show_earlier_button(self.earlier)
        else:
            await self.hide_earlier_button()

    async def note_later(self, count: int) -> None:
        """``count`` stored turns come after the last shown: show (or update,
        or remove when none) the button below the window that loads them."""
        self.later = max(0, count)
        label = f"↓ Show later turns ({self.later:,} not shown)"
        if self.later and self.later_button is None:
            from textual.widgets import Button

            self.later_button = Button(label, id="load-later", compact=True)
            if self._window:
                await self.log_column.mount(self.later_button, after=self._window[-1][1][-1])
            else:
                index = 1 if self.earlier_button is not None else 0
                children = self.log_column.children
                await self.log_column.mount(self.later_button,
                                            before=children[index] if index < len(children) else None)
        elif self.later and self.later_button is not None:
            self.later_button.label = label
        elif not self.later and self.later_button is not None:
            await self.later_button.remove()
            self.later_button = None

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.check_edges()

    def check_edges(self) -> None:
        """Load the turns before (or after) the window when the view has come
        within :data:`LOAD_ROWS` rows of its first (or last) stored turn."""
        if self._loading or not self.is_mounted:
            return
        top = self.scroll_y
        if self.earlier and top <= LOAD_ROWS and top < self.max_scroll_y:
            self._begin_load(self.LoadEarlier())
        elif self.later and self.later_button is not None:
            bottom = top + self.scrollable_content_region.height
            if self.later_button.virtual_region.y <= bottom + LOAD_ROWS:
                self._begin_load(self.LoadLater())

    def _begin_load(self, message: Message) -> None:
        self._loading = True  # one load at a time
        self.post_message(message)
        self.set_timer(1.0, self._loading_done)  # never stuck if the load moves nothing

    def _loading_done(self) -> None:
        self._loading = False

    def loaded(self) -> None:
        """A load of earlier or later turns is on screen: look at the edges again
        (a view still at an edge loads the next page)."""
        self._loading = False
        self.call_after_refresh(self.check_edges)

    async def reset(self) -> None:
        """Empty the pane (``/clear``, another conversation: issue 16): no
        widget, no "Show earlier turns" or "Show later turns" button, no
        stored turn in the window, a fresh live renderer."""
        await self.log_column.remove_children()
        self.earlier_button = self.later_button = None
        self._generation += 1
        self._window, self._kept, self._live_turn = [], [], None
        self.earlier = self.later = 0
        self._loading = False
        self._live = None  # the next live turn makes a fresh renderer

    @property
    def last_reply(self) -> "AssistantMessage | None":
        """The last reply shown, or ``None``."""
        from .assistant_message import AssistantMessage

        replies = self.query(AssistantMessage)
        return replies.last() if replies else None

    async def show_earlier_button(self, count: int) -> None:
        """Show (or update) the button that loads the ``count`` hidden earlier turns."""
        label = f"↑ Show earlier turns ({count:,} not shown)"
        if self.earlier_button is None:
            from textual.widgets import Button

            self.earlier_button = Button(label, id="load-earlier", compact=True)
            column = self.log_column
            await column.mount(self.earlier_button, before=0 if column.children else None)
        else:
            self.earlier_button.label = label

    async def hide_earlier_button(self) -> None:
        """Remove the "Show earlier turns" button (nothing earlier is hidden)."""
        if self.earlier_button is not None:
            await self.earlier_button.remove()
            self.earlier_button = None

    def on_button_pressed(self, event: "Button.Pressed") -> None:
        if event.button.id == "load-earlier":
            event.stop()
            self.post_message(self.LoadEarlier())
        elif event.button.id == "load-later":
            event.stop()
            self.post_message(self.LoadLater())
