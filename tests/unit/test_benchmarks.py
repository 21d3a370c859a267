"""The benchmarks of issue 12 run, once, at small sizes (``--quick``), so they cannot rot: each prints
its rows, wisp's figure beside its anchor's and their ratio. These are not timed tests: no figure is
checked, only that every row is there and reads as a row."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

#: what | wisp FIGURE | ANCHOR FIGURE | ratio R× | n=N
ROW = re.compile(r"^[^|]+ \| wisp [^|]+ \| [^|]+ \| ratio (\d+\.\d+×|–)[^|]* \| n=\d+$")


def run(script: str, tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "WISP_HOME"}
    env["TMPDIR"] = str(tmp_path)  # the benchmarks make their own WISP_HOME in here
    r = subprocess.run([sys.executable, str(BENCH / script), "--quick"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [line for line in r.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("script,rows", [
    ("startup.py", ["first frame"]),
    ("ask_one_turn.py", ["`wisp ask` one turn"]),
    ("stream_render.py", ["300 tokens: tokens/s", "per-delta cost at the start", "per-delta cost at the end",
                          "per-delta cost, end ÷ start", "lag from the last byte",
                          "lag from the last delta read"]),
    ("open_long_conversation.py", ["20 turns: --resume to the last turn on screen", "20 turns: peak RSS",
                                   "compose the next request, first in a process",
                                   "compose the next request, again"]),
])
def test_each_benchmark_prints_its_rows(script: str, rows: list[str], tmp_path: Path) -> None:
    lines = run(script, tmp_path)
    for line in lines:
        assert ROW.match(line), f"not a row: {line!r}"
    for want in rows:
        assert any(want in line for line in lines), f"{script} printed no {want!r} row:\n" + "\n".join(lines)
