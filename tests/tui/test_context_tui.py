"""Pilot tests of the layered context's TUI (issue "Layered context"): the
facts, task and running summary panels (live, toggled with F2/F3/F4, sources
and proposals marked), /inspect context (and F5) and /show. Each view is
saved as an SVG screenshot in screenshots/."""

from __future__ import annotations

import html
from pathlib import Path

from textual.widgets import DataTable

from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.widgets import ContextSidebar
from wisp.tui.screens import InspectContextScreen, ShowScreen
from tests.support.home import write_config
from tests.support.context_fakes import CountingOllama
from tests.support.sidecalls import SummarisingSideCall
from tests.support.fakes import reply, text, tool_call
from tests.support.pilot import screenshot, send, started, until

SIZE = (120, 38)


async def command(pilot, app: WispApp, line: str) -> None:
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await pilot.pause()


def sidebar(app: WispApp) -> ContextSidebar:
    return app.query_one(ContextSidebar)


async def test_panels_show_facts_task_and_sources_live(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        bar = sidebar(app)
        assert bar.display and "No facts yet" in bar.facts_panel.plain
        await send(pilot, app, "hello")
        await until(pilot, lambda: "branch = main" in bar.facts_panel.plain, "the branch fact")
        assert "[tool git]" in bar.facts_panel.plain and "[tool workdir]" in bar.facts_panel.plain
        await command(pilot, app, "/fact decision http library = httpx")
        await until(pilot, lambda: "http library = httpx [you]" in bar.facts_panel.plain, "the person's fact")
        await command(pilot, app, "/task ship the retry work; objective: tests/test_retry.py passes")
        await until(pilot, lambda: "ship the retry work" in bar.task_panel.plain, "the task")
        assert "objective: tests/test_retry.py passes" in bar.task_panel.plain and "[you]" in bar.task_panel.plain
        # a model's note is marked as a proposal
        s = app.session
        await s.context.facts.record(s.conversation_id, "entity", "codename", "BLUE HERON", source="model",
                                     method="noted", turn=1)
        # the branch changes: the next request records it and the panel follows during the turn
        (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/feature/retry\n")
        await send(pilot, app, "carry on")
        await until(pilot, lambda: "branch = feature/retry" in bar.facts_panel.plain, "the new branch")
        assert "before: main" in bar.facts_panel.plain
        assert "codename = BLUE HERON [model] proposal /fact keep c5" in bar.facts_panel.plain
        path = screenshot(app, "context-panels")
        svg = html.unescape(path.read_text()).replace("\xa0", " ")
        assert "Facts" in svg and "Running" in svg and "proposal" in svg
        await command(pilot, app, "/fact keep c5")
        await until(pilot, lambda: "BLUE HERON [model] kept" in bar.facts_panel.plain, "the kept fact")


async def test_panels_toggle_from_the_keyboard(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        bar = sidebar(app)
        await pilot.press("f2")
        assert not bar.facts_panel.display and bar.display
        await pilot.press("f3")
        await pilot.press("f4")
        assert not bar.display  # all three hidden: the chat gets the room
        await pilot.pause()
        assert app.chat.region.width > 100
        await pilot.press("f3")
        assert bar.display and bar.task_panel.display and not bar.facts_panel.display
        await pilot.press("f2")
        assert bar.facts_panel.display


async def test_narrow_terminal_starts_with_the_panels_hidden(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=(80, 30)) as pilot:
        await started(pilot, app)
        assert not sidebar(app).display
        await pilot.press("f2")
        assert sidebar(app).display and sidebar(app).facts_panel.display


async def test_summary_panel_follows_the_running_summary(wisp_home: Path, tmp_path: Path) -> None:
    with CountingOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5,
                                 "model.context_window": 1500, "context.reserve": 300})
        app = WispApp(SessionOptions(workdir=tmp_path, tools=[], side_call=SummarisingSideCall()))
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, app)
            bar = sidebar(app)
            assert "None yet" in bar.summary_panel.plain
            for n in range(8):
                await send(pilot, app, f"question {n} about src/m{n}.py " + "padding " * 80)
            await until(pilot, lambda: "version" in bar.summary_panel.plain, "the summary panel")
            # the version in effect first: the turns it covers, the identifiers it keeps, what the model wrote
            plain = bar.summary_panel.plain
            assert plain.startswith("version ") and " · turns 1–" in plain.splitlines()[0], plain
            assert "keeps " in plain and "src/m0.py" in plain and "T1: question 0" in plain, plain
            screenshot(app, "context-summary")


