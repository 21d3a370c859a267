"""Streaming decoupled from drawing (issue 12): a long reply sent at full speed ends on screen byte for
byte as it was sent; the reply is drawn as lines, its finished blocks once, at most once a frame; the
Markdown looks as Textual's does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.style import Style

from tests.support.fakes import FakeOllama
from tests.support.home import write_config
from tests.support.pilot import started, until
from wisp.core.session import SessionOptions
from wisp.tui.app import WispApp
from wisp.tui.markdown_lines import Painter, parse_blocks, render_block
from wisp.tui.widgets import AssistantMessage, ReplyText
import wisp.tui.widgets.reply_text as reply_text_module

SIZE = (110, 36)

#: Markdown a model writes: headings, paragraphs with inline code and bold, a list, a quote, a table,
#: a fenced block, a rule, and a few things a parser must not trip on.
SECTION = """## Step {n}: the loader

The loader reads `config.json` and **checks** every key; a *typo* is ~~ignored~~ reported.

- the endpoint's URL;
- the model's name;
  - nested, with `code`.

> a quote that
> goes on.

| key | value |
|-----|-------|
| a   | {n}   |

```python
def load(path):
    return {n}  # <b>not html</b> &amp; \\n
```

1. one
2. two

---
Unclosed ` backtick, a [link](http://example.invalid/{n}) and \\*escapes\\*. é ✓ 日本

"""


def pieces_of(tokens: int) -> list[str]:
    out: list[str] = []
    n = 0
    while len(out) < tokens:
        n += 1
        for line in SECTION.format(n=n).splitlines(keepends=True):
            words = line.split(" ")
            out += [w + " " for w in words[:-1]] + [words[-1]]
    return [p for p in out if p][:tokens]


class AtOnce(FakeOllama):
    """Sends a whole reply in one write (an endpoint that answers at once)."""

    def _play(self, h: Any, entry: dict, body: Any) -> None:
        lines = "".join(self._line({**self._base(body), "message": self._message(s), "done": False})
                        for s in entry.get("steps", []))
        self.begin_stream(h, body)
        h.chunk(lines + self._line(self._final(entry, body)))
        h.end_chunked()


async def test_a_20000_token_reply_at_full_speed_ends_on_screen_as_sent(wisp_home: Path, tmp_path: Path,
                                                                        monkeypatch) -> None:
    pieces = pieces_of(20000)
    sent = "".join(pieces)
    applied: list[int] = []
    real_apply = ReplyText._apply

    def counting(self: ReplyText) -> None:
        applied.append(len(self._pending))
        real_apply(self)

    monkeypatch.setattr(ReplyText, "_apply", counting)
    with AtOnce() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.context_window": 65536})
        srv.push({"steps": [{"text": p} for p in pieces], "finish": "stop"})
        app = WispApp(SessionOptions(workdir=tmp_path))
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, app)
            app.prompt_input.load_text("go")
            await pilot.press("enter")
            await until(pilot, lambda: app.turn_worker is not None, "the turn")
            await app.turn_worker.wait()
            await pilot.pause()
            reply = app.query_one(AssistantMessage)
            texts = list(reply.query(ReplyText))
            assert len(texts) == 1
            shown = texts[0]
            # byte for byte: what was sent, what the reply holds, what was parsed and drawn
            assert reply.text == sent and shown.source == sent and shown.shown_text() == sent
            assert not shown.live and len(shown.source.encode()) == len(sent.encode())
            # the agent was not made to wait per delta: far fewer renders than deltas
            assert 0 < len(applied) < len(pieces) / 20
            # every block was drawn from the text: the blocks' sources, joined, are the text
            starts = [b.start for b in parse_blocks(sent)]
            assert len(shown._frozen_nodes) == len(starts)
            # the end is on screen: the chat follows the end, and the reply's last row is in view
            chat = app.chat
            assert chat.scroll_y == chat.max_scroll_y
            bottom = shown.region.bottom - 1
            assert chat.region.y <= bottom < chat.region.bottom
        stored = srv.chat_bodies
    assert stored, "the request went out"


async def test_finished_blocks_are_drawn_once_and_only_when_seen(monkeypatch) -> None:
    """A block followed by another is measured once and drawn once, when it first comes into view;
    only the last block, still being written, is drawn again each frame."""
    drawn: list[str] = []
    real = reply_text_module.render_block

    def counting(node: Any, painter: Any, **kwargs: Any) -> Any:
        drawn.append(node.type)
        return real(node, painter, **kwargs)

    monkeypatch.setattr(reply_text_module, "render_block", counting)

    class Host(App):
        def compose(self) -> ComposeResult:
            with VerticalScroll(id="scroll"):
                yield ReplyText(live=True, id="reply")

    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        reply = app.query_one(ReplyText)
        app.query_one("#scroll", VerticalScroll).anchor()
        for n in range(40):  # a flood: forty paragraphs before the next frame
            reply.append(f"Paragraph {n} with `code` and **bold**.\n\n")
        await until(pilot, lambda: reply.shown_text() is not None, "the frame")
        await pilot.pause()
        frozen = len(reply._frozen_nodes)
        assert frozen == 39 and reply.virtual_region.height >= 2 * 39
        finished_draws = sum(1 for b in reply._laid if b.strips is not None)
        # the finished blocks out of view were measured, not drawn
        assert 0 < finished_draws <= 10
        for n in range(3):  # a few more, frame by frame
            reply.append(f"More {n}.\n\n")
            await until(pilot, lambda: reply.shown_text() is not None, "the frame")
            await pilot.pause()
        assert len([t for t in drawn if t == "paragraph"]) == len(drawn)
        assert sum(1 for b in reply._laid if b.strips is not None) <= 14
        before = len(drawn)
        reply.append("One more.\n\n")
        await until(pilot, lambda: reply.shown_text() is not None, "the frame")
        await pilot.pause()
        assert len(drawn) - before <= 3, "a frame drew more than the live block and what came into view"
        reply.finish()
        await pilot.pause()
        assert reply.source.endswith("One more.\n\n") and not reply.live


class PlainStyles:
    """Styles for drawing without an app: every style is the plain one."""

    def base(self) -> Style:
        return Style()

    def part(self, name: str) -> Style:
        return Style()

    def get_style(self, style: Any) -> Style:
        return style if isinstance(style, Style) else Style()


def drawn_text(node: Any, width: int = 50) -> list[str]:
    return [strip.text.rstrip() for strip in render_block(node, Painter(PlainStyles(), width)).strips or []]


LINES = st.sampled_from([
    "# Title", "## Sub title", "Plain words and more words", "with `code` and **bold** and *em*", "",
    "", "- item", "- item with `x`", "  - nested", "1. first", "2. second", "> quoted", "> more quote",
    "```python", "```", "def f(x):", "    return x", "---", "| a | b |", "|---|---|", "| 1 | 2 |",
    "Title underlined", "===", "a very long line " * 8, "é ✓ 日本 \\*not em\\*",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINES, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_a_reply_streamed_in_any_pieces_draws_the_blocks_of_the_whole(lines: list[str], cuts: list[int]) -> None:
    """Frozen as it streams, frame by frame, a reply ends as the same blocks as the whole text
    parsed at once (a property of any text a model writes)."""
    text = "\n".join(lines) + ("\n" if lines else "")
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    reply = ReplyText()
    for a, b in zip(bounds, bounds[1:]):
        reply.append(text[a:b])
        reply._apply()  # one frame per piece
    reply.finish()
    assert reply.source == text and reply.shown_text() == text
    streamed = [drawn_text(node) for node in reply._frozen_nodes]
    whole = [drawn_text(block.node) for block in parse_blocks(text)]
    assert streamed == whole
