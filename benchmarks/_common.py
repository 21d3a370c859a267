"""Helpers shared by the benchmarks: a private WISP_HOME and a fake endpoint config."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support.fakes


def private_home() -> Path:
    """A temporary WISP_HOME, set in the environment, so no benchmark touches the real home."""
    home = Path(tempfile.mkdtemp(prefix="wisp-bench-"))
    os.environ["WISP_HOME"] = str(home)
    return home


def point_at(home: Path, provider: str, url: str, **extra: object) -> None:
    """Write a config.json using the given endpoint."""
    cfg: dict = {"model": {"provider": provider, "endpoint": url, **extra}}
    (home / "config.json").write_text(json.dumps(cfg))


def summary(name: str, values: list[float], unit: str) -> str:
    """One line: median, min and max of ``values``."""
    return (f"{name}: median {statistics.median(values):.3f} {unit} "
            f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})")
