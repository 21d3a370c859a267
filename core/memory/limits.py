"""The memory tool's numbers, in one place.

Sources: the reference document (wisp-memory-tool.txt: at most 48 chunks
for condense; the 12 notes a turn are counted in
:mod:`wisp.core.context.notes`, the task's 300 characters in
:mod:`wisp.core.context.facts`) and issue 4
("Pages fit a budget in tokens"). The page budget is wisp's own choice: a
quarter of the context window, within [:data:`PAGE_TOKENS_MIN`,
:data:`PAGE_TOKENS_MAX`], so a recalled page never crowds out the rest of a
small model's window.
"""

from __future__ import annotations

from ..tokens import DEFAULT_CONTEXT_WINDOW

#: condense reads at most this many chunks (reference, "condense").
MAX_CHUNKS = 48
#: Bounds of a recall page / summary / condense result (tokens).
PAGE_TOKENS_MIN = 300
PAGE_TOKENS_MAX = 2000
#: What one chunk's answer may cost (tokens, sent as max_tokens).
CHUNK_ANSWER_TOKENS = 256
#: The prompt around a chunk: instructions and the question (tokens, estimated).
CHUNK_PROMPT_OVERHEAD = 200
#: A line longer than this many characters is shown cut in a recall page.
MAX_LINE_CHARS = 4000


def page_budget(context_window: int | None) -> int:
    """Tokens one recall page, summary or condense result may use, for a
    model with ``context_window`` tokens (``None``: 4,096): a quarter of the
    window, at least 300 and at most 2,000."""
    window = int(context_window or DEFAULT_CONTEXT_WINDOW)
    return max(PAGE_TOKENS_MIN, min(PAGE_TOKENS_MAX, window // 4))


def chunk_budget(context_window: int | None) -> int:
    """Tokens of output text one condense chunk may carry (estimated at four
    characters a token): half of what is left of the window once the chunk's
    instructions and its answer are set aside, so a tokenizer that counts
    more tokens than the estimate still fits. At least 200."""
    window = int(context_window or DEFAULT_CONTEXT_WINDOW)
    return max(200, (window - CHUNK_ANSWER_TOKENS - CHUNK_PROMPT_OVERHEAD) // 2)
