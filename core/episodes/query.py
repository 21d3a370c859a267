"""Reading memories: filters, FTS5 search, one memory and its source exchanges.

Rules (issue "Episodic memory across conversations", "Commands"; the
reference ``enso-episodic-memory.txt``, "Workspace, channel, and search
filters"):

- Filters: workspace (``None`` = every workspace), transport, channel (the
  exact id), ``since`` (included) and ``until`` (excluded) against a
  memory's event time, which is its earliest source request; search text
  matched with SQLite FTS5 against summaries only, never the source
  exchanges.
- Results come newest event first (ties: the higher number first), with the
  total number of matches; ``limit`` is 20 by default and at most 100,
  ``offset`` skips earlier results.

Every query is built here once as SQL and parameters and run either on an
aiosqlite connection (the CLI, the TUI, the model's verbs) or on a plain
``sqlite3`` connection (the web viewer, which reads in its own threads).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from ..text import fts_query as shared_fts_query
from .dates import utc_text
from .ids import format_memory_id

__all__ = [
    "DEFAULT_LIMIT", "MAX_LIMIT", "PREVIEW_CHARS", "QueryError", "MemoryFilter", "Memory",
    "SourceExchange", "Page", "Status", "memory_search_query", "find_memories", "get_memory", "memory_sources",
    "list_workspaces", "find_memories_sync", "get_memory_sync", "memory_sources_sync",
    "list_workspaces_sync", "check_paging", "preview",
]

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
#: Characters of a summary a list shows.
PREVIEW_CHARS = 160


class QueryError(ValueError):
    """A filter that cannot be used (a bad limit, a search with no words); the
    message says what to write instead."""


@dataclass
class MemoryFilter:
    """What to read. ``workspace``/``transport``/``channel``: exact values, or
    ``None`` for any; ``since``/``until``: aware instants (start included,
    end excluded) or ``None``; ``text``: FTS search words or ``None`` to
    list; ``limit`` (1–100) and ``offset`` (from 0)."""

    workspace: str | None = None
    transport: str | None = None
    channel: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0


@dataclass(frozen=True)
class Memory:
    """One memory. ``number`` is its MEM number (:attr:`ref` is the
    reference); times are UTC text: ``event_at`` (earliest source request),
    ``event_end`` (last source's end, or ``None``), ``recorded_at``; the
    origin (``workspace``, ``transport``, ``channel``, ``thread``,
    ``conversation_id``) comes from its sources; ``sources`` counts them;
    ``unstructured`` marks the model's answer kept as it came (it was not in
    the format asked for)."""

    number: int
    summary: str
    workspace: str
    transport: str
    channel: str
    thread: str
    conversation_id: int | None
    event_at: str
    event_end: str | None
    recorded_at: str
    model: str | None
    sources: int = 0
    unstructured: bool = False

    @property
    def ref(self) -> str:
        """``MEM-000012``."""
        return format_memory_id(self.number)

    def preview(self, n: int = PREVIEW_CHARS) -> str:
        """The summary on one line, cut to ``n`` characters with ``…``."""
        return preview(self.summary, n)


@dataclass(frozen=True)
class SourceExchange:
    """A captured exchange as read back (see :mod:`.capture` for the fields).
    ``request_bytes``/``reply_bytes`` are the original sizes; ``*_truncated``
    says the stored text was cut at 64 KiB (and marked)."""

    id: int
    workspace: str
    transport: str
    channel: str
    thread: str
    sender: str
    conversation_id: int | None
    turn_number: int | None
    model: str | None
    endpoint: str | None
    outcome: str | None
    error: str | None
    request: str
    request_bytes: int
    request_truncated: bool
    reply: str
    reply_bytes: int
    reply_truncated: bool
    requested_at: str
    finished_at: str | None
    captured_at: str


@dataclass
class Page:
    """One page of results: ``memories`` (newest event first), ``total``
    matches, and the ``filter`` used."""

    memories: list[Memory]
    total: int
    filter: MemoryFilter = field(default_factory=MemoryFilter)


@dataclass
class Status:
    """Counts for ``wisp memory status`` (filled by :mod:`.refine`)."""

    memories: int = 0
    exchanges: int = 0
    awaiting: int = 0
    pending: int = 0
    in_progress: int = 0
    last_job: dict[str, Any] | None = None
    last_memory: str | None = None


def preview(text: str, n: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, cut to ``n`` characters with ``…``."""
    one = " ".join(str(text or "").split())
    return one if len(one) <= n else one[: n - 1].rstrip() + "…"


def check_paging(limit: Any, offset: Any) -> tuple[int, int]:
    """``(limit, offset)`` as ints; raises :class:`QueryError` for a limit
    outside 1–100 or a negative offset."""
    try:
        lim = int(limit)
        off = int(offset)
    except (TypeError, ValueError):
        raise QueryError("--limit and --offset are whole numbers, such as --limit 20 --offset 40") from None
    if lim < 1 or lim > MAX_LIMIT:
        raise QueryError(f"--limit is from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}); got {_number(lim)}")
    if off < 0 or off > MAX_OFFSET:
        raise QueryError(f"--offset is from 0 to {MAX_OFFSET:,}; got {_number(off)}")
    return lim, off


