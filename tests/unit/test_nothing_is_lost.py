"""Nothing is lost, in one process (issue "Nothing runs, leaks, hangs or is lost that shouldn't
be", "Nothing is lost"): streamed text is written as it arrives and kept after a crash, marked; a
turn claims its conversation atomically. Cancelled store writes: test_store_cancellation.py. The
real-process trials (kill -9 at random moments, two `wisp ask --continue` at the same instant) are
in test_nothing_is_lost_trials.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core import events as ev
from wisp.core.database import open_store
from wisp.core.session import Session, SessionOptions
from wisp.core.store import ConversationBusy, Store
from wisp.core.transcript import load_page, turn_events
from tests.support.fakes import reply, tool_call, trickled
from tests.support.home import write_config


async def poll(condition, limit_s: float = 10.0, what: str = "the condition"):
    """Await ``condition()`` (an async callable) until it is truthy; returns its value."""
    deadline = time.monotonic() + limit_s
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {limit_s} s")
        await asyncio.sleep(0.01)


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
async def store(tmp_path: Path):
    s = await open_store(tmp_path / "db" / "wisp.db")
    yield s
    await s.close()


# --- the atomic claim ---------------------------------------------------------------------------------


async def test_begin_turn_claims_the_conversation(store: Store) -> None:
    conv = await store.create_conversation("/w")
    mine = await store.begin_turn(conv.id)  # this process's own open turn does not block it
    await store.end_turn(mine.id, "done")
    held = await store.begin_turn(conv.id)
    host = socket.gethostname()
    for owner, busy in [(f"{host}:{os.getppid()}", True),     # a live other process
                        (f"{host}:{dead_pid()}", False),     # a process that died
                        (f"elsewhere.invalid:{os.getppid()}", False),  # another host
                        (None, False)]:
        await store.db.execute("UPDATE turns SET owner = ?, state = 'open' WHERE id = ?", (owner, held.id))
        if busy:
            with pytest.raises(ConversationBusy, match=f"process {os.getppid()}") as info:
                await store.begin_turn(conv.id)
            assert info.value.owner == owner and info.value.conversation_id == conv.id
            assert await store.count_turns(conv.id) == 2  # nothing was added
        else:
            extra = await store.begin_turn(conv.id)
            await store.end_turn(extra.id, "done")
        assert not store.db.in_transaction
