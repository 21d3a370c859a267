"""Recall latency from a large audit log: an entry's content is read from its audit
event by byte offset, so the time must not grow with the log's size (issue "The
memory tool"). Builds logs of 10 MB, 100 MB and 1 GB in a temp dir (one file
each, the worst case for a scan), with the recalled entry's event at the start,
the middle and the end, and times the memory tool's ``recall entry N`` (the
whole path: store lookup, audit read by offset, paging). For contrast it times
AuditLog.find, which scans.

    python benchmarks/memory_recall_latency.py [--sizes 10,100,1000] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401

FILLER = "x" * (256 * 1024)  # bytes of each filler event's payload
OUTPUT = "\n".join(f"{i}\tline {i} of the recalled output" for i in range(1, 400))


async def build(root: Path, size_mb: int):
    from wisp.core.audit import AuditLog
    from wisp.core.database import open_store

    audit = AuditLog(root / "audit", max_bytes=2 * 1024 ** 3, keep=2)
    store = await open_store(root / "wisp.db")
    conv = (await store.create_conversation(str(root))).id
    target = size_mb * 1024 * 1024
    entries: dict[str, int] = {}
    written = 0
    turn = None
    for place, at in (("start", 0.0), ("middle", 0.5), ("end", 1.0)):
        while written < target * at:
            ref = audit.write("notice", {"text": FILLER}, conversation=conv)
            written += len(FILLER) + 200
        turn = await store.begin_turn(conv)
        call = await store.add_entry(conv, turn.id, "tool_call", '{"path": "a.txt"}', tool_name="read_file",
                                     tool_call_id=f"c-{place}", arguments={"path": "a.txt"})
        entry = await store.add_entry(conv, turn.id, "tool_result", OUTPUT, tool_name="read_file",
                                      tool_call_id=f"c-{place}")
        ref = audit.write("tool.result", {"content": OUTPUT}, conversation=conv, turn=turn.number, entry=entry.number)
        await store.set_entry_audit(entry.id, ref)
        await store.end_turn(turn.id, "done")
        entries[place] = entry.number
        written += len(OUTPUT) + 200
    size = sum(p.stat().st_size for p in (root / "audit").iterdir())
    return store, audit, conv, entries, size


async def measure(size_mb: int, keep: bool) -> None:
    from wisp.core.context.notes import ModelNotes
    from wisp.core.memory.verbs import MemoryBinding
    from wisp.core.tools import ToolContext
    from wisp.core.tools.registry import build_registry

    root = Path(tempfile.mkdtemp(prefix=f"wisp-recall-{size_mb}mb-"))
    try:
        t0 = time.perf_counter()
        store, audit, conv, entries, size = await build(root, size_mb)
        built = time.perf_counter() - t0
        binding = MemoryBinding(store, audit, ModelNotes.over(store, audit))
        tool = build_registry(["memory"], memory=binding).get("memory")
        turns = await store.count_turns(conv)
        ctx = ToolContext(workdir=root, config=None, conversation_id=conv, turn=turns + 1)
        parts = []
        for place, number in entries.items():
            times = []
            for _ in range(30):
                t = time.perf_counter()
                result = await tool.run({"request": f"recall entry {number}"}, ctx)
                times.append((time.perf_counter() - t) * 1000)
            assert "from the audit log" in result.content.splitlines()[0], result.content[:200]
            parts.append(f"{place} {statistics.median(times):.2f} ms")
        event_id = (await store.get_entry(conv, entries["middle"])).audit_event_id
        t = time.perf_counter()
        assert audit.find(event_id) is not None
        scan = (time.perf_counter() - t) * 1000
        print(f"audit log {size / 1024 ** 2:,.0f} MB (built in {built:.1f} s): recall entry median "
              + ", ".join(parts) + f"; a scan (AuditLog.find) of the middle event: {scan:,.0f} ms")
        audit.close()
        await store.close()
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="log sizes in MB, comma-separated")
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs")
    args = parser.parse_args()
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        asyncio.run(measure(size, args.keep))


if __name__ == "__main__":
    main()
