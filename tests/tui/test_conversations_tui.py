"""Issue 16 in the TUI (Pilot, fake endpoints on 127.0.0.1, a real store): /model's picker,
/profile, /search and Ctrl+R, /retry with Left/Right over a reply's versions, /edit, /fork,
/copy and Ctrl+Y (the app's clipboard), /title, /new, /clear, themes, the welcome, narrow
terminals, the prompt kept while a reply streams, and long prompts folded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.fakes import FakeOllama, FakeOpenAI, fault, reply, text
from tests.support.home import write_config
from tests.support.pilot import SIZE, screenshot, send, started, until
from wisp.core.session import Session, SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.screens import HistorySearchScreen, ModelPickerScreen, SearchResultsScreen
from wisp.tui.widgets import AssistantMessage, CommandOutput, Notice, UserMessage, VersionBar, Welcome


async def command(pilot: Any, app: WispApp, line: str) -> None:
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await pilot.pause()


async def turn_done(pilot: Any, app: WispApp) -> None:
    await until(pilot, lambda: app.turn_worker is not None, "the turn to start")
    await app.turn_worker.wait()
    await pilot.pause()


def replies(app: WispApp) -> list[str]:
    return [m.text for m in app.chat.query(AssistantMessage)]


def notices(app: WispApp) -> list[str]:
    return [n.text for n in app.chat.query(Notice)]


def outputs(app: WispApp) -> str:
    return "\n".join(str(o._markdown) for o in app.chat.query(CommandOutput))


async def test_model_picker_switches_from_the_next_request(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "hello")
        await command(pilot, app, "/model")
        await until(pilot, lambda: isinstance(app.screen, ModelPickerScreen), "the model picker")
        screenshot(app, "model-picker")
        await pilot.press(*"fake-2")
        await pilot.press("enter")
        await until(pilot, lambda: app.status.model == "wisp-fake-2:latest", "the switch")
        assert any("wisp-fake:latest → wisp-fake-2:latest" in line for line in notices(app))
        await send(pilot, app, "again")
        assert srv.chat_bodies[-1]["model"] == "wisp-fake-2:latest"
        await command(pilot, app, "/model")  # Esc keeps the model
        await until(pilot, lambda: isinstance(app.screen, ModelPickerScreen), "the model picker")
        await pilot.press("escape")
        await pilot.pause()
        assert app.status.model == "wisp-fake-2:latest"


async def test_model_waits_beside_the_screen_and_esc_stops_waiting(ollama_home, tmp_path: Path) -> None:
    """A new user's /model, while the embedded server served another wisp, took no key for minutes:
    now the keys keep working, a line says what it waits for, and Esc stops waiting."""
    import threading

    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        srv.tags_gate = threading.Event()  # the endpoint answers its list only when the test says
        try:
            await command(pilot, app, "/model")
            await until(pilot, lambda: any("/model: waiting for the endpoint" in n for n in notices(app)),
                        "the waiting line", limit=1000)
            await pilot.press(*"still typing")  # the keys work while it waits
            assert app.prompt_input.text == "still typing"
            app.prompt_input.load_text("")
            await pilot.press("escape")
            await until(pilot, lambda: not app.command_worker.is_running, "the command to stop")
            await pilot.pause()
            assert any("/model: stopped waiting for the endpoint" in n for n in notices(app))
            assert not isinstance(app.screen, ModelPickerScreen)
            assert not any("/model: waiting" in n for n in notices(app))  # the waiting line went
        finally:
            srv.tags_gate.set()
        await command(pilot, app, "/model")  # a free endpoint: the picker, as before
        await until(pilot, lambda: isinstance(app.screen, ModelPickerScreen), "the model picker")


async def test_ctrl_c_stops_a_streaming_reply_as_esc_does(ollama_home, tmp_path: Path) -> None:
    """A new user's Ctrl+C during a reply got "press Ctrl+Q to quit" and the reply went on."""
    from tests.support.fakes import pause

    home, srv = ollama_home
    srv.push(reply(text("first words "), pause(30), text("never shown")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text("tell me a story")
        await pilot.press("enter")
        await until(pilot, lambda: "first words" in "".join(replies(app)), "the first words", limit=2000)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.turn_worker.is_running, "the turn to stop", limit=2000)
        await pilot.pause()
        assert any("stopped" in n for n in notices(app)), notices(app)
    async with await Session.open(SessionOptions(workdir=tmp_path, continue_last=True)) as s:
        [turn] = await s.store.turns(s.conversation_id)
    assert turn.state == "stopped"


async def test_profile_switches_the_endpoint_and_the_status_bar_names_it(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama() as home_srv, FakeOpenAI() as work_srv:
        path = write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": home_srv.base_url,
                                        "model.name": "wisp-fake:latest", "model.timeout_s": 5})
        data = json.loads(path.read_text())
        data["profiles"] = {"work": {"provider": "openai", "endpoint": work_srv.base_url, "model": "wisp-fake-2"}}
        path.write_text(json.dumps(data))
        app = WispApp(SessionOptions(workdir=tmp_path))
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, app)
            assert app.status.profile is None
            await command(pilot, app, "/profile")
            assert "**work**" in outputs(app)
            await command(pilot, app, "/profile work")
            await until(pilot, lambda: app.status.model == "wisp-fake-2", "the reconnect")
            assert app.status.profile == "work" and "profile work" in str(app.status.render())
            await send(pilot, app, "hi")
            assert work_srv.chat_bodies and not home_srv.chat_bodies
            await command(pilot, app, "/profile nope")
            assert "no profile 'nope'" in outputs(app)


