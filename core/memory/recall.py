"""recall: earlier material in full, paged within a token budget (wisp-memory-tool.txt, "recall").

What a recall returns: a header saying what was found and where its
content was read from, the lines of one page, then a line that names the
next page or says it ended::

    entry 4: read_file output, turn 2 at 14:05:12, from the audit log
    arguments: {"path": "/work/harbour/docs/overview.md"}
    1	# harbour sync: design overview
    …
    [end of file]
    [end of what recall found]

(``[end of file]`` is read_file's own last line; a reply or a command's
output ends with its own last line.) A page that is not the last ends ``[more: memory "recall entry 4 from line
60"]``. An entry's content is read from the audit event that recorded it,
found by its byte offset (:meth:`wisp.core.audit.AuditLog.read`, through
:mod:`wisp.core.context.recall`); when that event has rotated away, or the
audit log is off, from the store's copy, and the header says so. When
nothing matches, one line starting ``memory:`` says why and what there is.
The current turn's entries are in the model's view whole, so a recall of
them says so instead of repeating them; but a page from a line (``recall
entry N from line K``, what a marker of an entry sent cut names) is given,
since that entry was not sent whole.

Each function returns a :class:`Recalled`: the text and what the
``context.memory`` audit event records about it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..context import recall as ctx_recall
from ..context.facts import local_time
from .paging import page_lines, split_stored_lines
from ..context.notes import ModelNotes
from .request import Target

__all__ = ["Recalled", "END", "recall_entry", "recall_turn", "recall_task", "recall_fact", "recall_summary",
           "find_output", "load_entry"]

#: The last line of a recall that reached the end of what it found.
END = "[end of what recall found]"
_TURN_SKIP = ("thinking",)


@dataclass
class Recalled:
    """A recall's ``text`` and, for the audit event, ``target`` (what was
    asked), ``entries`` (entry numbers shown), ``facts`` (fact version ids),
    ``summaries`` (summary versions), ``audit_events`` (ids of the audit
    events read), ``sources`` (``audit``/``store`` per entry shown),
    ``found`` (false for a ``memory:`` line) and ``next_line`` (the next
    page's first line, if any)."""

    text: str
    target: dict[str, Any] = field(default_factory=dict)
    entries: list[int] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    audit_events: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    found: bool = True
    next_line: int | None = None

    @property
    def source(self) -> str | None:
        """``audit``, ``store``, ``both`` or ``None`` (nothing read from either)."""
        kinds = set(self.sources)
        if not kinds:
            return None
        return "both" if len(kinds) > 1 else kinds.pop()


async def _range(store: Any, conversation: int, current_turn: int | None = None) -> str:
    """What is stored before ``current_turn`` (the turn in progress: its entries are not stored
    until it ends), for a line that says nothing matched."""
    return await ctx_recall.stored_range(store, conversation, current_turn)


async def _earlier_entries(store: Any, conversation: int, current_turn: int | None) -> str:
    """``entries 1–9 are from earlier turns`` (or that there are none yet)."""
    if current_turn is None:
        return await _range(store, conversation)
    span = await store.entry_range_before(conversation, current_turn)
    if span is None:
        return "nothing from an earlier turn is stored yet: this is the first turn, and all of it is in view"
    return f"earlier turns hold entries {span[0]}–{span[1]}"


async def load_entry(store: Any, audit: Any, conversation: int, number: int) -> Any:
    """Entry ``number`` with its content read back (audit first, else the
    store): a :class:`wisp.core.context.recall.RecalledEntry`, or ``None``."""
    return await ctx_recall.recall_entry(store, audit, conversation, number)


def _is_file(entry: Any) -> bool:
    """Whether ``entry`` is read_file's output, whose own last line is ``[end of file]``."""
    return entry.kind == "tool_result" and entry.tool_name == "read_file"


def _source_word(source: str) -> str:
    return "audit" if source == ctx_recall.FROM_AUDIT else "store"


async def _call_arguments(store: Any, conversation: int, entry: Any) -> Any:
    """The arguments of the tool call a tool result answers (same turn and
    call id), or ``None``."""
    if entry.kind != "tool_result" or entry.turn_id is None:
        return None
    for e in await store.entries(conversation, entry.turn_id):
        if e.kind == "tool_call" and e.tool_call_id == entry.tool_call_id and e.number < entry.number:
            return e.arguments
    return None


async def find_output(store: Any, conversation: int, output_id: str) -> int | None:
    """The number of the stored output ``output_id`` names: the entry whose
    ``meta.output_id`` or audit event id (without ``ev-``) begins with it."""
    return await store.find_output(conversation, output_id)


async def recall_entry(store: Any, audit: Any, conversation: int, target: Target, *, current_turn: int | None,
                       budget_tokens: int) -> Recalled:
    """``recall entry N [from line K]`` (see the module doc)."""
    number = int(target.number or 0)
    what = {"kind": "entry", "entry": number, "from_line": target.from_line}
    got = await load_entry(store, audit, conversation, number)
    if got is None:
        return Recalled(f"memory: no entry {number}; {await _range(store, conversation, current_turn)}", what,
                        found=False)
    if current_turn is not None and got.turn == current_turn and target.from_line is None:
        # in view whole; a page from a line is asked for what the request had to send cut (a marker's
        # "recall entry N from line K"), and is given
        earlier = await _earlier_entries(store, conversation, current_turn)
        return Recalled(f"memory: entry {number} is from this turn (turn {current_turn}), which is in view whole; "
                        f"{earlier}", what, found=False)
    lines = split_stored_lines(got.content)
    start = target.from_line or 1
    if start > max(1, len(lines)):
        return Recalled(f"memory: entry {number} has {len(lines):,} line{'s' if len(lines) != 1 else ''}; "
                        f"line {start} is past its end, so "
                        f"recall entry {number} from line 1 shows it from the start", what, found=False)
    head = [got.header]
    args = got.entry.arguments if got.entry.kind == "tool_call" else await _call_arguments(store, conversation, got.entry)
    if args is not None and got.entry.kind == "tool_result":
        head.append("arguments: " + json.dumps(args, ensure_ascii=False))
    fixed = sum(len(h) + 1 for h in head) + 60
    page = page_lines(lines, start, max(1, budget_tokens - fixed // 4), file_end=_is_file(got.entry))
    out = head + page.lines
    if page.next_line is not None:
        out.append(f'[more: memory "recall entry {number} from line {page.next_line}"]')
    else:
        # a file's page ends with read_file's own [end of file] (or its next page); a reply's or a
        # command's output ends where it does: [end of file] belongs to files
        out.append(END)
    r = Recalled("\n".join(out), what, entries=[number], next_line=page.next_line)
    r.sources.append(_source_word(got.source))
    if got.source == ctx_recall.FROM_AUDIT and got.entry.audit_event_id:
        r.audit_events.append(got.entry.audit_event_id)
    return r


async def recall_turn(store: Any, audit: Any, conversation: int, target: Target, *, current_turn: int | None,
                      budget_tokens: int) -> Recalled:
    """``recall turn N [from entry E [line K]]``: the turn's entries (not its
    thinking), each with its header, paged together within the budget."""
    number = int(target.number or 0)
    what = {"kind": "turn", "turn": number, "from_entry": target.from_entry, "from_line": target.from_line}
    if current_turn is not None and number == current_turn:
        earlier = await _earlier_entries(store, conversation, current_turn)
        return Recalled(f"memory: turn {number} is this turn, which is in view whole; {earlier}", what, found=False)
    got = await ctx_recall.recall_turn(store, audit, conversation, number)
    if got is None:
        return Recalled(f"memory: no turn {number}; {await _range(store, conversation, current_turn)}", what,
                        found=False)
    turn, items = got
    items = [it for it in items if it.entry.kind not in _TURN_SKIP]
    if target.from_entry is not None:
        items = [it for it in items if it.entry.number >= target.from_entry]
    if not items:
        return Recalled(f"memory: turn {number} has no entries to show from entry {target.from_entry}", what,
                        found=False)
    first_no, last_no = items[0].entry.number, items[-1].entry.number
    at = local_time(turn.started_at)
    head = f"turn {number}{' at ' + at if at else ''}: entries {first_no}–{last_no}" if first_no != last_no \
        else f"turn {number}{' at ' + at if at else ''}: entry {first_no}"
    out = [head]
    used = len(head) + 1
    budget_chars = budget_tokens * 4
    r = Recalled("", what)
    for k, it in enumerate(items):
        e = it.entry
        header = it.header
        remaining = budget_chars - used - len(header) - 80
        if k > 0 and remaining < 200:
            out.append(f'[more: memory "recall turn {number} from entry {e.number}"]')
            r.text = "\n".join(out)
            return r
        lines = split_stored_lines(it.content)
        start = target.from_line if (k == 0 and target.from_line) else 1
        page = page_lines(lines, start, max(1, remaining // 4), file_end=_is_file(e))
        out.append(header)
        out.extend(page.lines)
        used += len(header) + 1 + sum(len(x) + 1 for x in page.lines)
        r.entries.append(e.number)
        r.sources.append(_source_word(it.source))
        if it.source == ctx_recall.FROM_AUDIT and e.audit_event_id:
            r.audit_events.append(e.audit_event_id)
        if page.next_line is not None:
            out.append(f'[more: memory "recall turn {number} from entry {e.number} line {page.next_line}"]')
            r.text = "\n".join(out)
            r.next_line = page.next_line
            return r
        out.append(f"[end of entry {e.number}]")
        used += 20
    out.append(END)
    r.text = "\n".join(out)
    return r


async def recall_task(port: ModelNotes | None, conversation: int) -> Recalled:
    """``task`` / ``recall task``: the task as it stands, who set it, when."""
    what = {"kind": "task"}
    task = await port.task(conversation) if port is not None else None
    if task is None:
        return Recalled("memory: no task is set; propose one with task THE TASK; objective: WHAT DONE LOOKS LIKE",
                        what, found=False)
    when = local_time(task.created_at)
    where = f", turn {task.turn}" if task.turn else ""
    state = "; a proposal until the person keeps it" if task.proposal else ""
    text = f"task ({task.vid}, set by {task.who}{where}{' at ' + when if when else ''}{state}): {task.value}\n{END}"
    return Recalled(text, what, facts=[task.vid])


async def recall_fact(port: ModelNotes | None, conversation: int, name: str) -> Recalled:
    """``recall fact NAME``: the fact's versions, oldest first, in the reference's format."""
    what = {"kind": "fact", "name": name}
    if port is None:
        return Recalled("memory: this conversation keeps no facts", what, found=False)
    text, vids = await port.recall_fact(conversation, name)
    return Recalled(text, what, facts=vids, found=not text.startswith("memory:"))


#: A summary line longer than this many characters is wrapped into lines of at most this many, so
#: that a page of a summary written as one paragraph can end, and the next begin, within it.
SUMMARY_LINE_CHARS = 400


def summary_lines(text: str) -> list[str]:
    """The running summary's lines as a recall numbers and pages them: its
    own lines, each longer than :data:`SUMMARY_LINE_CHARS` wrapped at spaces
    (a word longer than that is broken). Pure, so a ``from line K`` page
    always starts where the page before it ended."""
    import textwrap

    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= SUMMARY_LINE_CHARS:
            out.append(line)
            continue
        out.extend(textwrap.wrap(line, SUMMARY_LINE_CHARS, break_on_hyphens=False, drop_whitespace=True)
                   or [""])
    return out


async def recall_summary(port: ModelNotes | None, conversation: int, version: int | None, *,
                         budget_tokens: int, from_line: int | None = None) -> Recalled:
    """``recall summary`` (the latest) or ``recall summary vN``, whole when
    it fits ``budget_tokens``; else paged like an entry: numbered lines
    (:func:`summary_lines`), and a page that is not the last ends with
    ``[more: memory "recall summary vN from line K"]``, which starts where
    it ended (wisp-memory-tool.txt, "recall": a page that is not the last
    names the next)."""
    what = {"kind": "summary", "version": version, "from_line": from_line}
    versions = await port.summaries(conversation) if port is not None else []
    if not versions:
        return Recalled("memory: there is no running summary yet; every turn so far is in view or stands as "
                        "references", what, found=False)
    chosen = versions[-1] if version is None else next((v for v in versions if v.version == version), None)
    if chosen is None:
        return Recalled(f"memory: no summary v{version}; versions v1–v{versions[-1].version} exist", what,
                        found=False)
    from ..context.summary import turn_ranges
    from ..tokens import estimate_tokens

    covers = turn_ranges(list(chosen.covers)) if chosen.covers else "no turns"
    when = local_time(chosen.created_at)
    head = (f"running summary v{chosen.version} of {len(versions)} (covers turns {covers}"
            f"{', at ' + when if when else ''}{', written by ' + chosen.model if chosen.model else ''}):")
    body = chosen.text
    room = max(1, budget_tokens - estimate_tokens(head) - 24)
    if from_line is None and estimate_tokens(body) + 2 <= room:
        return Recalled(f"{head}\n{body}\n{END}", what, summaries=[chosen.version])
    lines = summary_lines(body)
    start = from_line or 1
    if start > max(1, len(lines)):
        return Recalled(f"memory: summary v{chosen.version} has {len(lines):,} lines; line {start} is past its "
                        f'end, so memory "recall summary v{chosen.version}" shows it from the start', what,
                        found=False)
    page = page_lines(lines, start, room)
    out = [head, *page.lines]
    if page.next_line is not None:
        out.append(f'[more: memory "recall summary v{chosen.version} from line {page.next_line}"]')
    else:
        out.append(END)
    return Recalled("\n".join(out), what, summaries=[chosen.version], next_line=page.next_line)
