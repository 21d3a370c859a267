"""A real model: llama.cpp's OpenAI-compatible server with SmolLM2-135M (the `local` extra).

`wisp ask` and the TUI find no Ollama or OpenAI-compatible server, start the
embedded server on a free 127.0.0.1 port, chat through it and stop it on exit.
Skipped only where the extra is missing (and never in CI, which sets WISP_REQUIRE_LOCAL).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.session import SessionOptions
from tests.support.home import require_local, write_config

pytestmark = pytest.mark.real_model
WISP = str(Path(sys.executable).parent / "wisp")


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def embedded_home(wisp_home: Path) -> Path:
    """auto, with a configured endpoint that is down, so the embedded default is what answers."""
    require_local()
    from wisp.core.model.embedded import default_gguf_path

    write_config(wisp_home, {"model.provider": "auto", "model.endpoint": dead_url(),
                             "model.gguf": str(default_gguf_path())})
    return wisp_home


def llama_server_on(port: str) -> list[int]:
    """PIDs of llama.cpp servers listening on ``port`` (by their command line)."""
    out = subprocess.run(["pgrep", "-f", f"llama_cpp.server.*--port {port}"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_ask_chats_through_the_embedded_model(embedded_home: Path, tmp_path: Path) -> None:
    r = subprocess.run([WISP, "ask", "Say hello in one short sentence.", "--json"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    reply = "".join(e["text"] for e in events if e["event"] == "text_delta")
    assert reply.strip(), "the model said nothing"
    assert events[-1] == {"event": "turn_ended", "turn": 1, "state": "done"} or events[-1]["state"] == "cut"
    listing = json.loads(subprocess.run([WISP, "conversations", "--json"], capture_output=True, text=True,
                                        env=os.environ.copy()).stdout)
    conv = listing["conversations"][0]
    assert "embedded" in conv["endpoint"] and "SmolLM2" in conv["model"]
    # the server wisp started is gone again
    port = conv["endpoint"].rsplit(":", 1)[1].strip("/")
    assert port.isdigit() and llama_server_on(port) == []


async def test_tui_chats_through_the_embedded_model(embedded_home: Path, tmp_path: Path) -> None:
    from wisp.tui.app import WispApp
    from wisp.tui.widgets import AssistantMessage
    from tests.support.pilot import send, started, screenshot, until

    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=(110, 36)) as pilot:
        await until(pilot, app.ready.is_set, "the embedded model to start", limit=12000)
        assert app.status.state == "ready", app.status.render()
        assert "SmolLM2" in app.status.model and "embedded" in app.status.endpoint
        await send(pilot, app, "What is the capital of France? Answer in one word.")
        reply = app.query(AssistantMessage).last()
        assert reply.text.strip()
        assert app.status.prompt_tokens is None or app.status.prompt_tokens > 0
        screenshot(app, "chat-embedded")
    assert app.session is None  # closed, and with it the embedded server
