"""`wisp ask` on a terminal writes no control sequence the model (or a command, or a server) sent:
clear screen, window title, OSC 52 clipboard writes, 8-bit CSI, bidirectional overrides (issue
"Nothing runs, leaks, hangs or is lost that shouldn't be", "Raw terminal escapes"). Checked through
a real pty; `--json` and pipes are unaffected."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tty
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core.text import terminal_safe, without_surrogates
from tests.support.fakes import FakeOllama, reply, text, tool_call
from tests.support.home import write_config

WISP = str(Path(sys.executable).parent / "wisp")

NASTY = ["Hello ", "\x1b[2J\x1b[H", "\x1b]0;pwned title\x07", "\x1b]52;c;cm0gLXJmIH4=\x07", "world",
         "\x9b31mred", "\x9d0;t\x9c", "\u202edesrever", "\x07\x08\x7f", "line\r\nnext\rover", "\x1bP+q\x1b\\",
         "\tend\n"]
CONTROL_BYTES = [b"\x1b", b"\x07", b"\x08", b"\x7f", b"\xc2\x9b", b"\xc2\x9d", b"\xc2\x9c", b"\r",
                 "\u202e".encode()]


def run_on_pty(args: list[str], cwd: Path, stderr_on_pty: bool = True) -> tuple[bytes, bytes, int]:
    """Run wisp with stdout (and stderr) on a raw pty; returns (pty bytes, stderr pipe bytes, status)."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no \n → \r\n translation: the bytes are exactly what wisp wrote
    proc = subprocess.Popen([WISP, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave if stderr_on_pty else subprocess.PIPE, env=os.environ.copy())
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the pty
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read() if proc.stderr else b""
    return out, err, proc.wait(timeout=60)


def _script():
    return [reply(*NASTY)]


def test_a_reply_with_control_sequences_reaches_the_terminal_defused(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama(_script()) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest"})
        out, _, status = run_on_pty(["ask", "hi"], tmp_path)
    assert status == 0, out
    for raw in CONTROL_BYTES:
        assert raw not in out, (raw, out)
    shown = out.decode()
    assert "Hello \\x1b[2J\\x1b[H\\x1b]0;pwned title\\x07" in shown  # visible, not acted on
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown and "\\x9b31mred" in shown and "\\u202edesrever" in shown
    assert "line\nnextover" in shown and "\tend\n" in shown


def test_json_and_pipes_are_unaffected(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama(_script() * 3) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest"})
        on_pty, _, status = run_on_pty(["ask", "--json", "hi"], tmp_path, stderr_on_pty=False)
        assert status == 0
        piped = subprocess.run([WISP, "ask", "--json", "hi"], cwd=tmp_path, capture_output=True,
                               env=os.environ.copy(), timeout=60)
        plain = subprocess.run([WISP, "ask", "hi"], cwd=tmp_path, capture_output=True,
                               env=os.environ.copy(), timeout=60)
    deltas = lambda data: "".join(e.get("text", "") for e in map(json.loads, data.decode().split("\n")[:-1])  # noqa: E731
                                  if e["event"] == "text_delta")
    assert deltas(on_pty) == deltas(piped.stdout) == "".join(NASTY)
    assert plain.stdout.decode() == "".join(NASTY) + "\n"  # a pipe gets the reply as it came


def test_command_output_and_tool_calls_on_the_terminal_are_defused(wisp_home: Path, tmp_path: Path) -> None:
    command = "printf '\\033]52;c;eHh4\\007\\033[2Jout\\n'"
    with FakeOllama([reply(tool_call("run_command", {"command": command, }), finish="tool_calls"),
                     reply(text("done"))]) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "tools.enabled": ["run_command"],
                                 "tools.run_command.allow": ["printf"]})
        out, _, status = run_on_pty(["ask", "run it"], tmp_path)
    assert status == 0, out
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"\\x1b]52;c;eHh4\\x07\\x1b[2Jout" in out


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _harmless(ch: str) -> bool:
    code = ord(ch)
    return ch in "\n\t" or (code >= 0x20 and not 0x7F <= code <= 0x9F and ch not in BIDI)


@given(st.text())
def test_terminal_safe_leaves_no_control_character(text: str) -> None:
    safe = without_surrogates(terminal_safe(text))
    safe.encode("utf-8")
    assert all(_harmless(ch) for ch in safe), repr(safe)
    if all(_harmless(ch) for ch in text):
        assert terminal_safe(text) == text


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(), st.binary()), limit=st.integers(min_value=2, max_value=200))
def test_one_line_is_one_safe_line_within_its_limit(text, limit: int) -> None:
    from wisp.core.text import one_line

    line = one_line(text, limit)
    assert len(line) <= limit and "\n" not in line
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)

