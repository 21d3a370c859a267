"""What wisp learned of its endpoints, kept between runs: the context window each one reports for a model.

Issue 12, "Connect once": a model's window is asked of the endpoint (Ollama's
``POST /api/show``) once, then read from ``endpoints.json`` beside the
config (mode 0600), keyed by the endpoint's label (provider and URL) and
the model's name. A configured ``model.context_window`` wins over both.
The file is wisp's own, but it is read as outside input: anything in it
that is not a window (a damaged file, a number out of range) is ignored,
never raised.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..paths import atomic_write_private

__all__ = ["KnownWindows", "FILE_NAME", "MAX_ENTRIES"]

#: The file's name, in the directory of config.json.
FILE_NAME = "endpoints.json"
#: At most this many (endpoint, model) windows are kept; the oldest go first.
MAX_ENTRIES = 64
#: Windows outside this range (tokens) are not windows.
_MIN, _MAX = 1, 2 ** 31


class KnownWindows:
    """The windows kept in ``path`` (a JSON object ``{"windows": {"LABEL\\nMODEL": tokens}}``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def beside(cls, config_path: str | os.PathLike[str]) -> "KnownWindows":
        """The file next to a config file."""
        return cls(Path(config_path).parent / FILE_NAME)

    def _read(self) -> dict[str, int]:
        try:
            data: Any = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        windows = data.get("windows") if isinstance(data, dict) else None
        if not isinstance(windows, dict):
            return {}
        return {k: v for k, v in windows.items()
                if isinstance(k, str) and type(v) is int and _MIN <= v <= _MAX}

    def get(self, endpoint: str, model: str) -> int | None:
        """The window (tokens) kept for ``model`` at ``endpoint`` (its label), or ``None``."""
        if not endpoint or not model:
            return None
        return self._read().get(f"{endpoint}\n{model}")

    def remember(self, endpoint: str, model: str, window: int) -> None:
        """Keep ``window`` (tokens) for ``model`` at ``endpoint``. Never raises:
        a home that cannot be written only means asking again next time."""
        if not endpoint or not model or type(window) is not int or not _MIN <= window <= _MAX:
            return
        windows = self._read()
        key = f"{endpoint}\n{model}"
        if windows.get(key) == window:
            return
        windows.pop(key, None)
        windows[key] = window
        while len(windows) > MAX_ENTRIES:
            windows.pop(next(iter(windows)))
        try:
            atomic_write_private(self.path, json.dumps({"windows": windows}, indent=1).encode())
        except OSError:
            pass
