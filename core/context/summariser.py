"""The running summary's side call and its coverage check.

Issue "Layered context", "Running summary":

- A side call of the same model, asked not to think and given no tools
  (``ChatOptions(think="off")``, ``tools=None``), summarises the turns that
  leave the window, merged with the summary so far.
- Coverage check, with no model call: every file path, test name, entry id,
  commit hash and error code in the covered turns must appear in the
  summary, a fact or a reference (:mod:`wisp.core.context.coverage`). If
  one is missing, the summary is retried once with the missing items named.
- A summary that always covers (issue "Compaction you can see and trust"):
  what the model's summary still leaves out after its retry, wisp completes
  itself (:func:`complete_summary`: each missing identifier with the entry
  it came from, and the person's own statements of decisions). If the side
  call fails, or the model writes nothing, wisp's part stands alone; a
  summary too long is cut. So every version passes the coverage check, the
  turns can leave the window, and the conversation goes on, on any model.
  The version keeps which part the model wrote and which wisp completed.
- The side call asks for sections (:data:`SUMMARY_SCHEMA`: ``summary``,
  ``decisions``, ``open``) with the endpoint's own constrained decoding
  (issue "Compaction you can see and trust", "Structured side calls"); the
  answer is rendered back to text (:func:`read_summary`), and a server that
  ignored the schema answers in prose, which is taken as it is.
- The task is never summarised: it is its own layer. The prompt is told the
  task, so that what serves it is kept, and ``/compact``'s focus, so that
  what the person asks for is kept in detail.
- :meth:`Summariser.drafts` writes a version without recording it (the
  ``/compact`` preview, :mod:`wisp.core.context.compaction`);
  :meth:`Summariser.record` records one.
- Each version writes a ``summary.recorded`` audit event; a failed side
  call writes ``summary.failed`` (reason, turns).

When: :meth:`Summariser.plan` takes the oldest turns the composer says must
leave for the request to fit (``must_leave``: enough that the request uses at
most :data:`~wisp.core.context.composer.LOW_WATER` of its budget, so that the
side call is not needed before every request). The turns of one side call are limited
to what fits in the window with room for the summary (several calls, each
a version, when they do not).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from ..sidecall import SideCall, SideCallError, read_json_object, side_messages
from ..statements import person_statements
from .composer import ComposedContext
from .coverage import Item, extract_items, is_present
from .support import support
from .summary import (SummaryBook, SummaryVersion, summary_layer_text, turn_ranges, STATEMENTS_HEAD as _STATEMENTS_HEAD,
                      OLD_STATEMENTS_HEADS as _OLD_STATEMENTS_HEADS, newest_within as _newest_within,
                      surest_newest_within as _surest_newest_within)
from ..tokens import CHARS_PER_TOKEN, estimate_tokens
from .turns import OutputRef, ToolFlags, transcript, turn_outputs

__all__ = ["Summariser", "SummaryOutcome", "SummaryDraft", "SUMMARY_RULES", "SUMMARY_SCHEMA",
           "SUMMARY_SHARE", "MAX_CALLS", "read_summary", "complete_summary"]

#: The summary's text aims at this share of the budget (in words, about ¾ of the tokens).
SUMMARY_SHARE = 0.12
#: The model's part of a summary is cut to this share of the budget (tokens): beside it go wisp's
#: own part and the person's statements, each with its own share.
MODEL_PART_SHARE = 0.10
#: A summary longer than this share of the budget (tokens) is cut by wisp: it would not free the room.
SUMMARY_CAP_SHARE = 0.3
#: wisp's estimate may exceed the endpoint's count of the same text by this factor before
#: a summary within ``max_tokens`` is called too long.
CAP_SLACK = 1.3
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
    "Do not copy tool outputs; name their entries instead. Answer with a JSON object: \"summary\" (the "
    "notes), \"decisions\" (what the person decided, in their words) and \"open\" (what is still to do)."
)

#: The shape the side call asks for (issue "Compaction you can see and trust", "Structured side
#: calls"): the notes, the person's decisions and what is still open, each list bounded so that a
#: small model under a grammar cannot loop on it. Strings have no ``maxLength``: llama.cpp turns
#: one into a nested rule per character, refuses a few hundred of them ("exceeds sane defaults")
#: and llama-cpp-python's server then crashed; ``max_tokens`` (:func:`_cap_tokens`) bounds them.
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "decisions": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "open": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
    },
    "required": ["summary", "decisions", "open"],
    "additionalProperties": False,
}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for v in value:
        text = " ".join(str(v).split()) if isinstance(v, (str, int, float)) else ""
        if text and text not in out:
            out.append(text)
    return out


_SCHEMA_KEY = re.compile(r'"(?:summary|decisions|open)"\s*:')
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"?', re.S)


def _json_strings(reply: str) -> list[str]:
    """The string values of a broken JSON object (its keys left out), each
    on one line: what a summary keeps of a reply no lenient read could
    parse, so that no brace or key reaches the summary layer."""
    out = []
    for m in _JSON_STRING.finditer(reply):
        raw = m.group(1)
        if raw in ("summary", "decisions", "open"):
            continue
        try:
            text = json.loads(f'"{raw}"', strict=False)
        except ValueError:
            text = raw
        text = " ".join(str(text).split())
        if text:
            out.append(text)
    return out


def read_summary(reply: str) -> str:
    """The summary text of a side call's reply: a :data:`SUMMARY_SCHEMA`
    object (read leniently, a reply cut short included) rendered as its
    notes, then ``Decisions:`` and ``Open:`` lists; a reply that is not
    such an object (a server that ignored the schema) as it is. ``""`` for
    an object with nothing in it. Never raises."""
    obj = read_json_object(reply)
    if obj is None and _SCHEMA_KEY.search(reply or ""):  # the object, broken past mending: its strings only
        return "\n".join(_json_strings(reply))
    if obj is None or not any(k in obj for k in ("summary", "decisions", "open")):
        return (reply or "").strip()
    summary = obj.get("summary")
    parts = ["\n".join(_strings(summary)) if isinstance(summary, list) else str(summary or "").strip()]
    for key, head in (("decisions", "Decisions:"), ("open", "Open:")):
        rows = _strings(obj.get(key))
        if rows:
            parts.append(head + "\n" + "\n".join(f"- {r}" for r in rows))
    return "\n".join(p for p in parts if p).strip()


@dataclass
class SummaryOutcome:
    """What one :meth:`Summariser.ensure` did: the ``versions`` recorded,
    the turns ``kept_whole`` (none since wisp completes every summary), ``failed`` (a side call's
    error text, or ``None``), the ``missing`` items of the last attempt,
    the side ``calls`` made and whether the summary was ``too_long``."""

    versions: list[SummaryVersion] = field(default_factory=list)
    kept_whole: list[int] = field(default_factory=list)
    failed: str | None = None
    missing: list[str] = field(default_factory=list)
    calls: int = 0
    too_long: bool = False
    #: The identifiers wisp completed the model's summary with.
    completed: list[str] = field(default_factory=list)
    #: Why the model's summary was not used (it was not about the turns it covers), or ``None``.
    dropped: str | None = None


def _cap_tokens(budget: int) -> int:
    """The most tokens a summary may take (and the side call's ``max_tokens``):
    twice the words it aims at (JSON and all), within :data:`SUMMARY_CAP_SHARE`
    of the budget. A model that loops stops here, so this bounds a side call's
    time too (tokens)."""
    return min(int(budget * SUMMARY_CAP_SHARE), max(_words_for(budget) * 2, 160))


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


#: A prompt or reply longer than this (characters) is a paste: only its head and tail (half each) are
#: read for identifiers, the rest staying one ``/show entry N`` away, as a tool output's does behind its
#: reference. A 2 MB base64 paste otherwise gave a running summary of 395,529 tokens (CI, the real-model
#: chat), since base64 is full of slashed runs that read as paths.
PASTE_CHARS = 8_000
#: At most this many identifiers a turn's summary must keep: the first ones in the turn's order.
MAX_TURN_ITEMS = 64


def _scanned(text: str) -> str:
    """What of an entry's text is read for identifiers (see :data:`PASTE_CHARS`)."""
    if len(text) <= PASTE_CHARS:
        return text
    half = PASTE_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def item_sources(entries: list[Any]) -> dict[Item, int | None]:
    """The items a turn's summary must keep, each with the number of the
    first entry it came from: from its prompts, replies and tool calls'
    arguments (tool outputs are covered by their references; a paste by its
    head and tail, :data:`PASTE_CHARS`), at most :data:`MAX_TURN_ITEMS`, in
    the order they come in the turn. Deterministic."""
    out: dict[Item, int | None] = {}
    for e in entries:
        if e.kind not in ("prompt", "reply", "tool_call"):
            continue
        text = _scanned(e.content or "")
        for item in sorted(extract_items(text), key=lambda i: (text.find(i.text), i)):
            if item not in out and len(out) >= MAX_TURN_ITEMS:
                return out
            out.setdefault(item, getattr(e, "number", None))
    return out


def turn_items(entries: list[Any]) -> set[Item]:
    """The items a turn's summary must keep (:func:`item_sources`, without their entries)."""
    return set(item_sources(entries))



#: The words of the line wisp's capped part writes for the oldest identifier lines it has no room for:
#: their identifiers are then a search away, not listed (the one exception the coverage check allows).
DROPPED_FOR_ROOM = "older lines not kept here for room; a search of the conversation finds them"
#: At most this many of the person's statements are stored with a version (the newest; the sure ones
#: first): what a request shows of them is capped when it is composed (summary.STATEMENTS_SHARE).
MAX_STORED_STATEMENTS = 160
#: wisp's own part of a summary (what the person asked, the identifiers the model left out) takes at
#: most this share of the budget (tokens), the newest turns first.
OWN_PART_SHARE = 0.10
#: A turn's ``the person asked "…"`` line quotes at most this many characters of the prompt.
ASKED_CHARS = 100
_SOURCE_LINE = re.compile(r"^- turn (\d+), entry (\d+): (.+)$")


def person_decisions(turn: int, entries: list[Any]) -> list[str]:
    """What the person stated in a turn's prompts
    (:func:`wisp.core.statements.person_statements`: facts about the work,
    names, constraints, preferences, "remember that …" and decisions), each
    as ``turn N, entry E: "…"`` (``turn N: "…"`` for an entry with no
    number), cut to a sentence."""
    out = []
    for e in entries:
        if e.kind != "prompt":
            continue
        number = getattr(e, "number", None)
        where = f"turn {turn}, entry {number}" if number is not None else f"turn {turn}"
        out.extend(f'{where}: "{s}"' for s in person_statements(e.content or ""))
    return out


def previous_decisions(version: SummaryVersion) -> list[str]:
    """The statements a version's completion kept (so the next one keeps them too)."""
    for head in (_STATEMENTS_HEAD, *_OLD_STATEMENTS_HEADS):
        if head in version.completion:
            block = version.completion.split(head, 1)[1]
            return [line[2:] for line in block.splitlines() if line.startswith("- ") and not line.startswith("- (")]
    return []


def previous_sources(version: SummaryVersion | None) -> dict[tuple[int, str], int]:
    """``{(turn, identifier text): entry}`` from the identifier lines a
    version's completion wrote (``- turn 9, entry 28: a.py, b.py``), so that
    a later version names the same entries for the same turns."""
    out: dict[tuple[int, str], int] = {}
    if version is None or not version.completion:
        return out
    block = version.completion
    for head in (_STATEMENTS_HEAD, *_OLD_STATEMENTS_HEADS):
        block = block.split(head, 1)[0]
    for line in block.splitlines():
        m = _SOURCE_LINE.match(line)
        if m and not m.group(3).startswith(("the person asked", '"')):
            for text in m.group(3).split(", "):
                out[(int(m.group(1)), text)] = int(m.group(2))
    return out


def previous_asked(version: SummaryVersion) -> list[str]:
    """The ``the person asked`` lines a version's completion wrote, and its
    line naming the turns it had no room to list (so that a later version
    wisp writes alone keeps them, within its cap, and names every turn it
    leaves out)."""
    return [line[2:] for line in (version.completion or "").splitlines()
            if line.startswith("- turn ") and ": the person asked " in line
            or line.startswith("- (turns ") and "not listed here for room" in line]


def _turns_in(text: str) -> set[int]:
    """The turn numbers of ``(turns 1–4, 6`` (what :func:`turn_ranges` wrote)."""
    out: set[int] = set()
    for a, b in re.findall(r"(\d+)(?:[–-](\d+))?", text):
        lo, hi = int(a), int(b or a)
        if hi - lo <= 100_000:
            out.update(range(lo, hi + 1))
    return out


def summary_so_far(version: SummaryVersion | None) -> str:
    """What the side call is given as the summary so far: the version's
    model part and the ``the person asked`` lines wisp wrote, not the rest of
    wisp's part (the identifiers and the person's statements, which wisp
    carries to the next version itself; given to the model too, they came
    back in its text, twice the room)."""
    if version is None:
        return ""
    asked = [f"- {a}" for a in previous_asked(version)]
    return "\n".join(p for p in (version.model_part.strip(), *asked) if p).strip()


def person_asked(turn: int, entries: list[Any], words: int = 12) -> str:
    """``turn N, entry E: the person asked "…"`` with the first ``words``
    words of the turn's prompt, at most :data:`ASKED_CHARS` characters (a
    paste of long lines is never quoted whole)."""
    prompt_entry = next((e for e in entries if e.kind == "prompt"), None)
    prompt = (prompt_entry.content if prompt_entry is not None else "") or ""
    head = prompt.split()
    text = " ".join(head[:words])
    more = len(head) > words
    if len(text) > ASKED_CHARS:
        text, more = text[:ASKED_CHARS - 1].rstrip(), True
    text += "…" if more else ""
    number = getattr(prompt_entry, "number", None)
    where = f"turn {turn}, entry {number}" if number is not None else f"turn {turn}"
    return f'{where}: the person asked "{text}"'


def complete_summary(missing: dict[int, list[Item]], sources: dict[Any, Any],
                     decisions: list[str], *, model_text: str, failed: bool = False,
                     asked: list[str] = (), statement_tokens: int | None = None,
                     own_tokens: int | None = None, dropped: str | None = None) -> str:
    """wisp's own part of a summary version: when the model wrote nothing
    (or its summary was ``dropped``: the reason, said in the head), what the
    person asked in each new turn (``asked``, from :func:`person_asked`);
    each identifier the model's text (``model_text``) left out, with the
    turn and entry it came from (``sources`` maps ``(turn, kind:text)`` to
    the entry number, or ``kind:text`` to ``(turn, entry)``); then the
    person's statements (``decisions``, from :func:`person_decisions`), each
    once (a statement the person made again is kept where it was made
    last), whatever the model's text holds: this list is the floor no
    model's summary can lower. ``own_tokens`` caps the asked and identifier
    lines, ``statement_tokens`` the statements (tokens, wisp's estimate;
    the newest kept, the sure statements before those that only sound like
    a rule; a line says how many went: search finds them). ``""`` when nothing is to add. Deterministic: no model call."""
    lines: list[str] = []
    if not model_text and asked:
        if dropped:
            lines.append(f"Written by wisp (the model's summary was not used: {dropped}):")
        else:
            lines.append("Written by wisp (the model wrote no summary of these turns):")
        earlier = {n for a in asked if a.startswith("(turns ") for n in _turns_in(a.split(" not listed", 1)[0])}
        listed = [f"- {a}" for a in asked if not a.startswith("(turns ")]
        rows, _ = _newest_within(listed, own_tokens // 3 if own_tokens else None)
        gone = earlier | {int(m.group(1)) for line in listed[:len(listed) - len(rows)]
                          for m in [re.match(r"- turn (\d+)", line)] if m}
        if gone:
            lines.append(f"- (turns {turn_ranges(gone)} not listed here for room; a search of the conversation "
                         "finds them)")
        lines.extend(rows)
    if missing:
        head = ("Kept by wisp (the model's summary left these out):" if model_text and not failed else
                "Kept by wisp (the model's summary was not used):" if dropped else
                "Kept by wisp (the model wrote no summary of these turns):")
        rows = []
        for turn in sorted(missing):
            by_entry: dict[int | None, list[str]] = {}
            for item in missing[turn]:
                key = _item_key(item)
                if (turn, key) in sources:
                    entry = sources[(turn, key)]
                elif (turn, item.text) in sources:
                    entry = sources[(turn, item.text)]
                else:
                    found = sources.get(key)
                    entry = found[1] if isinstance(found, tuple) and found[0] == turn else None
                by_entry.setdefault(entry, []).append(item.text)
            for entry, texts in sorted(by_entry.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
                where = f"turn {turn}, entry {entry}" if entry is not None else f"turn {turn}"
                rows.append(f"- {where}: " + ", ".join(sorted(texts)))
        rows, gone = _newest_within(rows, own_tokens - own_tokens // 3 if own_tokens else None)
        lines.append(head)
        if gone:
            lines.append(f"- ({gone} {DROPPED_FOR_ROOM})")
        lines.extend(rows)
    seen: set[str] = set()
    wanted: list[str] = []
    for d in reversed(decisions):  # a statement said again is kept once, where it was said last
        quote = (d.split(": ", 1)[1].strip('"') if ": " in d else d).lower()
        if quote in seen:
            continue
        seen.add(quote)
        wanted.append(d)
    wanted.reverse()
    if wanted:
        rows, gone = _surest_newest_within([f"- {d}" for d in wanted], statement_tokens,
                                           max_lines=MAX_STORED_STATEMENTS)
        lines.append(_STATEMENTS_HEAD)
        if gone:
            lines.append(f"- ({gone} older statements not kept here for room; a search of the conversation finds them)")
        lines.extend(rows)
    return "\n".join(lines)


def _cut_to_tokens(text: str, tokens: int) -> str:
    """``text`` cut at a line (or a word) so it holds about ``tokens`` tokens, marked."""
    limit = max(40, int(tokens * CHARS_PER_TOKEN))
    if len(text) <= limit:
        return text
    cut = text[:limit]
    at = cut.rfind("\n")
    if at < limit // 2:
        at = cut.rfind(" ")
    return (cut[:at] if at > 0 else cut).rstrip() + " […the model's summary was cut by wisp to fit]"


@dataclass
class SummaryDraft:
    """A summary version written but not recorded yet (what ``/compact``
    previews, what the fitting records at once).

    ``text`` (the whole: the model's part, then wisp's ``completion``;
    ``completion`` is the whole text when the model wrote nothing),
    ``covers`` (turn numbers, the previous version's with the new ones),
    ``new_turns``, ``refs``, ``items`` (``{turn: ["kind:text", …]}``),
    ``kept`` (the identifiers it keeps), ``completed`` (those the model's
    part left out, kept by wisp), ``model`` (``None`` when wisp wrote it
    alone), ``attempts`` (side calls), ``failed`` (the side call's error, or
    ``None``), ``too_long`` (the model's part was cut), ``base`` (the
    version it merges, or ``None``) and ``focus`` (``/compact``'s, or ``None``).
    """

    conversation: int
    text: str
    completion: str
    covers: tuple[int, ...]
    new_turns: tuple[int, ...]
    refs: tuple[OutputRef, ...]
    items: dict[int, list[str]]
    kept: tuple[str, ...]
    completed: tuple[str, ...]
    model: str | None
    attempts: int
    failed: str | None = None
    too_long: bool = False
    base: int | None = None
    focus: str | None = None
    #: Why the model's summary was not used (:mod:`wisp.core.context.support`), or ``None``.
    dropped: str | None = None

    @property
    def model_part(self) -> str:
        """The part of :attr:`text` the model wrote (``""`` when it wrote none)."""
        if self.model is None:
            return ""
        if self.completion and self.text.endswith(self.completion):
            return self.text[: len(self.text) - len(self.completion)].rstrip()
        return self.text

    def as_version(self, version: int = 0) -> SummaryVersion:
        """The draft as an unrecorded :class:`SummaryVersion` (number ``version``)."""
        return SummaryVersion(self.conversation, version, self.text, self.covers, (), self.refs, self.items,
                              self.model, self.attempts, "", None, self.completion, self.kept,
                              base=self.base, focus=self.focus)


#: What a chain of drafts is told of each one it wrote: the version to merge the next with.
OnDraft = Callable[[SummaryDraft], Awaitable[SummaryVersion]]


class Summariser:
    """Writes running summary versions with side calls of the conversation's model.

    ``Summariser(store, summaries, side_call, audit)``: ``side_call`` is
    the :class:`~wisp.core.sidecall.SideCall` the session hands in (or
    ``None``: no summary is written); ``summaries`` a :class:`SummaryBook`.
    """

    def __init__(self, store: Any, summaries: SummaryBook, side_call: SideCall | None,
                 audit: Any = None) -> None:
        self.store = store
        self.summaries = summaries
        self.side_call = side_call
        self.audit = audit
        self._cut = _cutter(TRANSCRIPT_CUT_CHARS)

    # -- planning ------------------------------------------------------------

    def plan(self, ctx: ComposedContext) -> list[int]:
        """The ended turns (oldest first) to summarise before ``ctx``'s
        request: those the composer says must leave (``ctx.must_leave``: none
        when it fits, else enough for the request to use at most
        :data:`~wisp.core.context.composer.LOW_WATER` of its budget). One
        rule, the composer's, so that what the person is told will leave is
        what leaves."""
        return list(ctx.must_leave)

    # -- the side call -----------------------------------------------------------

    async def ensure(self, ctx: ComposedContext, *, flags: ToolFlags, facts_text: str, model: str | None,
                     context_window: int | None, turn: int | None,
                     loaded: dict[int, list[Any]] | None = None, task: str = "") -> SummaryOutcome:
        """Summarise what :meth:`plan` picks for ``ctx`` and record each
        version; returns what was done. ``loaded`` maps turn numbers to their
        entries when the caller has them already (they are read from the
        store otherwise); ``task`` is the conversation's task, which the
        prompt is told. Never raises for the side call's failure (it is
        reported in the outcome)."""
        outcome = SummaryOutcome()
        chosen = self.plan(ctx)
        if not chosen or self.side_call is None:
            return outcome
        try:
            await self.side_call.info()
        except SideCallError:  # nothing connected: the turns simply stay whole
            return outcome
        batch_turns = await self.load_turns(ctx.conversation, chosen, loaded)

        async def record(draft: SummaryDraft) -> SummaryVersion:
            version = await self.record(draft, origin="fit", turn=turn)
            outcome.versions.append(version)
            return version

        await self.drafts(ctx, batch_turns, ctx.summary, flags=flags, facts_text=facts_text, model=model,
                          context_window=context_window, turn=turn, task=task, outcome=outcome,
                          on_draft=record)
        return outcome

    async def load_turns(self, conversation: int, numbers: list[int],
                         loaded: dict[int, list[Any]] | None = None) -> list[tuple[int, list[Any]]]:
        """``[(turn number, entries)]`` for ``numbers``, from ``loaded`` when it has them all."""
        if loaded is not None and all(n in loaded for n in numbers):
            return [(n, loaded[n]) for n in numbers]
        wanted = set(numbers)
        turns = {t.number: t for t in await self.store.turns(conversation) if t.number in wanted}
        by_turn = await self.store.turn_entries([turns[n].id for n in numbers if n in turns])
        return [(n, by_turn.get(turns[n].id, [])) for n in numbers if n in turns]

    async def drafts(self, ctx: ComposedContext, batch_turns: list[tuple[int, list[Any]]],
                     previous: SummaryVersion | None, *, flags: ToolFlags, facts_text: str,
                     model: str | None, context_window: int | None, turn: int | None, task: str = "",
                     focus: str | None = None, outcome: SummaryOutcome | None = None,
                     on_draft: OnDraft | None = None, max_calls: int = MAX_CALLS) -> list[SummaryDraft]:
        """Drafts covering ``batch_turns`` merged with ``previous``, one per
        side call that fits the window (at most :data:`MAX_CALLS`), each
        merged with the one before: ``on_draft`` gets each and answers the
        version to merge the next with (the recorded version; by default the
        draft itself, unrecorded). ``task`` and ``focus`` go into the prompt.
        The last draft covers everything the chain covered. Never raises for
        the side call's failure (``outcome.failed`` says it); with no side
        call, or after it failed, wisp writes each draft alone. Side calls
        stop at ``max_calls``; the turns left then are not covered."""
        outcome = outcome if outcome is not None else SummaryOutcome()
        out: list[SummaryDraft] = []
        window = context_window or ctx.window
        ratio = ctx.ratio if ctx.ratio > 0 else 1.0
        # the side call's prompt gets the window less the summary it writes and a margin (calibrated tokens)
        room = max(256, window - _cap_tokens(ctx.budget) - SIDE_CALL_MARGIN)
        cut = _cutter(max(400, min(TRANSCRIPT_CUT_CHARS, int(room / ratio))))  # a quarter of the room, in chars
        self._cut = cut
        extra = estimate_tokens(task) + estimate_tokens(focus or "")
        while batch_turns and outcome.calls < max_calls:
            prev_text = summary_so_far(previous)
            base = round((estimate_tokens(SUMMARY_RULES) + estimate_tokens(prev_text) + extra + 60 +
                          estimate_tokens(getattr(ctx, "prefix", ""))) * ratio)
            batch: list[tuple[int, list[Any]]] = []
            used = base
            for number, entries in batch_turns:
                cost = round(estimate_tokens(transcript([(number, entries)], flags, cut=cut)) * ratio)
                if batch and used + cost > room:
                    break
                batch.append((number, entries))
                used += cost
            batch_turns = batch_turns[len(batch):]
            draft = await self._draft_batch(ctx, batch, previous, flags=flags, facts_text=facts_text,
                                            model=model, turn=turn, outcome=outcome, task=task, focus=focus)
            if draft is None:
                continue
            out.append(draft)
            previous = await on_draft(draft) if on_draft is not None else draft.as_version()
        return out

    async def record(self, draft: SummaryDraft, *, origin: str = "fit", turn: int | None = None) -> SummaryVersion:
        """Record ``draft`` as the next version (``origin``: ``fit``, ``compact``)."""
        return await self.summaries.record(
            draft.conversation, draft.text, draft.covers, kept_whole=(), refs=draft.refs, items=draft.items,
            model=draft.model, attempts=draft.attempts, new_turns=list(draft.new_turns), turn=turn,
            completion=draft.completion, kept=draft.kept, origin=origin, base=draft.base, focus=draft.focus)

    async def _draft_batch(self, ctx: ComposedContext, batch: list[tuple[int, list[Any]]],
                           previous: SummaryVersion | None, *, flags: ToolFlags, facts_text: str,
                           model: str | None, turn: int | None, outcome: SummaryOutcome, task: str = "",
                           focus: str | None = None) -> SummaryDraft | None:
        """One draft covering ``batch`` (and what ``previous`` covered): the
        model's summary, asked once more naming what it left out, then
        completed by wisp (:func:`complete_summary`) so that it always passes
        the coverage check (issue "Compaction you can see and trust", "A
        summary that always covers"). A side call that fails leaves wisp's
        part alone: the turns can still leave the window."""
        words = _words_for(ctx.budget)
        new_refs: list[OutputRef] = []
        items: dict[int, list[str]] = dict(previous.items) if previous else {}
        # each identifier with the entry it came from in each turn it came in, the earlier versions' included
        sources: dict[Any, Any] = dict(previous_sources(previous))
        for number, entries in batch:
            new_refs.extend(turn_outputs(number, entries, flags))
            items[number] = sorted(_item_key(i) for i in turn_items(entries))
            for item, entry in item_sources(entries).items():
                if entry is not None:
                    sources.setdefault((number, _item_key(item)), entry)
        all_refs = list(previous.refs if previous else ()) + new_refs
        covers = set(previous.covers if previous else ()) | {n for n, _ in batch}
        probe = SummaryVersion(ctx.conversation, 0, "", tuple(sorted(covers)), refs=tuple(all_refs))
        refs_text, _ = summary_layer_text(probe, flags)
        wanted = sorted({i for n, _ in batch for i in (_item_from(k) for k in items.get(n, []))})
        base_prompt = self._prompt(batch, previous, flags, words, wanted, task=task, focus=focus)
        # what a model's summary may draw on: the turns, the summary so far, the task and the facts; not
        # the side call's own instructions, whose words ("keep", "summary", "decisions") back any summary
        material = "\n\n".join([task, summary_so_far(previous), transcript(batch, flags, cut=self._cut), facts_text])
        cap = _cap_tokens(ctx.budget)

        def missing_in(text: str) -> dict[int, list[Item]]:
            haystack = "\n".join([text, facts_text, refs_text])
            gone: dict[int, list[Item]] = {}
            for number in sorted(covers):
                lost = [i for i in (_item_from(k) for k in items.get(number, [])) if not is_present(i, haystack)]
                if lost:
                    gone[number] = lost
            return gone

        missing: dict[int, list[Item]] = {}
        text = ""
        attempts = 0
        too_long = False
        failed: str | None = None
        dropped: str | None = None
        asking = outcome.failed is None and self.side_call is not None  # else wisp writes alone
        for attempt in ((1, 2) if asking else ()):
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
                text = read_summary(await self._side_call(prompt, cap, getattr(ctx, "prefix", "")))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the side call failed, or a malformed answer: wisp writes it alone
                reason = str(exc) if isinstance(exc, SideCallError) else f"{type(exc).__name__}: {exc}"
                outcome.failed = failed = reason or "the side call failed"
                self._audit_failed(ctx.conversation, turn, "side call failed: " + outcome.failed,
                                   [n for n, _ in batch], [])
                text = ""
                break
            if not text:
                continue
            backing = support(text, material)
            if not backing.supported:  # about something else: never used, never asked again
                dropped = backing.reason()
                outcome.dropped = backing.reason(words=True)
                self._audit_failed(ctx.conversation, turn, "the model's summary was not used: " + dropped,
                                   [n for n, _ in batch], [])
                text = ""
                break
            too_long = estimate_tokens(text) > cap * CAP_SLACK
            missing = missing_in(text)
            if not missing and not too_long:
                break
        # the shares are of the budget as the server counts it: wisp's estimate times the calibration ratio
        ratio = ctx.ratio if ctx.ratio > 0 else 1.0
        model_cap = min(cap, max(60, int(ctx.budget * MODEL_PART_SHARE / ratio)))
        if text and estimate_tokens(text) > model_cap * CAP_SLACK:
            outcome.too_long = True
            text = _cut_to_tokens(text, model_cap)
        missing = missing_in(text)
        decisions = [d for n, entries in batch for d in person_decisions(n, entries)]
        asked = [person_asked(n, entries) for n, entries in batch]
        if previous is not None:
            decisions = [*previous_decisions(previous), *decisions]
            asked = [*previous_asked(previous), *asked] if not text else asked
        completion = complete_summary(missing, sources, decisions, model_text=text,
                                      failed=not asking or outcome.failed is not None, asked=asked,
                                      own_tokens=max(60, int(ctx.budget * OWN_PART_SHARE / ratio)), dropped=dropped)
        full = f"{text}\n\n{completion}".strip() if completion else text
        left = missing_in(full)
        # the rule this method exists for; only wisp's own cap (the oldest lines) may leave an identifier out
        assert not left or DROPPED_FOR_ROOM in completion, f"wisp's completion left out {left}"
        completed = sorted({str(i) for ms in missing.values() for i in ms})
        if completion:
            outcome.completed = sorted(set(outcome.completed) | set(completed))
        if not full.strip():
            return None
        newly = sorted({n for n, _ in batch})
        if not newly and previous is not None and covers == set(previous.covers):
            return None
        kept = sorted({_item_from(k).text for n in covers for k in items.get(n, [])})
        return SummaryDraft(
            conversation=ctx.conversation, text=full, completion=completion if text else full,
            covers=tuple(sorted(covers)), new_turns=tuple(newly), refs=tuple(all_refs), items=items,
            kept=tuple(kept), completed=tuple(completed), model=model if text else None,
            attempts=attempts, failed=failed, too_long=outcome.too_long,
            base=(previous.version or previous.base) if previous is not None else None, focus=focus,
            dropped=dropped)

    def _prompt(self, batch: list[tuple[int, list[Any]]], previous: SummaryVersion | None,
                flags: ToolFlags, words: int, wanted: list[Item] | None = None, *, task: str = "",
                focus: str | None = None) -> str:
        parts = []
        if task.strip():
            parts.append(f"The conversation's task (it stays in its own layer; keep what serves it): {task.strip()}")
        if focus and focus.strip():
            parts.append(f"The person asks this summary to focus on: {focus.strip()}. Keep what concerns it in "
                         "detail; the rest may be brief.")
        so_far = summary_so_far(previous)
        if previous is not None and so_far:
            parts.append(f"Summary so far, of turns {turn_ranges(previous.covers)}:\n{so_far}")
        else:
            parts.append("Summary so far: none yet.")
        parts.append("New turns to add:\n" + transcript(batch, flags, cut=self._cut))
        if wanted:
            shown = [str(i) for i in wanted[:MAX_NAMED_ITEMS]]
            parts.append("Keep each of these exactly as written: " + ", ".join(shown) + ".")
        parts.append(f"Write the new running summary, at most {words} words.")
        return "\n\n".join(parts)

    async def _side_call(self, prompt: str, max_tokens: int, prefix: str = "") -> str:
        assert self.side_call is not None
        messages = side_messages(SUMMARY_RULES, prompt, prefix)
        return (await self.side_call.complete(messages, max_tokens=max_tokens, schema=SUMMARY_SCHEMA)).strip()

    def _audit_failed(self, conversation: int, turn: int | None, reason: str, turns: list[int],
                      missing: list[str]) -> None:
        if self.audit is not None:
            self.audit.write("summary.failed", {"reason": reason, "turns": turns, "missing": missing},
                             conversation=conversation, turn=turn)
