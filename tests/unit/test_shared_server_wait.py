"""Finding a shared embedded server that is busy with another wisp's request (wisp.core.model.embedded).

A new user ran `wisp ask` while the TUI streamed a long reply on the same shared server: the ask waited
with no word, because llama-cpp-python answers ``GET /v1/models`` only once the model is free. wisp's
host answers ``GET /wisp/status`` beside the model, so the wait is said once, and the error at the
deadline names the busy server. Here a real HTTP server on 127.0.0.1 plays the host: its model route
waits on an event the test sets, never on a sleep.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from wisp.core.model.embedded import BUSY_STATUS, EmbeddedServerError, _wait_ready
from wisp.core.model.llama_host import INFO_NAME, STATUS_PATH

PID = 4242


class BusyHost:
    """``/v1/models`` answers once :attr:`free` is set; ``/wisp/status`` answers at once, in flight 1 until then."""

    def __init__(self) -> None:
        self.free = threading.Event()
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == STATUS_PATH:
                    body = {"pid": PID, "inflight": 0 if host.free.is_set() else 1}
                elif self.path == "/v1/models":
                    host.free.wait(30)
                    body = {"data": [{"id": "SmolLM2-135M-Instruct.Q4_1"}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "BusyHost":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.free.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[tuple[Path, BusyHost]]:
    with BusyHost() as host:
        (tmp_path / INFO_NAME).write_text(json.dumps({"base_url": host.base_url, "pid": PID}))
        (tmp_path / "server.log").write_text("llama.cpp log line\n")
        yield tmp_path, host


async def test_a_busy_server_is_said_once_then_found_when_free(state) -> None:
    state_dir, host = state
    said: list[str] = []

    def on_status(line: str) -> None:
        said.append(line)
        host.free.set()  # the other request ends once the wait was said

    info = await _wait_ready(state_dir, time.monotonic() + 60, lambda: None, lambda: PID,
                             state_dir / "server.log", on_status)
    assert info["base_url"] == host.base_url and info["model"] == "SmolLM2-135M-Instruct.Q4_1"
    assert len(said) == 1 and said[0].startswith(BUSY_STATUS.split("{")[0])
    assert "another wisp's reply" in said[0] and "model.timeout_s" in said[0]


async def test_a_server_busy_past_the_deadline_is_named_in_the_error(state) -> None:
    state_dir, host = state
    said: list[str] = []
    with pytest.raises(EmbeddedServerError) as info:
        await _wait_ready(state_dir, time.monotonic() + 2.5, lambda: None, lambda: PID,
                          state_dir / "server.log", said.append)
    assert "stayed busy with another request" in str(info.value) and "raise model.timeout_s" in str(info.value)
    assert len(said) == 1  # said once, not at every poll


async def test_a_server_that_does_not_answer_at_all_is_not_called_busy(tmp_path: Path) -> None:
    (tmp_path / INFO_NAME).write_text(json.dumps({"base_url": "http://127.0.0.1:9", "pid": PID}))
    said: list[str] = []
    with pytest.raises(EmbeddedServerError) as info:
        await _wait_ready(tmp_path, time.monotonic() + 0.5, lambda: None, lambda: PID, tmp_path / "server.log",
                          said.append)
    assert said == [] and "did not answer within the start timeout" in str(info.value)

