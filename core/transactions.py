"""Write transactions that cancellation cannot split.

aiosqlite runs each statement on the connection's own thread, in the order
they were queued; cancelling the coroutine that awaits a statement does not
stop it. So a cancelled ``await db.execute("BEGIN IMMEDIATE")`` still begins
a transaction, and if the ``ROLLBACK`` is then never queued, the connection
stays inside it: its next write fails ("cannot start a transaction within a
transaction") and other processes see "database is locked" (issue "Nothing
runs, leaks, hangs or is lost that shouldn't be", "Nothing is lost": Esc or
quit during a store write wedged the database).

Every write transaction in wisp goes through :func:`immediate`: the
``BEGIN``, the ``COMMIT`` and the ``ROLLBACK`` are each awaited to their end
(:func:`to_the_end`) even when the task is cancelled meanwhile, and a block
that is cancelled (or fails) is rolled back, so the connection always leaves
the block outside a transaction. A cancellation is never swallowed: it is
raised again once the statement has ended.

This module is a leaf: it knows no table.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, TypeVar

__all__ = ["immediate", "to_the_end"]

T = TypeVar("T")


async def to_the_end(aw: Awaitable[T]) -> T:
    """Await ``aw`` (run as its own task) until it ends, even if the caller is
    cancelled meanwhile, then return its result; if the caller was cancelled,
    raise :class:`asyncio.CancelledError` instead (after ``aw`` ended, its
    outcome then being dropped). Raises what ``aw`` raises otherwise.

    Use it for a step that must not be left half done: a ``COMMIT``, a
    ``ROLLBACK``, or a write whose result (a new row's id) the caller must
    keep. The wait is as long as the step takes (at most SQLite's busy
    timeout for a statement)."""
    task = asyncio.ensure_future(aw)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise asyncio.CancelledError()
    return task.result()


async def _execute(db: Any, sql: str) -> None:
    await db.execute(sql)


async def _rollback(db: Any) -> None:
    """Roll back whatever transaction ``db`` may be in, to the end. No
    transaction (the BEGIN failed, or the COMMIT went through) and a closed
    connection are not errors here."""
    try:
        await to_the_end(_execute(db, "ROLLBACK"))
    except (sqlite3.Error, ValueError):  # "no transaction is active"; "Connection closed"
        pass


@asynccontextmanager
async def immediate(db: Any) -> AsyncIterator[Any]:
    """``async with immediate(db):`` runs the block in one ``BEGIN IMMEDIATE``
    transaction on ``db`` (an aiosqlite connection in autocommit mode,
    ``isolation_level=None``), committed when the block ends, rolled back
    when it raises or is cancelled (at any await inside it, or while the
    ``BEGIN`` waits for another process's lock, up to the busy timeout).

    The ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` are awaited to their end even
    when the task is cancelled meanwhile (:func:`to_the_end`); the
    cancellation is raised after. A cancellation that arrives while the
    ``COMMIT`` runs leaves the block committed. A ``COMMIT`` that fails
    (``database is locked``) is rolled back and its error raised. So ``db``
    is never left inside a transaction.

    Callers serialise their own use of ``db`` (a :class:`wisp.core.store.Store`
    holds a lock around it). Raises ``sqlite3.Error`` from the statements,
    and whatever the block raises.
    """
    try:
        await to_the_end(_execute(db, "BEGIN IMMEDIATE"))
    except asyncio.CancelledError:
        await _rollback(db)  # the BEGIN ran before the cancellation was raised
        raise
    try:
        yield db
    except BaseException:
        await _rollback(db)
        raise
    try:
        await to_the_end(_execute(db, "COMMIT"))
    except BaseException:
        await _rollback(db)  # still inside the transaction when the COMMIT itself failed
        raise
