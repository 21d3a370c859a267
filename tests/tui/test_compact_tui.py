"""``/compact`` in the TUI (issue "Compaction you can see and trust"): the preview opens first (turns
leaving with their tokens, the proposed summary, the identifiers kept and missed, what stays, tokens
before and after); Esc cancels and nothing changes; Enter applies it and the F4 panel shows the new
version, which part the model wrote and which wisp completed; ``/compact undo`` restores the
previous version. Real app, fake Ollama, a scripted side call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Static

from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.screens import CompactScreen
from wisp.tui.widgets import CommandOutput, ContextSidebar
from tests.support.pilot import screenshot, send, started, until
from tests.support.sidecalls import SummarisingSideCall

SIZE = (120, 40)
PROMPTS = ["We'll fix the payment bug in src/pay/charge.py first.",
           "The failing test is tests/test_pay.py::test_refund_rounding, error PAY-402.",
           "Look at commit 3f9a2c1b, it changed the rounding.",
           "Keep amounts in cents from now on."]


async def command(pilot: Any, app: WispApp, line: str) -> None:
    app.prompt_input.load_text(line)
    await pilot.press("enter")
    await pilot.pause()


async def preview_open(pilot: Any, app: WispApp) -> CompactScreen:
    await until(pilot, lambda: isinstance(app.screen, CompactScreen), "the compact preview")
    await pilot.pause()
    return app.screen  # type: ignore[return-value]


def outputs(app: WispApp) -> list[str]:
    return [str(getattr(w, "source", "")) for w in app.query(CommandOutput)]


def static_text(screen: CompactScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def versions(app: WispApp) -> list[Any]:
    s = app.session
    return await s.context.summaries.versions(s.conversation_id)


async def test_compact_preview_cancel_apply_and_undo(ollama_home, tmp_path: Path) -> None:
    side = SummarisingSideCall("small")
    app = WispApp(SessionOptions(workdir=tmp_path, tools=[], side_call=side))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await command(pilot, app, "/task fix the payment bug; objective: tests/test_pay.py passes")
        for prompt in PROMPTS:
            await send(pilot, app, prompt)
        bar = app.query_one(ContextSidebar)

        # the preview, then Esc: nothing changes
        await command(pilot, app, "/compact focus on the payment bug")
        screen = await preview_open(pilot, app)
        preview = screen.preview
        assert [n for n, _ in preview.leaving] == [1, 2, 3] and preview.staying == [4]
        leaving = static_text(screen, "#compact-leaving")
        assert "turn 1" in leaving and "tokens" in leaving and "staying whole: turn 4" in leaving
        kept = static_text(screen, "#compact-kept")
        assert "PAY-402" in kept and "missed by the model, completed by wisp" in kept
        assert "fix the payment bug" in static_text(screen, "#compact-stays")
        assert "before →" in static_text(screen, "#compact-tokens")
        assert "Completed by wisp" in str(screen.query(".part-head").first().render())
        screenshot(app, "compact-preview")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CompactScreen), "the preview to close")
        await until(pilot, lambda: any("Cancelled: nothing changed" in t for t in outputs(app)), "the cancel line")
        assert await versions(app) == []

        # the preview again, then Enter: applied
        calls = len(side.calls)
        await command(pilot, app, "/compact focus on the payment bug")
        screen = await preview_open(pilot, app)
        assert len(side.calls) > calls  # the preview's only cost: its side call
        await pilot.press("enter")
        await until(pilot, lambda: any("Applied: running summary version 1" in t for t in outputs(app)),
                    "the applied line")
        got = await versions(app)
        assert [(v.version, v.origin, v.covers, v.focus) for v in got] == [(1, "compact", (1, 2, 3),
                                                                             "the payment bug")]
        await until(pilot, lambda: "version 1 · turns 1–3" in bar.summary_panel.plain, "the summary panel")
        panel = bar.summary_panel.plain
        assert "/compact (focus: the payment bug)" in panel and "keeps" in panel
        assert "written by the model" in panel and "completed by wisp" in panel
        screenshot(app, "summary-panel-versions")

        # undo: the previous version (none) is restored; every version is kept
        await command(pilot, app, "/compact undo")
        await until(pilot, lambda: any("no running summary is in effect" in t for t in outputs(app)), "the undo line")
        await until(pilot, lambda: "None in effect" in bar.summary_panel.plain, "the panel after undo")
        assert "v1 · turns 1–3 · /compact" in bar.summary_panel.plain
        assert [v.origin for v in await versions(app)] == ["compact", "undo"]


async def test_compact_waits_for_a_streaming_reply(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path, tools=[], side_call=SummarisingSideCall()))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)

        class Busy:
            is_running = True

        app.turn_worker = Busy()  # type: ignore[assignment]
        await command(pilot, app, "/compact")
        await until(pilot, lambda: any("waits for the reply to end" in n.text
                                       for n in app.query("Notice")), "the notice")
        assert not isinstance(app.screen, CompactScreen)
        app.turn_worker = None


async def test_nothing_to_compact_is_said_in_the_chat(ollama_home, tmp_path: Path) -> None:
    app = WispApp(SessionOptions(workdir=tmp_path, tools=[], side_call=SummarisingSideCall()))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await command(pilot, app, "/compact")
        await until(pilot, lambda: any("no turn" in t for t in outputs(app)), "the answer")
        await send(pilot, app, PROMPTS[0])
        await command(pilot, app, "/compact")
        screen = await preview_open(pilot, app)
        assert "Nothing to compact" in static_text(screen, "#compact-headline")
        await pilot.press("enter")  # nothing to apply: it closes
        await until(pilot, lambda: not isinstance(app.screen, CompactScreen), "the preview to close")
        assert await versions(app) == []


async def test_while_the_preview_is_written_the_status_and_the_line_say_so(ollama_home, tmp_path: Path) -> None:
    """A new user saw "● ready" and no sign of progress for the five minutes a /compact side call
    took on SmolLM2: the status bar says "summarising" and the line counts the seconds."""
    import asyncio

    release = asyncio.Event()

    class Slow(SummarisingSideCall):
        async def complete(self, messages, **kw):  # type: ignore[override]
            await asyncio.wait_for(release.wait(), 30)
            return await super().complete(messages, **kw)

    app = WispApp(SessionOptions(workdir=tmp_path, tools=[], side_call=Slow("small")))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        for prompt in PROMPTS:
            await send(pilot, app, prompt)
        await command(pilot, app, "/compact")
        await until(pilot, lambda: app.status.state == "summarising", "the status to say summarising")
        await until(pilot, lambda: any("s so far" in str(n.render()) for n in app.query("Notice")),
                    "the line to count the seconds", limit=400)
        screenshot(app, "compact-waiting")
        release.set()
        await preview_open(pilot, app)
        assert app.status.state == "ready"
