"""SQL of episodic memory's tables (issue "Episodic memory across conversations"): the ``episodes`` owner's migration steps.

Tables (all times are UTC ISO 8601 text with ``Z``, as the store writes them,
so they sort as text):

- ``episode_exchanges``: one captured exchange (the person's request and the
  model's readable final reply) with its origin (workspace, transport,
  channel, thread, sender, conversation, turn), the model and endpoint that
  answered, its ``outcome`` (``completed``, ``failed``, ``timed out``,
  ``stopped``; ``NULL`` while its turn still runs), when the request arrived
  (``requested_at``) and when processing finished (``finished_at``).
  ``batch_id`` is ``NULL`` while the exchange awaits refinement, else the
  batch that holds (claims or recorded) it.
- ``episode_batches``: one refinement batch. ``state`` is ``claimed`` while
  a refiner works on it (this is the lock in the database: an exchange
  whose ``batch_id`` points at a claimed batch is not handed to any other
  refiner), ``recorded`` once its memories are stored (never processed
  again), or ``failed`` (its exchanges were released for a later run).
- ``episode_memories``: one memory. ``id`` is the number in ``MEM-000001``,
  taken from ``episode_counters`` (never ``max(id) + 1``), so a forgotten
  number is never given again. ``event_at`` is the earliest source request,
  ``event_end`` the latest source's end; origin columns are derived from the
  sources.
- ``episode_memory_sources``: which exchanges a memory was written from.
- ``episode_memories_fts``: FTS5 over summaries (porter stemming, so
  "launched" finds "launch"), kept by triggers.
- ``episode_jobs``: one refinement run (``wisp memory refine``, or the TUI's
  timer), with its outcome, for ``wisp memory status``.
- ``episode_counters``: named counters; ``memory`` holds the last memory
  number given.

Step ``m002_unstructured_fallbacks`` (issue "Compaction you can see and
trust"): ``episode_memories.unstructured`` marks a memory that is the
model's answer as it came, which was not in the format asked for;
``episode_batches.fallback`` says how a batch fell back (``unstructured``,
``retried``: an empty answer retried with a stricter prompt, which then
kept something, ``retried-nothing``: which still kept nothing, ``stated``: where wisp
kept the person's statements, ``stated-beside``: where it kept those that no memory of
the model named beside them), ``NULL`` when it did not.

Outcomes and states are checked in Python (:mod:`.capture`, :mod:`.refine`),
not by SQL ``CHECK`` constraints, like the store's own tables.
"""

from ..migrations import sql_step


