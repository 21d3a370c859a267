"""Pages of a stored conversation for display, newest turns first to load.

A view (the TUI's chat pane) asks for the last ``limit`` turns before a
turn number and gets them in order with their entries, plus how many turns
come before them, so a 1,000-turn conversation opens without rendering
every message (issue "wisp runs end to end", "TUI").

:func:`turn_events` turns a stored turn back into the
:mod:`wisp.core.events` its live run yielded, so a view draws stored and
live turns through one path, and marks a cut, stopped or failed reply in
one place (issue 9, "The TUI renders events").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .streamed import STREAMING

__all__ = ["TurnView", "TranscriptPage", "load_page", "load_after", "load_turn", "prompt_history", "turn_events",
           "cut_calls_text"]

#: How much of a cut tool call a notice quotes (characters); the reply entry keeps it whole.
CUT_CALL_SHOWN = 160
#: The notice of a stored reply cut while the model wrote tool calls (its live notice names the limit too).
CUT_CALLS_STORED = "The reply stopped at its output limit. "
#: Turn states that end a turn; an ``open`` turn (still running, or its process died) has no end yet.
_ENDED = ("done", "stopped", "error", "cut")


def cut_calls_text(written: list[str]) -> str:
    """The sentence a cut reply's notice adds when the model was writing tool
    calls (``written``: each as the model wrote it; ``""`` for none): they
    were not run, and each is quoted, at most :data:`CUT_CALL_SHOWN`
    characters, whitespace folded."""
    if not written:
        return ""
    quoted = []
    for text in written:
        text = " ".join(str(text).split())
        quoted.append(text if len(text) <= CUT_CALL_SHOWN else text[:CUT_CALL_SHOWN - 1] + "…")
    which = "a tool call" if len(written) == 1 else f"{len(written)} tool calls"
    return f"It was writing {which}, not run: {'; '.join(q or '(nothing yet)' for q in quoted)}. "


@dataclass
class TurnView:
    """One stored turn: ``number``, ``state`` and its entries in order;
    ``conversation`` (its id) and ``error`` (the message a failed turn ended with, or ``None``);
    ``versions``: the numbers of every version of this turn, oldest first,
    when ``/retry`` or ``/edit`` asked it again (``[]`` when it has one);
    ``superseded_by``: the turn that replaced it, or ``None`` (issue 16)."""

    number: int
    state: str
    entries: list[Any]
    conversation: int = 0
    error: str | None = None
    versions: list[int] = field(default_factory=list)
    superseded_by: int | None = None


@dataclass
class TranscriptPage:
    """Turns in ascending order, ``earlier`` (the count of turns before
    them) and ``later`` (the count after them, when known; 0 otherwise)."""

    turns: list[TurnView]
    earlier: int
    later: int = 0


async def load_page(store: Any, conversation_id: int, limit: int = 50,
                    before_number: int | None = None) -> TranscriptPage:
    """The last ``limit`` current turns of the conversation before turn
    ``before_number`` (all turns when None), with their entries and the
    numbers of their versions: four queries whatever the length. A turn a
    ``/retry`` or ``/edit`` replaced is not among them; its versions list
    it (:func:`load_turn` reads one)."""
    turns = await store.turns(conversation_id, limit=limit, before_number=before_number)
    if not turns:
        return TranscriptPage([], 0)
    by_turn = await store.turn_entries([t.id for t in turns])
    versions = await store.turn_versions(conversation_id)
    views = [TurnView(t.number, t.state, by_turn.get(t.id, []), conversation_id, t.error,
                      versions.get(t.number, [])) for t in turns]
    earlier = await store.count_turns(conversation_id, before_number=turns[0].number, versions=False)
    return TranscriptPage(views, earlier=earlier)


async def load_turn(store: Any, conversation_id: int, number: int) -> TurnView | None:
    """Turn ``number`` of a conversation (current or not) with its entries
    and versions, or ``None`` (Left/Right on a reply's versions)."""
    turn = await store.get_turn(conversation_id, number)
    if turn is None:
        return None
    versions = await store.turn_versions(conversation_id)
    chain = next((v for v in versions.values() if number in v), [])
    return TurnView(turn.number, turn.state, await store.entries(conversation_id, turn.id), conversation_id,
                    turn.error, chain, turn.superseded_by)


async def load_after(store: Any, conversation_id: int, after_number: int, limit: int = 50) -> TranscriptPage:
    """The ``limit`` current turns after turn ``after_number`` with their
    entries and versions, how many come before them and how many after
    (issue 12: a view that shows a window of a long conversation loads the
    page below it). Five queries whatever the length; a turn a ``/retry`` or
    ``/edit`` replaced is not among them, nor counted (as :func:`load_page`)."""
    turns = await store.turns_after(conversation_id, after_number, limit)
    if not turns:
        earlier = await store.count_turns(conversation_id, before_number=after_number + 1, versions=False)
        return TranscriptPage([], earlier, 0)
    by_turn = await store.turn_entries([t.id for t in turns])
    versions = await store.turn_versions(conversation_id)
    views = [TurnView(t.number, t.state, by_turn.get(t.id, []), conversation_id, t.error,
                      versions.get(t.number, [])) for t in turns]
    earlier = await store.count_turns(conversation_id, before_number=turns[0].number, versions=False)
    total = await store.count_turns(conversation_id, versions=False)
    return TranscriptPage(views, earlier=earlier, later=max(0, total - earlier - len(turns)))


async def prompt_history(store: Any, conversation_id: int, limit: int = 200) -> list[str]:
    """The conversation's last ``limit`` prompts, oldest first, for Up/Down
    (one query over the prompts: :meth:`wisp.core.store.Store.last_prompts`)."""
    return await store.last_prompts(conversation_id, limit)


class Transcript:
    """What a view shows of one conversation's record: the one door through
    which the TUI reads it (it holds no store of its own). Made by
    :class:`wisp.core.session.Opening` as soon as the store is open, so the
    stored turns are drawn before the rest of the core loads, and kept by
    the :class:`~wisp.core.session.Session` built from it.

    Every method reads; none writes. ``conversation`` is a conversation id."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def page(self, conversation: int, limit: int = 50, before: int | None = None) -> TranscriptPage:
        """The last ``limit`` current turns before turn ``before`` (:func:`load_page`)."""
        return await load_page(self._store, conversation, limit, before)

    async def after(self, conversation: int, after: int, limit: int = 50) -> TranscriptPage:
        """The ``limit`` current turns after turn ``after`` (:func:`load_after`)."""
        return await load_after(self._store, conversation, after, limit)

    async def turn(self, conversation: int, number: int) -> TurnView | None:
        """Turn ``number``, current or an earlier version (:func:`load_turn`)."""
        return await load_turn(self._store, conversation, number)

    async def count(self, conversation: int, *, versions: bool = True) -> int:
        """How many turns the conversation has (``versions``: those a retry
        or an edit replaced too)."""
        return int(await self._store.count_turns(conversation, versions=versions))

    async def prompts(self, conversation: int, limit: int = 200) -> list[str]:
        """The last ``limit`` prompts, oldest first (:func:`prompt_history`)."""
        return await prompt_history(self._store, conversation, limit)


def turn_events(turn: TurnView) -> list[ev.AgentEvent]:
    """The events the live run of ``turn`` yielded, rebuilt from its entries.

    A prompt gives :class:`~wisp.core.events.TurnStarted`; thinking a
    :class:`~wisp.core.events.ThinkingDelta`; a reply its text as one
    :class:`~wisp.core.events.TextDelta` and a
    :class:`~wisp.core.events.ReplyRecorded` with its ``cut`` and ``partial``
    flags; a tool call and its result :class:`~wisp.core.events.ToolCall` and
    :class:`~wisp.core.events.ToolResult` (``ok`` false when its ``meta`` says
    ``error``). An entry still being written as it streams (``meta.streaming``:
    the turn runs in another process, or its process died and the store has
    not recovered it yet) is what had arrived: a reply is marked ``partial``,
    a tool's output is a :class:`~wisp.core.events.ToolOutput` (still
    running). A turn stopped by a crash shows what had arrived, marked
    partial by :meth:`wisp.core.store.Store.recover_open_turns`, and ends
    ``stopped``. A notice entry gives a :class:`~wisp.core.events.Notice` (level from
    ``meta["level"]``, else ``warning``). A failed turn then gives the
    :class:`~wisp.core.events.Error` it ended with (its ``kind`` is the reason
    stored on the partial reply, else ``agent``), and every ended turn its
    :class:`~wisp.core.events.TurnEnded`; an ``open`` turn gives none.
    Other streaming-only events (usage, the pieces of an ended tool's
    output) are not rebuilt.
    """
    out: list[ev.AgentEvent] = []
    reason: str | None = None
    for e in turn.entries:
        meta = e.meta or {}
        if e.kind == "prompt":
            out.append(ev.TurnStarted(turn.conversation, turn.number, e.number, e.content))
        elif e.kind == "thinking":
            if e.content:
                out.append(ev.ThinkingDelta(e.content))
        elif e.kind == "reply":
            if e.content:
                out.append(ev.TextDelta(e.content))
            out.append(ev.ReplyRecorded(e.number, e.content or "", cut=bool(meta.get("cut")),
                                        partial=bool(meta.get("partial") or meta.get(STREAMING)),
                                        repeated=bool(meta.get("cut") and meta.get("repeat"))))
            if meta.get("partial") and meta.get("reason"):
                reason = str(meta["reason"])
            if isinstance(meta.get("cut_calls"), list) and meta["cut_calls"]:
                out.append(ev.Notice(CUT_CALLS_STORED + cut_calls_text(list(meta["cut_calls"])).rstrip(),
                                     level="warning"))
        elif e.kind == "tool_call":
            arguments = e.arguments if isinstance(e.arguments, dict) else {}
            out.append(ev.ToolCall(e.number, e.tool_call_id or "", e.tool_name or "?", arguments))
        elif e.kind == "tool_result" and meta.get(STREAMING):
            if e.content:
                out.append(ev.ToolOutput(e.tool_call_id or "", e.content))
        elif e.kind == "tool_result":
            out.append(ev.ToolResult(e.number, e.tool_call_id or "", e.tool_name or "?", e.content or "",
                                     ok=not meta.get("error"), meta=dict(meta)))
        elif e.kind == "notice":
            out.append(ev.Notice(e.content, level=str(meta.get("level") or "warning")))
    if turn.state == "error":
        out.append(ev.Error(reason if reason and reason != "stopped" else "agent",
                            turn.error or "this turn ended with an error"))
    if turn.state in _ENDED:
        out.append(ev.TurnEnded(turn.number, turn.state))
    return out
