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


#: A page never takes less than this (tokens), however little room is left.
PAGE_TOKENS_FLOOR = 120
#: Tokens a page leaves free of the room left in the request (the model's next words, rounding).
ROOM_MARGIN = 64


def page_budget(context_window: int | None, room_left: int | None = None) -> int:
    """Tokens one recall page, summary or condense result may use, for a
    model with ``context_window`` tokens (``None``: 4,096): a quarter of the
    window, at least 300 and at most 2,000; and, when ``room_left`` (tokens
    the last composed request had left) is known, no more than that room
    less :data:`ROOM_MARGIN`, at least :data:`PAGE_TOKENS_FLOOR`, so that a
    recalled page fits a small window whole instead of being cut to fit it."""
    window = int(context_window or DEFAULT_CONTEXT_WINDOW)
    budget = max(PAGE_TOKENS_MIN, min(PAGE_TOKENS_MAX, window // 4))
    if room_left is not None:
        budget = max(PAGE_TOKENS_FLOOR, min(budget, room_left - ROOM_MARGIN))
    return budget


def chunk_budget(context_window: int | None) -> int:
    """Tokens of output text one condense chunk may carry (estimated at four
    characters a token): half of what is left of the window once the chunk's
    instructions and its answer are set aside, so a tokenizer that counts
    more tokens than the estimate still fits. At least 200."""
    window = int(context_window or DEFAULT_CONTEXT_WINDOW)
    return max(200, (window - CHUNK_ANSWER_TOKENS - CHUNK_PROMPT_OVERHEAD) // 2)
