"""A long conversation: reopening it (`wisp --resume`) and composing its next request.

Each turn has a prompt, a ``run_command`` call with a 200-line output, and a
reply with a fenced code block. For 100, 1,000 and 10,000 turns
(``--quick``: 20) it prints (issue 12, "Fast at every size", third and
fourth rows):

- time to the last turn on screen (its prompt mounted, and the next frame
  painted), from launching a fresh interpreter that opens the conversation
  with ``--resume`` (headless, 120×40), against the
  first frame of a bare Textual app (Header, Static, Input, Footer) launched
  the same way; targets ≤ 300 ms at 1,000 turns and ≤ 500 ms at 10,000;
- the peak RSS of that process, against the bare app's;
- composing the next request (``ContextManager.compose``), the first time in
  a process and again, against loading the same rows (the conversation's
  turns and entries) with aiosqlite; target ≤ 5 ms at 1,000 turns, linear at worst.
  wisp renders an ended turn once, when the next request needs it, and keeps
  the render in the store; the benchmark writes its turns straight into the
  store, so one request renders them all before the runs (not counted: in
  use, each turn is rendered once, right after it ends).

    python benchmarks/open_long_conversation.py [--sizes 100,1000,10000] [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _common import Row, child_env, point_at, print_row, private_home

async def build(turns: int, workdir: str) -> int:
    """A conversation of ``turns`` ended turns (tests/support/long_conversation.py); its id."""
    from wisp.core.config import Config
    from wisp.core.database import open_store
    from tests.support.long_conversation import write_turns

    store = await open_store(Config.load().db_path)
    try:
        conv = (await store.create_conversation(workdir, model="wisp-fake:latest", title="long")).id
        await write_turns(store, conv, turns, output_lines=200)
        return conv
    finally:
        await store.close()


CHILD_WISP = textwrap.dedent("""
    import sys, time
    t0 = float(sys.argv[1]); conv = int(sys.argv[2]); last = sys.argv[3]

    def peak_rss():  # MB: this process's own peak (VmHWM; getrusage's maxrss outlives exec on Linux)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from wisp.core import collector
    collector.hold()  # as the console script does first (tui/launch.py); the app starts it again
    from wisp.tui.app import WispApp
    from wisp.core.session import SessionOptions

    class Probe(WispApp):
        def on_mount(self):
            result = WispApp.on_mount(self)
            self._probe = self.set_interval(0.002, self._check)
            return result
        def _check(self):  # the last turn's prompt is mounted: the next refresh shows it
            from wisp.tui.widgets import UserMessage
            if any(str(u.render()).startswith(last) for u in self.query(UserMessage)):
                self._probe.stop()
                self.call_after_refresh(self._shown)
        def _shown(self):
            rss = peak_rss()
            print(f"SHOWN {time.perf_counter() - t0:.4f} {rss:.1f}", flush=True)
            self.exit(0)

    Probe(SessionOptions(resume=conv), connect=False).run(headless=True, size=(120, 40))
""")
CHILD_BARE = textwrap.dedent("""
    import sys, time
    t0 = float(sys.argv[1])

    def peak_rss():  # MB: this process's own peak (VmHWM; getrusage's maxrss outlives exec on Linux)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    from textual.app import App
    from textual.widgets import Footer, Header, Input, Static

    class Bare(App):
        def compose(self):
            yield Header()
            yield Static("bare app ready")
            yield Input()
            yield Footer()
        def on_mount(self):
            self.call_after_refresh(self._shown)
        def _shown(self):
            rss = peak_rss()
            print(f"SHOWN {time.perf_counter() - t0:.4f} {rss:.1f}", flush=True)
            self.exit(0)

    Bare().run(headless=True, size=(120, 40))
""")


def launch(code: str, *args: str) -> tuple[float, float]:
    """Seconds from launch to the shown screen, and the peak RSS (MB), of one fresh interpreter."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, repr(t0), *args], capture_output=True, text=True,
                         timeout=600, env=child_env())
    line = next((x for x in out.stdout.splitlines() if x.startswith("SHOWN")), None)
    if line is None:
        raise SystemExit(f"the app did not show: {out.stderr[-3000:]}")
    _, seconds, rss = line.split()
    return float(seconds), float(rss)


async def compose_times(conv: int, repeats: int) -> tuple[float, list[float]]:
    """The first compose of a fresh session (seconds), then ``repeats`` more."""
    from wisp.core.session import Session, SessionOptions

    async with await Session.open(SessionOptions(resume=conv, tools=["read_file", "run_command"])) as s:
        t0 = time.perf_counter()
        await s.context.compose(conv)
        first = time.perf_counter() - t0
        again = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            await s.context.compose(conv)
            again.append(time.perf_counter() - t0)
    return first, again


async def load_rows(conv: int, repeats: int) -> list[float]:
    """Loading the conversation's turns and entries with aiosqlite alone (the compose anchor)."""
    import aiosqlite

    from wisp.core.config import Config

    times = []
    async with aiosqlite.connect(Config.load().db_path) as db:
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            async with db.execute("SELECT id, number, state FROM turns WHERE conversation_id = ? ORDER BY number",
                                  (conv,)) as cur:
                await cur.fetchall()
            async with db.execute("SELECT * FROM entries WHERE conversation_id = ? ORDER BY number",
                                  (conv,)) as cur:
                await cur.fetchall()
            times.append(time.perf_counter() - t0)
    return times[1:]  # the first read warms the page cache


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", default="100,1000,10000")
    args = p.parse_args()
    sizes = [20] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    home = private_home()
    workdir = home / "work"
    workdir.mkdir()
    point_at(home, "ollama", "http://127.0.0.1:9", name="wisp-fake:latest", context_window=1_000_000)
    for size in sizes:
        conv = asyncio.run(build(size, str(workdir)))
        asyncio.run(compose_times(conv, 0))  # render each turn once, as each would be when it ended
        label = f"{size:,} turns"
        shown = Row(f"{label}: --resume to the last turn on screen", "s", "bare Textual app's first frame")
        rss = Row(f"{label}: peak RSS", "MB", "bare Textual app")
        launch(CHILD_BARE)  # warm the file and bytecode caches; not counted
        launch(CHILD_WISP, str(conv), f"question {size}:")
        for _ in range(runs):
            t, m = launch(CHILD_WISP, str(conv), f"question {size}:")
            shown.wisp.append(t)
            rss.wisp.append(m)
            t, m = launch(CHILD_BARE)
            shown.anchor.append(t)
            rss.anchor.append(m)
        print_row(shown)
        print_row(rss)
        first = Row(f"{label}: compose the next request, first in a process", "ms",
                    "loading the same rows with aiosqlite")
        again = Row(f"{label}: compose the next request, again", "ms", "loading the same rows with aiosqlite")
        for _ in range(runs):
            f, more = asyncio.run(compose_times(conv, 5))
            rows = asyncio.run(load_rows(conv, 5))
            first.wisp.append(f * 1000)
            first.anchor.append(min(rows) * 1000)
            again.wisp.append(sorted(more)[len(more) // 2] * 1000)
            again.anchor.append(sorted(rows)[len(rows) // 2] * 1000)
        print_row(first)
        print_row(again)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
