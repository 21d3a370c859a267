"""Open wisp's database with every table's migrations: the store's, the layered context's, episodic memory's, the edits'.

Each owner keeps its own steps (:data:`wisp.core.store.MIGRATIONS`,
:data:`wisp.core.context.schema.MIGRATIONS`,
:data:`wisp.core.episodes.schema.MIGRATIONS`,
:data:`wisp.core.tools.edit_store.MIGRATIONS`); this module only lists them,
in the order they run, so that the store never imports a feature (DESIGN.md,
"Arrows that never exist": storage knows no feature).

Damage is named, never an "internal error": a database file that is not a
regular file (a FIFO, a device, a socket, a directory) is refused before
anything opens it (opening a FIFO waits forever for a writer); a database
that is missing or empty while the audit log holds events of its
conversations is refused rather than silently started afresh (the
conversations would be lost, and new ones would take their ids); and a file
SQLite finds malformed, full or unreadable becomes :class:`DatabaseDamaged`,
whose message is one line naming the file and what to do
(:func:`damage_message`).
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from pathlib import Path
from typing import Any

from .audit import FILE_PATTERN
from .context import schema as context_schema
from .episodes import schema as episodes_schema
from .tools import edit_store
from .migrations import Migration
from .store import Store, StoreError

__all__ = ["FEATURE_MIGRATIONS", "DatabaseDamaged", "damage_message", "refuse_unusable", "open_store",
           "audit_dir_of"]

#: The features' steps, after the store's own.
FEATURE_MIGRATIONS: tuple[Migration, ...] = (*context_schema.MIGRATIONS, *episodes_schema.MIGRATIONS,
                                             *edit_store.MIGRATIONS)

#: An audit event that belongs to a conversation, as the audit log writes it (compact JSON).
_CONVERSATION_EVENT = re.compile(rb'"conversation":\d')


class DatabaseDamaged(StoreError):
    """The database cannot be used as it is. ``path`` the file; the message
    is one line that names it and says what to do (restore it, move it
    aside, free space, fix its permissions)."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = Path(path)
        super().__init__(message)


def _kind(mode: int) -> str | None:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _audited(audit_dir: Path) -> Path | None:
    """The first audit file in ``audit_dir`` holding an event of a
    conversation, or ``None`` (no such directory, file or event)."""
    try:
        names = sorted(n for n in os.listdir(audit_dir) if FILE_PATTERN.match(n))
    except OSError:
        return None
    for name in names:
        path = audit_dir / name
        try:
            with open(path, "rb") as fh:
                while True:
                    block = fh.read(1 << 20)
                    if not block:
                        break
                    if _CONVERSATION_EVENT.search(block):
                        return path
        except OSError:
            continue
    return None


def refuse_unusable(path: str | os.PathLike[str], audit_dir: str | os.PathLike[str] | None = None) -> None:
    """Raise :class:`DatabaseDamaged` when the database at ``path`` must not
    be opened: it is not a regular file (never opened, so a FIFO cannot
    hang wisp), or it is missing or 0 bytes (with no ``-wal`` file holding
    its pages) while ``audit_dir``'s audit log holds events of its
    conversations. ``audit_dir`` ``None`` (the audit log is off) skips that
    second check. Only ``stat`` and directory reads: nothing blocks."""
    p = Path(path).expanduser()
    try:
        st: os.stat_result | None = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise DatabaseDamaged(p, f"cannot reach the database {p}: {exc.strerror or exc}; check the permissions "
                                 "of its directory, or point store.path elsewhere") from None
    if st is not None:
        kind = _kind(st.st_mode)
        if kind is not None:
            raise DatabaseDamaged(p, f"the database {p} is {kind}, not a file, and wisp does not open it (reading "
                                     "it could wait forever); move it aside, or point store.path at a file")
    if audit_dir is None or (st is not None and st.st_size > 0):
        return
    wal = Path(f"{p}-wal")
    if st is not None and wal.is_file() and wal.stat().st_size > 0:
        return  # the pages are in the write-ahead log, which SQLite reads back
    record = _audited(Path(audit_dir).expanduser())
    if record is None:
        return
    state = "missing" if st is None else "empty (0 bytes)"
    raise DatabaseDamaged(p, f"the database {p} is {state}, but the audit log {record.parent} records its "
                             "conversations: restore the database from a backup; to start afresh on purpose, move "
                             "the audit log aside first (wisp does not start a new database under an old log)")


