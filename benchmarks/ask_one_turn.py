"""`wisp ask` one turn against an endpoint that answers at once, against `import httpx` and one request.

Both are fresh interpreters timed from launch to exit; the endpoint is a
fake Ollama on 127.0.0.1 that answers every chat at once. wisp is configured
with the model and its window, as a person who set them up has it, so
nothing is probed or listed (issue 12, "Fast at every size", last row;
target ≤ 1.5×).

    python benchmarks/ask_one_turn.py [--runs N] [--quick]
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _common import Row, arguments, child_env, point_at, print_row, private_home

WISP_ASK = "import sys; sys.argv[0] = 'wisp'; from wisp.tui.launch import main; main()"
HTTPX_ONE = textwrap.dedent("""
    import sys
    import httpx
    r = httpx.post(sys.argv[1] + "/api/chat", json={"model": "wisp-fake:latest", "stream": True,
                   "messages": [{"role": "user", "content": "hello"}]}, trust_env=False)
    sys.stdout.write(r.text[:0])
""")


def timed(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120, env=child_env())
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return elapsed


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    home = private_home()
    work = home / "work"
    work.mkdir()
    from tests.support.fakes import FakeOllama

    row = Row("`wisp ask` one turn", "s", "import httpx and one request")
    with FakeOllama() as srv:
        point_at(home, "ollama", srv.base_url, name="wisp-fake:latest", context_window=8192)
        wisp = [sys.executable, "-c", WISP_ASK, "ask", "hello"]
        bare = [sys.executable, "-c", HTTPX_ONE, srv.base_url]
        timed(wisp, work)  # the first run creates the database; not counted
        timed(bare, work)
        for _ in range(args.runs):
            row.wisp.append(timed(wisp, work))
            row.anchor.append(timed(bare, work))
    print_row(row)


if __name__ == "__main__":
    main()
