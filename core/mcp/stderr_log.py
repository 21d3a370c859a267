"""An MCP server's stderr, written to a log of bounded size.

A local server's stderr is a pipe that wisp reads (in a thread of its own,
so a server that floods it never waits on wisp's event loop), and what comes
is written to ``<data dir>/mcp-logs/SERVER.log``, mode 0600. When the log
would pass :data:`LOG_MAX_BYTES` it rotates as the embedded server's does:
the log becomes ``SERVER.log.1`` (older copies shift up to
:data:`LOG_KEEP`, the oldest is dropped) and a new one begins. So a server
that writes 209 MB to stderr leaves at most ``LOG_MAX_BYTES × (LOG_KEEP +
1)`` bytes on disk, the newest lines kept. Since wisp does the writing, the
bound is exact, not checked now and then.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

__all__ = ["LOG_MAX_BYTES", "LOG_KEEP", "StderrLog"]

#: The largest one log file grows (bytes), as the embedded server's log.
LOG_MAX_BYTES = 5 * 1024 * 1024
#: Rotated copies kept beside the log (``SERVER.log.1`` … ``.N``).
LOG_KEEP = 3
_READ = 64 * 1024


class StderrLog:
    """The log behind one server's stderr. :attr:`writer` is the pipe's
    write end, a binary file to hand to the process as its stderr; call
    :meth:`started` once the process has it (wisp's copy is closed, so the
    reader ends when the server and its children have). ``path`` is the log;
    ``max_bytes`` and ``keep`` the rotation's bounds (bytes, files)."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, keep: int = LOG_KEEP) -> None:
        self.path = path
        self.max_bytes = max(1, int(max_bytes))
        self.keep = max(0, int(keep))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._out = os.fdopen(fd, "wb", buffering=0)
        self._size = 0
        read_fd, write_fd = os.pipe()
        os.set_inheritable(write_fd, True)
        self._read = read_fd
        self.writer = os.fdopen(write_fd, "wb", buffering=0)
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{path.stem}", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The server has its copy of the write end: close wisp's."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def _rotate(self) -> None:
        self._out.close()
        for i in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.keep > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._out = os.fdopen(fd, "wb", buffering=0)
        self._size = 0

    def _write(self, data: bytes) -> None:
        """Append ``data``, rotating first where it would pass the cap: at a
        line's end when one fits (a line longer than a whole log is split)."""
        while data:
            room = self.max_bytes - self._size
            if len(data) <= room:
                self._out.write(data)
                self._size += len(data)
                return
            cut = data.rfind(b"\n", 0, room) + 1
            if cut == 0:
                if self._size > 0:
                    self._rotate()
                    continue
                cut = room
            self._out.write(data[:cut])
            data = data[cut:]
            self._rotate()

    def _pump(self) -> None:
        try:
            while True:
                data = os.read(self._read, _READ)
                if not data:
                    break
                try:
                    self._write(data)
                except OSError:  # a full disk: keep draining the pipe so the server never blocks on it
                    continue
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read)
            with contextlib.suppress(OSError):
                self._out.close()

    def close(self, wait_s: float = 2.0) -> None:
        """Close wisp's write end and wait up to ``wait_s`` seconds for the
        reader to drain what the server wrote."""
        self.started()
        self._thread.join(wait_s)
