"""Memories as text, Markdown and JSON: one place for the CLI, the TUI and the model.

Dates shown are in the memory time zone; JSON carries the UTC times as
stored plus their local form (issue "Episodic memory across conversations",
"Settings": stored times UTC, displayed dates in the memory time zone;
``show`` gives both the event and the recording time).
"""

from __future__ import annotations

from typing import Any

from .dates import format_local, local, zone_name
from .query import Memory, Page, SourceExchange, preview

__all__ = ["memory_dict", "exchange_dict", "page_dict", "origin_text", "list_text", "show_text",
           "list_markdown", "show_markdown", "filter_words"]


#: What ``show`` says of an unstructured memory.
UNSTRUCTURED_NOTE = "unstructured: the model's answer as it came, not in the format asked for"


def _local_iso(text: str | None, tz: Any) -> str | None:
    return local(text, tz).isoformat() if text else None


def memory_dict(m: Memory, tz: Any, *, full: bool = False) -> dict[str, Any]:
    """A memory as JSON: ``id``, ``number``, ``preview`` (or ``summary`` with
    ``full``), times (UTC ``event_at``/``event_end``/``recorded_at``, with
    ``event_local``/``recorded_local`` and ``event_date`` in the memory
    time zone), origin and ``sources`` (a count)."""
    out: dict[str, Any] = {
        "id": m.ref, "number": m.number,
        "event_at": m.event_at, "event_end": m.event_end, "recorded_at": m.recorded_at,
        "event_local": _local_iso(m.event_at, tz), "event_date": local(m.event_at, tz).date().isoformat(),
        "recorded_local": _local_iso(m.recorded_at, tz),
        "workspace": m.workspace, "transport": m.transport, "channel": m.channel, "thread": m.thread,
        "conversation": m.conversation_id, "model": m.model, "sources": m.sources,
        "unstructured": m.unstructured,
    }
    if full:
        out["summary"] = m.summary
    else:
        out["preview"] = m.preview()
    return out


def exchange_dict(x: SourceExchange, tz: Any) -> dict[str, Any]:
    """A source exchange as JSON (texts whole, as stored)."""
    return {
        "id": x.id, "requested_at": x.requested_at, "finished_at": x.finished_at,
        "requested_local": _local_iso(x.requested_at, tz), "finished_local": _local_iso(x.finished_at, tz),
        "workspace": x.workspace, "transport": x.transport, "channel": x.channel, "thread": x.thread,
        "sender": x.sender, "conversation": x.conversation_id, "turn": x.turn_number,
        "model": x.model, "endpoint": x.endpoint, "outcome": x.outcome, "error": x.error,
        "request": x.request, "request_bytes": x.request_bytes, "request_truncated": x.request_truncated,
        "reply": x.reply, "reply_bytes": x.reply_bytes, "reply_truncated": x.reply_truncated,
    }


def page_dict(page: Page, tz: Any) -> dict[str, Any]:
    """A page as JSON: ``total`` matches, ``limit``, ``offset``, ``count``,
    ``timezone`` and ``memories``."""
    f = page.filter
    return {
        "total": page.total, "count": len(page.memories), "limit": f.limit, "offset": f.offset,
        "timezone": zone_name(tz),
        "filters": {"workspace": f.workspace, "transport": f.transport, "channel": f.channel,
                    "since": f.since.isoformat() if f.since else None,
                    "until": f.until.isoformat() if f.until else None, "search": f.text},
        "memories": [memory_dict(m, tz) for m in page.memories],
    }


def origin_text(m: Memory | SourceExchange) -> str:
    """``workspace website · transport ask · channel 3 · thread — · conversation 3``."""
    return (f"workspace {m.workspace} · transport {m.transport} · channel {m.channel} · "
            f"thread {m.thread or '—'} · conversation {m.conversation_id if m.conversation_id is not None else '—'}")


def filter_words(page: Page, tz: Any) -> str:
    """The filters of a page in words, for headers (``""`` when none)."""
    f = page.filter
    parts = []
    if f.text is not None:
        parts.append(f'matching "{f.text}"')
    parts.append(f"workspace {f.workspace}" if f.workspace is not None else "all workspaces")
    if f.transport is not None:
        parts.append(f"transport {f.transport}")
    if f.channel is not None:
        parts.append(f"channel {f.channel}")
    if f.since is not None:
        parts.append(f"since {format_local(f.since.isoformat(), tz)}")
    if f.until is not None:
        parts.append(f"before {format_local(f.until.isoformat(), tz)}")
    return ", ".join(parts)


def _range(m: Memory, tz: Any, seconds: bool = False) -> str:
    start = format_local(m.event_at, tz, seconds=seconds, weekday=True)
    if m.event_end and format_local(m.event_end, tz, seconds=seconds, weekday=True) != start:
        end_local = local(m.event_end, tz)
        if end_local.date() == local(m.event_at, tz).date():
            return f"{start} → {format_local(m.event_end, tz, seconds=seconds).split(' ', 1)[1]}"
        return f"{start} → {format_local(m.event_end, tz, seconds=seconds, weekday=True)}"
    return start


