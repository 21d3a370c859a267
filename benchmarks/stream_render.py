"""Streaming a long Markdown reply: wisp's TUI against a bare MarkdownStream fed the same deltas.

An endpoint (a fake Ollama on 127.0.0.1) sends a whole reply of N tokens of
Markdown at once, one token a line of NDJSON; wisp's app (headless, 120×40)
receives and draws it. The anchors are a bare Textual app with Textual's own
``MarkdownStream`` in an anchored scroll, fed the same deltas in the same
process: each delta one ``write``, and 20 deltas a ``write`` (issue 12,
"Fast at every size", second row; targets: ≥ 10,000 tokens/s and the end on
screen within 0.5 s of the last byte).

For each size (2,000, 10,000 and 20,000 tokens; ``--quick``: 300) it prints:

- tokens/s: the tokens over the time from the first delta to the last token on screen;
- the cost per delta at the start and at the end of the reply (the mean time
  between two deltas taken, over the first and the last tenth); it must not
  grow more than twofold from start to end;
- the lag from the endpoint's last byte (the anchor: its last write) to the
  last token on screen. The endpoint sends the whole reply at once, so this
  lag is the whole time wisp takes to read and show the reply;
- the lag from the moment wisp has read the last delta (the agent yielded
  it) to the last token on screen: how far the screen trails what arrived.

    python benchmarks/stream_render.py [--sizes 2000,10000,20000] [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from _common import Row, point_at, print_row, private_home

#: One screenful of the Markdown a model writes: headings, paragraphs with
#: inline code and bold, a list, a fenced code block.
TEMPLATE = """## Step {n}: reading the configuration

The loader reads `config.json` from the home folder and **checks** every key before it is used, so a typo
is reported with the file and the line. Then it merges the defaults, one level at a time.

- the endpoint's URL, with its **scheme** and port;
- the model's name, or the first one the server lists;
- the context window in tokens, else what the server reports.

```python
def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for key in data:
        check(key, data[key])
    return merge(DEFAULTS, data)
```

That is all the loader does; the next step writes the result back with mode `0600`.

"""


def deltas(tokens: int) -> list[str]:
    """``tokens`` pieces of Markdown, word-sized (a word with its space, or a newline)."""
    out: list[str] = []
    n = 1
    while len(out) < tokens:
        text = TEMPLATE.format(n=n)
        for line in text.splitlines(keepends=True):
            words = line.rstrip("\n").split(" ")
            for i, w in enumerate(words):
                piece = w + (" " if i < len(words) - 1 else "")
                if piece:
                    out.append(piece)
            if line.endswith("\n"):
                out.append("\n")
        n += 1
    return out[:tokens]


def per_delta(times: list[float]) -> tuple[float, float]:
    """Mean seconds between two deltas over the first and the last tenth."""
    k = max(1, len(times) // 10)
    start = (times[k] - times[0]) / k if len(times) > k else 0.0
    end = (times[-1] - times[-1 - k]) / k if len(times) > k else 0.0
    return start, end


def _shown(app: Any) -> str | None:
    """The reply's text as drawn, or ``None`` while part of it is still to draw."""
    reply = app.chat.last_reply
    if reply is None:
        return None
    shown = getattr(reply, "shown_text", None)  # wisp's own reply widget
    if shown is not None:
        return shown() if callable(shown) else shown
    md = getattr(reply, "_reply_md", None)  # before issue 12: Textual's Markdown, streamed
    if md is None or getattr(reply, "_stream", None) is not None:
        return None
    return md.source


async def wisp_once(srv: Any, pieces: list[str], workdir: str) -> dict[str, float]:
    """One reply of ``pieces`` through wisp's app; its figures."""
    from wisp.core.session import SessionOptions
    from wisp.tui.app import WispApp

    whole = "".join(pieces)
    srv.push({"steps": [{"text": p} for p in pieces], "finish": "stop",
              "usage": {"prompt": 10, "completion": len(pieces)}})
    app = WispApp(SessionOptions(workdir=workdir))
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        session = app.session
        original = session.run_turn

        async def timed(prompt: str, *args, **kwargs):  # the app's own arguments (supersedes, seen) pass through
            async for item in original(prompt, *args, **kwargs):
                if type(item).__name__ == "TextDelta":
                    times.append(time.perf_counter())
                yield item

        session.run_turn = timed  # type: ignore[method-assign]
        app.prompt_input.load_text("go")
        await pilot.press("enter")
        deadline = time.perf_counter() + 900
        while _shown(app) != whole:
            if time.perf_counter() > deadline:
                raise SystemExit("the reply never showed whole")
            await asyncio.sleep(0.001)
        await pilot.pause()
        shown_at = time.perf_counter()
        if app.turn_worker is not None:
            await app.turn_worker.wait()
    start, end = per_delta(times)
    return {"rate": len(pieces) / (shown_at - times[0]), "start": start, "end": end,
            "lag": shown_at - srv.last_byte, "behind": shown_at - times[-1]}


