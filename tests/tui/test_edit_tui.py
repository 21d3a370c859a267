"""Pilot tests of the model's edits in the TUI, against the fake Ollama on 127.0.0.1: the approval
shows the file, the lines added and removed and the diff (highlighted, scrolling); y makes the edit,
a allows that file for the conversation, n denies it; /undo after one edit, after several, and
refused after an outside change. Screenshot: screenshots/edit-approval.svg."""

from __future__ import annotations

import html
from pathlib import Path

from rich.syntax import Syntax
from textual.widgets import Static

from tests.support.edits import audit_events, edit_turn, told
from tests.support.pilot import SIZE, screenshot, started, until
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.screens import ApprovalScreen
from wisp.tui.widgets import CommandOutput, ToolBlock

RETRY = ("import time\n\n\ndef fetch(url, tries=3):\n    for n in range(tries):\n        try:\n"
         "            return get(url)\n        except OSError:\n            time.sleep(1)\n    raise RuntimeError(url)\n")
BACK_OFF = {"path": "retry.py", "edits": [
    {"search": "def fetch(url, tries=3):", "replace": "def fetch(url, tries=5, wait=0.5):"},
    {"search": "            time.sleep(1)", "replace": "            time.sleep(wait * 2 ** n)  # back off"}]}


def app_for(workdir: Path) -> WispApp:
    return WispApp(SessionOptions(workdir=workdir, tools=["read_file", "edit_file"]))


async def submit(pilot, app: WispApp, prompt: str) -> None:
    before = app.turn_worker
    app.prompt_input.load_text(prompt)
    await pilot.press("enter")
    await until(pilot, lambda: app.turn_worker is not None and app.turn_worker is not before, "the turn to start")


async def modal(pilot, app: WispApp) -> ApprovalScreen:
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed, "the approval modal")
    await pilot.pause()
    return app.screen  # type: ignore[return-value]


async def turn_done(pilot, app: WispApp) -> None:
    await until(pilot, lambda: not app.turn_worker.is_running, "the turn to end", limit=3000)
    await pilot.pause()


async def command(pilot, app: WispApp, line: str) -> str:
    """Send a slash command; the text of the chat's last command output (its Markdown)."""
    before = len(app.chat.query(CommandOutput))
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await until(pilot, lambda: len(app.chat.query(CommandOutput)) > before, f"{line}'s answer")
    return str(app.chat.query(CommandOutput).last()._markdown)


def shown(app: WispApp) -> str:
    """The screen as text (its SVG's text, unescaped)."""
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def test_the_approval_shows_the_file_its_counts_and_its_diff_then_y_makes_it(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "retry.py").write_text(RETRY)
    srv.push(*edit_turn(BACK_OFF, "fetch() backs off now.", usage=(640, 60)))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "make fetch() back off between tries")
        screen = await modal(pilot, app)
        assert screen.edit and app.status.state == "waiting for approval"
        assert isinstance(screen.query_one("#approval-diff-text", Static).content, Syntax)  # highlighted as a diff
        text = html.unescape(screenshot(app, "edit-approval").read_text()).replace("\xa0", " ")
        for part in ("The model wants to edit a file", "retry.py · 2 lines added, 2 removed", "--- a/retry.py",
                     "+++ b/retry.py", "-def fetch(url, tries=3):", "+def fetch(url, tries=5, wait=0.5):",
                     "for n in range(tries):", "Allow once (y)", "Allow this file (a)", "Deny (n, Esc)"):
            assert part in text, part
        assert (tmp_path / "retry.py").read_text() == RETRY  # nothing before the person's say
        await pilot.press("y")
        await turn_done(pilot, app)
        assert "tries=5, wait=0.5" in (tmp_path / "retry.py").read_text()
        block = app.query(ToolBlock).last()
        assert "✓" in str(block.title) and block.output.startswith("edited retry.py: 2 replacements (line 4, line 9)")
        block.collapsed = False
        await pilot.pause()
        assert isinstance(block.query_one(".tool-output", Static).content, Syntax)  # the diff in the chat, highlighted
    assert [e["payload"]["choice"] for e in audit_events(home, "approval")] == ["once"]


