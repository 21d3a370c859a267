"""Damage is named: a database that is truncated, has bytes flipped, is full (RLIMIT_FSIZE in the
child), cannot be opened, is a FIFO or a device, or is missing or emptied under an existing audit log,
gives one line naming the file and what to do, through the real `wisp ask` and `wisp conversations`:
never a traceback, never "internal error", never a silent fresh start. Against the fake Ollama
endpoint on 127.0.0.1, with real SQLite files."""

from __future__ import annotations

import ctypes
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from wisp.core.database import DatabaseDamaged, damage_message, refuse_unusable

WISP = str(Path(sys.executable).parent / "wisp")
PAGE = 4096


def wisp(args: list[str], cwd: Path, preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, timeout=60, preexec_fn=preexec)


def database(home: Path) -> Path:
    found = sorted((home / "data").rglob("wisp.db"))
    assert len(found) == 1, found
    return found[0]


def _drop_file_capabilities() -> None:
    """Run as root, the child keeps no power over file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
    CAP_FOWNER), so a file with mode 000 is unreadable to it as to an ordinary user."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2, 3):
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")


def _file_size_limit(limit: int) -> Callable[[], None]:
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return set_limit


def _checkpoint(db: Path) -> None:
    """Everything in the main file (the write-ahead log folded in), so that damage to it is damage."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _flip(db: Path, offsets: list[int]) -> None:
    data = bytearray(db.read_bytes())
    for at in offsets:
        if at < len(data):
            data[at] ^= 0xFF
    db.write_bytes(bytes(data))


def _outcome(r: subprocess.CompletedProcess, db: Path) -> str:
    """``named`` (one wisp: error line naming the database file), ``traceback``, ``internal``,
    ``fresh`` (exit 0: it went on as if nothing happened, on a new or damaged file), or ``other``."""
    err = r.stderr
    if "Traceback" in err or "Traceback" in r.stdout:
        return "traceback"
    if "internal error" in err:
        return "internal"
    if r.returncode == 0:
        return "fresh"
    lines = [ln for ln in err.splitlines() if ln.startswith("wisp: error:")]
    if len(lines) == 1 and (str(db) in lines[0] or str(db.parent) in lines[0]):
        return "named"
    return "other"


@pytest.fixture
def chatted(ollama_home, tmp_path: Path):
    """A home with one conversation of two turns, its database checkpointed (no -wal pages)."""
    home, srv = ollama_home
    work = tmp_path / "work"
    work.mkdir()
    for prompt in ("first words", "second words"):
        r = wisp(["ask", "--continue", prompt], work)
        assert r.returncode == 0, r.stderr
    db = database(home)
    _checkpoint(db)
    return home, work, db


