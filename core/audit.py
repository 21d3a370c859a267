"""The append-only JSONL audit log: writer, rotation, reader by byte offset.

Rules (issue "wisp runs end to end", "Storage and audit log"; issue "memory
tool", "recall"; wisp-memory-tool.txt, "Where the content comes from"):

- One audit event a line, a JSON object with the keys ``id``, ``time`` (UTC,
  ISO 8601 ending in ``Z``), ``conversation``, ``turn``, ``entry``, ``kind``
  and ``payload``. Lines are UTF-8 and end in ``\\n``.
- An event is written (``os.write`` on an ``O_APPEND`` descriptor, so no
  user-space buffer holds it) before :meth:`AuditLog.write` returns, so the
  caller can show the thing afterwards. It is not fsync'ed.
- Files are numbered, ``audit-000001.jsonl``, ``audit-000002.jsonl``, …; the
  highest is the current one. An event's location (file name, byte offset)
  never changes. When the current file would pass ``max_bytes``, the next
  file is started (an event larger than ``max_bytes`` goes alone into a new
  file); at most ``keep`` files are kept, and the oldest are deleted.
- A reader finds an event by its :class:`AuditRef` (file and byte offset) in
  time that does not grow with the log's size: it seeks and reads one line.
  When that file has rotated away, or the line there is not the event named,
  it returns ``None`` and the caller falls back to the store's copy.
- ``enabled=False`` writes nothing and creates nothing.
- Files have mode 0600, the directory 0700.
- Every line is written through :func:`wisp.core.redact.redact`: an API key
  wisp read, a URL's password or a bearer token never reaches the log.
- A file whose last line was cut short (a crash mid-write) is tolerated: that
  line is skipped by scans, and the next write starts on a fresh line.

Event ids are ``"ev-"`` + 14 hex digits of microseconds since the epoch + 6
random hex digits: unique, and sortable by time as plain strings.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .paths import ensure_private_dir, open_private
from .redact import redact

__all__ = ["AuditRef", "AuditLog", "new_event_id", "FILE_PATTERN"]

#: Names of audit files: ``audit-`` + a 6-digit (or longer) number + ``.jsonl``.
FILE_PATTERN = re.compile(r"^audit-(\d{6,})\.jsonl$")

_DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # config audit.max_bytes
_DEFAULT_KEEP = 5  # config audit.keep

_id_lock = threading.Lock()
_last_us = 0


def new_event_id(now_us: int | None = None) -> str:
    """A new audit event id, ``ev-`` + 14 hex digits of µs + 6 random hex digits.

    Ids made by one process strictly increase (the µs part is bumped when the
    clock has not moved or went back), so they sort by time as strings.
    ``now_us`` (microseconds since the epoch) is for tests.
    """
    global _last_us
    with _id_lock:
        us = time.time_ns() // 1000 if now_us is None else now_us
        if us <= _last_us:
            us = _last_us + 1
        _last_us = us
    return f"ev-{us:014x}{secrets.token_hex(3)}"


def _iso_from_us(us: int) -> str:
    dt = datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{us % 1_000_000:06d}Z"


def _file_name(number: int) -> str:
    return f"audit-{number:06d}.jsonl"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(obj)
    return str(obj)


@dataclass(frozen=True)
class AuditRef:
    """Where one audit event lies: enough to read it back without a scan.

    - ``event_id``: the event's ``id``;
    - ``file``: the base name of its file (``audit-000003.jsonl``);
    - ``offset``: the byte offset of the start of its line in that file.

    The store keeps these three per entry (``audit_event_id``,
    ``audit_file``, ``audit_offset``).
    """

    event_id: str
    file: str
    offset: int


class AuditLog:
    """The audit log in one directory (thread-safe within a process).

    ``AuditLog(directory, enabled=True, max_bytes=10485760, keep=5)``:

    - ``directory``: where the ``audit-NNNNNN.jsonl`` files live; created
      (0700) on the first write, never when disabled;
    - ``enabled``: config ``audit.enabled``; when ``False``, :meth:`write`
      returns ``None`` and touches nothing;
    - ``max_bytes``: config ``audit.max_bytes``, the size in bytes a file may
      reach before the next is started (>= 1);
    - ``keep``: config ``audit.keep``, how many files are kept (>= 1).

    Raises ``ValueError`` for ``max_bytes`` or ``keep`` below 1. Use it as a
    context manager, or call :meth:`close`, to release the file descriptor.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        enabled: bool = True,
        max_bytes: int = _DEFAULT_MAX_BYTES,
        keep: int = _DEFAULT_KEEP,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"audit max_bytes must be at least 1, got {max_bytes}")
        if keep < 1:
            raise ValueError(f"audit keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.enabled = bool(enabled)
        self.max_bytes = int(max_bytes)
        self.keep = int(keep)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._number = 0  # number of the file _fd is open on

    # -- files -------------------------------------------------------------

    def _numbers(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            m = FILE_PATTERN.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def files(self) -> list[Path]:
        """The kept audit files, oldest first (an empty list when none exist)."""
        return [self.directory / _file_name(n) for n in self._numbers()]

    @property
    def current_file(self) -> Path | None:
        """The file the next event goes to if it fits (the highest number), or
        ``None`` before the first write."""
        nums = self._numbers()
        return self.directory / _file_name(nums[-1]) if nums else None

    def _open(self, number: int) -> None:
        """Open file ``number`` for appending (lock held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        path = self.directory / _file_name(number)
        fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size:
                # A line cut short by a crash: end it, so the next event starts
                # a line of its own and scans skip only the garbled one.
                with open(path, "rb") as f:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        os.write(fd, b"\n")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._number = number

    def _prune(self) -> None:
        """Delete the oldest files beyond ``keep`` (lock held)."""
        nums = self._numbers()
        for n in nums[: max(0, len(nums) - self.keep)]:
            try:
                os.unlink(self.directory / _file_name(n))
            except FileNotFoundError:
                pass

    def _ensure_room(self, size: int) -> None:
        """Open the file the next ``size``-byte line goes to (lock held)."""
        if self._fd is None:
            ensure_private_dir(self.directory)
            nums = self._numbers()
            self._open(nums[-1] if nums else 1)
        assert self._fd is not None
        st = os.fstat(self._fd)
        if st.st_nlink == 0:  # deleted under us (pruned by another process)
            nums = self._numbers()
            self._open(max(nums[-1] if nums else 0, self._number))
            st = os.fstat(self._fd)
        current = st.st_size
        if current == 0 or current + size <= self.max_bytes:
            return
        # Rotate. Another process may have rotated already: join its file.
        nums = self._numbers()
        highest = max(nums[-1] if nums else 0, self._number)
        if highest > self._number:
            self._open(highest)
            current = os.fstat(self._fd).st_size
            if current == 0 or current + size <= self.max_bytes:
                return
        self._open(highest + 1)
        self._prune()

    # -- writing -----------------------------------------------------------

    def write(
        self,
        kind: str,
        payload: Any,
        *,
        conversation: int | None = None,
        turn: int | None = None,
        entry: int | None = None,
    ) -> AuditRef | None:
        """Append one audit event and return where it lies, or ``None`` if disabled.

        ``kind`` names the event (``prompt``, ``response``, ``tool.call``,
        ``tool.result``, ``fact.recorded``, ``context.memory``, …);
        ``payload`` is any JSON-serialisable value (sets and tuples become
        lists, bytes are decoded as UTF-8 with replacement, dataclasses become
        objects, anything else its ``str``). ``conversation``, ``turn`` and
        ``entry`` are the store's ids (``None`` when not known).

        The line is on disk (in the kernel's page cache) when this returns.
        Raises ``OSError`` if the directory or file cannot be written.
        """
        if not self.enabled:
            return None
        us_id = new_event_id()
        us = int(us_id[3:17], 16)
        event = {
            "id": us_id,
            "time": _iso_from_us(us),
            "conversation": conversation,
            "turn": turn,
            "entry": entry,
            "kind": kind,
            "payload": payload,
        }
        # secrets masked in the line as written (wisp.core.redact: a key, a URL's password, a bearer
        # token); the masks hold no quote or backslash, so the line stays the same JSON
        line = (
            redact(json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=_json_default))
            .encode("utf-8", errors="backslashreplace")  # a lone surrogate stays a JSON escape
            + b"\n"
        )
        with self._lock:
            self._ensure_room(len(line))
            assert self._fd is not None
            view = memoryview(line)
            written = 0
            while written < len(line):
                n = os.write(self._fd, view[written:])
                written += n
            # With O_APPEND the descriptor's offset is the end of what we just
            # wrote, even if another process appended before us.
            end = os.lseek(self._fd, 0, os.SEEK_CUR)
            return AuditRef(us_id, _file_name(self._number), end - len(line))

    def close(self) -> None:
        """Close the file descriptor; a later write opens it again."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "AuditLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # -- reading -----------------------------------------------------------

    def read(self, ref: AuditRef) -> dict[str, Any] | None:
        """The event at ``ref``, or ``None`` if it is no longer there.

        Opens ``ref.file``, seeks to ``ref.offset`` and reads one line: the
        cost depends on that event's size only, never on the log's (issue
        "memory tool": "The reader finds the event by its byte offset, not by
        scanning the log"). Returns ``None`` when the file has rotated away,
        the offset is past its end, the line is not valid JSON, or its ``id``
        is not ``ref.event_id``. Works whether or not the log is enabled.
        Raises nothing for a missing or garbled event; ``OSError`` only for an
        unexpected I/O failure such as a permission error.
        """
        m = FILE_PATTERN.match(ref.file or "")
        if not m or ref.offset < 0:
            return None
        path = self.directory / ref.file
        try:
            with open(path, "rb") as f:
                f.seek(ref.offset)
                line = f.readline()
        except FileNotFoundError:
            return None
        return _decode(line, ref.event_id)

    def find(self, event_id: str) -> dict[str, Any] | None:
        """The event with ``event_id``, found by scanning the kept files, newest
        first; ``None`` if it is not there. Slow (reads the whole log): use
        :meth:`read` with an :class:`AuditRef` when you have one."""
        needle = json.dumps(event_id).encode()
        for path in reversed(self.files()):
            try:
                with open(path, "rb") as f:
                    for line in f:
                        if needle in line:
                            ev = _decode(line, event_id)
                            if ev is not None:
                                return ev
            except FileNotFoundError:
                continue
        return None

    def iter_with_refs(self) -> Iterator[tuple[AuditRef, dict[str, Any]]]:
        """Every readable event of the kept files, oldest file first, in file
        order, with its :class:`AuditRef`. Garbled lines are skipped; a file
        deleted by rotation while iterating is skipped."""
        for path in self.files():
            try:
                f = open(path, "rb")
            except FileNotFoundError:
                continue
            with f:
                offset = 0
                for line in f:
                    ev = _decode(line, None)
                    if ev is not None:
                        yield AuditRef(ev["id"], path.name, offset), ev
                    offset += len(line)

    def iter_events(self) -> Iterator[dict[str, Any]]:
        """Every readable event of the kept files, oldest first (see
        :meth:`iter_with_refs`)."""
        for _, ev in self.iter_with_refs():
            yield ev

    def event_ids(self, conversation: int) -> list[str]:
        """The ids of the kept events of one conversation, oldest first
        (``wisp export``'s JSON lists them: issue 16). Reads the whole log."""
        return [ev["id"] for ev in self.iter_events() if ev.get("conversation") == conversation]

    def purge(self, conversation: int) -> int:
        """Blank out every kept event of one conversation (``wisp
        conversations rm ID --purge-audit``: issue 16); returns how many.

        Each such line is overwritten in place by a line of the same length,
        ``{"id": …, "time": …, "kind": "purged"}`` padded with spaces, so
        every other event stays at its byte offset and :meth:`read` still
        finds it by its :class:`AuditRef` (the rule that an event's location
        never changes). Works whether or not the log is enabled; ``OSError``
        for an unexpected I/O failure."""
        count = 0
        with self._lock:
            for path in self.files():
                try:
                    f = open(path, "r+b")
                except FileNotFoundError:
                    continue
                with f:
                    offset = 0
                    spots: list[tuple[int, bytes]] = []
                    for line in f:
                        ev = _decode(line, None)
                        if ev is not None and ev.get("conversation") == conversation and ev.get("kind") != "purged":
                            stone = json.dumps({"id": ev["id"], "time": ev.get("time"), "kind": "purged"}).encode()
                            if len(stone) >= len(line):
                                stone = b"{}"
                            spots.append((offset, stone.ljust(len(line) - 1) + b"\n"))
                        offset += len(line)
                    for at, data in spots:
                        f.seek(at)
                        f.write(data)
                    count += len(spots)
        return count


def _decode(line: bytes, event_id: str | None) -> dict[str, Any] | None:
    if not line.endswith(b"\n"):
        return None  # cut short: the write never finished
    try:
        ev = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(ev, dict) or not isinstance(ev.get("id"), str):
        return None
    if event_id is not None and ev["id"] != event_id:
        return None
    return ev