#: The largest offset a listing takes (a page past it could not exist; SQLite
#: could not even hold the number: issue "Nothing runs, leaks, hangs or is lost
#: that shouldn't be", "Nothing crashes").
MAX_OFFSET = 10 ** 12


def _number(value: int) -> str:
    """A number for a message, shortened when it is long."""
    text = str(value) if abs(value) < 10 ** 30 else f"{str(value)[:20]}… ({len(str(abs(value)))} digits)"
    return text


def memory_search_query(text: str) -> str:
    """Search words as an FTS5 query: every word must match (stemmed), in any
    order; the one quoting rule of :func:`wisp.core.text.fts_query` (words
    quoted, so FTS syntax in the text, ``OR``, ``*``, ``:``, quotes, is read
    as plain words), without prefixes, since porter stemming already joins
    launch and launched. Raises :class:`QueryError` when the text holds no word."""
    query = shared_fts_query(text, prefix=False)
    if not query:
        raise QueryError('search needs at least one word, such as wisp memory search "website launch"')
    return query


_MEM_COLS = (
    "m.id, m.summary, m.workspace, m.transport, m.channel, m.thread, m.conversation_id,"
    " m.event_at, m.event_end, m.recorded_at, m.model,"
    " (SELECT COUNT(*) FROM episode_memory_sources s WHERE s.memory_id = m.id), m.unstructured"
)
_EX_COLS = (
    "x.id, x.workspace, x.transport, x.channel, x.thread, x.sender, x.conversation_id, x.turn_number,"
    " x.model, x.endpoint, x.outcome, x.error, x.request, x.request_bytes, x.request_truncated,"
    " x.reply, x.reply_bytes, x.reply_truncated, x.requested_at, x.finished_at, x.captured_at"
)


def _where(f: MemoryFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if f.text is not None:
        clauses.append("m.id IN (SELECT rowid FROM episode_memories_fts WHERE episode_memories_fts MATCH ?)")
        params.append(memory_search_query(f.text))
    if f.workspace is not None:
        clauses.append("m.workspace = ?")
        params.append(f.workspace)
    if f.transport is not None:
        clauses.append("m.transport = ?")
        params.append(f.transport)
    if f.channel is not None:
        clauses.append("m.channel = ?")
        params.append(f.channel)
    if f.since is not None:
        clauses.append("m.event_at >= ?")
        params.append(utc_text(f.since))
    if f.until is not None:
        clauses.append("m.event_at < ?")
        params.append(utc_text(f.until))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _page_sql(f: MemoryFilter) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    limit, offset = check_paging(f.limit, f.offset)
    where, params = _where(f)
    rows = (f"SELECT {_MEM_COLS} FROM episode_memories m{where}"
            " ORDER BY m.event_at DESC, m.id DESC LIMIT ? OFFSET ?", [*params, limit, offset])
    count = (f"SELECT COUNT(*) FROM episode_memories m{where}", list(params))
    return rows, count


def _memory(row: Iterable[Any]) -> Memory:
    r = tuple(row)
    return Memory(number=r[0], summary=r[1], workspace=r[2], transport=r[3], channel=r[4], thread=r[5] or "",
                  conversation_id=r[6], event_at=r[7], event_end=r[8], recorded_at=r[9], model=r[10],
                  sources=int(r[11] or 0), unstructured=bool(r[12]) if len(r) > 12 else False)


def _exchange(row: Iterable[Any]) -> SourceExchange:
    r = tuple(row)
    return SourceExchange(
        id=r[0], workspace=r[1], transport=r[2], channel=r[3], thread=r[4] or "", sender=r[5] or "",
        conversation_id=r[6], turn_number=r[7], model=r[8], endpoint=r[9], outcome=r[10], error=r[11],
        request=r[12] or "", request_bytes=int(r[13] or 0), request_truncated=bool(r[14]),
        reply=r[15] or "", reply_bytes=int(r[16] or 0), reply_truncated=bool(r[17]),
        requested_at=r[18], finished_at=r[19], captured_at=r[20],
    )


_ONE_SQL = f"SELECT {_MEM_COLS} FROM episode_memories m WHERE m.id = ?"
_SOURCES_SQL = (f"SELECT {_EX_COLS} FROM episode_memory_sources s JOIN episode_exchanges x ON x.id = s.exchange_id"
                " WHERE s.memory_id = ? ORDER BY x.requested_at, x.id")
_WORKSPACES_SQL = "SELECT DISTINCT workspace FROM episode_memories ORDER BY workspace"
_TRANSPORTS_SQL = "SELECT DISTINCT transport FROM episode_memories ORDER BY transport"


# --- aiosqlite ------------------------------------------------------------------


async def _all(db: Any, sql: str, params: list[Any]) -> list[Any]:
    async with db.execute(sql, params) as cur:
        return list(await cur.fetchall())


async def find_memories(db: Any, f: MemoryFilter) -> Page:
    """One page of memories matching ``f`` and the total number of matches.
    ``db`` is an aiosqlite connection. Raises :class:`QueryError`."""
    (rows_sql, rows_params), (count_sql, count_params) = _page_sql(f)
    try:
        rows = await _all(db, rows_sql, rows_params)
        total = (await _all(db, count_sql, count_params))[0][0]
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc).lower():
            raise QueryError(f"search could not read those words: {exc}") from None
        raise
    return Page([_memory(r) for r in rows], int(total), f)


