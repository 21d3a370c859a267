"""Episodic memory for the model: the ``memories`` and ``recall MEM-…`` verbs.

The memory tool (issue "The memory tool") calls these; they return plain
text a small model can read, and never raise: a bad request gets one line
starting ``error:`` that shows the form to copy, and nothing found gets one
line starting ``memory:`` that says what there is. Memory is not loaded into
a conversation on its own; the model asks (issue "Episodic memory across
conversations", "For the model").

``memories QUERY`` takes the filters of ``wisp memory list``/``search``
written as words, anywhere in the query; the other words are searched for
(FTS5 over summaries, every word must match); with none, it lists::

    memories launch workspace website since 7d limit 10
    memories workspace personal this week
    memories last 10
    memories all workspaces transport ask channel 12 until 2025-03-01
    memories deploy yesterday

Keywords: ``workspace W`` (``all``, or ``all workspaces``, for every one;
default ``$WISP_WORKSPACE``), ``transport T``, ``channel C``, ``since
WHEN``, ``until WHEN`` (or ``before``), ``limit N`` (or ``last N``,
``top N``), ``offset N``; ``key:value`` and ``--key value`` work too. The
phrases ``today``, ``yesterday``, ``this week``, ``last week``, ``this
month`` and ``last month`` alone name that whole period. WHEN is as for
``--since`` (:mod:`.dates`).

``recall MEM-000001`` gives the memory whole with its source exchanges
(each request and reply up to :data:`RECALL_EXCERPT_BYTES`, all within
:data:`RECALL_BUDGET_BYTES`) and ends ``[end of what recall found]``.
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta
from typing import Any

from .dates import DateError, format_local, memory_timezone, start_of_day, zone_name
from .ids import MemoryIdError, format_memory_id, parse_memory_id
from .query import (DEFAULT_LIMIT, MAX_LIMIT, MemoryFilter, QueryError, find_memories, get_memory,
                    list_workspaces, make_filter, memory_count, memory_sources, preview)
from .refine import excerpt

__all__ = ["memories", "recall", "run_episodic_verb", "parse_memories_request", "RECALL_EXCERPT_BYTES",
           "RECALL_BUDGET_BYTES"]

#: Cap of one request or reply in a recall, bytes of UTF-8.
RECALL_EXCERPT_BYTES = 4 * 1024
#: Cap of all source text in one recall, bytes of UTF-8.
RECALL_BUDGET_BYTES = 24 * 1024
#: Characters of a summary in a ``memories`` line.
LINE_PREVIEW = 300


_EXAMPLE = 'memories launch workspace website since 7d limit 10'
_KEYS = {
    "workspace": "workspace", "ws": "workspace", "transport": "transport", "channel": "channel",
    "since": "since", "from": "since", "after": "since", "until": "until", "before": "until",
    "limit": "limit", "top": "limit", "offset": "offset", "skip": "offset",
}
_PERIODS = ("today", "yesterday", "this week", "last week", "this month", "last month")


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _period(name: str, tz: Any, now: datetime) -> tuple[datetime, datetime | None]:
    today = now.astimezone(tz).date()
    if name == "today":
        return start_of_day(today, tz), None
    if name == "yesterday":
        return start_of_day(today - timedelta(days=1), tz), start_of_day(today, tz)
    monday = today - timedelta(days=today.weekday())
    if name == "this week":
        return start_of_day(monday, tz), None
    if name == "last week":
        return start_of_day(monday - timedelta(days=7), tz), start_of_day(monday, tz)
    first = today.replace(day=1)
    if name == "this month":
        return start_of_day(first, tz), None
    prev = (first - timedelta(days=1)).replace(day=1)
    return start_of_day(prev, tz), start_of_day(first, tz)


def parse_memories_request(request: str, tz: Any, *, env: Any = None,
                           now: datetime | None = None) -> MemoryFilter:
    """The :class:`~wisp.core.episodes.query.MemoryFilter` of a ``memories``
    query (see the module docstring). Raises ``ValueError`` subclasses
    (:class:`QueryError`, :class:`DateError`) whose text says what to write."""
    from .dates import UTC

    now = (now or datetime.now(UTC)).astimezone(UTC)
    words = _words(str(request or "").strip())
    if words and words[0].lower() in ("memories", "memory"):
        words = words[1:]
    opts: dict[str, Any] = {}
    period: tuple[datetime, datetime | None] | None = None
    text: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        low = w.lower().lstrip("-")
        pair = (low + " " + words[i + 1].lower()) if i + 1 < len(words) else ""
        if pair in ("all workspaces", "all-workspaces") or low in ("all-workspaces", "all_workspaces"):
            opts["all_workspaces"] = True
            i += 2 if pair in ("all workspaces", "all-workspaces") else 1
            continue
        if pair in _PERIODS:
            period = _period(pair, tz, now)
            i += 2
            continue
        key, value = low, None
        for sep in (":", "="):
            if sep in low and low.split(sep, 1)[0] in _KEYS:
                key, value = low.split(sep, 1)[0], w.split(sep, 1)[1]
                break
        if key == "last" and i + 1 < len(words) and words[i + 1].isdigit():
            key = "limit"
        if key in _KEYS or key == "limit":
            field = _KEYS.get(key, "limit")
            consumed = 1
            if value is None:
                if i + 1 >= len(words):
                    raise QueryError(f"{w} needs a value, such as: {_EXAMPLE}")
                value = words[i + 1]
                consumed = 2
                if field in ("since", "until") and i + 2 < len(words) and re.fullmatch(r"\d+", value) \
                        and re.fullmatch(r"(?i)(hours?|days?|weeks?)", words[i + 2]):
                    value = f"{value} {words[i + 2]}"
                    consumed = 3
            if field == "workspace" and value.lower() in ("all", "*", "any", "every"):
                opts["all_workspaces"] = True
            elif field in ("limit", "offset"):
                if not value.isdecimal():  # isdigit() would pass "²", which int() refuses
                    raise QueryError(f"{key} takes a number, such as {key} 10")
                # past 30 digits the exact value does not matter: the paging check refuses it
                opts[field] = int(value) if len(value) <= 30 else 10 ** 30
            else:
                opts[field] = value
            i += consumed
            continue
        if low in ("today", "yesterday"):
            period = _period(low, tz, now)
            i += 1
            continue
        text.append(w)
        i += 1
    limit = opts.pop("limit", DEFAULT_LIMIT)
    if isinstance(limit, int) and limit > MAX_LIMIT:
        limit = MAX_LIMIT
    f = make_filter(tz, workspace=opts.get("workspace"), all_workspaces=bool(opts.get("all_workspaces")),
                    transport=opts.get("transport"), channel=opts.get("channel"), since=opts.get("since"),
                    until=opts.get("until"), text=" ".join(text) if text else None, limit=limit,
                    offset=opts.get("offset", 0), env=env, now=now)
    if period is not None:
        if f.since is None:
            f.since = period[0]
        if f.until is None and period[1] is not None:
            f.until = period[1]
    return f


def _where_words(f: MemoryFilter, tz: Any) -> str:
    parts = [f"workspace {f.workspace}" if f.workspace is not None else "all workspaces"]
    if f.transport:
        parts.append(f"transport {f.transport}")
    if f.channel:
        parts.append(f"channel {f.channel}")
    if f.since:
        parts.append(f"since {format_local(f.since.isoformat(), tz)}")
    if f.until:
        parts.append(f"before {format_local(f.until.isoformat(), tz)}")
    return ", ".join(parts)


async def memories(store: Any, config: Any, request: str, *, env: Any = None,
                   now: datetime | None = None) -> str:
    """The ``memories QUERY`` verb (see the module docstring): a header
    line, one line a memory (reference, local event time, origin, a preview),
    a ``[more: …]`` line when there are more, and how to recall one."""
    try:
        tz = memory_timezone(config)
        f = parse_memories_request(request, tz, env=env, now=now)
        page = await find_memories(store.db, f)
    except (QueryError, DateError) as exc:
        return f"error: {exc}. Write it like: memory \"{_EXAMPLE}\""
    what = f' matching "{f.text}"' if f.text else ""
    where = _where_words(f, tz)
    if not page.memories:
        if page.total and f.offset:
            return f"memory: only {page.total} memories{what} in {where}; offset {f.offset} is past them."
        total = await memory_count(store.db)
        if total == 0:
            return ("memory: there are no memories yet; exchanges become memories when refinement runs "
                    "(every 15 minutes while wisp runs).")
        spaces = await list_workspaces(store.db)
        return (f"memory: no memories{what} in {where}. There are {total} in all, in workspaces: "
                f"{', '.join(spaces)}. Try fewer words, another workspace, or \"all workspaces\".")
    first, last = f.offset + 1, f.offset + len(page.memories)
    lines = [f"memories {first}-{last} of {page.total}{what} in {where}, newest first "
             f"(times in {zone_name(tz)}):"]
    for m in page.memories:
        lines.append(f"{m.ref} {format_local(m.event_at, tz, weekday=True)} · {m.workspace} · {m.transport} · "
                     f"channel {m.channel} · {m.sources} source{'s' if m.sources != 1 else ''}: "
                     f"{preview(m.summary, LINE_PREVIEW)}")
    if last < page.total:
        words = _words(str(request or ""))
        if words and words[0].lower() == "memories":
            words = words[1:]
        base = re.sub(r"(?i)(?:^|\s)-*(?:offset|skip)(?:[\s:=]+)\d+", " ", " ".join(words))
        query = " ".join(["memories", *base.split(), "offset", str(last)])
        lines.append(f'[more: memory "{query}"]')
    lines.append(f'memory "recall {page.memories[0].ref}" shows one in full with its source exchanges.')
    return "\n".join(lines)


async def recall(store: Any, config: Any, request: str) -> str:
    """The ``recall MEM-000001`` verb: the memory's event and recording times,
    origin and whole summary, then its source exchanges oldest first (see
    the module docstring for the caps), ending ``[end of what recall
    found]``."""
    words = _words(str(request or "").strip())
    if words and words[0].lower() == "recall":
        words = words[1:]
    if len(words) != 1:
        return "error: write recall MEM-000001, with one reference that memories listed"
    try:
        number = parse_memory_id(words[0])
        tz = memory_timezone(config)
    except (MemoryIdError, DateError) as exc:
        return f"error: {exc}; write recall MEM-000001"
    m = await get_memory(store.db, number)
    if m is None:
        total = await memory_count(store.db)
        return (f"memory: no memory {format_memory_id(number)} (never made, or forgotten); "
                + (f"there are {total} memories; memories lists them." if total else "there are no memories yet."))
    sources = await memory_sources(store.db, number)
    lines = [
        f"{m.ref}: memory of {format_local(m.event_at, tz, weekday=True)} ({zone_name(tz)}), "
        f"recorded {format_local(m.recorded_at, tz, weekday=True)}",
        f"origin: workspace {m.workspace}, transport {m.transport}, channel {m.channel}, "
        f"thread {m.thread or 'none'}, conversation {m.conversation_id}",
        "summary:", m.summary,
        f"sources: {len(sources)} exchange{'s' if len(sources) != 1 else ''}, oldest first:",
    ]
    used = 0
    for k, x in enumerate(sources):
        req = excerpt(x.request, x.request_bytes, RECALL_EXCERPT_BYTES)
        rep = excerpt(x.reply, x.reply_bytes, RECALL_EXCERPT_BYTES) or "(no reply)"
        size = len(req.encode()) + len(rep.encode())
        if used and used + size > RECALL_BUDGET_BYTES:
            lines.append(f"[{len(sources) - k} more exchanges not shown; `wisp memory show {m.ref} --sources` "
                         "shows them all]")
            break
        used += size
        lines += [
            f"exchange {x.id}, {format_local(x.requested_at, tz, seconds=True, weekday=True)} → "
            f"{format_local(x.finished_at, tz, seconds=True)}, {x.outcome or 'pending'}"
            + (f" ({x.error})" if x.error else "") + f", sender {x.sender or 'unknown'}, model {x.model or 'unknown'}",
            "request:", req, "reply:", rep,
        ]
    lines.append("[end of what recall found]")
    return "\n".join(lines)


async def run_episodic_verb(store: Any, config: Any, request: str, **kw: Any) -> str | None:
    """Dispatch a memory-tool request to :func:`memories` or :func:`recall`
    when it is one of theirs (``memories …``, or ``recall MEM-…``); ``None``
    when it is not, so the tool handles it. Never raises."""
    words = _words(str(request or "").strip())
    if not words:
        return None
    verb = words[0].lower()
    try:
        if verb == "memories":
            return await memories(store, config, request, **kw)
        if verb == "recall" and len(words) >= 2 and re.match(r"(?i)^\[?mem-?\d", words[1]):
            return await recall(store, config, request)
        if re.match(r"(?i)^mem-\d+$", words[0]) and len(words) == 1:
            return await recall(store, config, words[0])
    except Exception as exc:  # never let a store problem reach the model as a crash
        return f"error: episodic memory could not be read: {exc}"
    return None