def _damage_kinds(size: int) -> dict[str, Callable[[Path], None]]:
    pages = max(1, size // PAGE)
    kinds: dict[str, Callable[[Path], None]] = {}
    for keep in (0.5, 0.9):
        kinds[f"truncated to {keep:.0%}"] = lambda db, keep=keep: os.truncate(db, int(size * keep))
    for keep in (50, 100, PAGE, PAGE + 100):
        kinds[f"truncated to {keep} bytes"] = lambda db, keep=keep: os.truncate(db, keep)
    kinds["header magic flipped"] = lambda db: _flip(db, [0, 5, 10])
    kinds["header page size flipped"] = lambda db: _flip(db, [16, 17])
    for page in range(1, pages):  # each b-tree page's own header: its kind and cell count
        kinds[f"page {page + 1} header flipped"] = lambda db, page=page: _flip(db, [page * PAGE, page * PAGE + 3])
    kinds["garbage"] = lambda db: db.write_bytes(os.urandom(size))
    return kinds


def test_damage_trials_through_wisp_ask_and_wisp_conversations(chatted) -> None:
    home, work, db = chatted
    pristine = db.read_bytes()
    kinds = _damage_kinds(len(pristine))
    outcomes: dict[str, list[str]] = {}
    for name, damage in kinds.items():
        for command in (["ask", "--continue", "third words"], ["conversations"]):
            db.write_bytes(pristine)
            for extra in (Path(f"{db}-wal"), Path(f"{db}-shm")):
                extra.unlink(missing_ok=True)
            damage(db)
            r = wisp(command, work)
            outcome = _outcome(r, db)
            if outcome == "fresh":  # the damage missed what the command read: the conversation is whole
                with sqlite3.connect(db) as conn:
                    try:
                        turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
                    except sqlite3.DatabaseError:
                        turns = -1
                outcome = "unharmed" if turns >= 2 else "fresh"
            outcomes.setdefault(outcome, []).append(f"{name} / wisp {command[0]}: {r.stderr.strip()[:200]}")
    counts = {k: len(v) for k, v in outcomes.items()}
    print(f"\ndamage trials: {sum(counts.values())} over {len(kinds)} kinds of damage: {counts}")
    for line in outcomes.get("named", [])[:1]:
        print("  e.g.", line[:240])
    assert not outcomes.get("traceback") and not outcomes.get("internal") and not outcomes.get("other"), outcomes
    assert not outcomes.get("fresh"), outcomes["fresh"]
    # damage to the header, a truncation or garbage is always named; a flipped page header the command
    # never read leaves it working on the rest, the conversation whole
    unharmed = [line.split(" / ")[0] for line in outcomes.get("unharmed", [])]
    assert all(name.startswith("page ") for name in unharmed), unharmed


def test_a_full_disk_is_named_with_what_to_do(chatted) -> None:
    """RLIMIT_FSIZE at the database's size: SQLite's write fails (the child ignores SIGXFSZ, as Python
    does), and what wisp prints names the file and says to free space."""
    home, work, db = chatted
    named = 0
    limits = [len(db.read_bytes()), len(db.read_bytes()) + PAGE]
    for limit in limits:
        r = wisp(["ask", "--continue", "x" * 100_000], work, preexec=_file_size_limit(limit))
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        assert r.returncode != 0, r.stderr
        line = [ln for ln in r.stderr.splitlines() if ln.startswith("wisp: error:")]
        assert len(line) == 1, r.stderr
        assert "free space" in line[0] and (str(db) in line[0] or str(home) in line[0]), line[0]
        named += 1
    print(f"\ndisk full (RLIMIT_FSIZE) trials: {named} of {len(limits)} named")


def test_an_unreadable_database_is_named(chatted) -> None:
    home, work, db = chatted
    os.chmod(db, 0)
    try:
        for command in (["ask", "--continue", "more"], ["conversations"]):
            r = wisp(command, work, preexec=_drop_file_capabilities)
            assert _outcome(r, db) == "named", r.stderr
            assert "permissions" in r.stderr
    finally:
        os.chmod(db, 0o600)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_fifo_or_device_in_place_of_the_database_is_refused_without_opening_it(chatted, kind: str) -> None:
    home, work, db = chatted
    db.unlink()
    if kind == "fifo":
        os.mkfifo(db)
    elif kind == "device":
        db.symlink_to("/dev/zero")
    else:
        db.mkdir()
    for command in (["ask", "--continue", "more"], ["conversations"]):
        r = wisp(command, work)  # a FIFO opened would wait for a writer: the timeout would fail the test
        assert _outcome(r, db) == "named", r.stderr
        assert "not a file" in r.stderr and "move it aside" in r.stderr


@pytest.mark.parametrize("how", ["missing", "emptied"])
def test_a_database_gone_under_its_audit_log_is_refused_not_started_afresh(chatted, how: str) -> None:
    home, work, db = chatted
    if how == "missing":
        db.unlink()
    else:
        os.truncate(db, 0)
    for command in (["ask", "--continue", "more"], ["conversations"]):
        r = wisp(command, work)
        assert _outcome(r, db) == "named", r.stderr
        assert "audit log" in r.stderr and "restore" in r.stderr
    assert not db.exists() or db.stat().st_size == 0  # nothing new was started in its place


def test_a_first_start_with_no_audit_log_is_a_fresh_start(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    r = wisp(["ask", "hello"], tmp_path)
    assert r.returncode == 0, r.stderr


def test_refuse_unusable_and_damage_message_directly(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    db = tmp_path / "wisp.db"
    refuse_unusable(db, audit)  # no database, no audit log: a first start
    (audit / "audit-000001.jsonl").write_text('{"id":"x","conversation":null,"kind":"config.set"}\n')
    refuse_unusable(db, audit)  # events of no conversation: nothing was lost
    (audit / "audit-000001.jsonl").write_text('{"id":"x","conversation":3,"kind":"prompt"}\n')
    with pytest.raises(DatabaseDamaged, match="is missing, but the audit log"):
        refuse_unusable(db, audit)
    refuse_unusable(db, None)  # the audit log off: no record to hold it to
    assert damage_message(db, sqlite3.DatabaseError("database disk image is malformed")).startswith(
        f"the database {db} is damaged")
    assert "free space" in damage_message(db, sqlite3.OperationalError("database or disk is full"))
    assert damage_message(db, sqlite3.OperationalError("database is locked")) is None
    assert damage_message(db, ValueError("x")) is None
