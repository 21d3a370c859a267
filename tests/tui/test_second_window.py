"""Pilot: a second window follows the conversation; the TUI's refinement uses the TUI's endpoint;
the screenshot action saves where a folder exists; the status bar says what the endpoint is doing.

Real parts: the fake Ollama on 127.0.0.1, real SQLite files under the isolated WISP_HOME, two
real WispApps on one conversation.
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

from textual.events import DeliveryComplete

from tests.support.episodes_util import memory_reply
from tests.support.fakes import reply
from tests.support.pilot import SIZE, send, started, texts, until
from wisp.core.context.composer import context_part, person_part
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp, screenshot_dir
from wisp.tui.widgets import AssistantMessage, Notice, UserMessage


def users(app: WispApp) -> list[str]:
    return [str(u.render()) for u in app.query(UserMessage)]


async def test_a_turn_run_in_another_window_shows_up_when_it_ends(ollama_home, tmp_path: Path) -> None:
    _, srv = ollama_home
    srv.push(reply("first answer"), reply("answer from window two"), reply("third answer"))
    one = WispApp(SessionOptions(workdir=tmp_path))
    async with one.run_test(size=SIZE) as p1:
        await started(p1, one)
        await send(p1, one, "from window one")
        conv = one.session.conversation_id
        two = WispApp(SessionOptions(workdir=tmp_path, resume=conv))
        async with two.run_test(size=SIZE) as p2:
            await started(p2, two)
            assert users(two) == ["from window one"]
            await send(p2, two, "from window two")
        # window one sends nothing: the turn appears by itself, reply and all, once it ended there
        await until(p1, lambda: users(one) == ["from window one", "from window two"],
                    "the other window's turn", limit=1500)
        await until(p1, lambda: any("answer from window two" in t for t in texts(one, AssistantMessage)),
                    "its reply")
        assert any("added by another wisp" in str(n.render()) for n in one.query(Notice))
        # the next request holds exactly what the screen shows, each turn once
        await send(p1, one, "back in window one")
        assert users(one) == ["from window one", "from window two", "back in window one"]
        sent = [person_part(m["content"]) for m in srv.chat_bodies[-1]["messages"] if m["role"] == "user"]
        assert [c for c in sent if c in users(one)] == users(one)


async def test_a_turn_that_ends_elsewhere_between_the_last_look_and_the_claim_is_shown_not_sent(
        ollama_home, tmp_path: Path) -> None:
    """The race the polling leaves: window two's turn ends after window one last looked (its timer and
    its look before the turn both missed it). Window one's claim refuses to send: the prompt is back
    in the input, the turn is shown, and no request went; sent again, the request holds what is shown."""
    _, srv = ollama_home
    srv.push(reply("first answer"), reply("answer from window two"), reply("after reading it"))
    one = WispApp(SessionOptions(workdir=tmp_path))
    async with one.run_test(size=SIZE) as p1:
        await started(p1, one)
        await send(p1, one, "from window one")
        one.follow_timer.pause()  # window one does not look again until it sends
        conv = one.session.conversation_id
        two = WispApp(SessionOptions(workdir=tmp_path, resume=conv))
        async with two.run_test(size=SIZE) as p2:
            await started(p2, two)
            await send(p2, two, "from window two")
        look = one.show_turns_from_elsewhere
        looks = []

        async def missed() -> None:  # the look before the turn came just before window two's turn ended
            looks.append(1)
            if len(looks) > 1:
                await look()

        one.show_turns_from_elsewhere = missed  # type: ignore[method-assign]
        requests = len(srv.chat_bodies)
        one.prompt_input.load_text("back in window one")
        await p1.press("enter")
        await one.turn_worker.wait()
        await p1.pause()
        assert len(srv.chat_bodies) == requests, "a request went with a turn the screen did not show"
        assert one.prompt_input.text == "back in window one"
        assert "from window two" in users(one)
        assert any("added by another wisp since this window showed turn 1" in str(n.render())
                   for n in one.query(Notice))
        # sent again: every turn the request holds is on the screen
        one.prompt_input.load_text("")
        await send(p1, one, "back in window one")
        prompts = [person_part(m["content"])  # the facts ride at the end of the prompt's message
                   for m in srv.chat_bodies[-1]["messages"] if m["role"] == "user"]
        assert prompts == ["from window one", "from window two", "back in window one"], prompts
        assert users(one) == prompts  # the refused prompt was not drawn as sent


async def test_the_tuis_refinement_waits_for_the_tuis_connection(ollama_home, tmp_path: Path) -> None:
    """A refinement that comes while the TUI connects (the embedded server starting) uses the
    endpoint that connection brings; it failed with "no model endpoint is connected"."""
    _, srv = ollama_home
    workdir = tmp_path / "website"
    workdir.mkdir()
    app = WispApp(SessionOptions(workdir=workdir))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "plan the website launch for Friday")
        await send(pilot, app, "and email the team")
        app.session.config.unset("model.name")  # the connect asks the endpoint for its models (GET /api/tags)
        srv.tags_gate = gate = threading.Event()  # the endpoint answers the connect only when the test says
        connecting = asyncio.ensure_future(app.connect())
        await until(pilot, lambda: app.session.endpoint is None, "the connect to begin")  # nothing connected yet
        srv.push(reply(memory_reply(("1,2", "Agreed to launch the website on Friday; the team is to be emailed."))))
        calls = len(srv.chat_bodies)
        worker = app.refine_memory()
        await pilot.pause()
        gate.set()
        await connecting
        await worker.wait()
        assert len(srv.chat_bodies) == calls + 1  # the refinement asked the TUI's model
        from wisp.core.episodes.refine import read_status

        status = await read_status(app.session.store.db)
        assert status["memories"] == 1 and not (status["last_job"] or {}).get("error"), status["last_job"]


async def test_the_screenshot_is_saved_where_no_downloads_folder_exists(ollama_home, tmp_path: Path,
                                                                        monkeypatch) -> None:
    home = tmp_path / "person"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no user-dirs.dirs naming another folder
    workdir = tmp_path / "project"
    workdir.mkdir()
    assert screenshot_dir(workdir) == workdir
    app = WispApp(SessionOptions(workdir=workdir))
    delivered: list[DeliveryComplete] = []
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        original = app._on_delivery_complete

        def record(event: DeliveryComplete) -> None:
            delivered.append(event)
            original(event)

        app._on_delivery_complete = record  # type: ignore[method-assign]
        app.deliver_screenshot()  # what Ctrl+P → Screenshot runs
        await until(pilot, lambda: bool(list(workdir.glob("*.svg"))), "the screenshot file")
    saved = list(workdir.glob("*.svg"))
    assert len(saved) == 1 and saved[0].read_text().startswith("<svg")
    assert not (home / "Downloads").exists()


async def test_the_status_bar_says_the_embedded_restart_with_its_seconds(openai_home, tmp_path: Path) -> None:
    """The embedded server died between turns: the next turn's status bar says it restarts, with the
    seconds so far, while the chat's notice says the same; then the reply comes."""
    from tests.support.standin_server import DeadSharedServer
    from wisp.core.model.embedded import EmbeddedEndpoint
    from wisp.core.model.tool_modes import apply_tool_mode

    _, srv = openai_home
    srv.push(reply("back again"))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        server = DeadSharedServer(srv.base_url, tmp_path)
        app.session.link.endpoint = apply_tool_mode(EmbeddedEndpoint(server, name="wisp-fake", timeout_s=5),
                                                    "native")
        app.prompt_input.load_text("are you there?")
        await pilot.press("enter")
        await until(pilot, lambda: app.status.state.startswith("the embedded model restarts · "),
                    "the restart in the status bar")
        await until(pilot, lambda: app.status.state != "the embedded model restarts · 0 s", "a second to pass",
                    limit=1500)
        assert re.fullmatch(r"the embedded model restarts · [1-9]\d* s", app.status.state), app.status.state
        assert any("starting it again" in str(n.render()) for n in app.query(Notice))
        server.may_start.set()
        await app.turn_worker.wait()
        await pilot.pause()
        assert any("back again" in t for t in texts(app, AssistantMessage))
        assert app.status.state == "ready"


