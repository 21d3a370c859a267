"""The memory viewer reads the memory settings afresh: a changed ``memory.timezone`` shows on its
next page, without a restart (enso-episodic-memory.txt, "Setup and controls": "Changes apply on
the next turn or job invocation without a restart"). A real server on 127.0.0.1, a real config
file changed by another Config (as another wisp would) and by ``wisp config set`` in a process
of its own."""

from __future__ import annotations

import asyncio
import http.client
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.config import Config
from wisp.core.database import open_store
from wisp.core.episodes.viewer import MemoryViewer
from tests.support.episodes_util import add_exchange, add_memory
from tests.support.home import write_config

WISP = str(Path(sys.executable).parent / "wisp")


async def seed(db: Path) -> None:
    async with await open_store(db) as store:
        a = await add_exchange(store, "plan the website launch", "Friday.", requested_at="2025-03-04T14:05:00.000000Z")
        await add_memory(store, "Agreed to launch the website on Friday.", [a])


def get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


@pytest.fixture
def served(wisp_home: Path):
    write_config(wisp_home, {"memory.timezone": "Europe/London"})
    config = Config.load()
    asyncio.run(seed(config.db_path))
    v = MemoryViewer(config, "127.0.0.1", 0).start()
    yield wisp_home, v
    v.stop()


def test_a_changed_timezone_shows_on_the_next_page(served) -> None:
    home, v = served
    status, body = get(v.port, "/memory/MEM-000001")
    assert status == 200 and "times in Europe/London" in body and "Tue 2025-03-04 14:05:00 GMT" in body
    # another wisp (its own Config over the same file) changes the zone; the viewer was not restarted
    Config.load().set("memory.timezone", "America/New_York")
    status, body = get(v.port, "/memory/MEM-000001")
    assert status == 200 and "times in America/New_York" in body, body[:400]
    assert "Tue 2025-03-04 09:05:00 EST" in body
    _, timeline = get(v.port, "/memory")
    assert "times in America/New_York" in timeline
    # unset: the machine's zone again, still without a restart
    Config.load().unset("memory.timezone")
    _, body = get(v.port, "/memory")
    assert "times in America/New_York" not in body and "times in Europe/London" not in body


def test_a_timezone_edited_by_hand_to_nonsense_never_stops_the_viewer(served) -> None:
    """A name this machine does not know, written into the file by hand, is not taken (a running
    viewer never fails on a setting being edited: the machine's zone is used, as with none set),
    and the next good value is read again."""
    home, v = served
    write_config(home, {"memory.timezone": "Nowhere/Land"})
    status, body = get(v.port, "/memory")
    assert status == 200 and "Nowhere/Land" not in body and "times in Europe/London" not in body
    write_config(home, {"memory.timezone": "Asia/Tokyo"})
    status, body = get(v.port, "/memory")
    assert status == 200 and "times in Asia/Tokyo" in body


def test_wisp_memory_serve_follows_wisp_config_set(wisp_home: Path) -> None:
    """The commands a person types: ``wisp memory serve`` in one terminal, ``wisp config set`` in another."""
    write_config(wisp_home, {"memory.timezone": "Europe/London"})
    asyncio.run(seed(Config.load().db_path))
    server = subprocess.Popen([WISP, "memory", "serve", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()  # its first line, printed once it listens
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        assert "times in Europe/London" in get(port, "/memory")[1]
        r = subprocess.run([WISP, "config", "set", "memory.timezone", "Australia/Sydney"], capture_output=True,
                           text=True, timeout=60, env=os.environ.copy())
        assert r.returncode == 0, r.stderr
        _, body = get(port, "/memory/MEM-000001")
        assert "times in Australia/Sydney" in body and "Wed 2025-03-05 01:05:00 AEDT" in body
    finally:
        server.terminate()
        server.wait(timeout=30)