def list_text(page: Page, tz: Any) -> str:
    """A page for the terminal: a header with the count and filters, one line
    a memory, and how to see the next page."""
    f = page.filter
    if not page.memories:
        if page.total and f.offset:
            return f"No memories past {f.offset} ({page.total} match {filter_words(page, tz)})."
        return (f"No memories ({filter_words(page, tz)}). `wisp memory status` says what awaits "
                "refinement; `wisp memory refine` refines it now.")
    first = f.offset + 1
    last = f.offset + len(page.memories)
    lines = [f"Memories {first}–{last} of {page.total} ({filter_words(page, tz)}; "
             f"{zone_name(tz)}), newest first:"]
    for m in page.memories:
        when = format_local(m.event_at, tz, weekday=True)
        mark = "(unstructured) " if m.unstructured else ""
        lines.append(f"{m.ref}  {when}  {m.workspace} · {m.transport} · channel {m.channel}  {mark}{m.preview(110)}")
    if last < page.total:
        lines.append(f"… {page.total - last} more: add --offset {last}.")
    lines.append("`wisp memory show MEM-… --sources` shows one in full.")
    return "\n".join(lines)


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line if line else line for line in (text or "").splitlines()) or prefix + "(empty)"


def _size_note(x: SourceExchange, which: str) -> str:
    if getattr(x, f"{which}_truncated"):
        return f" (cut at 64 KiB of {getattr(x, f'{which}_bytes')} bytes)"
    return ""


def show_text(m: Memory, tz: Any, sources: list[SourceExchange] | None = None) -> str:
    """One memory for the terminal: event and recording times, origin,
    sources, the full summary, and with ``sources`` the exchanges whole."""
    lines = [
        m.ref,
        f"Event:     {_range(m, tz, seconds=True)} ({zone_name(tz)}; the earliest source request)",
        f"Recorded:  {format_local(m.recorded_at, tz, seconds=True, weekday=True)}",
        f"Origin:    {origin_text(m)}",
        f"Sources:   {m.sources} exchange{'s' if m.sources != 1 else ''}"
        + ("" if sources is not None else "; add --sources to see them"),
    ]
    if m.model:
        lines.append(f"Written by: {m.model}")
    if m.unstructured:
        lines.append(f"Form:      {UNSTRUCTURED_NOTE}")
    lines += ["", m.summary]
    if sources is not None:
        lines += ["", f"Source exchanges, oldest first ({len(sources)}):"]
        for x in sources:
            lines += [
                "",
                f"── exchange {x.id} " + "─" * 40,
                f"Requested: {format_local(x.requested_at, tz, seconds=True, weekday=True)}"
                f"    Finished: {format_local(x.finished_at, tz, seconds=True)}",
                f"Origin:    {origin_text(x)} · sender {x.sender or '—'}",
                f"Outcome:   {x.outcome or 'pending'}" + (f" ({x.error})" if x.error else "")
                + f" · model {x.model or '—'}" + (f" ({x.endpoint})" if x.endpoint else ""),
                f"Request{_size_note(x, 'request')}:",
                _indent(x.request),
                f"Reply{_size_note(x, 'reply')}:",
                _indent(x.reply) if x.reply else "  (no reply)",
            ]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    out = str(text or "")
    for ch in "\\`*_[]<>|#":
        out = out.replace(ch, "\\" + ch)
    return out


def list_markdown(page: Page, tz: Any) -> str:
    """A page as Markdown (the TUI's ``/memory``)."""
    if not page.memories:
        return (f"No memories yet ({filter_words(page, tz)}). Exchanges are refined into memories every "
                "15 minutes while wisp runs, or now with `wisp memory refine`.")
    rows = [f"**{page.total}** memor{'y' if page.total == 1 else 'ies'} ({_md_escape(filter_words(page, tz))}), "
            "newest first:", "", "| memory | event | origin | summary |", "|---|---|---|---|"]
    for m in page.memories:
        rows.append(f"| `{m.ref}` | {format_local(m.event_at, tz, weekday=True)} | "
                    f"{_md_escape(m.workspace)} · {_md_escape(m.transport)} · {_md_escape(m.channel)} | "
                    f"{_md_escape(preview(m.summary, 90))} |")
    rows += ["", "`/memory show MEM-…` shows one with its sources."]
    return "\n".join(rows)


def show_markdown(m: Memory, tz: Any, sources: list[SourceExchange] | None = None) -> str:
    """One memory as Markdown (the TUI's detail view)."""
    out = [
        f"## {m.ref}",
        "",
        f"- **Event:** {_range(m, tz, seconds=True)} ({_md_escape(zone_name(tz))})",
        f"- **Recorded:** {format_local(m.recorded_at, tz, seconds=True, weekday=True)}",
        f"- **Origin:** {_md_escape(origin_text(m))}",
        f"- **Sources:** {m.sources}",
        *([f"- **Form:** {UNSTRUCTURED_NOTE}"] if m.unstructured else []),
        "",
        _md_escape(m.summary),
    ]
    for x in sources or []:
        out += [
            "", f"### Exchange {x.id}", "",
            f"{format_local(x.requested_at, tz, seconds=True, weekday=True)} → "
            f"{format_local(x.finished_at, tz, seconds=True)} · {_md_escape(x.outcome or 'pending')} · "
            f"sender {_md_escape(x.sender or '—')} · model {_md_escape(x.model or '—')}",
            "", f"**Request**{_size_note(x, 'request')}", "", "```text", x.request.replace("```", "ˋˋˋ"), "```",
            "", f"**Reply**{_size_note(x, 'reply')}", "", "```text", (x.reply or "(no reply)").replace("```", "ˋˋˋ"),
            "```",
        ]
    return "\n".join(out)
