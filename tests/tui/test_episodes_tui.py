"""Episodic memory in the TUI (Pilot): capture as transport tui, the 15-minute refinement, /memory screens."""

from __future__ import annotations

import html
from pathlib import Path

from textual.widgets import Markdown, OptionList

from wisp.core.episodes.refine import REFINE_INTERVAL_S
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.widgets import CommandOutput
from wisp.tui.screens import MemoryDetailScreen, MemoryScreen
from tests.support.episodes_util import memory_reply
from tests.support.fakes import reply
from tests.support.pilot import SIZE, screenshot, send, started, until


async def test_memory_screens_list_and_show(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    workdir = tmp_path / "website"
    workdir.mkdir()
    app = WispApp(SessionOptions(workdir=workdir))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert app.memory_refine_timer._interval == REFINE_INTERVAL_S == 900

        # nothing yet: /memory says so in the chat, no screen
        app.prompt_input.load_text("/memory")
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(CommandOutput)), "the empty /memory answer")
        assert "No memories yet" in app.query(CommandOutput).last().source
        assert not isinstance(app.screen, MemoryScreen)

        await send(pilot, app, "plan the website launch for Friday")
        await send(pilot, app, "and email the team")
        srv.push(reply(memory_reply(("1,2", "Agreed to launch the website on Friday; the team is to be emailed."))))
        calls = len(srv.chat_bodies)
        worker = app.refine_memory()  # what the 15-minute timer runs
        await worker.wait()
        assert len(srv.chat_bodies) == calls + 1
        assert srv.chat_bodies[-1]["think"] is False and "tools" not in srv.chat_bodies[-1]

        app.prompt_input.load_text("/memory")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MemoryScreen), "the memory list")
        options = app.screen.query_one(OptionList)
        assert options.option_count == 1
        prompt = str(options.get_option_at_index(0).prompt)
        assert "MEM-000001" in prompt and "Agreed to launch the website" in prompt
        assert "website · tui · channel 1" in prompt
        svg = html.unescape(screenshot(app, "memory-list").read_text())
        assert "MEM-000001" in svg

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MemoryDetailScreen), "the memory in full")
        md = app.screen.markdown
        assert "## MEM-000001" in md and "Recorded" in md and "plan the website launch for Friday" in md
        assert "You said: and email the team" in md and "tui" in md
        await pilot.pause()
        svg = html.unescape(screenshot(app, "memory-detail").read_text())
        assert "MEM-000001" in svg

        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MemoryScreen), "back to the list")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, MemoryScreen), "the list closed")

        # the slash commands were not captured; the two turns were, as transport tui
        from wisp.core.episodes.query import find_memories, memory_sources, MemoryFilter
        page = await find_memories(app.session.store.db, MemoryFilter())
        assert page.total == 1 and page.memories[0].transport == "tui"
        sources = await memory_sources(app.session.store.db, 1)
        assert [x.request for x in sources] == ["plan the website launch for Friday", "and email the team"]

        # a second run has nothing new: no model call
        calls = len(srv.chat_bodies)
        await app.refine_memory().wait()
        assert len(srv.chat_bodies) == calls