async def get_memory(db: Any, number: int) -> Memory | None:
    """Memory ``number``, or ``None`` (never made, or forgotten)."""
    rows = await _all(db, _ONE_SQL, [number])
    return _memory(rows[0]) if rows else None


async def memory_sources(db: Any, number: int) -> list[SourceExchange]:
    """The source exchanges of memory ``number``, oldest request first."""
    return [_exchange(r) for r in await _all(db, _SOURCES_SQL, [number])]


async def list_workspaces(db: Any) -> list[str]:
    """The workspaces that have memories, sorted."""
    return [r[0] for r in await _all(db, _WORKSPACES_SQL, [])]


async def memory_count(db: Any) -> int:
    """How many memories there are."""
    return int((await _all(db, "SELECT COUNT(*) FROM episode_memories", []))[0][0])


async def number_range(db: Any) -> tuple[int, int] | None:
    """The lowest and highest memory numbers stored, or ``None``."""
    row = (await _all(db, "SELECT MIN(id), MAX(id) FROM episode_memories", []))[0]
    return None if row[0] is None else (int(row[0]), int(row[1]))


# --- sqlite3 (the viewer) ---------------------------------------------------------


def find_memories_sync(conn: sqlite3.Connection, f: MemoryFilter) -> Page:
    """:func:`find_memories` on a plain ``sqlite3`` connection."""
    (rows_sql, rows_params), (count_sql, count_params) = _page_sql(f)
    try:
        rows = conn.execute(rows_sql, rows_params).fetchall()
        total = conn.execute(count_sql, count_params).fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc).lower():
            raise QueryError(f"search could not read those words: {exc}") from None
        raise
    return Page([_memory(r) for r in rows], int(total), f)


def get_memory_sync(conn: sqlite3.Connection, number: int) -> Memory | None:
    """:func:`get_memory` on a plain ``sqlite3`` connection."""
    row = conn.execute(_ONE_SQL, [number]).fetchone()
    return _memory(row) if row else None


def memory_sources_sync(conn: sqlite3.Connection, number: int) -> list[SourceExchange]:
    """:func:`memory_sources` on a plain ``sqlite3`` connection."""
    return [_exchange(r) for r in conn.execute(_SOURCES_SQL, [number]).fetchall()]


def list_workspaces_sync(conn: sqlite3.Connection) -> list[str]:
    """:func:`list_workspaces` on a plain ``sqlite3`` connection."""
    return [r[0] for r in conn.execute(_WORKSPACES_SQL).fetchall()]


def list_transports_sync(conn: sqlite3.Connection) -> list[str]:
    """The transports that have memories, sorted."""
    return [r[0] for r in conn.execute(_TRANSPORTS_SQL).fetchall()]


#: The environment variable that sets the default workspace filter.
WORKSPACE_ENV = "WISP_WORKSPACE"


def make_filter(tz: Any, *, workspace: str | None = None, all_workspaces: bool = False,
                transport: str | None = None, channel: str | None = None, since: str | None = None,
                until: str | None = None, text: str | None = None, limit: Any = DEFAULT_LIMIT,
                offset: Any = 0, env: Any = None, now: datetime | None = None) -> MemoryFilter:
    """A :class:`MemoryFilter` from the words of ``list``/``search``.

    The workspace is ``workspace``; else, unless ``all_workspaces``,
    ``$WISP_WORKSPACE`` (from ``env``, default ``os.environ``); else every
    workspace. ``since``/``until`` are read by
    :func:`~wisp.core.episodes.dates.parse_bound` in ``tz``. Raises
    :class:`QueryError` or :class:`~wisp.core.episodes.dates.DateError`.
    """
    import os

    from .dates import DateError, parse_bound

    if workspace is not None and all_workspaces:
        raise QueryError("give --workspace or --all-workspaces, not both")
    env = os.environ if env is None else env
    ws = workspace
    if ws is None and not all_workspaces:
        ws = (env.get(WORKSPACE_ENV) or "").strip() or None
    lim, off = check_paging(limit, offset)
    s = parse_bound(since, tz, now, flag="--since") if since is not None else None
    u = parse_bound(until, tz, now, flag="--until") if until is not None else None
    if s is not None and u is not None and s >= u:
        raise DateError(f"--since ({since}) must be before --until ({until}): the start is included, "
                        "the end excluded")
    if text is not None:
        memory_search_query(text)  # a search with no word is refused here, before any query
    return MemoryFilter(workspace=ws, transport=transport or None, channel=channel or None, since=s, until=u,
                        text=text, limit=lim, offset=off)
