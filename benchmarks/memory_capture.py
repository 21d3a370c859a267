"""The cost of capturing one exchange for episodic memory (issue "Episodic memory across conversations").

Three figures:

1. the store writes alone: the pending exchange at the request and its
   completion at the end (two transactions), per exchange;
2. the capture hooks as a turn runs them (config re-read, turn and prompt
   lookup, both writes), per exchange;
3. whole turns through a Session against a fake Ollama on 127.0.0.1, with
   capture and with its hooks removed: the difference is what a person
   waits for capture in a real turn.

    python benchmarks/memory_capture.py [N]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

from _common import point_at, private_home, summary


async def store_writes(home: Path, n: int) -> list[float]:
    from wisp.core.episodes.capture import Exchange, save_exchange
    from wisp.core.database import open_store

    times = []
    async with await open_store(home / "writes.db") as store:
        conv = await store.create_conversation(str(home))
        for i in range(n):
            turn = await store.begin_turn(conv.id)
            base = dict(workspace="bench", transport="ask", channel=str(conv.id), request=f"request {i} " * 20,
                        requested_at=turn.started_at, conversation_id=conv.id, turn_id=turn.id, turn_number=i + 1)
            t = time.perf_counter()
            await save_exchange(store, Exchange(**base))
            await save_exchange(store, Exchange(**base, reply=f"reply {i} " * 60, outcome="completed",
                                                finished_at=turn.started_at))
            times.append((time.perf_counter() - t) * 1e3)
            await store.end_turn(turn.id, "done")
    return times


async def hooks(home: Path, n: int) -> list[float]:
    from wisp.core.agent import TurnRecord
    from wisp.core.session import Session, SessionOptions

    times = []
    async with await Session.open(SessionOptions(workdir=home, transport="ask")) as s:
        conv = await s.ensure_conversation()
        for i in range(n):
            turn = await s.store.begin_turn(conv)
            await s.store.add_entry(conv, turn.id, "prompt", f"request {i} " * 20)
            t = time.perf_counter()
            await s.capture.on_request(conv, turn.number)
            await s.capture.on_turn(TurnRecord(conv, turn.number, turn.id, f"request {i} " * 20, f"reply {i} " * 60,
                                               "done", turn.started_at, turn.started_at))
            times.append((time.perf_counter() - t) * 1e3)
            await s.store.end_turn(turn.id, "done")
    return times


async def turns(home: Path, n: int) -> tuple[list[float], list[float]]:
    """``n`` turns with capture and ``n`` without, alternating in one session (so drift hits both)."""
    from wisp.core.session import Session, SessionOptions

    with_capture: list[float] = []
    without: list[float] = []
    async with await Session.open(SessionOptions(workdir=home, transport="ask")) as s:
        assert await s.connect(), s.endpoint_error
        s.agent.before_request.remove(s.capture.on_request)  # Session installed them; the loop decides
        s.agent.after_turn.remove(s.capture.on_turn)
        for i in range(2 * n):
            capture = i % 2 == 0
            if capture:
                s.agent.before_request.append(s.capture.on_request)
                s.agent.after_turn.append(s.capture.on_turn)
            t = time.perf_counter()
            async for _ in s.run_turn(f"turn {i}: say something"):
                pass
            (with_capture if capture else without).append((time.perf_counter() - t) * 1e3)
            if capture:
                s.agent.before_request.remove(s.capture.on_request)
                s.agent.after_turn.remove(s.capture.on_turn)
    return with_capture, without


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    home = private_home()
    from tests.support.fakes import FakeOllama

    w = await store_writes(home, n)
    print(summary("store writes per exchange (pending + completed)", w, "ms"))
    h = await hooks(home, n)
    print(summary("capture hooks per exchange (as a turn runs them)", h, "ms"))
    with FakeOllama() as srv:
        srv._httpd.handle_error = lambda *a: None  # idle keep-alive sockets closed by the client: not news
        point_at(home, "ollama", srv.base_url, name="wisp-fake:latest")
        with_capture, without = await turns(home, max(50, n // 5))
    print(summary("whole turn with capture", with_capture, "ms"))
    print(summary("whole turn without capture", without, "ms"))
    print(f"capture's share of a turn: {statistics.median(with_capture) - statistics.median(without):+.3f} ms "
          "(median difference; against a fake endpoint that answers at once)")


if __name__ == "__main__":
    asyncio.run(main())
