"""Stored entries back into chat messages.

A turn's entries are stored in order: the prompt, then per step the model's
text (a ``reply`` entry, which may precede tool calls), its ``tool_call``
entries and their ``tool_result`` entries. This module rebuilds the neutral
message list of :mod:`wisp.core.model.base` from them. Thinking and notices
are never sent back (issue "wisp runs end to end", "Reasoning models").
"""

from __future__ import annotations

from typing import Any, Iterable


def entries_to_messages(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """Messages for stored entries (objects with ``kind``, ``content``,
    ``tool_name``, ``tool_call_id``, ``arguments``), in order.

    A ``reply`` followed by ``tool_call`` entries becomes one assistant
    message with ``tool_calls``; each ``tool_result`` a ``tool`` message.
    """
    messages: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            messages.append(pending)
            pending = None

    for e in entries:
        if e.kind == "prompt":
            flush()
            messages.append({"role": "user", "content": e.content})
        elif e.kind == "reply":
            flush()
            pending = {"role": "assistant", "content": e.content}
        elif e.kind == "tool_call":
            if pending is None:
                pending = {"role": "assistant", "content": ""}
            pending.setdefault("tool_calls", []).append(
                {"id": e.tool_call_id or f"call_{e.number}", "name": e.tool_name,
                 "arguments": e.arguments or {}}
            )
        elif e.kind == "tool_result":
            flush()
            messages.append({"role": "tool", "content": e.content,
                             "tool_call_id": e.tool_call_id or "", "name": e.tool_name or ""})
        # thinking and notice entries are shown to the person, never sent
    flush()
    return _drop_dangling_calls(messages)


def _drop_dangling_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls without a result (a stopped turn) are removed, since both
    protocols reject an assistant tool call with no answer."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [c for c in m["tool_calls"] if c["id"] in answered]
            m = dict(m)
            if calls:
                m["tool_calls"] = calls
            else:
                m.pop("tool_calls")
                if not m.get("content"):
                    continue
        out.append(m)
    return out
