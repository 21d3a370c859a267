"""Refinement: the model turns batches of new exchanges into memories.

Rules (issue "Episodic memory across conversations", "Refinement"; the
reference ``enso-episodic-memory.txt``, "How it works" and "What gets
captured"):

- A run (``wisp memory refine`` once, for cron; every
  :data:`REFINE_INTERVAL_S` while the TUI runs) reads batches of exchanges
  awaiting refinement, oldest request first. A batch holds at most
  :data:`MAX_BATCH_EXCHANGES` (40) exchanges, an excerpt of at most
  :data:`EXCERPT_BYTES` (4 KiB) of each request and of each reply, and at
  most :data:`MAX_BATCH_BYTES` (48 KiB) in all; a smaller context window
  shrinks those (:func:`batch_limits`). Only exchanges of one group are
  batched together: same workspace, conversation, transport, channel and
  thread (:func:`group_key`). One run can refine several groups, one batch
  each, without merging their context.
- The model is a side call of the conversation's model through the
  configured endpoint, with thinking off and no tools. It writes concise
  summaries of requests, decisions, reported outcomes, corrections and
  unfinished work (routine acknowledgements need none), each at most
  :data:`MAX_SUMMARY_CHARS` (2,000) characters and linked to its source
  exchanges, in the format :data:`INSTRUCTIONS` shows and
  :func:`parse_reply` reads.
- The side call asks for the memories' shape (:data:`MEMORY_SCHEMA`) with
  the endpoint's own constrained decoding (issue "Compaction you can see and
  trust", "Structured side calls"); a reply in the older ``MEMORY … END``
  block format is read too (:func:`read_memories`).
- Nothing is dropped silently (same issue): a non-empty reply that is not
  the format becomes one memory of the batch, with its sources, marked
  unstructured; an empty or ``NONE`` reply for a batch whose requests state
  a decision, a correction or unfinished work (:func:`batch_statements`) is
  asked once more with a stricter prompt quoting them
  (:data:`STRICT_SCHEMA` wants at least one memory) before it counts as
  nothing. Asked twice and keeping nothing, the batch keeps what the person
  stated, in their words. A decision, a correction or a request to remember
  that the model's memories leave out (:func:`names_statement`) is kept
  beside them the same way. Each batch records how it fell back
  (``episode_batches.fallback``), which ``wisp memory status`` counts.
- A failed batch (an endpoint error) releases its exchanges for a later
  run; a recorded batch is never processed again; with nothing new, no
  endpoint is resolved and no model call is made.
- The lock is in the database: a refiner claims a batch by pointing its
  exchanges at a ``claimed`` row of ``episode_batches`` inside one
  ``BEGIN IMMEDIATE`` transaction, so two processes never refine the same
  exchanges. A claim whose process is gone (same host) or older than
  :data:`CLAIM_LEASE` is released by the next refiner.
- ``memory.enabled`` false stops refinement (nothing is read or written).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..processes import tag_alive, this_process
from ..sidecall import Message, SideCall, SideCallError, SideCallInfo, read_json_object
from ..statements import stated
from ..streamed import recover_open_turns
from .capture import finalize_pending, memory_enabled
from .dates import format_local, memory_timezone
from .ids import format_memory_id, next_memory_number
from ..clock import utc_text

__all__ = [
    "REFINE_INTERVAL_S", "MAX_BATCH_EXCHANGES", "EXCERPT_BYTES", "MAX_BATCH_BYTES", "MAX_SUMMARY_CHARS",
    "CLAIM_LEASE", "INSTRUCTIONS", "RefineFormatError", "Candidate", "Batch", "ParsedMemory",
    "RefineReport", "group_key", "excerpt", "batch_limits", "plan_batch", "build_messages",
    "parse_reply", "read_memories", "batch_statements", "strict_messages", "MEMORY_SCHEMA", "STRICT_SCHEMA",
    "Refiner", "refine_with", "read_status",
]

#: How often the TUI runs refinement (seconds): the reference's 15 minutes.
REFINE_INTERVAL_S = 15 * 60
MAX_BATCH_EXCHANGES = 40
#: Cap of the excerpt of one request or one reply, bytes of UTF-8.
EXCERPT_BYTES = 4 * 1024
#: Cap of a batch's exchanges as sent (headers and excerpts), bytes of UTF-8.
MAX_BATCH_BYTES = 48 * 1024
MAX_SUMMARY_CHARS = 2000
#: A claim older than this is abandoned whatever its owner (seconds of a
#: model call are counted by the endpoint's own timeouts, far below this).
CLAIM_LEASE = timedelta(minutes=30)
#: Batches one run refines at most (a run for cron must end).
MAX_BATCHES_PER_RUN = 50
#: Tokens the model may write for one batch.
REPLY_MAX_TOKENS = 2048
#: Job rows kept for ``status`` (older ones are pruned).
JOBS_KEPT = 200
#: Candidates read per claim (metadata and excerpts only).
_SCAN = 400

INSTRUCTIONS = """\
You write episodic memories: short notes of what happened in a conversation, so that it can be recalled later.
You get numbered exchanges [1], [2], ... from one conversation. Each has the person's REQUEST and the assistant's REPLY.

Keep what is worth remembering: what the person asked for, decisions and agreements, outcomes the assistant reported (write "reported", it is not proof), corrections, and unfinished or failed work. Routine acknowledgements, greetings and small talk need no memory.

