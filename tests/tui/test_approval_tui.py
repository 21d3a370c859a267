"""Pilot tests of the approval modal against the fake Ollama on 127.0.0.1, with real commands:
allow once, always allow (the next command with that prefix runs without a modal), deny (y/n/Esc),
and Esc while a command runs (its process group ends). Screenshot: screenshots/approval.svg."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.screens import ApprovalScreen
from wisp.tui.widgets import ToolBlock
from tests.support.fakes import reply, text, tool_call
from tests.support.processes import pids_of, unique_seconds, wait_argv_gone
from tests.support.pilot import SIZE, screenshot, started, until


def approval_events(home: Path) -> list[dict]:
    out = []
    for f in sorted((home / "data").rglob("audit-*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [e["payload"] for e in out if e["kind"] == "approval"]


def command_turn(command: str, after: str = "Done.") -> list[dict]:
    return [reply(text("Let me run it."), tool_call("run_command", {"command": command}), finish="tool_calls"),
            reply(text(after))]


async def submit(pilot, app: WispApp, prompt: str) -> None:
    before = app.turn_worker
    app.prompt_input.load_text(prompt)
    await pilot.press("enter")
    await until(pilot, lambda: app.turn_worker is not None and app.turn_worker is not before, "the turn to start")


async def modal(pilot, app: WispApp) -> ApprovalScreen:
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed, "the approval modal")
    return app.screen  # type: ignore[return-value]


async def turn_done(pilot, app: WispApp) -> None:
    await until(pilot, lambda: not app.turn_worker.is_running, "the turn to end", limit=3000)
    await pilot.pause()


def app_for(workdir: Path) -> WispApp:
    return WispApp(SessionOptions(workdir=workdir, tools=["run_command"]))


async def test_without_a_sandbox_the_modal_says_so_in_the_cores_words(ollama_home, no_sandbox,
                                                                       tmp_path: Path) -> None:
    """bwrap absent: the modal shows, under the command, the line the core gives for it (why there is
    no sandbox, what that means, how to install one), for every command, not only the first."""
    from wisp.core.tools import sandbox

    home, srv = ollama_home
    srv.push(*command_turn("echo one"), *command_turn("echo two"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        for prompt in ("say one", "say two"):
            await submit(pilot, app, prompt)
            screen = await modal(pilot, app)
            line = str(screen.query_one("#approval-sandbox").render())
            assert line == sandbox.approval_notice()
            assert line.startswith("No sandbox (bubblewrap not found): this command would run with your permissions")
            assert "apt-get install bubblewrap" in line
            # no "always": no allow list is used without a sandbox, so a saved prefix would do nothing
            assert not screen.query("#always") and not screen.offers_always
            await pilot.press("n")
            await turn_done(pilot, app)
    assert [e["sandbox"] for e in approval_events(home)] == ["none", "none"]  # and the audit log says it


async def test_allow_once_runs_it_and_asks_again(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    script = tmp_path / "mkfile.sh"  # a program of the project's own: "always" may offer it
    script.write_text('#!/bin/sh\n: > "$1"\n')
    script.chmod(0o755)
    srv.push(*command_turn("./mkfile.sh once.txt"), *command_turn("./mkfile.sh twice.txt"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "make a file")
        screen = await modal(pilot, app)
        shown = " ".join(str(w.render()) for w in screen.query("Static"))
        assert "./mkfile.sh once.txt" in shown and str(tmp_path.resolve()) in shown
        assert app.status.state == "waiting for approval"
        path = screenshot(app, "approval")
        svg = html.unescape(path.read_text()).replace("\xa0", " ")
        assert "./mkfile.sh once.txt" in svg and "Allow once" in svg and "Always allow" in svg and "Deny" in svg
        await pilot.press("y")
        await turn_done(pilot, app)
        assert (tmp_path / "once.txt").exists()
        block = app.query_one(ToolBlock)
        assert "✓" in str(block.title) and "[exit status 0]" in block.output
        await submit(pilot, app, "another one")
        await modal(pilot, app)  # allowed once only: asked again
        await pilot.press("y")
        await turn_done(pilot, app)
        assert (tmp_path / "twice.txt").exists()
    assert [e["choice"] for e in approval_events(home)] == ["once", "once"]


async def test_always_allow_a_prefix_then_no_modal(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    for name in ("first.txt", "second.txt", "third.txt"):
        (tmp_path / name).write_text(f"{name} holds this\n")
    srv.push(*command_turn("wc -c first.txt"), *command_turn("wc -c second.txt"),
             *command_turn("wc -c third.txt; touch sneaky.txt"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "count a file")
        screen = await modal(pilot, app)
        assert screen.prefix == "wc"
        await pilot.press("a")
        await turn_done(pilot, app)
        saved = json.loads((home / "approvals.json").read_text())
        assert [r["prefix"] for r in saved["workspaces"][str(tmp_path.resolve())]] == ["wc"]

        asked = []
        ask = app.session.approvals.ask

        async def counting(request):
            asked.append(request.command)
            return await ask(request)

        app.session.approvals.ask = counting
        await submit(pilot, app, "another")
        await turn_done(pilot, app)
        assert asked == [] and not isinstance(app.screen, ApprovalScreen)  # no modal
        told = [m["content"] for m in srv.chat_bodies[-1]["messages"] if m["role"] == "tool"]
        assert "second.txt" in told[-1] and "[exit status 0]" in told[-1]  # it ran, read-only

        await submit(pilot, app, "a chained one")  # a prefix never vouches for a chain
        screen = await modal(pilot, app)
        assert not screen.simple and not screen.query("#always")
        await pilot.press("a")  # not offered: nothing happens
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("n")
        await turn_done(pilot, app)
        assert asked == ["wc -c third.txt; touch sneaky.txt"]
        assert not (tmp_path / "sneaky.txt").exists()
    events = approval_events(home)
    assert [(e["choice"], e["source"], e["prefix"]) for e in events] == [
        ("always", "person", "wc"), ("allow_list", "workspace", "wc"), ("deny", "person", None)]
    assert events[1]["allow_list"]["workspace"] == ["wc"]


async def test_always_is_not_offered_for_an_interpreter(ollama_home, tmp_path: Path) -> None:
    """After allowing `python3 -c 'print(1)'`, the next python3 command asks again: no prefix was
    offered, and "a" does nothing."""
    home, srv = ollama_home
    srv.push(*command_turn("python3 -c 'print(1)'"), *command_turn("python3 -c 'print(2)'"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "run python")
        screen = await modal(pilot, app)
        assert screen.simple and not screen.offers_always and not screen.query("#always")
        await pilot.press("a")
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("y")
        await turn_done(pilot, app)
        await submit(pilot, app, "again")
        await modal(pilot, app)  # asked again
        await pilot.press("n")
        await turn_done(pilot, app)
    assert [e["choice"] for e in approval_events(home)] == ["once", "deny"]
    assert not (home / "approvals.json").exists()


async def test_deny_with_n_and_with_escape(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(*command_turn("touch denied.txt", "Understood."), *command_turn("touch escaped.txt", "OK."))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "make a file")
        await modal(pilot, app)
        await pilot.press("n")
        await turn_done(pilot, app)
        assert not (tmp_path / "denied.txt").exists()
        told = [m["content"] for m in srv.chat_bodies[-1]["messages"] if m["role"] == "tool"]
        assert told and "The person denied this command; it did not run." in told[-1]
        assert "✗" in str(app.query(ToolBlock).last().title)

        await submit(pilot, app, "make another")
        await modal(pilot, app)
        await pilot.press("escape")
        await turn_done(pilot, app)
        assert not (tmp_path / "escaped.txt").exists()
        assert app.turn_worker.state.name == "SUCCESS"  # Esc in the modal denies; it does not stop the turn
    assert [e["choice"] for e in approval_events(home)] == ["deny", "deny"]


async def test_keys_before_the_modal_is_armed_are_ignored(ollama_home, tmp_path: Path, monkeypatch) -> None:
    home, srv = ollama_home
    # a longer delay than the app's, so that a busy machine still sees the modal before it arms
    monkeypatch.setattr(ApprovalScreen, "ARM_DELAY_S", 2.0)
    srv.push(*command_turn("touch early.txt"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "make a file")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the modal")
        assert not app.screen.armed
        await pilot.press("y")  # typed a moment too early: ignored
        assert isinstance(app.screen, ApprovalScreen)
        await modal(pilot, app)
        await pilot.press("n")
        await turn_done(pilot, app)
        assert not (tmp_path / "early.txt").exists()


async def test_escape_during_a_run_ends_the_process_group(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    t = unique_seconds()  # the pid it prints is its sandbox's: the child is found by its argv
    srv.push(*command_turn(f"echo started; sleep {t} & echo child $!; wait"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "run something long")
        await modal(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: bool(app.query(ToolBlock)) and "child" in app.query_one(ToolBlock).output,
                    "the output to stream", limit=2000)
        block = app.query_one(ToolBlock)
        assert not block.collapsed and "…running" in str(block.title)
        assert re.search(r"child (\d+)", block.output) and pids_of(["sleep", t])
        await pilot.press("escape")
        await turn_done(pilot, app)
        assert wait_argv_gone(["sleep", t]) == [], "the command's child survived Esc"
        assert "stopped" in block.output and "✗" in str(block.title)
        s = app.session
        results = [e for e in await s.store.entries(s.conversation_id) if e.kind == "tool_result"]
        assert len(results) == 1 and results[0].meta["stopped"] is True
        assert "stopped by the person (Esc)" in results[0].content and "child" in results[0].content
        assert (await s.store.turns(s.conversation_id))[-1].state == "stopped"


async def test_a_wrong_prefix_keeps_the_keys_in_the_field(ollama_home, tmp_path: Path) -> None:
    """QA: after a refused prefix, focus left the field, typing was lost, and Enter once denied."""
    from textual.widgets import Input

    home, srv = ollama_home
    srv.push(*command_turn("printf third"))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "print")
        screen = await modal(pilot, app)
        await until(pilot, lambda: screen.armed, "the modal to arm")
        field = screen.query_one("#approval-prefix", Input)
        field.focus()
        field.value = "printf t"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        assert "whole words 'printf t'" in str(screen.query_one("#approval-error").render())
        assert app.focused is field
        await pilot.press("backspace", "backspace")
        assert field.value == "printf"
        await pilot.press("enter")
        await turn_done(pilot, app)
    events = approval_events(home)
    assert [(e["choice"], e["prefix"]) for e in events] == [("always", "printf")]


async def test_the_modal_shows_everything_that_runs(ollama_home, tmp_path: Path) -> None:
    """`echo hello` + 40 line breaks + `touch …` showed as `echo hello` alone; and U+202E reached the
    terminal raw. The command's box shows every line with words, its line ends marked, the empty
    run counted, and the bidi control escaped."""
    home, srv = ollama_home
    hidden = "echo hello" + "\n" * 41 + "touch hidden.txt \u202etxt.exe"
    srv.push(*command_turn(hidden, "Understood."))
    app = app_for(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await submit(pilot, app, "say hello")
        screen = await modal(pilot, app)
        box = screen.query_one("#approval-command")
        shown = str(box.render())
        assert shown.split("\n") == ["echo hello⏎", "⏎ … 40 empty lines …", "touch hidden.txt \\u202etxt.exe"]
        assert "\u202e" not in shown
        assert box.region.height >= 3 and box.region.height <= 12  # all three lines fit in the box
        await pilot.press("n")
        await turn_done(pilot, app)
    assert not (tmp_path / "hidden.txt").exists()
