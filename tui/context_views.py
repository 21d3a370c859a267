"""Views of the layered context: ``/inspect context`` and ``/show``.

Issue "Layered context", "Seeing it, at no model cost":

- :class:`InspectContextScreen`: one row per layer (tokens, share of the
  window, items, a hint), the tokens left, and the exact messages of the
  next request highlighted with pygments (through Rich's ``Syntax``): each
  message's content verbatim, or (``j``) the raw JSON of the request.
- :class:`ShowScreen`: an entry, a turn or a fact in full, highlighted per
  section with its lexer and paged (:data:`PAGE_LINES` lines a page; ``n``
  and ``p`` turn pages, the arrows and the mouse scroll).

Neither puts anything in the model's context. :func:`view_for` picks the
view for a command's result.
"""

from __future__ import annotations

import json
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

__all__ = ["InspectContextScreen", "ShowScreen", "view_for", "PAGE_LINES", "SYNTAX_THEME"]

#: Lines of shown material a page.
PAGE_LINES = 400
#: The pygments style used for highlighting.
SYNTAX_THEME = "monokai"

_SCREEN_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 96%; height: 94%; border: round $accent; background: $surface; padding: 0 1; }}
{name} .view-head {{ height: auto; color: $text; text-style: bold; }}
{name} .view-foot {{ height: 1; color: $text-muted; }}
{name} VerticalScroll {{ height: 1fr; scrollbar-size-vertical: 1; }}
"""


def view_for(result: Any) -> ModalScreen[None] | None:
    """The screen to open for a command's result (``/inspect context``,
    ``/show …``), or ``None`` to show its text in the chat."""
    if getattr(result, "error", False):
        return None
    data = getattr(result, "data", None)
    from wisp.core.context.inspect import ContextReport
    from wisp.core.context.show import ShowMaterial

    if isinstance(data, ContextReport):
        return InspectContextScreen(data)
    if isinstance(data, ShowMaterial):
        return ShowScreen(data)
    return None


class InspectContextScreen(ModalScreen[None]):
    """``/inspect context``: the layers and the next request. Esc or q closes
    it; ``j`` switches the request between its messages one by one (each
    content verbatim, highlighted) and the raw JSON sent."""

    BINDINGS = [
        Binding("escape,q,f5", "dismiss", "Close"),
        Binding("j", "toggle_json", "Raw JSON"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
        Binding("home", "scroll('home')", "Top", show=False),
        Binding("end", "scroll('end')", "Bottom", show=False),
    ]
    DEFAULT_CSS = _SCREEN_CSS.format(name="InspectContextScreen") + """
    InspectContextScreen DataTable { height: auto; max-height: 13; margin: 0 0 1 0; }
    InspectContextScreen #request { height: 1fr; }
    InspectContextScreen .message-head { color: $accent; text-style: bold; margin: 1 0 0 0; }
    """

    def __init__(self, report: Any) -> None:
        super().__init__()
        self.report = report
        self.raw = False

    def compose(self) -> ComposeResult:
        r = self.report
        with Vertical():
            conv = f"conversation {r.conversation}" if r.conversation is not None else "no conversation yet"
            yield Static(Text(f"Context of the next request · {conv} · {r.model or 'no model'}"),
                         classes="view-head")
            yield Static(Text(r.headline()), id="headline")
            table: DataTable[Any] = DataTable(id="layers", cursor_type="none", zebra_stripes=True)
            table.can_focus = False
            yield table
            yield Static(Text(f"The exact messages of the next request ({len(r.messages)}), then its tools:",
                              style="bold"), id="request-title")
            yield VerticalScroll(*self._message_widgets(), id="request")
            yield Static("Esc close · j raw JSON / messages · PageUp/PageDown scroll · not sent to the model",
                         classes="view-foot")

    def _message_widgets(self) -> list[Static]:
        widgets: list[Static] = []
        for i, m in enumerate(self.report.messages, start=1):
            head = f"[{i}] {m.get('role')}"
            if m.get("name"):
                head += f" · {m['name']}"
            if m.get("tool_call_id"):
                head += f" · {m['tool_call_id']}"
            widgets.append(Static(Text(head), classes="message-head"))
            content = str(m.get("content") or "")
            if content:
                widgets.append(Static(Syntax(content, "markdown", theme=SYNTAX_THEME, word_wrap=True)))
            if m.get("tool_calls"):
                widgets.append(Static(Syntax(json.dumps(m["tool_calls"], ensure_ascii=False, indent=2), "json",
                                             theme=SYNTAX_THEME, word_wrap=True)))
        if self.report.tools:
            widgets.append(Static(Text(f"tools ({len(self.report.tools)})"), classes="message-head"))
            widgets.append(Static(Syntax(json.dumps(self.report.tools, ensure_ascii=False, indent=2), "json",
                                         theme=SYNTAX_THEME, word_wrap=True)))
        return widgets

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("layer")
        table.add_column("tokens")
        table.add_column("window")
        table.add_column("items")
        table.add_column("hint")
        for label, tokens, share, items, hint in self.report.table_rows():
            table.add_row(label, Text(tokens, justify="right"), Text(share, justify="right"),
                          Text(items, justify="right"), hint)
        pct = f"{self.report.total / self.report.window * 100:.1f}%" if self.report.window else ""
        table.add_row(Text("total", style="bold"), Text(f"{self.report.total:,}", justify="right", style="bold"),
                      Text(pct, justify="right"), "", "")
        style = "bold red" if self.report.tokens_left < 0 else "bold green"
        table.add_row(Text("tokens left", style=style), Text(f"{self.report.tokens_left:,}", justify="right",
                                                             style=style), "", "", "")
        self.query_one("#request", VerticalScroll).focus()

    async def action_toggle_json(self) -> None:
        """Show the request as the raw JSON sent, or as its messages one by one."""
        self.raw = not self.raw
        box = self.query_one("#request", VerticalScroll)
        await box.remove_children()
        if self.raw:
            await box.mount(Static(Syntax(self.report.request_json(), "json", theme=SYNTAX_THEME, word_wrap=True),
                                   id="request-json"))
        else:
            await box.mount_all(self._message_widgets())
        box.scroll_home(animate=False)

    def action_scroll(self, where: str) -> None:
        box = self.query_one("#request", VerticalScroll)
        {"page_up": box.scroll_page_up, "page_down": box.scroll_page_down, "home": box.scroll_home,
         "end": box.scroll_end}[where](animate=False)

    def rows_text(self) -> list[str]:
        """The layer rows as plain text (for tests)."""
        return [" ".join(row) for row in self.report.table_rows()]


class ShowScreen(ModalScreen[None]):
    """``/show``: material in full, highlighted, a page at a time. Esc or q closes it."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("n,right", "page(1)", "Next page"),
        Binding("p,left", "page(-1)", "Previous page"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
        Binding("home", "scroll('home')", "Top", show=False),
        Binding("end", "scroll('end')", "Bottom", show=False),
    ]
    DEFAULT_CSS = _SCREEN_CSS.format(name="ShowScreen") + """
    ShowScreen .show-heading { color: $accent; text-style: bold; margin: 1 0 0 0; }
    """

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

    def compose(self) -> ComposeResult:
        with Vertical():
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
            widgets.append(Static(Syntax(code, section.lexer, theme=SYNTAX_THEME, word_wrap=True),
                                  classes="show-text"))
        await body.mount_all(widgets)
        body.scroll_home(animate=False)
        n = len(self.pages)
        nav = " · n next page · p previous page" if n > 1 else ""
        self.query_one("#show-foot", Static).update(
            f"page {self.page + 1} of {n}{nav} · PageUp/PageDown scroll · Esc close · not sent to the model")
        body.focus()

    def action_scroll(self, where: str) -> None:
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
