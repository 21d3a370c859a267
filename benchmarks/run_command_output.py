"""run_command with a command that prints a lot: time to read it all, and peak memory.

Runs ``yes 'line of text' | head -c SIZE`` through the run_command tool (approved, default
1 MiB cap) in a fresh process for each size, and prints seconds, bytes kept, and how much the
process's peak resident memory (VmHWM, Linux) grew while the command ran. The cap must hold in
memory: the growth should stay near the cap whatever the size.

    python benchmarks/run_command_output.py [SIZE_MB ...]     (default: 1 10 100 500)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

from _common import ROOT  # noqa: F401  (puts the repo on sys.path)

CHILD = r"""
import asyncio, re, sys, time
from pathlib import Path
from wisp.core.config import Config
from wisp.core.tools.approval import Approval
from wisp.core.tools.base import ToolContext
from wisp.core.tools.run_command import RunCommand

def hwm():
    try:
        return int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
    except OSError:
        return 0

async def ok(request):
    return Approval(True, "once", "person")

async def main(size, work):
    ctx = ToolContext(workdir=Path(work), config=Config(Path(work) / "c.json"), approve=ok)
    await RunCommand().run({"command": "true"}, ctx)
    before = hwm()
    t = time.perf_counter()
    r = await RunCommand().run({"command": f"yes 'line of text' | head -c {size}"}, ctx)
    took = time.perf_counter() - t
    print(took, r.meta["output_bytes"], len(r.content.encode()), hwm() - before)

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1, 10, 100, 500]
    work = tempfile.mkdtemp(prefix="wisp-bench-")
    print(f"{'output':>9}  {'seconds':>8}  {'MB/s':>7}  {'kept':>9}  {'peak RSS growth':>16}")
    for mb in sizes:
        size = mb * 1_000_000
        out = subprocess.run([sys.executable, "-c", CHILD, str(size), work], capture_output=True, text=True,
                             check=True)
        took, total, kept, grew = out.stdout.split()
        print(f"{int(total) / 1e6:>7.0f} MB  {float(took):>8.2f}  {int(total) / 1e6 / float(took):>7.0f}  "
              f"{int(kept):>9,}  {int(grew) / 1024:>13.1f} MB")


if __name__ == "__main__":
    main()