M001_SQL = """
CREATE TABLE episode_counters (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
);
INSERT INTO episode_counters (name, value) VALUES ('memory', 0);

CREATE TABLE episode_jobs (
    id              INTEGER PRIMARY KEY,
    trigger         TEXT NOT NULL,
    owner           TEXT,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    outcome         TEXT NOT NULL DEFAULT 'running',
    model           TEXT,
    batches         INTEGER NOT NULL DEFAULT 0,
    failed_batches  INTEGER NOT NULL DEFAULT 0,
    exchanges       INTEGER NOT NULL DEFAULT 0,
    memories        INTEGER NOT NULL DEFAULT 0,
    model_calls     INTEGER NOT NULL DEFAULT 0,
    error           TEXT
);

CREATE TABLE episode_batches (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER REFERENCES episode_jobs (id) ON DELETE SET NULL,
    owner       TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'claimed',
    claimed_at  TEXT NOT NULL,
    ended_at    TEXT,
    exchanges   INTEGER NOT NULL DEFAULT 0,
    bytes       INTEGER NOT NULL DEFAULT 0,
    memories    INTEGER NOT NULL DEFAULT 0,
    error       TEXT
);
CREATE INDEX episode_batches_claimed ON episode_batches (state) WHERE state = 'claimed';

CREATE TABLE episode_exchanges (
    id                INTEGER PRIMARY KEY,
    workspace         TEXT NOT NULL,
    transport         TEXT NOT NULL,
    channel           TEXT NOT NULL,
    thread            TEXT NOT NULL DEFAULT '',
    sender            TEXT NOT NULL DEFAULT '',
    conversation_id   INTEGER,
    turn_id           INTEGER UNIQUE,
    turn_number       INTEGER,
    model             TEXT,
    endpoint          TEXT,
    outcome           TEXT,
    error             TEXT,
    request           TEXT NOT NULL DEFAULT '',
    request_bytes     INTEGER NOT NULL DEFAULT 0,
    request_truncated INTEGER NOT NULL DEFAULT 0,
    reply             TEXT NOT NULL DEFAULT '',
    reply_bytes       INTEGER NOT NULL DEFAULT 0,
    reply_truncated   INTEGER NOT NULL DEFAULT 0,
    requested_at      TEXT NOT NULL,
    finished_at       TEXT,
    captured_at       TEXT NOT NULL,
    batch_id          INTEGER REFERENCES episode_batches (id) ON DELETE SET NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_error        TEXT
);
CREATE INDEX episode_exchanges_awaiting ON episode_exchanges (requested_at, id) WHERE batch_id IS NULL;
CREATE INDEX episode_exchanges_batch ON episode_exchanges (batch_id);
CREATE INDEX episode_exchanges_pending ON episode_exchanges (turn_id) WHERE outcome IS NULL;

CREATE TABLE episode_memories (
    id               INTEGER PRIMARY KEY,
    summary          TEXT NOT NULL,
    workspace        TEXT NOT NULL,
    transport        TEXT NOT NULL,
    channel          TEXT NOT NULL,
    thread           TEXT NOT NULL DEFAULT '',
    conversation_id  INTEGER,
    event_at         TEXT NOT NULL,
    event_end        TEXT,
    recorded_at      TEXT NOT NULL,
    batch_id         INTEGER REFERENCES episode_batches (id) ON DELETE SET NULL,
    model            TEXT
);
CREATE INDEX episode_memories_event ON episode_memories (event_at DESC, id DESC);
CREATE INDEX episode_memories_ws_event ON episode_memories (workspace, event_at DESC, id DESC);

CREATE TABLE episode_memory_sources (
    memory_id    INTEGER NOT NULL REFERENCES episode_memories (id) ON DELETE CASCADE,
    exchange_id  INTEGER NOT NULL REFERENCES episode_exchanges (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, exchange_id)
);
CREATE INDEX episode_memory_sources_exchange ON episode_memory_sources (exchange_id);

CREATE VIRTUAL TABLE episode_memories_fts USING fts5(
    summary, content='episode_memories', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER episode_memories_ai AFTER INSERT ON episode_memories BEGIN
    INSERT INTO episode_memories_fts (rowid, summary) VALUES (new.id, new.summary);
END;
CREATE TRIGGER episode_memories_ad AFTER DELETE ON episode_memories BEGIN
    INSERT INTO episode_memories_fts (episode_memories_fts, rowid, summary)
    VALUES ('delete', old.id, old.summary);
END;
CREATE TRIGGER episode_memories_au AFTER UPDATE OF summary ON episode_memories BEGIN
    INSERT INTO episode_memories_fts (episode_memories_fts, rowid, summary)
    VALUES ('delete', old.id, old.summary);
    INSERT INTO episode_memories_fts (rowid, summary) VALUES (new.id, new.summary);
END;
"""

#: The steps of these tables, owned here and handed to the store by
#: :func:`wisp.core.database.open_store` (issue "One core, built once").
MIGRATIONS = [
    sql_step("episodes", "m001_exchanges_batches_memories", M001_SQL, legacy_version=3),
    sql_step("episodes", "m002_unstructured_fallbacks",
             "ALTER TABLE episode_memories ADD COLUMN unstructured INTEGER NOT NULL DEFAULT 0;\n"
             "ALTER TABLE episode_batches ADD COLUMN fallback TEXT;"),
]
