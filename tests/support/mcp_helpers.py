"""Helpers for the MCP tests (issue 15): config entries that start the test
server (:mod:`tests.support.mcp_server`) over stdio, and config edits."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parent / "mcp_server.py"


def server_entry(pidfile: Path, **extra: object) -> dict:
    """An ``mcpServers`` entry that starts the test server, which writes
    ``SERVER_PID CHILD_PID`` to ``pidfile``."""
    return {"command": sys.executable, "args": [str(SERVER), str(pidfile)], **extra}


def add_config(home: Path, values: dict) -> None:
    """Merge ``values`` (top-level keys, nested objects) into ``home``'s config.json."""
    path = home / "config.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "mcpServers":
            data[key].update(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=2))
    os.chmod(path, 0o600)


def pids(pidfile: Path) -> list[int]:
    """The server's and its child's pids, as the test server wrote them."""
    return [int(p) for p in pidfile.read_text().split()]
