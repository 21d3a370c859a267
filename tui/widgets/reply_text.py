"""A reply's Markdown text: finished blocks drawn once, the last block live, at most one render a frame."""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from textual.geometry import Size
from textual.strip import Strip
from textual.style import Style
from textual.timer import Timer
from textual.widget import Widget

from ..guard import Guarded
from ..markdown_lines import (Painter, RenderedBlock, join_blocks, measure_block, parse_blocks, parse_whole,
                              render_block)

if TYPE_CHECKING:
    from markdown_it.tree import SyntaxTreeNode

__all__ = ["ReplyText", "FRAME_S"]

#: At most one render of a streaming reply per frame (seconds; Textual paints at most 60 frames a second).
FRAME_S = 1 / 60
#: When a frame finds more than this many characters waiting, the text arrives faster than anyone
#: reads: the next frames come at most every :data:`FLOOD_FRAME_S`, so the screen takes less of the
#: time the agent needs to read the stream.
FLOOD_CHARS = 2000
FLOOD_FRAME_S = 0.1


def _line_offset(text: str, line: int) -> int:
    """The character offset where 0-based ``line`` of ``text`` starts."""
    offset = 0
    for _ in range(line):
        found = text.find("\n", offset)
        if found < 0:
            return len(text)
        offset = found + 1
    return offset


