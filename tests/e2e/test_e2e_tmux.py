"""End to end in a real terminal: `wisp` runs in tmux, a person's keys go in, the screen is read back.

Skipped only where tmux is missing and WISP_REQUIRE_E2E is unset (CI sets it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.home import write_config
from tests.support.fakes import FakeOllama, reply, text, tool_call

WISP = str(Path(sys.executable).parent / "wisp")

if shutil.which("tmux") is None:
    if os.environ.get("WISP_REQUIRE_E2E"):
        raise RuntimeError("tmux is required for the end-to-end tests (WISP_REQUIRE_E2E is set)")
    pytest.skip("tmux is not installed", allow_module_level=True)

pytestmark = pytest.mark.e2e


class Terminal:
    """A tmux session on its own server socket, 120x40."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path):
        self.socket = f"wisp-test-{uuid.uuid4().hex[:8]}"
        self.name = "wisp"
        envs = " ".join(f"{k}={v}" for k, v in env.items())
        self.tmux("new-session", "-d", "-s", self.name, "-x", "120", "-y", "40", "-c", str(cwd),
                  f"env {envs} {command}; echo EXITED $?; sleep 30")

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """Poll the screen until ``needle`` shows (a condition, not a fixed wait)."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if needle in screen:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} never appeared; the screen was:\n{screen}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def terminal_env(wisp_home: Path):
    return {"WISP_HOME": str(wisp_home), "TERM": "xterm-256color", "HOME": os.environ["HOME"]}


def test_type_a_prompt_and_read_the_reply(wisp_home: Path, tmp_path: Path, terminal_env) -> None:
    (tmp_path / "notes.txt").write_text("the release codename is BLUE HERON\n")
    with FakeOllama() as srv:
        srv.push(reply(text("Hello from the fake model. "), text("How can I help?")),
                 reply(tool_call("read_file", {"path": "notes.txt"}), finish="tool_calls"),
                 reply(text("The codename is BLUE HERON.")))
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url})
        term = Terminal(WISP, terminal_env, tmp_path)
        try:
            screen = term.wait_for("ready")
            assert "wisp-fake:latest" in screen and srv.base_url in screen
            term.type("hello there")
            term.keys("Enter")
            screen = term.wait_for("How can I help?")
            assert "hello there" in screen
            term.type("what is in notes.txt?")
            term.keys("Enter")
            screen = term.wait_for("The codename is BLUE HERON.")
            assert "read_file" in screen and "✓" in screen
            term.keys("C-q")
            term.wait_for("EXITED 0")
        finally:
            term.close()
    listing = json.loads(subprocess.run([WISP, "conversations", "--json"], capture_output=True, text=True,
                                        env={**os.environ, "WISP_HOME": str(wisp_home)}).stdout)
    assert listing["total"] == 1 and listing["conversations"][0]["turn_count"] == 2


def test_continue_shows_the_last_conversation(wisp_home: Path, tmp_path: Path, terminal_env) -> None:
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url})
        env = {**os.environ, "WISP_HOME": str(wisp_home)}
        r = subprocess.run([WISP, "ask", "remember the word PELICAN"], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        term = Terminal(f"{WISP} --continue", terminal_env, tmp_path)
        try:
            screen = term.wait_for("ready")
            assert "remember the word PELICAN" in screen
            assert "You said: remember the word PELICAN" in screen
            term.keys("F1")
            term.wait_for("Commands")
            term.keys("Escape")
            term.keys("C-q")
            term.wait_for("EXITED 0")
        finally:
            term.close()


def test_no_endpoint_opens_and_says_how_to_fix(wisp_home: Path, tmp_path: Path, terminal_env) -> None:
    srv = FakeOllama().start()
    url = srv.base_url
    srv.stop()
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": url})
    term = Terminal(WISP, terminal_env, tmp_path)
    try:
        screen = term.wait_for("no endpoint")
        assert url in screen
        term.keys("C-q")
        term.wait_for("EXITED 0")
    finally:
        term.close()
