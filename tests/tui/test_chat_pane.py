"""The chat pane draws live and stored turns through one method (issue 9,
"The TUI renders events"): a conversation reopened with --resume shows
the same widgets, with the same markers (cut, stopped, incomplete), as it
did while it streamed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widget import Widget
from textual.widgets import Markdown

from wisp.core import events as ev
from wisp.core.session import SessionOptions
from wisp.core.transcript import TurnView, turn_events
from wisp.tui.app import WispApp
from wisp.tui.widgets import (AssistantMessage, ChatPane, Notice, ThinkingBlock, ToolBlock, TurnRenderer,
                              UserMessage)
from wisp.tui.widgets.chat_pane import MARKERS
from tests.support.fakes import fault, reply, text, thinking, tool_call
from tests.support.pilot import SIZE, send, started, until

MARKER_TEXTS = {text for text, _level in MARKERS.values()}


def describe(widget: Widget) -> Any:
    """What a widget of the chat shows, as plain data (the parts a live and a stored turn must share)."""
    if isinstance(widget, UserMessage):
        return ("prompt", widget.text, widget.entry)
    if isinstance(widget, AssistantMessage):
        return ("reply", widget.text, widget.cut, widget.partial, [describe(c) for c in widget.children])
    if isinstance(widget, ThinkingBlock):
        return ("thinking", widget.text, widget.collapsed)
    if isinstance(widget, ToolBlock):
        return ("tool", str(widget.title), widget.output, widget.collapsed)
    if isinstance(widget, Notice):
        return ("notice", widget.level, widget.text)
    if isinstance(widget, Markdown):
        return ("markdown", widget.source)
    return (type(widget).__name__,)


def drawn(chat: ChatPane) -> list[Any]:
    """The conversation as drawn, without the live-only notices the agent does not store
    (the cut's advice, waits); the markers and the errors stay."""
    out = []
    for widget in chat.shown:
        if isinstance(widget, Notice) and widget.level != "error" and widget.text not in MARKER_TEXTS:
            continue
        if widget.id == "load-earlier":
            continue
        out.append(describe(widget))
    return out


async def test_a_resumed_conversation_looks_as_it_did_live(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.push(reply(thinking("Read the file first."), text("Reading."),
                   tool_call("read_file", {"path": "a.txt"}, id="call_1"), finish="tool_calls"),
             reply(text("It says **alpha**:\n\n```text\nalpha\n```")),
             reply(text("A very long answer that"), finish="length"),
             fault.disconnect(text("partial words ")),
             fault.stall(text("Once upon a time")))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "what does a.txt say?")
        await send(pilot, app, "tell me everything")
        await send(pilot, app, "and again")
        app.prompt_input.load_text("a story")
        await pilot.press("enter")
        await until(pilot, lambda: "Once upon" in app.chat.last_reply.text, "the story to stream")
        await pilot.press("escape")
        await until(pilot, lambda: not app.turn_worker.is_running, "the stop")
        await pilot.pause()
        live = drawn(app.chat)
        conversation = app.session.conversation_id

    kinds = [d[0] for d in live]
    assert kinds.count("prompt") == 4 and kinds.count("reply") == 4
    notices = [(d[1], d[2]) for d in live if d[0] == "notice"]
    assert [text for _level, text in notices] == [
        MARKERS["cut"][0], MARKERS["incomplete"][0], notices[2][1], MARKERS["stopped"][0]]
    assert notices[2][0] == "error"  # the disconnect's own message
    assert live[1][4][0][0] == "thinking" and live[1][4][2][0] == "tool"  # thinking, text, tool, text

    again = WispApp(SessionOptions(workdir=tmp_path, resume=conversation))
    async with again.run_test(size=SIZE) as pilot:
        await started(pilot, again)
        await pilot.pause()
        stored = drawn(again.chat)

    assert stored == live


def view(number: int, state: str, entries: list[Any], error: str | None = None) -> TurnView:
    return TurnView(number, state, entries, conversation=7, error=error)


class E:
    """A stored entry, as the store gives it (the fields turn_events reads)."""

    def __init__(self, number: int, kind: str, content: str = "", meta: dict | None = None, *,
                 tool_name: str | None = None, tool_call_id: str | None = None, arguments: Any = None) -> None:
        self.number, self.kind, self.content, self.meta = number, kind, content, meta or {}
        self.tool_name, self.tool_call_id, self.arguments = tool_name, tool_call_id, arguments


async def draw(events: list[ev.AgentEvent]) -> tuple[list[Widget], list[ToolBlock]]:
    """Widgets a renderer places for ``events``, without an app, and the tool blocks it made."""
    placed: list[Widget] = []
    blocks: list[ToolBlock] = []

    async def keep(widget: Widget) -> None:
        placed.append(widget)

    renderer = TurnRenderer(keep, lambda: placed[-1] if placed else None)
    for event in events:
        await renderer.show(event)
        blocks += [b for b in renderer.blocks.values() if b not in blocks]
    return placed, blocks


async def test_each_marker_is_written_once_whatever_the_order_of_endings() -> None:
    """A reply is marked once: a cut reply then the turn's end, an error then the end."""
    cut, _ = await draw(turn_events(view(1, "cut", [E(1, "prompt", "go"), E(2, "reply", "long", {"cut": True})])))
    assert [type(w).__name__ for w in cut] == ["UserMessage", "AssistantMessage", "Notice"]
    assert cut[2].text == MARKERS["cut"][0] and cut[1].cut
    # a reply wisp stopped for repeating itself is marked so, not as cut at the limit (a new user saw
    # "cut at the output limit" beside "The reply was stopped: its end repeated …")
    looped, _ = await draw(turn_events(view(4, "cut", [E(1, "prompt", "go"), E(2, "reply", "la la la", {
        "cut": True, "repeat": {"start": 0, "span": 3, "copies": 3}})])))
    assert [w.text for w in looped if isinstance(w, Notice)] == [MARKERS["repeated"][0]]
    failed, _ = await draw(turn_events(view(2, "error", [
        E(1, "prompt", "go"), E(2, "reply", "half", {"partial": True, "reason": "disconnected"})],
        error="the server closed the connection")))
    assert [w.text for w in failed if isinstance(w, Notice)] == [MARKERS["incomplete"][0],
                                                                 "the server closed the connection"]
    assert failed[1].partial
    stopped, blocks = await draw(turn_events(view(3, "stopped", [
        E(1, "prompt", "go"), E(2, "tool_call", "{}", tool_name="run_command", tool_call_id="c1",
                                arguments={"command": "sleep 9"})])))
    assert [w.text for w in stopped if isinstance(w, Notice)] == [MARKERS["stopped"][0]]
    assert len(blocks) == 1 and not blocks[0].running and blocks[0].output.endswith("■ stopped")
    assert "✗" in str(blocks[0].title) and stopped[1].partial


def test_turn_events_rebuild_a_stored_turn() -> None:
    """Entries come back as the events a live run yields, in order; an open turn has no end."""
    entries = [E(1, "prompt", "hi"), E(2, "thinking", "hmm"), E(3, "reply", "Reading.", {"before_tool_call": True}),
               E(4, "tool_call", "{}", tool_name="read_file", tool_call_id="c1", arguments={"path": "a"}),
               E(5, "tool_result", "nope", {"error": True}, tool_name="read_file", tool_call_id="c1"),
               E(6, "reply", "Done."), E(7, "notice", "heads up")]
    events = turn_events(view(4, "done", entries))
    assert events == [
        ev.TurnStarted(7, 4, 1, "hi"), ev.ThinkingDelta("hmm"), ev.TextDelta("Reading."),
        ev.ReplyRecorded(3, "Reading."), ev.ToolCall(4, "c1", "read_file", {"path": "a"}),
        ev.ToolResult(5, "c1", "read_file", "nope", ok=False, meta={"error": True}),
        ev.TextDelta("Done."), ev.ReplyRecorded(6, "Done."), ev.Notice("heads up", "warning"),
        ev.TurnEnded(4, "done")]
    assert turn_events(view(5, "open", [E(1, "prompt", "still going")])) == [ev.TurnStarted(7, 5, 1, "still going")]
    failed = turn_events(view(6, "error", [E(1, "prompt", "x")]))
    assert failed[-2:] == [ev.Error("agent", "this turn ended with an error"), ev.TurnEnded(6, "error")]


async def test_control_sequences_in_a_prompt_or_a_reply_are_shown_and_never_reach_the_terminal(
        ollama_home, tmp_path: Path) -> None:
    """Issue 11, raw terminal escapes: a stored prompt that sets the window title, or a reply that
    clears the screen, shows as visible text in the TUI, live and when the conversation is resumed."""
    home, srv = ollama_home
    srv.push(reply(text("Sure: \x1b[2J\x1b]52;c;cGF3bmVk\x07 done")))
    prompt = "Repeat exactly: \x1b]0;PWNED\x07 \x1b[31mRED\x1b[0m"
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        app.prompt_input.load_text(prompt)
        await pilot.press("enter")
        await until(pilot, lambda: app.chat.last_reply is not None and "done" in app.chat.last_reply.text,
                    "the reply")
        await until(pilot, lambda: not app.turn_worker.is_running, "the turn's end")
        await pilot.pause()
        live = app.export_screenshot()
        conversation = app.session.conversation_id
    again = WispApp(SessionOptions(workdir=tmp_path, resume=conversation))
    async with again.run_test(size=SIZE) as pilot:
        await started(pilot, again)
        await pilot.pause()
        stored = again.export_screenshot()
    for screen in (live, stored):
        assert "\x1b" not in screen and "\x07" not in screen
        assert "\\x1b]0;PWNED\\x07" in screen and "\\x1b[31mRED" in screen  # the prompt, visible
        assert "\\x1b[2J\\x1b]52;c;cGF3bmVk\\x07" in screen  # the reply, visible


async def test_a_wait_notice_goes_when_the_reply_comes(ollama_home, tmp_path: Path) -> None:
    """Found by a new user: "Waiting for the reply: 15 s of at most 900 s …" stayed in the chat after
    every reply. A transient notice is one changing line while the wait lasts, and goes after it."""
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        chat = app.chat
        await chat.show_event(ev.TurnStarted(conversation=1, turn=1, entry=1, prompt="hi"))
        for waited in (15, 30):
            await chat.show_event(ev.Notice(f"Waiting for the reply: {waited} s", key="reply-wait", transient=True))
        await chat.show_event(ev.Notice("a lasting notice", level="warning"))
        await pilot.pause()
        waits = [n for n in chat.query(Notice) if n.key == "reply-wait"]
        assert len(waits) == 1 and "30 s" in str(waits[0].render())  # one line, changing
        await chat.show_event(ev.TextDelta("Hello"))
        await chat.show_event(ev.TurnEnded(turn=1, state="done"))
        await pilot.pause()
        assert not [n for n in chat.query(Notice) if n.key == "reply-wait"]
        assert [n for n in chat.query(Notice) if "a lasting notice" in str(n.render())]
