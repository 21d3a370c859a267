"""The SQLite store (aiosqlite): conversations, turns and entries.

Rules (issue "wisp runs end to end", "Storage and audit log"; DESIGN.md):

- WAL, a busy timeout of 5,000 ms, foreign keys on. The store owns three
  tables, conversations, turns and entries, and their named migrations
  (:data:`MIGRATIONS`, steps of :mod:`wisp.core.migrations`); a feature
  with tables of its own owns them and hands its steps to
  :meth:`Store.open` (:func:`wisp.core.database.open_store` gathers them).
  To change a table, add a step; never edit one that has shipped.
- The file (and SQLite's ``-wal``/``-shm`` files, which take its mode) has
  mode 0600; missing parent directories are created 0700.
- A conversation has turns; a turn has entries. An entry is one stored
  prompt, reply, thinking, tool call, tool result or notice, with an id, a
  number (1-based within the conversation, in order), its times, and the
  audit event that recorded it (DESIGN.md, "Words"). Turns are numbered
  1-based within their conversation too.
- Times are UTC ISO 8601 strings with microseconds and ``Z``
  (``2025-01-31T14:05:12.123456Z``), so they sort as text.
- A turn left ``open`` by a crash is marked ``stopped`` by
  :meth:`Store.recover_open_turns`, which leaves alone a turn that a live
  process (or this store) is still running, and keeps what its entries had
  streamed, marked partial.
- Every write is one ``BEGIN IMMEDIATE`` transaction that cancellation
  cannot split (:meth:`Store.transaction`); :meth:`Store.begin_turn` claims
  the conversation in the same transaction (issue "Nothing runs, leaks,
  hangs or is lost that shouldn't be", "Nothing is lost").

Entry kinds and turn states are checked here in Python (:data:`ENTRY_KINDS`,
:data:`TURN_STATES`), not by SQL ``CHECK`` constraints, so that a later issue
can add one without rebuilding a table.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator

import aiosqlite

from .audit import AuditRef
from .migrations import Migration, MigrationError, applied_steps, migrate, sql_step
from .paths import create_private_file, ensure_private_dir
from .processes import tag_alive, this_process
from .text import fts_query  # the one quoting rule of search text (re-exported)
from .text import one_line
from .transactions import immediate, to_the_end
from .clock import utc_now  # the store's times: UTC ISO 8601 with µs and Z

#: The most values one ``IN (…)`` list binds. SQLite refused more than 999 bound parameters a
#: statement before 3.32, and some builds still do; 500 leaves room for a query's other parameters.
IN_LIST_MAX = 500


def in_chunks(values: Iterable[Any]) -> Iterator[tuple[list[Any], str]]:
    """``values`` in runs of at most :data:`IN_LIST_MAX`, each with its marks
    (``"?,?,?"``) for a ``WHERE id IN ({marks})``: the one rule for a list of
    ids too long for one statement."""
    items = list(values)
    for i in range(0, len(items), IN_LIST_MAX):
        chunk = items[i:i + IN_LIST_MAX]
        yield chunk, ",".join("?" * len(chunk))

__all__ = [
    "MIGRATIONS",
    "ENTRY_KINDS",
    "TURN_STATES",
    "StoreError",
    "ConversationBusy",
    "Conversation",
    "ConversationSummary",
    "Turn",
    "Entry",
    "SearchHit",
    "SEARCH_KINDS",
    "Store",
    "conversation_exists",
    "fts_query",
    "utc_now",
]

#: Kinds of entry (issue "wisp runs end to end": prompt, reply, tool call,
#: tool result; plus the model's thinking and notices shown in the chat).
ENTRY_KINDS = ("prompt", "reply", "thinking", "tool_call", "tool_result", "notice")
#: States of a turn: ``open`` while it runs, then one of the others.
TURN_STATES = ("open", "done", "stopped", "error", "cut")
_END_STATES = TURN_STATES[1:]

#: Busy timeout, milliseconds.
BUSY_TIMEOUT_MS = 5000

#: The error text of a turn that :meth:`Store.recover_open_turns` stopped.
RECOVERED_ERROR = "wisp exited before the turn ended"

#: An entry that is not still streaming, in SQL over the row ``{row}``: the search index holds it
#: (``meta`` is the store's own JSON; CASE keeps a malformed one from raising in a trigger).
_SETTLED = ("COALESCE(CASE WHEN json_valid({row}.meta) THEN json_extract({row}.meta, '$.streaming') END, 0)"
            " IN (0, '')")

#: The store's own steps: its tables, conversations, turns and entries
#: (issue "wisp runs end to end"), and the tool list a conversation was started
#: with by --tool, kept on resume (issue "Tools that act").
MIGRATIONS: list[Migration] = [
    sql_step("store", "m001_conversations_turns_entries", """
    CREATE TABLE conversations (
        id          INTEGER PRIMARY KEY,
        title       TEXT,
        workdir     TEXT NOT NULL,
        model       TEXT,
        endpoint    TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE INDEX conversations_updated ON conversations (updated_at DESC, id DESC);

    CREATE TABLE turns (
        id                INTEGER PRIMARY KEY,
        conversation_id   INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        number            INTEGER NOT NULL,
        state             TEXT NOT NULL DEFAULT 'open',
        started_at        TEXT NOT NULL,
        ended_at          TEXT,
        prompt_tokens     INTEGER,
        completion_tokens INTEGER,
        error             TEXT,
        owner             TEXT,
        UNIQUE (conversation_id, number)
    );
    CREATE INDEX turns_open ON turns (state) WHERE state = 'open';

    CREATE TABLE entries (
        id              INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        turn_id         INTEGER REFERENCES turns (id) ON DELETE CASCADE,
        number          INTEGER NOT NULL,
        kind            TEXT NOT NULL,
        content         TEXT NOT NULL DEFAULT '',
        tool_name       TEXT,
        tool_call_id    TEXT,
        arguments       TEXT,
        meta            TEXT NOT NULL DEFAULT '{}',
        audit_event_id  TEXT,
        audit_file      TEXT,
        audit_offset    INTEGER,
        created_at      TEXT NOT NULL,
        UNIQUE (conversation_id, number)
    );
    CREATE INDEX entries_turn ON entries (turn_id, number);
    CREATE INDEX entries_kind ON entries (conversation_id, kind, number);
    """, legacy_version=1),
    sql_step("store", "m002_conversation_tools", "ALTER TABLE conversations ADD COLUMN tools TEXT;",
             legacy_version=4),
    # issue 16, "Retry, edit, fork. Nothing is overwritten": a turn asked again (/retry, /edit)
    # stays, marked with the number of the turn that took its place
    sql_step("store", "m003_turn_versions", "ALTER TABLE turns ADD COLUMN superseded_by INTEGER;"),
    # issue 16, "Search": full-text search (SQLite FTS5) over prompts and replies, kept by triggers
    sql_step("store", "m004_entries_fts", """
    CREATE VIRTUAL TABLE entries_fts USING fts5(
        content, content = 'entries', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
    );
    INSERT INTO entries_fts (rowid, content) SELECT id, content FROM entries WHERE kind IN ('prompt', 'reply');
    CREATE TRIGGER entries_fts_ai AFTER INSERT ON entries WHEN new.kind IN ('prompt', 'reply') BEGIN
        INSERT INTO entries_fts (rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER entries_fts_ad AFTER DELETE ON entries WHEN old.kind IN ('prompt', 'reply') BEGIN
        INSERT INTO entries_fts (entries_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER entries_fts_au AFTER UPDATE OF content, kind ON entries BEGIN
        INSERT INTO entries_fts (entries_fts, rowid, content)
            SELECT 'delete', old.id, old.content WHERE old.kind IN ('prompt', 'reply');
        INSERT INTO entries_fts (rowid, content)
            SELECT new.id, new.content WHERE new.kind IN ('prompt', 'reply');
    END;
    """),
    # issue 16, "wisp conversations rm": the ids of deleted conversations, so that no later
    # conversation takes one (the audit log keeps a deleted conversation's events under its id)
    sql_step("store", "m005_deleted_conversations", """
    CREATE TABLE deleted_conversations (
        id          INTEGER PRIMARY KEY,
        deleted_at  TEXT NOT NULL
    );
    """),    # search over every entry, for the model and the person (wisp-memory-tool.txt: "a request with no verb
    # is a recall", so words that name no target search this record): entries_fts rebuilt over every kind,
    # with the tool's name and arguments, kept by triggers. An entry still streaming (meta.streaming) is
    # indexed once it ends, so a long command's output is not indexed again at every batch it writes.
    sql_step("store", "m006_entries_search", f"""
    DROP TRIGGER IF EXISTS entries_fts_ai;
    DROP TRIGGER IF EXISTS entries_fts_ad;
    DROP TRIGGER IF EXISTS entries_fts_au;
    DROP TABLE IF EXISTS entries_fts;
    CREATE VIRTUAL TABLE entries_fts USING fts5(
        content, tool_name, arguments, content = 'entries', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    INSERT INTO entries_fts (rowid, content, tool_name, arguments)
        SELECT id, content, tool_name, arguments FROM entries WHERE {_SETTLED.format(row="entries")};
    CREATE TRIGGER entries_fts_ai AFTER INSERT ON entries WHEN {_SETTLED.format(row="new")} BEGIN
        INSERT INTO entries_fts (rowid, content, tool_name, arguments)
            VALUES (new.id, new.content, new.tool_name, new.arguments);
    END;
    CREATE TRIGGER entries_fts_ad AFTER DELETE ON entries WHEN {_SETTLED.format(row="old")} BEGIN
        INSERT INTO entries_fts (entries_fts, rowid, content, tool_name, arguments)
            VALUES ('delete', old.id, old.content, old.tool_name, old.arguments);
    END;
    CREATE TRIGGER entries_fts_au AFTER UPDATE OF content, tool_name, arguments, meta ON entries BEGIN
        INSERT INTO entries_fts (entries_fts, rowid, content, tool_name, arguments)
            SELECT 'delete', old.id, old.content, old.tool_name, old.arguments WHERE {_SETTLED.format(row="old")};
        INSERT INTO entries_fts (rowid, content, tool_name, arguments)
            SELECT new.id, new.content, new.tool_name, new.arguments WHERE {_SETTLED.format(row="new")};
    END;
    """),
]

#: The id of the next conversation: past every id used, deleted ones included.
_NEXT_CONVERSATION_ID = ("(SELECT MAX(n) + 1 FROM (SELECT COALESCE(MAX(id), 0) AS n FROM conversations"
                         " UNION ALL SELECT COALESCE(MAX(id), 0) FROM deleted_conversations))")


class StoreError(Exception):
    """A store problem with a one-line message: an unknown id, a bad entry
    kind or turn state, a database newer than this wisp, a failed migration."""


class ConversationBusy(StoreError):
    """:meth:`Store.begin_turn` refused: another live wisp process is running
    a turn of the conversation (two would interleave their entries; issue
    "Nothing runs, leaks, hangs or is lost that shouldn't be", "Nothing is
    lost"). ``conversation_id`` and ``owner`` (``host:pid`` of that
    process); the message is one line saying what to do."""

    def __init__(self, conversation_id: int, owner: str) -> None:
        self.conversation_id = conversation_id
        self.owner = owner
        super().__init__(f"Conversation {conversation_id} has a turn running in another wisp "
                         f"(process {owner.rpartition(':')[2]}); wait for it to end, or start a "
                         "new conversation.")


class ConversationMoved(StoreError):
    """:meth:`Store.begin_turn` refused: the caller had seen the
    conversation up to turn ``seen``, and another wisp process has since
    ended turn ``last`` in it. A view that claimed anyway would send the
    model turns it never showed; it shows them, and the person sends again.
    The message is one line saying so."""

    def __init__(self, conversation_id: int, last: int, seen: int) -> None:
        self.conversation_id = conversation_id
        self.last = last
        self.seen = seen
        added = last - seen
        super().__init__(f"{added} turn{'s' if added != 1 else ''} of conversation {conversation_id} "
                         f"{'were' if added != 1 else 'was'} added by another wisp since this window showed "
                         f"turn {seen}; {'they are' if added != 1 else 'it is'} shown now: read "
                         f"{'them' if added != 1 else 'it'}, then send your prompt again.")


#: The range of SQLite's integers (64-bit signed).
SQLITE_INT_MIN, SQLITE_INT_MAX = -(2 ** 63), 2 ** 63 - 1


def fits(params: Iterable[Any]) -> bool:
    """True when every ``int`` among a query's ``params`` fits SQLite's
    64-bit integers. A read whose number does not fit can match no row, so
    the store's reads answer "none" for it instead of raising OverflowError
    (``/show entry 99999999999999999999999``: issue "Nothing runs, leaks,
    hangs or is lost that shouldn't be", "Nothing crashes")."""
    return all(SQLITE_INT_MIN <= p <= SQLITE_INT_MAX for p in params if isinstance(p, int))


def _owner() -> str:
    return this_process()


#: The text added to a tool result that was still streaming when its process died.
RECOVERED_OUTPUT = "[wisp exited before this ended; the output so far is kept]"


def conversation_exists(path: str | os.PathLike[str], conversation_id: int) -> bool:
    """Whether the database at ``path`` holds conversation ``conversation_id``:
    one read with the standard library's sqlite3, read-only, with no
    migration, so a command line can be checked before anything opens the
    store (``wisp --resume ID`` stops before the screen opens; issue 12,
    "Paint first, then open"). False when the file or its tables are not
    there yet, or the id cannot be stored."""
    p = Path(path).expanduser()
    if not p.exists() or not fits([conversation_id]):
        return False
    try:
        db = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            row = db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return row is not None


# --- records ------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """A conversation: ``id``, ``title`` (or ``None``), ``workdir`` (its working
    directory), the ``model`` and ``endpoint`` it uses (or ``None``), and
    ``created_at``/``updated_at`` (UTC ISO strings)."""

    id: int
    title: str | None
    workdir: str
    model: str | None
    endpoint: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class ConversationSummary(Conversation):
    """A conversation as ``wisp conversations`` lists it: the
    :class:`Conversation` fields plus ``turn_count`` and ``last_prompt``, a
    one-line preview of the last prompt (at most :attr:`PREVIEW_CHARS`
    characters, ``…`` when cut) or ``None`` when there is none."""

    turn_count: int = 0
    last_prompt: str | None = None

    PREVIEW_CHARS = 80


@dataclass(frozen=True)
class Turn:
    """A turn: ``id``, ``conversation_id``, ``number`` (1-based within the
    conversation), ``state`` (one of :data:`TURN_STATES`), ``started_at``,
    ``ended_at`` (``None`` while open), ``prompt_tokens`` and
    ``completion_tokens`` (as the endpoint reported them, or ``None``),
    ``error`` (text, or ``None``) and ``superseded_by``: the number of the
    turn that asked again in its place (``/retry``, ``/edit``), or ``None``
    while it is the current version (issue 16, "Nothing is overwritten")."""

    id: int
    conversation_id: int
    number: int
    state: str
    started_at: str
    ended_at: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    error: str | None
    superseded_by: int | None = None

    @property
    def current(self) -> bool:
        """True while no later turn has taken this one's place."""
        return self.superseded_by is None


@dataclass(frozen=True)
class Entry:
    """An entry: one stored prompt, reply, thinking, tool call, tool result or
    notice.

    ``id``; ``conversation_id``; ``turn_id`` (``None`` for a notice outside a
    turn); ``number`` (1-based within the conversation); ``kind`` (one of
    :data:`ENTRY_KINDS`); ``content`` (text); ``tool_name`` and
    ``tool_call_id`` (tool calls and results); ``arguments`` (a tool call's
    decoded JSON arguments, or ``None``); ``meta`` (a dict of flags such as
    ``{"stopped": true}``, ``{"cut": true}`` or an exit status; ``{}`` when
    none; ``{"streaming": true}`` while its text is still being written as
    it arrives, ``{"partial": true, "reason": ...}`` when it never ended);
    ``audit_event_id``, ``audit_file``, ``audit_offset`` (where the audit
    event that recorded it lies, or ``None``); ``created_at``.
    """

    id: int
    conversation_id: int
    turn_id: int | None
    number: int
    kind: str
    content: str
    tool_name: str | None
    tool_call_id: str | None
    arguments: Any
    meta: dict[str, Any] = field(default_factory=dict)
    audit_event_id: str | None = None
    audit_file: str | None = None
    audit_offset: int | None = None
    created_at: str = ""

    @property
    def audit_ref(self) -> AuditRef | None:
        """The :class:`~wisp.core.audit.AuditRef` of the recording event, or
        ``None`` when the entry has none (audit off, or not recorded alone)."""
        if self.audit_event_id is None or self.audit_file is None or self.audit_offset is None:
            return None
        return AuditRef(self.audit_event_id, self.audit_file, self.audit_offset)


#: The kinds of entry a search finds (wisp-memory-tool.txt, "recall": the conversation's own record): the
#: person's prompts, the replies, tool calls (their arguments) and tool outputs. Thinking and notices are not
#: what the conversation established.
SEARCH_KINDS = ("prompt", "reply", "tool_call", "tool_result")
#: A search leaves out the memory tool's own calls and results: they repeat other entries (a recall, an
#: earlier search), and a search that found them would find itself again every time.
SEARCH_SKIPS_TOOL = "memory"


@dataclass(frozen=True)
class SearchHit:
    """One entry that a search found (:meth:`Store.search`).

    ``conversation_id`` and its ``title``; ``turn`` (the turn's number, or
    ``None`` for an entry outside a turn); ``entry`` (the entry's number);
    ``kind`` (one of :data:`SEARCH_KINDS`); ``created_at`` (UTC ISO);
    ``snippet`` (the text around the match, the matched words between the
    marks asked for); ``current`` (false when a later version of the turn
    took its place: ``/retry``, ``/edit``); ``superseded_by`` (the number of
    that later turn, or ``None``); ``tool_name`` and ``arguments`` (a tool
    call's or output's tool, and a call's decoded arguments); ``rank``
    (FTS5's bm25: lower is a better match)."""

    conversation_id: int
    title: str | None
    turn: int | None
    entry: int
    kind: str
    created_at: str
    snippet: str
    current: bool = True
    superseded_by: int | None = None
    tool_name: str | None = None
    arguments: Any = None
    rank: float = 0.0
    tool_call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready values (``wisp conversations search --json``)."""
        return {"conversation": self.conversation_id, "title": self.title, "turn": self.turn,
                "entry": self.entry, "kind": self.kind, "date": self.created_at, "snippet": self.snippet,
                "current": self.current, "superseded_by": self.superseded_by, "tool": self.tool_name}


_CONV_COLS = "id, title, workdir, model, endpoint, created_at, updated_at"
_TURN_COLS = (
    "id, conversation_id, number, state, started_at, ended_at, "
    "prompt_tokens, completion_tokens, error, superseded_by"
)
_ENTRY_COLS = (
    "id, conversation_id, turn_id, number, kind, content, tool_name, tool_call_id, "
    "arguments, meta, audit_event_id, audit_file, audit_offset, created_at"
)


def _conv(row: Any) -> Conversation:
    return Conversation(*tuple(row)[:7])


def _turn(row: Any) -> Turn:
    return Turn(*tuple(row))


def _loads(text: str | None, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _entry(row: Any) -> Entry:
    r = tuple(row)
    meta = _loads(r[9], {})
    return Entry(
        id=r[0], conversation_id=r[1], turn_id=r[2], number=r[3], kind=r[4],
        content=r[5] or "", tool_name=r[6], tool_call_id=r[7],
        arguments=_loads(r[8], None), meta=meta if isinstance(meta, dict) else {},
        audit_event_id=r[10], audit_file=r[11], audit_offset=r[12], created_at=r[13],
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _preview(text: str | bytes | None) -> str | None:
    """A prompt's one-line preview (:func:`wisp.core.text.one_line`, at most
    ``PREVIEW_CHARS`` characters)."""
    return None if text is None else one_line(text, ConversationSummary.PREVIEW_CHARS)


# --- the store -------------------------------------------------------------------



async def _stop_turns(db: aiosqlite.Connection, stale: list[int], now: str) -> None:
    """Inside a write transaction: mark the ``open`` turns ``stale`` (ids)
    ``stopped`` with :data:`RECOVERED_ERROR`, and the entries they were still
    streaming partial, reason ``exited`` (a tool result also failed, ending
    with :data:`RECOVERED_OUTPUT`)."""
    await db.executemany(
        "UPDATE turns SET state = 'stopped', ended_at = ?, error = COALESCE(error, ?)"
        " WHERE id = ? AND state = 'open'",
        [(now, RECOVERED_ERROR, t) for t in stale],
    )
    # what was streaming when the process died is kept, marked partial (a tool
    # result also as failed, with a line saying why, for the person and the model)
    await db.executemany(
        "UPDATE entries SET meta = json_set(json_remove(meta, '$.streaming'),"
        " '$.partial', json('true'), '$.reason', 'exited')"
        " WHERE turn_id = ? AND kind != 'tool_result' AND json_extract(meta, '$.streaming')",
        [(t,) for t in stale],
    )
    await db.executemany(
        "UPDATE entries SET content = content || char(10) || ?,"
        " meta = json_set(json_remove(meta, '$.streaming'),"
        " '$.partial', json('true'), '$.reason', 'exited', '$.error', json('true'))"
        " WHERE turn_id = ? AND kind = 'tool_result' AND json_extract(meta, '$.streaming')",
        [(RECOVERED_OUTPUT, t) for t in stale],
    )


#: Per database file (its path as opened), the turns a store of this process began, has not ended,
#: and is still open: no other store of this process stops or recovers them (two sessions may share
#: a process: ``wisp mcp serve``, the eval runner).
_LIVE: dict[Path, set[int]] = {}


class Store:
    """The database: open it with ``await Store.open(path)``.

    Use as ``async with await Store.open(path) as store:`` or call
    :meth:`close`. One :class:`Store` is one aiosqlite connection; its writes
    are serialised by an ``asyncio.Lock`` and each is one ``BEGIN IMMEDIATE``
    transaction, so another process writing the same file waits (up to the
    busy timeout) instead of interleaving.

    Attributes: ``path`` (the database file), ``db`` (the aiosqlite
    connection, in autocommit mode, for later modules' own tables; write
    through :meth:`transaction`).
    """

    def __init__(self, path: Path, db: aiosqlite.Connection) -> None:
        """Use :meth:`open`; this only wraps an already prepared connection."""
        self.path = path
        self.db = db
        self._write_lock = asyncio.Lock()
        self._owner = _owner()
        self._running: set[int] = set()  # turns this store began and has not ended
        self._live_here = _LIVE.setdefault(Path(os.path.realpath(path)), set())  # every open store's of this file

    # -- opening ------------------------------------------------------------

    @classmethod
    async def open(cls, path: str | os.PathLike[str], steps: Iterable[Migration] = ()) -> "Store":
        """Open (creating if needed) the database at ``path`` and migrate it.

        Creates missing parents (0700) and the file (0600); turns on WAL,
        ``busy_timeout`` = :data:`BUSY_TIMEOUT_MS` and foreign keys; runs the
        store's :data:`MIGRATIONS`, then ``steps`` (the features' own, in
        order), those the file has not had. Raises :class:`StoreError` when
        the file is newer than this wisp knows, or a step fails (the
        database stays as it was before that step); ``sqlite3.Error`` or
        ``OSError`` when the file cannot be opened.
        """
        p = Path(path).expanduser()
        ensure_private_dir(p.parent)
        create_private_file(p)
        db = await aiosqlite.connect(p, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await db.execute("PRAGMA foreign_keys = ON")
            async with db.execute("PRAGMA journal_mode = WAL") as cur:
                await cur.fetchone()
            await db.execute("PRAGMA synchronous = NORMAL")
            try:
                await migrate(db, p, [*MIGRATIONS, *steps])
            except MigrationError as exc:
                raise StoreError(str(exc)) from None
        except BaseException:
            await db.close()
            raise
        return cls(p, db)

    async def close(self) -> None:
        """Close the connection. Turns this store left open stay ``open`` in
        the file, for :meth:`recover_open_turns` to stop next time (or the
        next claim of their conversation by this process)."""
        self._live_here.difference_update(self._running)
        self._running.clear()
        await self.db.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def migrations(self) -> set[str]:
        """The ``owner.name`` of every migration step the database has had."""
        return await applied_steps(self.db)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """``async with store.transaction() as db:`` runs the block in one
        ``BEGIN IMMEDIATE`` transaction, committed at the end, rolled back on
        an exception. Writes from one store never interleave.

        Cancellation-safe (:func:`wisp.core.transactions.immediate`): a block
        cancelled anywhere (Esc, quit), even while the ``BEGIN`` waits for
        another process's lock, is rolled back, and the connection is never
        left inside a transaction; a cancellation that arrives during the
        ``COMMIT`` leaves the block committed. The cancellation is raised
        again after."""
        async with self._write_lock:
            async with immediate(self.db) as db:
                yield db

    async def _one(self, sql: str, params: Iterable[Any] = ()) -> Any:
        """The first row of a read, or ``None`` (also when a number cannot be stored; see :func:`fits`)."""
        params = tuple(params)
        if not fits(params):
            return None
        rows = await self.db.execute_fetchall(sql, params)  # one trip to the database's thread
        return next(iter(rows), None)

    async def _all(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Every row of a read (none when a number cannot be stored; see :func:`fits`)."""
        params = tuple(params)
        if not fits(params):
            return []
        return list(await self.db.execute_fetchall(sql, params))

    # -- conversations ----------------------------------------------------------

    async def create_conversation(
        self,
        workdir: str | os.PathLike[str],
        model: str | None = None,
        endpoint: str | None = None,
        title: str | None = None,
    ) -> Conversation:
        """Create a conversation in ``workdir`` and return it."""
        now = utc_now()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT INTO conversations (id, title, workdir, model, endpoint, created_at, updated_at)"
                f" VALUES ({_NEXT_CONVERSATION_ID}, ?, ?, ?, ?, ?, ?)",
                (title, os.fspath(workdir), model, endpoint, now, now),
            )
            cid = cur.lastrowid
        return Conversation(cid, title, os.fspath(workdir), model, endpoint, now, now)

    async def get_conversation(self, conversation_id: int) -> Conversation | None:
        """The conversation with that id, or ``None``."""
        row = await self._one(f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?", (conversation_id,))
        return _conv(row) if row else None

    async def last_conversation(self, workdir: str | os.PathLike[str] | None = None) -> Conversation | None:
        """The most recently updated conversation (``wisp --continue``), or
        ``None``; with ``workdir``, the newest of that working directory
        (issue 16, "The conversation of this directory")."""
        if workdir is None:
            row = await self._one(
                f"SELECT {_CONV_COLS} FROM conversations ORDER BY updated_at DESC, id DESC LIMIT 1"
            )
        else:
            row = await self._one(
                f"SELECT {_CONV_COLS} FROM conversations WHERE workdir = ?"
                " ORDER BY updated_at DESC, id DESC LIMIT 1", (os.fspath(workdir),))
        return _conv(row) if row else None

    async def list_conversations(self, limit: int | None = None) -> list[ConversationSummary]:
        """Conversations, newest updated first, with their turn count and a
        preview of the last prompt (one query). ``limit`` caps the count."""
        sql = (
            f"SELECT {', '.join('c.' + c.strip() for c in _CONV_COLS.split(','))},"
            " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id AND t.superseded_by IS NULL),"
            # bytes, not text: SQLite's text functions stop at a NUL, and a preview cut there hid the rest
            " (SELECT substr(CAST(e.content AS BLOB), 1, 1600) FROM entries e"
            "   WHERE e.conversation_id = c.id AND e.kind = 'prompt'"
            "   ORDER BY e.number DESC LIMIT 1)"
            " FROM conversations c ORDER BY c.updated_at DESC, c.id DESC"
        )
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (int(limit),)
        rows = await self._all(sql, params)
        return [
            ConversationSummary(*tuple(r)[:7], turn_count=r[7], last_prompt=_preview(r[8]))
            for r in rows
        ]

    async def set_conversation_title(self, conversation_id: int, title: str | None) -> None:
        """Set (or with ``None`` clear) a conversation's title; raises
        :class:`StoreError` for an unknown id."""
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?",
                (title, utc_now(), conversation_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no conversation {conversation_id}")

    async def set_conversation_model(self, conversation_id: int, model: str | None,
                                     endpoint: str | None = None) -> None:
        """Record the model (and, when given, the endpoint) a conversation
        uses from now on (``/model``, ``/profile``); raises
        :class:`StoreError` for an unknown id."""
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE conversations SET model = ?, endpoint = COALESCE(?, endpoint) WHERE id = ?",
                (model, endpoint, conversation_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no conversation {conversation_id}")

    async def conversation_counts(self, conversation_id: int) -> dict[str, int]:
        """``{"turns": n, "entries": m}`` of a conversation (0 and 0 when unknown)."""
        t = await self._one("SELECT COUNT(*) FROM turns WHERE conversation_id = ?", (conversation_id,))
        e = await self._one("SELECT COUNT(*) FROM entries WHERE conversation_id = ?", (conversation_id,))
        return {"turns": int(t[0]) if t else 0, "entries": int(e[0]) if e else 0}

    async def delete_conversation(self, conversation_id: int) -> dict[str, int]:
        """Delete a conversation with its turns and entries; the tables that
        refer to it with ``ON DELETE CASCADE`` (facts, summaries) lose its
        rows too, by their owners' own schema; its id is never given again
        (the audit log may keep its events under it). Returns what the store's
        tables lost, ``{"turns": n, "entries": m}``. Raises
        :class:`StoreError` for an unknown id, and :class:`ConversationBusy`
        while another live wisp process runs a turn of it (checked in the
        delete's own transaction, as :meth:`begin_turn` claims)."""
        if await self.get_conversation(conversation_id) is None:
            raise StoreError(f"no conversation {conversation_id}")
        async with self.transaction() as db:
            await self._refuse_if_held(db, conversation_id)
            counts = await self.conversation_counts(conversation_id)
            await db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            await db.execute("INSERT OR REPLACE INTO deleted_conversations (id, deleted_at) VALUES (?, ?)",
                             (conversation_id, utc_now()))
        return counts

    async def restore_conversation(self, conversation: dict[str, Any], turns: Iterable[dict[str, Any]],
                                   entries: Iterable[dict[str, Any]]) -> Conversation:
        """Create a new conversation holding the given turns and entries as
        they were, in one transaction, and return it (``wisp import``,
        ``/fork``: issue 16, "the same entries and facts under new ids").

        ``conversation``: ``workdir`` (required), ``title``, ``model``,
        ``endpoint``, ``created_at``, ``tools`` (a list or ``None``).
        ``turns``: ``number``, ``state``, ``started_at``, ``ended_at``,
        ``prompt_tokens``, ``completion_tokens``, ``error``,
        ``superseded_by``. ``entries``: ``number``, ``turn`` (the number of
        its turn, or ``None``), ``kind``, ``content``, ``tool_name``,
        ``tool_call_id``, ``arguments``, ``meta``, ``audit_event_id``,
        ``created_at``. Numbers are kept; ids are new; a turn ``open`` in the
        source is stored ``stopped``. Raises :class:`StoreError` for a bad
        kind or state, a repeated number, or an entry naming no turn given.
        """
        now = utc_now()
        turns = list(turns)
        entries = list(entries)
        for e in entries:
            if e.get("kind") not in ENTRY_KINDS:
                raise StoreError(f"an entry is one of {', '.join(ENTRY_KINDS)}, not {e.get('kind')!r}")
        for t in turns:
            if t.get("state") not in TURN_STATES:
                raise StoreError(f"a turn is one of {', '.join(TURN_STATES)}, not {t.get('state')!r}")
        tools = conversation.get("tools")
        try:
            async with self.transaction() as db:
                cur = await db.execute(
                    "INSERT INTO conversations (id, title, workdir, model, endpoint, created_at, updated_at, tools)"
                    f" VALUES ({_NEXT_CONVERSATION_ID}, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation.get("title"), os.fspath(conversation["workdir"]), conversation.get("model"),
                     conversation.get("endpoint"), conversation.get("created_at") or now, now,
                     json.dumps(tools) if isinstance(tools, list) else None))
                cid = cur.lastrowid
                ids: dict[int, int] = {}
                for t in turns:
                    state = "stopped" if t["state"] == "open" else t["state"]
                    cur = await db.execute(
                        "INSERT INTO turns (conversation_id, number, state, started_at, ended_at, prompt_tokens,"
                        " completion_tokens, error, superseded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, int(t["number"]), state, t.get("started_at") or now,
                         t.get("ended_at") or (now if t["state"] == "open" else None), t.get("prompt_tokens"),
                         t.get("completion_tokens"), t.get("error"), t.get("superseded_by")))
                    ids[int(t["number"])] = int(cur.lastrowid)
                rows = []
                for e in entries:
                    turn = e.get("turn")
                    if turn is not None and int(turn) not in ids:
                        raise StoreError(f"entry {e.get('number')} names turn {turn}, which is not there")
                    args = e.get("arguments")
                    rows.append((cid, ids[int(turn)] if turn is not None else None, int(e["number"]), e["kind"],
                                 str(e.get("content") or ""), e.get("tool_name"), e.get("tool_call_id"),
                                 None if args is None else _dumps(args), _dumps(dict(e.get("meta") or {})),
                                 e.get("audit_event_id"), e.get("created_at") or now))
                await db.executemany(
                    "INSERT INTO entries (conversation_id, turn_id, number, kind, content, tool_name, tool_call_id,"
                    " arguments, meta, audit_event_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        except (sqlite3.Error, OverflowError) as exc:  # a repeated number, a value SQLite cannot hold
            raise StoreError(f"the conversation could not be restored: {exc}") from None
        conv = await self.get_conversation(cid)
        assert conv is not None
        return conv

    async def search(self, text: str, *, conversation_id: int | None = None, current_only: bool = False,
                     limit: int = 50, offset: int = 0, marks: tuple[str, str] = ("[", "]"),
                     order: str = "newest", any_word: bool = False, skip_turn: int | None = None,
                     kinds: tuple[str, ...] = SEARCH_KINDS, prefix: bool = True) -> list[SearchHit]:
        """Entries of every conversation (or of one) that hold every word of
        ``text`` (with ``any_word``, one of them), each word as a word prefix,
        any case, accents ignored (SQLite FTS5, :func:`fts_query`), in their
        content, their tool's name or a call's arguments.

        Found: the ``kinds`` of :data:`SEARCH_KINDS` (prompts, replies, tool
        calls, tool outputs), in every version of a turn unless
        ``current_only`` (a version a /retry or /edit replaced is marked by
        :attr:`SearchHit.current`); never the memory tool's own calls and
        results (:data:`SEARCH_SKIPS_TOOL`), nor turn ``skip_turn`` (the
        turn running, which the model has whole). ``order`` is ``newest``
        (newest first) or ``rank`` (best match first: bm25, then entry
        number). At most ``limit`` hits after skipping ``offset``. ``marks``
        surround the matched words in each snippet. ``prefix`` false matches
        whole words only. No word gives no hit; never raises for any text."""
        query = fts_query(text, any_word=any_word, prefix=prefix)
        kinds = tuple(k for k in kinds if k in ENTRY_KINDS)
        if not query or not kinds:
            return []
        sql = ("SELECT e.conversation_id, c.title, t.number, e.number, e.kind, e.created_at,"
               " snippet(entries_fts, -1, ?, ?, '…', 16), t.superseded_by, e.tool_name, e.arguments,"
               " bm25(entries_fts), e.tool_call_id"
               " FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid"
               " JOIN conversations c ON c.id = e.conversation_id"
               " LEFT JOIN turns t ON t.id = e.turn_id"
               f" WHERE entries_fts MATCH ? AND e.kind IN ({','.join('?' * len(kinds))})"
               " AND COALESCE(e.tool_name, '') != ?")
        params: list[Any] = [marks[0], marks[1], query, *kinds, SEARCH_SKIPS_TOOL]
        if conversation_id is not None:
            sql += " AND e.conversation_id = ?"
            params.append(conversation_id)
        if current_only:
            sql += " AND (t.superseded_by IS NULL)"
        if skip_turn is not None:
            sql += " AND (t.number IS NULL OR t.number != ?)"
            params.append(skip_turn)
        if order == "rank":
            sql += " ORDER BY bm25(entries_fts), e.conversation_id, e.number"
        else:
            sql += " ORDER BY e.created_at DESC, e.id DESC"
        sql += " LIMIT ? OFFSET ?"
        params += [max(0, int(limit)), max(0, int(offset))]
        try:
            rows = await self._all(sql, params)
        except sqlite3.OperationalError:  # an FTS5 query it still refuses: nothing found, never a crash
            return []
        return [SearchHit(r[0], r[1], r[2], r[3], r[4], r[5], " ".join(str(r[6] or "").split()), r[7] is None,
                          r[7], r[8], _loads(r[9], None), float(r[10] or 0.0), r[11])
                for r in rows]

    async def touch_conversation(self, conversation_id: int) -> None:
        """Set a conversation's ``updated_at`` to now; raises
        :class:`StoreError` for an unknown id."""
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", (utc_now(), conversation_id)
            )
            if cur.rowcount == 0:
                raise StoreError(f"no conversation {conversation_id}")

    # -- turns --------------------------------------------------------------------

    async def begin_turn(self, conversation_id: int, supersedes: int | None = None, *,
                         seen: int | None = None) -> Turn:
        """Claim the conversation and open its next turn (number = last + 1,
        from 1); touch the conversation.

        The claim is atomic: in the same ``BEGIN IMMEDIATE`` transaction that
        inserts the turn, an ``open`` turn of this conversation begun by
        another live process on this host refuses it with
        :class:`ConversationBusy`, so two ``wisp ask --continue`` started at
        the same instant never both run and their entries never interleave.
        A turn left open by a dead process, by another host or by this
        process itself does not block. ``started_at`` is taken inside the
        transaction, so it is never before the end of a turn that ended before
        the claim.

        With ``supersedes`` (a turn number: ``/retry``, ``/edit``), the new
        turn takes that turn's place in the same transaction: the old turn
        and its entries stay, marked ``superseded_by`` the new number, and
        :meth:`turns` leaves it out from then on (issue 16, "Nothing is
        overwritten"). Raises :class:`StoreError` for an unknown
        conversation, or a ``supersedes`` turn that is missing, still open
        or already replaced.

        With ``seen`` (the last turn number the caller has shown, ``0`` for
        none), a conversation whose last turn is numbered above it is refused
        with :class:`ConversationMoved`, in the same transaction: a second
        window never sends the model a turn another wisp ended after the
        window last looked.

        Cancelled anywhere (Esc right after Enter), it leaves no turn: the
        transaction is rolled back, and a claim whose ``COMMIT`` went through
        as the cancellation came is taken back (no caller holds it, so no one
        would end it). A turn of this conversation this process left
        ``open`` and no longer runs is stopped in the same transaction, so
        no other wisp is refused for it."""
        tid: int | None = None
        number = 0
        try:
            async with self.transaction() as db:
                now = utc_now()
                cur = await db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?",
                                       (now, conversation_id))
                if cur.rowcount == 0:
                    raise StoreError(f"no conversation {conversation_id}")
                await self._refuse_if_held(db, conversation_id)
                await self._stop_left_open(db, conversation_id, now)
                tid, number = await self._claim(db, conversation_id, supersedes, now, seen)
        except asyncio.CancelledError:
            if tid is not None:  # the claim may have been committed as the cancellation came
                await to_the_end(self._take_back(tid, conversation_id, number, supersedes))
            raise
        self._running.add(tid)
        self._live_here.add(tid)
        return Turn(tid, conversation_id, number, "open", now, None, None, None, None)

    async def _stop_left_open(self, db: aiosqlite.Connection, conversation_id: int, now: str) -> None:
        """Inside :meth:`begin_turn`'s transaction: stop the conversation's
        turns this process began and no longer runs (a turn whose ending was
        lost), as :meth:`recover_open_turns` does for a dead process's."""
        rows = await db.execute_fetchall(
            "SELECT id FROM turns WHERE conversation_id = ? AND state = 'open' AND owner = ?",
            (conversation_id, self._owner))
        left = [tid for (tid,) in rows if tid not in self._live()]
        if left:
            await _stop_turns(db, left, now)

    async def _take_back(self, tid: int, conversation_id: int, number: int, supersedes: int | None) -> None:
        """Undo a claim whose ``COMMIT`` went through although its caller was
        cancelled: delete the still empty turn (only if this process owns it
        and it is still open) and give a superseded turn its place back."""
        async with self.transaction() as db:
            cur = await db.execute("DELETE FROM turns WHERE id = ? AND owner = ? AND state = 'open'"
                                   " AND NOT EXISTS (SELECT 1 FROM entries WHERE turn_id = ?)",
                                   (tid, self._owner, tid))
            if cur.rowcount and supersedes is not None:
                await db.execute("UPDATE turns SET superseded_by = NULL"
                                 " WHERE conversation_id = ? AND number = ? AND superseded_by = ?",
                                 (conversation_id, supersedes, number))

    async def _claim(self, db: aiosqlite.Connection, conversation_id: int, supersedes: int | None,
                     now: str, seen: int | None = None) -> tuple[int, int]:
        """Inside :meth:`begin_turn`'s transaction: insert the open turn
        (taking ``supersedes``' place); returns its id and number. Raises
        :class:`ConversationMoved` when the last turn is numbered above
        ``seen``."""
        (number,), = await db.execute_fetchall(
            "SELECT COALESCE(MAX(number), 0) + 1 FROM turns WHERE conversation_id = ?", (conversation_id,))
        if seen is not None and number - 1 > seen:
            raise ConversationMoved(conversation_id, number - 1, seen)
        if supersedes is not None:
            old = next(iter(await db.execute_fetchall(
                "SELECT state, superseded_by FROM turns WHERE conversation_id = ? AND number = ?",
                (conversation_id, supersedes))), None)
            if old is None:
                raise StoreError(f"no turn {supersedes} in conversation {conversation_id}")
            if old[0] == "open":
                raise StoreError(f"turn {supersedes} is still running")
            if old[1] is not None:
                raise StoreError(f"turn {supersedes} was already replaced by turn {old[1]}")
            await db.execute("UPDATE turns SET superseded_by = ? WHERE conversation_id = ? AND number = ?",
                             (number, conversation_id, supersedes))
        cur = await db.execute(
            "INSERT INTO turns (conversation_id, number, state, started_at, owner)"
            " VALUES (?, ?, 'open', ?, ?)",
            (conversation_id, number, now, self._owner),
        )
        return int(cur.lastrowid), int(number)

    async def end_turn(
        self,
        turn_id: int,
        state: str,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        error: str | None = None,
    ) -> Turn:
        """End a turn in ``state`` (``done``, ``stopped``, ``error`` or ``cut``)
        with the endpoint's token counts and an error text, and return it.
        Token counts left ``None`` keep what was stored. Raises
        :class:`StoreError` for an unknown turn or a bad state."""
        if state not in _END_STATES:
            raise StoreError(f"a turn ends as one of {', '.join(_END_STATES)}, not {state!r}")
        now = utc_now()
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE turns SET state = ?, ended_at = ?,"
                " prompt_tokens = COALESCE(?, prompt_tokens),"
                " completion_tokens = COALESCE(?, completion_tokens),"
                " error = ? WHERE id = ?",
                (state, now, prompt_tokens, completion_tokens, error, turn_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no turn with id {turn_id}")
            await db.execute(
                "UPDATE conversations SET updated_at = ?"
                " WHERE id = (SELECT conversation_id FROM turns WHERE id = ?)",
                (now, turn_id),
            )
            (row,) = await db.execute_fetchall(f"SELECT {_TURN_COLS} FROM turns WHERE id = ?", (turn_id,))
        self._running.discard(turn_id)
        self._live_here.discard(turn_id)
        return _turn(row)

    async def turn_by_id(self, turn_id: int) -> Turn | None:
        """The turn with that id, or ``None``."""
        row = await self._one(f"SELECT {_TURN_COLS} FROM turns WHERE id = ?", (turn_id,))
        return _turn(row) if row else None

    async def get_turn(self, conversation_id: int, number: int) -> Turn | None:
        """Turn ``number`` (1-based) of a conversation, or ``None``."""
        row = await self._one(
            f"SELECT {_TURN_COLS} FROM turns WHERE conversation_id = ? AND number = ?",
            (conversation_id, number),
        )
        return _turn(row) if row else None

    async def turns(
        self, conversation_id: int, limit: int | None = None, before_number: int | None = None, *,
        versions: bool = False,
    ) -> list[Turn]:
        """A conversation's current turns in ascending number order (one query).

        A turn a ``/retry`` or ``/edit`` replaced is left out, so what reads
        this (the composer, the running summary) sees only current versions
        (issue 16, "The context composes only the current versions");
        ``versions=True`` gives every turn. With ``before_number``, only turns
        numbered below it; with ``limit``, only the last ``limit`` of those.
        So the latest 50 are ``turns(c, limit=50)`` and the page before them
        ``turns(c, limit=50, before_number=page[0].number)``.
        """
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE conversation_id = ?"
        if not versions:
            sql += " AND superseded_by IS NULL"
        params: list[Any] = [conversation_id]
        if before_number is not None:
            sql += " AND number < ?"
            params.append(before_number)
        if limit is None:
            return [_turn(r) for r in await self._all(sql + " ORDER BY number", params)]
        params.append(max(0, int(limit)))
        rows = await self._all(sql + " ORDER BY number DESC LIMIT ?", params)
        return [_turn(r) for r in reversed(rows)]

    async def turns_after(self, conversation_id: int, after_number: int, limit: int, *,
                          versions: bool = False) -> list[Turn]:
        """Up to ``limit`` current turns numbered above ``after_number``, in
        ascending order (one query): the page below the turns a view shows,
        and the turns a running summary does not cover (issue 12, "Open what
        is seen", "Compose incrementally"). A turn a ``/retry`` or ``/edit``
        replaced is left out, as in :meth:`turns`; ``versions=True`` gives
        every turn."""
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE conversation_id = ? AND number > ?"
        if not versions:
            sql += " AND superseded_by IS NULL"
        rows = await self._all(sql + " ORDER BY number LIMIT ?", (conversation_id, after_number, max(0, int(limit))))
        return [_turn(r) for r in rows]

    async def turn_versions(self, conversation_id: int) -> dict[int, list[int]]:
        """The versions of each turn that has more than one: ``{current
        turn number: [first version's number, …, current number]}``
        (``/retry`` and ``/edit`` chain them: each superseded turn names the
        next)."""
        rows = await self._all("SELECT number, superseded_by FROM turns WHERE conversation_id = ?"
                               " AND superseded_by IS NOT NULL ORDER BY number", (conversation_id,))
        nxt = {int(n): int(s) for n, s in rows}
        targets = set(nxt.values())
        out: dict[int, list[int]] = {}
        for start in sorted(n for n in nxt if n not in targets):  # the first version of each chain
            chain = [start]
            while chain[-1] in nxt and len(chain) <= len(nxt):
                chain.append(nxt[chain[-1]])
            out[chain[-1]] = chain
        return out

    async def count_turns(self, conversation_id: int, *, before_number: int | None = None,
                          versions: bool = True) -> int:
        """How many turns a conversation has (every version counted; with
        ``versions=False`` the current ones only), or with ``before_number``
        how many are numbered below it."""
        sql = "SELECT COUNT(*) FROM turns WHERE conversation_id = ?"
        params: list[Any] = [conversation_id]
        if before_number is not None:
            sql += " AND number < ?"
            params.append(before_number)
        if not versions:
            sql += " AND superseded_by IS NULL"
        row = await self._one(sql, params)
        return int(row[0]) if row else 0

    async def stored_ranges(self, conversation_id: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """The entry numbers and turn numbers a conversation holds, each as
        ``(lowest, highest)``, or ``None`` when it has none."""
        e = await self._one("SELECT MIN(number), MAX(number) FROM entries WHERE conversation_id = ?",
                            (conversation_id,))
        t = await self._one("SELECT MIN(number), MAX(number) FROM turns WHERE conversation_id = ?",
                            (conversation_id,))
        return ((int(e[0]), int(e[1])) if e[0] is not None else None,
                (int(t[0]), int(t[1])) if t[0] is not None else None)

    async def entry_range_before(self, conversation_id: int, turn_number: int) -> tuple[int, int] | None:
        """``(lowest, highest)`` entry number of the turns before turn
        ``turn_number``, or ``None`` when there are none."""
        row = await self._one(
            "SELECT MIN(e.number), MAX(e.number) FROM entries e JOIN turns t ON t.id = e.turn_id"
            " WHERE e.conversation_id = ? AND t.number < ?", (conversation_id, turn_number))
        return (int(row[0]), int(row[1])) if row[0] is not None else None

    async def find_output(self, conversation_id: int, output_id: str) -> int | None:
        """The number of the first tool result whose ``meta.output_id`` or
        audit event id (without ``ev-``) begins with ``output_id``, or ``None``."""
        oid = (output_id or "").lower()
        row = await self._one(
            "SELECT number FROM entries WHERE conversation_id = ? AND kind = 'tool_result' AND"
            " (audit_event_id LIKE ? OR json_extract(meta, '$.output_id') LIKE ?) ORDER BY number LIMIT 1",
            (conversation_id, f"ev-{oid}%", f"{oid}%"))
        return int(row[0]) if row else None

    async def turn_endings(self, turn_ids: Iterable[int]) -> dict[int, tuple[str, str | None, str | None, str | None]]:
        """Per turn id that exists: ``(state, ended_at, error, last entry's
        created_at)``; a turn that is gone is left out."""
        ids = sorted({int(t) for t in turn_ids})
        out: dict[int, tuple[str, str | None, str | None, str | None]] = {}
        for chunk, marks in in_chunks(ids):
            rows = await self._all(
                f"SELECT t.id, t.state, t.ended_at, t.error,"
                f" (SELECT MAX(e.created_at) FROM entries e WHERE e.turn_id = t.id)"
                f" FROM turns t WHERE t.id IN ({marks})", chunk)
            for r in rows:
                out[int(r[0])] = (r[1], r[2], r[3], r[4])
        return out

    async def set_conversation_tools(self, conversation_id: int, names: list[str] | None) -> None:
        """Keep the explicit tool list (``--tool``) the conversation was started with; None clears it."""
        async with self.transaction() as db:  # not bare: it would join another write's transaction
            await db.execute("UPDATE conversations SET tools = ? WHERE id = ?",
                             (json.dumps(names) if names is not None else None, conversation_id))

    async def conversation_tools(self, conversation_id: int) -> list[str] | None:
        """The explicit tool list the conversation was started with, or None."""
        rows = await self._all("SELECT tools FROM conversations WHERE id = ?", (conversation_id,))
        if not rows or rows[0][0] is None:
            return None
        try:
            names = json.loads(rows[0][0])
        except ValueError:
            return None
        return [str(n) for n in names] if isinstance(names, list) else None

    _OPEN_OWNERS = "SELECT owner FROM turns WHERE conversation_id = ? AND state = 'open'"

    async def _refuse_if_held(self, db: aiosqlite.Connection, conversation_id: int) -> None:
        """Inside a write transaction: raise :class:`ConversationBusy` when
        an ``open`` turn of the conversation belongs to another live process
        (the claim of :meth:`begin_turn`, also kept by
        :meth:`delete_conversation`)."""
        for (owner,) in await db.execute_fetchall(self._OPEN_OWNERS, (conversation_id,)):
            if self._held_elsewhere(owner):
                raise ConversationBusy(conversation_id, owner)

    async def check_not_busy(self, conversation_id: int) -> None:
        """Raise :class:`ConversationBusy` now when another live wisp runs a
        turn of the conversation: a read, so that ``wisp ask --continue``
        says so at once instead of first waiting for an endpoint the other
        wisp keeps busy. :meth:`begin_turn`'s claim stays the rule that
        counts (a turn may start between the two)."""
        for (owner,) in await self._all(self._OPEN_OWNERS, (conversation_id,)):
            if self._held_elsewhere(owner):
                raise ConversationBusy(conversation_id, owner)

    def _held_elsewhere(self, owner: str | None) -> bool:
        """True when ``owner`` (a turn's ``host:pid``) is another process on
        this host that is still alive; False for this process, a dead one,
        another host, or no owner."""
        if not owner or owner == self._owner:
            return False
        return tag_alive(owner) is True

    async def recover_open_turns(self) -> list[int]:
        """Mark ``stopped`` every turn left ``open`` by a process that is gone,
        with ``error`` = :data:`RECOVERED_ERROR`; returns their ids.

        The entries such a turn was still streaming (``meta.streaming``: a
        reply, its thinking, a command's output, written as they arrived)
        are kept, marked ``partial`` with ``reason`` ``exited``; a tool
        result is also marked ``error`` and ends with :data:`RECOVERED_OUTPUT`.

        Call it on start-up. A turn is left alone when a store of this
        process began it, has not ended it and is still open, or when it was
        begun by another process on this
        host that is still alive (so a second wisp does not stop the first
        one's turn). A turn from another host is recovered.
        """
        rows = await self._all("SELECT id, owner FROM turns WHERE state = 'open'")
        stale = [tid for tid, owner in rows if not self._runs_here(tid, owner) and not self._held_elsewhere(owner)]
        if not stale:
            return []
        async with self.transaction() as db:
            await _stop_turns(db, stale, utc_now())
        return stale

    def _live(self) -> set[int]:
        """The turns of this database file that a store of this process
        began and has not ended, and that store is still open."""
        return self._live_here

    def _runs_here(self, tid: int, owner: str | None) -> bool:
        """Whether turn ``tid`` (owned by ``owner``) is running in this
        process: begun by this store, or by another open store of this
        process that still owns it."""
        return tid in self._running or (tid in self._live_here and owner == self._owner)

    # -- entries ------------------------------------------------------------------

    async def add_entry(
        self,
        conversation_id: int,
        turn_id: int | None,
        kind: str,
        content: str,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        arguments: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> Entry:
        """Store an entry (number = the conversation's last + 1, from 1) and
        return it. ``arguments`` and ``meta`` are stored as JSON. Raises
        :class:`StoreError` for a bad kind, an unknown conversation, or a turn
        of another conversation."""
        if kind not in ENTRY_KINDS:
            raise StoreError(f"an entry is one of {', '.join(ENTRY_KINDS)}, not {kind!r}")
        meta = dict(meta or {})
        now = utc_now()
        args_json = None if arguments is None else _dumps(arguments)
        async with self.transaction() as db:
            cur = await db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
            if cur.rowcount == 0:
                raise StoreError(f"no conversation {conversation_id}")
            if turn_id is not None:
                row = next(iter(await db.execute_fetchall("SELECT conversation_id FROM turns WHERE id = ?",
                                                          (turn_id,))), None)
                if row is None or row[0] != conversation_id:
                    raise StoreError(f"no turn with id {turn_id} in conversation {conversation_id}")
            (number,), = await db.execute_fetchall(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM entries WHERE conversation_id = ?", (conversation_id,))
            cur = await db.execute(
                "INSERT INTO entries (conversation_id, turn_id, number, kind, content, tool_name,"
                " tool_call_id, arguments, meta, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, turn_id, number, kind, content or "", tool_name, tool_call_id,
                 args_json, _dumps(meta), now),
            )
            eid = cur.lastrowid
        return Entry(
            eid, conversation_id, turn_id, number, kind, content or "", tool_name, tool_call_id,
            _loads(args_json, None), meta, None, None, None, now,
        )

    async def update_entry(
        self, entry_id: int, *, content: str | None = None, meta: dict[str, Any] | None = None
    ) -> Entry:
        """Replace an entry's ``content`` and/or merge ``meta`` into its meta
        (a key given as ``None`` is removed); return the entry. Raises
        :class:`StoreError` for an unknown id."""
        async with self.transaction() as db:
            row = next(iter(await db.execute_fetchall("SELECT meta FROM entries WHERE id = ?", (entry_id,))), None)
            if row is None:
                raise StoreError(f"no entry with id {entry_id}")
            merged = _loads(row[0], {})
            if not isinstance(merged, dict):
                merged = {}
            for k, v in (meta or {}).items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            await db.execute(
                "UPDATE entries SET content = COALESCE(?, content), meta = ? WHERE id = ?",
                (content, _dumps(merged), entry_id),
            )
            (out,) = await db.execute_fetchall(f"SELECT {_ENTRY_COLS} FROM entries WHERE id = ?", (entry_id,))
        return _entry(out)

    async def set_entry_audit(self, entry_id: int, ref: AuditRef | None) -> None:
        """Record (or with ``None`` clear) the audit event that recorded an
        entry. Raises :class:`StoreError` for an unknown id."""
        values = (None, None, None) if ref is None else (ref.event_id, ref.file, ref.offset)
        async with self.transaction() as db:
            cur = await db.execute(
                "UPDATE entries SET audit_event_id = ?, audit_file = ?, audit_offset = ? WHERE id = ?",
                (*values, entry_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no entry with id {entry_id}")

    async def get_entry(self, conversation_id: int, number: int) -> Entry | None:
        """Entry ``number`` (1-based) of a conversation, or ``None``."""
        row = await self._one(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE conversation_id = ? AND number = ?",
            (conversation_id, number),
        )
        return _entry(row) if row else None

    async def entry_by_id(self, entry_id: int) -> Entry | None:
        """The entry with that id, or ``None``."""
        row = await self._one(f"SELECT {_ENTRY_COLS} FROM entries WHERE id = ?", (entry_id,))
        return _entry(row) if row else None

    async def entries(self, conversation_id: int, turn_id: int | None = None) -> list[Entry]:
        """A conversation's entries (or one turn's), in number order."""
        if turn_id is None:
            rows = await self._all(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE conversation_id = ? ORDER BY number",
                (conversation_id,),
            )
        else:
            rows = await self._all(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE conversation_id = ? AND turn_id = ?"
                " ORDER BY number",
                (conversation_id, turn_id),
            )
        return [_entry(r) for r in rows]

    async def last_prompts(self, conversation_id: int, limit: int = 200) -> list[str]:
        """The conversation's last ``limit`` prompts' texts, oldest first: one
        query over the prompts alone (issue 12: the prompt history is loaded
        without reading every entry of the last turns); the prompts of turns
        a ``/retry`` or ``/edit`` replaced are left out, as the transcript
        leaves those turns out."""
        rows = await self._all(
            "SELECT e.content FROM entries e LEFT JOIN turns t ON t.id = e.turn_id"
            " WHERE e.conversation_id = ? AND e.kind = 'prompt' AND t.superseded_by IS NULL"
            " ORDER BY e.number DESC LIMIT ?", (conversation_id, max(0, int(limit))))
        return [r[0] or "" for r in reversed(rows)]

    async def turn_entries(self, turn_ids: Iterable[int]) -> dict[int, list[Entry]]:
        """The entries of many turns at once: ``{turn_id: [entries in number
        order]}``, with a key (maybe an empty list) for every id asked, in the
        order asked. One query per 500 ids."""
        ids = list(dict.fromkeys(turn_ids))
        out: dict[int, list[Entry]] = {t: [] for t in ids}
        for chunk, marks in in_chunks(ids):
            rows = await self._all(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE turn_id IN ({marks})"
                " ORDER BY turn_id, number",
                chunk,
            )
            for r in rows:
                e = _entry(r)
                out[e.turn_id].append(e)  # type: ignore[index]
        return out
