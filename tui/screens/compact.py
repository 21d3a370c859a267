"""``/compact [focus]``: what a compaction would do, shown before it acts.

Issue "Compaction you can see and trust", "``/compact [focus]``, with a
preview": which turns would leave the window, with their token counts; the
summary the model proposes, with the identifiers it keeps and those it
missed (which wisp completes); the facts and the task that stay; the tokens
of the next request before and after. **Enter** applies it, **Esc**
cancels (nothing changes; the side call was its only cost). The screen
answers ``"apply"`` or ``None``; the app applies it through the core
(:func:`wisp.core.context.compaction.apply_compaction`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from wisp.core.context.summary import turn_ranges

from .modal import WispModal

__all__ = ["CompactScreen"]


class CompactScreen(WispModal[str]):
    """The preview of ``preview`` (a
    :class:`~wisp.core.context.compaction.CompactPreview`). Enter applies
    (answers ``"apply"``); Esc or q cancels (answers ``None``)."""

    CSS_PATH = ["modal.tcss", "compact.tcss"]
    BINDINGS = [
        Binding("enter", "apply", "Apply", priority=True),
        Binding("q", "close", "Cancel"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
    ]
    BOX_ID = "compact-box"

    def __init__(self, preview: Any) -> None:
        super().__init__()
        self.preview = preview

    def compose_box(self) -> ComposeResult:
        p = self.preview
        focus = f" · focus: {p.focus}" if p.focus else ""
        yield Static(Text(f"Compact conversation {p.conversation}{focus} · nothing is changed until Enter"),
                     classes="view-head")
        yield Static(Text(p.headline()), id="compact-headline")
        with VerticalScroll(id="compact-body"):
            if p.draft is not None:
                yield from self._sections()
        can = p.draft is not None
        yield Static(Text("Enter apply · Esc cancel" if can else "Esc close"), classes="view-foot",
                     id="compact-foot")

    def _sections(self) -> ComposeResult:
        p = self.preview
        d = p.draft
        leaving = Text()
        for turn, tokens in p.leaving:
            leaving.append(f"turn {turn}", style="bold")
            leaving.append(f"  {tokens:,} tokens\n")
        if p.staying:
            leaving.append(f"staying whole: turn{'s' if len(p.staying) != 1 else ''} {turn_ranges(p.staying)}",
                           style="dim")
        yield Static(Text(f"Turns leaving the window ({p.leaving_tokens:,} tokens)"), classes="section-head")
        yield Static(leaving, id="compact-leaving")
        who = f"the model ({d.model})" if d.model else "wisp alone"
        yield Static(Text(f"The summary proposed by {who}" + (f", focused on {p.focus}" if p.focus else "")),
                     classes="section-head")
        if p.failed:
            yield Static(Text(f"The model could not write it ({p.failed}); wisp wrote it from the turns.",
                              style="yellow"), classes="compact-note")
        if d.model_part:
            yield Static(Text(d.model_part), id="compact-model-part", classes="summary-part")
        if d.completion:
            head = "Completed by wisp" if d.model else "Written by wisp"
            yield Static(Text(head, style="bold green"), classes="part-head")
            yield Static(Text(d.completion), id="compact-completion", classes="summary-part")
        kept = Text()
        kept.append(f"keeps {len(d.kept)}: ", style="bold")
        kept.append(", ".join(d.kept) or "none", style="cyan")
        if d.completed:
            kept.append(f"\nmissed by the model, completed by wisp ({len(d.completed)}): ", style="bold")
            kept.append(", ".join(d.completed), style="yellow")
        yield Static(Text("Identifiers"), classes="section-head")
        yield Static(kept, id="compact-kept")
        stay = Text()
        stay.append("task: ", style="bold")
        stay.append(p.task or "none set")
        for fact in p.facts:
            stay.append(f"\n{fact}")
        if not p.facts:
            stay.append("\nno facts", style="dim")
        yield Static(Text("What stays"), classes="section-head")
        yield Static(stay, id="compact-stays")
        tokens = Text()
        tokens.append(f"{p.tokens_before:,}", style="bold")
        tokens.append(" tokens before → ")
        tokens.append(f"{p.tokens_after:,}", style="bold green")
        tokens.append(f" after  (budget {p.budget:,}, window {p.window:,})")
        yield Static(tokens, id="compact-tokens")

    def action_apply(self) -> None:
        """Enter: apply the previewed summary (nothing to apply: close)."""
        self.dismiss("apply" if self.preview.draft is not None else None)

    def action_scroll(self, where: str) -> None:
        body = self.query_one("#compact-body", VerticalScroll)
        {"page_up": body.scroll_page_up, "page_down": body.scroll_page_down}[where]()
