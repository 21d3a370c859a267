"""The record of file edits, and ``/undo``: every edit's bytes before and after, kept in the store.

The ``edits`` owner's table (its migration steps are :data:`MIGRATIONS`,
listed by :func:`wisp.core.database.open_store`; the store itself knows no
feature):

- ``file_edits``: one row per edit ``edit_file`` made or tried: the
  conversation, the turn number, the entry of the tool call, the file
  (``path`` resolved, ``shown_path`` relative to the working directory), its
  bytes ``before`` (``NULL``: the edit created it) and ``after``, their
  SHA-256, ``state`` (``pending`` while it is written, then ``applied`` or
  ``failed`` with its ``error``), the file's ``mode`` and the directories
  made for it (``created_dirs``, JSON), when, and once ``/undo`` put it back,
  ``undone_at`` and the entry that records the undo (``undo_entry``).

The row is written before the file is (``pending``), so an edit whose wisp
died while writing is still known: ``/undo`` takes a pending edit as made
when the file holds its ``after``, and as never made when it holds its
``before``. Old content is in the store, not the audit log (which would
grow by a file at every edit); the audit log has each edit's hashes
(``edit.applied``) and each undo (``edit.undone``).

:meth:`EditBook.undo` puts back one turn's edits: all of them or none. It
refuses, saying how to see both versions, when a file changed since the edit
(by the person, a command or another program), or when a later turn edited
it again. It writes through :mod:`wisp.core.tools.file_write` (confined,
checked, atomic), and records itself: an entry (a ``notice`` outside any
turn, whose ``meta["undo"]`` names the turn, the edits and the files), its
audit event, and the rows marked undone. Nothing is deleted: what the undo
replaced is the edit's ``after``, which stays in the row.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context.workspace import FileChange
from ..migrations import sql_step
from ..store import utc_now
from .file_write import Changed, HardLinkedFile, NotAFile, remove_checked, replace_checked

__all__ = ["MIGRATIONS", "EditBook", "EditRecord", "UndoRefused", "UndoDone", "sha256"]

MIGRATIONS = [
    sql_step("edits", "m001_file_edits", """
    CREATE TABLE file_edits (
        id              INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        turn            INTEGER,
        call_entry      INTEGER,
        path            TEXT NOT NULL,
        shown_path      TEXT NOT NULL,
        before          BLOB,
        after           BLOB NOT NULL,
        before_sha256   TEXT,
        after_sha256    TEXT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending',
        error           TEXT,
        mode            INTEGER,
        created_dirs    TEXT NOT NULL DEFAULT '[]',
        created_at      TEXT NOT NULL,
        undone_at       TEXT,
        undo_entry      INTEGER
    );
    CREATE INDEX file_edits_conversation ON file_edits (conversation_id, turn, id);
    """),
]

#: Seconds reading or writing the files of one undo may take.
UNDO_DEADLINE_S = 30.0

_COLS = ("id, conversation_id, turn, call_entry, path, shown_path, before, after, before_sha256, after_sha256,"
         " state, error, mode, created_dirs, created_at, undone_at, undo_entry")


def sha256(data: bytes | None) -> str | None:
    """The SHA-256 of ``data`` in hex, or ``None`` for no file."""
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class EditRecord:
    """One row of ``file_edits`` (see the module doc)."""

    id: int
    conversation_id: int
    turn: int | None
    call_entry: int | None
    path: str
    shown_path: str
    before: bytes | None
    after: bytes
    before_sha256: str | None
    after_sha256: str
    state: str
    error: str | None
    mode: int | None
    created_dirs: tuple[str, ...]
    created_at: str
    undone_at: str | None
    undo_entry: int | None

    @property
    def standing(self) -> bool:
        """Made (or maybe made: a wisp died while writing it) and not undone."""
        return self.state in ("applied", "pending") and self.undone_at is None


def _record(row: Any) -> EditRecord:
    r = list(row)
    try:
        dirs = tuple(str(d) for d in json.loads(r[13] or "[]"))
    except (TypeError, ValueError):
        dirs = ()
    r[6] = bytes(r[6]) if r[6] is not None else None
    r[7] = bytes(r[7]) if r[7] is not None else b""
    r[13] = dirs
    return EditRecord(*r)


class UndoRefused(Exception):
    """Nothing was undone; the message is one paragraph saying why and what to do."""


@dataclass
class UndoDone:
    """What an undo did: ``turn``, the ``files`` put back (restored) and
    ``removed`` (files the turn created, taken away again), the edit ids,
    and ``entry`` (the number of the entry that records it)."""

    turn: int
    files: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edits: list[int] = field(default_factory=list)
    entry: int | None = None

    def text(self) -> str:
        """One line for the person (and the record)."""
        parts = []
        if self.files:
            parts.append("put back " + ", ".join(self.files))
        if self.removed:
            parts.append("removed " + ", ".join(self.removed) + " (which it had created)")
        count = len(self.edits)
        return (f"Undid turn {self.turn}'s {count} edit{'s' if count != 1 else ''}: " + "; ".join(parts)
                + ". What the edits wrote stays in the record; the model is told with its next request.")


@dataclass
class _FilePlan:
    """One file of an undo: its first edit of the turn (whose ``before`` comes back) and its last
    (whose ``after`` the file must hold now)."""

    first: EditRecord
    last: EditRecord
    edits: list[EditRecord]


class EditBook:
    """The edits of a session's conversations: ``store`` a
    :class:`wisp.core.store.Store` opened with :data:`MIGRATIONS`, ``audit``
    an :class:`~wisp.core.audit.AuditLog` (or ``None``)."""

    def __init__(self, store: Any, audit: Any = None) -> None:
        self.store = store
        self.audit = audit

    # -- recording ---------------------------------------------------------------------------------

    async def begin(self, conversation: int | None, turn: int | None, call_entry: int | None, path: str,
                    shown_path: str, before: bytes | None, after: bytes) -> int:
        """Record an edit about to be written (state ``pending``); its id.
        Raises ``ValueError`` without a conversation (an edit must be kept)."""
        if conversation is None:
            raise ValueError("an edit is recorded in a conversation")
        async with self.store.transaction() as db:
            cur = await db.execute(
                f"INSERT INTO file_edits (conversation_id, turn, call_entry, path, shown_path, before, after,"
                " before_sha256, after_sha256, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                (conversation, turn, call_entry, path, shown_path, before, after, sha256(before), sha256(after),
                 utc_now()))
            return int(cur.lastrowid)

    async def settle(self, edit_id: int, state: str, error: str | None = None, *, mode: int | None = None,
                     created_dirs: tuple[str, ...] = ()) -> None:
        """Mark an edit ``applied`` (with the file's ``mode`` and the
        directories made for it) or ``failed`` (with its ``error``); an
        applied one is an ``edit.applied`` audit event with its hashes."""
        async with self.store.transaction() as db:
            await db.execute("UPDATE file_edits SET state = ?, error = ?, mode = ?, created_dirs = ? WHERE id = ?",
                             (state, error, mode, json.dumps(list(created_dirs)), edit_id))
        if state == "applied" and self.audit is not None:
            edit = await self.get(edit_id)
            if edit is not None:
                self.audit.write("edit.applied", {
                    "edit": edit.id, "path": edit.shown_path, "created": edit.before is None,
                    "before_sha256": edit.before_sha256, "after_sha256": edit.after_sha256,
                    "bytes_before": len(edit.before or b""), "bytes_after": len(edit.after),
                    "call_entry": edit.call_entry}, conversation=edit.conversation_id, turn=edit.turn)

    # -- reading -------------------------------------------------------------------------------------

    async def get(self, edit_id: int) -> EditRecord | None:
        rows = await self.store.db.execute_fetchall(f"SELECT {_COLS} FROM file_edits WHERE id = ?", (edit_id,))
        return _record(rows[0]) if rows else None

    async def edits(self, conversation: int) -> list[EditRecord]:
        """Every edit of ``conversation`` tried, in order (failed ones too)."""
        rows = await self.store.db.execute_fetchall(
            f"SELECT {_COLS} FROM file_edits WHERE conversation_id = ? ORDER BY id", (conversation,))
        return [_record(r) for r in rows]

    async def file_changes(self, conversation: int) -> list[FileChange]:
        """What the conversation's edits did to each file, as the ``workdir``
        fact shows it (:func:`wisp.core.context.workspace.workdir_picture`):
        per file, in the order of its latest edit, ``created`` or ``edited``
        with the turns of its standing edits, or ``undone``. Reads no
        file's bytes."""
        rows = await self.store.db.execute_fetchall(
            "SELECT shown_path, turn, state, before IS NULL, undone_at FROM file_edits"
            " WHERE conversation_id = ? AND state != 'failed' ORDER BY id", (conversation,))
        files: dict[str, dict[str, Any]] = {}
        for shown, turn, state, created, undone in rows:
            f = files.pop(shown, None) or {"turns": [], "created": False, "standing": False}
            if undone is None:
                if not f["standing"]:  # the first standing edit since the last undo says if it created the file
                    f["created"] = bool(created)
                f["standing"] = True
                if turn is not None and turn not in f["turns"]:
                    f["turns"].append(turn)
            else:
                f = {"turns": [], "created": False, "standing": False}
            files[shown] = f
        return [FileChange(path, "undone" if not f["standing"] else "created" if f["created"] else "edited",
                           tuple(f["turns"])) for path, f in files.items()]

    # -- undo ------------------------------------------------------------------------------------------

    async def _plan(self, conversation: int, turn: int | None) -> tuple[int, dict[str, _FilePlan], list[EditRecord]]:
        """The turn to undo, its files, and every standing edit (for the checks)."""
        every = await self.edits(conversation)
        standing = [e for e in every if e.standing]
        if not standing:
            done = [e for e in every if e.undone_at is not None]
            tail = " (every edit it made was undone already: /undo list shows them)" if done else ""
            raise UndoRefused(f"No edit of this conversation is left to undo{tail}.")
        if turn is None:
            turn = max(e.turn or 0 for e in standing)
        mine = [e for e in standing if e.turn == turn]
        if not mine:
            turns = sorted({e.turn for e in standing if e.turn is not None})
            undone = any(e.turn == turn for e in every)
            why = "its edits were undone already" if undone else "it made no edit"
            raise UndoRefused(f"Turn {turn} has no edit to undo: {why}. Turns with edits standing: "
                              f"{', '.join(map(str, turns))} (/undo list shows them).")
        files: dict[str, _FilePlan] = {}
        for e in mine:
            plan = files.get(e.path)
            if plan is None:
                files[e.path] = _FilePlan(e, e, [e])
            else:
                plan.last = e
                plan.edits.append(e)
        return turn, files, standing

    async def undo(self, conversation: int, turn: int | None, workdir: Path) -> UndoDone:
        """Put back the files of turn ``turn``'s standing edits (``None``: the
        latest turn that has some), all or none, and record the undo (see the
        module doc). Raises :class:`UndoRefused` saying why nothing was done."""
        turn, files, standing = await self._plan(conversation, turn)
        later = []
        for plan in files.values():
            after = [e for e in standing if e.path == plan.last.path and e.id > plan.last.id]
            if after:
                later.append(f"{plan.first.shown_path} was edited again in turn {after[-1].turn}")
        if later:
            newest = max(e.turn or 0 for e in standing)
            raise UndoRefused(f"Nothing was undone: {'; '.join(later)}. Undo the later turn first (/undo "
                              f"{newest} is the newest), then this one.")
        try:
            done = await asyncio.wait_for(asyncio.to_thread(_restore, Path(workdir).resolve(), files),
                                          UNDO_DEADLINE_S)
        except asyncio.TimeoutError:  # the thread may still finish: say so, never that nothing changed
            raise UndoRefused(f"The undo did not finish within {UNDO_DEADLINE_S:g} s (the file system may be slow "
                              "or hung), and it may still be writing. /undo diff shows how the files stand; /undo "
                              "again once it answers.") from None
        if isinstance(done, list):  # the files that changed since
            raise UndoRefused(_changed_since(turn, done, self._ask_hint))
        restored, removed = done
        result = UndoDone(turn, restored, removed, [e.id for p in files.values() for e in p.edits])
        await self._record_undo(conversation, result, files)
        return result

    #: How the person reaches ``/undo diff N`` (``wisp ask --continue "/undo diff N"`` from a shell).
    _ask_hint = "/undo diff"

    async def _record_undo(self, conversation: int, result: UndoDone, files: dict[str, _FilePlan]) -> None:
        """The undo as an entry (a notice outside any turn), its audit event, and the rows marked undone."""
        details = {"turn": result.turn, "edits": result.edits, "files": result.files, "removed": result.removed,
                   "sha256": {p.first.shown_path: p.first.before_sha256 for p in files.values()}}
        entry = await self.store.add_entry(conversation, None, "notice", result.text(),
                                           meta={"undo": details, "level": "info"})
        result.entry = entry.number
        if self.audit is not None:
            ref = self.audit.write("edit.undone", {"content": result.text(), **details},
                                   conversation=conversation, entry=entry.number)
            if ref is not None:
                await self.store.set_entry_audit(entry.id, ref)
        now = utc_now()
        async with self.store.transaction() as db:
            await db.executemany("UPDATE file_edits SET undone_at = ?, undo_entry = ? WHERE id = ?",
                                 [(now, entry.number, i) for i in result.edits])

    async def diff_since(self, conversation: int, turn: int | None, workdir: Path) -> tuple[int, list[tuple[str, str]]]:
        """For ``/undo diff``: turn ``turn``'s files (``None``: the latest turn
        with standing edits), each with the unified diff from what its edits
        left (``a/``) to what it holds now (``b/``; ``""`` when they are the same).
        Raises :class:`UndoRefused` as :meth:`undo` does when there is no such turn."""
        from .edit_file import unified_diff

        turn, files, _ = await self._plan(conversation, turn)

        def read_all() -> list[tuple[str, str]]:
            out = []
            for plan in files.values():
                now = _read_or_none(Path(plan.last.path))
                if now == plan.last.after:
                    out.append((plan.first.shown_path, ""))
                    continue
                diff, _, _ = unified_diff(plan.first.shown_path, plan.last.after, now)
                diff = diff.replace(f"--- a/{plan.first.shown_path}", f"--- {plan.first.shown_path} as turn "
                                    f"{turn}'s edit left it", 1)
                diff = diff.replace(f"+++ b/{plan.first.shown_path}", f"+++ {plan.first.shown_path} now", 1)
                out.append((plan.first.shown_path, diff))
            return out

        return turn, await asyncio.to_thread(read_all)