Answer with a JSON object holding a "memories" list. Each memory has "sources" (the numbers of the exchanges it comes from) and "summary" (what was asked, decided, reported, corrected or left unfinished, in a few plain sentences, under 1,500 characters). Write one memory per separate topic. When nothing is worth keeping, the list is empty."""

#: The shape refinement asks for (issue "Compaction you can see and trust", "Structured side
#: calls"); the lists are bounded so a small model under a grammar cannot loop on them.
MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array", "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {"sources": {"type": "array", "items": {"type": "integer"}, "maxItems": 40},
                               "summary": {"type": "string"}},
                "required": ["sources", "summary"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["memories"],
    "additionalProperties": False,
}
#: The stricter retry's shape: at least one memory, with words in it.
STRICT_SCHEMA: dict[str, Any] = {
    **MEMORY_SCHEMA,
    "properties": {"memories": {**MEMORY_SCHEMA["properties"]["memories"], "minItems": 1,
                                "items": {**MEMORY_SCHEMA["properties"]["memories"]["items"],
                                          "properties": {"sources": {"type": "array", "items": {"type": "integer"},
                                                                     "maxItems": 40},
                                                         "summary": {"type": "string", "minLength": 1}}}}},
}
#: Statements the stricter retry quotes at most.
MAX_QUOTED = 6


class RefineFormatError(ValueError):
    """The model's reply held no memories in a format wisp reads (a JSON
    ``memories`` list, ``MEMORY`` blocks) and no ``NONE``."""


def _now_dt() -> datetime:
    return datetime.now(timezone.utc)


def _now() -> str:
    return utc_text(_now_dt())


# --- batches --------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """An exchange awaiting refinement, as a batch sees it: ``request`` and
    ``reply`` hold at most a little over an excerpt of the stored text;
    ``request_bytes``/``reply_bytes`` are the original sizes."""

    id: int
    workspace: str
    conversation_id: int | None
    transport: str
    channel: str
    thread: str
    requested_at: str
    outcome: str
    request: str
    request_bytes: int
    reply: str
    reply_bytes: int
    error: str | None = None


def group_key(ex: Any) -> tuple[str, int | None, str, str, str]:
    """The group an exchange belongs to: ``(workspace, conversation,
    transport, channel, thread)``. Only exchanges with the same key are
    refined together (issue, "Refinement")."""
    return (ex.workspace, ex.conversation_id, ex.transport, ex.channel, ex.thread or "")


def excerpt(text: str, total_bytes: int | None = None, limit: int = EXCERPT_BYTES) -> str:
    """At most ``limit`` bytes of UTF-8 of ``text`` (mark included), cut on a
    character boundary and marked when shorter than the original, whose
    size is ``total_bytes`` (default: the size of ``text``)."""
    data = (text or "").encode("utf-8", "replace")
    total = max(int(total_bytes or 0), len(data))
    if total <= limit and len(data) <= limit:
        return text or ""
    mark = f"\n[… excerpt: the first {{kept}} of {total} bytes]"
    room = max(0, limit - len(mark.format(kept=limit).encode("utf-8")))
    kept = data[:room].decode("utf-8", "ignore")
    return kept + mark.format(kept=len(kept.encode("utf-8")))


def batch_limits(context_window: int | None) -> tuple[int, int]:
    """``(max_batch_bytes, excerpt_bytes)`` for a model with that context
    window (tokens; ``None`` for unknown): the reference's 48 KiB and 4 KiB,
    shrunk so that the batch, the instructions and the reply fit the
    window, at about 3 bytes a token."""
    if not context_window:
        return MAX_BATCH_BYTES, EXCERPT_BYTES
    reply = min(REPLY_MAX_TOKENS, max(256, context_window // 4))
    room = (context_window - reply - 600) * 3
    total = max(2048, min(MAX_BATCH_BYTES, room))
    each = max(512, min(EXCERPT_BYTES, total // 2 - 256))
    return total, each


def format_block(n: int, c: Candidate, tz: Any, excerpt_bytes: int = EXCERPT_BYTES) -> str:
    """Exchange ``[n]`` as the model reads it."""
    head = f"[{n}] {format_local(c.requested_at, tz, weekday=True)} · {c.outcome}"
    if c.error and c.outcome != "completed":
        head += f" ({' '.join(c.error.split())[:200]})"
    return (f"{head}\nREQUEST:\n{excerpt(c.request, c.request_bytes, excerpt_bytes)}\n"
            f"REPLY:\n{excerpt(c.reply, c.reply_bytes, excerpt_bytes) or '(no reply)'}\n")


def plan_batch(candidates: list[Candidate], tz: Any, *, max_exchanges: int = MAX_BATCH_EXCHANGES,
               max_bytes: int = MAX_BATCH_BYTES, excerpt_bytes: int = EXCERPT_BYTES,
               skip: set[tuple] | frozenset = frozenset()) -> list[Candidate]:
    """The next batch from ``candidates`` (oldest request first): the group
    of the first candidate whose group is not in ``skip``, then that group's
    candidates in order while the batch stays within ``max_exchanges`` and
    ``max_bytes`` (its blocks as :func:`format_block` writes them). The first
    exchange always fits (its excerpts are shrunk if need be). Pure."""
    key = next((group_key(c) for c in candidates if group_key(c) not in skip), None)
    if key is None:
        return []
    chosen: list[Candidate] = []
    used = 0
    for c in candidates:
        if group_key(c) != key:
            continue
        size = len(format_block(len(chosen) + 1, c, tz, excerpt_bytes).encode("utf-8"))
        if chosen and used + size > max_bytes:
            break
        chosen.append(c)
        used += size
        if len(chosen) >= max_exchanges:
            break
    return chosen


def build_messages(batch: list[Candidate], tz: Any, excerpt_bytes: int = EXCERPT_BYTES) -> list[Message]:
    """The side call's messages: the instructions, then the batch."""
    first = batch[0]
    origin = (f"workspace {first.workspace} · transport {first.transport} · channel {first.channel}"
              + (f" · thread {first.thread}" if first.thread else ""))
    blocks = "\n".join(format_block(i, c, tz, excerpt_bytes) for i, c in enumerate(batch, 1))
    user = (f"Conversation: {origin}\nExchanges {1 if len(batch) == 1 else f'1 to {len(batch)}'}, "
            f"oldest first:\n\n{blocks}\nWrite the memories now, in the format above (or NONE).")
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": user}]


