"""An MCP tool result as wisp's tool result text (issue 15, "Results").

Text content is kept as it is. Every other content type is named with its
size, never passed on: ``[image/png image, 12,345 bytes]``. A result the
server marked ``isError`` is a failed tool result. Structured content is
shown as JSON only when the server gave no content blocks (a server that
gives both repeats the same thing twice, MCP's own advice). The text is cut
at a byte budget, saying so.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["RenderedResult", "render_result", "cut_text"]


@dataclass(frozen=True)
class RenderedResult:
    """``text`` for the model, ``ok`` (false when the server said
    ``isError``), and ``kinds``: how many blocks of each content type there
    were (``{"text": 2, "image": 1}``), stored with the entry."""

    text: str
    ok: bool
    kinds: dict[str, int]


def _decoded_size(data: Any) -> int | None:
    if not isinstance(data, str):
        return None
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def _size(n: int | None) -> str:
    return "size unknown" if n is None else f"{n:,} byte{'s' if n != 1 else ''}"


def _get(block: Any, name: str, default: Any = None) -> Any:
    if isinstance(block, dict):
        return block.get(name, default)
    return getattr(block, name, default)


def _block_text(block: Any) -> tuple[str, str]:
    """``(kind, text)`` for one content block, from the SDK's models or plain dicts."""
    kind = str(_get(block, "type", "unknown"))
    if kind == "text":
        return kind, str(_get(block, "text", ""))
    if kind in ("image", "audio"):
        mime = _get(block, "mime_type") or _get(block, "mimeType") or "unknown type"
        return kind, f"[{mime} {kind}, {_size(_decoded_size(_get(block, 'data')))}; not shown]"
    if kind == "resource_link":
        uri = _get(block, "uri", "")
        name = _get(block, "name")
        mime = _get(block, "mime_type") or _get(block, "mimeType")
        size = _get(block, "size")
        bits = [str(b) for b in (name, mime, _size(size) if isinstance(size, int) else None) if b]
        return kind, f"[resource link {uri}{': ' + ', '.join(bits) if bits else ''}]"
    if kind == "resource":
        res = _get(block, "resource") or {}
        uri = _get(res, "uri", "")
        mime = _get(res, "mime_type") or _get(res, "mimeType")
        text = _get(res, "text")
        if isinstance(text, str):
            return kind, f"[resource {uri}{' (' + mime + ')' if mime else ''}]\n{text}"
        return kind, f"[resource {uri}: {mime or 'unknown type'}, {_size(_decoded_size(_get(res, 'blob')))}; not shown]"
    return kind, f"[{kind} content; not shown]"


def cut_text(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8 (on a character
    boundary), with a last line saying how much was left out."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= max_bytes:
        return text
    kept = data[:max_bytes].decode("utf-8", errors="ignore")
    return f"{kept}\n[cut: the result was {len(data):,} bytes; wisp keeps {max_bytes:,} (config tools.mcp.max_output_bytes)]"


def render_result(result: Any, max_bytes: int) -> RenderedResult:
    """Render an MCP ``CallToolResult`` (the SDK's model, or its JSON as a
    dict) as text at most ``max_bytes`` bytes long (plus the cut line)."""
    content = _get(result, "content") or []
    structured = _get(result, "structured_content", _get(result, "structuredContent"))
    is_error = bool(_get(result, "is_error", _get(result, "isError", False)))
    kinds: dict[str, int] = {}
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        kind, text = _block_text(block)
        kinds[kind] = kinds.get(kind, 0) + 1
        parts.append(text)
    if not parts and structured is not None:
        kinds["structured"] = 1
        try:
            parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
        except (TypeError, ValueError):
            parts.append(str(structured))
    text = "\n".join(parts) if parts else "[the tool returned no content]"
    return RenderedResult(cut_text(text, max_bytes), not is_error, kinds)