async def test_search_jumps_to_a_hit_and_picks_among_several(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("The deploy key is in the vault."), reply("Nothing here."), reply("Keys rotate monthly."))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        for prompt in ("where is the deploy key?", "something else", "how often do keys change?"):
            await send(pilot, app, prompt)
        await command(pilot, app, "/search vault")
        found = [w for w in app.chat.query(".-found")]
        assert len(found) == 1 and isinstance(found[0], AssistantMessage) and "turn-1" in found[0].classes
        assert "found in turn 1" in str(app.status.render())
        await command(pilot, app, "/search key")
        await until(pilot, lambda: isinstance(app.screen, SearchResultsScreen), "the hits")
        assert len(app.screen.items) == 4  # key, keys: prompts and replies
        await pilot.press(*"monthly")
        await pilot.press("enter")
        await until(pilot, lambda: any("turn-3" in w.classes for w in app.chat.query(".-found")), "the jump")
        await command(pilot, app, "/search zebra")
        assert "Nothing in this conversation holds 'zebra'" in outputs(app)


async def test_search_in_a_retried_turn_lists_both_versions_and_narrows(ollama_home, tmp_path: Path) -> None:
    """A retried turn has two versions whose hits jump to the same turn: both are listed (no
    duplicated option ids, no internal error), typing in the filter narrows them, and picking the
    earlier version's hit jumps to the turn that asked it again."""
    home, srv = ollama_home
    srv.push(reply("The median is 4."), reply("The median is 5, not 4."))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "what is the median of 3 4 5 9?")
        await command(pilot, app, "/retry")
        await turn_done(pilot, app)
        await command(pilot, app, "/search median")
        await until(pilot, lambda: isinstance(app.screen, SearchResultsScreen), "the hits")
        screen = app.screen
        labels = [i.label for i in screen.items]
        assert any("an earlier version" in label for label in labels), labels
        assert any("an earlier version" not in label and "(reply)" in label for label in labels), labels
        await pilot.press(*"not")
        await pilot.pause()
        assert [i.label for i in screen.shown] == [i.label for i in screen.items if "not 4" in i.label]
        await pilot.press("backspace", "backspace", "backspace", *"4.")
        await pilot.pause()
        # both replies, whose items answer the same jump: the earlier one is listed too
        assert len(screen.shown) == 2 and all("(reply)" in i.label for i in screen.shown)
        assert len({i.id for i in screen.shown}) == 2 and len({i.answer for i in screen.shown}) == 1
        await pilot.press("down", "enter")  # the earlier version's hit
        await until(pilot, lambda: any("turn-2" in w.classes for w in app.chat.query(".-found")), "the jump")
        errors = [n for n in notices(app) if "internal error" in n]
        assert not errors, errors