# --- reading the model's reply ------------------------------------------------------


@dataclass
class ParsedMemory:
    """One summary from the model: its text (capped) and the 1-based numbers
    of its source exchanges within the batch; ``unstructured`` when it is
    the model's answer as it came (not in the format asked for)."""

    summary: str
    sources: list[int]
    unstructured: bool = False


_HEADER = re.compile(r"^[\s>*_#`~\-•]*(?:memory|memories|mem)\b(?!-\d)[\s*_`]*(.*)$", re.IGNORECASE)
_END = re.compile(r"^[\s>*_#`~\-]*(?:end(?:\s+(?:of\s+)?memory)?|</?memory>)[\s*_`.]*$", re.IGNORECASE)
_NONE = re.compile(r"^[\s>*_#`\-\"']*(?:none|nothing(?: (?:worth|to)[\w\s]*)?|no memor(?:y|ies)[\w\s]*)[\s*_`.!\"']*$",
                   re.IGNORECASE)
_SOURCES_LINE = re.compile(r"^[\s*_\-]*(?:sources?|exchanges?|from)\s*[:=]\s*(.*)$", re.IGNORECASE)
_SPEC = re.compile(
    r"^((?:\s*(?:\[|\(|#|,|;|&|\+|/|\band\b|\bexchanges?\b|\bsources?\b|\bfrom\b|:(?=\s*[\[#\d])|"
    r"\d+\s*(?:-|–|—|\bto\b)\s*\d+|\d+|\]|\)))*)\s*[:.\-–—)]?\s*(.*)$",
    re.IGNORECASE)
_LABEL = re.compile(r"^\s*(?:summary|note|memory text|text)\s*:\s*", re.IGNORECASE)


def _numbers(spec: str) -> list[int]:
    out: list[int] = []
    for a, b, single in re.findall(r"(\d+)\s*(?:-|–|—|\bto\b)\s*(\d+)|(\d+)", spec):
        if single:
            out.append(int(single))
        else:
            lo, hi = int(a), int(b)
            if lo <= hi and hi - lo <= 200:
                out.extend(range(lo, hi + 1))
    return out


