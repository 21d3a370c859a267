"""Your conversations at hand: export, import, fork, delete, and what /retry, /edit and /copy act on.

Issue 16 ("Your conversations and models at hand"), the wisp way: nothing is
ever lost, and every change shows in the record.

- :func:`gather` collects one conversation through each owner's API: the
  store's conversation, turns (every version) and entries; the layered
  context's fact versions (:class:`~wisp.core.context.facts.FactBook`) and
  running-summary versions (:class:`~wisp.core.context.summary.SummaryBook`);
  the audit log's event ids. No SQL runs here. :func:`to_json` writes it,
  with every entry, fact version, summary version and audit event id;
  :func:`to_markdown` is for people, with the thinking, tool calls and
  results folded into ``<details>``.
- :func:`restore` (``wisp import``) makes a new conversation of an export:
  the same turns, entries, facts and summary versions under new ids.
  :func:`fork` (``/fork``, ``wisp --fork``) is :func:`gather` cut at a turn,
  then :func:`restore`: the turns up to there, with the facts and summary as
  they stood then.
- :func:`remove` (``wisp conversations rm``) says what goes with a
  conversation (its turns, entries, fact and summary versions), deletes it,
  and blanks its audit events only when asked.
- :func:`retry_target`, :func:`last_reply` and :func:`code_blocks` find what
  ``/retry``, ``/edit`` and ``/copy`` act on.

The JSON export's shape (``format`` ``wisp-conversation``, ``version`` 1)::

    {"format": "wisp-conversation", "version": 1, "exported_at": "…Z", "wisp": "0.x",
     "conversation": {"id", "title", "workdir", "model", "endpoint", "created_at", "updated_at", "tools"},
     "cut_at_turn": null,
     "turns": [{"number", "state", "started_at", "ended_at", "prompt_tokens", "completion_tokens",
                "error", "superseded_by"}],
     "entries": [{"id", "number", "turn", "kind", "content", "tool_name", "tool_call_id", "arguments",
                  "meta", "audit_event_id", "created_at"}],
     "facts": [{"id", "number", "subject", "name", "value", "source", …, "audit_event_id"}],
     "summaries": [{"version", "text", "covers", …, "audit_event_id"}],
     "audit_events": ["ev-…", …]}
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .context.facts import FactBook, FactError
from .context.summary import SummaryBook, turn_ranges
from .store import StoreError
from .clock import utc_now

__all__ = [
    "FORMAT",
    "VERSION",
    "ArchiveError",
    "RemoveReport",
    "gather",
    "to_json",
    "to_markdown",
    "restore",
    "load_export",
    "fork",
    "parse_fork",
    "remove",
    "retry_target",
    "last_reply",
    "code_blocks",
    "count_turns",
    "turns_phrase",
]

#: The ``format`` of a JSON export.
FORMAT = "wisp-conversation"
#: The version of the JSON export's shape.
VERSION = 1


class ArchiveError(Exception):
    """An export, import, fork or delete that cannot be done; the message is
    one line saying what to do."""


def count_turns(turns: Any) -> tuple[int, int]:
    """``(current, earlier)`` of a conversation's turns (:class:`Turn` rows or
    an export's turn dicts): the one rule by which ``wisp conversations``,
    ``/export`` and ``/fork`` count turns. A conversation has as many turns as
    the screen shows (its current versions); a turn that ``/retry`` or
    ``/edit`` replaced is an earlier version, counted apart, because turn
    numbers keep counting through versions and the highest number is no
    count."""
    current = earlier = 0
    for t in turns:
        replaced = t.get("superseded_by") if isinstance(t, dict) else t.superseded_by
        if replaced is None:
            current += 1
        else:
            earlier += 1
    return current, earlier


def turns_phrase(current: int, earlier: int = 0) -> str:
    """``8 turns``, ``1 turn``, ``8 turns and 3 earlier versions``."""
    text = f"{current} turn{'' if current == 1 else 's'}"
    if earlier:
        text += f" and {earlier} earlier version{'' if earlier == 1 else 's'}"
    return text


def _now() -> str:
    return utc_now()


def _books(store: Any, audit: Any) -> tuple[FactBook, SummaryBook]:
    return FactBook(store, audit), SummaryBook(store, audit)


async def gather(store: Any, audit: Any, conversation_id: int, *, upto_turn: int | None = None) -> dict[str, Any]:
    """One conversation as the JSON export's dict (see the module doc).

    ``store`` a :class:`wisp.core.store.Store` opened with every table
    (:func:`wisp.core.database.open_store`); ``audit`` an
    :class:`~wisp.core.audit.AuditLog` or ``None``. With ``upto_turn``, only
    turns numbered up to it (every version), their entries, and the fact and
    summary versions as they stood when the next turn began (``/fork``); a
    turn ``upto_turn`` that a later one replaced is current again. Raises
    :class:`ArchiveError` for an unknown conversation or turn."""
    conv = await store.get_conversation(conversation_id)
    if conv is None:
        raise ArchiveError(f"no conversation {conversation_id}; `wisp conversations` lists them")
    turns = await store.turns(conversation_id, versions=True)
    moment = None
    if upto_turn is not None:
        if not any(t.number == upto_turn for t in turns):
            have = (f"{turns_phrase(*count_turns(turns))}, numbered up to {turns[-1].number}" if turns
                    else "no turns yet")
            raise ArchiveError(f"conversation {conversation_id} has no turn {upto_turn} ({have})")
        later = [t for t in turns if t.number > upto_turn]
        moment = later[0].started_at if later else None
        turns = [t for t in turns if t.number <= upto_turn]
    numbers = {t.id: t.number for t in turns}
    entries = [e for e in await store.entries(conversation_id)
               if (e.turn_id in numbers) or (e.turn_id is None and (moment is None or e.created_at < moment))]
    facts, summaries = _books(store, audit)
    fact_versions = await facts.as_of(conversation_id, moment)
    summary_versions = await summaries.as_of(conversation_id, moment)
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _now(),
        "wisp": __version__,
        "conversation": {
            "id": conv.id, "title": conv.title, "workdir": conv.workdir, "model": conv.model,
            "endpoint": conv.endpoint, "created_at": conv.created_at, "updated_at": conv.updated_at,
            "tools": await store.conversation_tools(conversation_id),
        },
        "cut_at_turn": upto_turn,
        "turns": [{
            "number": t.number, "state": t.state, "started_at": t.started_at, "ended_at": t.ended_at,
            "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens, "error": t.error,
            "superseded_by": t.superseded_by if upto_turn is None or (t.superseded_by or 0) <= upto_turn else None,
        } for t in turns],
        "entries": [{
            "id": e.id, "number": e.number, "turn": numbers.get(e.turn_id) if e.turn_id is not None else None,
            "kind": e.kind, "content": e.content, "tool_name": e.tool_name, "tool_call_id": e.tool_call_id,
            "arguments": e.arguments, "meta": e.meta, "audit_event_id": e.audit_event_id,
            "created_at": e.created_at,
        } for e in entries],
        "facts": [{"id": f.id, **f.to_record()} for f in fact_versions],
        "summaries": [v.to_record() for v in summary_versions],
        "audit_events": audit.event_ids(conversation_id) if audit is not None else [],
    }


def to_json(data: dict[str, Any]) -> str:
    """The export as JSON text (UTF-8, indented, ending in a newline)."""
    return json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n"


def _fence(text: str, lang: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


#: HTML blocks that a blank line does not end (CommonMark's kinds 1 to 5): how each starts, and
#: the text that ends it.
_HTML_UNTIL = ((re.compile(r"<(script|pre|style|textarea)(\s|>|$)", re.I), None),
               (re.compile(r"<!--"), "-->"), (re.compile(r"<\?"), "?>"),
               (re.compile(r"<!\[CDATA\["), "]]>"), (re.compile(r"<![A-Za-z]"), ">"))


def close_blocks(text: str) -> str:
    """``text`` (one prompt, reply, thinking or summary of an export) with a
    code fence it leaves open closed, by a fence of the same character and
    length (and an HTML block that only its own end marker ends, such as an
    unclosed ``<!--``, ended), so that what the export puts after it (the
    next ``</details>``, ``**wisp**``, the next turn's heading) is not read
    as part of it. Read as CommonMark reads it (markdown-it, which Textual
    brings): a fence in a list or a quote ends with it and needs nothing,
    and a three-backtick line inside an indented code block opens nothing."""
    from markdown_it import MarkdownIt

    text = re.sub(r"\r\n?", "\n", text).replace("\0", "\ufffd").rstrip()
    if not text:
        return text
    lines = text.split("\n")
    last = [t for t in MarkdownIt("commonmark").parse(text) if t.level == 0 and t.map]
    if not last or last[-1].map[1] < len(lines):
        return text
    token = last[-1]
    start, end = token.map
    if token.type == "fence":
        mark = token.markup
        closer = lines[end - 1].expandtabs(4) if end - 1 > start else ""
        indent = len(closer) - len(closer.lstrip(" "))
        body = closer.strip()
        if not (indent < 4 and body and set(body) == {mark[0]} and len(body) >= len(mark)):
            return text + "\n" + mark
    elif token.type == "html_block":
        first = lines[start].lstrip(" ")
        for opener, ender in _HTML_UNTIL:
            m = opener.match(first)
            if m:
                end_mark = f"</{m.group(1)}>" if ender is None else ender
                after = "\n".join(lines[start:end])[m.end():]
                if end_mark.lower() not in after.lower():
                    return text + "\n" + end_mark
                break
    return text


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _turn_markdown(turn: dict[str, Any], entries: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for e in entries:
        kind, content = e["kind"], e["content"] or ""
        if kind == "prompt":
            out += ["**You**", "", close_blocks(content), ""]
        elif kind == "thinking":
            out += ["<details><summary>Thinking</summary>", "", close_blocks(content), "", "</details>", ""]
        elif kind == "tool_call":
            args = json.dumps(e.get("arguments") or {}, ensure_ascii=False)
            out += [f"<details><summary>Tool call: {_html(e.get('tool_name') or '?')} {_html(args[:80])}</summary>",
                    "", _fence(json.dumps(e.get("arguments") or {}, ensure_ascii=False, indent=2), "json"), "",
                    "</details>", ""]
        elif kind == "tool_result":
            bad = " (failed)" if (e.get("meta") or {}).get("error") else ""
            out += [f"<details><summary>Tool result: {_html(e.get('tool_name') or '?')}{bad}, "
                    f"{len(content):,} characters</summary>", "", _fence(content), "", "</details>", ""]
        elif kind == "reply":
            if content.strip():
                out += ["**wisp**", "", close_blocks(content), ""]
        elif kind == "notice":
            out += [f"> {line}" for line in content.splitlines() or [""]] + [""]
    if turn.get("state") not in ("done", None):
        why = f": {turn['error']}" if turn.get("error") else ""
        out += [f"*This turn ended {turn['state']}{why}.*", ""]
    return out


def to_markdown(data: dict[str, Any]) -> str:
    """The export for people: a heading per turn, the prompt and the reply;
    thinking, tool calls and tool results folded into ``<details>``; a
    turn that ``/retry`` or ``/edit`` replaced folded under the version that
    replaced it; then the current facts and the running summary."""
    conv = data["conversation"]
    by_turn: dict[int | None, list[dict[str, Any]]] = {}
    for e in data["entries"]:
        by_turn.setdefault(e.get("turn"), []).append(e)
    turns = {t["number"]: t for t in data["turns"]}
    earlier: dict[int, list[int]] = {}
    for t in data["turns"]:  # chains of versions: each superseded turn names the next
        if t.get("superseded_by") is not None:
            earlier.setdefault(int(t["superseded_by"]), []).append(t["number"])
    lines = [f"# {conv.get('title') or 'Conversation ' + str(conv.get('id'))}", ""]
    meta = [f"conversation {conv.get('id')}", f"in `{conv.get('workdir')}`"]
    if conv.get("model"):
        meta.append(f"model {conv['model']}")
    meta.append(f"started {conv.get('created_at')}")
    if data.get("cut_at_turn") is not None:
        meta.append(f"up to turn {data['cut_at_turn']}")
    lines += ["*" + ", ".join(meta) + f"; exported by wisp {data.get('wisp')}.*", ""]

    def versions_of(number: int) -> list[int]:
        chain: list[int] = []
        todo = list(earlier.get(number, []))
        while todo:
            n = todo.pop()
            chain.insert(0, n)
            todo.extend(earlier.get(n, []))
        return chain

    for t in data["turns"]:
        if t.get("superseded_by") is not None:
            continue
        number = t["number"]
        older = versions_of(number)
        head = f"## Turn {number}"
        if older:
            head += f" (version {len(older) + 1} of {len(older) + 1})"
        lines += [head, "", f"*{t.get('started_at')}*", ""]
        for n in older:
            inner = _turn_markdown(turns[n], by_turn.get(n, []))
            lines += [f"<details><summary>Earlier version: turn {n}, replaced</summary>", "", *inner, "</details>", ""]
        lines += _turn_markdown(t, by_turn.get(number, []))
    facts = [f for f in data.get("facts", []) if f.get("state") == "current"]
    if facts:
        lines += ["## Facts", ""]
        for f in facts:
            label = f"{f['subject']} {f['name']}".strip()
            lines.append(f"- {label} = {f['value']} *(c{f['number']}, {f['source']})*")
        lines.append("")
    if data.get("summaries"):
        last = data["summaries"][-1]
        lines += [f"## Running summary (s{last['version']}, turns {turn_ranges(last.get('covers') or [])})", "",
                  close_blocks(last.get("text") or ""), ""]
    return "\n".join(lines).rstrip() + "\n"


def load_export(text: str) -> dict[str, Any]:
    """A JSON export read back and checked. Raises :class:`ArchiveError`
    saying what is wrong (not JSON, not a wisp export, a newer version, a
    part missing)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ArchiveError(f"not JSON ({exc}); give a file written by `wisp export ID --format json`") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ArchiveError("not a wisp conversation export (its \"format\" is not "
                           f"\"{FORMAT}\"); give a file written by `wisp export ID --format json`")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION:
        raise ArchiveError(f"export version {data.get('version')!r} is newer than this wisp reads ({VERSION}); "
                           "upgrade wisp")
    for part in ("conversation", "turns", "entries"):
        if part not in data:
            raise ArchiveError(f"the export has no {part!r}; it is cut short or was edited by hand")
    if not isinstance(data["conversation"], dict) or not data["conversation"].get("workdir"):
        raise ArchiveError("the export's conversation has no workdir")
    if not isinstance(data["turns"], list) or not isinstance(data["entries"], list):
        raise ArchiveError("the export's turns and entries must be lists")
    return data


async def restore(store: Any, audit: Any, data: dict[str, Any], *, title: str | None = None,
                  workdir: str | None = None, event: str = "conversation.imported",
                  origin: dict[str, Any] | None = None) -> int:
    """Make a new conversation of an export (``wisp import``): the same
    turns, entries (numbers, contents, times and audit event ids kept),
    fact versions and summary versions, under new ids. ``title`` and
    ``workdir`` replace the export's; an audit event ``event`` (with ``origin``) records where
    it came from. Returns the new conversation's id. Raises
    :class:`ArchiveError` for an export the store or the books refuse
    (nothing is left half made)."""
    conv = dict(data["conversation"])
    if title is not None:
        conv["title"] = title
    if workdir is not None:
        conv["workdir"] = workdir
    try:
        new = await store.restore_conversation(conv, data["turns"], data["entries"])
    except (StoreError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ArchiveError(f"the export could not be restored: {exc}") from None
    facts, summaries = _books(store, audit)
    try:
        await facts.restore(new.id, data.get("facts") or [])
        await summaries.restore(new.id, data.get("summaries") or [])
    except (FactError, KeyError, TypeError, ValueError, AttributeError, OverflowError, sqlite3.Error) as exc:
        await store.delete_conversation(new.id)
        raise ArchiveError(f"the export's facts or summary could not be restored: {exc}") from None
    if audit is not None:
        audit.write(event, {"from": origin or {"conversation": conv.get("id")}, "turns": len(data["turns"]),
                            "entries": len(data["entries"]), "facts": len(data.get("facts") or []),
                            "summaries": len(data.get("summaries") or [])}, conversation=new.id)
    return new.id


def parse_fork(text: str) -> tuple[int, int | None]:
    """``ID`` or ``ID:TURN`` (``wisp --fork``) as ``(id, turn or None)``.
    Raises :class:`ArchiveError` for anything else."""
    m = re.fullmatch(r"\s*(\d{1,18})\s*(?::\s*(\d{1,18})\s*)?", text or "")
    if not m:
        raise ArchiveError(f"--fork takes ID or ID:TURN, such as 3 or 3:5; not {text!r}")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)


async def fork(store: Any, audit: Any, conversation_id: int, turn: int | None = None) -> int:
    """A new conversation holding conversation ``conversation_id``'s turns up
    to ``turn`` (every turn when ``None``), with its facts and running
    summary as they stood then (:func:`gather` cut, then :func:`restore`).
    Returns the new id. Raises :class:`ArchiveError` for an unknown
    conversation or turn."""
    data = await gather(store, audit, conversation_id, upto_turn=turn)
    title = data["conversation"].get("title") or f"conversation {conversation_id}"
    at = f" at turn {turn}" if turn is not None else ""
    return await restore(store, audit, data, title=f"{title} (fork of #{conversation_id}{at})",
                         event="conversation.forked", origin={"conversation": conversation_id, "turn": turn})


@dataclass
class RemoveReport:
    """What :func:`remove` deleted: ``conversation`` (its id) and ``title``,
    ``turns``, ``entries``, ``facts`` (versions), ``summaries`` (versions),
    ``audit_purged`` (events blanked; 0 unless asked) and
    ``audit_kept`` (events the log keeps)."""

    conversation: int
    title: str | None
    turns: int = 0
    entries: int = 0
    facts: int = 0
    summaries: int = 0
    audit_purged: int = 0
    audit_kept: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "title": self.title, "turns": self.turns,
                "entries": self.entries, "facts": self.facts, "summaries": self.summaries,
                "audit_purged": self.audit_purged, "audit_kept": self.audit_kept}

    def text(self) -> str:
        """One paragraph for people, saying what went and what stays."""
        title = f" ({self.title})" if self.title else ""
        gone = (f"Deleted conversation {self.conversation}{title}: {self.turns} turns, {self.entries} entries, "
                f"{self.facts} fact versions, {self.summaries} summary versions.")
        if self.audit_purged:
            return gone + f" Its {self.audit_purged} audit events were blanked out (--purge-audit)."
        return gone + (f" The audit log keeps its {self.audit_kept} events (--purge-audit blanks them)."
                       if self.audit_kept else " The audit log holds no event of it.")


