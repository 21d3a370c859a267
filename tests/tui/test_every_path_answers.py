"""Every path answers (issue 11): a crash anywhere in the TUI (a handler, an
action, a screen's compose, a worker, the drawing of one event, a command)
is shown as an error line in the chat, the conversation is kept, and the app
goes on. An exit after a crash that still escapes is never status 0."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.message_pump import MessagePump

import wisp.tui
import wisp.core.commands as commands_module  # the app imports the commands on first use, from here
from wisp.core import events as ev
from wisp.core.session import Session, SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.guard import Guarded, guarded, is_guarded, is_handler_name
from wisp.tui.launch import exit_status
from wisp.tui.screens import HelpScreen, MemoryScreen
from wisp.tui.widgets import AssistantMessage, Notice, ToolBlock, UserMessage
from tests.support.episodes_util import add_exchange, add_memory
from tests.support.fakes import reply, text, tool_call
from tests.support.pilot import SIZE, send, started, until


def error_lines(app: WispApp) -> list[str]:
    return [n.text for n in app.chat.query(Notice) if n.level == "error"]


async def crash_shown(pilot: Any, app: WispApp, words: str) -> str:
    """Wait for the error line that names ``words``; returns it."""
    await until(pilot, lambda: any(words in line for line in error_lines(app)), f"an error line with {words!r}")
    return next(line for line in error_lines(app) if words in line)


async def still_chats(pilot: Any, app: WispApp, prompt: str) -> None:
    """The app goes on: a prompt after the crash gets its reply."""
    await send(pilot, app, prompt)
    assert app.chat.last_reply.text == f"You said: {prompt}"
    assert app.is_running and app.return_code in (None, 0)


def audit_errors(home: Path) -> list[dict]:
    events = []
    for f in sorted((home / "data").rglob("audit-*.jsonl")):
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [e for e in events if e["kind"] == "tui.error"]


class Boom(RuntimeError):
    """The injected failure."""


def fail_once(real: Any, message: str) -> Any:
    """``real`` (async), except that its first call raises :class:`Boom`."""
    calls = {"n": 0}

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise Boom(message)
        return await real(*args, **kwargs)
    return wrapper


async def test_a_failing_command_is_an_error_line_and_the_chat_goes_on(ollama_home, tmp_path: Path,
                                                                       monkeypatch) -> None:
    home, srv = ollama_home
    monkeypatch.setattr(commands_module, "run_command", fail_once(commands_module.run_command, "the command broke"))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "before")
        app.prompt_input.load_text("/fact decision db = sqlite")
        await pilot.press("enter")
        line = await crash_shown(pilot, app, "the command broke")
        assert "on_prompt_input_submitted" in line and "Boom" in line and "conversation is kept" in line
        assert [u.text for u in app.chat.query(UserMessage)] == ["before"]  # the conversation is still there
        await still_chats(pilot, app, "after")
        app.prompt_input.load_text("/fact decision db = sqlite")  # the same command works now
        await pilot.press("enter")
        await until(pilot, lambda: "db = sqlite" in app.sidebar.facts_panel.plain, "the fact")
    logged = audit_errors(home)
    assert len(logged) == 1 and "the command broke" in logged[0]["payload"]["traceback"]
    assert logged[0]["id"] in line


async def test_an_event_drawn_wrong_is_reported_and_the_turn_ends(ollama_home, tmp_path: Path,
                                                                   monkeypatch) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.push(reply(tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"), reply(text("It says alpha.")))

    def broken(self: ToolBlock, *args: Any, **kwargs: Any) -> None:
        raise Boom("the block could not draw")

    monkeypatch.setattr(ToolBlock, "finish", broken)
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "read a.txt")
        line = await crash_shown(pilot, app, "the block could not draw")
        assert "drawing ToolResult" in line
        assert app.chat.last_reply.text == "It says alpha."  # the rest of the turn was drawn
        turns = await app.session.store.turns(app.session.conversation_id)
        assert turns[-1].state == "done" and app.status.state == "ready"
        monkeypatch.undo()
        await still_chats(pilot, app, "next")


async def test_a_failing_worker_is_an_error_line(ollama_home, tmp_path: Path, monkeypatch) -> None:
    home, srv = ollama_home
    real = Session.run_turn
    calls = {"n": 0}

    async def run_turn(self: Session, prompt: str, supersedes: int | None = None, *, seen: int | None = None):
        calls["n"] += 1
        if calls["n"] == 1:
            yield ev.TurnStarted(1, 1, 1, prompt)
            raise Boom("the turn's worker broke")
        async for item in real(self, prompt):
            yield item

    monkeypatch.setattr(Session, "run_turn", run_turn)
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text("first")
        await pilot.press("enter")
        line = await crash_shown(pilot, app, "the turn's worker broke")
        assert "run_turn" in line
        await until(pilot, lambda: not app.turn_worker.is_running, "the worker to end")
        assert app.status.state == "error"
        await still_chats(pilot, app, "second")


async def test_a_failing_action_and_a_failing_screen_are_error_lines(ollama_home, tmp_path: Path,
                                                                     monkeypatch) -> None:
    home, srv = ollama_home
    import wisp.tui.screens.help as help_module

    monkeypatch.setattr(commands_module, "run_command", fail_once(commands_module.run_command, "inspect broke"))

    def no_help() -> str:
        raise Boom("no help today")

    monkeypatch.setattr(help_module, "help_text", no_help)
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "hello")
        await pilot.press("f5")  # an action
        assert "action_inspect_context" in await crash_shown(pilot, app, "inspect broke")
        await pilot.press("f1")  # a screen whose compose fails: an empty box, Esc closes it
        assert "compose" in await crash_shown(pilot, app, "no help today")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help screen to close")
        await still_chats(pilot, app, "still here")


async def test_a_failing_handler_in_a_screen_is_an_error_line(ollama_home, tmp_path: Path, monkeypatch) -> None:
    home, srv = ollama_home
    import wisp.tui.screens.memory_list as memory_list

    monkeypatch.setattr(memory_list, "run_command", fail_once(memory_list.run_command, "the memory is unreadable"))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        store = app.session.store
        await add_memory(store, "Launch on Friday.", [await add_exchange(store, "when?", "Friday")])
        app.prompt_input.load_text("/memory")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MemoryScreen), "the memory list")
        await pilot.press("enter")
        line = await crash_shown(pilot, app, "the memory is unreadable")
        assert "on_option_list_option_selected" in line
        assert isinstance(app.screen, MemoryScreen)  # the screen is still there, and works
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "MemoryDetailScreen", "the memory in full")


async def test_an_unanswered_crash_never_exits_with_status_0() -> None:
    """A crash outside wisp's handlers still ends the app, with Textual's return code 1, and
    the console script exits with it, not 0 (the QA finding: "exits with a traceback and status 0")."""

    class Crashing(App[int]):
        def on_mount(self) -> None:
            self.call_later(self.crash)

        def crash(self) -> None:
            raise Boom("outside any handler")

    app = Crashing()
    with pytest.raises(Boom):
        async with app.run_test() as pilot:
            await pilot.pause()
    assert exit_status(app, None) == 1
    assert exit_status(type("Done", (), {"return_code": 0})(), 0) == 0
    assert exit_status(type("Done", (), {"return_code": 0})(), 3) == 3


def _tui_classes() -> list[type]:
    classes = []
    for info in pkgutil.walk_packages(wisp.tui.__path__, "wisp.tui."):
        module = importlib.import_module(info.name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, MessagePump):
                classes.append(cls)
    return classes


def test_every_handler_of_the_tui_is_guarded() -> None:
    """Every widget, screen and app class of wisp.tui derives from Guarded, and every handler,
    action, key method and compose it defines is wrapped: a new handler cannot forget it."""
    classes = _tui_classes()
    assert len(classes) >= 20
    unguarded = [cls.__qualname__ for cls in classes if not issubclass(cls, Guarded)]
    assert unguarded == []
    bare = [f"{cls.__qualname__}.{name}" for cls in classes for name, value in vars(cls).items()
            if inspect.isfunction(value) and is_handler_name(name) and not is_guarded(value)]
    assert bare == []


async def test_guarded_raises_where_no_app_can_report() -> None:
    """A widget run in another app (no report_crash) keeps Textual's behaviour: the error propagates."""
    class Plain:
        app = None

        @guarded
        async def on_thing(self) -> None:
            raise Boom("plain")

    with pytest.raises(Boom):
        await Plain().on_thing()
