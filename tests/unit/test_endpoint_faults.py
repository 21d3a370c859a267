"""`wisp ask` against real misbehaving servers on 127.0.0.1: an endless line,
an endless SSE event, a gzip bomb (streamed and not), HTTP 429, TLS to plain
HTTP and back, a self-signed certificate, a reset, a silent server.

Each fault: one clear line on stderr, exit 3, no traceback, and the peak
memory of the `wisp ask` process (its ``ru_maxrss`` from ``wait4``) under
200 MB. The figures are printed (``pytest -s``) for the record."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fault_http import (FaultServer, endless, gzip_bomb, ndjson_reply, rate_limited, reset,
                                      self_signed, silent, sse_reply)
from tests.support.home import write_config

WISP = str(Path(sys.executable).parent / "wisp")
RSS_LIMIT_MB = 200


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    peak_mb: float
    seconds: float

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.strip().splitlines() if ln.strip()]


def _hwm_kb(pid: int) -> int:
    """A live process's peak resident memory so far (``VmHWM``, KiB); 0 once it is gone or has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def ask(cwd: Path, *args: str, timeout: float = 120) -> Run:
    """The real ``wisp ask hello`` as a child; its peak RSS is its ``VmHWM`` in ``/proc/PID/status``,
    read as it runs (wait4's ``ru_maxrss`` would not do: Linux counts in it what the forking process,
    pytest, held when it forked, 244 MB late in a full run)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen([WISP, "ask", "hello", *args], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                cwd=cwd, env=os.environ.copy())
        deadline = started + timeout
        peak_kb = 0
        while True:
            peak_kb = max(peak_kb, _hwm_kb(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                raise AssertionError(f"wisp ask did not end within {timeout} s")
            time.sleep(0.01)  # polling the child's memory and exit, not synchronising with it
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        run = Run(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                  peak_kb / 1024, seconds)
    print(f"\n[fault figure] exit {run.code}, peak RSS {run.peak_mb:.1f} MB, {run.seconds:.1f} s: {run.stderr.strip()}")
    return run


def configure(home: Path, provider: str, url: str, **extra: object) -> None:
    values = {"model.provider": provider, "model.endpoint": url, "model.name": "m", "model.timeout_s": 10,
              "model.load_wait_s": 5, "model.tool_mode": "native"}
    values.update({f"model.{k}": v for k, v in extra.items()})
    write_config(home, values)


def assert_one_clear_line(run: Run, *words: str, notices: int = 0) -> None:
    """Exit 3 and one error line holding ``words``, after ``notices`` progress lines (a retry's)."""
    assert run.code == 3, (run.code, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert len(run.lines) == 1 + notices, run.stderr
    error = run.lines[-1]
    assert error.startswith("wisp: error: ") and all("error" not in line for line in run.lines[:-1]), run.stderr
    for word in words:
        assert word in error, (word, error)
    assert "()" not in error and "ollama serve" not in error
    assert run.peak_mb < RSS_LIMIT_MB, f"peak RSS {run.peak_mb:.0f} MB"


# --- bounded input -------------------------------------------------------------


def test_an_endless_ndjson_line_is_refused_at_the_cap(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(endless('{"message": {"role": "assistant", "content": "', b"a",
                             content_type="application/x-ndjson")) as srv:
        configure(wisp_home, "ollama", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "sent a line of over 16 MB without ending it", srv.base_url)


def test_an_endless_sse_line_is_refused_at_the_cap(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(endless('data: {"choices": [{"index": 0, "delta": {"content": "', b"a")) as srv:
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "sent a line of over 16 MB without ending it")


def test_an_endless_sse_event_is_refused_at_the_cap(wisp_home: Path, tmp_path: Path) -> None:
    # short lines, each a field wisp skips, and never the blank line that ends the event
    with FaultServer(endless("", b"id: 1234567\n")) as srv:
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "sent a server-sent event of over 16 MB without ending it")


def test_a_streamed_gzip_bomb_stops_at_the_line_cap(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(gzip_bomb(content_type="application/x-ndjson")) as srv:
        configure(wisp_home, "ollama", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "sent a line of over 16 MB")


def test_an_unstreamed_gzip_bomb_stops_at_the_body_cap(wisp_home: Path, tmp_path: Path) -> None:
    # no model named: wisp lists the models, and /v1/models inflates to over 1 GiB
    with FaultServer(gzip_bomb()) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.timeout_s": 10})
        run = ask(tmp_path)
    assert [r.path for r in srv.requests] == ["/v1/models"]
    assert_one_clear_line(run, "answered /v1/models with over 32 MB (once decompressed)")


def test_a_gzip_bomb_as_a_whole_reply_stops_at_the_body_cap(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(gzip_bomb()) as srv:  # application/json: the server "ignored stream: true"
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "answered /v1/chat/completions with over 32 MB")


# --- HTTP 429 -------------------------------------------------------------------


def test_429_with_retry_after_is_waited_out_then_answered(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(rate_limited(2, "1", then=sse_reply("Hello after the wait."))) as srv:
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert run.code == 0, run.stderr
    assert "Hello after the wait." in run.stdout
    assert [ln.split("; ")[1] for ln in run.lines] == ["retrying in 1 s as it asks (1 of 2)",
                                                      "retrying in 1 s as it asks (2 of 2)"], run.stderr
    chats = [r for r in srv.requests if r.path == "/v1/chat/completions"]
    assert len(chats) == 3
    assert chats[1].at - chats[0].at >= 0.9 and chats[2].at - chats[1].at >= 0.9  # each waited Retry-After: 1
    assert run.peak_mb < RSS_LIMIT_MB


def test_429_past_the_retries_says_the_server_is_rate_limiting(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(rate_limited(99, "1")) as srv:
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert len([r for r in srv.requests if r.path == "/v1/chat/completions"]) == 3  # the first and 2 retries
    assert_one_clear_line(run, "is rate-limiting requests (HTTP 429: Rate limit reached) (after 2 retries)",
                          "wait 1 s", notices=2)
    assert "retrying in 1 s as it asks (1 of 2)" in run.lines[0]
    assert "retrying in 1 s as it asks (2 of 2)" in run.lines[1]


def test_429_asking_a_long_wait_is_told_at_once(wisp_home: Path, tmp_path: Path) -> None:
    when = "Wed, 21 Oct 2099 07:28:00 GMT"  # an HTTP date, far past the 30 s wisp waits out
    with FaultServer(rate_limited(99, when)) as srv:
        configure(wisp_home, "openai", srv.base_url)
        run = ask(tmp_path)
    assert len(srv.requests) == 1
    assert_one_clear_line(run, "is rate-limiting requests", "It asks to wait until 2099-10-21 07:28 UTC")


def test_429_without_retry_after_says_so(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(rate_limited(99, None)) as srv:
        configure(wisp_home, "ollama", srv.base_url)
        run = ask(tmp_path)
    assert [r.path for r in srv.requests if r.path == "/api/chat"] == ["/api/chat"]  # no retry without a wait
    assert_one_clear_line(run, "is rate-limiting requests", "did not say when")


# --- TLS, resets, silence ------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_https_to_a_plain_http_server_says_to_use_http(provider: str, wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(endless("", b"x")) as srv:
        url = srv.base_url.replace("http://", "https://")
        configure(wisp_home, provider, url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "does not speak TLS on that port", f"set model.endpoint to {srv.base_url}")


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_http_to_a_tls_server_says_to_use_https(provider: str, certificate, wisp_home: Path,
                                                tmp_path: Path) -> None:
    with FaultServer(endless("", b"x"), tls=certificate) as srv:
        plain = srv.base_url.replace("https://", "http://")
        configure(wisp_home, provider, plain)
        run = ask(tmp_path)
    assert_one_clear_line(run, "speaks TLS (https), not plain HTTP", f"Set model.endpoint to {srv.base_url}")


def test_a_self_signed_certificate_is_named(certificate, wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(endless("", b"x"), tls=certificate) as srv:
        configure(wisp_home, "ollama", srv.base_url)
        run = ask(tmp_path)
    assert srv.tls_failures >= 1 and not srv.requests
    assert_one_clear_line(run, "sent a TLS certificate that is not trusted", "self-signed")


def test_a_reset_before_answering_says_reset(wisp_home: Path, tmp_path: Path) -> None:
    with FaultServer(reset) as srv:
        configure(wisp_home, "ollama", srv.base_url)
        run = ask(tmp_path)
    assert_one_clear_line(run, "reset the connection before answering")


@pytest.mark.parametrize("clock", ["timeout_s", "reply_timeout_s"])
def test_the_openai_path_waits_its_timeout_once(clock: str, wisp_home: Path, tmp_path: Path) -> None:
    """A server that takes the request and never answers: the tool probe and
    the turn's request used to wait the clock each (twice in all)."""
    limit = 3
    with FaultServer(silent(hold_s=30)) as srv:
        settings = {"timeout_s": limit, "reply_timeout_s": 60} if clock == "timeout_s" else \
            {"timeout_s": 30, "reply_timeout_s": limit}
        configure(wisp_home, "openai", srv.base_url, **settings)
        write_config(wisp_home, {**{"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                    "model.load_wait_s": 5}, **{f"model.{k}": v for k, v in settings.items()}})
        run = ask(tmp_path)
        ended = time.monotonic()
    assert len(srv.requests) == 1, [r.path for r in srv.requests]
    waited = ended - srv.requests[0].at
    assert waited < limit * 1.6, f"waited {waited:.1f} s for a {limit} s clock"
    assert_one_clear_line(run, f"{limit} s")
