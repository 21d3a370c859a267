"""Pilot tests of the TUI against fake endpoints on 127.0.0.1, with a real store.

Each main view is also written as an SVG screenshot into screenshots/.
"""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Callable

import pytest

from wisp.core.session import Session, SessionOptions
from wisp.tui.app import FIRST_PAGE_TURNS, PAGE_TURNS, WispApp
from wisp.tui.widgets.chat_pane import MAX_TURNS_MOUNTED
from wisp.tui.widgets import AssistantMessage, CommandOutput, Notice, ThinkingBlock, ToolBlock, UserMessage
from wisp.tui.screens import HelpScreen
from wisp.tui.widgets import PromptInput
from tests.support.home import SCREENSHOTS
from tests.support.long_conversation import write_turns
from tests.support.fakes import fault, reply, text, thinking, tool_call

from tests.support.pilot import SIZE, screenshot, send, started, texts, until  # noqa: E402,F401


async def test_chat_streams_reply_with_thinking_and_code(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply(thinking("The person wants a function."),
                   text("Here is a function:\n\n```python\ndef add(a, b):\n"), text("    return a + b\n```\n\nDone.")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.status.state == "ready" and app.status.model == "wisp-fake:latest"
        await send(pilot, app, "write add()")
        assert [w.renderable if hasattr(w, "renderable") else None for w in app.query(UserMessage)]
        replies = list(app.query(AssistantMessage))
        assert len(replies) == 1 and "def add(a, b):" in replies[0].text
        think = app.query_one(ThinkingBlock)
        assert think.collapsed and think.text == "The person wants a function."
        assert "The person wants" not in replies[0].text
        assert app.status.state == "ready" and app.status.prompt_tokens == 10
        path = screenshot(app, "chat")
        svg = html.unescape(path.read_text())
        assert ">def<" in svg and ">return<" in svg and "wisp-fake:latest" in svg


async def test_tool_call_shows_collapsed_and_expands(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "notes.txt").write_text("release codename: BLUE HERON\n")
    srv.push(reply(text("Let me read it."), tool_call("read_file", {"path": "notes.txt"}), finish="tool_calls"),
             reply(text("The codename is **BLUE HERON**.")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "what is the codename?")
        block = app.query_one(ToolBlock)
        assert block.collapsed and "✓" in str(block.title) and "read_file" in str(block.title)
        # outcome and entry first (a narrow pane cuts the arguments, not the entry), and no "[end of file]" line
        assert str(block.title).startswith("✓ entry 4 · 1 line · ⚙ read_file")
        assert "BLUE HERON" in block.output
        block.collapsed = False
        await pilot.pause()
        assert "The codename is" in app.query(AssistantMessage).last().text
        screenshot(app, "tool-call")


async def test_escape_stops_a_streaming_reply(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.stall(text("Once upon a time")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text("tell me a story")
        await pilot.press("enter")
        await until(pilot, lambda: any("Once upon" in m.text for m in app.query(AssistantMessage)),
                    "the first words")
        assert app.status.state == "streaming"
        await pilot.press("escape")
        await app.turn_worker.wait() if False else None
        await until(pilot, lambda: not app.turn_worker.is_running, "the turn to stop")
        await pilot.pause()
        assert any("stopped" in str(n.render()) for n in app.query(Notice))
        turns = await app.session.store.turns(app.session.conversation_id)
        assert turns[-1].state == "stopped"
        entries = await app.session.store.entries(app.session.conversation_id)
        assert entries[-1].content == "Once upon a time" and entries[-1].meta["partial"]
        assert app.status.state == "ready"
    srv.stop()


FAULTS = [
    (fault.status(400, {"error": "the input length exceeds the context length"}), "context"),
    (fault.status(500, {"error": "internal"}), "500"),
    (fault.model_not_found(), "wisp-fake-2"),
    (fault.malformed(text("partial ")), "partial"),
    (fault.error_object(text("partial "), message="CUDA out of memory"), "CUDA out of memory"),
    (fault.disconnect(text("partial ")), "partial"),
]


@pytest.mark.parametrize("script,words", FAULTS)
async def test_faults_show_a_message_and_the_chat_goes_on(ollama_home, tmp_path: Path, script, words) -> None:
    home, srv = ollama_home
    srv.push(script)
    if words == "context":  # a refusal for size without a count is fitted again twice: refused each time
        srv.push(script, script)
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "first")
        errors = [str(n.render()) for n in app.query(Notice) if n.level == "error"]
        assert errors, "no error shown"
        shown = " ".join(errors) + " ".join(m.text for m in app.query(AssistantMessage))
        assert words in shown
        assert app.status.state == "error"
        await send(pilot, app, "second")
        assert app.query(AssistantMessage).last().text == "You said: second"
        assert app.status.state == "ready"


async def test_timeout_and_wait_for_loading_model(wisp_home: Path, tmp_path: Path) -> None:
    from tests.support.home import write_config
    from tests.support.fakes import FakeOllama

    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 0.5, "model.load_wait_s": 3})
        srv.push(fault.unavailable(times=3), fault.stall(text("slow")))
        app = WispApp(SessionOptions(workdir=tmp_path))
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, app)
            await send(pilot, app, "first")
            waits = [n for n in app.query(Notice) if "load the model" in str(n.render())]
            assert len(waits) == 1  # one line for the whole wait, however many tries
            assert app.query(AssistantMessage).last().text == "You said: first"
            await send(pilot, app, "second")
            assert any("timed out" in str(n.render()).lower() or "timeout" in str(n.render()).lower()
                       for n in app.query(Notice) if n.level == "error")


async def test_no_endpoint_still_opens_with_one_message(wisp_home: Path, tmp_path: Path) -> None:
    from tests.support.home import write_config
    from tests.support.fakes import FakeOllama

    srv = FakeOllama().start()
    url = srv.base_url
    srv.stop()
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": url})
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.status.state == "no endpoint"
        errors = [n for n in app.query(Notice) if n.level == "error"]
        assert len(errors) == 1 and url in str(errors[0].render())
        await send(pilot, app, "anyone there?")
        assert "Not sent" in str(app.query(Notice).last().render())
        screenshot(app, "no-endpoint")


async def test_resume_shows_the_stored_conversation(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.push(reply(tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"), reply(text("It says alpha.")))
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        await s.connect()
        async for _ in s.run_turn("read a.txt"):
            pass
        conv = s.conversation_id
    app = WispApp(SessionOptions(workdir=tmp_path, resume=conv))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert [str(u.render()) for u in app.query(UserMessage)] == ["read a.txt"]
        assert app.query(AssistantMessage).last().text == "It says alpha."
        block = app.query_one(ToolBlock)
        assert "alpha" in block.output and "✓" in str(block.title)
        assert app.prompt_input.prompt_history == ["read a.txt"]
        await send(pilot, app, "and again")
        assert app.session.conversation_id == conv


async def test_long_conversation_opens_with_the_turns_that_fill_the_screen(ollama_home, tmp_path: Path) -> None:
    """Issue 12, "Open what is seen": the last turns that fill the screen are mounted, not a fixed
    page; "Show earlier turns" (or scrolling up) brings the ones before them."""
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 1000, output_lines=200)
    app = WispApp(SessionOptions(workdir=tmp_path, continue_last=True))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        users = list(app.query(UserMessage))
        assert 0 < len(users) <= FIRST_PAGE_TURNS and str(users[-1].render()).startswith("question 1000:")
        assert len(users) < FIRST_PAGE_TURNS  # a screenful, not the whole first page
        shown = len(users)
        assert f"{1000 - shown:,} not shown" in str(app.chat.earlier_button.label)
        block = app.query(ToolBlock).last()  # a stored tool block is one line until opened
        assert block.collapsed and not block.query("Static.tool-output")
        block.collapsed = False
        await until(pilot, lambda: bool(block.query("Static.tool-output")), "the opened block's output")
        app.chat.earlier_button.press()
        await until(pilot, lambda: len(app.query(UserMessage)) > shown and app.chat.earlier < 1000 - shown,
                    "earlier turns")
        first = str(app.query(UserMessage).first().render())
        assert first.startswith(f"question {1000 - len(app.query(UserMessage)) + 1}:")
        assert f"{1000 - len(app.query(UserMessage)):,} not shown" in str(app.chat.earlier_button.label)


def _numbers(app: WispApp) -> list[int]:
    return [int(str(u.render()).split(":")[0].split()[1]) for u in app.query(UserMessage)]


async def test_scrolling_up_a_long_conversation_reaches_turn_1(ollama_home, tmp_path: Path) -> None:
    """Issue 12: earlier turns load as the person scrolls up, in order, with the view kept in
    place; Ctrl+Home reaches turn 1 and Ctrl+End the last turn; however far the person scrolls,
    at most MAX_TURNS_MOUNTED turns are mounted."""
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 1000, output_lines=200)
    app = WispApp(SessionOptions(workdir=tmp_path, resume=conv))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        first_shown = _numbers(app)[0]
        loads = 0
        for _ in range(300):  # scroll up page by page: three loads of earlier turns
            before = _numbers(app)[0]
            await pilot.press("pageup")
            await pilot.pause()
            if _numbers(app)[0] < before:
                loads += 1
                if loads == 3:
                    break
        numbers = _numbers(app)
        assert loads == 3 and numbers[0] < first_shown and numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        assert len(numbers) <= MAX_TURNS_MOUNTED
        await pilot.press("ctrl+home")
        await until(pilot, lambda: _numbers(app)[0] == 1 and app.chat.scroll_y == 0, "turn 1 at the top")
        users = list(app.query(UserMessage))
        assert str(users[0].render()).startswith("question 1:") and app.chat.earlier_button is None
        assert app.chat.region.contains_region(users[0].region), "turn 1 is on screen"
        assert app.chat.later and app.chat.later_button is not None
        for _ in range(300):  # scroll down again: later turns load below, in order
            await pilot.press("pagedown")
            await pilot.pause()
            if _numbers(app)[-1] > PAGE_TURNS * 2:
                break
        numbers = _numbers(app)
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and numbers[-1] > PAGE_TURNS * 2
        await pilot.press("ctrl+end")
        await until(pilot, lambda: _numbers(app)[-1] == 1000 and not app.chat.later, "the last turn again")
        assert str(app.query(UserMessage).last().render()).startswith("question 1000:")
async def test_keys_newline_history_and_help(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "first prompt")
        await send(pilot, app, "second prompt")
        prompt = app.prompt_input
        await pilot.press("a", "ctrl+j", "b", "shift+enter", "c")
        assert prompt.text == "a\nb\nc"
        prompt.clear()
        await pilot.press("up")
        assert prompt.text == "second prompt"
        await pilot.press("up")
        assert prompt.text == "first prompt"
        await pilot.press("down")
        assert prompt.text == "second prompt"
        await pilot.press("down")
        assert prompt.text == ""
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        screenshot(app, "help")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_config_slash_command(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text("/config set context.memory on")
        await pilot.press("enter")
        await pilot.pause()
        out = app.query(CommandOutput).last()
        assert "context.memory" in out.source and "true" in out.source
        assert app.session.config.get("context.memory") is True
        app.prompt_input.load_text("/config set context.memroy on")
        await pilot.press("enter")
        await pilot.pause()
        out = app.query(CommandOutput).last()
        assert out.has_class("-error") and "context.memory" in out.source
        assert srv.chat_bodies == []  # commands cost the model nothing


async def test_config_set_model_name_reconnects(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.status.model == "wisp-fake:latest"
        app.prompt_input.load_text("/config set model.name wisp-fake-2:latest")
        await pilot.press("enter")
        await until(pilot, lambda: app.status.model == "wisp-fake-2:latest", "the new model in the status bar")
        await send(pilot, app, "hello")
        assert srv.chat_bodies[-1]["model"] == "wisp-fake-2:latest"


async def test_keyboard_scrolls_and_typing_finds_the_prompt(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    for i in range(8):
        srv.push(reply(text("\n\n".join(f"paragraph {j} of reply {i}" for j in range(12)))))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        for i in range(8):
            await send(pilot, app, f"prompt {i}")
        bottom = app.chat.scroll_y
        assert bottom > 0
        await pilot.press("pageup")
        await pilot.pause()
        assert app.chat.scroll_y < bottom
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert app.chat.scroll_y == app.chat.max_scroll_y
        # focus leaves the prompt (say a click on a block); typing still lands in the prompt
        app.set_focus(None)
        await pilot.press("h", "i")
        assert app.prompt_input.text == "hi" and app.focused is app.prompt_input


async def test_turns_added_by_another_process_are_shown_before_a_turn(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "from this window")
        conv = app.session.conversation_id
        # another wisp (here: a second session on the same files) adds a turn
        async with await Session.open(SessionOptions(workdir=tmp_path, resume=conv)) as other:
            await other.connect()
            async for _ in other.run_turn("from the other window"):
                pass
        await send(pilot, app, "back here")
        users = [str(u.render()) for u in app.query(UserMessage)]
        assert users == ["from this window", "from the other window", "back here"]
        assert any("added by another wisp" in str(n.render()) for n in app.query(Notice))


async def test_a_prompt_refused_as_busy_stays_and_the_other_turn_shows_once_ended(ollama_home,
                                                                                tmp_path: Path) -> None:
    """A new user's prompt, sent while `wisp ask` ran a turn of the same conversation, was cleared (back
    only with Up), and the other turn was shown without its reply, for good."""
    import os
    import select
    import signal
    import subprocess
    import sys

    from tests.support.fakes import pause

    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "mine")
        conv = app.session.conversation_id
        srv.push(reply(text("their words "), pause(30), text("never sent")))
        wisp = str(Path(sys.executable).parent / "wisp")
        other = subprocess.Popen([wisp, "ask", "--resume", str(conv), "theirs"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=tmp_path, env=os.environ.copy())
        try:
            ready, _, _ = select.select([other.stdout], [], [], 60)
            assert ready, "the other wisp's reply did not start"
            os.read(other.stdout.fileno(), 4096)
            app.prompt_input.load_text("second")
            await pilot.press("enter")
            await until(pilot, lambda: any("back in the input" in str(n.render()) for n in app.query(Notice)),
                        "the busy answer", limit=2000)
            assert app.prompt_input.text == "second"
            await until(pilot, lambda: not app.turn_worker.is_running, "the refused turn's worker")
            # a refusal is no error of this window: the status bar says ready, not "● error"
            assert app.status.state == "ready" and "error" not in str(app.status.render()), str(app.status.render())
            other.send_signal(signal.SIGTERM)  # the other turn ends, stopped, with its words kept
            other.communicate(timeout=60)
        finally:
            other.kill()
        assert app.status.state == "ready"
        await pilot.press("enter")  # the same prompt, sent again
        await until(pilot, lambda: app.turn_worker is not None and not app.turn_worker.is_running
                    and "second" in texts(app, UserMessage), "the second turn", limit=2000)
        await pilot.pause()
        assert texts(app, UserMessage) == ["mine", "theirs", "second"]
        assert any("their words" in t for t in texts(app, AssistantMessage)), texts(app, AssistantMessage)
