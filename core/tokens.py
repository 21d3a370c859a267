"""Token estimates without a tokenizer.

wisp counts tokens per layer before it sends a request, with a heuristic of
about four characters a token for English and code (the usual rule of thumb
for BPE tokenizers). The endpoint's reported prompt tokens calibrate it
later (issue "Layered context").
"""

from __future__ import annotations

import json
from typing import Any

CHARS_PER_TOKEN = 4.0
#: The context window (tokens) assumed when neither config nor the endpoint says (issue
#: "wisp runs end to end"); the one place this default lives.
DEFAULT_CONTEXT_WINDOW = 4096
MESSAGE_OVERHEAD = 4  # tokens of role markers and separators per message


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Estimated tokens in ``text`` (at least 1 for non-empty text)."""
    if not text:
        return 0
    return max(1, round(len(text) / chars_per_token))


def estimate_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                      chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Estimated prompt tokens of a request: every message's content, tool calls
    and per-message overhead, plus the tool schemas as JSON."""
    total = 0
    for m in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(str(m.get("content") or ""), chars_per_token)
        for call in m.get("tool_calls") or []:
            total += estimate_tokens(json.dumps(call, ensure_ascii=False), chars_per_token)
    if tools:
        total += estimate_tokens(json.dumps(tools, ensure_ascii=False), chars_per_token)
    return total


def window_from(configured: int | None, reported: int | None = None,
                last_seen: int | None = None) -> tuple[int, str]:
    """The context window (tokens) and where it came from, the one place
    this is decided (issue "One core, built once", "window resolution"):
    config ``model.context_window`` (``configured``), else what the
    connected endpoint reported (``reported``: the embedded server's
    ``n_ctx``, Ollama's ``/api/show``), else the last window seen for the
    model (``last_seen``, kept with its calibration, so ``wisp inspect
    context`` works without asking the endpoint), else
    :data:`DEFAULT_CONTEXT_WINDOW`. Sources are ``config
    model.context_window``, ``the endpoint``, ``last seen for this model``
    and ``default``."""
    for value, source in ((configured, "config model.context_window"), (reported, "the endpoint"),
                          (last_seen, "last seen for this model")):
        if value:
            return int(value), source
    return DEFAULT_CONTEXT_WINDOW, "default"
