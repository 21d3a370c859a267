"""References: what stands in the context for a tool output not repeated.

Rules (issue "Layered context", "References"; wisp-memory-tool.txt, "When a
conversation has it" and "After its turn"):

- Once its turn has ended, a tool output beyond the most recent
  ``context.recent_turns`` turns stands as a reference, not in full.
- The reference names the entry and says how to see it again:

  - with the memory tool: ``to see it: memory "recall entry N"``;
  - without it, for a tool that only reads: call the tool again;
  - without it, for a command or an edit (or a tool wisp no longer has):
    do not run it again to see it; ask the person, who can use
    ``/show entry N``.

- It carries a digest (:mod:`wisp.core.context.digest`): lines, bytes, exit
  status, first error line.
- An edit's output (a result whose ``meta["edit"]`` says what changed: a
  file edit made) says instead what changed, and that the edit is made and
  must not be made again (a model that sees an old search and replace
  would otherwise make it a second time); whether ``/undo`` put it back is
  the ``workdir`` fact's to say, since the reference of an ended turn never
  changes (:mod:`wisp.core.context.render_cache`). Its call's long texts (the
  search, the replacement, a new file's content) are not repeated either
  (:func:`edit_call_arguments`).

Forms::

    [output of entry 7 not repeated: read_file, turn 2; 77 lines, 3,104 bytes; to see it: memory "recall entry 7"]
    [output of entry 7 not repeated: read_file, turn 2; 77 lines, 3,104 bytes; to see it, call read_file again]
    [output of entry 9 not repeated: run_command, turn 3; 40 lines, 1,800 bytes, exit status 1, first error: "…"; do not run it again to see it: ask the person, who can use /show entry 9]
    [output of entry 12 not repeated: edit_file, turn 4; edited src/app.py: 2 lines added, 1 removed; the edit is made: do not make it again (the workdir fact says if /undo put it back); to see its diff: ask the person, who can use /show entry 12]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the digests load with the first reference (issue 12)
    from .digest import Digest

__all__ = ["ReferenceForm", "reference_form", "reference_text", "recall_phrase", "REFERENCE_PATTERN",
           "referenced_entries", "edit_summary", "edit_call_arguments", "EDIT_ARGUMENT_CHARS"]

#: An edit call's text arguments longer than this (characters) are not repeated in later requests.
EDIT_ARGUMENT_CHARS = 80

#: Matches a reference (or an index line) and captures the entry number.
REFERENCE_PATTERN = re.compile(r"output of entry (\d+) not repeated")
_NAMED = re.compile(r'recall entry (\d+)|/show entry (\d+)|\bentry (\d+)\b')


@dataclass(frozen=True)
class ReferenceForm:
    """How a reference says to see its output again: ``kind`` is ``memory``,
    ``call_again`` or ``ask_person``; ``tool`` the tool's name."""

    kind: str
    tool: str

    def how(self, entry: int) -> str:
        """The phrase that ends a reference."""
        if self.kind == "memory":
            return f'to see it: {recall_phrase(entry)}'
        if self.kind == "call_again":
            return f"to see it, call {self.tool} again"
        return f"do not run it again to see it: ask the person, who can use /show entry {entry}"

    def how_edit(self, entry: int) -> str:
        """The phrase that ends an edit's reference: it is made, and how to see its diff."""
        made = "the edit is made: do not make it again (the workdir fact says if /undo put it back)"
        if self.kind == "memory":
            return f"{made}; to see its diff: {recall_phrase(entry)}"
        return f"{made}; to see its diff: ask the person, who can use /show entry {entry}"

    def how_cut(self, entry: int, first_line: int, *, prompt: bool = False) -> str:
        """The phrase that ends the marker of an entry sent cut to fit the
        window, from ``first_line`` on (the person's own prompt when
        ``prompt``): the same three forms as :meth:`how`."""
        if self.kind == "memory":
            return f'to see them: memory "recall entry {entry} from line {first_line}"'
        if prompt:
            return f"the person has the whole of it; /show entry {entry} shows it to them"
        if self.kind == "call_again":
            return f"to see them, call {self.tool} again for those lines"
        return f"do not run it again to see them; ask the person, who can use /show entry {entry}"


