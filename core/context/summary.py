"""The running summary's versions and how the summary layer shows them.

Issue "Layered context", "Running summary": versions are kept, and each
records which turns it covers. A version holds the summary text, the turns
it covers (they may leave the window), the turns it tried to cover but could
not (they stay whole), the references of the covered turns' tool outputs
(:class:`~wisp.core.context.turns.OutputRef`; the layer lists them so that
an output is one recall away) and the items the coverage check requires per
turn. The side call that writes a version is in
:mod:`wisp.core.context.summariser`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..tokens import estimate_tokens
from .turns import OutputRef, ToolFlags

# The coverage check and the digests load with the first summary or reference that needs them:
# a request without either (`wisp ask`'s first turn) never imports them (issue 12).

__all__ = ["SummaryVersion", "SummaryBook", "summary_layer_text", "turn_ranges"]


def turn_ranges(turns: list[int] | tuple[int, ...] | set[int]) -> str:
    """``1–4, 6, 9–12`` for a set of turn numbers (``""`` for none)."""
    nums = sorted(set(int(t) for t in turns))
    if not nums:
        return ""
    parts: list[str] = []
    start = prev = nums[0]
    for n in nums[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(f"{start}–{prev}" if prev != start else f"{start}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def turns_named(turns: list[int] | tuple[int, ...] | set[int]) -> str:
    """``turn 5`` for one turn, ``turns 1–4, 6`` for more (``turn_ranges``
    with its noun, for the person's sentences; ``""`` for none)."""
    nums = set(int(t) for t in turns)
    if not nums:
        return ""
    return f"turn{'s' if len(nums) != 1 else ''} {turn_ranges(nums)}"


@dataclass(frozen=True)
class SummaryVersion:
    """One version of a conversation's running summary.

    ``version`` (1, 2 …), ``text``, ``covers`` (sorted turn numbers),
    ``kept_whole`` (turns it could not cover), ``refs``
    (:class:`OutputRef` list), ``items`` (``{turn: ["kind:text", …]}``),
    ``model``, ``attempts`` (side calls it took), ``created_at`` (UTC ISO),
    ``audit_event_id``.
    """

    conversation_id: int
    version: int
    text: str
    covers: tuple[int, ...]
    kept_whole: tuple[int, ...] = ()
    refs: tuple[OutputRef, ...] = ()
    items: dict[int, list[str]] = field(default_factory=dict)
    model: str | None = None
    attempts: int = 1
    created_at: str = ""
    audit_event_id: str | None = None
    #: The part of ``text`` wisp wrote itself (``""`` when the model's summary covered everything).
    completion: str = ""
    #: The identifiers the version keeps (paths, tests, entries, commits, error codes), as text.
    kept: tuple[str, ...] = ()
    #: What made it: ``fit`` (the request had to fit the window), ``compact`` (``/compact``) or
    #: ``undo`` (``/compact undo``, a copy of the version it restores).
    origin: str = "fit"
    #: The version it was built on (merged with), or ``None``.
    base: int | None = None
    #: The version an ``undo`` restored (``0``: none, the summary was cleared), or ``None``.
    restores: int | None = None
    #: The focus ``/compact`` was given, or ``None``.
    focus: str | None = None

    @property
    def empty(self) -> bool:
        """True for a version that covers no turn (``/compact undo`` of the first version)."""
        return not self.covers and not self.text.strip()

    @property
    def model_part(self) -> str:
        """The part of ``text`` the model wrote (``""`` when wisp wrote it alone)."""
        if self.completion and self.text.endswith(self.completion):
            return self.text[: len(self.text) - len(self.completion)].rstrip()
        return self.text

    @property
    def missed(self) -> tuple[str, ...]:
        """The identifiers the model's part left out, which wisp's part keeps."""
        if not self.completion:
            return ()
        from .coverage import Item, is_present

        model = self.model_part
        found = []
        for key in sorted({k for ks in self.items.values() for k in ks}):
            kind, _, text = key.partition(":")
            if not is_present(Item(kind, text), model) and is_present(Item(kind, text), self.completion):
                found.append(text)
        return tuple(sorted(set(found)))

    @property
    def vid(self) -> str:
        """``s3``: how views name a summary version."""
        return f"s{self.version}"

    def to_record(self) -> dict[str, Any]:
        """Every stored field, as :meth:`SummaryBook.restore` takes it back
        (``wisp export``'s JSON: issue 16)."""
        return {"version": self.version, "text": self.text, "covers": list(self.covers),
                "kept_whole": list(self.kept_whole), "refs": [r.to_dict() for r in self.refs],
                "items": {str(k): list(v) for k, v in self.items.items()}, "model": self.model,
                "attempts": self.attempts, "created_at": self.created_at, "audit_event_id": self.audit_event_id,
                "completion": self.completion, "kept": list(self.kept)}

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "text": self.text, "covers": list(self.covers),
                "covers_text": turn_ranges(self.covers), "kept_whole": list(self.kept_whole),
                "references": [r.entry for r in self.refs], "model": self.model,
                "attempts": self.attempts, "time": self.created_at, "completion": self.completion,
                "model_part": self.model_part, "kept": list(self.kept), "missed": list(self.missed),
                "origin": self.origin, "base": self.base, "restores": self.restores, "focus": self.focus}