def cap_summary(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """``text`` cut to ``limit`` characters (on a word where it can), ``…`` marking the cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + "…"


def parse_reply(text: str, n: int) -> list[ParsedMemory]:
    """Read the model's reply for a batch of ``n`` exchanges.

    Takes ``MEMORY <numbers>`` headers (case, Markdown decoration, ``:``,
    brackets, ranges like ``1-3`` and text on the header line are
    tolerated), each body running to ``END``, the next header or the end
    of the reply (a reply cut at the output limit keeps its blocks). A
    ``Sources: 1,2`` line inside a block names its sources when the header
    did not. Numbers outside 1–``n`` are dropped; a block left with none is
    linked to the whole batch (all of one group). Empty and duplicate
    summaries are dropped; each is capped at :data:`MAX_SUMMARY_CHARS`.

    Returns ``[]`` for ``NONE``. Raises :class:`RefineFormatError` when the
    reply holds neither a block nor ``NONE``, so the batch is retried later.
    """
    blocks: list[tuple[list[int], list[str]]] = []
    current: tuple[list[int], list[str]] | None = None
    saw_none = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if line.strip().startswith("```"):
            continue
        m = _HEADER.match(line)
        if m and (current is None or _looks_like_spec(m.group(1)) or not m.group(1).strip(" *_:`~.")):
            rest = m.group(1)
            spec = _SPEC.match(rest)
            nums = _numbers(spec.group(1)) if spec else []
            first = (spec.group(2) if spec else rest).strip().strip("*_`~").strip()
            if not re.search(r"\w", first):
                first = ""
            current = (nums, [first] if first else [])
            blocks.append(current)
            continue
        if _END.match(line):
            current = None
            continue
        if current is None:
            if _NONE.match(line):
                saw_none = True
            continue
        sm = _SOURCES_LINE.match(line)
        if sm and not current[0]:
            current[0].extend(_numbers(sm.group(1)))
            continue
        current[1].append(line)
    out: list[ParsedMemory] = []
    seen: set[str] = set()
    for nums, lines in blocks:
        body = "\n".join(lines).strip()
        body = _LABEL.sub("", body, count=1).strip()
        if not body or _NONE.match(body) or not _WORDY.search(body):
            if _NONE.match(body or "x"):
                saw_none = True
            continue
        valid = sorted({k for k in nums if 1 <= k <= n}) or list(range(1, n + 1))
        summary = cap_summary(body)
        if summary in seen:
            continue
        seen.add(summary)
        out.append(ParsedMemory(summary, valid))
    if not out and not saw_none:
        if blocks:
            return []  # blocks present but all empty: the model found nothing to keep
        raise RefineFormatError("the model's reply held no MEMORY block and no NONE; "
                                f"it began: {' '.join((text or '').split())[:120]!r}")
    return out


#: When the model, asked twice, keeps nothing of exchanges that state a decision, a correction or
#: unfinished work, wisp keeps at most this many of those statements as memories, in the person's words.
MAX_STATED_KEPT = 3
#: A memory says something in words: a summary without a word of three letters (``] }}``, the tail of
#: a small model's broken JSON) is no memory.
_WORDY = re.compile(r"[^\W\d_]{3,}")


def _looks_like_spec(rest: str) -> bool:
    return bool(re.match(r"^\s*[\[(#:]*\s*\d", rest or ""))


def _json_memories(obj: dict[str, Any], n: int) -> list[ParsedMemory] | None:
    """The memories of a :data:`MEMORY_SCHEMA` object, or ``None`` when it is not one."""
    items = obj.get("memories")
    if items is None:
        return None
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return None
    out: list[ParsedMemory] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            item = {"summary": item}
        if not isinstance(item, dict):
            continue
        body = item.get("summary") or item.get("text") or item.get("note") or ""
        body = " ".join(str(body).split()) if isinstance(body, (str, int, float)) else ""
        if not body or _NONE.match(body) or not _WORDY.search(body):
            continue
        raw = item.get("sources")
        raw = raw if isinstance(raw, list) else [raw]
        nums = []
        for v in raw:
            if isinstance(v, bool):
                continue
            if isinstance(v, int):
                nums.append(v)
            elif isinstance(v, (str, float)):
                nums.extend(_numbers(str(v)))
        valid = sorted({k for k in nums if 1 <= k <= n}) or list(range(1, n + 1))
        summary = cap_summary(body)
        if summary in seen:
            continue
        seen.add(summary)
        out.append(ParsedMemory(summary, valid))
    return out


def read_memories(text: str, n: int) -> list[ParsedMemory]:
    """Read the model's reply for a batch of ``n`` exchanges: a
    :data:`MEMORY_SCHEMA` object (read leniently: a reply cut short keeps the
    memories it finished), else the ``MEMORY`` block format
    (:func:`parse_reply`). Returns ``[]`` for an empty list or ``NONE``.
    Raises :class:`RefineFormatError` for a reply in neither form (an empty
    reply included)."""
    obj = read_json_object(text or "")
    if obj is not None:
        found = _json_memories(obj, n)
        if found is not None:
            return found
    return parse_reply(text, n)


def person_statements(batch: list[Candidate]) -> list[tuple[int, str, str]]:
    """What the batch's requests state in the person's words: ``(exchange
    number, kind, sentence)`` for each decision, correction or unfinished
    work (:func:`wisp.core.statements.stated`), a sentence cut to 200
    characters."""
    return [(i, kind, sentence if len(sentence) <= 200 else sentence[:199].rstrip() + "…")
            for i, c in enumerate(batch, 1) for kind, sentence in stated(c.request)]


def batch_statements(batch: list[Candidate]) -> list[tuple[int, str, str]]:
    """What the batch states that must not be lost: the person's statements
    (:func:`person_statements`), and for each exchange that did not complete
    ``(number, "unfinished", "the exchange ended <outcome>")``."""
    out = person_statements(batch)
    out += [(i, "unfinished", f"the exchange ended {c.outcome}")
            for i, c in enumerate(batch, 1) if c.outcome and c.outcome != "completed"]
    return sorted(out, key=lambda t: t[0])


#: The words that mark a sentence as a statement ("we decided", "please remember that") say
#: nothing of what was stated: a memory need not repeat them to name it.
_MARKERS = re.compile(r"\b(?:please|that|this)\b", re.IGNORECASE)


def names_statement(sentence: str, memories: list[ParsedMemory]) -> bool:
    """Whether ``memories`` name what ``sentence`` states: at least half of
    the sentence's content words (:func:`wisp.core.context.support.support`,
    leaving out the words that only mark it as a decision, a correction or
    a request to remember) occur in the memories' summaries. A sentence of
    no such words is named by any memory."""
    from ..context.support import support
    from ..statements import CORRECTION, DECISION, REMEMBER, UNFINISHED

    what = sentence
    for pattern in (DECISION, CORRECTION, UNFINISHED, REMEMBER, _MARKERS):
        what = pattern.sub(" ", what)
    counted = support(what, "\n".join(m.summary for m in memories))
    return counted.words == 0 or counted.found * 2 >= counted.words


def plainly_stated(sentence: str) -> bool:
    """Whether ``sentence`` says in so many words that something was decided,
    is to be remembered, or was wrong (:data:`~wisp.core.statements.DECIDED`,
    ``REMEMBER``, ``CORRECTION``); a "should" or "always" of ordinary prose is
    not enough to be kept beside the model's memories."""
    from ..statements import CORRECTION, DECIDED, REMEMBER

    return any(p.search(sentence) for p in (DECIDED, REMEMBER, CORRECTION))


def stated_memories(statements: list[tuple[int, str, str]], limit: int) -> list[ParsedMemory]:
    """At most ``limit`` memories holding ``statements`` as the person said
    them, each linked to its exchange."""
    return [ParsedMemory(cap_summary(f'The person said: "{sentence}"'), [i]) for i, _, sentence in statements[:limit]]


