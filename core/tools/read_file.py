"""The ``read_file`` tool: a text file's lines, numbered, one page at a time.

Confined to the conversation's working directory unless config
``tools.read_file.allow_outside_workdir`` is true (issue "wisp runs end to
end"). Output lines are ``N<TAB>text`` as in the reference document's recall
(``wisp-memory-tool.txt``), ending ``[end of file]`` or naming the next page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import ToolContext, ToolResult

DEFAULT_LIMIT = 400  # lines per page


class ReadFile:
    """Read a text file from the working directory."""

    name = "read_file"
    read_only = True
    description = (
        "Read a text file from the working directory, with numbered lines. "
        "Use offset (first line, from 1) and limit (lines) to page through long files."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path, relative to the working directory"},
            "offset": {"type": "integer", "description": "first line to read, from 1"},
            "limit": {"type": "integer", "description": "how many lines to read"},
        },
        "required": ["path"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Read ``path`` from line ``offset`` (1-based, default 1) for ``limit``
        lines (default 400), within ``tools.read_file.max_bytes`` bytes."""
        raw = str(arguments.get("path", "")).strip()
        if not raw:
            return ToolResult("error: read_file needs a path, such as {\"path\": \"README.md\"}", ok=False)
        offset = max(1, int(arguments.get("offset") or 1))
        limit = max(1, int(arguments.get("limit") or DEFAULT_LIMIT))
        workdir = ctx.workdir.resolve()
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = workdir / path
        path = path.resolve()
        allow_outside = bool(ctx.setting("tools.read_file.allow_outside_workdir", False))
        if not allow_outside and not path.is_relative_to(workdir):
            return ToolResult(
                f"error: {raw} is outside the working directory {workdir}; "
                "read files inside it (the person can allow more with "
                "/config set tools.read_file.allow_outside_workdir on)",
                ok=False,
            )
        if not path.exists():
            return ToolResult(f"error: no file {raw} in {workdir}", ok=False)
        if path.is_dir():
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())[:200]
            return ToolResult(f"error: {raw} is a directory; it holds: " + ", ".join(names), ok=False)
        max_bytes = int(ctx.setting("tools.read_file.max_bytes", 262144))
        try:
            with path.open("rb") as fh:
                head = fh.read(8192)
                if b"\0" in head:
                    return ToolResult(f"error: {raw} is a binary file, not text", ok=False)
                fh.seek(0)
                lines: list[str] = []
                used = 0
                total = 0
                more = False
                for total, line in enumerate(fh, start=1):
                    if total < offset:
                        continue
                    if len(lines) >= limit or used + len(line) > max_bytes:
                        more = True
                        continue  # keep counting lines to report the total
                    lines.append(line.decode("utf-8", errors="replace").rstrip("\r\n"))
                    used += len(line)
        except OSError as exc:
            return ToolResult(f"error: cannot read {raw}: {exc.strerror}", ok=False)
        if offset > total and total > 0:
            return ToolResult(f"error: {raw} has {total} lines; offset {offset} is past the end", ok=False)
        body = "\n".join(f"{offset + i}\t{text}" for i, text in enumerate(lines))
        last = offset + len(lines) - 1
        if more:
            tail = f"[more: lines {last + 1}-{total} of {total}; call read_file with offset={last + 1}]"
        else:
            tail = "[end of file]"
        content = f"{body}\n{tail}" if body else tail
        return ToolResult(content, meta={"path": str(path), "lines": total, "bytes": path.stat().st_size})
