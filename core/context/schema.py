"""SQL of the layered context's tables (issue "Layered context"): the ``context`` owner's migration steps.

- ``facts``: one row per fact *version*. A fact is identified by its
  ``subject`` and ``name`` within a conversation; each version has a number
  (shown as ``c1``, ``c2`` …, counted per conversation, as in the reference
  document's fact history), a value, a source (``person``, ``tool``,
  ``model``), a method (``set``, ``observed``, ``noted``, ``inferred``), the
  tool that observed it, a state (``current`` or ``superseded``), whether it
  is a model's proposal not yet kept, the turn it was recorded in and the
  entries it came from (a JSON list of entry numbers).
- ``summaries``: the running summary's versions; ``covers`` is the JSON list
  of turn numbers a version covers (turns that may leave the window),
  ``kept_whole`` the turns a version tried to cover but could not (their
  items were missing; they stay whole), ``refs`` the JSON list of the
  covered turns' tool outputs (entry, turn, tool, arguments, digest), which
  the summary layer lists as references, and ``items`` the JSON object
  ``{turn: ["kind:text", …]}`` of what the coverage check requires.
- ``side_call_shapes``: per endpoint URL and model, the form of shaped
  output its side calls take (``json_schema``, ``json_object``, ``format``
  or ``plain`` when the server refused a schema), why, and when that was
  seen (:mod:`wisp.core.context.shapes`).
- ``token_calibration``: per model, the ratio of the prompt tokens the
  endpoint reported to wisp's estimate, the samples behind it, and the last
  context window seen (tokens), so that ``wisp inspect context`` can work
  without asking the endpoint; ``floor`` (m006), the least ratio to plan
  with, learned from refusals for size that gave no count
  (:mod:`wisp.core.context.calibration`).

- ``turn_renders`` (m005): an ended turn as the composer renders it, kept
  so that the next request does not render it again (issue 12, "Compose
  incrementally"; :mod:`wisp.core.context.render_cache`): per conversation,
  turn number and form (``whole``: tool outputs in full, else as
  references), the ``key`` of what the render depends on (the turn's end,
  the tools' reference forms, the render's version), the chat ``messages``
  (JSON), the entry numbers standing as ``refs`` (JSON) and ``tokens``,
  wisp's uncalibrated estimate of the messages.

- ``turn_usage`` (m007): per conversation and turn, the requests it made,
  its last request's prompt tokens and the part the server's prompt cache
  served, and the prompt tokens evaluated over the turn
  (:mod:`wisp.core.context.usage`).

The task is a fact of subject ``task`` (wisp-memory-tool.txt, "task").
"""

from ..migrations import sql_step
from .usage import USAGE_SQL


M001_SQL = """
CREATE TABLE facts (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    number          INTEGER NOT NULL,
    subject         TEXT NOT NULL,
    name            TEXT NOT NULL DEFAULT '',
    value           TEXT NOT NULL,
    source          TEXT NOT NULL,
    method          TEXT NOT NULL DEFAULT '',
    tool            TEXT,
    state           TEXT NOT NULL DEFAULT 'current',
    proposal        INTEGER NOT NULL DEFAULT 0,
    kept_at         TEXT,
    forgotten       INTEGER NOT NULL DEFAULT 0,
    turn            INTEGER,
    entries         TEXT NOT NULL DEFAULT '[]',
    superseded_by   INTEGER,
    superseded_at   TEXT,
    created_at      TEXT NOT NULL,
    audit_event_id  TEXT,
    UNIQUE (conversation_id, number)
);
CREATE INDEX facts_key ON facts (conversation_id, subject, name, state);

CREATE TABLE summaries (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    version         INTEGER NOT NULL,
    text            TEXT NOT NULL,
    covers          TEXT NOT NULL DEFAULT '[]',
    kept_whole      TEXT NOT NULL DEFAULT '[]',
    refs            TEXT NOT NULL DEFAULT '[]',
    items           TEXT NOT NULL DEFAULT '{}',
    model           TEXT,
    attempts        INTEGER NOT NULL DEFAULT 1,
    created_at      TEXT NOT NULL,
    audit_event_id  TEXT,
    UNIQUE (conversation_id, version)
);

CREATE TABLE token_calibration (
    model           TEXT PRIMARY KEY,
    ratio           REAL NOT NULL,
    samples         INTEGER NOT NULL DEFAULT 0,
    context_window  INTEGER,
    updated_at      TEXT NOT NULL
);
"""

TURN_RENDERS_SQL = """
CREATE TABLE turn_renders (
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_number     INTEGER NOT NULL,
    whole           INTEGER NOT NULL,
    key             TEXT NOT NULL,
    messages        TEXT NOT NULL,
    refs            TEXT NOT NULL DEFAULT '[]',
    tokens          INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, turn_number, whole)
);
"""

#: The steps of these tables, owned here and handed to the store by
#: :func:`wisp.core.database.open_store` (issue "One core, built once").
MIGRATIONS = [
    sql_step("context", "m001_facts_summaries_calibration", M001_SQL, legacy_version=2),
    # the part of a summary version wisp completed itself, and the identifiers it keeps
    # (issue "Compaction you can see and trust", "A summary that always covers")
    sql_step("context", "m002_summary_completion",
             "ALTER TABLE summaries ADD COLUMN completion TEXT NOT NULL DEFAULT '';\n"
             "ALTER TABLE summaries ADD COLUMN kept TEXT NOT NULL DEFAULT '[]';"),
    # which form of shaped output each endpoint's side calls take (issue "Compaction you can see
    # and trust", "Structured side calls": "remember that per endpoint")
    sql_step("context", "m003_side_call_shapes",
             "CREATE TABLE side_call_shapes (\n"
             "    endpoint    TEXT NOT NULL,\n"
             "    model       TEXT NOT NULL,\n"
             "    form        TEXT NOT NULL,\n"
             "    reason      TEXT NOT NULL DEFAULT '',\n"
             "    updated_at  TEXT NOT NULL,\n"
             "    PRIMARY KEY (endpoint, model)\n"
             ");"),
    # what made a summary version (the fitting, /compact, /compact undo), the version it was built
    # on, the version an undo restored, and the focus /compact was given
    sql_step("context", "m004_summary_origin",
             "ALTER TABLE summaries ADD COLUMN origin TEXT NOT NULL DEFAULT 'fit';\n"
             "ALTER TABLE summaries ADD COLUMN base INTEGER;\n"
             "ALTER TABLE summaries ADD COLUMN restores INTEGER;\n"
             "ALTER TABLE summaries ADD COLUMN focus TEXT;"),
    # each ended turn rendered once, kept for the next request and the next process
    # (issue 12, "Compose incrementally"; wisp.core.context.render_cache)
    sql_step("context", "m005_turn_renders", TURN_RENDERS_SQL),
    # the least ratio to plan with, learned from a server that refused a request for size without
    # saying its count (an older llama.cpp), so that the next request is not refused again
    sql_step("context", "m006_calibration_floor", "ALTER TABLE token_calibration ADD COLUMN floor REAL;"),
    # per turn, the prompt tokens the server evaluated and those its prompt cache served, so that
    # /inspect context shows the cache at work (wisp.core.context.usage)
    sql_step("context", "m007_turn_usage", USAGE_SQL),
]
