"""A reply of the model: its thinking, its tool calls and its Markdown answer."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widget import Widget

from ..guard import Guarded
from .reply_text import ReplyText
from .thinking_block import ThinkingBlock
from .tool_block import ToolBlock

__all__ = ["AssistantMessage"]


class AssistantMessage(Guarded, Vertical):
    """One turn's reply, in the order it came: thinking blocks (collapsed),
    Markdown text (:class:`~wisp.tui.widgets.ReplyText`: drawn at most once
    a frame, finished blocks drawn once, code fences highlighted) and tool
    blocks.

    It is built the same way whether it is on screen or not: before it is
    mounted the pieces are kept and composed at once (a stored turn), after
    that each piece is mounted or streamed as it comes (a live turn).

    ``text`` is all the visible text (never the thinking). ``cut`` (the
    output limit ended it) and ``partial`` (an error or a stop did) are
    reactives that set the classes ``-cut`` and ``-partial``.
    """

    DEFAULT_CSS = """
    AssistantMessage {
        height: auto;
        margin: 1 4 0 0;
        padding: 0 1;
        border-left: thick $accent 60%;
    }
    AssistantMessage.-cut, AssistantMessage.-partial {
        border-left: thick $warning;
    }
    """

    cut: reactive[bool] = reactive(False)
    """The reply stopped at the model's output limit."""
    partial: reactive[bool] = reactive(False)
    """An error or a stop ended the reply early; what came is kept."""

    def __init__(self, text: str = "", *, cut: bool = False, partial: bool = False, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._text: list[str] = []
        self._text_joined: str | None = ""
        #: Before composing: the pieces in order, text as str (joined), blocks as widgets.
        self._pieces: list[str | Widget] = []
        self._composed = False
        self._reply_md: ReplyText | None = None
        self._thinking: ThinkingBlock | None = None
        self.set_reactive(AssistantMessage.cut, cut)
        self.set_reactive(AssistantMessage.partial, partial)
        if text:
            self._text.append(text)
            self._text_joined = None
            self._pieces.append(text)

    @property
    def text(self) -> str:
        """All the visible text of the reply so far (never the thinking)."""
        if self._text_joined is None:
            self._text_joined = "".join(self._text)
            self._text[:] = [self._text_joined] if self._text_joined else []
        return self._text_joined

    def compose(self) -> ComposeResult:
        self._composed = True
        for piece in self._pieces:
            if isinstance(piece, str):
                self._reply_md = ReplyText(piece, classes="reply")
                yield self._reply_md
            else:
                self._reply_md = None
                yield piece
        self._pieces.clear()

    def watch_cut(self, cut: bool) -> None:
        self.set_class(cut, "-cut")

    def watch_partial(self, partial: bool) -> None:
        self.set_class(partial, "-partial")

    async def add_thinking(self, piece: str) -> None:
        """Add a piece of thinking: to this step's thinking block, else to a
        new one (collapsed), above this step's text when text came first."""
        if self._thinking is None:
            self._thinking = ThinkingBlock()
            if not self._composed:
                at = len(self._pieces) - 1 if self._pieces and isinstance(self._pieces[-1], str) else None
                self._pieces.insert(len(self._pieces) if at is None else at, self._thinking)
            elif self._reply_md is not None:
                await self.mount(self._thinking, before=self._reply_md)
            else:
                await self.mount(self._thinking)
        self._thinking.append(piece)

    async def add_text(self, piece: str) -> None:
        """Add a piece of the answer as Markdown. On screen it is drawn within
        a frame: this waits only to mount the text's widget once."""
        self._text.append(piece)
        self._text_joined = None
        if not self._composed:
            if self._pieces and isinstance(self._pieces[-1], str):
                self._pieces[-1] += piece
            else:
                self._pieces.append(piece)
            return
        if self._reply_md is None:
            self._reply_md = ReplyText(classes="reply")
            await self.mount(self._reply_md)
        self._reply_md.append(piece)

    def shown_text(self) -> str | None:
        """The reply's text as drawn (``None`` while a piece waits for the next frame)."""
        parts = []
        for child in self.children:
            if isinstance(child, ReplyText):
                shown = child.shown_text()
                if shown is None:
                    return None
                parts.append(shown)
        return "".join(parts)

    async def add_tool(self, block: ToolBlock) -> None:
        """Add a tool block after what came so far; later text and thinking go below it."""
        await self.end_stream()
        if not self._composed:
            self._pieces.append(block)
        else:
            await self.mount(block)
        self._reply_md = None
        self._thinking = None

    async def end_stream(self) -> None:
        """Draw what is left of the streamed text and freeze it (nothing to do before composing)."""
        if self._reply_md is not None:
            self._reply_md.finish()

    async def finish(self, *, cut: bool = False, partial: bool = False) -> None:
        """End streaming; mark the reply ``cut`` or ``partial`` (the chat pane
        writes the marker line beside it)."""
        await self.end_stream()
        self.cut = cut or self.cut
        self.partial = partial or self.partial
