"""``/show``: an entry, a turn or a fact in full, highlighted and paged.

Issue "Layered context", "Seeing it, at no model cost": each section is
highlighted with its lexer (pygments, through Rich's ``Syntax``) and paged,
:data:`PAGE_LINES` lines a page; ``n`` and ``p`` turn pages, the arrows and
the mouse scroll. Nothing here goes into the model's context.
"""

from __future__ import annotations

from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from wisp.themes import syntax_theme

from .modal import WispModal

__all__ = ["ShowScreen", "PAGE_LINES"]

#: Lines of shown material a page.
PAGE_LINES = 400


class ShowScreen(WispModal[None]):
    """``material`` (a :class:`~wisp.core.context.show.ShowMaterial`) in full,
    highlighted, a page of ``page_lines`` lines at a time. Esc or q closes it."""

    CSS_PATH = ["modal.tcss", "show.tcss"]
    BINDINGS = [
        Binding("q", "close", "Close"),
        Binding("n,right", "page(1)", "Next page"),
        Binding("p,left", "page(-1)", "Previous page"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
        Binding("home", "scroll('home')", "Top", show=False),
        Binding("end", "scroll('end')", "Bottom", show=False),
    ]
    BOX_ID = "show-box"

    def __init__(self, material: Any, page_lines: int = PAGE_LINES) -> None:
        super().__init__()
        self.material = material
        self.page_lines = max(1, int(page_lines))
        self.pages = self._paginate()
        self.page = 0

    def _paginate(self) -> list[list[tuple[int, int, int]]]:
        """Pages as lists of (section index, first line, end line) slices."""
        pages: list[list[tuple[int, int, int]]] = [[]]
        room = self.page_lines
        for i, section in enumerate(self.material.sections):
            lines = section.text.split("\n") if section.text else [""]
            start = 0
            while start < len(lines):
                if room <= 0:
                    pages.append([])
                    room = self.page_lines
                take = min(room, len(lines) - start)
                pages[-1].append((i, start, start + take))
                start += take
                room -= take
        return pages

    def compose_box(self) -> ComposeResult:
        yield Static(Text(self.material.title), classes="view-head", id="show-title")
        yield VerticalScroll(id="show-body")
        yield Static("", classes="view-foot", id="show-foot")

    async def on_mount(self) -> None:
        await self._render_page()

    async def _render_page(self) -> None:
        body = self.query_one("#show-body", VerticalScroll)
        await body.remove_children()
        widgets: list[Static] = []
        for index, start, end in self.pages[self.page]:
            section = self.material.sections[index]
            lines = section.text.split("\n")
            total = len(lines)
            heading = section.heading
            if start > 0 or end < total:
                heading += f"  (lines {start + 1}–{end} of {total:,})"
            widgets.append(Static(Text(heading), classes="show-heading"))
            code = "\n".join(lines[start:end])
            style = syntax_theme(self.app.current_theme.dark)  # follows the theme (issue 16)
            widgets.append(Static(Syntax(code, section.lexer, theme=style, word_wrap=True),
                                  classes="show-text"))
        await body.mount_all(widgets)
        body.scroll_home(animate=False)
        n = len(self.pages)
        nav = " · n next page · p previous page" if n > 1 else ""
        self.query_one("#show-foot", Static).update(
            f"page {self.page + 1} of {n}{nav} · PageUp/PageDown scroll · Esc close · not sent to the model")
        body.focus()

    def action_scroll(self, where: str) -> None:
        """PageUp/PageDown/Home/End scroll the page, not the chat behind."""
        box = self.query_one("#show-body", VerticalScroll)
        {"page_up": box.scroll_page_up, "page_down": box.scroll_page_down, "home": box.scroll_home,
         "end": box.scroll_end}[where](animate=False)

    async def action_page(self, delta: int) -> None:
        """Turn ``delta`` pages (clamped)."""
        target = max(0, min(len(self.pages) - 1, self.page + int(delta)))
        if target != self.page:
            self.page = target
            await self._render_page()

    def page_text(self) -> str:
        """The current page's text (for tests)."""
        out = []
        for index, start, end in self.pages[self.page]:
            section = self.material.sections[index]
            out.append(section.heading)
            out.append("\n".join(section.text.split("\n")[start:end]))
        return "\n".join(out)
