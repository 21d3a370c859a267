"""condense: a question answered from the whole of a stored output, by the conversation's own model.

Rules (wisp-memory-tool.txt, "condense"; issue 4):

- The output is cut into chunks of whole lines within the chunk budget
  (:func:`~.limits.chunk_budget`), at most :data:`~.limits.MAX_CHUNKS`; the
  result says when the output had more and which lines were not read.
- Each chunk is asked the question in a fresh side session of the same
  model: a side call (:class:`~wisp.core.sidecall.SideCall`) with no tools and thinking off
  (whatever the conversation chose), told to answer ``nothing here`` when
  the chunk has nothing for it. Its thinking, if any arrives, is dropped.
- The answers that say something are joined in order, each under the
  lines it came from; when they do not fit the result budget, the model is
  asked once more to combine them.
- The result names the question, the lines and chunks read, that the model
  wrote it (not an exact reader), and every chunk that failed, with why.
- With no model attached it says so and points at summarise.

A chunk that fails (the endpoint down, an HTTP error, a broken stream) is
counted and named; the others still count. Cancellation is never caught.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..tokens import chars_per_token, estimate_tokens
from ..sidecall import SideCall, SideCallError
from .limits import CHUNK_ANSWER_TOKENS, MAX_CHUNKS
from ..outputs import split_stored_lines

__all__ = ["Chunk", "CondenseResult", "chunk_lines", "condense", "NOTHING", "CHUNK_SYSTEM", "COMBINE_SYSTEM"]

#: What a chunk answers when it has nothing for the question.
NOTHING = "nothing here"
CHUNK_SYSTEM = (
    "You read one part of a longer tool output and answer a question about it, using only this part. "
    "Quote the exact lines that matter, with their line numbers. Be brief. "
    f"If this part has nothing that answers the question, reply exactly: {NOTHING}"
)
COMBINE_SYSTEM = (
    "You are given notes that answer one question, each taken from a different part of a long tool "
    "output, in order. Combine them into one short answer to the question. Keep line numbers. "
    "Do not add anything the notes do not say."
)
_NOTHING_RE = re.compile(r"^\W*(?:nothing here|nothing|none|n/?a|no relevant (?:information|lines?)|"
                         r"there is nothing[^.]*)\W*$", re.IGNORECASE)


@dataclass(frozen=True)
class Chunk:
    """Lines ``first``..``last`` (1-based) of the output, as ``text`` (numbered)."""

    index: int
    first: int
    last: int
    text: str


@dataclass
class CondenseResult:
    """What condense did: ``text`` (the tool's result), ``chunks_total``
    (chunks the output makes), ``chunks_read``, ``failed`` (``(index, first,
    last, why)`` per failed chunk), ``answered`` (chunks that said
    something), ``lines_read`` (``(first, last)``), ``combined`` (a
    combining call was made) and ``model``."""

    text: str
    chunks_total: int = 0
    chunks_read: int = 0
    failed: list[tuple[int, int, int, str]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    lines_read: tuple[int, int] = (0, 0)
    combined: bool = False
    model: str | None = None


def chunk_lines(lines: list[str], budget_tokens: int) -> list[Chunk]:
    """Cut ``lines`` into chunks of whole numbered lines within
    ``budget_tokens`` each (estimated; a line longer than a chunk is cut to
    fit), in order. Every line is in exactly one chunk."""
    budget = max(16, budget_tokens)
    chunks: list[Chunk] = []
    cur: list[str] = []
    used = 0
    first = 1
    for k, line in enumerate(lines, start=1):
        shown = f"{k}\t{line}"
        cost = estimate_tokens(shown) + 1
        if cost > budget:  # cut at this line's own characters a token, with room for the marker
            keep = max(16, int((budget - 12) * chars_per_token(shown)))
            shown = shown[:keep] + f"… [line {k} cut]"
            cost = estimate_tokens(shown) + 1
        if cur and used + cost > budget:
            chunks.append(Chunk(len(chunks) + 1, first, k - 1, "\n".join(cur)))
            cur, used, first = [], 0, k
        cur.append(shown)
        used += cost
    if cur:
        chunks.append(Chunk(len(chunks) + 1, first, len(lines), "\n".join(cur)))
    return chunks


def _says_nothing(answer: str) -> bool:
    text = answer.strip()
    return not text or bool(_NOTHING_RE.match(text)) or text.lower().startswith(NOTHING)


async def _ask(side_call: SideCall, system: str, user: str, max_tokens: int) -> str:
    """One side call: no tools, thinking off; the visible text of the reply."""
    return await side_call.complete([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                    max_tokens=max_tokens, temperature=0.0)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


async def condense(side_call: SideCall | None, text: str, question: str, *, label: str,
                   chunk_tokens: int, result_tokens: int, summarise_hint: str) -> CondenseResult:
    """Answer ``question`` from ``text`` (the stored output called ``label``,
    e.g. ``entry 7 (run_command output)``) with the conversation's own model,
    through ``side_call`` (a :class:`~wisp.core.sidecall.SideCall`; see the
    module doc). ``chunk_tokens``: budget of one chunk's output text;
    ``result_tokens``: budget of the result; ``summarise_hint``: the
    summarise request to name when there is no model. Never raises an
    side-call error."""
    no_model = CondenseResult(f"memory: no model is attached here to condense with; {summarise_hint} reads the "
                              "output with exact readers instead, at no model cost")
    if side_call is None:
        return no_model
    try:
        model = (await side_call.info()).model or "the model"
    except SideCallError:
        return no_model
    lines = split_stored_lines(text)
    if not lines:
        return CondenseResult(f"memory: {label} is empty; there is nothing to condense", model=model)
    chunks = chunk_lines(lines, chunk_tokens)
    read = chunks[:MAX_CHUNKS]
    result = CondenseResult("", chunks_total=len(chunks), chunks_read=len(read), model=model,
                            lines_read=(read[0].first, read[-1].last))
    answers: list[tuple[Chunk, str]] = []
    for chunk in read:
        user = (f"Question: {question}\n\nPart {chunk.index} of {len(chunks)}: lines {chunk.first}-{chunk.last} "
                f"of {len(lines)} of {label}:\n{chunk.text}\n\nQuestion again: {question}\n"
                f"Answer from this part only, or reply exactly: {NOTHING}")
        try:
            answer = await _ask(side_call, CHUNK_SYSTEM, user, CHUNK_ANSWER_TOKENS)
        except SideCallError as exc:
            result.failed.append((chunk.index, chunk.first, chunk.last, _why(exc)))
            continue
        except Exception as exc:  # a broken side call must not end the turn
            result.failed.append((chunk.index, chunk.first, chunk.last, _why(exc)))
            continue
        if not _says_nothing(answer):
            answers.append((chunk, answer))
            result.answered.append(chunk.index)
    head = [f'condensed by the model {model}, not by an exact reader: "{question}"',
            f"read: lines {result.lines_read[0]:,}–{result.lines_read[1]:,} of {len(lines):,} of {label}, "
            f"in {len(read)} chunk{'s' if len(read) != 1 else ''}; {len(answers)} said something, "
            f"{len(read) - len(answers) - len(result.failed)} said nothing here"]
    if len(chunks) > len(read):
        head.append(f"the output makes {len(chunks)} chunks and at most {MAX_CHUNKS} are read: lines "
                    f"{read[-1].last + 1:,}–{len(lines):,} were not read (condense asks about all of it only up to "
                    f"{MAX_CHUNKS} chunks; recall entry N from line {read[-1].last + 1} shows the rest)")
    if result.failed:
        shown = "; ".join(f"chunk {i} (lines {a}–{b}): {why}" for i, a, b, why in result.failed[:6])
        more = f"; +{len(result.failed) - 6} more" if len(result.failed) > 6 else ""
        head.append(f"{len(result.failed)} chunk{'s' if len(result.failed) != 1 else ''} failed and "
                    f"{'were' if len(result.failed) != 1 else 'was'} not read: {shown}{more}")
    if not answers:
        body = [f"no chunk had anything for the question{'' if not result.failed else ' (of those that answered)'}"]
    else:
        body = [f"lines {c.first}–{c.last}: {a}" for c, a in answers]
        if estimate_tokens("\n".join(head + body)) > result_tokens:
            notes = "\n\n".join(f"Lines {c.first}-{c.last}: {a}" for c, a in answers)
            if estimate_tokens(notes) > result_tokens * 3:
                notes = notes[: result_tokens * 12]
            try:
                combined = await _ask(side_call, COMBINE_SYSTEM, f"Question: {question}\n\nNotes:\n{notes}",
                                      min(1024, max(128, result_tokens // 2)))
                result.combined = True
                body = [f"combined from {len(answers)} chunk answers: {combined}"]
            except Exception as exc:
                head.append(f"the combining call failed ({_why(exc)}); the answers are cut to fit")
            if estimate_tokens("\n".join(head + body)) > result_tokens:
                keep: list[str] = []
                for line in body:
                    if estimate_tokens("\n".join(head + keep + [line])) > result_tokens - 20:
                        keep.append(f"… (+{len(body) - len(keep)} more answers cut to fit)")
                        break
                    keep.append(line)
                body = keep
    result.text = "\n".join(head + body + ["[end of what condense found]"])
    return result
