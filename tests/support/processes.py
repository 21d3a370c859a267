"""Process helpers: is a pid alive, wait for pids to be gone."""

from __future__ import annotations

import os
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def wait_gone(pids: list[int], limit_s: float = 10.0) -> list[int]:
    """Poll until every pid is gone; returns those still running at the limit."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def pids_of(argv: list[str]) -> list[int]:
    """Pids of the running processes (any parent) whose argv is exactly ``argv``. Commands run in
    their own PID namespace (the sandbox), so the pids they print are not the host's: tests name
    their processes by an argv no other process uses instead."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            have = [a.decode("utf-8", "replace") for a in (entry / "cmdline").read_bytes().split(b"\0")[:-1]]
        except OSError:
            continue
        if have == argv and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def wait_argv_gone(argv: list[str], limit_s: float = 10.0) -> list[int]:
    """Poll until no process runs ``argv``; returns the pids still running at the limit."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not pids_of(argv):
            return []
        time.sleep(0.05)
    return pids_of(argv)


def unique_seconds(offset: int = 0) -> str:
    """A sleep duration (seconds, as text) that no other process on the machine uses."""
    return str(700000 + os.getpid() % 50000 * 4 + offset)
