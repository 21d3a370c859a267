"""One rule for 'is that process still running' (core/processes.py): the store's turn claims,
refinement's claims and MCP servers' children all read it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from wisp.core.processes import pid_alive, tag_alive, this_process


def test_a_running_process_is_alive_and_an_ended_one_is_not() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert pid_alive(proc.pid)
        assert tag_alive(f"{socket.gethostname()}:{proc.pid}") is True
        assert tag_alive(f"{socket.gethostname()}:{proc.pid}:claim7") is True
    finally:
        proc.kill()
    # killed but not reaped yet: a zombie counts as gone (polled: the kill lands asynchronously)
    deadline = time.monotonic() + 10
    while pid_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(proc.pid)  # still unreaped: a zombie
    proc.wait()
    assert not pid_alive(proc.pid)
    assert tag_alive(f"{socket.gethostname()}:{proc.pid}") is False


def test_a_tag_that_cannot_be_checked_here_is_none() -> None:
    assert this_process() == f"{socket.gethostname()}:{os.getpid()}" and tag_alive(this_process()) is True
    for tag in (None, "", "other-host-x:1", "nohost", f"{socket.gethostname()}:abc"):
        assert tag_alive(tag) is None
