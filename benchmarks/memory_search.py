"""Search and list time over 100,000 memories (issue "Episodic memory across conversations").

Builds a private database with N memories (default 100,000), each with one
source exchange, spread over two years and five workspaces, with summaries
drawn from a vocabulary so that some words are rare and some common. Then
times the queries `wisp memory search` and `list` run (through the same
code, on aiosqlite), and prints the median of R runs of each.

    python benchmarks/memory_search.py [N] [R]
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from _common import private_home, summary

COMMON = ["the", "person", "asked", "assistant", "reported", "decided", "work", "update", "review", "plan"]
TOPICS = ["website", "launch", "deploy", "database", "invoice", "holiday", "garden", "budget", "release",
          "backup", "migration", "printer", "newsletter", "dentist", "tickets", "kubernetes", "recipe",
          "insurance", "laptop", "meeting"]
RARE = ["zeppelin", "quokka", "marzipan", "fjord", "tessellation"]
WORKSPACES = ["website", "personal", "infra", "finance", "garden"]


def summary_text(rng: random.Random) -> str:
    words = [rng.choice(COMMON) for _ in range(rng.randint(15, 40))]
    words += [rng.choice(TOPICS) for _ in range(rng.randint(2, 6))]
    if rng.random() < 0.001:
        words.append(rng.choice(RARE))
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def build(db_path, n: int) -> None:
    rng = random.Random(6)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA synchronous = OFF")
    ex_rows, mem_rows, src_rows = [], [], []
    for i in range(1, n + 1):
        at = start + timedelta(seconds=rng.randint(0, 2 * 365 * 86400))
        t = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        ws = rng.choice(WORKSPACES)
        tr = rng.choice(["tui", "ask", "mcp"])
        ch = str(rng.randint(1, 500))
        ex_rows.append((i, ws, tr, ch, "", "bench", int(ch), "request text", 12, "reply text", 10, t, t, t,
                        "completed"))
        mem_rows.append((i, summary_text(rng), ws, tr, ch, "", int(ch), t, t, t))
        src_rows.append((i, i))
    with conn:
        conn.executemany("INSERT INTO episode_exchanges (id, workspace, transport, channel, thread, sender,"
                         " conversation_id, request, request_bytes, reply, reply_bytes, requested_at, finished_at,"
                         " captured_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", ex_rows)
        conn.executemany("INSERT INTO episode_memories (id, summary, workspace, transport, channel, thread,"
                         " conversation_id, event_at, event_end, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         mem_rows)
        conn.executemany("INSERT INTO episode_memory_sources (memory_id, exchange_id) VALUES (?, ?)", src_rows)
        conn.execute("UPDATE episode_exchanges SET batch_id = NULL")
        conn.execute("UPDATE episode_counters SET value = ? WHERE name = 'memory'", (n,))
    conn.execute("ANALYZE")
    conn.close()


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    home = private_home()
    from wisp.core.episodes.query import find_memories, make_filter
    from wisp.core.database import open_store

    db = home / "bench.db"
    async with await open_store(db):
        pass
    t0 = time.perf_counter()
    build(db, n)
    print(f"built {n:,} memories in {time.perf_counter() - t0:.1f} s; database {db.stat().st_size / 1e6:.1f} MB")
    tz = ZoneInfo("Europe/London")
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    cases = [
        ("search a rare word (zeppelin)", dict(text="zeppelin")),
        ("search a topic word (launch)", dict(text="launch")),
        ("search a common word (reported)", dict(text="reported")),
        ("search two words (website launch)", dict(text="website launch")),
        ("search + workspace + since 30d", dict(text="launch", workspace="website", since="30d")),
        ("search + transport + channel", dict(text="deploy", transport="ask", channel="42")),
        ("list, first page", dict()),
        ("list, workspace, page at offset 10,000", dict(workspace="personal", offset=10_000)),
        ("list, since month, until a date", dict(since="2025-06-01", until="2025-07-01")),
    ]
    async with await open_store(db) as store:
        for name, kw in cases:
            f = make_filter(tz, env={}, now=now, **kw)
            times = []
            total = 0
            for _ in range(runs):
                t = time.perf_counter()
                page = await find_memories(store.db, f)
                times.append((time.perf_counter() - t) * 1000)
                total = page.total
            print(summary(f"{name:<42} ({total:>6,} match)", times, "ms"))


if __name__ == "__main__":
    asyncio.run(main())
