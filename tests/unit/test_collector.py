"""The garbage collector around a launch (wisp.core.collector; issue 12, "wisp ask one turn").

The console script holds the collector while wisp starts; whatever the
command, it must be back on while the command does its work (a turn, a
server, an evaluation), or a long run would keep every cycle it makes.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from tests.support.fakes import FakeOllama, reply
from wisp.core import collector


@pytest.fixture
def collector_restored():
    """Whatever a test does to the collector, the test process gets it back on and unfrozen."""
    yield
    collector._held = False
    gc.enable()
    gc.unfreeze()


def test_a_held_collector_runs_again_once_started_and_startup_is_frozen(collector_restored) -> None:
    collector.hold()
    assert not gc.isenabled()
    before = gc.get_freeze_count()
    collector.started()
    assert gc.isenabled()
    assert gc.get_freeze_count() > before
    frozen = gc.get_freeze_count()
    collector.started()  # the second time does nothing
    assert gc.get_freeze_count() == frozen


def test_without_hold_started_changes_nothing(collector_restored) -> None:
    """The tests and a person's script that import the core keep their collector as it was."""
    gc.disable()
    collector.started()
    assert not gc.isenabled()
    gc.enable()
    before = gc.get_freeze_count()
    collector.started()
    assert gc.isenabled() and gc.get_freeze_count() == before


def _watch(srv: FakeOllama) -> list[tuple[str, bool]]:
    """Every request the endpoint gets (probes, model lists, chats), with whether the collector was on."""
    seen: list[tuple[str, bool]] = []
    handle = srv._handle

    def watched(h, method: str, path: str, body: object) -> None:
        seen.append((path, gc.isenabled()))
        handle(h, method, path, body)

    srv._handle = watched  # type: ignore[method-assign]
    return seen


def _launch(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    from wisp.tui.launch import main

    monkeypatch.setattr(sys, "argv", ["wisp", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    return int(stop.value.code or 0)


def test_wisp_ask_talks_to_its_endpoint_with_the_collector_on(collector_restored, ollama_home,
                                                             tmp_path: Path, monkeypatch) -> None:
    """The fake endpoint runs in this process: what it sees of the collector is what the turn had."""
    _home, srv = ollama_home
    seen = _watch(srv)
    srv.push(reply("hello"))
    monkeypatch.chdir(tmp_path)
    assert _launch(["ask", "hi"], monkeypatch) == 0
    assert "/api/chat" in {path for path, _ in seen}
    assert all(on for _, on in seen), seen
    assert gc.isenabled()


def test_every_other_command_runs_with_the_collector_on(collector_restored, ollama_home, tmp_path: Path,
                                                        monkeypatch) -> None:
    """`wisp conversations` stands for the commands that are not timed (mcp serve, eval …)."""
    from wisp.core import cli

    seen: list[bool] = []
    real = cli._conversations

    async def conversations(args):
        seen.append(gc.isenabled())
        return await real(args)

    monkeypatch.setattr(cli, "_conversations", conversations)
    monkeypatch.chdir(tmp_path)
    assert _launch(["conversations"], monkeypatch) == 0
    assert seen == [True]


def test_a_failing_command_leaves_the_collector_on(collector_restored, wisp_home, monkeypatch) -> None:
    assert _launch(["ask", "hi", "--resume", "999"], monkeypatch) != 0
    assert gc.isenabled()


async def test_the_tui_runs_with_the_collector_on_once_its_session_is_open(collector_restored, ollama_home,
                                                                         tmp_path: Path) -> None:
    from tests.support.pilot import SIZE, send, started
    from wisp.core.session_options import SessionOptions
    from wisp.tui.app import WispApp

    _home, srv = ollama_home
    seen = _watch(srv)
    srv.push(reply("hello"))
    collector.hold()  # as the console script does
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert gc.isenabled()
        await send(pilot, app, "hi")
    paths = [path for path, _ in seen]
    assert "/api/show" in paths and "/api/chat" in paths  # connecting asks for the window, then the turn
    assert all(on for _, on in seen), seen


async def test_the_tui_runs_with_the_collector_on_when_its_session_cannot_open(collector_restored, wisp_home,
                                                                             tmp_path: Path) -> None:
    from tests.support.pilot import SIZE, started
    from wisp.core.session_options import SessionOptions
    from wisp.tui.app import WispApp

    collector.hold()
    app = WispApp(SessionOptions(workdir=tmp_path, resume=999))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.status.state == "error"
        assert gc.isenabled()
