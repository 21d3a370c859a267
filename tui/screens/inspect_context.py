"""``/inspect context`` and F5: the layers and the exact next request.

Issue "Layered context", "Seeing it, at no model cost": one row per layer
(tokens, share of the window, items, a hint), the tokens left, and the
exact messages of the next request highlighted with pygments (through
Rich's ``Syntax``): each message's content verbatim, or (``j``) the raw
JSON of the request. Nothing here goes into the model's context.
"""

from __future__ import annotations

import json
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from wisp.themes import syntax_theme

from .modal import WispModal

__all__ = ["InspectContextScreen"]

#: The box's share of the screen's width (``#inspect-box`` in inspect_context.tcss), and what its
#: border and padding take (cells, modal.tcss).
BOX_SHARE = 0.96
BOX_FRAME = 4
#: DataTable's padding on each side of a cell, its vertical scrollbar, and the narrowest hint column (cells).
CELL_PADDING = 2
SCROLLBAR = 2
MIN_HINT = 24


class InspectContextScreen(WispModal[None]):
    """The layers of ``report`` (a :class:`~wisp.core.context.inspect.ContextReport`)
    and its request. Esc, q or F5 closes it; ``j`` switches the request
    between its messages one by one (each content verbatim, highlighted)
    and the raw JSON sent."""

    CSS_PATH = ["modal.tcss", "inspect_context.tcss"]
    BINDINGS = [
        Binding("q,f5", "close", "Close"),
        Binding("j", "toggle_json", "Raw JSON"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
        Binding("home", "scroll('home')", "Top", show=False),
        Binding("end", "scroll('end')", "Bottom", show=False),
    ]
    BOX_ID = "inspect-box"

    def __init__(self, report: Any) -> None:
        super().__init__()
        self.report = report
        self.raw = False

    def compose_box(self) -> ComposeResult:
        r = self.report
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

    @property
    def _code_style(self) -> str:
        """The pygments style for the app's theme, dark or light (issue 16, "Themes")."""
        return syntax_theme(self.app.current_theme.dark)

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
                widgets.append(Static(Syntax(content, "markdown", theme=self._code_style, word_wrap=True)))
            if m.get("tool_calls"):
                widgets.append(Static(Syntax(json.dumps(m["tool_calls"], ensure_ascii=False, indent=2), "json",
                                             theme=self._code_style, word_wrap=True)))
        if self.report.tools:
            widgets.append(Static(Text(f"tools ({len(self.report.tools)})"), classes="message-head"))
            widgets.append(Static(Syntax(json.dumps(self.report.tools, ensure_ascii=False, indent=2), "json",
                                         theme=self._code_style, word_wrap=True)))
        return widgets

    def _hint_width(self, rows: list[tuple[str, str, str, str, str]]) -> int:
        """The hint column's width (cells): what the box leaves after the other
        four columns, so a long hint wraps onto more lines instead of running
        off the box (a new user saw them cut at 120 columns)."""
        box = int(self.app.size.width * BOX_SHARE) - BOX_FRAME
        heads = ("layer", "tokens", "window", "items")
        fixed = sum(max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads))
        return max(MIN_HINT, box - fixed - CELL_PADDING * 5 - SCROLLBAR)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        rows = self.report.table_rows()
        table.add_column("layer")
        table.add_column("tokens")
        table.add_column("window")
        table.add_column("items")
        table.add_column("hint", width=self._hint_width(rows))
        for label, tokens, share, items, hint in rows:
            table.add_row(label, Text(tokens, justify="right"), Text(share, justify="right"),
                          Text(items, justify="right"), Text(hint), height=None)
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
            await box.mount(Static(Syntax(self.report.request_json(), "json", theme=self._code_style,
                                          word_wrap=True), id="request-json"))
        else:
            await box.mount_all(self._message_widgets())
        box.scroll_home(animate=False)

    def action_scroll(self, where: str) -> None:
        """PageUp/PageDown/Home/End scroll the request, not the chat behind."""
        box = self.query_one("#request", VerticalScroll)
        {"page_up": box.scroll_page_up, "page_down": box.scroll_page_down, "home": box.scroll_home,
         "end": box.scroll_end}[where](animate=False)

    def rows_text(self) -> list[str]:
        """The layer rows as plain text (for tests)."""
        return [" ".join(row) for row in self.report.table_rows()]