def strict_messages(messages: list[Message], reply: str, statements: list[tuple[int, str, str]]) -> list[Message]:
    """The stricter retry: the first request, the model's empty answer, and
    a request that quotes what the exchanges state and asks for at least one
    memory of it."""
    kinds = sorted({k for _, k, _ in statements}, key=["decision", "correction", "unfinished"].index)
    words = {"decision": "a decision", "correction": "a correction", "unfinished": "unfinished work"}
    quoted = "; ".join(f'[{i}] "{sentence}"' for i, _, sentence in statements[:MAX_QUOTED])
    ask = (f"Your answer kept nothing, but these exchanges state {' and '.join(words[k] for k in kinds)}, which "
           f"must be remembered: {quoted}. Write at least one memory that says it in plain words, with the "
           "numbers of the exchanges it comes from.")
    return [*messages, {"role": "assistant", "content": reply or '{"memories": []}'},
            {"role": "user", "content": ask}]


# --- the database side ------------------------------------------------------------------


@dataclass
class Batch:
    """A claimed batch: its row ``id``, the ``candidates`` in it, its group
    ``key`` and the ``bytes`` of its blocks."""

    id: int
    candidates: list[Candidate]
    key: tuple
    bytes: int


def _owner_token() -> str:
    return f"{this_process()}:{uuid.uuid4().hex[:8]}"


def _owner_gone(owner: str) -> bool:
    """True when the claim's owner (``host:pid:suffix``) is a process of this host that has ended."""
    return tag_alive(owner) is False


async def _release_stale(db: Any, now: datetime) -> int:
    """Inside a write transaction: release claims whose owner is gone or
    whose lease ran out; returns how many."""
    cutoff = utc_text(now - CLAIM_LEASE)
    async with db.execute("SELECT id, owner, claimed_at FROM episode_batches WHERE state = 'claimed'") as cur:
        rows = list(await cur.fetchall())
    stale = [bid for bid, owner, claimed_at in rows if claimed_at < cutoff or _owner_gone(owner)]
    for bid in stale:
        await _fail(db, bid, "the refiner that claimed this batch is gone; released for a later run")
    return len(stale)


async def _fail(db: Any, batch_id: int, error: str) -> None:
    await db.execute("UPDATE episode_exchanges SET batch_id = NULL, attempts = attempts + 1, last_error = ?"
                     " WHERE batch_id = ?", (error[:500], batch_id))
    await db.execute("UPDATE episode_batches SET state = 'failed', ended_at = ?, error = ? WHERE id = ?",
                     (_now(), error[:1000], batch_id))


_CAND_SQL = (
    "SELECT id, workspace, conversation_id, transport, channel, thread, requested_at, outcome,"
    " substr(request, 1, ?), request_bytes, substr(reply, 1, ?), reply_bytes, error"
    " FROM episode_exchanges WHERE batch_id IS NULL AND outcome IS NOT NULL"
    " ORDER BY requested_at, id LIMIT ?"
)


async def claim_batch(store: Any, owner: str, job_id: int | None, tz: Any, *,
                      skip: set[tuple] | frozenset = frozenset(),
                      max_exchanges: int = MAX_BATCH_EXCHANGES, max_bytes: int = MAX_BATCH_BYTES,
                      excerpt_bytes: int = EXCERPT_BYTES) -> Batch | None:
    """Claim the next batch for ``owner`` (one ``BEGIN IMMEDIATE``
    transaction, so no other refiner can claim the same exchanges), after
    releasing stale claims. ``None`` when nothing awaits outside ``skip``."""
    chars = excerpt_bytes + 1
    async with store.transaction() as db:
        await _release_stale(db, _now_dt())
        async with db.execute(_CAND_SQL, (chars, chars, _SCAN)) as cur:
            rows = list(await cur.fetchall())
        cands = [Candidate(id=r[0], workspace=r[1], conversation_id=r[2], transport=r[3], channel=r[4],
                           thread=r[5] or "", requested_at=r[6], outcome=r[7], request=r[8] or "",
                           request_bytes=int(r[9] or 0), reply=r[10] or "", reply_bytes=int(r[11] or 0),
                           error=r[12]) for r in rows]
        chosen = plan_batch(cands, tz, max_exchanges=max_exchanges, max_bytes=max_bytes,
                            excerpt_bytes=excerpt_bytes, skip=skip)
        if not chosen:
            return None
        size = sum(len(format_block(i, c, tz, excerpt_bytes).encode("utf-8")) for i, c in enumerate(chosen, 1))
        cur = await db.execute(
            "INSERT INTO episode_batches (job_id, owner, state, claimed_at, exchanges, bytes)"
            " VALUES (?, ?, 'claimed', ?, ?, ?)", (job_id, owner, _now(), len(chosen), size))
        batch_id = cur.lastrowid
        marks = ",".join("?" * len(chosen))
        cur = await db.execute(f"UPDATE episode_exchanges SET batch_id = ? WHERE batch_id IS NULL AND id IN ({marks})",
                               (batch_id, *[c.id for c in chosen]))
        if cur.rowcount != len(chosen):  # cannot happen inside one immediate transaction; be safe
            raise RuntimeError("a batch's exchanges changed while it was claimed")
    return Batch(batch_id, chosen, group_key(chosen[0]), size)


async def release_batch(store: Any, batch: Batch, error: str) -> None:
    """Mark ``batch`` failed and give its exchanges back for a later run."""
    async with store.transaction() as db:
        await _fail(db, batch.id, error)


