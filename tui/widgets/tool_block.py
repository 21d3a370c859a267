"""One tool call and its result, collapsed; its title says the outcome."""

from __future__ import annotations

import json
from typing import Any

from textual.widgets import Collapsible, Static

from ..guard import Guarded

__all__ = ["ToolBlock", "TOOL_PREVIEW_CHARS"]

#: The most characters of a tool's output shown in the chat (the rest: ``/show entry N``).
TOOL_PREVIEW_CHARS = 20000


def _is_marker(line: str) -> bool:
    """A tool's own closing line (``[end of file]``, ``[more: …]``), not output."""
    return line.startswith("[end of") or line.startswith("[more:")


class ToolBlock(Guarded, Collapsible):
    """A tool call (``name`` and its ``arguments``), streaming its output
    while it runs (:meth:`stream`) and showing its result when it ends
    (:meth:`finish`): the title then starts with ✓ or ✗, the result's entry
    and its line count, so a narrow pane cuts the arguments, not the entry.
    ``running`` is true until :meth:`finish`.
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
                 *, id: str | None = None, classes: str | None = None) -> None:
        self.tool_name = name
        self.arguments = arguments
        self.call_id = call_id
        self.entry = entry
        self.running = True
        args = json.dumps(arguments, ensure_ascii=False)
        self._args = Static(f"arguments: {args}", markup=False, classes="tool-args")
        self._output = Static("", markup=False, classes="tool-output")
        self.output = ""
        short = args if len(args) <= 60 else args[:57] + "…"
        self._title_base = f"⚙ {name} {short}"
        super().__init__(self._args, self._output, title=f"{self._title_base} …running", collapsed=True,
                         id=id, classes=classes)

    def stream(self, piece: str) -> None:
        """Show a piece of output while the tool runs (the last
        :data:`TOOL_PREVIEW_CHARS` characters stay in view)."""
        self.output += piece
        self._output.update(self.output[-TOOL_PREVIEW_CHARS:])

    def finish(self, content: str, ok: bool, entry: int | None = None) -> None:
        """Show the result (``content``, stored as entry ``entry``) and mark the
        title with its outcome (``ok``), its entry and its line count."""
        self.running = False
        self.output = content
        shown = content if len(content) <= TOOL_PREVIEW_CHARS else (
            content[:TOOL_PREVIEW_CHARS] + f"\n… {len(content) - TOOL_PREVIEW_CHARS:,} more characters "
            f"(/show entry {entry})")
        self._output.update(shown)
        body = [line for line in content.split("\n") if not _is_marker(line)] if content else []
        lines = len(body)
        mark = "✓" if ok else "✗"
        where = f"entry {entry} · " if entry is not None else ""
        self.title = f"{mark} {where}{lines} line{'' if lines == 1 else 's'} · {self._title_base}"
        self.set_class(not ok, "-error")