_COLS = ("conversation_id, version, text, covers, kept_whole, refs, items, model, attempts, created_at, audit_event_id,"
         " completion, kept, origin, base, restores, focus")


def _loads(text: str | None, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _version(row: Any) -> SummaryVersion:
    r = tuple(row)
    items = {int(k): list(v) for k, v in (_loads(r[6], {}) or {}).items()}
    refs = tuple(OutputRef.from_dict(d) for d in _loads(r[5], []) or [] if isinstance(d, dict) and "entry" in d)
    return SummaryVersion(conversation_id=r[0], version=r[1], text=r[2],
                          covers=tuple(sorted(int(t) for t in _loads(r[3], []))),
                          kept_whole=tuple(sorted(int(t) for t in _loads(r[4], []))),
                          refs=refs, items=items, model=r[7], attempts=r[8], created_at=r[9],
                          audit_event_id=r[10], completion=r[11] or "",
                          kept=tuple(str(k) for k in _loads(r[12], []) or []), origin=r[13] or "fit",
                          base=r[14], restores=r[15], focus=r[16])


class SummaryBook:
    """The ``summaries`` table of a :class:`wisp.core.store.Store` (and the
    audit events of each version)."""

    def __init__(self, store: Any, audit: Any = None) -> None:
        self.store = store
        self.audit = audit

    async def latest(self, conversation: int) -> SummaryVersion | None:
        """The version in effect: the newest, or ``None`` when there is none
        or the newest is :attr:`~SummaryVersion.empty` (an undo cleared the summary)."""
        newest = await self.newest(conversation)
        return None if newest is None or newest.empty else newest

    async def newest(self, conversation: int) -> SummaryVersion | None:
        """The newest version, empty or not, or ``None``."""
        row = next(iter(await self.store.db.execute_fetchall(
            f"SELECT {_COLS} FROM summaries WHERE conversation_id = ? ORDER BY version DESC LIMIT 1",
            (conversation,))), None)
        return _version(row) if row else None

    async def versions(self, conversation: int) -> list[SummaryVersion]:
        """Every version, oldest first."""
        return [_version(r) for r in await self.store.db.execute_fetchall(
            f"SELECT {_COLS} FROM summaries WHERE conversation_id = ? ORDER BY version", (conversation,))]

    async def get(self, conversation: int, version: int) -> SummaryVersion | None:
        """Version ``version``, or ``None``."""
        row = next(iter(await self.store.db.execute_fetchall(
            f"SELECT {_COLS} FROM summaries WHERE conversation_id = ? AND version = ?", (conversation, version))),
            None)
        return _version(row) if row else None

    async def as_of(self, conversation: int, moment: str | None) -> list[SummaryVersion]:
        """The versions written before ``moment`` (UTC ISO text; ``None``:
        every version), oldest first: the running summary as it stood then
        (``/fork``: issue 16)."""
        versions = await self.versions(conversation)
        return versions if moment is None else [v for v in versions if v.created_at < moment]

    async def count(self, conversation: int) -> int:
        """How many summary versions a conversation has."""
        return len(await self.versions(conversation))

    async def restore(self, conversation: int, records: Any) -> int:
        """Store summary versions as they were (:meth:`SummaryVersion.to_record`'s
        shape; version numbers and times kept) in one transaction, into a
        conversation that has none yet (``wisp import``, ``/fork``); no
        audit event is written. Returns how many. Raises ``ValueError`` for
        a conversation that has versions already."""
        rows = []
        for r in records:
            rows.append((conversation, int(r["version"]), str(r.get("text") or ""),
                         json.dumps(sorted(int(t) for t in r.get("covers") or [])),
                         json.dumps(sorted(int(t) for t in r.get("kept_whole") or [])),
                         json.dumps([d for d in r.get("refs") or [] if isinstance(d, dict)], ensure_ascii=False),
                         json.dumps({str(k): list(v) for k, v in (r.get("items") or {}).items()}, ensure_ascii=False),
                         r.get("model"), int(r.get("attempts") or 1), r.get("created_at") or "",
                         r.get("audit_event_id"), str(r.get("completion") or ""),
                         json.dumps([str(k) for k in r.get("kept") or []], ensure_ascii=False)))
        if not rows:
            return 0
        async with self.store.transaction() as db:
            async with db.execute("SELECT COUNT(*) FROM summaries WHERE conversation_id = ?", (conversation,)) as cur:
                if (await cur.fetchone())[0]:
                    raise ValueError(f"conversation {conversation} has a running summary already")
            await db.executemany(
                "INSERT INTO summaries (conversation_id, version, text, covers, kept_whole, refs, items, model,"
                " attempts, created_at, audit_event_id, completion, kept)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    async def record(self, conversation: int, text: str, covers: set[int] | list[int], *,
                     kept_whole: set[int] | list[int] = (), refs: list[OutputRef] | tuple[OutputRef, ...] = (),
                     items: dict[int, list[str]] | None = None, model: str | None = None,
                     attempts: int = 1, new_turns: list[int] | None = None,
                     turn: int | None = None, completion: str = "",
                     kept: list[str] | tuple[str, ...] = (), origin: str = "fit", base: int | None = None,
                     restores: int | None = None, focus: str | None = None) -> SummaryVersion:
        """Store the next version and write its ``summary.recorded`` audit
        event (version, the turns it covers, the turns newly covered, the
        turns kept whole, attempts, model, the part wisp completed, origin).
        ``completion`` is the end of ``text`` that wisp wrote itself; ``kept``
        the identifiers the version keeps; ``origin``, ``base``, ``restores``
        and ``focus`` as :class:`SummaryVersion` has them. Returns the version."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        covers_l = sorted(set(int(t) for t in covers))
        kept_l = sorted(set(int(t) for t in kept_whole))
        items = {int(k): list(v) for k, v in (items or {}).items()}
        async with self.store.transaction() as db:
            ((version,),) = await db.execute_fetchall(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM summaries WHERE conversation_id = ?", (conversation,))
            version = int(version)
            await db.execute(
                "INSERT INTO summaries (conversation_id, version, text, covers, kept_whole, refs, items, model,"
                " attempts, created_at, completion, kept, origin, base, restores, focus)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation, version, text, json.dumps(covers_l), json.dumps(kept_l),
                 json.dumps([r.to_dict() for r in refs], ensure_ascii=False),
                 json.dumps({str(k): v for k, v in items.items()}, ensure_ascii=False), model, attempts, now,
                 completion, json.dumps(list(kept), ensure_ascii=False), origin, base, restores, focus),
            )
        event_id = None
        if self.audit is not None:
            ref = self.audit.write("summary.recorded", {
                "version": version, "covers": covers_l, "covers_text": turn_ranges(covers_l),
                "new_turns": sorted(new_turns or []), "kept_whole": kept_l, "attempts": attempts,
                "model": model, "chars": len(text), "references": [r.entry for r in refs], "text": text,
                "completion": completion, "kept": list(kept), "origin": origin, "base": base,
                "restores": restores, "focus": focus,
            }, conversation=conversation, turn=turn)
            if ref is not None:
                event_id = ref.event_id
                async with self.store.transaction() as db:
                    await db.execute("UPDATE summaries SET audit_event_id = ? WHERE conversation_id = ? AND version = ?",
                                     (event_id, conversation, version))
        return SummaryVersion(conversation, version, text, tuple(covers_l), tuple(kept_l), tuple(refs), items,
                              model, attempts, now, event_id, completion, tuple(kept), origin, base, restores, focus)


def _ref_line(ref: OutputRef, flags: ToolFlags) -> str:
    from .digest import Digest

    d = ref.digest or {}
    digest = Digest(int(d.get("lines") or 0), int(d.get("bytes") or 0), d.get("exit_status"),
                    d.get("first_error"), bool(d.get("failed")))
    head = f"- entry {ref.entry} (turn {ref.turn}): {ref.tool}"
    if ref.arguments:
        head += f" {ref.arguments}"
    line = f"{head}; {digest.text()}"
    if not flags.has_memory:
        if flags.read_only.get(ref.tool) is True:
            line += f"; call {ref.tool} again to see it"
        else:
            line += f"; not to be run again: the person can /show entry {ref.entry}"
    return line


def _first_listed(refs: list[OutputRef], costs: list[int], text: str, cap: int,
                  chars_per_token: float | None) -> int:
    """How many of the oldest references to leave out of the summary layer so
    that the index line standing for them (:func:`_unlisted_line`: a few
    tokens a reference, naming its entry) and the newest ones listed whole
    (``costs``: their lines' tokens, a few dozen each) fit ``cap`` tokens.
    Every reference in the index comes before any line in full, since an
    entry the model can name is one recall away and one it cannot is lost;
    when even the index does not fit, every reference goes to it (its own
    fitting names the newest). Linear in the references (it runs with every
    request)."""
    rows = [estimate_tokens(f"{_index_key(r)}: entry {r.entry}; ", chars_per_token) for r in refs]
    used = sum(rows) + 60
    start = len(refs)
    if used > cap:
        return start
    while start > 0 and used - rows[start - 1] + costs[start - 1] <= cap:
        start -= 1
        used += costs[start] - rows[start]
    return start


#: The head of the person's statements in a summary version's completion.
STATEMENTS_HEAD = "What the person stated, kept by wisp (turn, entry):"
#: The head older versions wrote over the same list (read back so that a later version keeps it).
OLD_STATEMENTS_HEADS = ("The person's own words, kept by wisp:",)
#: What a request shows of the person's statements takes at most this share of the budget (tokens,
#: as the server counts them): the newest sure ones first. A version stores more; none is lost.
STATEMENTS_SHARE = 0.2
#: Of a summary layer squeezed by the other layers, the person's statements take at most this share
#: and the references' index keeps at least this one: both are what the model can name or search by.
STATEMENTS_OF_LAYER = 0.4
INDEX_OF_LAYER = 0.3


def newest_within(lines: list[str], tokens: int | None, *, max_lines: int | None = None) -> tuple[list[str], int]:
    """The newest of ``lines`` (oldest first) whose estimates fit ``tokens``
    (all of them for ``None``) and number at most ``max_lines``, oldest
    first, and how many were left out."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = estimate_tokens(line) + 1
        if (tokens is not None and used + cost > tokens) or (max_lines is not None and len(kept) >= max_lines):
            break
        kept.append(line)
        used += cost
    kept.reverse()
    return kept, len(lines) - len(kept)


def _quote(line: str) -> str:
    return line.split(": ", 1)[1].strip('"') if ": " in line else line


def surest_newest_within(lines: list[str], tokens: int | None, *,
                         max_lines: int | None = None) -> tuple[list[str], int]:
    """:func:`newest_within` for statement lines (``- turn N, entry E: "…"``):
    the newest of the sure ones (:func:`~wisp.core.statements.statement_strength` 2)
    first, then the newest of the rest in the room (and count) left, in
    their order; and how many were left out."""
    from ..statements import statement_strength

    if tokens is None and (max_lines is None or len(lines) <= max_lines):
        return lines, 0
    sure = [i for i, line in enumerate(lines) if statement_strength(_quote(line)) >= 2]
    kept_sure, _ = newest_within([lines[i] for i in sure], tokens, max_lines=max_lines)
    used = sum(estimate_tokens(line) + 1 for line in kept_sure)
    chosen = set(sure[len(sure) - len(kept_sure):])
    rest = [i for i in range(len(lines)) if i not in set(sure)]
    kept_rest, _ = newest_within([lines[i] for i in rest], None if tokens is None else tokens - used,
                                 max_lines=None if max_lines is None else max_lines - len(kept_sure))
    chosen |= set(rest[len(rest) - len(kept_rest):])
    return [lines[i] for i in sorted(chosen)], len(lines) - len(chosen)


#: At most this many entries are named for the statements a capped list does not show.
MAX_NAMED_ENTRIES = 16
_ROW_ENTRY = re.compile(r"^- turn \d+, entry (\d+):")


def _entries_of(rows: Any, most: int = MAX_NAMED_ENTRIES) -> str:
    """``", in entry 3, entry 15, entry 19"`` for statement rows (``- turn N, entry E: "…"``): what a capped list
    names of the statements it leaves out, so the model can recall them by entry (a few tokens each);
    the oldest :data:`MAX_NAMED_ENTRIES` (the list keeps the newest, so the oldest are the furthest from
    anything the request still shows), ``""`` when no row names its entry."""
    numbers = sorted({int(m.group(1)) for r in rows for m in [_ROW_ENTRY.match(r)] if m})
    if not numbers:
        return ""
    shown = numbers[:most]
    if not shown:
        return ""
    more = ", …" if len(numbers) > len(shown) else ""
    return ", in " + ", ".join(f"entry {n}" for n in shown) + more  # each named as a recall names it


def cap_statements(text: str, tokens: int | None) -> str:
    """``text`` (a version's text) with its block of the person's statements
    (:data:`STATEMENTS_HEAD`, the last block) cut to ``tokens``: the newest
    sure statements first, and one line saying how many are not shown (the
    search finds them). ``text`` as it is when it fits or has no such block."""
    if tokens is None or STATEMENTS_HEAD not in text:
        return text
    before, block = text.rsplit(STATEMENTS_HEAD, 1)
    rows = [line for line in block.splitlines() if line.startswith("- ") and not line.startswith("- (")]
    after = [line for line in block.splitlines() if line.strip() and not line.startswith("- ")]
    kept, gone = surest_newest_within(rows, tokens)
    if not gone:
        return text
    most = min(MAX_NAMED_ENTRIES, tokens // 12)  # the names take at most about a quarter of the list's tokens

    def gone_line(kept_rows: list[str], count: int) -> str:
        return (f"- ({count} older statements not shown for room{_entries_of([r for r in rows if r not in kept_rows], most)}; "
                "a search of the conversation finds them)")

    # the line that names what went counts against the list's tokens too
    kept, gone = surest_newest_within(rows, max(0, tokens - estimate_tokens(gone_line(kept, gone)) - 4))
    head = [gone_line(kept, gone)]
    lines = [STATEMENTS_HEAD, *head, *kept, *after]
    return before + "\n".join(lines)


def _index_key(ref: OutputRef) -> str:
    """What a reference's call read or ran, in a few words: the path of a
    read (``service.toml``), else the tool and its arguments' values
    (``run_command pytest -q``), at most 60 characters."""
    try:
        args = json.loads(ref.arguments) if ref.arguments else {}
    except ValueError:
        args = ref.arguments
    if isinstance(args, dict):
        values = " ".join(" ".join(str(v).split()) for v in args.values() if isinstance(v, (str, int, float)))
    else:
        values = " ".join(str(args).split())
    key = values if ref.tool == "read_file" and values else f"{ref.tool} {values}".strip()
    return key if len(key) <= 60 else key[:59] + "…"


#: Files whose reads hold settings (a value a later question asks for), by their name's ending.
SETTINGS_FILES = (".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".conf", ".env", ".properties", ".lock")


def _index_rank(key: str, ref: OutputRef) -> int:
    """Where an output comes in the compact index: 0 a run or call that
    failed (its error is asked for later, and no fact holds it), 1 a read of
    a settings file (:data:`SETTINGS_FILES`, ``.env.production``: the values
    asked for later), 2 any other read or a read-only tool's output, 3 a run
    that did not fail (the tests facts hold its result)."""
    digest = ref.digest or {}
    if digest.get("failed") or digest.get("exit_status") not in (0, None):
        return 0
    if ref.tool == "read_file":
        name = key.rsplit("/", 1)[-1].lower()
        return 1 if name.endswith(SETTINGS_FILES) or name.startswith(".env") else 2
    return 3 if ref.read_only is not True else 2


def _unlisted_line(refs: list[OutputRef], shown: str, room: int, chars_per_token: float | None,
                   has_memory: bool = True) -> str:
    """The line that stands for ``refs``, the references left out of the
    summary layer: their entries' range, how to find them (the memory tool's
    search, or the person's ``/search`` and ``/show``), and, newest first as
    many as fit in ``room`` tokens, a compact index of what was read and run
    (``service.toml: entry 5``; the entry's turn is a recall away), so that the model can still name
    each output. The rest are counted; search reaches them."""
    how = ('memory "recall WORDS" searches them, memory "recall entry N" shows one' if has_memory
           else "the person can /search them and /show any of them")
    line = f"- (outputs of entries {refs[0].entry}–{refs[-1].entry} not listed one by one; {how})"
    index: dict[str, list[OutputRef]] = {}
    for r in reversed(refs):
        index.setdefault(_index_key(r), []).append(r)
    used = estimate_tokens(line + " Index, newest first: ", chars_per_token) + 12
    keys = sorted(index, key=lambda k: _index_rank(k, index[k][0]))  # sorted() keeps newest first in a rank
    row_texts = []
    for key in keys:
        group = index[key]
        row = f"{key}: " + ", ".join(f"entry {r.entry}" for r in group[:3])
        row_texts.append(row + (f" and {len(group) - 3} more" if len(group) > 3 else ""))
    row_costs = [estimate_tokens(r + "; ", chars_per_token) for r in row_texts]
    singles = [f"{key}: entry {index[key][0].entry}" for key in keys]  # the newest entry of each
    single_costs = [estimate_tokens(r + "; ", chars_per_token) for r in singles]
    name_costs = [estimate_tokens(k + ", ", chars_per_token) for k in keys]
    # as many keys as fit by an entry (the newest entry of each), then the newest with all their entries;
    # when not every key fits by an entry, the newest by an entry and the rest by name as far as they go
    names: list[str] = []
    if used + sum(single_costs) <= room:
        total = used + sum(single_costs)
        upgraded = 0
        while upgraded < len(keys) and total + row_costs[upgraded] - single_costs[upgraded] <= room:
            total += row_costs[upgraded] - single_costs[upgraded]
            upgraded += 1
        rows = row_texts[:upgraded] + singles[upgraded:]
    else:
        # the most keys by an entry that leave room for the others' names, and never fewer than fit in
        # half the room (an entry named is one the model can recall; a name is a search away); then the
        # others by name, in the index's order, as far as they go
        k = len(keys)
        while k > 0 and used + sum(single_costs[:k]) + sum(name_costs[k:]) > room:
            k -= 1
        half = 0
        while half < len(keys) and used + sum(single_costs[:half + 1]) <= (room + used) // 2:
            half += 1
        rows = singles[:max(k, half)]
        used += sum(single_costs[:len(rows)])
        for key, cost in list(zip(keys, name_costs))[len(rows):]:
            if used + cost > room:
                break
            names.append(key)
            used += cost
    rest = len(index) - len(rows) - len(names)
    if not rows and not names:
        return line
    text = line + " Index (failures, settings read, other reads, then passed runs; newest first): " + "; ".join(rows)
    if names:
        text += ("; also " if rows else "") + ", ".join(names)
    return text + (f"; and {rest} more read or run" if rest else "")


def summary_layer_text(version: SummaryVersion | None, flags: ToolFlags, *, max_ref_tokens: int | None = None,
                       chars_per_token: float | None = None, max_tokens: int | None = None,
                       max_statement_tokens: int | None = None) -> tuple[str, int]:
    """The summary layer's text for a version, and how many output
    references it lists (:func:`_layer_text`). The person's statements are
    shown within ``max_statement_tokens`` (:func:`cap_statements`), and the
    whole within ``max_tokens`` (estimated) when given: first the model's
    part (the least sure) is left out, then wisp's lines of what the person
    asked, then the references' lines give way to their index line, then
    the start of what is left; each cut is
    marked, and what wisp wrote last (the person's statements) stays."""
    def render(v: SummaryVersion, refs: int | None) -> tuple[str, int]:
        shown = dataclasses.replace(v, text=cap_statements(v.text, max_statement_tokens))
        return _layer_text(shown, flags, max_ref_tokens=refs, chars_per_token=chars_per_token)

    if version is None:
        return "", 0
    if max_tokens is not None:  # in a squeezed layer the statements and the index share it
        cap = int(max_tokens * STATEMENTS_OF_LAYER)
        max_statement_tokens = cap if max_statement_tokens is None else min(max_statement_tokens, cap)
    text, listed = render(version, max_ref_tokens)
    if max_tokens is None or estimate_tokens(text, chars_per_token) <= max_tokens:
        return text, listed

    def fits(t: str) -> bool:
        return estimate_tokens(t, chars_per_token) <= max_tokens

    # first the model's part goes (the least sure: wisp's part and the person's statements stay)
    if version.completion and version.model_part.strip() or version.model and not version.completion:
        version = dataclasses.replace(version, text="\n".join(
            p for p in (MODEL_PART_MARK, _held_by_model_part(version), version.completion.strip()) if p))
        text, listed = render(version, max_ref_tokens)
        if fits(text):
            return text, listed
    # then what the person asked in each turn (their words are a search away; what they stated stays)
    asked = [line for line in version.text.splitlines() if ": the person asked " in line
             or line.startswith("- (") and "not listed here for room" in line]
    if asked:
        version = dataclasses.replace(version, text="\n".join(
            line for line in version.text.splitlines() if line not in set(asked)))
        text, listed = render(version, max_ref_tokens)
        if fits(text):
            return text, listed
    # then the references' lines give way to their index, halving their share to a floor
    refs_cap = max_ref_tokens if max_ref_tokens is not None else estimate_tokens(text, chars_per_token)
    floor = max(60, int(max_tokens * INDEX_OF_LAYER))
    for _ in range(3):
        refs_cap = max(floor, refs_cap // 2)
        text, listed = render(version, refs_cap)
        if fits(text):
            return text, listed
    # last, the start of what is left (wisp's older lines) is not shown; its end (the person's statements)
    # stays, as many of them as leave the layer within its cap (the newest sure ones first)
    statements = max_statement_tokens
    for _ in range(6):
        body = cap_statements(version.text, statements).strip()
        rest = estimate_tokens(text, chars_per_token) - estimate_tokens(body, chars_per_token)
        room = max(40, max_tokens - rest)
        cut = dataclasses.replace(version, text=_keep_tail(body, room, chars_per_token))
        out = _layer_text(cut, flags, max_ref_tokens=refs_cap, chars_per_token=chars_per_token)
        if fits(out[0]) or statements is None or statements < 40:
            return out
        statements = int(statements * 0.7)
    return out


def _held_by_model_part(version: SummaryVersion) -> str:
    """The identifiers of the covered turns that only the model's part of
    ``version`` holds (wisp's part names the others), a line a turn, so that
    leaving the model's part out for room loses none of them."""
    from .coverage import Item, is_present

    model = version.model_part if version.completion else version.text
    rows = []
    for turn in sorted(version.items):
        held = sorted({text for kind, _, text in (k.partition(":") for k in version.items[turn])
                       if is_present(Item(kind, text), model) and not is_present(Item(kind, text), version.completion)})
        if held:
            rows.append(f"- turn {turn}: " + ", ".join(held))
    return ("It named:\n" + "\n".join(rows)) if rows else ""


#: Stands for the model's part of a summary the layer leaves out for room.
MODEL_PART_MARK = '[the model\'s part of this summary is not shown for room; memory "recall summary" shows it]'
#: Marks the start of a summary text the layer leaves out for room.
TAIL_MARK = '[…the start of this summary is not shown for room; memory "recall summary" shows it whole]'


def _keep_tail(text: str, tokens: int, chars_per_token: float | None) -> str:
    """The end of ``text`` holding about ``tokens`` tokens, from a line start, after :data:`TAIL_MARK`."""
    per = chars_per_token or 4.0
    limit = max(80, int(tokens * per) - len(TAIL_MARK) - 2)
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    at = tail.find("\n")
    if 0 <= at < len(tail) // 2:
        tail = tail[at + 1:]
    return TAIL_MARK + "\n" + tail


def _layer_text(version: SummaryVersion | None, flags: ToolFlags, *, max_ref_tokens: int | None = None,
                chars_per_token: float | None = None) -> tuple[str, int]:
    """The summary layer's text for a version, and how many output
    references it lists.

    The text names the turns covered and the version, then the summary, then
    one line per tool output of the covered turns (entry, turn, tool,
    arguments, digest) with how to see it again. When the lines would pass
    ``max_ref_tokens`` (estimated), the oldest are left out and one line
    names their entries' range, which ``/show`` still shows, and the
    identifiers their calls named (:func:`_unlisted_line`).
    """
    if version is None:
        return "", 0
    head = f"Running summary of turns {turn_ranges(version.covers)} (version {version.version}):"
    parts = [head, version.text.strip()]
    refs = list(version.refs)
    listed = 0
    if refs:
        if flags.has_memory:
            parts.append('Tool outputs of those turns, not repeated; to see one: memory "recall entry N".')
        else:
            parts.append("Tool outputs of those turns, not repeated:")
        lines = [_ref_line(r, flags) for r in refs]
        if max_ref_tokens is not None:
            costs = [estimate_tokens(line, chars_per_token) + 1 for line in lines]
            if sum(costs) > max_ref_tokens:
                start = _first_listed(refs, costs, "\n".join(parts), max_ref_tokens, chars_per_token)
                parts.append(_unlisted_line(refs[:start], "\n".join([*parts, *lines[start:]]),
                                            max_ref_tokens - sum(costs[start:]), chars_per_token,
                                            flags.has_memory))
                lines = lines[start:]
        parts.extend(lines)
        listed = len(lines)
    return "\n".join(parts), listed
