"""Nothing is lost, through the real `wisp` process (issue "Nothing runs, leaks, hangs or is lost
that shouldn't be", "Nothing is lost", "Tests and what this must show").

- two `wisp ask --continue` on one conversation released at the same instant, many pairs: never
  both at once, and the conversation's entries never interleave.

Each test prints its figures (trials, failures, what was lost): run with -s to see them.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core.database import open_store
from tests.support.fakes import FakeOllama, trickled
from tests.support.home import write_config

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and FIFOs, on Linux")

WISP = str(Path(sys.executable).parent / "wisp")
#: Pairs of `wisp ask --continue` (the issue's trial had 40).
PAIRS = 40


def environment(home: Path) -> dict[str, str]:
    env = os.environ.copy()
    env.update(WISP_HOME=str(home), HOME=str(home / "user"), XDG_DATA_HOME=str(home / "data"))
    env.pop("WISP_WORKSPACE", None)
    env.pop("WISP_DEBUG", None)
    return env


def configure(home: Path, url: str, **more) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    db = home / "wisp.db"
    write_config(home, {"model.provider": "ollama", "model.endpoint": url, "model.name": "wisp-fake:latest",
                        "model.timeout_s": 30, "store.path": str(db), **more})
    return db


# --- two `wisp ask --continue` at the same instant ----------------------------------------------------------


#: A fork server: it imports the console script's own entry point (wisp.tui.launch.main) once,
#: then forks a process per request (one JSON line on stdin: args, cwd, out and err files, gate, status
#: file) and prints its pid. The process waits at its gate (a FIFO) until the test releases it, runs
#: main() as `wisp` would, and writes its exit status. So two processes start their turn at the same
#: instant, and a pair costs no imports (on two busy cores, imports would take most of the test).
FORK_SERVER = r"""
import json, os, sys
from wisp.tui.launch import main

def child(req):
    code = 70
    try:
        os.chdir(req["cwd"])
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        with open(req["gate"], "rb") as gate:
            gate.read()
        sys.argv = ["wisp", *req["args"]]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        with open(req["status"] + ".tmp", "w") as f:
            f.write(str(code))
        os.rename(req["status"] + ".tmp", req["status"])
        os._exit(0)

for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(req)
    print(pid, flush=True)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


class Forked:
    """A `wisp` process forked by :class:`ForkServer`, held at its gate until :meth:`release`."""

    def __init__(self, pid: int, base: Path) -> None:
        self.pid = pid
        self.base = base
        self.fd: int | None = None

    def ready(self, limit_s: float = 60.0) -> None:
        """Wait (polling) until the process waits at its gate."""
        deadline = time.monotonic() + limit_s
        while self.fd is None:
            try:
                self.fd = os.open(self.base.with_suffix(".gate"), os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                assert time.monotonic() < deadline, "the process never reached its gate"
                time.sleep(0.002)

    def release(self) -> None:
        assert self.fd is not None
        os.close(self.fd)

    def result(self, limit_s: float = 60.0) -> tuple[int, str, str]:
        """Wait (polling) for its exit status; returns (status, stdout, stderr)."""
        status = self.base.with_suffix(".status")
        deadline = time.monotonic() + limit_s
        while not status.exists():
            assert time.monotonic() < deadline, f"process {self.pid} never ended"
            time.sleep(0.005)
        return (int(status.read_text()), self.base.with_suffix(".out").read_text(),
                self.base.with_suffix(".err").read_text())


class ForkServer:
    """Runs :data:`FORK_SERVER` for the wisp home ``home``."""

    def __init__(self, home: Path, files: Path) -> None:
        self.home = home
        self.files = files
        files.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-c", FORK_SERVER], cwd=home, env=environment(home),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(self, name: str, args: list[str]) -> Forked:
        base = self.files / name
        os.mkfifo(base.with_suffix(".gate"))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"args": args, "cwd": str(self.home),
                                          "out": str(base.with_suffix(".out")),
                                          "err": str(base.with_suffix(".err")),
                                          "gate": str(base.with_suffix(".gate")),
                                          "status": str(base.with_suffix(".status"))}) + "\n")
        self.proc.stdin.flush()
        return Forked(int(self.proc.stdout.readline()), base)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_two_ask_continue_at_the_same_instant_never_interleave(tmp_path: Path) -> None:
    home = tmp_path / "race"
    # each turn's reply takes about 0.25 s, so the two turns would overlap if both ran
    with FakeOllama([trickled([f"r{k} " for k in range(8)], 0.03) for _ in range(2 * PAIRS + 1)]) as srv:
        db = configure(home, srv.base_url)
        first = subprocess.run([WISP, "ask", "start"], cwd=home, env=environment(home), capture_output=True,
                               text=True, timeout=60)
        assert first.returncode == 0, first.stderr

        outcomes = {"one ran, one was busy": 0, "both ran": 0}
        problems: list[str] = []
        server = ForkServer(home, tmp_path / "runs")
        try:
            for i in range(PAIRS):
                pair = [server.start(f"pair{i}{side}", ["ask", "--continue", f"pair {i} {side}"])
                        for side in "ab"]
                for p in pair:
                    p.ready()
                for p in pair:
                    p.release()
                results = [p.result() for p in pair]
                busy = ["has a turn running in another wisp" in err for _, _, err in results]
                ran = [code == 0 and "r0 r1" in out for code, out, _ in results]
                if sum(busy) == 1 and sum(ran) == 1:
                    outcomes["one ran, one was busy"] += 1
                elif sum(ran) == 2:
                    outcomes["both ran"] += 1
                else:
                    problems.append(f"pair {i}: {results}")
        finally:
            server.close()

    async def check() -> tuple[str, list, list]:
        async with await open_store(db) as store:
            async with store.db.execute("PRAGMA integrity_check") as cur:
                integrity = (await cur.fetchone())[0]
            conv = (await store.list_conversations())[0]
            return integrity, await store.turns(conv.id), await store.entries(conv.id)
    integrity, turns, entries = asyncio.run(check())
    interleavings = 0
    seen: set[int] = set()
    for prev, entry in zip(entries, entries[1:]):
        if entry.turn_id != prev.turn_id:
            seen.add(prev.turn_id)
            if entry.turn_id in seen:
                interleavings += 1
    overlaps = sum(1 for a, b in zip(turns, turns[1:]) if b.started_at < (a.ended_at or "~"))
    kinds = [e.kind for e in entries]
    summary = (f"two `wisp ask --continue` at once: {PAIRS} pairs, {outcomes}, {len(problems)} other; "
               f"{len(turns)} turns, {interleavings} interleavings, {overlaps} overlapping turns")
    print("\n" + summary)
    assert not problems, problems[:3]
    assert integrity == "ok"
    assert interleavings == 0 and overlaps == 0, summary
    assert kinds == ["prompt", "reply"] * len(turns), summary
    assert all(t.state == "done" for t in turns)
    assert len(turns) == 1 + outcomes["one ran, one was busy"] + 2 * outcomes["both ran"]
