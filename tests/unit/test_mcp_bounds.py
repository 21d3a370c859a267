"""A hostile MCP server (the official SDK's server API, tests/support/hostile_mcp_server.py)
against wisp's bounds: a 50 MB result is reported as too big, naming
``tools.mcp.max_output_bytes``, within memory and at once (it read as "did
not answer within 8 s"); a 209 MB stderr flood leaves at most the log's cap
on disk. The same over streamable HTTP: the SDK's server answering 50 MB as
server-sent events and as JSON, and a raw one (tests/support/fault_http.py)
whose answer never ends or is a gzip bomb, are each too big at once, within
memory, and `wisp ask` ends its turn with exit 0. The calls run in a child
process whose peak RSS is its own ``VmHWM``; figures are printed (``pytest -s``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from wisp.core.mcp.bounded import TOO_LARGE_CODE, BoundedLines, message_cap_for
from wisp.core.mcp.stderr_log import LOG_KEEP, LOG_MAX_BYTES, StderrLog
from tests.support.fakes import FakeOpenAI, reply, text, tool_call
from tests.support.fault_http import FaultServer, bomb_answer, endless_answer, mcp_speaker, text_answer
from tests.support.mcp_helpers import add_config
from tests.unit.test_endpoint_faults import ask, configure

SERVER = Path(__file__).resolve().parent.parent / "support" / "hostile_mcp_server.py"
RSS_LIMIT_MB = 200

CALLER = textwrap.dedent('''
    import asyncio, json, sys, time
    from pathlib import Path
    from wisp.core.mcp.connection import Connection, McpFailure
    from wisp.core.mcp_config import HttpServer, StdioServer

    async def main():
        tool, args, logs, server = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
        spec = (HttpServer(name="hostile", url=server) if server.startswith("http://") else
                StdioServer(name="hostile", command=sys.executable, args=(server, "/dev/null")))
        conn = Connection(spec, cwd=Path.cwd(), log_dir=logs, max_output_bytes=262144)
        await conn.start(30)
        began = time.monotonic()
        try:
            result = await conn.call(tool, args, timeout_s=60)
            text = "".join(getattr(b, "text", "") for b in result.content)
            out = {"ok": True, "chars": len(text), "head": text[:40]}
        except McpFailure as exc:
            out = {"ok": False, "kind": exc.kind, "message": str(exc)}
        out["seconds"] = time.monotonic() - began
        # the server is still usable after a dropped answer
        again = await conn.call("huge", {"mb": 0.001}, timeout_s=30)
        out["after"] = len("".join(getattr(b, "text", "") for b in again.content))
        await conn.stop()
        # wisp's own peak (the server is a child of this process: wait4's figure would count it too)
        status = Path("/proc/self/status").read_text()
        out["peak_kb"] = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1])
        print(json.dumps(out))

    asyncio.run(main())
''')


def call_in_child(tmp_path: Path, tool: str, args: dict, server: str = str(SERVER)) -> tuple[dict, float]:
    """Call ``tool`` of the hostile server (``server``: the script started over stdio, or a
    streamable HTTP URL) from a child process; ``(its report, its peak RSS in MB)``: the child's
    own ``VmHWM``, which leaves out the server it started."""
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, str(script), tool, json.dumps(args), str(tmp_path / "logs"),
                                 server], stdout=out, stderr=err, cwd=tmp_path, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise AssertionError("the caller did not end within 180 s")
            time.sleep(0.05)  # polling the child's exit
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    assert os.waitstatus_to_exitcode(status) == 0, stderr
    report = json.loads(stdout.strip().splitlines()[-1])
    peak = report["peak_kb"] / 1024
    print(f"\n[mcp figure] {tool} {args}: peak RSS {peak:.1f} MB: {report}")
    return report, peak


def test_a_50_mb_result_is_too_big_at_once_and_names_the_setting(tmp_path: Path) -> None:
    report, peak = call_in_child(tmp_path, "huge", {"mb": 50})
    assert report["ok"] is False and report["kind"] == "too_large", report
    assert "tools.mcp.max_output_bytes" in report["message"] and "too big" in report["message"], report
    assert "did not answer" not in report["message"]
    assert report["seconds"] < 20
    assert report["after"] == 1048  # the next call is answered: the server was not taken down
    assert peak < RSS_LIMIT_MB, f"peak RSS {peak:.0f} MB"


def test_a_result_under_the_message_cap_is_read_and_cut(tmp_path: Path) -> None:
    report, peak = call_in_child(tmp_path, "huge", {"mb": 2})
    assert report["ok"] is True and report["chars"] == 2 * 1024 * 1024
    assert peak < RSS_LIMIT_MB


def test_a_209_mb_stderr_flood_leaves_at_most_the_log_cap_on_disk(tmp_path: Path) -> None:
    report, peak = call_in_child(tmp_path, "flood", {"mb": 209})
    assert report["ok"] is True and report["head"] == "flooded"
    logs = sorted((tmp_path / "logs").iterdir())
    total = sum(p.stat().st_size for p in logs)
    print(f"[mcp figure] stderr logs: {[(p.name, p.stat().st_size) for p in logs]}, {total:,} bytes in all")
    assert [p.name for p in logs] == ["hostile.log"] + [f"hostile.log.{i}" for i in range(1, LOG_KEEP + 1)]
    assert total <= LOG_MAX_BYTES * (LOG_KEEP + 1)
    assert all(p.stat().st_size <= LOG_MAX_BYTES for p in logs)
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in logs)
    assert peak < RSS_LIMIT_MB


def test_the_stderr_log_rotates_at_its_cap_and_keeps_the_newest(tmp_path: Path) -> None:
    log = StderrLog(tmp_path / "s.log", max_bytes=1000, keep=2)
    for i in range(50):
        log.writer.write(f"{i:04d}".encode() * 25 + b"\n")  # 101 bytes a line
    log.close()
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(files) == {"s.log", "s.log.1", "s.log.2"}
    assert all(len(v) <= 1000 for v in files.values())
    assert files["s.log"].endswith(b"0049" * 25 + b"\n")  # the newest lines are kept


# --- remote servers (streamable HTTP) ------------------------------------------------


@contextmanager
def sdk_server_over_http(json_response: bool) -> Iterator[str]:
    """The hostile server over streamable HTTP on 127.0.0.1 (answers as server-sent events, or as
    JSON bodies); yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), os.devnull, "--http", str(port),
                             *(["--json"] if json_response else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # poll until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the HTTP MCP server did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def raw_server() -> FaultServer:
    """A raw MCP server over streamable HTTP: ``endless`` (JSON) and ``endless_sse`` answer with a
    text that never ends, ``bomb`` with a gzip body inflating to 1.1 GB, ``huge`` with 1,048 chars."""
    return FaultServer(mcp_speaker({"endless": endless_answer(), "endless_sse": endless_answer(sse=True),
                                    "bomb": bomb_answer(), "huge": text_answer("x" * 1048)}))


def assert_too_big_at_once(report: dict, peak: float) -> None:
    assert report["ok"] is False and report["kind"] == "too_large", report
    assert "tools.mcp.max_output_bytes" in report["message"] and "too big" in report["message"], report
    assert "did not answer" not in report["message"]
    assert report["seconds"] < 20
    assert report["after"] == 1048  # the next call is answered: the connection was not taken down
    assert peak < RSS_LIMIT_MB, f"peak RSS {peak:.0f} MB"


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_a_remote_servers_50_mb_result_is_too_big_at_once(tmp_path: Path, json_response: bool) -> None:
    with sdk_server_over_http(json_response) as url:
        report, peak = call_in_child(tmp_path, "huge", {"mb": 50}, server=url)
    assert_too_big_at_once(report, peak)


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_a_remote_result_under_the_message_cap_is_read(tmp_path: Path, json_response: bool) -> None:
    # 2 MB in one server-sent event: over the SDK's own 1 MiB default, under wisp's cap
    with sdk_server_over_http(json_response) as url:
        report, peak = call_in_child(tmp_path, "huge", {"mb": 2}, server=url)
    assert report["ok"] is True and report["chars"] == 2 * 1024 * 1024, report
    assert peak < RSS_LIMIT_MB


@pytest.mark.parametrize("tool", ["endless", "endless_sse", "bomb"])
def test_a_remote_result_that_never_ends_is_too_big_at_once(tmp_path: Path, tool: str) -> None:
    with raw_server() as srv:
        report, peak = call_in_child(tmp_path, tool, {}, server=f"{srv.base_url}/mcp")
    assert_too_big_at_once(report, peak)
    assert "more than" in report["message"]  # read only up to the cap: its size is not known


def test_wisp_ask_ends_its_turn_when_a_remote_result_never_ends(wisp_home: Path, tmp_path: Path) -> None:
    """The real `wisp ask`: the model calls the endless tool, gets the too-big error as its tool
    result, and answers; exit 0, within memory."""
    with raw_server() as mcp_srv, FakeOpenAI() as model:
        configure(wisp_home, "openai", model.base_url)
        add_config(wisp_home, {"mcpServers": {"raw": {"type": "http", "url": f"{mcp_srv.base_url}/mcp",
                                                      "trust": True}}})
        model.push(reply(tool_call("mcp__raw__endless", {}), finish="tool_calls"), reply(text("It was too big.")))
        run = ask(tmp_path, "--tool", "mcp__raw")
        sent = model.chat_bodies[-1]["messages"]
    assert run.code == 0, run.stderr
    assert "It was too big." in run.stdout and "Traceback" not in run.stderr
    result = next(m["content"] for m in sent if m["role"] == "tool")
    assert "too big" in result and "tools.mcp.max_output_bytes" in result, result
    assert run.peak_mb < RSS_LIMIT_MB, f"peak RSS {run.peak_mb:.0f} MB"


# --- the line bound itself ----------------------------------------------------------


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        pass


def _through(chunks: list[bytes], cap: int) -> tuple[bytes, int]:
    async def run() -> tuple[bytes, int]:
        stream = BoundedLines(_Chunks(chunks), cap)
        out = b""
        while True:
            try:
                out += await stream.receive()
            except anyio.EndOfStream:
                return out, stream.dropped
    return anyio.run(run)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:]) if b > a]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 120)), min_size=1, max_size=12),
       st.lists(st.integers(0, 5000), max_size=20), st.integers(20, 100))
def test_bounded_lines_pass_short_lines_and_answer_long_ones_with_an_error(messages, cuts, cap) -> None:
    lines = [json.dumps({"jsonrpc": "2.0", "id": ident, "result": "x" * size}).encode() for ident, size in messages]
    data = b"\n".join(lines) + b"\n"
    out, dropped = _through(_split(data, cuts), cap)
    got = out.split(b"\n")[:-1]
    assert len(got) == len(lines) and dropped == sum(len(ln) > cap for ln in lines)
    for sent, seen in zip(lines, got):
        if len(sent) <= cap:
            assert seen == sent
        else:
            error = json.loads(seen)
            assert error["id"] == json.loads(sent)["id"] and error["error"]["code"] == TOO_LARGE_CODE
            assert error["error"]["data"] == {"bytes": len(sent), "cap": cap}


def test_the_message_cap_follows_the_setting() -> None:
    assert message_cap_for(262144) == 16 * 1024 * 1024
    assert message_cap_for(8 * 1024 * 1024) == 32 * 1024 * 1024
