"""Fixtures for the end-to-end tests: one embedded server for the whole session.

CI has 2 cores and the real-model tests must stay well under 30 minutes, so they
share one embedded server (issue 10): every home made by ``embedded_home`` links
its ``data/embedded`` to the same directory, where the first test's wisp starts
the server and the others find it through its lock and port files, as the
person's wisps do. The server is stopped when the session ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.support.home import require_local, write_config


@pytest.fixture(scope="session")
def shared_embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data directory of the session's shared embedded server (its ``embedded/`` is linked into homes)."""
    root = tmp_path_factory.mktemp("shared-embedded-data")
    (root / "embedded").mkdir()
    yield root
    from wisp.core.model.embedded import stop_shared_servers

    stop_shared_servers(root)


def embedded_config(home: Path, **extra: object) -> None:
    """auto, with a configured endpoint that is down, so the embedded default is what answers."""
    import socket

    from wisp.core.model.embedded import default_gguf_path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    write_config(home, {"model.provider": "auto", "model.endpoint": dead, "model.gguf": str(default_gguf_path()),
                        "model.embedded_idle_s": 900, **extra})


@pytest.fixture
def embedded_home(wisp_home: Path, shared_embedded: Path) -> Path:
    """A home whose wisps use the session's shared embedded server."""
    require_local()
    (wisp_home / "data").mkdir(exist_ok=True)
    (wisp_home / "data" / "embedded").symlink_to(shared_embedded / "embedded", target_is_directory=True)
    embedded_config(wisp_home)
    return wisp_home


@pytest.fixture
def cold_home(wisp_home: Path) -> Path:
    """A home with no embedded server yet: its first wisp starts one (stopped when the test ends)."""
    require_local()
    embedded_config(wisp_home)
    return wisp_home