def damage_message(path: str | os.PathLike[str], exc: BaseException) -> str | None:
    """One line for an SQLite error ``exc`` (or an error it caused) that says
    the file at ``path`` is damaged, full or unusable, naming the file and
    what to do; ``None`` for any other error (a bug stays a bug) and for a
    lock another wisp holds."""
    if isinstance(exc, DatabaseDamaged):
        return str(exc)
    found = _sqlite_cause(exc)
    if found is None:
        return None
    exc = found
    p = Path(path).expanduser()
    text = str(exc).lower()
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return (f"the database {p} is damaged ({exc}); restore it from a backup, or move it aside (with its "
                "-wal and -shm files) to start a new one")
    if "full" in text:
        return (f"the database {p} cannot grow ({exc}): free space on its disk (or raise the file size limit, "
                "ulimit -f), then run wisp again; nothing was lost that had been saved")
    if "readonly" in text or "read-only" in text or "unable to open" in text or "access" in text:
        return (f"the database {p} cannot be opened for writing ({exc}); check the file's and its directory's "
                "permissions and owner, or point store.path elsewhere")
    if "disk i/o" in text or "i/o error" in text:
        return (f"the database {p} could not be read or written ({exc}): free space on its disk (or raise the "
                "file size limit, ulimit -f) and check the disk for errors, then run wisp again; if it persists, "
                "restore it from a backup or move it aside")
    if "locked" in text or "busy" in text:
        return None  # another wisp holds it: not damage
    return (f"the database {p} cannot be used ({exc}); restore it from a backup, or move it aside (with its "
            "-wal and -shm files) to start a new one")


def audit_dir_of(config: Any) -> Path | None:
    """The audit log's directory a :class:`~wisp.core.config.Config` names,
    or ``None`` when ``audit.enabled`` is off (then there is no log to
    check a missing database against)."""
    return Path(config.audit_dir) if config.get("audit.enabled") else None


async def open_store(path: str | os.PathLike[str], audit_dir: str | os.PathLike[str] | None = None) -> Store:
    """:meth:`wisp.core.store.Store.open` with every feature's tables, after
    :func:`refuse_unusable` (``audit_dir``: the audit log's directory, or
    ``None`` when it is off). Raises :class:`DatabaseDamaged` for a file
    that is refused, malformed, full or unreadable; otherwise what
    :meth:`~wisp.core.store.Store.open` raises."""
    refuse_unusable(path, audit_dir)
    try:
        return await Store.open(path, FEATURE_MIGRATIONS)
    except sqlite3.DatabaseError as exc:
        message = damage_message(path, exc)
        if message is None:
            raise
        raise DatabaseDamaged(path, message) from None
    except StoreError as exc:  # a migration step that failed on a damaged file
        cause = _sqlite_cause(exc)
        message = damage_message(path, cause) if cause is not None else None
        if message is None:
            raise
        raise DatabaseDamaged(path, message) from None


def _sqlite_cause(exc: BaseException) -> sqlite3.DatabaseError | None:
    """The SQLite error behind ``exc`` (its causes and contexts, a few deep), or ``None``."""
    seen = 0
    here: BaseException | None = exc
    while here is not None and seen < 6:
        if isinstance(here, sqlite3.DatabaseError):
            return here
        here = here.__cause__ or here.__context__
        seen += 1
    return None
