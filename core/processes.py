"""Processes of this host: whether one still runs, and the ``host:pid`` tag that names one.

One rule for every part that holds something in a process's name and must
know when that process is gone: the store's claim of a conversation's turn,
refinement's claim of a batch of exchanges, the children of an MCP server.
A tag from another host cannot be checked from here, so it counts as alive.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["pid_alive", "this_process", "tag_alive"]


def this_process() -> str:
    """This process's tag: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` of this host runs. A zombie (ended, not yet
    reaped) counts as gone; a process of another user counts as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OSError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill's answer is all there is
    return state not in ("Z", "X")


def tag_alive(tag: str | None) -> bool | None:
    """Whether the process a tag names runs: ``host:pid``, optionally followed
    by ``:anything`` (a claim's own suffix). ``None`` when it cannot be told
    here: another host, or a tag that names no process."""
    if not tag:
        return None
    parts = tag.split(":")
    if len(parts) < 2 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return None
    return pid_alive(int(parts[1]))
