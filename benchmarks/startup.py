"""Start-up time to the first frame: from launching a Python process to wisp's first painted screen.

Runs wisp's app headless in a fresh interpreter each time (imports included),
against a fake Ollama endpoint on 127.0.0.1, and prints the median of N runs.

    python benchmarks/startup.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import time

from _common import point_at, private_home, summary

CHILD = r"""
import sys, time
t0 = float(sys.argv[1])
from wisp.tui.app import WispApp
from wisp.core.session import SessionOptions

class Probe(WispApp):
    def on_mount(self):
        super_mount = WispApp.on_mount(self)
        self.call_after_refresh(self._first_frame)
        return super_mount
    def _first_frame(self):
        print(f"FRAME {time.time() - t0:.4f}", flush=True)
        self.exit(0)

Probe(SessionOptions(), connect=False).run(headless=True)
"""


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    home = private_home()
    sys.path.insert(0, str(home))
    from tests.support.fakes import FakeOllama

    with FakeOllama() as srv:
        point_at(home, "ollama", srv.base_url)
        times = []
        for _ in range(runs):
            t0 = time.time()
            out = subprocess.run([sys.executable, "-c", CHILD, repr(t0)], capture_output=True, text=True,
                                 timeout=60)
            line = next((l for l in out.stdout.splitlines() if l.startswith("FRAME")), None)
            if line is None:
                raise SystemExit(f"the app did not paint: {out.stderr[-2000:]}")
            times.append(float(line.split()[1]))
    print(summary("start-up to first frame", times, "s"))


if __name__ == "__main__":
    main()
