"""Time to the first frame in tmux: `wisp` against a bare Textual app (Header, Static, Input, Footer).

Each run launches the program in a tmux pane (its own tmux server, 120×40)
and reads the pane through one tmux control-mode client: every time the
pane writes, the screen is captured, and the first frame is the first
capture that shows the program's own text (wisp's status bar, the bare
app's Static). wisp and the bare app alternate, run by run, and both are
timed the same way, so the ratio is fair on a busy machine (issue 12,
"Fast at every size", first row; target ≤ 1.3×).

    python benchmarks/startup.py [--runs N] [--quick]

Without tmux the same figures are taken headless (Textual's headless
driver, first refresh after mount) and the row says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from _common import Row, arguments, child_env, point_at, print_row, private_home

#: The bare Textual app the first frame is measured against.
BARE_APP = textwrap.dedent("""
    from textual.app import App
    from textual.widgets import Footer, Header, Input, Static

    class Bare(App):
        def compose(self):
            yield Header()
            yield Static("bare app ready")
            yield Input()
            yield Footer()

    Bare().run()
""")
BARE_MARK = "bare app ready"

#: wisp as its console script runs it (also works with PYTHONPATH pointing at another checkout).
WISP_APP = "import sys; sys.argv[0] = 'wisp'; from wisp.tui.launch import main; main()"
WISP_MARK = "F1 help"


class Pane:
    """A tmux server of our own with one 120×40 pane, watched through a control-mode client."""

    def __init__(self) -> None:
        self.socket = f"wisp-bench-{os.getpid()}"
        self._tmux("new-session", "-d", "-s", "bench", "-x", "120", "-y", "40", "sleep 100000")
        self._tmux("set-option", "-g", "window-size", "manual")
        self._tmux("set-option", "-g", "remain-on-exit", "on")
        self._tmux("resize-window", "-t", "bench", "-x", "120", "-y", "40")
        self.ctl = subprocess.Popen(["tmux", "-L", self.socket, "-C", "attach", "-t", "bench"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _tmux(self, *args: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, timeout=10, check=False)

    def _read(self) -> None:
        assert self.ctl.stdout is not None
        for raw in iter(self.ctl.stdout.readline, b""):
            with self._cond:
                self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()

    def _next(self, timeout: float) -> str | None:
        with self._cond:
            if not self._lines:
                self._cond.wait(timeout)
            return self._lines.pop(0) if self._lines else None

    def first_frame(self, command: str, mark: str, timeout: float = 60.0) -> float:
        """Seconds from launching ``command`` in the pane to the first screen showing ``mark``."""
        with self._cond:
            self._lines.clear()
        t0 = time.perf_counter()
        self._tmux("respawn-pane", "-k", "-t", "bench", command)
        deadline = t0 + timeout
        pending_output = False
        while time.perf_counter() < deadline:
            line = self._next(0.05)
            if line is None:
                continue
            if not line.startswith("%output"):
                continue
            pending_output = True
            while pending_output:
                pending_output = False
                seen = time.perf_counter()
                assert self.ctl.stdin is not None
                self.ctl.stdin.write(b"capture-pane -p -t bench\n")
                block: list[str] = []
                inside = False
                while True:
                    got = self._next(5)
                    if got is None:
                        break
                    if got.startswith("%output"):
                        pending_output = True  # more came while capturing: look again
                        continue
                    if got.startswith("%begin"):
                        inside = True
                        continue
                    if got.startswith("%end") or got.startswith("%error"):
                        break
                    if inside:
                        block.append(got)
                if any(mark in b for b in block):
                    self._tmux("respawn-pane", "-k", "-t", "bench", "sleep 100000")
                    return seen - t0
        raise SystemExit(f"{mark!r} never appeared within {timeout:.0f} s")

    def close(self) -> None:
        try:
            self.ctl.terminate()
        except Exception:
            pass
        self._tmux("kill-server")


HEADLESS_WISP = textwrap.dedent("""
    import sys, time
    t0 = float(sys.argv[1])
    from wisp.tui.app import WispApp

    class Probe(WispApp):
        def on_mount(self):
            result = WispApp.on_mount(self)
            self.call_after_refresh(self._first_frame)
            return result
        def _first_frame(self):
            print(f"FRAME {time.perf_counter() - t0:.4f}", flush=True)
            self.exit(0)

    Probe(connect=False).run(headless=True)
""")
HEADLESS_BARE = textwrap.dedent("""
    import sys, time
    t0 = float(sys.argv[1])
    from textual.app import App
    from textual.widgets import Footer, Header, Input, Static

    class Bare(App):
        def compose(self):
            yield Header()
            yield Static("bare app ready")
            yield Input()
            yield Footer()
        def on_mount(self):
            self.call_after_refresh(self._first_frame)
        def _first_frame(self):
            print(f"FRAME {time.perf_counter() - t0:.4f}", flush=True)
            self.exit(0)

    Bare().run(headless=True)
""")


def headless_frame(code: str, cwd: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, repr(t0)], capture_output=True, text=True, timeout=120,
                         cwd=cwd, env=child_env())
    line = next((x for x in out.stdout.splitlines() if x.startswith("FRAME")), None)
    if line is None:
        raise SystemExit(f"the app did not paint: {out.stderr[-2000:]}")
    return float(line.split()[1])


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    home = private_home()
    workdir = Path(tempfile.mkdtemp(prefix="wisp-bench-work-"))
    from tests.support.fakes import FakeOllama

    with FakeOllama() as srv:
        point_at(home, "ollama", srv.base_url, name="wisp-fake:latest", context_window=8192)
        if shutil.which("tmux"):
            row = Row("first frame in tmux", "s", "bare Textual app")
            bare_py = workdir / "bare_app.py"
            bare_py.write_text(BARE_APP)
            env = " ".join(f"{k}={v}" for k, v in {
                "WISP_HOME": str(home), "TERM": "xterm-256color",
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
                "PYTHONPYCACHEPREFIX": child_env()["PYTHONPYCACHEPREFIX"]}.items())
            wisp_cmd = f"cd {workdir} && env -u PYTHONDONTWRITEBYTECODE {env} {sys.executable} -c \"{WISP_APP}\""
            bare_cmd = f"cd {workdir} && env -u PYTHONDONTWRITEBYTECODE {env} {sys.executable} {bare_py}"
            pane = Pane()
            try:
                pane.first_frame(bare_cmd, BARE_MARK)  # warm the file cache; not counted
                pane.first_frame(wisp_cmd, WISP_MARK)
                for _ in range(args.runs):
                    row.wisp.append(pane.first_frame(wisp_cmd, WISP_MARK))
                    row.anchor.append(pane.first_frame(bare_cmd, BARE_MARK))
            finally:
                pane.close()
        else:
            row = Row("first frame, headless (no tmux here)", "s", "bare Textual app")
            headless_frame(HEADLESS_BARE, workdir)
            headless_frame(HEADLESS_WISP, workdir)
            for _ in range(args.runs):
                row.wisp.append(headless_frame(HEADLESS_WISP, workdir))
                row.anchor.append(headless_frame(HEADLESS_BARE, workdir))
    print_row(row)


if __name__ == "__main__":
    main()
