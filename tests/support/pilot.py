"""Pilot helpers: wait for a condition, send a prompt, write a screenshot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from wisp.tui.app import WispApp
from tests.support.home import SCREENSHOTS

SIZE = (110, 36)


async def until(pilot, condition: Callable[[], bool], what: str, limit: int = 500) -> None:
    """Let the app process messages until ``condition`` holds (no fixed sleeps)."""
    for _ in range(limit):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def send(pilot, app: WispApp, prompt: str) -> None:
    app.prompt_input.load_text(prompt)
    await pilot.press("enter")
    await until(pilot, lambda: app.turn_worker is not None, "the turn to start")
    await app.turn_worker.wait()
    await pilot.pause()


def texts(app: WispApp, cls) -> list[str]:
    return [w.text if hasattr(w, "text") else str(w.render()) for w in app.query(cls)]


def screenshot(app: WispApp, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.svg"
    svg = app.export_screenshot()
    # Textual names the SVG's classes with a random number; a stable name keeps
    # an unchanged view from rewriting its file on every run
    svg = re.sub(r"terminal-\d+", f"terminal-{re.sub(r'[^a-z0-9]', '', name)}", svg)
    if not path.exists() or path.read_text() != svg:
        path.write_text(svg)
    return path


async def started(pilot, app: WispApp) -> None:
    await until(pilot, app.ready.is_set, "the session to open")