async def record_batch(store: Any, batch: Batch, owner: str, parsed: list[ParsedMemory],
                       model: str | None, fallback: str | None = None) -> list[int]:
    """Store the memories of a claimed batch and mark it recorded (never
    refined again); returns the new memory numbers. A memory's origin comes
    from its sources and its event time is its earliest source request;
    sources forgotten meanwhile are left out (a memory left with none is
    dropped). ``fallback`` is how the batch fell back (``unstructured``,
    ``retried``, ``retried-nothing``), or ``None``. Raises ``RuntimeError``
    if the claim was lost (it went stale and another refiner released it);
    nothing is written then."""
    numbers: list[int] = []
    now = _now()
    async with store.transaction() as db:
        async with db.execute("SELECT state, owner FROM episode_batches WHERE id = ?", (batch.id,)) as cur:
            row = await cur.fetchone()
        if row is None or row[0] != "claimed" or row[1] != owner:
            raise RuntimeError("this batch's claim was released before its memories were recorded")
        async with db.execute(
            "SELECT id, requested_at, finished_at FROM episode_exchanges WHERE batch_id = ?", (batch.id,)) as cur:
            alive = {r[0]: (r[1], r[2]) for r in await cur.fetchall()}
        for pm in parsed:
            ids = [batch.candidates[k - 1].id for k in pm.sources if batch.candidates[k - 1].id in alive]
            if not ids:
                continue
            first = next(c for c in batch.candidates if c.id == ids[0])
            event_at = min(alive[i][0] for i in ids)
            ends = [alive[i][1] for i in ids if alive[i][1]]
            number = await next_memory_number(db)
            await db.execute(
                "INSERT INTO episode_memories (id, summary, workspace, transport, channel, thread,"
                " conversation_id, event_at, event_end, recorded_at, batch_id, model, unstructured)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (number, pm.summary, first.workspace, first.transport, first.channel, first.thread,
                 first.conversation_id, event_at, max(ends) if ends else None, now, batch.id, model,
                 1 if pm.unstructured else 0))
            await db.executemany("INSERT OR IGNORE INTO episode_memory_sources (memory_id, exchange_id) VALUES (?, ?)",
                                 [(number, i) for i in ids])
            numbers.append(number)
        await db.execute("UPDATE episode_batches SET state = 'recorded', ended_at = ?, memories = ?, fallback = ?"
                         " WHERE id = ?", (now, len(numbers), fallback, batch.id))
    return numbers


# --- a run -----------------------------------------------------------------------------


@dataclass
class RefineReport:
    """What one run did. ``outcome``: ``disabled``, ``nothing new``,
    ``completed``, ``partly failed`` or ``failed``; ``memories`` are the new
    references; ``errors`` one line per failed batch; ``model_calls`` counts
    side calls made; ``fallbacks`` counts the batches that fell back."""

    outcome: str
    job_id: int | None = None
    batches: int = 0
    failed_batches: int = 0
    exchanges: int = 0
    memories: list[str] = field(default_factory=list)
    model_calls: int = 0
    errors: list[str] = field(default_factory=list)
    model: str | None = None
    #: How many batches fell back, by how (``unstructured``, ``retried``, ``retried-nothing``, ``stated``,
    #: ``stated-beside``).
    fallbacks: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"outcome": self.outcome, "job": self.job_id, "batches": self.batches,
                "failed_batches": self.failed_batches, "exchanges": self.exchanges,
                "memories": list(self.memories), "model_calls": self.model_calls,
                "errors": list(self.errors), "model": self.model, "fallbacks": dict(self.fallbacks)}


#: Side-call errors after which a run stops trying (nothing answers).
_FATAL_KINDS = {"unreachable", "no_endpoint", "model_not_found"}


