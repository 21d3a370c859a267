"""Markdown drawn as lines: each block of a reply rendered once, to strips, by wisp itself.

Issue 12, "Decouple receiving from rendering": a finished Markdown block
never changes, so it should not be laid out again on every frame; only the
block still being written is live. Textual's ``Markdown`` widget makes a
widget (often several) per block and lays them all out again whenever one
grows, so its cost per frame grows with the reply. Here a block is parsed
with markdown-it (the parser Textual's widget uses, ``gfm-like``) and
rendered once into :class:`~textual.strip.Strip` lines at a width; the
reply widget (:class:`wisp.tui.widgets.ReplyText`) shows those lines
through Textual's line API and only ever renders again the last block, the
one still being written.

The look follows Textual's own Markdown widget (its CSS, in
``textual/widgets/_markdown.py``): paragraphs with a blank line below;
headings with ``$markdown-hN-*`` colours and 2 (H1, H2) or 1 line above;
fenced code on a darker panel with one line and two columns of padding,
highlighted by :func:`textual.highlight.highlight`; inline code, emphasis,
strong and strike-through as Textual styles them; bullet and numbered
lists; block quotes on ``$boost`` behind an ``outer`` left border;
horizontal rules in ``$secondary``; tables with keylines. Margins between
blocks collapse as Textual's vertical layout collapses them (the larger
wins). Two differences: a code line wider than the pane folds (Textual's
fence scrolls sideways, which a line-drawn reply cannot), and HTML blocks
show as their text (Textual drops them).

The styles come from the widget that draws (its component classes, so a
theme or a ``.tcss`` changes them); this module holds no colour of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Protocol

from rich.segment import Segment
from textual.content import Content, Span
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode

__all__ = ["Block", "RenderedBlock", "Painter", "StylePicker", "parse_blocks", "parse_whole", "render_block",
           "measure_block",
           "join_blocks", "count_lines", "highlight_code", "BULLETS"]

#: Bullets of unordered lists, by depth (as Textual's ``Markdown.BULLETS``).
BULLETS = ["• ", "▪ ", "‣ ", "⭑ ", "◦ "]

_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _parser() -> "MarkdownIt":
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like")


@dataclass
class Block:
    """One top-level Markdown block of a text: its syntax ``node``
    (:class:`markdown_it.tree.SyntaxTreeNode`) and the lines of the parsed
    text it starts on (``start``, 0-based)."""

    node: "SyntaxTreeNode"
    start: int


def parse_blocks(text: str) -> list[Block]:
    """The top-level blocks of ``text`` in order (markdown-it, ``gfm-like``).
    Never raises for any text."""
    from markdown_it.tree import SyntaxTreeNode

    tokens = _parser().parse(text)
    root = SyntaxTreeNode(tokens)
    blocks = []
    for node in root.children:
        line = node.map[0] if node.map else (blocks[-1].start if blocks else 0)
        blocks.append(Block(node, line))
    return blocks


@lru_cache(maxsize=256)
def parse_whole(text: str) -> tuple[Block, ...]:
    """:func:`parse_blocks` of a whole (stored) text, remembered for the
    last 256 texts: a reply shown again is not parsed again."""
    return tuple(parse_blocks(text))


class StylePicker(Protocol):
    """What a painter needs from the widget that draws: its base style, its
    component styles (partial), and a way to read a style string or a
    component class (``.code_inline``) as Textual's content does."""

    def base(self) -> Style: ...

    def part(self, name: str) -> Style: ...

    def get_style(self, style: str | Style) -> Style: ...


@dataclass
class RenderedBlock:
    """A block laid out at one width: its ``height`` in lines, its ``top``
    and ``bottom`` margins (collapsed with the neighbours' by
    :func:`join_blocks`) and its ``strips`` (each exactly that wide), or
    ``None`` when only measured so far (:func:`measure_block`)."""

    strips: list[Strip] | None
    top: int = 0
    bottom: int = 0
    height: int = -1

    def __post_init__(self) -> None:
        if self.height < 0:
            self.height = len(self.strips or [])


