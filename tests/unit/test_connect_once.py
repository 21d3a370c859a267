"""Connect once (issue 12): one client probes, lists and chats; the model list is asked for once;
/api/tags and /api/show are not asked when the model and the window are configured or kept for
this endpoint; a plain-http endpoint loads no certificates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fakes import FakeOllama
from tests.support.home import write_config
from wisp.core.config import Config
from wisp.core.model._transport import _tls_for
from wisp.core.model.base import ChatOptions
from wisp.core.model.known import FILE_NAME, KnownWindows
from wisp.core.model.link import ModelLink
from wisp.core.model.resolve import EndpointSettings, resolve_endpoint

WISP = str(Path(sys.executable).parent / "wisp")


def paths(srv: FakeOllama) -> list[str]:
    return [r["path"] for r in srv.requests]


async def test_auto_probes_lists_and_chats_on_one_client_and_lists_once(monkeypatch) -> None:
    made: list[httpx.AsyncClient] = []
    real_init = httpx.AsyncClient.__init__

    def counted(self: httpx.AsyncClient, *args: object, **kwargs: object) -> None:
        made.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counted)
    with FakeOllama(models=["llama3.2:latest"]) as srv:
        resolved = await resolve_endpoint(EndpointSettings(provider="auto"), ollama_url=srv.base_url,
                                          openai_url="http://127.0.0.1:9", embedded=False)
        try:
            assert resolved.model == "llama3.2:latest"
            assert paths(srv) == ["/api/tags"], "the probe's answer is the model list: asked once"
            async for _ in resolved.endpoint.stream_chat([{"role": "user", "content": "hi"}], None,
                                                        ChatOptions(context_window=512)):
                pass
            assert paths(srv) == ["/api/tags", "/api/chat"]
            assert made == [resolved.endpoint._client], "one client probed, listed and chatted"
        finally:
            await resolved.aclose()


async def test_the_window_is_asked_once_per_endpoint_and_model(wisp_home: Path) -> None:
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest"})
        for _ in range(2):
            link = ModelLink(Config.load())
            assert await link.connect()
            assert link.context_window == srv.context_length
            await link.close()
        assert paths(srv).count("/api/show") == 1 and "/api/tags" not in paths(srv)
        kept = json.loads((wisp_home / FILE_NAME).read_text())
        assert kept["windows"] == {f"ollama {srv.base_url}\nwisp-fake:latest": srv.context_length}
        assert (wisp_home / FILE_NAME).stat().st_mode & 0o777 == 0o600


def test_wisp_ask_with_model_and_window_configured_asks_nothing_but_the_chat(wisp_home: Path,
                                                                               tmp_path: Path) -> None:
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.context_window": 8192})
        r = subprocess.run([WISP, "ask", "hello"], capture_output=True, text=True, cwd=tmp_path,
                           env=os.environ.copy(), timeout=60)
        assert r.returncode == 0 and r.stdout == "You said: hello\n", r.stderr
        assert paths(srv) == ["/api/chat"]


def test_a_plain_http_endpoint_loads_no_certificates_and_https_keeps_httpxs_own() -> None:
    context = _tls_for("http://127.0.0.1:11434")["verify"]
    assert context.get_ca_certs() == [] and context.check_hostname  # any TLS attempt could only fail
    assert _tls_for("https://example.invalid") == {} and _tls_for("HTTPS://example.invalid") == {}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_a_damaged_endpoints_file_is_never_raised(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("known") / FILE_NAME
    path.write_bytes(data)
    known = KnownWindows(path)
    window = known.get("ollama http://x", "m")
    assert window is None or (type(window) is int and window > 0)
    known.remember("ollama http://x", "m", 4096)
    assert known.get("ollama http://x", "m") == 4096


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_any_json_in_the_endpoints_file_reads_as_windows_or_nothing(tmp_path_factory, value) -> None:
    path = tmp_path_factory.mktemp("known") / FILE_NAME
    path.write_text(json.dumps({"windows": value}) if not isinstance(value, dict) else json.dumps(value))
    got = KnownWindows(path)._read()
    assert all(type(v) is int and v > 0 for v in got.values())
