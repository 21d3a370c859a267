"""The running summary's side call and its coverage check.

Issue "Layered context", "Running summary":

- A side call of the same model, asked not to think and given no tools
  (``ChatOptions(think="off")``, ``tools=None``), summarises the turns that
  leave the window, merged with the summary so far.
- Coverage check, with no model call: every file path, test name, entry id,
  commit hash and error code in the covered turns must appear in the
  summary, a fact or a reference (:mod:`wisp.core.context.coverage`). If
  one is missing, the summary is retried once with the missing items named;
  if it still fails, the turns with missing items stay whole and the
  version covers the others (no version at all when none is left).
- If the side call fails, the turns stay whole and the previous version
  stays. Nothing is dropped without a summary that covers it.
- Each version writes a ``summary.recorded`` audit event; a failure writes
  ``summary.failed`` (reason, turns, missing items).

When: :meth:`Summariser.plan` picks the oldest turns that must leave for the
request to fit, and, so that the side call is not needed before every
request, enough of them that the turns left fill at most
:data:`TARGET_SHARE` of the room the other layers leave. The turns of one side call are limited
to what fits in the window with room for the summary (several calls, each
a version, when they do not).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..sidecall import SideCall, SideCallError
from .composer import ComposedContext
from .coverage import Item, extract_items, is_present
from .summary import SummaryBook, SummaryVersion, summary_layer_text, turn_ranges
from ..tokens import estimate_tokens
from .turns import OutputRef, ToolFlags, transcript, turn_outputs

__all__ = ["Summariser", "SummaryOutcome", "SUMMARY_RULES", "TARGET_SHARE", "SUMMARY_SHARE", "MAX_CALLS"]

#: After a summary, the turns left in the window should fill at most this
#: share of the room the other layers leave them.
TARGET_SHARE = 0.6
#: The summary's text aims at this share of the budget (in words, about ¾ of the tokens).
SUMMARY_SHARE = 0.12
#: A summary longer than this share of the budget (tokens) is refused: it would not free the room.
SUMMARY_CAP_SHARE = 0.3
#: wisp's estimate may exceed the endpoint's count of the same text by this factor before
#: a summary within ``max_tokens`` is called too long.
CAP_SLACK = 1.3
#: A turn whose items a summary missed (after its retry) is tried again this many turns later.
RETRY_FAILED_TURNS = 3
#: After a summary too long even on its retry, the next try waits this many turns.
RETRY_TURNS_TOO_LONG = 3
#: The first prompt names at most this many of the items the summary must keep.
MAX_NAMED_ITEMS = 60
#: Side calls at most before one request (each writes a version).
MAX_CALLS = 4
#: A prompt or reply longer than this (characters) is cut in the side call's transcript
#: (less in a small window: a quarter of the room the side call's prompt has).
TRANSCRIPT_CUT_CHARS = 4000
#: Tokens the side call leaves free besides the summary it writes (chat template, rounding).
SIDE_CALL_MARGIN = 150

SUMMARY_RULES = (
    "You keep the running summary of a conversation between a person and an assistant that uses tools. "
    "Merge the summary so far with the new turns into one summary of short notes: what the person asked "
    "and decided, what was found, what failed, what was changed, and what is still open. Keep every file "
    "path, test name, entry number (written as entry N), commit hash and error code exactly as written. "
    "Do not copy tool outputs; name their entries instead. Answer with the summary only."
)


@dataclass
class SummaryOutcome:
    """What one :meth:`Summariser.ensure` did: the ``versions`` recorded,
    the turns ``kept_whole`` (items missing), ``failed`` (a side call's
    error text, or ``None``), the ``missing`` items of the last attempt,
    the side ``calls`` made and whether the summary was ``too_long``."""

    versions: list[SummaryVersion] = field(default_factory=list)
    kept_whole: list[int] = field(default_factory=list)
    failed: str | None = None
    missing: list[str] = field(default_factory=list)
    calls: int = 0
    too_long: bool = False


def _cap_tokens(budget: int) -> int:
    """The most tokens a summary may take (and the side call's ``max_tokens``)."""
    return max(_words_for(budget) * 2, int(budget * SUMMARY_CAP_SHARE))


def _words_for(budget: int) -> int:
    return max(60, min(600, int(budget * SUMMARY_SHARE * 0.75)))


def _cutter(limit: int) -> Any:
    """A function that cuts a prompt or reply longer than ``limit`` characters
    to its start and end, saying how much is not shown."""
    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        half = limit // 2
        return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters not shown …]\n{text[-half:]}"
    return cut