async def describe(store: Any, audit: Any, conversation_id: int) -> RemoveReport:
    """What :func:`remove` would delete, without deleting it. Raises
    :class:`ArchiveError` for an unknown conversation."""
    conv = await store.get_conversation(conversation_id)
    if conv is None:
        raise ArchiveError(f"no conversation {conversation_id}; `wisp conversations` lists them")
    counts = await store.conversation_counts(conversation_id)
    facts, summaries = _books(store, audit)
    return RemoveReport(conversation_id, conv.title, counts["turns"], counts["entries"],
                        await facts.count(conversation_id), await summaries.count(conversation_id),
                        audit_kept=len(audit.event_ids(conversation_id)) if audit is not None else 0)


async def remove(store: Any, audit: Any, conversation_id: int, *, purge_audit: bool = False) -> RemoveReport:
    """Delete a conversation: its turns and entries (the store), its fact and
    summary versions (their tables follow by cascade); the audit log keeps
    its events unless ``purge_audit`` (then they are blanked in place:
    :meth:`wisp.core.audit.AuditLog.purge`). Episodic memories stay (``wisp
    memory forget`` removes one). Returns what went. Raises
    :class:`ArchiveError` for an unknown conversation or one whose turn
    runs in another wisp."""
    report = await describe(store, audit, conversation_id)
    try:
        await store.delete_conversation(conversation_id)
    except StoreError as exc:
        raise ArchiveError(str(exc)) from None
    if audit is not None:
        if purge_audit:
            report.audit_purged = audit.purge(conversation_id)
            report.audit_kept = 0
        audit.write("conversation.deleted", report.to_dict(), conversation=conversation_id)
    return report


