"""The memory viewer answers every request with a page and a status, never a traceback or a closed
connection (issue "Nothing runs, leaks, hangs or is lost that shouldn't be", "Nothing crashes"):
`?page=` with a huge number is 400, and a hypothesis fuzz of its query parameters and paths counts
0 server errors."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wisp.core.config import Config
from wisp.core.episodes.viewer import MemoryViewer
from wisp.core.database import open_store
from tests.support.episodes_util import add_exchange, add_memory
from tests.support.home import write_config


async def seed(db: Path) -> None:
    async with await open_store(db) as store:
        a = await add_exchange(store, "plan the website launch", "Friday.", workspace="website", channel="3",
                               requested_at="2025-03-04T14:05:00.000000Z", finished_at="2025-03-04T14:06:00.000000Z")
        await add_memory(store, "Agreed to launch the website on Friday.", [a])


@pytest.fixture
def viewer(wisp_home: Path):
    write_config(wisp_home, {"memory.timezone": "Europe/London"})
    config = Config.load()
    asyncio.run(seed(config.db_path))
    v = MemoryViewer(config, "127.0.0.1", 0).start()
    yield v
    v.stop()


def get(viewer: MemoryViewer, target: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=20)
    try:
        conn.request("GET", target, headers={"Host": f"127.0.0.1:{viewer.port}"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


@pytest.mark.parametrize("page", ["99999999999999999999999", "9" * 5000, "20000000002", "-5", "0", "x", "1e9"])
def test_a_huge_page_number_is_400_not_a_traceback(viewer, page: str) -> None:
    status, body = get(viewer, "/memory?page=" + page)
    assert status in (200, 400), (page, status)
    if page in ("99999999999999999999999", "20000000002"):
        assert status == 400 and "offset is from 0 to" in body
    assert "Traceback" not in body and "<html" in body


PARAMS = ["q", "workspace", "transport", "channel", "since", "until", "page", "x"]
nasty = st.one_of(st.text(max_size=20), st.sampled_from(["9" * 40, "-1", "\x00", "*", "", "7d", "week", "today",
                                                         "2025-02-30", "9999-12-31T99:99", "\ud800", "NaN",
                                                         "\"'<>&", "%", "OR", "NEAR(", "a*", "^", "\u202e"]))
query = st.dictionaries(st.sampled_from(PARAMS), nasty, max_size=5)
path = st.one_of(st.just("/memory"), st.just("/"), st.text(max_size=12).map(lambda t: "/memory/" + quote(t, safe="")),
                 st.sampled_from(["/memory/MEM-000001", "/memory/MEM-99999999999999999999", "/memory/mem-1",
                                  "/memory/%00", "/memory/..%2F..", "/nope", "//memory"]))


def test_fuzzed_queries_and_paths_always_answer(viewer) -> None:
    stats = {"requests": 0, "server_errors": 0}

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(target=path, params=query)
    def one(target: str, params: dict[str, str]) -> None:
        encoded = urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in params.items()})
        full = target + ("?" + encoded if encoded else "")
        stats["requests"] += 1
        status, body = get(viewer, full)
        if status >= 500:
            stats["server_errors"] += 1
        assert status in (200, 302, 400, 404), (full, status, body[:300])
        assert "Traceback" not in body

    try:
        one()
    finally:
        print(f"\nviewer fuzz: {stats}")
    assert stats["server_errors"] == 0 and stats["requests"] >= 270