@dataclass
class Painter:
    """Renders blocks at ``width`` columns in the styles of ``styles``."""

    styles: StylePicker
    width: int
    _options: RenderOptions | None = field(default=None, init=False)

    # -- plumbing -----------------------------------------------------------------

    @property
    def options(self) -> RenderOptions:
        if self._options is None:
            self._options = RenderOptions(self.styles.get_style, {"text_wrap": "wrap", "text_overflow": "fold"})
        return self._options

    def lines(self, content: Content, width: int, style: Style, *, align: str = "left") -> list[Strip]:
        """``content`` wrapped to ``width`` on ``style``, each line padded to ``width``."""
        width = max(1, width)
        if not content.plain.strip("\n") and not content.plain:
            return [Strip.blank(width, style.rich_style)]
        strips = content.render_strips(width, None, style, self.options)
        out = []
        for strip in strips:
            if align == "center":
                gap = max(0, width - strip.cell_length)
                left = gap // 2
                strip = Strip.join([Strip.blank(left, style.rich_style), strip]) if left else strip
            out.append(strip.extend_cell_length(width, style.rich_style).crop(0, width))
        return out or [Strip.blank(width, style.rich_style)]

    def blank(self, width: int | None = None, style: Style | None = None) -> Strip:
        return Strip.blank(self.width if width is None else width, (style or self.styles.base()).rich_style)

    # -- inline ------------------------------------------------------------------------

    def inline(self, node: "SyntaxTreeNode | None") -> Content:
        """The inline children of ``node`` (an ``inline`` node) as Content,
        styled as Textual's ``MarkdownBlock._token_to_content``."""
        if node is None:
            return Content("")
        tokens = node.token.children if node.token is not None else None
        if not tokens:
            return Content(_SPACES.sub(" ", node.content or ""))
        parts: list[str] = []
        spans: list[Span] = []
        stack: list[tuple[str | Style, int]] = []
        position = 0

        def add(text: str) -> None:
            nonlocal position
            parts.append(text)
            position += len(text)

        def close() -> None:
            if stack:
                style, start = stack.pop()
                spans.append(Span(start, position, style))

        for child in tokens:
            kind = child.type
            if kind == "text":
                add(_SPACES.sub(" ", child.content))
            elif kind == "hardbreak":
                add("\n")
            elif kind == "softbreak":
                add(" ")
            elif kind == "code_inline":
                stack.append((".code_inline", position))
                add(child.content)
                close()
            elif kind == "em_open":
                stack.append((".em", position))
            elif kind == "strong_open":
                stack.append((".strong", position))
            elif kind == "s_open":
                stack.append((".s", position))
            elif kind == "link_open":
                href = str(child.attrs.get("href", ""))
                stack.append((Style.from_meta({"@click": f"link({href!r})"}) + self.styles.part("reply--link"),
                              position))
            elif kind == "image":
                href = str(child.attrs.get("src", ""))
                stack.append((Style.from_meta({"@click": f"link({href!r})"}), position))
                add("🖼  ")
                alt = str(child.attrs.get("alt", "") or "")
                if alt:
                    add(f"({alt})")
                for grandchild in child.children or []:
                    add(grandchild.content)
                close()
            elif kind == "html_inline":
                add(child.content)
            elif kind.endswith("_close"):
                close()
        while stack:
            close()
        return Content("".join(parts), spans=spans)


def _inline_child(node: "SyntaxTreeNode") -> "SyntaxTreeNode | None":
    for child in node.children:
        if child.type == "inline":
            return child
    return None