async def test_ctrl_r_searches_the_prompt_history(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        for prompt in ("list the tests", "run the linter", "list the files"):
            await send(pilot, app, prompt)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), "the history")
        await pilot.press(*"lint")
        await pilot.press("enter")
        await pilot.pause()
        assert app.prompt_input.text == "run the linter"


async def test_retry_shows_the_new_reply_and_left_right_switch_versions(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("Lyon."), reply("Paris."))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "capital of France?")
        await command(pilot, app, "/retry")
        await turn_done(pilot, app)
        assert replies(app) == ["Paris."]
        assert "Lyon" not in json.dumps(srv.chat_bodies[-1]["messages"])
        bar = app.chat.query_one(VersionBar)
        assert bar.versions == [1, 2] and "version 2 of 2" in str(bar.render())
        bar.focus()
        await pilot.pause()
        screenshot(app, "retry-versions")
        await pilot.press("left")
        await until(pilot, lambda: replies(app) == ["Lyon."], "the earlier version")
        assert "version 1 of 2" in str(bar.render()) and "replaced" in str(bar.render())
        await pilot.press("left")  # there is none earlier
        await pilot.press("right")
        await until(pilot, lambda: replies(app) == ["Paris."], "the later version")
        # reopened, the conversation shows the current version with its bar
        cid = app.session.conversation_id
    again = WispApp(SessionOptions(workdir=tmp_path, resume=cid))
    async with again.run_test(size=SIZE) as pilot:
        await started(pilot, again)
        assert replies(again) == ["Paris."] and again.chat.query_one(VersionBar).versions == [1, 2]


async def test_edit_puts_the_prompt_back_and_sending_replaces_the_turn(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "capitol of France")
        await command(pilot, app, "/edit")
        assert app.prompt_input.text == "capitol of France" and app.editing == 1
        app.prompt_input.load_text("capital of France")
        await pilot.press("enter")
        await turn_done(pilot, app)
        assert replies(app) == ["You said: capital of France"]
        assert [m.text for m in app.chat.query(UserMessage)] == ["capital of France"]
        assert app.chat.query_one(VersionBar).versions == [1, 2]
        assert "capitol" not in json.dumps(srv.chat_bodies[-1]["messages"])
        await command(pilot, app, "/edit")  # Esc with the input empty leaves it
        app.prompt_input.clear()
        await pilot.press("escape")
        assert app.editing is None


async def test_fork_opens_a_new_conversation_with_the_turns_up_to_there(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "one")
        await send(pilot, app, "two")
        await command(pilot, app, "/fork 1")
        await until(pilot, lambda: app.session is not None and app.session.conversation_id == 2 and app.ready.is_set(),
                    "the fork to open")
        await pilot.pause()
        assert app.status.conversation == 2
        assert [m.text for m in app.chat.query(UserMessage)] == ["one"]
        await send(pilot, app, "three")
        turns = await app.session.store.turns(2)
        assert [t.number for t in turns] == [1, 2]


async def test_copy_and_ctrl_y_fill_the_clipboard_and_the_status_line_says_so(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply("Run it:\n\n```sh\nmake test\n```\n\nor\n\n```python\nprint('hi')\n```"))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "how?")
        await command(pilot, app, "/copy code 1")
        assert app.clipboard == "make test"
        assert "copied code block 1 of 2 (sh) of turn 1" in str(app.status.render())
        await command(pilot, app, "/copy code")
        assert app.clipboard == "print('hi')"
        app.copy_to_clipboard("")
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard.startswith("Run it:") and "copied the reply of turn 1" in str(app.status.render())


