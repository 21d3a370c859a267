"""Fixtures of the TUI tests: a fixed place for the snapshot tests.

A snapshot shows what the views show, and the views show the working
directory (the ``workdir`` fact, the approval modal), the endpoint's URL (the
status bar) and times (facts in the composed request, memories). So the
snapshot tests run with fixed paths, a fixed port and a fixed clock, and a
re-run gives the same SVG (issue 9, "Visual regression": "Fixed ports and
paths make the snapshots stable").

Other test runs on the same machine may use the same paths and port at the
same moment, so each snapshot test holds an exclusive lock on
:data:`LOCK_FILE` while it runs.
"""

from __future__ import annotations

import fcntl
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.home import write_config

#: Where every snapshot test runs: its WISP_HOME and its working directory, made afresh per test.
SNAPSHOT_ROOT = Path("/tmp/wisp-snapshot")
#: The fixed port of the fake endpoint in the snapshot tests (shown in the status bar).
SNAPSHOT_PORT = 47311
#: Serialises the snapshot tests of all test runs on this machine.
LOCK_FILE = Path("/tmp/wisp-snapshot.lock")
#: The fixed clock: every stored time of a snapshot test (UTC).
FIXED_NOW = "2025-03-04T14:05:00.000000Z"


@dataclass(frozen=True)
class FixedPlace:
    """``home`` (WISP_HOME), ``workdir`` (the project folder, named ``project``),
    ``port`` and ``url`` of the fake endpoint (nothing listens until a test starts one)."""

    home: Path
    workdir: Path
    port: int
    url: str

    def configure(self, values: dict[str, object] | None = None) -> None:
        """Write config.json: the fake Ollama on the fixed port, memory times in UTC,
        plus ``values`` (dotted keys)."""
        base: dict[str, object] = {"model.provider": "ollama", "model.endpoint": self.url,
                                   "model.name": "wisp-fake:latest", "model.timeout_s": 5,
                                   "model.load_wait_s": 10, "memory.timezone": "UTC"}
        base.update(values or {})
        write_config(self.home, base)


def _freeze_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every time the views can show comes from these clocks: pin them to :data:`FIXED_NOW`."""
    import wisp.core.context.facts as facts
    import wisp.core.store as store

    monkeypatch.setattr(store, "utc_now", lambda: FIXED_NOW)
    monkeypatch.setattr(facts, "_utc_now", lambda: FIXED_NOW)


@pytest.fixture
def fixed_place(monkeypatch: pytest.MonkeyPatch) -> Iterator[FixedPlace]:
    """A fresh WISP_HOME and working directory at fixed paths under
    :data:`SNAPSHOT_ROOT`, a config for the fake endpoint on :data:`SNAPSHOT_PORT`
    and frozen clocks; the machine-wide lock is held until the test ends."""
    LOCK_FILE.touch(exist_ok=True)
    with LOCK_FILE.open("r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            shutil.rmtree(SNAPSHOT_ROOT, ignore_errors=True)
            home = SNAPSHOT_ROOT / "home"
            workdir = SNAPSHOT_ROOT / "project"
            home.mkdir(parents=True)
            workdir.mkdir()
            monkeypatch.setenv("WISP_HOME", str(home))
            monkeypatch.setenv("HOME", str(SNAPSHOT_ROOT / "user"))
            monkeypatch.setenv("XDG_DATA_HOME", str(SNAPSHOT_ROOT / "user" / "data"))
            monkeypatch.delenv("WISP_WORKSPACE", raising=False)
            monkeypatch.delenv("COLORFGBG", raising=False)  # ui.theme auto: the same theme on every terminal
            _freeze_clocks(monkeypatch)
            place = FixedPlace(home, workdir, SNAPSHOT_PORT, f"http://127.0.0.1:{SNAPSHOT_PORT}")
            place.configure()
            yield place
        finally:
            shutil.rmtree(SNAPSHOT_ROOT, ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def no_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """bwrap absent, as tests/unit/test_sandbox.py fakes it (wisp looks for it only where there is
    none): commands have no sandbox. The probe is forgotten before and after."""
    from wisp.core.tools import sandbox

    monkeypatch.setattr(sandbox, "BWRAP_CANDIDATES", (str(tmp_path / "no-such-bwrap"),))
    sandbox.reset()
    yield
    sandbox.reset()
