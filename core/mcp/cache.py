"""The tool lists of MCP servers, kept between runs (issue 15).

A conversation's tools are settled once, when its session opens, and their
schemas go with every request; a server starts only when a call needs it.
So the tools a server had when it was last listed (by ``wisp mcp list`` or
an earlier run) are kept in ``<WISP_HOME>/mcp-tools.json`` (mode 0600),
each under the fingerprint of how the server starts
(:func:`wisp.core.mcp_config.fingerprint`): a changed command, URL or
environment makes the entry stale, and the server is started to list again.

Shape: ``{"version": 1, "servers": {"git": {"fingerprint": "…", "listed_at":
ISO time, "tools": [{"name", "description", "inputSchema", "readOnlyHint",
"title"}]}}}``. A file that cannot be read is treated as empty and
rewritten: it is only a cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import atomic_write_private
from .connection import RemoteTool
from ..clock import utc_now

__all__ = ["ToolCache"]


class ToolCache:
    """Tool lists by server name, in the JSON file ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"version": 1, "servers": {}}
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            return {"version": 1, "servers": {}}
        return data

    def get(self, server: str, fingerprint: str) -> list[RemoteTool] | None:
        """The tools ``server`` listed when it last started as ``fingerprint``
        says, or ``None`` when there is no such entry."""
        entry = self._read()["servers"].get(server)
        if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
            return None
        tools = entry.get("tools")
        if not isinstance(tools, list):
            return None
        out = [t for t in (RemoteTool.from_dict(d) for d in tools) if t is not None]
        return out

    def listed_at(self, server: str) -> str | None:
        """When ``server``'s tools were last listed (ISO 8601, UTC), or ``None``."""
        entry = self._read()["servers"].get(server)
        return entry.get("listed_at") if isinstance(entry, dict) else None

    def put(self, server: str, fingerprint: str, tools: list[RemoteTool]) -> None:
        """Keep ``tools`` as ``server``'s list. Never raises: a cache that
        cannot be written only means the server is listed again next time."""
        data = self._read()
        new = {"fingerprint": fingerprint,
               "listed_at": utc_now("seconds"),
               "tools": [t.to_dict() for t in tools]}
        old = data["servers"].get(server)
        if isinstance(old, dict) and old.get("tools") == new["tools"] and old.get("fingerprint") == fingerprint:
            return
        data["servers"][server] = new
        try:
            atomic_write_private(self.path, (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode())
        except (OSError, ValueError):
            pass