async def test_title_new_clear_and_quit(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "first")
        await command(pilot, app, "/title My first talk")
        conv = await app.session.store.get_conversation(1)
        assert conv.title == "My first talk"
        await command(pilot, app, "/clear")
        assert len(app.chat.query(UserMessage)) == 0
        assert app.chat.earlier_button is not None  # the record stays, one click away
        assert [t.number for t in await app.session.store.turns(1)] == [1]
        await command(pilot, app, "/new")
        await until(pilot, lambda: app.session is not None and app.ready.is_set() and
                    len(app.chat.query(Welcome)) == 1, "a new conversation")
        await send(pilot, app, "second")
        assert app.session.conversation_id == 2
        await command(pilot, app, "/quit")
        await until(pilot, lambda: not app.is_running, "wisp to quit")


async def test_help_lists_the_commands_from_the_table(ollama_home, tmp_path: Path) -> None:
    from wisp.core.commands import COMMANDS

    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await command(pilot, app, "/help")
        text = outputs(app)
        for name in ("retry", "edit", "fork", "search", "copy", "title", "export", "model", "profile", "new",
                     "clear", "quit"):
            assert name in COMMANDS and f"/{name}" in text
        assert "Ctrl+R" in text and "Ctrl+Y" in text and "Ctrl+T" in text


async def test_themes_switch_at_once_and_unknown_names_are_refused(ollama_home, tmp_path: Path,
                                                                  monkeypatch) -> None:
    monkeypatch.delenv("COLORFGBG", raising=False)
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.theme == "wisp" and app.current_theme.dark  # auto, background unknown: dark
        await command(pilot, app, "/config set ui.theme light")
        assert app.theme == "wisp-light" and not app.current_theme.dark
        await command(pilot, app, "/config set ui.theme nord")
        assert app.theme == "nord"
        await command(pilot, app, "/config set ui.theme solarised")
        assert app.theme == "nord" and "dark, light, auto, wisp, wisp-light" in outputs(app)
        await pilot.press("ctrl+t")
        assert app.theme == "wisp"
        await pilot.press("ctrl+t")
        assert app.theme == "wisp-light"
        await pilot.press("ctrl+t")
        assert app.theme == "nord"  # the configured one joins the cycle
        assert "theme nord" in str(app.status.render())


async def test_a_theme_written_by_hand_that_is_not_one_is_said_at_start(ollama_home, tmp_path: Path,
                                                                        monkeypatch) -> None:
    """A new user wrote ui.theme by hand in config.json: `config set` checks the name, the file's load
    does not (it may name a newer wisp's theme), and the TUI used its dark theme without a word."""
    home, srv = ollama_home
    monkeypatch.delenv("COLORFGBG", raising=False)
    config = json.loads((home / "config.json").read_text())
    config["ui"] = {"theme": "solarised"}
    (home / "config.json").write_text(json.dumps(config))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.theme == "wisp"
        said = [str(n.render()) for n in app.chat.query(Notice)]
        assert any('ui.theme "solarised"' in t and "not a theme here" in t for t in said), said