async def test_a_allows_this_file_for_the_conversation_and_n_denies_another(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("one\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "one", "replace": "two"}),
             *edit_turn({"path": "a.txt", "search": "two", "replace": "three"}, call_id="c2"),
             *edit_turn({"path": "b.txt", "search": "one", "replace": "two"}, "Understood.", call_id="c3"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "change a")
        await modal(pilot, app)
        await pilot.press("a")
        await turn_done(pilot, app)
        await submit(pilot, app, "change a again")
        await turn_done(pilot, app)  # no modal: a.txt is allowed for this conversation
        assert (tmp_path / "a.txt").read_text() == "three\n"
        await submit(pilot, app, "change b")
        screen = await modal(pilot, app)
        assert screen.request.path == "b.txt"
        await pilot.press("n")
        await turn_done(pilot, app)
        assert (tmp_path / "b.txt").read_text() == "one\n"
        assert told(srv.chat_bodies[-1])[-1].startswith("The person denied the edit of b.txt")
    assert [(e["payload"]["choice"], e["payload"]["source"]) for e in audit_events(home, "approval")] == [
        ("always", "person"), ("allow_list", "conversation"), ("deny", "person")]


async def test_a_long_diff_scrolls_and_hides_nothing(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(300)))
    change = "".join(f"line {n}\n" for n in range(100, 220))
    new = "".join(f"LINE {n} \u202eevil\n" for n in range(100, 220))  # a bidi control may not reorder what is read
    srv.push(*edit_turn({"path": "big.txt", "search": change, "replace": new}))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "rewrite the middle")
        screen = await modal(pilot, app)
        box = screen.query_one("#approval-diff")
        assert box.max_scroll_y > 0 and box.scroll_y == 0 and box.region.height < SIZE[1]
        assert "line 100" in shown(app) and "LINE 219" not in shown(app)
        await pilot.press("end")
        await until(pilot, lambda: box.scroll_y == box.max_scroll_y, "the end of the diff")
        assert "LINE 219 \\u202eevil" in shown(app) and "\u202e" not in shown(app)
        await pilot.press("home")
        await until(pilot, lambda: box.scroll_y == 0, "the top of the diff")
        await pilot.press("pagedown")
        await until(pilot, lambda: box.scroll_y > 0, "a page down")
        assert isinstance(app.screen, ApprovalScreen)  # scrolling answers nothing
        await pilot.press("n")
        await turn_done(pilot, app)


async def test_undo_in_the_tui_after_one_edit_after_several_and_refused_after_an_outside_change(
        ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("v0\n")
    srv.push(*edit_turn({"path": "a.txt", "search": "v0", "replace": "v1"}),
             *edit_turn({"path": "a.txt", "search": "v1", "replace": "v2"}, call_id="c2"),
             *edit_turn({"path": "a.txt", "search": "v2", "replace": "v3"}, call_id="c3"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "one")
        await modal(pilot, app)
        await pilot.press("a")  # allowed for the conversation: the next two are not asked
        await turn_done(pilot, app)
        assert (tmp_path / "a.txt").read_text() == "v1\n"
        assert (await command(pilot, app, "/undo")).startswith("`/undo`\n\nUndid turn 1's 1 edit: put back a.txt.")
        assert (tmp_path / "a.txt").read_text() == "v0\n"
        (tmp_path / "a.txt").write_text("v1\n")  # the person puts the edit's version back by hand
        for prompt in ("two", "three"):
            await submit(pilot, app, prompt)
            await turn_done(pilot, app)
        assert (tmp_path / "a.txt").read_text() == "v3\n"
        assert "Undid turn 3's 1 edit" in await command(pilot, app, "/undo")
        assert (tmp_path / "a.txt").read_text() == "v2\n"
        (tmp_path / "a.txt").write_text("v2 and the person's words\n")
        refused = await command(pilot, app, "/undo")
        assert "Nothing was undone: a.txt: its content changed since turn 2's edit" in refused
        assert "/undo diff 2" in refused and app.chat.query(CommandOutput).last().error
        assert (tmp_path / "a.txt").read_text() == "v2 and the person's words\n"
