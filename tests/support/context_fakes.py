"""A fake Ollama whose reported prompt tokens are counted as a tokenizer roughly would.

Chat requests are answered from the script as usual (FakeOllama); the
default reply reports prompt tokens as four characters a token (not words),
so that calibration sees counts near wisp's estimate. Side calls (the
running summary) do not come here: tests hand in a scripted side call
(:mod:`tests.support.sidecalls`).
"""

from __future__ import annotations

from typing import Any

from tests.support.fakes import FakeOllama


class CountingOllama(FakeOllama):
    """FakeOllama with prompt tokens counted at four characters a token."""

    def default_reply(self, body: Any) -> dict:
        entry = FakeOllama.default_reply(body)
        messages = body.get("messages", []) if isinstance(body, dict) else []
        chars = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
        entry["usage"] = {"prompt": max(1, chars // 4 + 4 * len(messages)), "completion": entry["usage"]["completion"]}
        return entry