async def test_auto_theme_follows_a_light_terminal(ollama_home, tmp_path: Path, monkeypatch) -> None:
    home, srv = ollama_home
    monkeypatch.setenv("COLORFGBG", "0;15")
    srv.push(reply(text("Here is a function:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nDone.")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.theme == "wisp-light"
        await send(pilot, app, "write add()")
        app.prompt_input.cursor_blink = False
        screenshot(app, "chat-light")


async def test_an_empty_chat_is_welcomed_until_the_first_turn(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        welcome = app.chat.query_one(Welcome)
        shown = str(welcome.render())
        assert "wisp-fake:latest" in shown and "/model" in shown and "F1" in shown and shown.count("•") == 3
        await send(pilot, app, "hi")
        assert len(app.chat.query(Welcome)) == 0


async def test_narrow_terminal_folds_the_panels_and_f2_opens_them_over_the_chat(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=(96, 30)) as pilot:
        await started(pilot, app)
        full = app.chat.region.width
        assert not app.sidebar.display and full >= 94
        await pilot.press("f2")
        await pilot.pause()
        assert app.sidebar.display and app.sidebar.has_class("-overlay")
        assert app.chat.region.width == full  # over the chat, not beside it
        await pilot.resize_terminal(130, 30)
        await pilot.pause()
        assert not app.sidebar.has_class("-overlay") and app.sidebar.display
        assert app.chat.region.width < 130


async def test_a_prompt_sent_while_a_reply_streams_stays_in_the_input(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.stall(text("Once upon a time")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text("tell me a story")
        await pilot.press("enter")
        await until(pilot, lambda: any("Once upon" in t for t in replies(app)), "the first words")
        app.prompt_input.load_text("and then?")
        await pilot.press("enter")
        await pilot.pause()
        assert app.prompt_input.text == "and then?"
        assert any("still streaming" in line for line in notices(app))
        await pilot.press("escape")
        await until(pilot, lambda: not app.turn_worker.is_running, "the turn to stop")
    srv.stop()


async def test_a_long_pasted_prompt_is_folded_and_opens_on_click(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path))
    pasted = "\n".join(f"line {i}: " + "x" * 40 for i in range(60))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, pasted)
        message = app.chat.query_one(UserMessage)
        shown = str(message.render())
        assert message.folded and "60 lines" in shown and f"{len(pasted):,} characters" in shown
        assert "line 59" not in shown
        app.chat.scroll_to_widget(message, animate=False, top=True)
        await pilot.pause()
        await pilot.click(message)
        await pilot.pause()
        assert not message.folded and "line 59" in str(message.render())


async def test_a_failed_turn_reopens_with_its_error_text(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.status(500, {"error": "the GPU caught fire"}))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "hi")
    again = WispApp(SessionOptions(workdir=tmp_path, continue_last=True))
    async with again.run_test(size=SIZE) as pilot:
        await started(pilot, again)
        assert any("the GPU caught fire" in line for line in notices(again))
        assert any("Continuing conversation 1" in line for line in notices(again))


async def test_a_jump_and_version_bars_in_a_long_conversation(ollama_home, tmp_path: Path) -> None:
    """Issue 12 with issue 16: the chat shows a window of a long conversation; a jump to a turn far
    above it (/search) moves the window there, and a turn's version bar comes and goes with its turn."""
    from tests.support.long_conversation import write_turns
    from wisp.core.session import Session
    from wisp.tui.widgets.chat_pane import MAX_TURNS_MOUNTED

    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        conv = await s.ensure_conversation()
        await write_turns(s.store, conv, 300, output_lines=20)
        again = await s.store.begin_turn(conv, supersedes=300)  # turn 300 asked again: turn 301
        await s.store.add_entry(conv, again.id, "prompt", "question 300 again")
        await s.store.add_entry(conv, again.id, "reply", "Yes, now.")
        await s.store.end_turn(again.id, "done")
    app = WispApp(SessionOptions(workdir=tmp_path, resume=conv))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await until(pilot, lambda: [b.slot for b in app.chat.query(VersionBar)] == [301], "the version bar")
        await app.jump_to(3, "prompt")
        await pilot.pause()
        found = list(app.chat.query(".-found"))
        assert len(found) == 1 and isinstance(found[0], UserMessage) and "turn-3" in found[0].classes
        assert not list(app.chat.query(VersionBar)), "the bar left with its turn"
        assert len(app.chat._window) <= MAX_TURNS_MOUNTED and app.chat.later
        await pilot.press("ctrl+end")
        await until(pilot, lambda: not app.chat.later and list(app.chat.query(VersionBar)), "the end again")