async def anchor_once(pieces: list[str], batch: int) -> dict[str, float]:
    """The same deltas into a bare MarkdownStream, ``batch`` deltas a write."""
    from textual.app import App
    from textual.containers import VerticalScroll
    from textual.widgets import Markdown

    class Bare(App):
        def compose(self):
            with VerticalScroll(id="scroll"):
                yield Markdown()

    app = Bare()
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        scroll = app.query_one("#scroll", VerticalScroll)
        scroll.anchor()
        stream = Markdown.get_stream(app.query_one(Markdown))
        for i in range(0, len(pieces), batch):
            await stream.write("".join(pieces[i:i + batch]))
            now = time.perf_counter()
            times.extend([now] * len(pieces[i:i + batch]))
        last_write = time.perf_counter()
        await stream.stop()
        await pilot.pause()
        shown_at = time.perf_counter()
        assert app.query_one(Markdown).source == "".join(pieces)
    # batched: the cost of a delta is its share of its write
    start, end = per_delta(times)
    if batch > 1:
        k = max(batch, len(times) // 10)
        start = (times[k] - times[0]) / k
        end = (times[-1] - times[-1 - k]) / k
    return {"rate": len(pieces) / (shown_at - times[0]), "start": start, "end": end,
            "lag": shown_at - last_write, "behind": shown_at - last_write}


def fast_ollama() -> Any:
    """A fake Ollama that sends a whole reply in one write and notes when its last byte went out."""
    from tests.support.fakes import FakeOllama

    class AtOnce(FakeOllama):
        last_byte = 0.0

        def _play(self, h: Any, entry: dict, body: Any) -> None:
            lines = "".join(self._line({**self._base(body), "message": self._message(s), "done": False})
                            for s in entry.get("steps", []))
            lines += self._line(self._final(entry, body))
            self.begin_stream(h, body)
            h.chunk(lines)
            h.end_chunked()
            self.last_byte = time.perf_counter()

    return AtOnce()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", default="2000,10000,20000")
    p.add_argument("--no-each", action="store_true", help="leave out the one-delta-a-write anchor (slow)")
    args = p.parse_args()
    sizes = [300] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    home = private_home()
    workdir = str(home / "work")
    (home / "work").mkdir()
    with fast_ollama() as srv:
        point_at(home, "ollama", srv.base_url, name="wisp-fake:latest", context_window=65536)
        for size in sizes:
            pieces = deltas(size)
            w: list[dict[str, float]] = []
            batched: list[dict[str, float]] = []
            each: list[dict[str, float]] = []
            for _ in range(runs):
                w.append(asyncio.run(wisp_once(srv, pieces, workdir)))
                batched.append(asyncio.run(anchor_once(pieces, 20)))
                if not args.no_each:
                    each.append(asyncio.run(anchor_once(pieces, 1)))
            label = f"stream {size:,} tokens"

            def row(what: str, unit: str, anchor: str, key: str, ref: list[dict[str, float]],
                    scale: float = 1.0) -> None:
                r = Row(f"{label}: {what}", unit, anchor)
                r.wisp = [x[key] * scale for x in w]
                r.anchor = [x[key] * scale for x in ref]
                print_row(r)

            row("tokens/s", "tokens/s", "bare MarkdownStream, 20 deltas a write", "rate", batched)
            if each:
                row("tokens/s", "tokens/s", "bare MarkdownStream, each delta a write", "rate", each)
            row("per-delta cost at the start", "ms", "bare MarkdownStream, 20 deltas a write", "start", batched,
                1000)
            row("per-delta cost at the end", "ms", "bare MarkdownStream, 20 deltas a write", "end", batched, 1000)
            growth = Row(f"{label}: per-delta cost, end ÷ start", "x", "bare MarkdownStream, 20 deltas a write")
            growth.wisp = [x["end"] / x["start"] for x in w if x["start"]]
            growth.anchor = [x["end"] / x["start"] for x in batched if x["start"]]
            print_row(growth)
            row("lag from the last byte to the last token on screen", "s",
                "bare MarkdownStream, 20 deltas a write (from its last write)", "lag", batched)
            row("lag from the last delta read to the last token on screen", "s",
                "bare MarkdownStream, 20 deltas a write (from its last write)", "behind", batched)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
