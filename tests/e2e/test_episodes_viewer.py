"""The memory viewer: read-only HTTP on loopback, escaped pages, and a real browser (headless Chromium).

The Chromium test is skipped only where chromium is missing and WISP_REQUIRE_E2E
is unset (CI sets it, and .ci/run installs Debian's chromium).
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from wisp.core.database import open_store
from wisp.core.config import Config
from wisp.core.episodes.viewer import MemoryViewer, ViewerError, check_host
from wisp.core.store import Store
from tests.support.cdp import CHROMIUM, Browser, dump_dom
from tests.support.home import SCREENSHOTS, write_config
from tests.support.episodes_util import add_exchange, add_memory

WISP = str(Path(sys.executable).parent / "wisp")
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes"'


async def seed(db: Path) -> None:
    async with await open_store(db) as store:
        a = await add_exchange(store, "plan the website launch", "Friday, after the DNS change.", workspace="website",
                               channel="3", requested_at="2025-03-04T14:05:00.000000Z",
                               finished_at="2025-03-04T14:06:00.000000Z")
        b = await add_exchange(store, EVIL, "reply " + EVIL, workspace="website", transport="tui", channel="5",
                               requested_at="2025-03-05T09:00:00.000000Z")
        c = await add_exchange(store, "buy milk", "Noted.", workspace="personal", channel="9",
                               requested_at="2025-03-05T10:00:00.000000Z", outcome="stopped")
        await add_memory(store, "Agreed to launch the website on Friday after the DNS change.", [a])
        await add_memory(store, "Summary with markup " + EVIL, [b])
        await add_memory(store, "Asked to be reminded to buy milk; unfinished.", [c])


@pytest.fixture
def viewer_home(wisp_home: Path):
    write_config(wisp_home, {"memory.timezone": "Europe/London"})
    config = Config.load()
    asyncio.run(seed(config.db_path))
    return wisp_home, config


@pytest.fixture
def viewer(viewer_home):
    home, config = viewer_home
    v = MemoryViewer(config, "127.0.0.1", 0).start()
    yield v
    v.stop()


def get(v: MemoryViewer, path: str, method: str = "GET", host: str | None = None) -> tuple[int, str, dict]:
    conn = http.client.HTTPConnection(v.host, v.port, timeout=10)
    headers = {"Host": host} if host else {}
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body, dict(r.getheaders())


def test_timeline_groups_by_event_date_and_escapes(viewer) -> None:
    status, body, headers = get(viewer, "/memory")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert body.index("Wednesday 5 March 2025") < body.index("Tuesday 4 March 2025")
    assert body.index("MEM-000003") < body.index("MEM-000002") < body.index("MEM-000001")
    assert "<script>" not in body and "&lt;script&gt;" in body and "onerror=alert(1)&gt;" in body
    assert "3 memories match" in body


def test_search_and_filters(viewer) -> None:
    _, body, _ = get(viewer, "/memory?q=launch")
    assert "MEM-000001" in body and "MEM-000003" not in body and "1 memory matches" in body
    _, body, _ = get(viewer, "/memory?workspace=personal")
    assert "MEM-000003" in body and "MEM-000001" not in body
    _, body, _ = get(viewer, "/memory?transport=tui")
    assert "MEM-000002" in body and "MEM-000001" not in body
    _, body, _ = get(viewer, "/memory?channel=3")
    assert "MEM-000001" in body and "MEM-000002" not in body
    _, body, _ = get(viewer, "/memory?since=2025-03-05&until=2025-03-06")
    assert "MEM-000002" in body and "MEM-000003" in body and "MEM-000001" not in body
    status, body, _ = get(viewer, "/memory?since=2025-03-05T10:00")
    assert status == 400 and "must carry its UTC offset" in body
    _, body, _ = get(viewer, "/memory?q=" + quote(EVIL))
    assert "<script>" not in body


def test_entry_page_has_summary_times_origin_sources(viewer) -> None:
    status, body, _ = get(viewer, "/memory/MEM-000001")
    assert status == 200
    for part in ("Agreed to launch the website on Friday", "Tue 2025-03-04 14:05:00 GMT", "Recorded",
                 "Wed 2025-03-05 09:00:00 GMT", "website", "plan the website launch",
                 "Friday, after the DNS change.", "completed", "sender alice"):
        assert part in body, part
    _, body, _ = get(viewer, "/memory/MEM-000002")
    assert "<script>" not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert get(viewer, "/memory/MEM-000099")[0] == 404
    assert get(viewer, "/memory/nonsense")[0] == 404
    assert get(viewer, "/elsewhere")[0] == 404


def test_it_changes_nothing(viewer, viewer_home) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, _, headers = get(viewer, "/memory/MEM-000001", method)
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert get(viewer, "/memory", "HEAD")[0] == 200
    assert get(viewer, "/memory/MEM-000001")[0] == 200
    # a page from another host name (DNS rebinding) is refused
    assert get(viewer, "/memory", host="evil.example:80")[0] == 421
    assert get(viewer, "/memory", host=f"localhost:{viewer.port}")[0] == 200


def test_only_loopback_unless_config_allows(viewer_home) -> None:
    home, config = viewer_home
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert check_host(host, False)
    for host in ("0.0.0.0", "192.168.1.10", "::", "wisp-viewer-test.invalid"):
        with pytest.raises(ViewerError, match="memory.serve_allow_non_loopback"):
            check_host(host, False)
    assert check_host("0.0.0.0", True) == "0.0.0.0"
    r = subprocess.run([WISP, "memory", "serve", "--host", "0.0.0.0", "--port", "0"], capture_output=True,
                       text=True, timeout=30, env=os.environ.copy())
    assert r.returncode == 2 and "loopback" in r.stderr
    config.set("memory.serve_allow_non_loopback", "on")
    v = MemoryViewer(Config.load(), "0.0.0.0", 0)
    v.httpd.server_close()


@pytest.fixture
def served(viewer_home):
    """`wisp memory serve --port 0` as a real process; yields its /memory URL."""
    proc = subprocess.Popen([WISP, "memory", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/memory"), proc.stderr.read()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def shot(b: Browser, name: str) -> None:
    """Save the page as screenshots/NAME.png (the viewer's main views, for the README)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    data = b.call("Page.captureScreenshot", format="png")["data"]
    (SCREENSHOTS / f"{name}.png").write_bytes(base64.b64decode(data))


def _need_chromium() -> None:
    if CHROMIUM is None:
        if os.environ.get("WISP_REQUIRE_E2E"):
            pytest.fail("chromium is required for the viewer test (WISP_REQUIRE_E2E is set); "
                        "apt-get install -y chromium")
        pytest.skip("chromium is not installed")


@pytest.mark.e2e
def test_viewer_in_headless_chromium(served) -> None:
    """A real browser loads the timeline, searches with the form, and opens an entry by clicking it."""
    _need_chromium()
    with Browser() as b:
        b.call("Emulation.setDeviceMetricsOverride", width=1100, height=760, deviceScaleFactor=1, mobile=False)
        b.goto(served)
        shot(b, "memory-viewer-timeline")
        assert b.eval("document.title") == "Memory · wisp memory"
        days = b.eval("[...document.querySelectorAll('section.day h2')].map(h => h.textContent)")
        assert days == ["Wednesday 5 March 2025", "Tuesday 4 March 2025"]
        refs = b.eval("[...document.querySelectorAll('#timeline article.memory')].map(a => a.id)")
        assert refs == ["MEM-000003", "MEM-000002", "MEM-000001"]
        assert b.eval("document.querySelectorAll('script').length") == 0  # the evil summary stayed text
        assert "<script>" in b.eval("document.getElementById('MEM-000002').textContent")

        # search: type into the form and press its button
        b.eval("document.getElementById('q').value = 'launch'; document.querySelector('#search button').click()")
        b.wait_for("location.search.includes('q=launch') && document.readyState === 'complete'", "the search")
        assert b.eval("[...document.querySelectorAll('#timeline article.memory')].map(a => a.id)") == ["MEM-000001"]
        assert "1 memory matches" in b.eval("document.getElementById('count').textContent")

        # open the entry by clicking its link
        b.eval("document.querySelector('#timeline a.ref').click()")
        b.wait_for("location.pathname === '/memory/MEM-000001' && document.readyState === 'complete'", "the entry")
        assert "Agreed to launch the website on Friday" in b.eval("document.getElementById('summary').textContent")
        assert "Tue 2025-03-04 14:05:00 GMT" in b.eval("document.getElementById('event').textContent")
        assert b.eval("document.getElementById('recorded').textContent").startswith("Wed 2025-03-05 09:00:00 GMT")
        shot(b, "memory-viewer-entry")
        sources = b.eval("document.getElementById('sources').textContent")
        assert "plan the website launch" in sources and "Friday, after the DNS change." in sources

        # filters: the workspace select
        b.goto(served + "?workspace=personal")
        assert b.eval("[...document.querySelectorAll('#timeline article.memory')].map(a => a.id)") == ["MEM-000003"]
        assert b.eval("document.getElementById('workspace').value") == "personal"


@pytest.mark.e2e
def test_viewer_dump_dom(served) -> None:
    """The same pages through `chromium --dump-dom`, as the briefing describes."""
    _need_chromium()
    dom = dump_dom(served + "?q=milk")
    assert 'id="MEM-000003"' in dom and 'id="MEM-000001"' not in dom
    entry = dump_dom(served.rsplit("/memory", 1)[0] + "/memory/MEM-000003")
    assert "Asked to be reminded to buy milk" in entry and "stopped" in entry