def _read_or_none(path: Path) -> bytes | None:
    """The bytes at ``path`` now, ``None`` when there is no file (or it cannot be read as one)."""
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def _restore(workdir: Path, files: dict[str, _FilePlan]) -> tuple[list[str], list[str]] | list[tuple[_FilePlan, str]]:
    """Runs in a thread: check every file first, then put each back; on a
    failure part way, put back what was already done (all or none). Returns
    ``(restored, removed)`` shown paths, or the files that changed since
    with why."""
    changed: list[tuple[_FilePlan, str]] = []
    todo: list[_FilePlan] = []
    for plan in files.values():
        now = _read_or_none(Path(plan.last.path))
        if now == plan.last.after:
            todo.append(plan)
        elif plan.last.state == "pending" and now == plan.first.before:
            continue  # never written (its wisp died first): nothing to put back
        elif now is None:
            changed.append((plan, "it is gone"))
        else:
            changed.append((plan, "its content changed"))
    if changed:
        return changed
    restored: list[str] = []
    removed: list[str] = []
    done: list[_FilePlan] = []
    try:
        for plan in todo:
            path, shown = Path(plan.first.path), plan.first.shown_path
            if plan.first.before is None:
                remove_checked(workdir, shown, path, plan.last.after, dirs=plan.first.created_dirs)
                removed.append(shown)
            else:
                replace_checked(workdir, shown, path, plan.last.after, plan.first.before)
                restored.append(shown)
            done.append(plan)
    except (Changed, HardLinkedFile, NotAFile, OSError) as exc:
        for plan in reversed(done):  # all or none: what was put back goes forward again
            try:
                replace_checked(workdir, plan.first.shown_path, Path(plan.first.path), plan.first.before,
                                plan.last.after, make_dirs=True)
            except (OSError, ValueError):
                pass
        failed = next(p for p in todo if p not in done)
        return [(failed, f"it could not be written ({exc})")]
    return restored, removed


def _changed_since(turn: int, changed: list[tuple[_FilePlan, str]], hint: str) -> str:
    """The refusal of an undo whose files changed since the edit, saying how to see both versions."""
    names = "; ".join(f"{p.first.shown_path}: {why} since turn {turn}'s edit" for p, why in changed)
    entries = sorted({e.call_entry for p, _ in changed for e in p.edits if e.call_entry is not None})
    show = f" /show entry {entries[0]} shows the edit the model asked for." if entries else ""
    return (f"Nothing was undone: {names} (by you, a command or another program), and wisp does not overwrite "
            f"a change it did not make. To see both: {hint} {turn} shows how each file differs now from what "
            f"the edit left;{show} Put it back by hand if you want the edit's version, or keep it as it is.")