class Refiner:
    """One refinement run over ``store`` (a :class:`wisp.core.store.Store`).

    ``side_call`` is the :class:`~wisp.core.sidecall.SideCall` handed in
    (the session's, or one that connects from config on first use); its
    :meth:`~wisp.core.sidecall.SideCall.info` is asked once, lazily, when
    something awaits refinement (so a run with nothing new connects to no
    endpoint and makes no model call). ``trigger`` names who ran it
    (``cli``, ``tui``).
    """

    def __init__(self, store: Any, config: Any, side_call: SideCall, *,
                 trigger: str = "cli", max_batches: int = MAX_BATCHES_PER_RUN) -> None:
        self.store = store
        self.config = config
        self.side_call = side_call
        self.trigger = trigger
        self.max_batches = max_batches
        self.owner = _owner_token()
        self._info: SideCallInfo | None = None

    async def run(self) -> RefineReport:
        """Refine until nothing awaits (or :data:`MAX_BATCHES_PER_RUN`
        batches). Never raises for an endpoint or a reply problem: those fail
        their batch. Raises :class:`~wisp.core.episodes.dates.DateError` for
        a bad ``memory.timezone``."""
        if not memory_enabled(self.config):
            return RefineReport("disabled")
        tz = memory_timezone(self.config)
        # a dead process's open turns: stopped, and what they had streamed written to the audit log
        audit = _audit_log(self.config)
        try:
            await recover_open_turns(self.store, audit)
        finally:
            if audit is not None:
                audit.close()
        await finalize_pending(self.store)
        async with self.store.transaction() as db:
            await _release_stale(db, _now_dt())
        report = RefineReport("nothing new")
        report.job_id = await self._start_job()
        skip: set[tuple] = set()
        fatal: str | None = None
        try:
            while report.batches + report.failed_batches < self.max_batches:
                if self._info is None:
                    if not await _anything_awaiting(self.store):
                        break
                    try:
                        self._info = await self.side_call.info()
                        report.model = self._info.model
                    except SideCallError as exc:
                        fatal = f"no model endpoint for refinement: {' '.join(str(exc).split())[:300]}"
                        report.errors.append(fatal)
                        break
                max_bytes, each = batch_limits(self._info.context_window)
                batch = await claim_batch(self.store, self.owner, report.job_id, tz, skip=skip,
                                          max_bytes=max_bytes, excerpt_bytes=each)
                if batch is None:
                    break
                try:
                    numbers = await self._refine(batch, tz, each, report)
                except asyncio.CancelledError:
                    await asyncio.shield(release_batch(self.store, batch, "the run was stopped"))
                    raise
                except Exception as exc:  # an endpoint, a reply or a store problem fails the batch only
                    why = _why(exc)
                    await release_batch(self.store, batch, why)
                    report.failed_batches += 1
                    k = len(batch.candidates)
                    report.errors.append(f"{k} exchange{'s' if k != 1 else ''} of workspace {batch.key[0]}: {why}")
                    skip.add(batch.key)
                    if isinstance(exc, SideCallError) and exc.kind in _FATAL_KINDS:
                        fatal = why
                        break
                    continue
                report.batches += 1
                report.exchanges += len(batch.candidates)
                report.memories.extend(format_memory_id(n) for n in numbers)
        finally:
            if (report.failed_batches or fatal) and report.batches:
                report.outcome = "partly failed"
            elif report.failed_batches or fatal:
                report.outcome = "failed"
            elif report.batches:
                report.outcome = "completed"
            await asyncio.shield(self._end_job(report, fatal))
        return report

    async def _refine(self, batch: Batch, tz: Any, each: int, report: RefineReport) -> list[int]:
        """One batch: the side call, read as memories; nothing is dropped
        silently (see the module doc)."""
        messages = build_messages(batch.candidates, tz, each)
        window = self._info.context_window if self._info else None
        max_tokens = min(REPLY_MAX_TOKENS, max(256, (window or 8192) // 4))
        n = len(batch.candidates)
        report.model_calls += 1
        text = await self.side_call.complete(messages, max_tokens=max_tokens, schema=MEMORY_SCHEMA,
                                             temperature=0.2)
        parsed, fallback = _read_or_keep(text, n)
        parsed, dropped = supported_memories(parsed, batch.candidates)
        if dropped and not parsed:
            fallback = None  # every memory was about something else: as good as nothing
        if not parsed and fallback is None:
            statements = batch_statements(batch.candidates)
            if statements:  # an empty or NONE answer to exchanges that state something: ask once more
                report.model_calls += 1
                again = await self.side_call.complete(strict_messages(messages, text, statements),
                                                      max_tokens=max_tokens, schema=STRICT_SCHEMA, temperature=0.2)
                parsed, unstructured = _read_or_keep(again, n)
                parsed, _ = supported_memories(parsed, batch.candidates)
                fallback = "retried-nothing" if not parsed else ("unstructured" if unstructured else "retried")
                if not parsed:  # asked twice, the model kept nothing: what the person stated is kept as said
                    parsed = stated_memories(statements, MAX_STATED_KEPT)
                    fallback = "stated"
        if parsed and fallback != "stated":
            # the model's memories are about the exchanges, but may leave out what the person stated
            # (SmolLM2 kept "Read docs/part80.txt and name one word in it" of a launch day decided):
            # what no memory names is kept beside them, as said
            missing = [s for s in person_statements(batch.candidates)
                       if plainly_stated(s[2]) and not names_statement(s[2], parsed)]
            if missing:
                parsed = [*parsed, *stated_memories(missing, MAX_STATED_KEPT)]
                fallback = fallback or "stated-beside"
        if fallback is not None:
            report.fallbacks[fallback] = report.fallbacks.get(fallback, 0) + 1
        return await record_batch(self.store, batch, self.owner, parsed, self._info.model if self._info else None,
                                  fallback=fallback)

    async def _start_job(self) -> int:
        async with self.store.transaction() as db:
            cur = await db.execute("INSERT INTO episode_jobs (trigger, owner, started_at) VALUES (?, ?, ?)",
                                   (self.trigger, self.owner, _now()))
            job_id = cur.lastrowid
            await db.execute("DELETE FROM episode_jobs WHERE id <= ?", (job_id - JOBS_KEPT,))
        return int(job_id)

    async def _end_job(self, report: RefineReport, fatal: str | None) -> None:
        error = fatal or ("; ".join(report.errors)[:2000] if report.errors else None)
        async with self.store.transaction() as db:
            await db.execute(
                "UPDATE episode_jobs SET ended_at = ?, outcome = ?, model = ?, batches = ?, failed_batches = ?,"
                " exchanges = ?, memories = ?, model_calls = ?, error = ? WHERE id = ?",
                (_now(), report.outcome, report.model, report.batches, report.failed_batches, report.exchanges,
                 len(report.memories), report.model_calls, error, report.job_id))


def supported_memories(parsed: list[ParsedMemory], batch: list[Candidate]) -> tuple[list[ParsedMemory], int]:
    """The memories of ``parsed`` that their source exchanges support (the
    running summary's rule, :func:`wisp.core.context.support.support`: at
    least half of a memory's content words occur in the exchanges it names),
    and how many were dropped. SmolLM2 has answered a batch about a launch
    date with "How to turn a website on and off in 1 minute". A memory kept
    as the model's answer as it came (unstructured) is judged the same way."""
    from ..context.support import support

    kept: list[ParsedMemory] = []
    for m in parsed:
        sources = [batch[i - 1] for i in m.sources if 1 <= i <= len(batch)] or batch
        text = "\n".join(f"{c.request}\n{c.reply}" for c in sources)
        if support(m.summary, text).supported:
            kept.append(m)
    return kept, len(parsed) - len(kept)


def _read_or_keep(text: str, n: int) -> tuple[list[ParsedMemory], str | None]:
    """The memories of a reply (:func:`read_memories`) and ``None``; or, for
    a non-empty reply in no format wisp reads, one memory of the whole batch
    holding the reply as it came, marked unstructured, and
    ``"unstructured"``; ``([], None)`` for an empty reply."""
    try:
        return read_memories(text, n), None
    except RefineFormatError:
        body = (text or "").strip()
        if not body:
            return [], None
        return [ParsedMemory(cap_summary(body), list(range(1, n + 1)), unstructured=True)], "unstructured"


async def _anything_awaiting(store: Any) -> bool:
    async with store.db.execute(
            "SELECT 1 FROM episode_exchanges WHERE batch_id IS NULL AND outcome IS NOT NULL LIMIT 1") as cur:
        return await cur.fetchone() is not None


def _audit_log(config: Any) -> Any:
    """The audit log ``config`` names (a :class:`wisp.core.audit.AuditLog`),
    or ``None`` for a config that names none."""
    directory = getattr(config, "audit_dir", None)
    if directory is None:
        return None
    from ..audit import AuditLog

    return AuditLog(directory, enabled=bool(config.get("audit.enabled")),
                    max_bytes=int(config.get("audit.max_bytes")), keep=int(config.get("audit.keep")))


def _why(exc: BaseException) -> str:
    if isinstance(exc, SideCallError):
        return f"endpoint error ({exc.kind}): {' '.join(str(exc).split())[:300]}"
    if isinstance(exc, RefineFormatError):
        return str(exc)
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


# --- entry points ----------------------------------------------------------------------------


async def refine_with(store: Any, config: Any, side_call: SideCall, *, trigger: str) -> RefineReport | None:
    """One refinement run through ``side_call`` (``wisp memory refine`` hands
    in one that connects from config on first use; the TUI's timer hands in
    its session's). With ``trigger`` ``tui`` it never raises (a problem is
    reported in the job's row, and the exchanges wait for the next run) and
    returns ``None`` on an unexpected failure."""
    if trigger != "tui":
        return await Refiner(store, config, side_call, trigger=trigger).run()
    try:
        return await Refiner(store, config, side_call, trigger=trigger).run()
    except asyncio.CancelledError:
        raise
    except Exception:
        return None


async def read_status(db: Any) -> dict[str, Any]:
    """Counts for ``wisp memory status``: ``memories``, ``exchanges``,
    ``awaiting`` (ready for refinement), ``pending`` (their turn still
    runs), ``in_progress`` (claimed by a running refiner), ``retrying``
    (awaiting after a failed attempt), ``last_job`` (a dict, or ``None``),
    ``last_recorded`` (UTC text or ``None``), ``next_number``, ``fallbacks``
    (batches that fell back, by how: ``unstructured``, ``retried``,
    ``retried-nothing``), ``fell_back`` (their total) and ``unstructured``
    (memories kept as the model's answer came)."""
    async def one(sql: str) -> Any:
        async with db.execute(sql) as cur:
            return await cur.fetchone()

    memories = (await one("SELECT COUNT(*), MAX(recorded_at) FROM episode_memories"))
    ex = await one(
        "SELECT COUNT(*),"
        " SUM(CASE WHEN batch_id IS NULL AND outcome IS NOT NULL THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN outcome IS NULL THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN batch_id IS NULL AND outcome IS NOT NULL AND attempts > 0 THEN 1 ELSE 0 END)"
        " FROM episode_exchanges")
    claimed = await one("SELECT COUNT(*) FROM episode_exchanges x JOIN episode_batches b ON b.id = x.batch_id"
                        " WHERE b.state = 'claimed'")
    job = await one("SELECT id, trigger, started_at, ended_at, outcome, model, batches, failed_batches,"
                    " exchanges, memories, model_calls, error FROM episode_jobs ORDER BY id DESC LIMIT 1")
    counter = await one("SELECT value FROM episode_counters WHERE name = 'memory'")
    async with db.execute("SELECT fallback, COUNT(*) FROM episode_batches WHERE fallback IS NOT NULL"
                          " GROUP BY fallback") as cur:
        fallbacks = {str(r[0]): int(r[1]) for r in await cur.fetchall()}
    unstructured = (await one("SELECT COUNT(*) FROM episode_memories WHERE unstructured = 1"))[0]
    last_job = None
    if job:
        keys = ("id", "trigger", "started_at", "ended_at", "outcome", "model", "batches", "failed_batches",
                "exchanges", "memories", "model_calls", "error")
        last_job = dict(zip(keys, job))
    return {
        "memories": int(memories[0] or 0), "last_recorded": memories[1],
        "exchanges": int(ex[0] or 0), "awaiting": int(ex[1] or 0), "pending": int(ex[2] or 0),
        "retrying": int(ex[3] or 0), "in_progress": int(claimed[0] or 0),
        "last_job": last_job, "next_number": int(counter[0] or 0) + 1 if counter else 1,
        "fallbacks": fallbacks, "fell_back": sum(fallbacks.values()), "unstructured": int(unstructured or 0),
    }
