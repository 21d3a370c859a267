"""One tool call and its result: one line until opened; its title says the outcome."""

from __future__ import annotations

import json
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Collapsible, Static

from ..guard import Guarded

__all__ = ["ToolBlock", "TOOL_PREVIEW_CHARS"]

#: The most characters of a tool's output shown in the chat (the rest: ``/show entry N``).
TOOL_PREVIEW_CHARS = 20000

#: Streamed output is drawn at most this often (seconds): a chatty command does not redraw per piece.
OUTPUT_FRAME_S = 1 / 30


def _is_marker(line: str) -> bool:
    """A tool's own closing line (``[end of file]``, ``[more: …]``), not output."""
    return line.startswith("[end of") or line.startswith("[more:")


class ToolBlock(Guarded, Collapsible):
    """A tool call (``name`` and its ``arguments``), streaming its output
    while it runs (:meth:`stream`) and showing its result when it ends
    (:meth:`finish`): the title then starts with ✓ or ✗, the result's entry
    and its line count, so a narrow pane cuts the arguments, not the entry.
    ``running`` is true until :meth:`finish`; ``output`` is the output so far.

    Closed, it is one line: the arguments and the output are made and
    mounted only when it is first opened (issue 12, "Open what is seen"),
    and streamed output is drawn at most :data:`OUTPUT_FRAME_S` apart.
    An edit's result (``edit_file``: what changed, then the diff) is drawn
    highlighted as a diff, its control characters shown as escapes.
    """

    DEFAULT_CSS = """
    ToolBlock {
        margin: 0;
        padding: 0;
        border: none;
        background: $boost;
    }
    ToolBlock.-error CollapsibleTitle {
        color: $error;
    }
    ToolBlock .tool-args {
        color: $text-muted;
    }
    ToolBlock .tool-output {
        max-height: 30;
        overflow-y: auto;
    }
    """

    def __init__(self, name: str, arguments: dict[str, Any], call_id: str = "", entry: int | None = None,
                 *, collapsed: bool = True, id: str | None = None, classes: str | None = None) -> None:
        self.tool_name = name
        self.arguments = arguments
        self.call_id = call_id
        self.entry = entry
        self.running = True
        self.output = ""
        self._shown = ""  # what the output widget shows (set when drawn)
        self._args: Static | None = None
        self._output: Static | None = None
        self._drawing = False
        args = json.dumps(arguments, ensure_ascii=False)
        self._args_text = f"arguments: {args}"
        short = args if len(args) <= 60 else args[:57] + "…"
        self._title_base = f"⚙ {name} {short}"
        super().__init__(title=f"{self._title_base} …running", collapsed=collapsed, id=id, classes=classes)

    def compose(self) -> ComposeResult:
        yield self._title
        if not self.collapsed:
            yield self._body()

    def _body(self) -> Collapsible.Contents:
        """The arguments and the output, made once."""
        self._args = Static(self._args_text, markup=False, classes="tool-args")
        self._output = Static(self._drawn(self._shown), markup=False, classes="tool-output")
        return self.Contents(self._args, self._output)

    def _drawn(self, text: str) -> Any:
        """What the output widget draws of ``text``: an edit's diff highlighted, else the text."""
        if self.tool_name != "edit_file" or self.running or "\n--- " not in text:
            return text
        from rich.syntax import Syntax

        from wisp.core.text import shown_diff
        from wisp.themes import syntax_theme

        return Syntax(shown_diff(text), "diff", theme=syntax_theme(self.app.current_theme.dark), word_wrap=True)

    def _watch_collapsed(self, collapsed: bool) -> None:
        super()._watch_collapsed(collapsed)
        if not collapsed and self._output is None and self.is_mounted:
            self.mount(self._body())

    def stream(self, piece: str) -> None:
        """Show a piece of output while the tool runs (the last
        :data:`TOOL_PREVIEW_CHARS` characters stay in view)."""
        self.output += piece
        self._shown = self.output[-TOOL_PREVIEW_CHARS:]
        if self._output is not None and not self._drawing:
            self._drawing = True
            self.set_timer(OUTPUT_FRAME_S, self._draw_output)

    def _draw_output(self) -> None:
        self._drawing = False
        if self._output is not None:
            self._output.update(self._shown)

    def finish(self, content: str, ok: bool, entry: int | None = None) -> None:
        """Show the result (``content``, stored as entry ``entry``) and mark the
        title with its outcome (``ok``), its entry and its line count."""
        self.running = False
        self.output = content
        self._shown = content if len(content) <= TOOL_PREVIEW_CHARS else (
            content[:TOOL_PREVIEW_CHARS] + f"\n… {len(content) - TOOL_PREVIEW_CHARS:,} more characters "
            f"(/show entry {entry})")
        if self._output is not None:
            self._output.update(self._drawn(self._shown))
        lines = 0
        if content:
            lines = content.count("\n") + 1
            if "[end of" in content or "[more:" in content:  # a tool's closing lines are not output
                lines = len([line for line in content.split("\n") if not _is_marker(line)])
        mark = "✓" if ok else "✗"
        where = f"entry {entry} · " if entry is not None else ""
        self.title = f"{mark} {where}{lines} line{'' if lines == 1 else 's'} · {self._title_base}"
        self.set_class(not ok, "-error")
