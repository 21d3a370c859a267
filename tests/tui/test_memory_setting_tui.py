"""The TUI agrees with ``wisp ask`` on when context.memory applies (tests/unit/test_config_applies.py):
``/config set context.memory on`` says it applies from the next conversation, the open one keeps its
tools, ``/new`` has the memory tool, and ``wisp --continue`` opens the earlier one again with it."""

from __future__ import annotations

from pathlib import Path

from wisp.core.config import TOOLS_APPLY
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.widgets import CommandOutput, Welcome
from tests.support.pilot import SIZE, send, started, until


def tools_sent(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


async def command(pilot, app: WispApp, text: str) -> None:
    before = len(app.query(CommandOutput))
    app.prompt_input.load_text(text)
    await pilot.press("enter")
    await until(pilot, lambda: len(app.query(CommandOutput)) > before, text)


async def test_config_set_context_memory_applies_from_the_next_conversation(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await command(pilot, app, "/config set context.memory on")
        out = app.query(CommandOutput).last()
        assert TOOLS_APPLY in out.source and "next request" not in out.source
        await send(pilot, app, "hello")
        assert "memory" not in tools_sent(srv.chat_bodies[-1])  # the open conversation keeps its tools
        first = app.session.conversation_id
        app.prompt_input.load_text("/new")
        await pilot.press("enter")
        await until(pilot, lambda: app.session is not None and app.ready.is_set() and
                    len(app.chat.query(Welcome)) == 1, "a new conversation")
        await send(pilot, app, "hello again")
        assert "memory" in tools_sent(srv.chat_bodies[-1])
        assert app.session.conversation_id != first
    # `wisp --continue` in this directory: the newest conversation, opened again with the memory tool
    again = WispApp(SessionOptions(workdir=tmp_path, continue_last=True))
    async with again.run_test(size=SIZE) as pilot:
        await started(pilot, again)
        newest = again.session.conversation_id
        await send(pilot, again, "and once more")
        assert "memory" in tools_sent(srv.chat_bodies[-1])
        assert again.session.conversation_id == newest
    # and the first conversation, resumed, has it too
    resumed = WispApp(SessionOptions(workdir=tmp_path, resume=first))
    async with resumed.run_test(size=SIZE) as pilot:
        await started(pilot, resumed)
        await send(pilot, resumed, "back to the first")
        assert "memory" in tools_sent(srv.chat_bodies[-1])
        assert resumed.session.conversation_id == first
