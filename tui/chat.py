"""The chat pane and the widgets of one conversation: prompts, replies,
thinking, tool calls with their results, notices and errors.

Replies stream in as Markdown through Textual's ``Markdown.get_stream``;
code blocks are highlighted by the Markdown widget's fences. Thinking and
tool calls are :class:`~textual.widgets.Collapsible` blocks, collapsed.
A long conversation is shown from its last turns; "Show earlier turns"
loads more (issue "wisp runs end to end", "TUI").
"""

from __future__ import annotations

import json
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Collapsible, Markdown, Static
from textual.widgets._markdown import MarkdownStream

TOOL_PREVIEW_CHARS = 20000


class UserMessage(Static):
    """A prompt the person sent."""

    def __init__(self, text: str, entry: int | None = None) -> None:
        super().__init__(text, markup=False, classes="user-message")
        self.entry = entry


class Notice(Static):
    """A line from wisp itself: a wait, a warning, an error, a command's result."""

    def __init__(self, text: str, level: str = "info", key: str | None = None) -> None:
        super().__init__(text, markup=False, classes=f"notice -{level}")
        self.level = level
        #: Notices with one key stand for one changing state: the newest replaces the text.
        self.key = key
        self.text = text

    def set_text(self, text: str) -> None:
        """Replace the notice's text (a changing state, such as a wait)."""
        self.text = text
        self.update(text)


class CommandOutput(Markdown):
    """A slash command's result, as Markdown."""

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__(text, classes="command-output" + (" -error" if error else ""))


class ThinkingBlock(Collapsible):
    """The model's reasoning: apart from the reply, collapsed by default."""

    def __init__(self, text: str = "") -> None:
        self._body = Static(text, markup=False, classes="thinking-text")
        super().__init__(self._body, title="thinking", collapsed=True, classes="thinking")
        self.text = text

    def append(self, piece: str) -> None:
        """Add a piece of streamed thinking."""
        self.text += piece
        self._body.update(self.text)


class ToolBlock(Collapsible):
    """One tool call and its result, collapsed; the title shows the call and its outcome."""

    def __init__(self, name: str, arguments: dict[str, Any], call_id: str = "", entry: int | None = None) -> None:
        self.tool_name = name
        self.arguments = arguments
        self.call_id = call_id
        self.entry = entry
        args = json.dumps(arguments, ensure_ascii=False)
        self._args = Static(f"arguments: {args}", markup=False, classes="tool-args")
        self._output = Static("", markup=False, classes="tool-output")
        self.output = ""
        short = args if len(args) <= 60 else args[:57] + "…"
        self._title_base = f"⚙ {name} {short}"
        super().__init__(self._args, self._output, title=f"{self._title_base} …running", collapsed=True,
                         classes="tool-block")

    def stream(self, piece: str) -> None:
        """Show a piece of output while the tool runs."""
        self.output += piece
        self._output.update(self.output[-TOOL_PREVIEW_CHARS:])

    def finish(self, content: str, ok: bool, entry: int | None = None) -> None:
        """Show the result and mark the title with its outcome and entry."""
        self.output = content
        shown = content if len(content) <= TOOL_PREVIEW_CHARS else (
            content[:TOOL_PREVIEW_CHARS] + f"\n… {len(content) - TOOL_PREVIEW_CHARS:,} more characters "
            f"(/show entry {entry})")
        self._output.update(shown)
        body = [line for line in content.split("\n") if not _is_marker(line)] if content else []
        lines = len(body)
        mark = "✓" if ok else "✗"
        where = f"entry {entry} · " if entry is not None else ""
        # the outcome and the entry first, so a narrow pane cuts the arguments, not the entry number
        self.title = f"{mark} {where}{lines} line{'' if lines == 1 else 's'} · {self._title_base}"
        self.set_class(not ok, "-error")


def _is_marker(line: str) -> bool:
    """A tool's own closing line (``[end of file]``, ``[more: …]``), not output."""
    return line.startswith("[end of") or line.startswith("[more:")


class AssistantMessage(Vertical):
    """A reply: optional thinking, tool blocks and the Markdown answer, streamed."""

    def __init__(self, text: str = "", *, cut: bool = False, partial: bool = False) -> None:
        super().__init__(classes="assistant-message")
        self._initial_text = text
        self.text = text
        self._reply_md: Markdown | None = None
        self._stream: MarkdownStream | None = None
        self._thinking: ThinkingBlock | None = None
        self._cut = cut
        self._partial = partial

    def compose(self) -> ComposeResult:
        if self._initial_text:
            self._reply_md = Markdown(self._initial_text, classes="reply")
            yield self._reply_md

    def on_mount(self) -> None:
        self._mark()

    def _mark(self) -> None:
        self.set_class(self._cut, "-cut")
        self.set_class(self._partial, "-partial")

    async def add_thinking(self, piece: str) -> None:
        """Stream a piece of thinking into a collapsed block above the answer."""
        if self._thinking is None:
            self._thinking = ThinkingBlock()
            if self._reply_md is not None:
                await self.mount(self._thinking, before=self._reply_md)
            else:
                await self.mount(self._thinking)
        self._thinking.append(piece)

    async def add_text(self, piece: str) -> None:
        """Stream a piece of the answer as Markdown."""
        if self._reply_md is None:
            self._reply_md = Markdown("", classes="reply")
            await self.mount(self._reply_md)
        if self._stream is None:
            self._stream = Markdown.get_stream(self._reply_md)
        self.text += piece
        await self._stream.write(piece)

    async def add_tool(self, block: ToolBlock) -> None:
        """Mount a tool block after what has streamed so far; later text goes below it."""
        await self.end_stream()
        await self.mount(block)
        self._reply_md = None

    async def end_stream(self) -> None:
        """Flush and stop the Markdown stream."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

    async def finish(self, *, cut: bool = False, partial: bool = False, stopped: bool = False) -> None:
        """End streaming; mark the reply cut (output limit), partial (error) or stopped (Esc)."""
        await self.end_stream()
        self._cut, self._partial = cut, partial or stopped
        self._mark()
        marker = None
        if cut:
            marker = Notice("✂ cut at the output limit — not finished", "warning")
        elif stopped:
            marker = Notice("■ stopped — the reply so far is kept", "warning")
        elif partial:
            marker = Notice("⚠ incomplete — the reply so far is kept", "warning")
        if marker is not None and self.parent is not None:
            await self.parent.mount(marker, after=self)  # beside the reply, not inside its border


class ChatPane(VerticalScroll):
    """The scrolling conversation. Sticks to the bottom while a reply streams."""

    class LoadEarlier(Message):
        """The person asked to see turns before the first one shown."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.earlier_button: Button | None = None

    async def show_earlier_button(self, count: int) -> None:
        """Show (or update) the button that loads ``count`` hidden earlier turns."""
        label = f"↑ Show earlier turns ({count:,} not shown)"
        if self.earlier_button is None:
            self.earlier_button = Button(label, id="load-earlier", compact=True)
            await self.mount(self.earlier_button, before=0 if self.children else None)
        else:
            self.earlier_button.label = label

    async def hide_earlier_button(self) -> None:
        if self.earlier_button is not None:
            await self.earlier_button.remove()
            self.earlier_button = None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "load-earlier":
            event.stop()
            self.post_message(self.LoadEarlier())

    async def add(self, widget: Any) -> None:
        """Mount at the bottom and keep the view at the end."""
        await self.mount(widget)
        self.scroll_end(animate=False)
