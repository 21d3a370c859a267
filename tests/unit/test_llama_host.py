"""Pieces of the embedded server's own process that need no model: its idle clock and
its log rotation (issue 10, "One embedded server, shared and fast")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from wisp.core.model.llama_host import STATUS_PATH, Activity, ActivityMiddleware, rotate_log


async def test_requests_in_flight_keep_the_server_busy_and_status_is_not_use() -> None:
    activity = Activity()
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope.get("path") == "/slow":
            await release.wait()

    wrapped = ActivityMiddleware(app, activity)
    slow = asyncio.create_task(wrapped({"type": "http", "path": "/slow"}, None, None))
    await asyncio.sleep(0)
    assert activity.inflight == 1 and activity.idle_for() == 0.0  # a stream in progress is use
    await wrapped({"type": "http", "path": STATUS_PATH}, None, None)
    assert activity.requests == 1  # watching the server does not keep it alive
    release.set()
    await slow
    assert activity.inflight == 0 and activity.idle_for() >= 0.0
    before = activity.last
    await wrapped({"type": "lifespan"}, None, None)
    assert activity.last == before and activity.requests == 1


def test_the_log_is_rotated_in_place(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("x" * 50)
    assert rotate_log(log, 100, 3) is False
    for n in range(1, 6):
        with open(log, "a") as fh:  # the server writes with O_APPEND and keeps its file open
            fh.write(f"{n}" * 200)
        assert rotate_log(log, 100, 3) is True
        assert log.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log", "server.log.1", "server.log.2", "server.log.3"]
    assert (tmp_path / "server.log.1").read_text() == "5" * 200
    assert (tmp_path / "server.log.3").read_text() == "3" * 200
    assert rotate_log(tmp_path / "missing.log", 1, 3) is False
