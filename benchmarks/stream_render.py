"""Streamed tokens rendered per second: a fake Ollama streams a long Markdown reply as fast as it
can, one token-sized chunk per NDJSON line, and wisp's TUI (headless) renders it.

    python benchmarks/stream_render.py [TOKENS]
"""

from __future__ import annotations

import asyncio
import sys
import time

from _common import point_at, private_home, summary


def chunks(n: int) -> list[dict]:
    words = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
             " Here", " is", " `code`", " and", " **bold**", " text", ",", " then", "\n\n"]
    out = [{"text": words[i % len(words)]} for i in range(n)]
    return out


async def run_once(tokens: int, url: str) -> float:
    from wisp.core.session import SessionOptions
    from wisp.tui.app import WispApp
    from wisp.tui.widgets import AssistantMessage

    app = WispApp(SessionOptions())
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        app.prompt_input.load_text("go")
        t0 = time.perf_counter()
        await pilot.press("enter")
        while app.turn_worker is None:
            await pilot.pause()
        await app.turn_worker.wait()
        await pilot.pause()
        elapsed = time.perf_counter() - t0
        text = app.query(AssistantMessage).last().text
        assert len(text) > tokens, "the reply did not arrive whole"
    return tokens / elapsed


def main() -> None:
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    home = private_home()
    from tests.support.fakes import FakeOllama

    with FakeOllama() as srv:
        point_at(home, "ollama", srv.base_url)
        rates = []
        for _ in range(3):
            srv.push({"steps": chunks(tokens), "finish": "stop", "usage": {"prompt": 10, "completion": tokens}})
            rates.append(asyncio.run(run_once(tokens, srv.base_url)))
    print(summary(f"streamed tokens rendered ({tokens} tokens a reply)", rates, "tokens/s"))


if __name__ == "__main__":
    main()
