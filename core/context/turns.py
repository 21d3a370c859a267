"""Stored turns rendered for the context: whole, or with tool outputs as references.

One job: turn a turn's entries into chat messages (for the composer) or into
a plain transcript (for the running summary's side call), with each tool
output either whole or as a reference (:mod:`wisp.core.context.references`),
and list the turn's tool outputs with their digests (the summary layer's
index of references).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from .history import entries_to_messages
from .loops import collapse_loops
from .references import ReferenceForm, edit_call_arguments, edit_summary, reference_form, reference_text

__all__ = ["ToolFlags", "OutputRef", "render_turn", "turn_outputs", "transcript", "compact_arguments"]

#: A tool call's arguments are cut to this many characters in an index line.
ARGS_CHARS = 100


@dataclass(frozen=True)
class ToolFlags:
    """What the references need to know about the conversation's tools:
    ``has_memory`` (the ``memory`` tool is in the registry) and
    ``read_only`` (``{tool name: True/False}``; a name not in it is a tool
    wisp no longer has, treated as a command)."""

    has_memory: bool = False
    read_only: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def from_registry(cls, registry: Any) -> "ToolFlags":
        """From a :class:`wisp.core.tools.ToolRegistry` (tools have ``read_only``)."""
        names = list(getattr(registry, "names", []) or [])
        flags = {n: bool(getattr(registry.get(n), "read_only", False)) for n in names}
        return cls(has_memory="memory" in names, read_only=flags)

    def form(self, tool: str | None) -> ReferenceForm:
        """The reference form for an output of ``tool``."""
        return reference_form(tool, has_memory=self.has_memory, read_only=self.read_only.get(tool or ""))


def compact_arguments(arguments: Any, limit: int = ARGS_CHARS) -> str:
    """A tool call's arguments as one line of JSON, cut to ``limit`` characters."""
    if arguments in (None, {}, ""):
        return ""
    text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class OutputRef:
    """A tool output of a turn, as the summary layer lists it: ``entry``
    (number), ``turn`` (number), ``tool``, ``arguments`` (one line),
    ``digest`` (:meth:`Digest.to_dict`), ``read_only``."""

    entry: int
    turn: int
    tool: str
    arguments: str
    digest: dict[str, Any]
    read_only: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "OutputRef":
        return cls(int(d["entry"]), int(d.get("turn") or 0), str(d.get("tool") or "tool"),
                   str(d.get("arguments") or ""), dict(d.get("digest") or {}), d.get("read_only"))


def turn_outputs(turn_number: int, entries: list[Any], flags: ToolFlags) -> list[OutputRef]:
    """The tool outputs of one turn, in order, with their calls' arguments and digests (the
    digests' module loads with the first turn that has an output: issue 12)."""
    from .digest import digest_output

    calls = {e.tool_call_id: e for e in entries if e.kind == "tool_call"}
    out: list[OutputRef] = []
    for e in entries:
        if e.kind != "tool_result":
            continue
        call = calls.get(e.tool_call_id)
        read_only = flags.read_only.get(e.tool_name or "")
        d = digest_output(e.content, e.meta, read_only=read_only)
        out.append(OutputRef(e.number, turn_number, e.tool_name or "tool",
                             compact_arguments(call.arguments if call is not None else None),
                             d.to_dict(), read_only))
    return out


def render_turn(turn_number: int, entries: list[Any], flags: ToolFlags, *, whole: bool) -> tuple[list[dict[str, Any]], list[int]]:
    """A turn's chat messages and the entry numbers that stand as references.

    With ``whole`` the tool outputs are kept in full; otherwise each is
    replaced by its reference (the prompt, the replies and the tool calls'
    arguments stay whole either way, but an edit's long texts, which its
    reference stands for: :func:`~wisp.core.context.references.edit_call_arguments`);
    a result that stands for repeated
    failed calls (``meta.collapsed``: :func:`wisp.core.context.loops.collapse_loops`)
    is its own short text in both. Thinking and notices are never sent
    (:func:`wisp.core.context.history.entries_to_messages`).
    """
    if whole:
        return entries_to_messages(entries), []
    shown = []
    refs: list[int] = []
    edits = {e.tool_call_id: e.number for e in entries
             if e.kind == "tool_result" and e.tool_call_id and edit_summary(e.meta) is not None}
    for e in entries:
        if e.kind == "tool_call" and e.tool_call_id in edits:
            shown.append(dataclasses.replace(e, arguments=edit_call_arguments(e.arguments, edits[e.tool_call_id])))
        elif e.kind == "tool_result" and not (e.meta or {}).get("collapsed"):
            read_only = flags.read_only.get(e.tool_name or "")
            text = reference_text(e.number, e.tool_name, turn=turn_number, form=flags.form(e.tool_name),
                                  content=e.content, meta=e.meta, read_only=read_only)
            shown.append(dataclasses.replace(e, content=text))
            refs.append(e.number)
        else:
            shown.append(e)
    return entries_to_messages(shown), refs


def transcript(turns: list[tuple[int, list[Any]]], flags: ToolFlags, *,
               cut: Callable[[str], str] | None = None) -> str:
    """Turns as plain text for the running summary's side call, tool outputs
    as references::

        Turn 3:
        person: …
        assistant: …
        assistant called read_file {"path": "a.py"} (entry 9)
        [output of entry 10 not repeated: …]

    ``cut`` may shorten long prompts and replies. Loops are collapsed as in a
    request (:func:`wisp.core.context.loops.collapse_loops`).
    """
    cut = cut or (lambda s: s)
    lines: list[str] = []
    for number, entries in turns:
        lines.append(f"Turn {number}:")
        for e in collapse_loops(entries):
            if e.kind == "prompt":
                lines.append(f"person (entry {e.number}): {cut(e.content)}")
            elif e.kind == "reply" and e.content.strip():
                lines.append(f"assistant (entry {e.number}): {cut(e.content)}")
            elif e.kind == "tool_call":
                args = compact_arguments(e.arguments, 300)
                lines.append(f"assistant called {e.tool_name} {args} (entry {e.number})")
            elif e.kind == "tool_result" and (e.meta or {}).get("collapsed"):
                lines.append(e.content)
            elif e.kind == "tool_result":
                read_only = flags.read_only.get(e.tool_name or "")
                lines.append(reference_text(e.number, e.tool_name, turn=number, form=flags.form(e.tool_name),
                                            content=e.content, meta=e.meta, read_only=read_only))
        lines.append("")
    return "\n".join(lines).rstrip()
