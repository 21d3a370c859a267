"""The memory viewer's connections are bounded (wisp memory serve): idle sockets never hold one
thread each forever (800 sockets held 801 threads), a connection over the limit is closed at once,
and a client that hangs up mid-answer prints no traceback. A real server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from wisp.core.config import Config
from wisp.core.episodes import viewer as viewer_mod
from wisp.core.episodes.viewer import MemoryViewer


def viewer_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("Thread-") or "process_request" in t.name)


def until(condition, limit_s: float = 20.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {limit_s} s")
        time.sleep(0.02)


@pytest.fixture
def small_viewer(wisp_home, monkeypatch):
    monkeypatch.setattr(viewer_mod._Server, "MAX_CONNECTIONS", 8, raising=False)
    monkeypatch.setattr(viewer_mod._Server, "IDLE_TIMEOUT_S", 0.5, raising=False)
    v = MemoryViewer(Config.load(), "127.0.0.1", 0).start()
    yield v
    v.stop()


def test_idle_sockets_are_bounded_and_closed(small_viewer) -> None:
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", small_viewer.port)) for _ in range(40)]
    try:
        # never more threads than the limit, however many sockets wait
        until(lambda: threading.active_count() - before >= 1, what="a connection's thread")
        assert threading.active_count() - before <= 8
        # the ones over the limit were closed at once: reading them gives the end of the stream
        closed = 0
        for s in socks:
            s.settimeout(5)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except OSError:
                closed += 1
        assert closed == 40  # every one: 32 at once, the 8 served once they stayed silent 0.5 s
        until(lambda: threading.active_count() <= before, what="the idle connections' threads to end")
    finally:
        for s in socks:
            s.close()
    # and it still answers
    with socket.create_connection(("127.0.0.1", small_viewer.port), timeout=10) as s:
        s.sendall(f"GET /memory HTTP/1.0\r\nHost: 127.0.0.1:{small_viewer.port}\r\n\r\n".encode())
        assert s.recv(9) == b"HTTP/1.0 "  # answered


def test_a_client_that_hangs_up_prints_no_traceback(small_viewer, capfd) -> None:
    for _ in range(30):
        with socket.create_connection(("127.0.0.1", small_viewer.port), timeout=10) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
            s.sendall(f"GET /memory HTTP/1.1\r\nHost: 127.0.0.1:{small_viewer.port}\r\n".encode())
    with socket.create_connection(("127.0.0.1", small_viewer.port), timeout=10) as s:  # served after them
        s.sendall(f"GET /memory HTTP/1.0\r\nHost: 127.0.0.1:{small_viewer.port}\r\n\r\n".encode())
        assert s.recv(9) == b"HTTP/1.0 "  # answered
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err[:2000]
