"""Named schema migrations: each feature owns the steps of its own tables.

A :class:`Migration` is one named step (``m001_conversations_turns_entries``)
of one owner (``store``, ``context``, ``episodes``). The store owns
conversations, turns and entries; a feature that keeps tables of its own
owns their schema and registers its steps (issue "One core, built once",
"Each table has one owner"; the shape of simonw/llm's migrations, named
functions run once each). :func:`migrate` runs the steps a database has not
had, in the order given, each in one transaction with its record in the
``_migrations`` table, so a failed step leaves the database as it was
before it; each transaction is :func:`wisp.core.transactions.immediate`, so
a cancelled open (quit while migrating) leaves none half open either.

Databases written before named migrations kept a number in ``PRAGMA
user_version`` (1 to :data:`LEGACY_VERSION`); a step's ``legacy_version``
says which number included it, so such a database is taken over without
running anything twice. A migrated database has ``user_version``
:data:`NAMED_VERSION`, which older wisps refuse as newer than they know.
This module knows no table (it imports only :mod:`wisp.core.transactions`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from .transactions import immediate
from .clock import utc_now

__all__ = ["Migration", "MigrationError", "sql_step", "migrate", "applied_steps", "LEGACY_VERSION", "NAMED_VERSION"]

#: The last ``user_version`` of the numbered scheme (conversations, the layered context,
#: episodic memory, a conversation's tools).
LEGACY_VERSION = 4
#: ``user_version`` of a database under named migrations.
NAMED_VERSION = 1000


class MigrationError(Exception):
    """A database this wisp cannot bring up to date: it is newer than this
    wisp knows, or a step failed. The message is one line naming the file
    and the step."""


@dataclass(frozen=True)
class Migration:
    """One step: ``owner`` (the module that owns the tables), ``name``
    (``m001_…``, unique within its owner), ``apply`` (an async function of
    the aiosqlite connection, run inside the step's transaction) and
    ``legacy_version`` (the numbered ``user_version`` that included it, or
    ``None``)."""

    owner: str
    name: str
    apply: Callable[[Any], Awaitable[None]]
    legacy_version: int | None = None

    @property
    def key(self) -> str:
        """``owner.name``, as ``_migrations`` records it."""
        return f"{self.owner}.{self.name}"


def _split_sql(script: str) -> list[str]:
    """Cut a script into complete statements (triggers stay whole)."""
    out: list[str] = []
    buf: list[str] = []
    for ch in script:
        buf.append(ch)
        if ch == ";":
            text = "".join(buf)
            if sqlite3.complete_statement(text):
                if text.strip(" \t\r\n;"):
                    out.append(text.strip())
                buf = []
    rest = "".join(buf).strip()
    if rest:
        out.append(rest)
    return out


def sql_step(owner: str, name: str, script: str, *, legacy_version: int | None = None) -> Migration:
    """A step that runs a SQL ``script`` (statements ended by ``;``)."""
    statements = _split_sql(script)

    async def apply(db: Any) -> None:
        for stmt in statements:
            await db.execute(stmt)

    apply.__name__ = name
    return Migration(owner, name, apply, legacy_version)


def _now() -> str:
    return utc_now()


async def _version(db: Any) -> int:
    ((version,),) = await db.execute_fetchall("PRAGMA user_version")
    return int(version)


async def applied_steps(db: Any) -> set[str]:
    """The ``owner.name`` of every step the database has had (empty before any)."""
    if not await db.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"):
        return set()
    return {str(r[0]) for r in await db.execute_fetchall("SELECT owner || '.' || name FROM _migrations")}


async def migrate(db: Any, path: Path, steps: Sequence[Migration]) -> list[str]:
    """Run the ``steps`` ``db`` has not had, in order; returns their keys.

    ``db`` is an aiosqlite connection in autocommit mode. Raises
    :class:`MigrationError` when the database has a ``user_version`` this
    wisp does not know, has had a step of a known owner that ``steps`` does
    not list (a newer wisp wrote it), or a step fails (the step's
    transaction is rolled back)."""
    keys = [s.key for s in steps]
    if len(set(keys)) != len(keys):
        raise ValueError("two migrations have the same owner and name")
    version = await _version(db)
    if version > LEGACY_VERSION and version != NAMED_VERSION:
        raise MigrationError(f"{path}: schema version {version} is newer than this wisp knows; upgrade wisp")
    async with immediate(db):
        await db.execute("CREATE TABLE IF NOT EXISTS _migrations (owner TEXT NOT NULL, name TEXT NOT NULL,"
                         " applied_at TEXT NOT NULL, PRIMARY KEY (owner, name))")
        version = await _version(db)  # another process may have moved it meanwhile
        if version <= LEGACY_VERSION:
            for step in steps:  # a numbered database: the steps it had are recorded, not run
                if step.legacy_version is not None and step.legacy_version <= version:
                    await db.execute("INSERT OR IGNORE INTO _migrations (owner, name, applied_at) VALUES (?, ?, ?)",
                                     (step.owner, step.name, _now()))
            await db.execute(f"PRAGMA user_version = {NAMED_VERSION}")
    done = await applied_steps(db)
    owners = {s.owner for s in steps}
    unknown = sorted(k for k in done if k.split(".", 1)[0] in owners and k not in keys)
    if unknown:
        raise MigrationError(f"{path}: the database has had {unknown[0]}, which this wisp does not know: "
                             "it is newer than this wisp; upgrade wisp")
    ran: list[str] = []
    for step in steps:
        if step.key in done:
            continue
        try:
            async with immediate(db):
                async with db.execute("SELECT 1 FROM _migrations WHERE owner = ? AND name = ?",
                                      (step.owner, step.name)) as cur:
                    already = await cur.fetchone() is not None  # another process ran it meanwhile
                if not already:
                    await step.apply(db)
                    await db.execute("INSERT INTO _migrations (owner, name, applied_at) VALUES (?, ?, ?)",
                                     (step.owner, step.name, _now()))
        except sqlite3.Error as exc:
            raise MigrationError(f"{path}: migration {step.key} failed: {exc}") from exc
        if not already:
            ran.append(step.key)
    return ran