class ReplyText(Guarded, Widget):
    """Markdown, streamed or whole, drawn as lines (:mod:`wisp.tui.markdown_lines`).

    :meth:`append` takes a piece of a streaming reply and returns at once:
    what arrived is drawn at most once a frame (:data:`FRAME_S`), so the
    agent never waits for the screen. A block followed by another is
    finished: it is measured once, and drawn once, when it first comes into
    view, never again (unless the width or the theme changes); only the last
    block, still being written, is drawn again as it grows. :meth:`finish`
    draws what is left and freezes the last block too. A widget made with
    ``text`` shows a stored reply: parsed once (a reply shown again reuses
    the parse), measured, and drawn only where it is seen.

    ``source`` is all the text given so far; ``shown_text()`` the text drawn
    (``None`` while some is waiting for the next frame).
    """

    COMPONENT_CLASSES = {
        "code_inline", "em", "strong", "s",
        "reply--link", "reply--heading", "reply--h1", "reply--h2", "reply--h3", "reply--h4", "reply--h5",
        "reply--h6", "reply--fence", "reply--bullet", "reply--quote", "reply--quote-border", "reply--hr",
        "reply--table-header", "reply--table-keyline",
    }

    # The same looks as Textual's Markdown widget (textual/widgets/_markdown.py).
    DEFAULT_CSS = """
    ReplyText {
        height: auto;
        width: 1fr;
        color: $foreground;
    }
    ReplyText:dark > .code_inline {
        background: $warning 10%;
        color: $text-warning 95%;
    }
    ReplyText:light > .code_inline {
        background: $error 5%;
        color: $text-error 95%;
    }
    ReplyText > .em { text-style: italic; }
    ReplyText > .strong { text-style: bold; }
    ReplyText > .s { text-style: strike; }
    ReplyText > .reply--link { text-style: underline; }
    ReplyText > .reply--heading { color: $text; }
    ReplyText > .reply--h1 {
        color: $markdown-h1-color; background: $markdown-h1-background; text-style: $markdown-h1-text-style;
    }
    ReplyText > .reply--h2 {
        color: $markdown-h2-color; background: $markdown-h2-background; text-style: $markdown-h2-text-style;
    }
    ReplyText > .reply--h3 {
        color: $markdown-h3-color; background: $markdown-h3-background; text-style: $markdown-h3-text-style;
    }
    ReplyText > .reply--h4 {
        color: $markdown-h4-color; background: $markdown-h4-background; text-style: $markdown-h4-text-style;
    }
    ReplyText > .reply--h5 {
        color: $markdown-h5-color; background: $markdown-h5-background; text-style: $markdown-h5-text-style;
    }
    ReplyText > .reply--h6 {
        color: $markdown-h6-color; background: $markdown-h6-background; text-style: $markdown-h6-text-style;
    }
    ReplyText > .reply--fence {
        color: rgb(210,210,210);
        background: black 10%;
    }
    ReplyText:light > .reply--fence {
        background: white 30%;
    }
    ReplyText > .reply--bullet { color: $text-primary; }
    ReplyText:light > .reply--bullet { color: $text-secondary; }
    ReplyText > .reply--quote { background: $boost; }
    ReplyText > .reply--quote-border { color: $text-primary 50%; }
    ReplyText:light > .reply--quote-border { color: $text-secondary; }
    ReplyText > .reply--hr { color: $secondary; }
    ReplyText > .reply--table-header { color: $primary; text-style: bold; }
    ReplyText > .reply--table-keyline { color: $foreground 20%; }
    """

    def __init__(self, text: str = "", *, live: bool = False, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._applied = text
        self._pending: list[str] = []
        self._live = live
        self._timer: Timer | None = None
        self._frame_s = FRAME_S  # the wait before the next frame (longer while the text floods in)
        # parsed: finished blocks, and the tail (the blocks after them, the last one still growing)
        self._frozen_nodes: list["SyntaxTreeNode"] = []
        self._frozen_chars = 0
        self._tail_nodes: list["SyntaxTreeNode"] | None = None  # None: not parsed yet
        # laid out at one width: the finished blocks (measured; drawn when seen) and the tail (drawn)
        self._width: int | None = None
        self._style_key: Any = None
        self._painter: Painter | None = None
        self._laid: list[RenderedBlock] = []
        self._offsets: list[int] = []  # the first line of each finished block
        self._frozen_height = 0  # lines of the finished blocks (their last bottom margin not counted)
        self._frozen_bottom: int | None = None
        self._tail_lines: list[Strip] | None = None
        self._height = 0

    # -- the text -------------------------------------------------------------------

    @property
    def source(self) -> str:
        """All the Markdown given so far (drawn or waiting for the next frame)."""
        if self._pending:
            return self._applied + "".join(self._pending)
        return self._applied

    def shown_text(self) -> str | None:
        """The text drawn, or ``None`` while a piece waits for the next frame."""
        return None if self._pending else self._applied

    @property
    def live(self) -> bool:
        """True while the reply streams (its last block may still change)."""
        return self._live

    def append(self, piece: str) -> None:
        """Add a piece of a streaming reply; drawn within a frame. Never waits."""
        if not piece:
            return
        self._live = True
        self._pending.append(piece)
        if self._timer is None and self.is_mounted:
            self._timer = self.set_timer(self._frame_s, self._on_frame, name="reply-frame")

    def finish(self) -> None:
        """The reply is whole: draw what is left now, and freeze its last block."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._live or self._pending:
            self._live = False
            self._apply()

    def on_mount(self) -> None:
        if self._pending and self._timer is None:
            self._timer = self.set_timer(FRAME_S, self._on_frame, name="reply-frame")

    def _on_frame(self) -> None:
        self._timer = None
        self._apply()

    def _apply(self) -> None:
        """Parse what arrived since the last frame; freeze the blocks it finished."""
        if self._pending:
            batch = "".join(self._pending)
            self._frame_s = FLOOD_FRAME_S if len(batch) > FLOOD_CHARS else FRAME_S
            self._applied += batch
            self._pending.clear()
        before = self._height
        self._parse()
        if self._width is not None:
            self._layout(self._width)
        if self.is_mounted:
            if self._height != before or self._width is None:
                self.refresh(layout=True)
            else:
                self.refresh()

    def _parse(self) -> None:
        tail = self._applied[self._frozen_chars:]
        if not self._live and self._frozen_chars == 0:  # a whole text at once: remembered parses
            blocks = list(parse_whole(tail)) if tail.strip() else []
        else:
            blocks = parse_blocks(tail) if tail.strip() else []
        if self._live and len(blocks) > 1:
            last = blocks[-1]
            self._frozen_nodes.extend(b.node for b in blocks[:-1])
            self._frozen_chars += _line_offset(tail, last.start)
            blocks = [last]
        elif not self._live:
            self._frozen_nodes.extend(b.node for b in blocks)
            self._frozen_chars = len(self._applied)
            blocks = []
        self._tail_nodes = [b.node for b in blocks]
        self._tail_lines = None

    # -- laying out and drawing --------------------------------------------------------

    def _styles_key(self) -> Any:
        try:
            return (self.app.theme, self.visual_style)
        except Exception:
            return None

    def _layout(self, width: int) -> None:
        """Bring the layout up to date at ``width``: measure the newly
        finished blocks, and draw the tail again (only it changes while streaming)."""
        key = self._styles_key()
        if width != self._width or key != self._style_key or self._painter is None:
            self._width, self._style_key = width, key
            self._painter = Painter(_Picker(self), width)
            self._laid, self._offsets = [], []
            self._frozen_height, self._frozen_bottom = 0, None
            self._tail_lines = None
        if self._tail_nodes is None:
            self._parse()
        painter = self._painter
        for node in self._frozen_nodes[len(self._laid):]:
            block = measure_block(node, painter)
            gap = block.top if self._frozen_bottom is None else max(self._frozen_bottom, block.top)
            self._offsets.append(self._frozen_height + gap)
            self._frozen_height += gap + block.height
            self._frozen_bottom = block.bottom
            self._laid.append(block)
        if self._tail_lines is None:
            tail = [render_block(node, painter, guess=False) for node in self._tail_nodes or []]
            if tail:
                self._tail_lines = join_blocks(tail, painter, after=self._frozen_bottom)
            else:
                self._tail_lines = [painter.blank()] * (self._frozen_bottom or 0)
        self._height = self._frozen_height + len(self._tail_lines)

    def _draw(self, index: int) -> list[Strip]:
        """Draw finished block ``index`` (it came into view); if it is not as
        tall as measured, the blocks below move and the layout is refreshed."""
        block = self._laid[index]
        assert self._painter is not None
        drawn = render_block(self._frozen_nodes[index], self._painter)
        strips = drawn.strips or []
        block.strips = strips
        if len(strips) != block.height:
            shift = len(strips) - block.height
            block.height = len(strips)
            for i in range(index + 1, len(self._offsets)):
                self._offsets[i] += shift
            self._frozen_height += shift
            self._height += shift
            self.call_later(self.refresh, layout=True)
        return strips

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if self._pending and not self._live:
            self._apply()
        self._layout(width)
        return self._height

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._width or self._tail_lines is None or self._painter is None:
            self._layout(width)
        if y < self._frozen_height:
            index = bisect_right(self._offsets, y) - 1
            if index >= 0:
                block = self._laid[index]
                row = y - self._offsets[index]
                if row < block.height:
                    strips = block.strips if block.strips is not None else self._draw(index)
                    if row < len(strips):
                        return strips[row]
            return Strip.blank(width, self.visual_style.rich_style)
        tail = self._tail_lines or []
        y -= self._frozen_height
        if 0 <= y < len(tail):
            return tail[y]
        return Strip.blank(width, self.visual_style.rich_style)

    def notify_style_update(self) -> None:
        self._painter = None  # the theme changed: lay out and draw again
        super().notify_style_update()

    async def action_link(self, href: str) -> None:
        """A link in the reply was clicked: open it."""
        self.app.open_url(href)


#: Component classes drawn as blocks (Textual's Markdown makes a widget of each), not inline.
_BLOCK_PARTS = frozenset({"reply--fence", "reply--quote"})


class _Picker:
    """The styles a :class:`~wisp.tui.markdown_lines.Painter` draws with, from a :class:`ReplyText`."""

    def __init__(self, widget: ReplyText) -> None:
        self.widget = widget
        self._base: Style | None = None
        self._parts: dict[str, Style] = {}

    def base(self) -> Style:
        if self._base is None:
            self._base = self.widget.visual_style
        return self._base

    def part(self, name: str) -> Style:
        style = self._parts.get(name)
        if style is None:
            # A fence and a quote are widgets in Textual's Markdown: their background (white 30% in a
            # light theme, $boost) lies over the reply's, so theirs is the composited one; inline
            # parts are partial styles, as Textual's Markdown draws them.
            partial = name not in _BLOCK_PARTS
            style = self._parts[name] = self.widget.get_visual_style(name, partial=partial)
        return style

    def get_style(self, style: str | Style) -> Style:
        return self.widget._get_style(style)