async def test_the_status_bar_counts_the_seconds_of_a_slow_connect(ollama_home, tmp_path: Path) -> None:
    _, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.session.config.unset("model.name")  # the connect asks the endpoint for its models (GET /api/tags)
        srv.tags_gate = gate = threading.Event()
        connecting = asyncio.ensure_future(app.connect())
        await until(pilot, lambda: app.status.state.startswith("connecting · "), "the seconds of the connect",
                    limit=1500)
        gate.set()
        assert await connecting
        assert app.status.state == "ready"


async def test_a_turn_left_open_by_a_wisp_that_died_is_shown_stopped_and_the_window_goes_on(
        ollama_home, tmp_path: Path) -> None:
    """A new user's `wisp ask --continue … | head` died mid-turn and left it open: the TUI on that
    conversation refused every prompt for a turn it never drew ("1 turn … was added by another wisp …
    read it, then send your prompt again"). The window ends such a turn as a start does, draws it
    stopped, reply so far and all, and the next prompt is sent."""
    import socket

    from tests.unit.test_nothing_is_lost import dead_pid
    from wisp.core.streamed import STREAMING

    _, srv = ollama_home
    srv.push(reply("first answer"), reply("an answer after it"))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "hello")
        store, conv = app.session.store, app.session.conversation_id
        turn = await store.begin_turn(conv)  # what the dead `wisp ask` had begun and streamed
        await store.add_entry(conv, turn.id, "prompt", "thanks")
        await store.add_entry(conv, turn.id, "reply", "You are welc", meta={STREAMING: True})
        await store.db.execute("UPDATE turns SET owner = ? WHERE id = ?",
                               (f"{socket.gethostname()}:{dead_pid()}", turn.id))
        await store.db.commit()
        store._running.discard(turn.id)
        store._live_here.discard(turn.id)
        await until(pilot, lambda: users(app) == ["hello", "thanks"], "the dead wisp's turn, drawn", limit=1500)
        assert (await store.get_turn(conv, 2)).state == "stopped"
        assert any("You are welc" in t for t in texts(app, AssistantMessage))
        await send(pilot, app, "go on")
        assert users(app) == ["hello", "thanks", "go on"]
        assert any("an answer after it" in t for t in texts(app, AssistantMessage))