async def test_inspect_context_view(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "notes.py").write_text("def answer():\n    return 42\n")
    srv.push(reply(text("Reading."), tool_call("read_file", {"path": "notes.py"}), finish="tool_calls"),
             reply(text("It returns 42.")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "what does notes.py return?")
        await command(pilot, app, "/task keep it short")
        asked = len(srv.chat_bodies)
        await command(pilot, app, "/inspect context")
        await until(pilot, lambda: isinstance(app.screen, InspectContextScreen), "the inspect view")
        screen = app.screen
        table = screen.query_one(DataTable)
        assert table.row_count == 11  # nine layers, the total and the tokens left
        rows = screen.rows_text()
        assert rows[0].startswith("1. system rules") and rows[8].startswith("8. current turn")
        assert any("/task clear frees" in r for r in rows)
        assert "output of entry 4 not repeated" in screen.report.request_json()
        await pilot.pause()
        path = screenshot(app, "inspect-context")
        svg = html.unescape(path.read_text()).replace("\xa0", " ")
        assert "tokens left" in svg and "system rules" in svg and "[1] system" in svg
        box = screen.query_one("#request")
        await pilot.press("pagedown")  # scrolls the view, not the chat behind it
        await until(pilot, lambda: box.scroll_y > 0, "the request to scroll")
        await pilot.press("j")
        await until(pilot, lambda: screen.raw and bool(screen.query("#request-json")), "the raw JSON")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, InspectContextScreen), "the view to close")
        await pilot.press("f5")
        await until(pilot, lambda: isinstance(app.screen, InspectContextScreen), "F5")
        await pilot.press("escape")
        assert len(srv.chat_bodies) == asked  # inspecting costs the model nothing


async def test_show_entry_view_is_highlighted_and_paged(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "big.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(300)))
    srv.push(reply(text("Reading."), tool_call("read_file", {"path": "big.py"}), finish="tool_calls"),
             reply(text("A long file.")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "read big.py")
        asked = len(srv.chat_bodies)
        await command(pilot, app, "/show entry 4")
        await until(pilot, lambda: isinstance(app.screen, ShowScreen), "the show view")
        screen = app.screen
        assert len(screen.pages) == 2  # read_file's 400 lines and its [more: …] line, 400 a page
        assert screen.material.sections[0].lexer == "python"
        assert "1\tdef f0(x):" in screen.page_text()
        await pilot.pause()
        path = screenshot(app, "show-entry")
        svg = html.unescape(path.read_text()).replace("\xa0", " ")
        assert "entry 4: read_file output" in svg and "page 1 of 2" in svg
        assert svg.count("fill=") > 20  # highlighted: many colours
        await pilot.press("n")
        await until(pilot, lambda: screen.page == 1, "the next page")
        assert "[more: lines 401-600 of 600" in screen.page_text() and "1\tdef f0(x):" not in screen.page_text()
        await pilot.press("p")
        await until(pilot, lambda: screen.page == 0, "the previous page")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ShowScreen), "the view to close")
        await command(pilot, app, "/show turn 1")
        await until(pilot, lambda: isinstance(app.screen, ShowScreen), "the turn view")
        assert len(app.screen.material.sections) == 5
        await pilot.press("escape")
        await command(pilot, app, "/show entry 99")
        assert isinstance(app.screen, ShowScreen) is False
        assert len(srv.chat_bodies) == asked


async def test_the_command_palette_finds_and_runs_wisps_commands(ollama_home, tmp_path: Path) -> None:
    """Ctrl+P lists wisp's slash commands: "inspect" finds /inspect context and Enter opens the
    context view, as typing it does; a command that needs words goes to the prompt input."""
    from textual.command import CommandPalette

    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"inspect")
        await until(pilot, lambda: "/inspect" in str(app.screen.query_one("CommandList").get_option_at_index(0).prompt)
                    if app.screen.query_one("CommandList").option_count else False, "the hit")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, InspectContextScreen), "the inspect view")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, InspectContextScreen), "the view to close")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"search")
        await until(pilot, lambda: "/search" in str(app.screen.query_one("CommandList").get_option_at_index(0).prompt)
                    if app.screen.query_one("CommandList").option_count else False, "the hit")
        await pilot.press("enter")
        await until(pilot, lambda: app.prompt_input.text == "/search ", "the command in the input")
        await pilot.press("f1")  # the help names the palette
        await until(pilot, lambda: "Ctrl+P" in str(getattr(app.screen.query("Markdown").first(), "source", "")
                                                   if app.screen.query("Markdown") else ""), "the help")
