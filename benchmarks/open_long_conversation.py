"""Opening a 1,000-turn conversation: time from starting the app with --resume to the
last page of turns rendered (the app shows 50 turns and a button for the rest).

    python benchmarks/open_long_conversation.py [TURNS]
"""

from __future__ import annotations

import asyncio
import sys
import time

from _common import point_at, private_home, summary


async def build(turns: int) -> int:
    from wisp.core.session import Session, SessionOptions

    async with await Session.open(SessionOptions()) as s:
        conv = await s.ensure_conversation()
        for i in range(1, turns + 1):
            turn = await s.store.begin_turn(conv)
            await s.store.add_entry(conv, turn.id, "prompt", f"question {i}: what does line {i} of main.py do?")
            await s.store.add_entry(conv, turn.id, "tool_call", '{"path": "main.py"}', tool_name="read_file",
                                    tool_call_id=f"c{i}", arguments={"path": "main.py"})
            await s.store.add_entry(conv, turn.id, "tool_result", "\n".join(f"{n}\tline {n}" for n in range(40)),
                                    tool_name="read_file", tool_call_id=f"c{i}")
            await s.store.add_entry(conv, turn.id, "reply", f"Line {i} **prints** a greeting.\n\n```python\nprint('hi')\n```")
            await s.store.end_turn(turn.id, "done")
        return conv


async def open_once(conv: int) -> float:
    from wisp.core.session import SessionOptions
    from wisp.tui.app import WispApp

    app = WispApp(SessionOptions(resume=conv), connect=False)
    t0 = time.perf_counter()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.ready.wait()
        await pilot.pause()
        elapsed = time.perf_counter() - t0
    return elapsed


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    home = private_home()
    point_at(home, "ollama", "http://127.0.0.1:9")
    conv = asyncio.run(build(turns))
    times = [asyncio.run(open_once(conv)) for _ in range(5)]
    print(summary(f"open a {turns}-turn conversation to its last page rendered", times, "s"))


if __name__ == "__main__":
    main()