def render_block(node: "SyntaxTreeNode", painter: Painter, *, nested: bool = False,
                 depth: int = 0, guess: bool = True) -> RenderedBlock:
    """One block ``node`` drawn at ``painter.width``. ``nested``: inside a
    list item or a quote (a paragraph there has no margin, as in Textual);
    ``depth``: how deep in lists (picks the bullet); ``guess``: guess the
    language of a fence that names none (off for the block still being
    written: guessing is slow, and it would be done again every frame)."""
    kind = node.type
    width = painter.width
    styles = painter.styles
    base = styles.base()
    if kind == "paragraph":
        return RenderedBlock(painter.lines(painter.inline(_inline_child(node)), width, base),
                             0, 0 if nested else 1)
    if kind == "heading":
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        style = base + styles.part("reply--heading") + styles.part(f"reply--h{level}")
        content = painter.inline(_inline_child(node))
        if level == 3:  # width: auto, so the background is only behind the words
            strips = [s.extend_cell_length(width, base.rich_style)
                      for s in content.render_strips(width, None, style, painter.options)]
            strips = strips or [painter.blank()]
        else:
            strips = painter.lines(content, width, style, align="center" if level == 1 else "left")
        return RenderedBlock(strips, 2 if level <= 2 else 1, 1)
    if kind in ("fence", "code_block"):
        return _fence(node, painter, guess=guess)
    if kind == "hr":
        line = Strip([Segment("─" * width, (base + styles.part("reply--hr")).rich_style)], width)
        return RenderedBlock([painter.blank(), line], 0, 1)
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, painter, nested=nested, depth=depth)
    if kind == "blockquote":
        return _quote(node, painter, depth=depth)
    if kind == "table":
        return _table(node, painter)
    if kind == "html_block":
        text = (node.content or "").rstrip("\n")
        return RenderedBlock(painter.lines(Content(text), width, base), 0, 0 if nested else 1)
    # anything else markdown-it may give (front matter, a plugin's block): its text, plainly
    text = (node.content or "").rstrip("\n")
    return RenderedBlock(painter.lines(Content(text), width, base) if text else [], 0, 0)


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    """A Pygments lexer for ``language`` (made once; ``text`` for a name Pygments does not know)."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=True, tabsize=8)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=True, tabsize=8)


def _language(node: "SyntaxTreeNode", *, guess: bool) -> str:
    """The fence's language: its info string's first word; else, with
    ``guess``, what :func:`textual.highlight.guess_language` makes of the
    code (as Textual's fence does; slow, so only for a finished block), else ``text``."""
    language = (node.info or "").strip().split(" ")[0] if node.type == "fence" else ""
    if language:
        return language
    if guess and node.content.strip():
        from textual.highlight import guess_language

        try:
            return guess_language(node.content, None)
        except Exception:
            return "text"
    return "text"


def highlight_code(code: str, language: str) -> Content:
    """``code`` highlighted as :func:`textual.highlight.highlight` does (the
    same theme), with the lexer made once per language."""
    from textual.highlight import HighlightTheme

    code = "\n".join(code.splitlines())
    spans: list[Span] = []
    styles = HighlightTheme.STYLES
    start = 0
    try:
        tokens = list(_lexer(language).get_tokens(code))
    except Exception:  # a lexer that chokes on odd input: the code, plain
        tokens = []
    for token_type, token in tokens:
        end = start + len(token)
        while True:
            if style := styles.get(token_type):
                spans.append(Span(start, end, style))
                break
            if (token_type := token_type.parent) is None:
                break
        start = end
    return Content(code, spans=spans).stylize_before("$text")


def _code_lines(node: "SyntaxTreeNode") -> list[str]:
    return "\n".join((node.content or "").rstrip().splitlines()).split("\n")


def _fence(node: "SyntaxTreeNode", painter: Painter, *, guess: bool = True) -> RenderedBlock:
    styles = painter.styles
    width = painter.width
    style = styles.base() + styles.part("reply--fence")
    code = "\n".join(_code_lines(node))
    content = highlight_code(code, _language(node, guess=guess))
    inner = max(1, width - 4)
    pad = Strip.blank(2, style.rich_style)
    strips = [painter.blank(width, style)]
    for line in content.split("\n", allow_blank=True):
        line = line.expand_tabs(8)
        if not line.plain:
            strips.append(painter.blank(width, style))
            continue
        for piece in line.render_strips(inner, None, style, painter.options):
            strips.append(Strip.join([pad, piece.extend_cell_length(inner, style.rich_style).crop(0, inner),
                                      pad]))
    strips.append(painter.blank(width, style))
    return RenderedBlock(strips, 1, 1)


def measure_block(node: "SyntaxTreeNode", painter: Painter) -> RenderedBlock:
    """A top-level block's height and margins at ``painter.width`` without
    drawing it where measuring is cheaper (paragraphs, headings, code,
    rules): its ``strips`` are ``None`` until :func:`render_block` draws
    it, when it comes into view. Other blocks are drawn at once."""
    kind = node.type
    width = painter.width
    rules = painter.options.rules
    if kind == "paragraph":
        height = painter.inline(_inline_child(node)).get_height(rules, max(1, width))
        return RenderedBlock(None, 0, 1, max(1, height))
    if kind == "heading":
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        height = painter.inline(_inline_child(node)).get_height(rules, max(1, width))
        return RenderedBlock(None, 2 if level <= 2 else 1, 1, max(1, height))
    if kind in ("fence", "code_block"):
        inner = max(1, width - 4)
        height = 2
        for line in _code_lines(node):
            if not line:
                height += 1
                continue
            text = Content(line).expand_tabs(8)
            height += 1 if text.cell_length <= inner else max(1, text.get_height(rules, inner))
        return RenderedBlock(None, 1, 1, height)
    if kind == "hr":
        return RenderedBlock(None, 0, 1, 2)
    return render_block(node, painter)


def _list(node: "SyntaxTreeNode", painter: Painter, *, nested: bool, depth: int) -> RenderedBlock:
    styles = painter.styles
    base = styles.base()
    bullet_style = base + styles.part("reply--bullet")
    items = [c for c in node.children if c.type == "list_item"]
    ordered = node.type == "ordered_list"
    symbols: list[str] = []
    if ordered:
        try:
            start = int(items[0].info) if items and items[0].info else 1
        except ValueError:
            start = 1
        marks = [f"{n}. " for n in range(start, start + len(items))]
        size = max((len(m) for m in marks), default=3)
        symbols = [m.rjust(size + 1) for m in marks]
    else:
        symbols = [BULLETS[depth % len(BULLETS)]] * len(items)
    strips: list[Strip] = []
    for item, symbol in zip(items, symbols):
        gutter = len(symbol)
        inner = max(1, painter.width - gutter - 1)  # MarkdownListItem: margin-right 1
        sub = Painter(styles, inner)
        blocks = [render_block(child, sub, nested=True, depth=depth + 1 if child.type.endswith("_list") else depth)
                  for child in item.children]
        body = join_blocks(blocks, sub, trailing=False) or [sub.blank()]
        head = Strip([Segment(symbol, bullet_style.rich_style)], gutter)
        indent = Strip.blank(gutter, base.rich_style)
        tail = Strip.blank(painter.width - gutter - inner, base.rich_style)
        for i, line in enumerate(body):
            strips.append(Strip.join([head if i == 0 else indent, line, tail]))
    return RenderedBlock(strips, 0, 0 if nested else 1)


def _quote(node: "SyntaxTreeNode", painter: Painter, *, depth: int) -> RenderedBlock:
    styles = painter.styles
    base = styles.base()
    style = base + styles.part("reply--quote")
    border = Strip([Segment("▌", (style + styles.part("reply--quote-border")).rich_style)], 1)
    inner = max(1, painter.width - 3)  # the border, and padding 0 1

    class _Inside:
        """The quote's children draw on the quote's background."""

        def base(self) -> Style:
            return style

        def part(self, name: str) -> Style:
            return styles.part(name)

        def get_style(self, s: str | Style) -> Style:
            return styles.get_style(s)

    sub = Painter(_Inside(), inner)
    blocks = [render_block(child, sub, nested=True, depth=depth) for child in node.children]
    body = join_blocks(blocks, sub, trailing=False) or [sub.blank()]
    pad = Strip.blank(1, style.rich_style)
    return RenderedBlock([Strip.join([border, pad, line, pad]) for line in body], 1, 1)


def _table(node: "SyntaxTreeNode", painter: Painter) -> RenderedBlock:
    styles = painter.styles
    base = styles.base()
    key = (base + styles.part("reply--table-keyline")).rich_style
    head_style = base + styles.part("reply--table-header")
    rows: list[tuple[bool, list[Content]]] = []
    for section in node.children:
        for tr in section.children:
            cells = [painter.inline(_inline_child(cell)) for cell in tr.children]
            rows.append((section.type == "thead", cells))
    if not rows:
        return RenderedBlock([], 0, 1)
    columns = max(len(cells) for _, cells in rows)
    natural = [0] * columns
    for _, cells in rows:
        for i, cell in enumerate(cells):
            natural[i] = max(natural[i], cell.cell_length)
    room = max(columns, painter.width - (columns + 1) - 2 * columns)  # keylines, and padding 0 1 a cell
    widths = [max(1, n) for n in natural]
    while sum(widths) > room and max(widths) > 1:  # shrink the widest column first
        widest = widths.index(max(widths))
        widths[widest] -= 1

    def rule(left: str, mid: str, right: str) -> Strip:
        text = left + mid.join("─" * (w + 2) for w in widths) + right
        return Strip([Segment(text, key)]).extend_cell_length(painter.width, base.rich_style)

    strips = [rule("┌", "┬", "┐")]
    for index, (header, cells) in enumerate(rows):
        style = head_style if header else base
        rendered = []
        for i in range(columns):
            cell = cells[i] if i < len(cells) else Content("")
            rendered.append(painter.lines(cell, widths[i], style))
        height = max(len(r) for r in rendered)
        for y in range(height):
            parts: list[Strip] = [Strip([Segment("│", key)])]
            for i in range(columns):
                line = rendered[i][y] if y < len(rendered[i]) else Strip.blank(widths[i], style.rich_style)
                parts += [Strip.blank(1, style.rich_style), line, Strip.blank(1, style.rich_style),
                          Strip([Segment("│", key)])]
            strips.append(Strip.join(parts).extend_cell_length(painter.width, base.rich_style)
                          .crop(0, painter.width))
        if index < len(rows) - 1:
            strips.append(rule("├", "┼", "┤"))
    strips.append(rule("└", "┴", "┘"))
    return RenderedBlock([s.crop(0, painter.width) for s in strips], 0, 1)


def join_blocks(blocks: Iterable[RenderedBlock], painter: Painter, *, trailing: bool = True,
                after: int | None = None) -> list[Strip]:
    """The blocks' lines one after another, with the collapsed margin
    (the larger of two neighbours') between them; the first block's top
    margin, and with ``trailing`` the last one's bottom margin. ``after``:
    the bottom margin of a block drawn before these (the first top margin
    then collapses with it)."""
    out: list[Strip] = []
    previous = after
    blank = painter.blank()
    for block in blocks:
        gap = block.top if previous is None else max(previous, block.top)
        out.extend([blank] * gap)
        out.extend(block.strips or [])
        previous = block.bottom
    if trailing and previous:
        out.extend([blank] * previous)
    return out


def count_lines(blocks: list[RenderedBlock]) -> int:
    """How many lines :func:`join_blocks` gives (with the trailing margin)."""
    total = 0
    previous: int | None = None
    for block in blocks:
        total += (block.top if previous is None else max(previous, block.top)) + block.height
        previous = block.bottom
    return total + (previous or 0)