async def retry_target(store: Any, conversation_id: int | None) -> tuple[int, str]:
    """The last current turn of a conversation and its prompt, as
    ``(turn number, prompt)``: what ``/retry`` asks again and ``/edit``
    puts back. Raises :class:`ArchiveError` when there is none yet or it is
    still running."""
    if conversation_id is None:
        raise ArchiveError("nothing to ask again yet: send a prompt first")
    turns = await store.turns(conversation_id, limit=1)
    if not turns:
        raise ArchiveError("nothing to ask again yet: send a prompt first")
    turn = turns[-1]
    if turn.state == "open":
        raise ArchiveError(f"turn {turn.number} is still running; wait for it, or press Esc")
    prompt = next((e.content for e in await store.entries(conversation_id, turn.id) if e.kind == "prompt"), None)
    if prompt is None:
        raise ArchiveError(f"turn {turn.number} has no prompt to ask again")
    return turn.number, prompt


async def last_reply(store: Any, conversation_id: int | None) -> tuple[int, str] | None:
    """The last current turn's readable reply, as ``(turn number, text)``
    (its reply entries joined, thinking and tools left out), or ``None``
    when there is none (``/copy``, Ctrl+Y)."""
    if conversation_id is None:
        return None
    for turn in reversed(await store.turns(conversation_id, limit=20)):
        parts = [e.content for e in await store.entries(conversation_id, turn.id)
                 if e.kind == "reply" and e.content.strip()]
        if parts:
            return turn.number, "\n\n".join(p.strip() for p in parts)
    return None