def _item_key(item: Item) -> str:
    return f"{item.kind}:{item.text}"


def _item_from(key: str) -> Item:
    kind, _, text = key.partition(":")
    return Item(kind, text)


def turn_items(entries: list[Any]) -> set[Item]:
    """The items a turn's summary must keep: from its prompts, replies and
    tool calls' arguments (tool outputs are covered by their references)."""
    found: set[Item] = set()
    for e in entries:
        if e.kind in ("prompt", "reply"):
            found |= extract_items(e.content)
        elif e.kind == "tool_call":
            found |= extract_items(e.content or "")
    return found


class Summariser:
    """Writes running summary versions with side calls of the conversation's model.

    ``Summariser(store, summaries, side_call, audit)``: ``side_call`` is
    the :class:`~wisp.core.sidecall.SideCall` the session hands in (or
    ``None``: no summary is written); ``summaries`` a :class:`SummaryBook`. ``failed_turns`` remembers, per
    conversation, the turns whose items a summary could not keep (and the
    turn it failed in), so they are tried again only after
    :data:`RETRY_FAILED_TURNS` more turns, not before every request.
    """

    def __init__(self, store: Any, summaries: SummaryBook, side_call: SideCall | None,
                 audit: Any = None) -> None:
        self.store = store
        self.summaries = summaries
        self.side_call = side_call
        self.audit = audit
        self.failed_turns: dict[int, dict[int, int | None]] = {}
        self._next_try: dict[int, int] = {}
        self._cut = _cutter(TRANSCRIPT_CUT_CHARS)

    # -- planning ------------------------------------------------------------

    def plan(self, ctx: ComposedContext) -> list[int]:
        """The ended turns (oldest first) to summarise before ``ctx``'s
        request: none when it fits; else the oldest turns not known to fail,
        enough that the turns left fill :data:`TARGET_SHARE` of their room."""
        if not ctx.must_leave:
            return []
        now = ctx.turn or 0
        failed = {t for t, at in self.failed_turns.get(ctx.conversation, {}).items()
                  if at is None or now < at + RETRY_FAILED_TURNS}
        turns_tokens = sum(s.tokens for s in ctx.turns)
        fixed = ctx.total - turns_tokens  # rules, tools, facts, task, summary, current turn
        room = max(0, ctx.budget - fixed)
        target = fixed + int(room * TARGET_SHARE)
        over = ctx.total - target
        chosen: list[int] = []
        for s in ctx.turns:
            if over <= 0:
                break
            if s.number in failed:
                continue
            chosen.append(s.number)
            over -= s.tokens
        return chosen

    # -- the side call -----------------------------------------------------------

    async def ensure(self, ctx: ComposedContext, *, flags: ToolFlags, facts_text: str, model: str | None,
                     context_window: int | None, turn: int | None,
                     loaded: dict[int, list[Any]] | None = None) -> SummaryOutcome:
        """Summarise what :meth:`plan` picks for ``ctx``; returns what was done.
        ``loaded`` maps turn numbers to their entries when the caller has
        them already (they are read from the store otherwise). Never raises
        for the side call's failure (it is reported in the outcome)."""
        outcome = SummaryOutcome()
        chosen = self.plan(ctx)
        if not chosen:
            return outcome
        if turn is not None and turn < self._next_try.get(ctx.conversation, 0):
            return outcome  # a side call failed lately; not before every request
        if self.side_call is None:
            return outcome
        try:
            await self.side_call.info()
        except SideCallError:  # nothing connected: the turns simply stay whole
            return outcome
        if loaded is not None and all(n in loaded for n in chosen):
            batch_turns = [(n, loaded[n]) for n in chosen]
        else:
            turns = {t.number: t for t in await self.store.turns(ctx.conversation) if t.number in set(chosen)}
            by_turn = await self.store.turn_entries([turns[n].id for n in chosen if n in turns])
            batch_turns = [(n, by_turn.get(turns[n].id, [])) for n in chosen if n in turns]
        previous = ctx.summary
        window = context_window or ctx.window
        ratio = ctx.ratio if ctx.ratio > 0 else 1.0
        # the side call's prompt gets the window less the summary it writes and a margin (calibrated tokens)
        room = max(256, window - _cap_tokens(ctx.budget) - SIDE_CALL_MARGIN)
        cut = _cutter(max(400, min(TRANSCRIPT_CUT_CHARS, int(room / ratio))))  # a quarter of the room, in chars
        self._cut = cut
        while batch_turns and outcome.calls < MAX_CALLS:
            prev_text = previous.text if previous else ""
            base = round((estimate_tokens(SUMMARY_RULES) + estimate_tokens(prev_text) + 60) * ratio)
            batch: list[tuple[int, list[Any]]] = []
            used = base
            for number, entries in batch_turns:
                cost = round(estimate_tokens(transcript([(number, entries)], flags, cut=cut)) * ratio)
                if batch and used + cost > room:
                    break
                batch.append((number, entries))
                used += cost
            batch_turns = batch_turns[len(batch):]
            version = await self._summarise_batch(ctx, batch, previous, flags=flags, facts_text=facts_text,
                                                  model=model, turn=turn, outcome=outcome)
            if outcome.failed:
                if turn is not None:
                    self._next_try[ctx.conversation] = turn + (RETRY_TURNS_TOO_LONG if outcome.too_long else 1)
                break
            if version is not None:
                previous = version
                outcome.versions.append(version)
        return outcome

    async def _summarise_batch(self, ctx: ComposedContext, batch: list[tuple[int, list[Any]]],
                               previous: SummaryVersion | None, *, flags: ToolFlags, facts_text: str,
                               model: str | None, turn: int | None,
                               outcome: SummaryOutcome) -> SummaryVersion | None:
        words = _words_for(ctx.budget)
        new_refs: list[OutputRef] = []
        items: dict[int, list[str]] = dict(previous.items) if previous else {}
        for number, entries in batch:
            new_refs.extend(turn_outputs(number, entries, flags))
            items[number] = sorted(_item_key(i) for i in turn_items(entries))
        all_refs = list(previous.refs if previous else ()) + new_refs
        covers = set(previous.covers if previous else ()) | {n for n, _ in batch}
        probe = SummaryVersion(ctx.conversation, 0, "", tuple(sorted(covers)), refs=tuple(all_refs))
        refs_text, _ = summary_layer_text(probe, flags)
        wanted = sorted({i for n, _ in batch for i in (_item_from(k) for k in items.get(n, []))})
        base_prompt = self._prompt(batch, previous, flags, words, wanted)
        missing: dict[int, list[Item]] = {}
        text = ""
        attempts = 0
        cap = _cap_tokens(ctx.budget)
        too_long = False
        for attempt in (1, 2):
            prompt = base_prompt
            if attempt == 2:
                fixes = []
                if missing:
                    named = sorted({str(i) for ms in missing.values() for i in ms})
                    fixes.append("Your last summary left out: " + ", ".join(named) +
                                 ". Write the whole summary again and keep each of them exactly as written.")
                if too_long:
                    fixes.append(f"Your last summary was too long (about {len(text.split())} words); "
                                 f"write at most {words} words.")
                prompt += "\n\n" + " ".join(fixes)
            attempts = attempt
            outcome.calls += 1
            try:
                text = await self._side_call(prompt, cap)
            except asyncio.CancelledError:
                raise
            except SideCallError as exc:
                outcome.failed = str(exc) or exc.kind
                self._audit_failed(ctx.conversation, turn, "side call failed: " + outcome.failed,
                                   [n for n, _ in batch], [])
                return None
            except Exception as exc:  # a malformed answer must not end the turn
                outcome.failed = f"{type(exc).__name__}: {exc}"
                self._audit_failed(ctx.conversation, turn, "side call failed: " + outcome.failed,
                                   [n for n, _ in batch], [])
                return None
            if not text.strip():
                missing = {}
                too_long = False
                continue
            too_long = estimate_tokens(text) > cap * CAP_SLACK
            haystack = "\n".join([text, facts_text, refs_text])
            missing = {}
            for number in sorted(covers):
                want = [_item_from(k) for k in items.get(number, [])]
                gone = [i for i in want if not is_present(i, haystack)]
                if gone:
                    missing[number] = gone
            if not missing and not too_long:
                break
        if text.strip() and too_long:
            outcome.failed = (f"the summary was too long (about {estimate_tokens(text):,} tokens; at most "
                              f"{cap:,} fit) after a retry")
            outcome.too_long = True
            self._audit_failed(ctx.conversation, turn, outcome.failed, [n for n, _ in batch], [])
            return None
        failing = sorted(missing)
        outcome.missing = sorted(set(outcome.missing) | {str(i) for ms in missing.values() for i in ms})
        if not text.strip():
            outcome.failed = "the model answered with an empty summary"
            self._audit_failed(ctx.conversation, turn, outcome.failed, [n for n, _ in batch], [])
            return None
        if failing:
            self.failed_turns.setdefault(ctx.conversation, {}).update({t: turn for t in failing})
            outcome.kept_whole = sorted(set(outcome.kept_whole) | set(failing))
            self._audit_failed(ctx.conversation, turn, "coverage check failed after a retry; the turns stay whole",
                               failing, outcome.missing)
        covered = covers - set(failing)
        newly = sorted({n for n, _ in batch} - set(failing))
        if not newly and (previous is None or covered == set(previous.covers)):
            return None
        refs = [r for r in all_refs if r.turn in covered]
        kept_items = {n: v for n, v in items.items() if n in covered}
        still_whole = (set(previous.kept_whole if previous else ()) | set(failing)) - covered
        return await self.summaries.record(
            ctx.conversation, text.strip(), covered, kept_whole=still_whole, refs=refs, items=kept_items,
            model=model, attempts=attempts, new_turns=newly, turn=turn)

    def _prompt(self, batch: list[tuple[int, list[Any]]], previous: SummaryVersion | None,
                flags: ToolFlags, words: int, wanted: list[Item] | None = None) -> str:
        parts = []
        if previous is not None and previous.text.strip():
            parts.append(f"Summary so far, of turns {turn_ranges(previous.covers)}:\n{previous.text.strip()}")
        else:
            parts.append("Summary so far: none yet.")
        parts.append("New turns to add:\n" + transcript(batch, flags, cut=self._cut))
        if wanted:
            shown = [str(i) for i in wanted[:MAX_NAMED_ITEMS]]
            parts.append("Keep each of these exactly as written: " + ", ".join(shown) + ".")
        parts.append(f"Write the new running summary, at most {words} words.")
        return "\n\n".join(parts)

    async def _side_call(self, prompt: str, max_tokens: int) -> str:
        assert self.side_call is not None
        messages = [{"role": "system", "content": SUMMARY_RULES}, {"role": "user", "content": prompt}]
        return (await self.side_call.complete(messages, max_tokens=max_tokens)).strip()

    def _audit_failed(self, conversation: int, turn: int | None, reason: str, turns: list[int],
                      missing: list[str]) -> None:
        if self.audit is not None:
            self.audit.write("summary.failed", {"reason": reason, "turns": turns, "missing": missing},
                             conversation=conversation, turn=turn)
