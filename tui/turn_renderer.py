"""Turns drawn from the agent's events: one path for a live turn and a stored one.

:class:`TurnRenderer` maps the events of :mod:`wisp.core.events` to widgets
for a live turn as it streams and for stored turns loaded from the store
(which :func:`wisp.core.transcript.turn_events` turns back into the same
events). So the markers of a reply (cut, stopped, incomplete) are written
in one place, :meth:`TurnRenderer.mark`, and a resumed conversation looks as
it did live (issue 9, "The TUI renders events"). The chat pane
(:class:`~wisp.tui.widgets.ChatPane`) loads this module with the first turn
it draws, not with the first frame (issue 12).
"""

from __future__ import annotations

import dataclasses
from typing import Awaitable, Callable

from textual.widget import Widget

from wisp.core import events as ev
from wisp.core.text import terminal_safe

from .widgets.assistant_message import AssistantMessage
from .widgets.notice import Notice
from .widgets.tool_block import ToolBlock
from .widgets.user_message import UserMessage

__all__ = ["TurnRenderer", "MARKERS", "TOOL_STOPPED"]

#: The marker line written beside a reply that did not end normally, by kind.
MARKERS = {
    "cut": ("✂ cut at the output limit — not finished", "warning"),
    "repeated": ("⟳ stopped: it repeated itself — kept up to there", "warning"),
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
    those in the status bar and the side panels. ``live``: the turn is
    running (a ``run_command`` block opens so its output streams in view;
    a stored one stays one line until opened).
    """

    def __init__(self, place: Callable[[Widget], Awaitable[None]], last: Callable[[], Widget | None],
                 *, live: bool = False) -> None:
        self._place_widget = place
        self._last = last
        self.live = live
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
        if type(event) is ev.TextDelta and self.reply is not None and not self.transient:
            await self.reply.add_text(terminal_safe(event.text))  # the stream's own path: no wait
            return
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
            # a running command's output streams in view; a stored block is one line until opened
            block = ToolBlock(event.name, event.arguments, event.call_id, event.entry,
                              collapsed=not (self.live and event.name == "run_command"))
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
                await self.mark("repeated" if event.repeated else "cut")
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
