"""``/show entry N``, ``/show turn N``, ``/show fact NAME``: stored material in full.

Issue "Layered context", "Seeing it, at no model cost": material is shown
in full, paged and highlighted, without putting it in the model's context.
This module gathers it (content read back from the audit log where it holds
it, :mod:`wisp.core.context.recall`) and names a pygments lexer for each
section; the TUI pages and highlights it, and the Markdown form serves
where no view opens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from .recall import RecalledEntry, recall_entry, recall_turn, stored_range

__all__ = ["ShowSection", "ShowMaterial", "show_entry", "show_turn", "show_fact", "lexer_for", "ShowError"]


class ShowError(LookupError):
    """Nothing to show: the message says what is stored instead."""


@dataclass(frozen=True)
class ShowSection:
    """One piece of shown material: a ``heading`` line, its ``text`` and the
    pygments ``lexer`` name to highlight it with (``text`` for none)."""

    heading: str
    text: str
    lexer: str = "text"

    @property
    def lines(self) -> int:
        return self.text.count("\n") + 1 if self.text else 0


@dataclass
class ShowMaterial:
    """What ``/show`` shows: a ``title`` and its sections, in order."""

    title: str
    sections: list[ShowSection] = field(default_factory=list)

    def to_markdown(self) -> str:
        """The material as Markdown, each section a fenced block."""
        parts = [f"**{self.title}**"]
        for s in self.sections:
            fence = "````" if "```" in s.text else "```"
            lang = "" if s.lexer == "text" else s.lexer
            parts.append(f"{s.heading}\n\n{fence}{lang}\n{s.text}\n{fence}")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title,
                "sections": [{"heading": s.heading, "text": s.text, "lexer": s.lexer} for s in self.sections]}


def lexer_for(recalled: RecalledEntry, call_arguments: Any = None) -> str:
    """The pygments lexer name for a recalled entry: Markdown for prompts and
    replies, JSON for calls (and outputs that are JSON), the file's own
    language for ``read_file`` output (from the path), ``text`` otherwise."""
    e = recalled.entry
    if e.kind in ("prompt", "reply"):
        return "markdown"
    if e.kind == "tool_call":
        return "json"
    if e.kind == "tool_result":
        text = recalled.content.lstrip()
        if text[:1] in "[{":
            try:
                json.loads(recalled.content)
                return "json"
            except ValueError:
                pass
        path = None
        if isinstance(call_arguments, dict):
            path = call_arguments.get("path") or call_arguments.get("file")
        path = path or (e.meta or {}).get("path")
        if path:
            try:
                from pygments.lexers import get_lexer_for_filename
                from pygments.util import ClassNotFound

                try:
                    return get_lexer_for_filename(PurePath(str(path)).name).aliases[0]
                except ClassNotFound:
                    return "text"
            except ImportError:  # pragma: no cover - pygments is a dependency
                return "text"
        if (e.meta or {}).get("command") or "exit_status" in (e.meta or {}):
            return "text"
    return "text"


def _body(recalled: RecalledEntry) -> str:
    e = recalled.entry
    if e.kind == "tool_call":
        args = e.arguments if e.arguments is not None else recalled.content
        try:
            return json.dumps(args if not isinstance(args, str) else json.loads(args), ensure_ascii=False, indent=2)
        except ValueError:
            return str(args)
    return recalled.content


async def _call_args(store: Any, conversation: int, recalled: RecalledEntry) -> Any:
    e = recalled.entry
    if e.kind != "tool_result" or not e.tool_call_id or e.turn_id is None:
        return None
    for other in await store.entries(conversation, e.turn_id):
        if other.kind == "tool_call" and other.tool_call_id == e.tool_call_id:
            return other.arguments
    return None


async def show_entry(store: Any, audit: Any, conversation: int | None, number: int) -> ShowMaterial:
    """Entry ``number`` in full. Raises :class:`ShowError` when there is none."""
    if conversation is None:
        raise ShowError("nothing is stored yet in this conversation")
    recalled = await recall_entry(store, audit, conversation, number)
    if recalled is None:
        raise ShowError(f"no entry {number}; {await stored_range(store, conversation)}")
    args = await _call_args(store, conversation, recalled)
    heading = recalled.header
    if args:
        heading += f"\narguments: {json.dumps(args, ensure_ascii=False)}"
    return ShowMaterial(f"entry {number}", [ShowSection(heading, _body(recalled), lexer_for(recalled, args))])


async def show_turn(store: Any, audit: Any, conversation: int | None, number: int) -> ShowMaterial:
    """Turn ``number``: every entry in order, in full. Raises :class:`ShowError`."""
    if conversation is None:
        raise ShowError("nothing is stored yet in this conversation")
    found = await recall_turn(store, audit, conversation, number)
    if found is None:
        raise ShowError(f"no turn {number}; {await stored_range(store, conversation)}")
    turn, recalled = found
    calls = {r.entry.tool_call_id: r.entry.arguments for r in recalled if r.entry.kind == "tool_call"}
    sections = [ShowSection(r.header, _body(r), lexer_for(r, calls.get(r.entry.tool_call_id))) for r in recalled]
    return ShowMaterial(f"turn {number} ({turn.state}, {len(recalled)} entries)", sections)


async def show_fact(manager: Any, conversation: int | None, name: str) -> ShowMaterial:
    """Every version of the facts ``name`` matches, values in full (via the
    manager's :meth:`~wisp.core.context.manager.ContextManager.recall_fact`).
    Raises :class:`ShowError` when none matches."""
    if conversation is None:
        raise ShowError("this conversation has no facts yet")
    groups = await manager.facts.history(conversation, name)
    if not groups:
        known = await manager.facts.subjects_known(conversation)
        raise ShowError(f"no fact {name!r}; the conversation knows: {', '.join(known) or 'none yet'}")
    text = await manager.recall_fact(conversation, name, for_model=False)
    return ShowMaterial(f"fact {name}", [ShowSection(f"fact {name!r}: every version, oldest first", text, "text")])
