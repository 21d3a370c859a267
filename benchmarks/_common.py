"""Helpers shared by the benchmarks: a private WISP_HOME, a fake endpoint config, rows with anchors.

Every benchmark of issue 12 prints rows of the same shape: wisp's figure, its
anchor's figure from the same run (a bare Textual app, a bare MarkdownStream,
loading the same rows with aiosqlite, ``import httpx`` and one request) and
their ratio, each as the median of the runs with the spread (min–max)::

    first frame in tmux | wisp 0.412 s (0.40–0.45) | bare Textual app 0.301 s (0.29–0.33) | 1.37× (1.30–1.45) | n=5

``--quick`` runs each benchmark once at small sizes (CI runs them so, so
they cannot rot: tests/unit/test_benchmarks.py); ``--runs N`` sets the
number of runs (at least 5 for figures worth quoting).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support.fakes


def private_home() -> Path:
    """A temporary WISP_HOME, set in the environment, so no benchmark touches the real home."""
    home = Path(tempfile.mkdtemp(prefix="wisp-bench-"))
    os.environ["WISP_HOME"] = str(home)
    return home


_PYCACHE: Path | None = None


def child_env(**extra: str) -> dict[str, str]:
    """The environment for the programs a benchmark launches: Python writes and reads compiled
    bytecode (in a private cache, PYTHONPYCACHEPREFIX), as an installed wisp and an installed Textual
    have theirs; a run with PYTHONDONTWRITEBYTECODE set would compile wisp's sources at every launch
    and Textual's never. The first, warm-up run of each program fills the cache."""
    global _PYCACHE
    if _PYCACHE is None:
        _PYCACHE = Path(tempfile.mkdtemp(prefix="wisp-bench-pycache-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(_PYCACHE)
    env.update(extra)
    return env


def point_at(home: Path, provider: str, url: str, **extra: object) -> None:
    """Write a config.json using the given endpoint (``extra``: more ``model.*`` keys)."""
    cfg: dict = {"model": {"provider": provider, "endpoint": url, **extra}}
    (home / "config.json").write_text(json.dumps(cfg))


def summary(name: str, values: list[float], unit: str) -> str:
    """One line: median, min and max of ``values``."""
    return (f"{name}: median {statistics.median(values):.3f} {unit} "
            f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})")


def arguments(description: str, *, runs: int = 5) -> argparse.Namespace:
    """``--quick`` (once, small sizes) and ``--runs N`` (default ``runs``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="one run at small sizes (CI: the benchmark still works)")
    p.add_argument("--runs", type=int, default=runs, help=f"runs per figure (default {runs})")
    args = p.parse_args()
    if args.quick:
        args.runs = 1
    return args


def _fmt(value: float, unit: str) -> str:
    if unit == "s" and value < 1:
        return f"{value * 1000:.1f} ms"
    if unit == "ms" and value >= 1000:
        return f"{value / 1000:.2f} s"
    if unit in ("tokens/s", "MB"):
        return f"{value:,.0f} {unit}"
    if unit == "ms":
        return f"{value:.2f} ms"
    return f"{value:.3f} {unit}"


def spread(values: list[float], unit: str) -> str:
    """``median (min–max)`` of ``values`` in ``unit``."""
    med = statistics.median(values)
    if len(values) == 1:
        return _fmt(med, unit)
    return f"{_fmt(med, unit)} ({_fmt(min(values), unit)}–{_fmt(max(values), unit)})"


@dataclass
class Row:
    """One figure: ``wisp`` values and the ``anchor``'s from the same runs (paired run by run)."""

    what: str
    unit: str
    anchor_name: str
    wisp: list[float] = field(default_factory=list)
    anchor: list[float] = field(default_factory=list)

    def ratios(self) -> list[float]:
        """wisp ÷ anchor, run by run."""
        return [w / a for w, a in zip(self.wisp, self.anchor) if a]

    def line(self) -> str:
        ratios = self.ratios()
        ratio = "–"
        if ratios:
            med = statistics.median(ratios)
            ratio = f"{med:.2f}×" if len(ratios) == 1 else f"{med:.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
        return (f"{self.what} | wisp {spread(self.wisp, self.unit)} | {self.anchor_name} "
                f"{spread(self.anchor, self.unit)} | ratio {ratio} | n={len(self.wisp)}")


def print_row(row: Row) -> None:
    print(row.line(), flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values)
