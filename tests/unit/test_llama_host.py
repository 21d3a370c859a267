"""Pieces of the embedded server's own process that need no model: its idle clock and
its log rotation (issue 10, "One embedded server, shared and fast")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.home import require_local
from wisp.core.model.llama_host import STATUS_PATH, Activity, ActivityMiddleware, rotate_log


async def test_requests_in_flight_keep_the_server_busy_and_status_is_not_use() -> None:
    activity = Activity()
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope.get("path") == "/slow":
            await release.wait()

    wrapped = ActivityMiddleware(app, activity)
    slow = asyncio.create_task(wrapped({"type": "http", "path": "/slow"}, None, None))
    await asyncio.sleep(0)
    assert activity.inflight == 1 and activity.idle_for() == 0.0  # a stream in progress is use
    await wrapped({"type": "http", "path": STATUS_PATH}, None, None)
    assert activity.requests == 1  # watching the server does not keep it alive
    release.set()
    await slow
    assert activity.inflight == 0 and activity.idle_for() >= 0.0
    before = activity.last
    await wrapped({"type": "lifespan"}, None, None)
    assert activity.last == before and activity.requests == 1


def test_the_log_is_rotated_in_place(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("x" * 50)
    assert rotate_log(log, 100, 3) is False
    for n in range(1, 6):
        with open(log, "a") as fh:  # the server writes with O_APPEND and keeps its file open
            fh.write(f"{n}" * 200)
        assert rotate_log(log, 100, 3) is True
        assert log.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log", "server.log.1", "server.log.2", "server.log.3"]
    assert (tmp_path / "server.log.1").read_text() == "5" * 200
    assert (tmp_path / "server.log.3").read_text() == "3" * 200
    assert rotate_log(tmp_path / "missing.log", 1, 3) is False


def test_the_prompt_cache_counts_the_logits_it_keeps_and_stays_within_its_bound() -> None:
    """An embedded server was killed for memory (7.2 GB): llama-cpp-python's RAM cache counted only
    llama.cpp's state, not the n_ctx × n_vocab logits each state keeps beside it."""
    require_local()  # llama-cpp-python's cache classes: the local extra (CI fails rather than skips)
    import numpy as np
    from llama_cpp.llama import LlamaState
    from llama_cpp.llama_cache import LlamaRAMCache

    from wisp.core.model.llama_host import bound_prompt_cache, state_bytes

    def state(n: int) -> LlamaState:
        return LlamaState(input_ids=np.zeros(n, dtype=np.intc), scores=np.zeros((64, 1000), dtype=np.single),
                          n_tokens=n, llama_state=b"x" * 1000, llama_state_size=1000, seed=0)

    one = state(10)
    assert state_bytes(one) == 1000 + 64 * 1000 * 4 + 10 * np.dtype(np.intc).itemsize
    bound_prompt_cache()
    cache = LlamaRAMCache(capacity_bytes=3 * state_bytes(one))
    for k in range(10):
        cache[[k, k + 1]] = state(10)
    assert len(cache.cache_state) == 3 and cache.cache_size <= 3 * state_bytes(one)
