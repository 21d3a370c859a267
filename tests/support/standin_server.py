"""A stand-in for a shared embedded server that has died, for the tests of what wisp says while it
starts again (no llama.cpp: the model's answers come from a fake OpenAI-compatible server)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from wisp.core.model.llama_host import INFO_NAME


class DeadSharedServer:
    """A shared embedded server that has died: :meth:`ensure` starts it again (here: waits until the
    test lets it) and then it serves at ``base_url`` (a fake OpenAI-compatible server)."""

    shared = True
    chat_format = None
    n_ctx = 2048
    trained_context_length = None

    def __init__(self, base_url: str, state_dir: Path) -> None:
        self.base_url = base_url
        self.model = "SmolLM2"
        self.state_dir = state_dir
        self.alive = False
        self.may_start = asyncio.Event()
        self.starts = 0

    @property
    def running(self) -> bool:
        return self.alive

    async def ensure(self, on_status=None) -> str:
        if not self.alive:
            self.starts += 1
            await self.may_start.wait()
            self.alive = True
            (self.state_dir / INFO_NAME).write_text(json.dumps({"base_url": self.base_url}))
        return self.base_url