def recall_phrase(entry: int) -> str:
    """``memory "recall entry N"``: the recall a reference names (wisp-memory-tool.txt)."""
    return f'memory "recall entry {entry}"'


def reference_form(tool_name: str | None, *, has_memory: bool, read_only: bool | None) -> ReferenceForm:
    """Which form a reference takes: the memory form when the conversation has
    the memory tool; else calling again for a tool that only reads; else
    asking the person (commands, edits, and tools wisp no longer has)."""
    tool = tool_name or "the tool"
    if has_memory:
        return ReferenceForm("memory", tool)
    if read_only is True:
        return ReferenceForm("call_again", tool)
    return ReferenceForm("ask_person", tool)


def reference_text(entry: int, tool_name: str | None, *, turn: int | None, form: ReferenceForm,
                   digest: Digest | None = None, content: str = "", meta: dict[str, Any] | None = None,
                   read_only: bool | None = None) -> str:
    """The reference for tool output entry ``entry`` (see the module doc).

    Give ``digest``, or ``content`` and ``meta`` to compute it. ``turn`` is
    the turn number the output belongs to (or ``None``).
    """
    where = tool_name or "tool"
    if turn is not None:
        where += f", turn {turn}"
    edit = edit_summary(meta)
    if edit is not None:
        return f"[output of entry {entry} not repeated: {where}; {edit}; {form.how_edit(entry)}]"
    if digest is None:
        from .digest import digest_output

        digest = digest_output(content, meta, read_only=read_only)
    return f"[output of entry {entry} not repeated: {where}; {digest.text()}; {form.how(entry)}]"


def edit_summary(meta: dict[str, Any] | None) -> str | None:
    """What an edit changed, from its result's ``meta["edit"]`` (``path``,
    ``created``, ``added``, ``removed``, ``bytes_after``): ``edited a.py: 2
    lines added, 1 removed`` or ``created notes.md (12 lines, 340 bytes)``;
    ``None`` for an output that is no edit made."""
    edit = (meta or {}).get("edit")
    if not isinstance(edit, dict) or not edit.get("path"):
        return None
    path = str(edit["path"])
    added, removed = int(edit.get("added") or 0), int(edit.get("removed") or 0)
    if edit.get("created"):
        return f"created {path} ({added:,} line{'s' if added != 1 else ''}, {int(edit.get('bytes_after') or 0):,} bytes)"
    return f"edited {path}: {added:,} line{'s' if added != 1 else ''} added, {removed:,} removed"


def edit_call_arguments(arguments: Any, result_entry: int) -> Any:
    """An edit call's arguments as later requests send them: the path and
    the short texts whole, each text longer than :data:`EDIT_ARGUMENT_CHARS`
    and each list of changes replaced by a line saying it is not repeated
    and where it stands (``result_entry``, the edit's output)."""
    if not isinstance(arguments, dict):
        return arguments
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and len(value) > EDIT_ARGUMENT_CHARS and key != "path":
            out[key] = f"[{len(value):,} characters not repeated: the edit is made (entry {result_entry})]"
        elif isinstance(value, list):
            out[key] = (f"[{len(value)} change{'s' if len(value) != 1 else ''} not repeated: the edit is made "
                        f"(entry {result_entry})]")
        else:
            out[key] = value
    return out


def referenced_entries(text: str) -> list[int]:
    """Entry numbers a text names as references or recalls, in order, once
    each (``output of entry 7``, ``recall entry 7``, ``/show entry 7``,
    ``entry 7``)."""
    seen: dict[int, None] = {}
    for m in _NAMED.finditer(text or ""):
        n = next(g for g in m.groups() if g)
        seen.setdefault(int(n), None)
    return list(seen)
