"""``/compact``: a running summary you ask for, shown before it acts, and undone with one command.

Issue "Compaction you can see and trust", "``/compact [focus]``, with a preview":

- :func:`preview_compaction` composes what the summary would be, without
  recording anything: which turns would leave the window, with their token
  counts; the summary the model proposes (one side call, and its retry),
  with the identifiers it keeps and those it misses, which wisp completes
  (:mod:`wisp.core.context.summariser`); the facts and the task that stay
  (the task is its own layer, never summarised); the tokens of the next
  request before and after. A focus (``/compact focus on the payment bug``)
  goes into the summary's prompt.
- :func:`apply_compaction` records the previewed summary as the next version
  (origin ``compact``): the turns it covers leave the window. Nothing is
  deleted: the turns stay in the store and the audit log, one recall or
  ``/show`` away. A preview of a conversation that changed since (a new
  turn, another summary version) is refused: preview again.
- :func:`undo_compaction` restores the previous summary version: it records
  a copy of the version the one in effect was built on (origin ``undo``),
  or, when there was none, an empty version, so every turn it covered is
  back in the window whole. Versions are never rewritten or removed.

Every recorded version writes its ``summary.recorded`` audit event. Which
turns stay whole: the newest :data:`KEEP_TURNS` ended turns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .composer import build
from .facts import fact_line
from .summariser import SummaryDraft, SummaryOutcome
from .summary import SummaryVersion, turn_ranges, turns_named

__all__ = ["CompactPreview", "CompactError", "preview_compaction", "apply_compaction", "undo_compaction",
           "KEEP_TURNS", "MAX_COMPACT_CALLS", "focus_text"]

#: The newest ended turns ``/compact`` keeps whole in the window.
KEEP_TURNS = 1
#: Side calls one ``/compact`` makes at most (a long conversation takes several, each merged
#: with the one before; what they do not reach stays whole).
MAX_COMPACT_CALLS = 8


class CompactError(Exception):
    """A compaction that cannot be applied or undone; the message is one line
    saying why and what to do."""


def focus_text(words: str) -> str | None:
    """The focus of ``/compact WORDS``: ``focus on the payment bug`` →
    ``the payment bug``; ``None`` for nothing."""
    text = " ".join((words or "").split())
    lowered = text.lower()
    for lead in ("focus on ", "focus: ", "focus:", "focus "):
        if lowered.startswith(lead):
            text = text[len(lead):].strip()
            break
    return text or None


@dataclass
class CompactPreview:
    """What ``/compact`` would do, computed without recording anything.

    ``conversation``; ``focus``; ``leaving`` (``(turn, tokens)`` of each
    turn that would leave the window, tokens calibrated); ``staying`` (the
    ended turns that stay whole); ``draft`` (the proposed
    :class:`~wisp.core.context.summariser.SummaryDraft`, or ``None`` when
    nothing can leave); ``previous`` (the summary in effect, or ``None``);
    ``facts`` (the fact lines that stay) and ``task`` (the task's line, or
    ``None``); ``tokens_before``/``tokens_after`` (the next request's total),
    ``budget`` and ``window`` (tokens); ``failed`` (the side call's error,
    when wisp wrote the summary alone); ``side_calls``; ``nothing`` (why
    nothing would change, or ``None``). ``newest_version`` and ``last_turn``
    are what the conversation was when previewed (:func:`apply_compaction`
    checks them); ``layer`` the summary layer as the next request would
    carry it."""

    conversation: int
    focus: str | None
    leaving: list[tuple[int, int]]
    staying: list[int]
    draft: SummaryDraft | None
    previous: SummaryVersion | None
    facts: list[str]
    task: str | None
    tokens_before: int
    tokens_after: int
    budget: int
    window: int
    failed: str | None = None
    side_calls: int = 0
    nothing: str | None = None
    newest_version: int | None = None
    last_turn: int = 0
    model: str | None = None
    completed: list[str] = field(default_factory=list)
    #: The summary layer as the next request would carry it (the proposed summary and its references).
    layer: str = ""

    @property
    def leaving_tokens(self) -> int:
        """Tokens of the turns that would leave the window."""
        return sum(t for _, t in self.leaving)

    @property
    def kept(self) -> list[str]:
        """Every identifier the proposed summary keeps."""
        return list(self.draft.kept) if self.draft else []

    @property
    def missed(self) -> list[str]:
        """The identifiers the model's summary missed, which wisp's part keeps."""
        return list(self.draft.completed) if self.draft else []

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``wisp compact --dry-run --json``)."""
        d = self.draft
        return {
            "conversation": self.conversation, "focus": self.focus,
            "leaving": [{"turn": n, "tokens": t} for n, t in self.leaving],
            "leaving_text": turn_ranges([n for n, _ in self.leaving]), "leaving_tokens": self.leaving_tokens,
            "staying": list(self.staying),
            "summary": None if d is None else {
                "text": d.text, "model_part": d.model_part, "completion": d.completion,
                "covers": list(d.covers), "covers_text": turn_ranges(d.covers), "new_turns": list(d.new_turns),
                "kept": list(d.kept), "missed": list(d.completed), "model": d.model, "attempts": d.attempts,
                "base": d.base, "references": [r.entry for r in d.refs], "layer": self.layer,
                "dropped": d.dropped,
            },
            "previous_version": self.previous.version if self.previous else None,
            "facts": list(self.facts), "task": self.task,
            "tokens": {"before": self.tokens_before, "after": self.tokens_after, "budget": self.budget,
                       "window": self.window},
            "side_calls": self.side_calls, "failed": self.failed, "nothing": self.nothing, "model": self.model,
        }

    def headline(self) -> str:
        """One line: what would leave and the tokens it frees."""
        if self.nothing:
            return self.nothing
        return (f"Turns {turn_ranges([n for n, _ in self.leaving])} would leave the window "
                f"({self.leaving_tokens:,} tokens); the next request goes from {self.tokens_before:,} to "
                f"{self.tokens_after:,} tokens of a {self.budget:,}-token budget.")

    def to_markdown(self) -> str:
        """The preview as Markdown (``wisp ask "/compact"``, the text of the TUI's preview)."""
        lines = ["## Compaction preview (nothing changed yet)", "", self.headline()]
        if self.nothing or self.draft is None:
            return "\n".join(lines)
        d = self.draft
        lines += ["", "### Turns that would leave the window", ""]
        lines += [f"- turn {n}: {t:,} tokens" for n, t in self.leaving]
        if self.staying:
            lines.append(f"- staying whole: turn{'s' if len(self.staying) != 1 else ''} {turn_ranges(self.staying)}")
        who = f"the model ({d.model})" if d.model else "wisp alone"
        lines += ["", f"### The summary proposed by {who}" + (f", focused on {self.focus}" if self.focus else ""), ""]
        if self.failed:
            lines.append(f"*The model could not write it ({self.failed}); wisp wrote it from the turns.*")
            lines.append("")
        elif d.dropped:
            lines.append(f"*The model's summary was not used: {d.dropped}. wisp wrote it from the turns.*")
            lines.append("")
        if d.model_part:
            lines += ["```text", d.model_part.replace("```", "ˋˋˋ"), "```"]
        if d.completion and d.model:
            lines += ["", "Completed by wisp:", "", "```text", d.completion.replace("```", "ˋˋˋ"), "```"]
        elif d.completion:
            lines += ["```text", d.completion.replace("```", "ˋˋˋ"), "```"]
        lines += ["", f"**Identifiers kept ({len(d.kept)}):** " + (", ".join(f"`{k}`" for k in d.kept) or "none")]
        if d.completed:
            lines.append(f"**Missed by the model, completed by wisp ({len(d.completed)}):** "
                         + ", ".join(f"`{k}`" for k in d.completed))
        lines += ["", "### What stays", ""]
        lines.append(f"- task: {self.task}" if self.task else "- task: none set")
        lines += [f"- {f}" for f in self.facts] or ["- facts: none"]
        lines += ["", f"**Tokens:** {self.tokens_before:,} before → {self.tokens_after:,} after "
                      f"(budget {self.budget:,}, window {self.window:,})"]
        return "\n".join(lines)


async def preview_compaction(context: Any, conversation: int, focus: str | None = None,
                             keep_turns: int = KEEP_TURNS) -> CompactPreview:
    """What ``/compact`` would do to ``conversation`` (see the module doc),
    through ``context`` (a :class:`~wisp.core.context.manager.ContextManager`).
    Records nothing; its only cost is the side call. Never raises for the
    side call's failure (wisp writes the summary alone, and ``failed`` says why)."""
    inputs = await context.inputs(conversation)
    inputs = dataclasses.replace(inputs, current=None)
    ctx = build(inputs)
    newest = await context.summaries.newest(conversation)
    turns = await context.store.turns(conversation)
    last_turn = turns[-1].number if turns else 0
    task = ctx.task or inputs.task
    facts = [fact_line(v.fact) for v in ctx.facts]
    task_line = f"{task.value} [{task.source_label(in_facts_layer=True)}; {task.vid}]" if task else None
    preview = CompactPreview(
        conversation=conversation, focus=focus, leaving=[], staying=[s.number for s in ctx.turns], draft=None,
        previous=ctx.summary, facts=facts, task=task_line,
        tokens_before=ctx.total,
        tokens_after=ctx.total, budget=ctx.budget, window=ctx.window,
        newest_version=newest.version if newest else None, last_turn=last_turn, model=ctx.model)
    ended = [s.number for s in ctx.turns]
    chosen = ended[: max(0, len(ended) - max(0, keep_turns))]
    if not chosen:
        preview.nothing = (f"Nothing to compact: {'only turn ' + turn_ranges(ended) + ' is' if ended else 'no turn is'} "
                           "in the window besides the newest, which stays whole"
                           + (f" ({turns_named(ctx.left)} {'is' if len(set(ctx.left)) == 1 else 'are'} summarised "
                              "already)." if ctx.left else "."))
        return preview
    facts_text = "\n".join([*facts, fact_line(task)] if task else facts)
    # a turn composed from its kept render was not read: the summariser loads its entries
    batch = await context.summariser.load_turns(ctx.conversation, chosen, inputs.loaded_entries())
    outcome = SummaryOutcome()
    drafts = await context.summariser.drafts(
        ctx, batch, ctx.summary, flags=ctx.flags, facts_text=facts_text, model=ctx.model,
        context_window=ctx.window, turn=None, task=task.value if task else "", focus=focus, outcome=outcome,
        max_calls=MAX_COMPACT_CALLS)
    preview.side_calls = outcome.calls
    preview.failed = outcome.failed
    preview.completed = list(outcome.completed)
    if not drafts:
        preview.nothing = "Nothing to compact: no summary could be written of those turns."
        return preview
    draft = drafts[-1]
    covered = set(draft.covers)
    tokens = {s.number: s.tokens for s in ctx.turns}
    preview.draft = draft
    preview.leaving = [(n, tokens.get(n, 0)) for n in chosen if n in covered]
    preview.staying = [n for n in ended if n not in covered]
    after = build(dataclasses.replace(inputs, summary=draft.as_version(),
                                      ended=[t for t in inputs.ended if t[0] not in covered]))
    preview.tokens_after = after.total
    preview.layer = after.layer("summary").text
    return preview


async def apply_compaction(context: Any, preview: CompactPreview) -> SummaryVersion:
    """Record ``preview``'s summary as the next version (origin ``compact``,
    its ``summary.recorded`` audit event written); the turns it covers leave
    the window from the next request. Raises :class:`CompactError` when the
    preview has no summary, or the conversation changed since it was made."""
    if preview.draft is None:
        raise CompactError(preview.nothing or "Nothing to apply: the preview holds no summary.")
    conversation = preview.conversation
    newest = await context.summaries.newest(conversation)
    turns = await context.store.turns(conversation)
    last_turn = turns[-1].number if turns else 0
    if (newest.version if newest else None) != preview.newest_version or last_turn != preview.last_turn:
        raise CompactError("The conversation changed since this preview (a new turn or summary version); "
                           "run /compact again to see what it would do now.")
    return await context.summariser.record(preview.draft, origin="compact", turn=last_turn or None)


async def undo_compaction(context: Any, conversation: int) -> tuple[SummaryVersion, SummaryVersion | None]:
    """Restore the summary version before the one in effect (``/compact
    undo``): record a copy of the version it was built on, or an empty
    version when it was built on none. Returns ``(new version, the version
    restored or None)``. Raises :class:`CompactError` when there is nothing
    to undo. Nothing is removed: every version stays, and so do the turns."""
    book = context.summaries
    newest = await book.newest(conversation)
    if newest is None or newest.empty:
        raise CompactError("There is no running summary to undo: every turn is in the window whole, "
                           "or stands under none.")
    turns = await context.store.turns(conversation)
    turn = turns[-1].number if turns else None
    target = await book.get(conversation, newest.base) if newest.base else None
    if target is None or target.empty:
        version = await book.record(conversation, "", [], origin="undo", base=None, restores=0, turn=turn,
                                    model=None, attempts=0)
        return version, None
    version = await book.record(
        conversation, target.text, target.covers, kept_whole=target.kept_whole, refs=target.refs,
        items=target.items, model=target.model, attempts=target.attempts, turn=turn,
        completion=target.completion, kept=target.kept, origin="undo", base=target.base,
        restores=target.version, focus=target.focus)
    return version, target