_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown text, in order, as ``(language,
    code)`` (CommonMark's fences: three or more backticks or tildes, closed
    by a fence of the same character at least as long; an unclosed block
    runs to the end)."""
    out: list[tuple[str, str]] = []
    lines = (markdown or "").split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        fence = m.group("fence")
        lang = m.group("info").strip().split(" ")[0] if m.group("info").strip() else ""
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = re.match(r"^[ ]{0,3}(`{3,}|~{3,})\s*$", lines[i])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                break
            body.append(lines[i])
            i += 1
        out.append((lang, "\n".join(body)))
        i += 1
    return out


def export_format(asked: str | None, path: Path | None) -> str:
    """The export's format: ``asked`` (``md`` or ``json``) when given, else
    the file's ending says (``.json``: ``json``), else ``md``."""
    if asked:
        return asked
    return "json" if path is not None and path.suffix.lower() == ".json" else "md"


def export_target_problem(path: Path) -> str | None:
    """Why an export cannot be written to ``path``, or ``None``: its directory
    must exist (wisp makes none: a typo must not make directories at /)."""
    if not path.parent.is_dir():
        return f"the directory {path.parent} does not exist; create it first"
    return None


def export_path(conversation_id: int, fmt: str, directory: Path) -> Path:
    """Where ``/export`` writes when no file is named:
    ``wisp-conversation-ID.md`` (or ``.json``) in ``directory``."""
    return Path(directory) / f"wisp-conversation-{conversation_id}.{'md' if fmt == 'md' else 'json'}"
