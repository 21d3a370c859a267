"""The chat pane: the conversation, drawn from the agent's events.

:class:`ChatPane` maps the events of :mod:`wisp.core.events` to widgets
through one method, :meth:`TurnRenderer.show`, for a live turn as it
streams and for stored turns loaded from the store (which
:func:`wisp.core.transcript.turn_events` turns back into the same events).
So the markers of a reply (cut, stopped, incomplete) are written in one
place, :meth:`TurnRenderer.mark`, and a resumed conversation looks as it
did live (issue 9, "The TUI renders events").

A long conversation is shown from its last turns; "Show earlier turns"
loads more (issue "wisp runs end to end", "TUI"). The pane is anchored to
its end (Textual's ``anchor()``): it follows a streaming reply until the
person scrolls up, and again once they scroll back down. Its widgets sit in
one column (``#chat-log``) at least as tall as the pane, so a short
conversation starts at the top, not at the bottom as a bare anchored pane
would put it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Iterable

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button

from wisp.core import events as ev
from wisp.core.text import terminal_safe
from wisp.core.transcript import turn_events

from ..guard import Guarded
from .assistant_message import AssistantMessage
from .notice import Notice
from .tool_block import ToolBlock
from .user_message import UserMessage

__all__ = ["ChatPane", "TurnRenderer", "MARKERS"]

#: The marker line written beside a reply that did not end normally, by kind.
MARKERS = {
    "cut": ("✂ cut at the output limit — not finished", "warning"),
    "stopped": ("■ stopped — the reply so far is kept", "warning"),
    "stopped-before-reply": ("■ stopped", "warning"),
    "incomplete": ("⚠ incomplete — the reply so far is kept", "warning"),
}

#: Added to the output of a tool that was still running when its turn was stopped.
TOOL_STOPPED = "\n■ stopped"


#: The fields of an event that hold text from outside (the person, the model, a tool, a server).
_TEXT_FIELDS = ("prompt", "text", "content", "message")


def visible(event: ev.AgentEvent) -> ev.AgentEvent:
    """``event`` with each text field passed through
    :func:`wisp.core.text.terminal_safe`: a control sequence in a prompt, a
    reply, a tool's output or an error (set the window title, clear the
    screen, write the clipboard) is shown as visible text and never reaches
    the terminal (issue "Nothing runs, leaks, hangs or is lost that
    shouldn't be": raw terminal escapes). The same event when nothing needs it."""
    changes = {}
    for name in _TEXT_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            safe = terminal_safe(value)
            if safe != value:
                changes[name] = safe
    return dataclasses.replace(event, **changes) if changes else event


class TurnRenderer:
    """Draws the events of turns, one after another, as widgets.

    ``place`` puts a new widget after everything drawn so far (mounting it at
    the end of the chat, or keeping it in a list to mount at once);
    ``last`` returns the last widget placed (or ``None``). Events that are
    not drawn (usage, fact and summary changes) are ignored: the app shows
    those in the status bar and the side panels.
    """

    def __init__(self, place: Callable[[Widget], Awaitable[None]], last: Callable[[], Widget | None]) -> None:
        self._place_widget = place
        self._last = last
        self.reply: AssistantMessage | None = None
        self.blocks: dict[str, ToolBlock] = {}
        #: The number of the turn being drawn; its widgets get the class ``turn-N``,
        #: so a view finds them (issue 16: a reply's versions, /search's jump).
        self.turn: int | None = None
        #: Notices of a state that ends with the next text, call or ending (a wait).
        self.transient: list[Notice] = []

    async def _place(self, widget: Widget) -> None:
        if self.turn is not None:
            widget.add_class(f"turn-{self.turn}")
        await self._place_widget(widget)

    async def show(self, event: ev.AgentEvent) -> None:
        """Draw one event of a turn (live or stored alike), its text made
        terminal-safe first (:func:`visible`)."""
        event = visible(event)
        if self.transient and not isinstance(event, (ev.Notice, ev.Usage, ev.FactChanged, ev.SummaryChanged,
                                                       ev.SideCallCost)):
            waits, self.transient = self.transient, []
            for notice in waits:  # the wait is over: its line goes
                if notice.is_attached:
                    await notice.remove()
        if isinstance(event, ev.TurnStarted):
            self._new_turn()
            self.turn = event.turn
            await self._place(UserMessage(event.prompt, entry=event.entry))
        elif isinstance(event, ev.ThinkingDelta):
            await (await self._reply()).add_thinking(event.text)
        elif isinstance(event, ev.TextDelta):
            await (await self._reply()).add_text(event.text)
        elif isinstance(event, ev.ToolCall):
            block = ToolBlock(event.name, event.arguments, event.call_id, event.entry)
            if event.name == "run_command":  # its output streams in view
                block.collapsed = False
            self.blocks[event.call_id] = block
            await (await self._reply()).add_tool(block)
        elif isinstance(event, ev.ToolOutput):
            if event.call_id in self.blocks:
                self.blocks[event.call_id].stream(event.text)
        elif isinstance(event, ev.ToolResult):
            if event.call_id in self.blocks:
                self.blocks[event.call_id].finish(event.content, event.ok, event.entry)
        elif isinstance(event, ev.ReplyRecorded):
            if self.reply is not None and event.cut:
                await self.mark("cut")
            elif self.reply is not None and event.partial:
                self.reply.partial = True  # why (an error, a stop) comes next
        elif isinstance(event, ev.Notice):
            last = self._last()
            if event.key is not None and isinstance(last, Notice) and last.key == event.key:
                last.set_text(event.text)  # one line for one changing state
            else:
                notice = Notice(event.text, event.level, key=event.key)
                await self._place(notice)
                if event.transient:
                    self.transient.append(notice)
        elif isinstance(event, ev.Error):
            if self.reply is not None:
                await self.mark("incomplete")
            await self._place(Notice(event.message, "error"))
        elif isinstance(event, ev.TurnEnded):
            await self._end(event.state)

    async def mark(self, kind: str) -> None:
        """End the reply and write the marker of ``kind`` (a key of
        :data:`MARKERS`) beside it, once per reply."""
        text, level = MARKERS[kind]
        reply = self.reply
        if reply is not None:
            await reply.finish(cut=kind == "cut", partial=kind != "cut")
            self.reply = None  # marked once: a later end or error adds no second marker
        await self._place(Notice(text, level))

    async def _end(self, state: str) -> None:
        """The turn ended in ``state`` (``done``, ``cut``, ``error``, ``stopped``)."""
        if state == "stopped":
            for block in self.blocks.values():  # a tool still running was ended with the turn
                if block.running:
                    block.finish(block.output + TOOL_STOPPED, False)
            await self.mark("stopped" if self.reply is not None else "stopped-before-reply")
        elif self.reply is not None:
            await self.reply.finish(cut=state == "cut")
        self._new_turn()

    def _new_turn(self) -> None:
        self.reply = None
        self.blocks = {}

    async def _reply(self) -> AssistantMessage:
        if self.reply is None:
            self.reply = AssistantMessage()
            await self._place(self.reply)
        return self.reply


class ChatPane(Guarded, VerticalScroll):
    """The scrolling conversation.

    :meth:`show_event` draws a live event at the end; :meth:`show_turns`
    draws stored turns (at the end, or above the first shown when loading
    earlier ones) through the same :class:`TurnRenderer`. Posts
    :class:`ChatPane.LoadEarlier` when the person asks for earlier turns.
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
    """

    class LoadEarlier(Message):
        """The person asked to see the turns before the first one shown."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.earlier_button: Button | None = None
        #: The column of the conversation's widgets, in order.
        self.log_column = Vertical(id="chat-log")
        self.live = TurnRenderer(self.add, self._last_shown)

    def compose(self) -> ComposeResult:
        yield self.log_column

    def on_mount(self) -> None:
        self.anchor()

    @property
    def shown(self) -> list[Widget]:
        """The conversation's widgets, in order (the "Show earlier turns" button first when shown)."""
        return list(self.log_column.children)

    def _last_shown(self) -> Widget | None:
        children = self.log_column.children
        return children[-1] if children else None

    async def add(self, widget: Widget) -> None:
        """Mount ``widget`` at the end (the anchor keeps the end in view unless the person scrolled up)."""
        await self.log_column.mount(widget)

    async def show_event(self, event: ev.AgentEvent) -> None:
        """Draw one event of the live turn at the end."""
        await self.live.show(event)

    async def show_turns(self, turns: Iterable[Any], *, above: bool = False) -> None:
        """Draw stored turns (:class:`~wisp.core.transcript.TurnView`), mounted
        at once: at the end, or with ``above`` just below the "Show earlier
        turns" button (earlier turns)."""
        widgets: list[Widget] = []

        async def keep(widget: Widget) -> None:
            widgets.append(widget)

        renderer = TurnRenderer(keep, lambda: widgets[-1] if widgets else None)
        for turn in turns:
            for event in turn_events(turn):
                await renderer.show(event)
        if not widgets:
            return
        column = self.log_column
        if above:
            button = self.earlier_button
            index = column.children.index(button) + 1 if button is not None else 0
            await column.mount_all(widgets, before=index if index < len(column.children) else None)
        else:
            await column.mount_all(widgets)

    async def reset(self) -> None:
        """Empty the pane (``/clear``, another conversation: issue 16): no
        widget, no "Show earlier turns" button, a fresh live renderer."""
        await self.log_column.remove_children()
        self.earlier_button = None
        self.live = TurnRenderer(self.add, self._last_shown)

    @property
    def last_reply(self) -> AssistantMessage | None:
        """The last reply shown, or ``None``."""
        replies = self.query(AssistantMessage)
        return replies.last() if replies else None

    async def show_earlier_button(self, count: int) -> None:
        """Show (or update) the button that loads the ``count`` hidden earlier turns."""
        label = f"↑ Show earlier turns ({count:,} not shown)"
        if self.earlier_button is None:
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

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "load-earlier":
            event.stop()
            self.post_message(self.LoadEarlier())
