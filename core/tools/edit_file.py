"""The ``edit_file`` tool: exact search texts and their replacements, or a whole new file.

The form is the one small models write most reliably (aider's search and
replace, Claude Code's Edit): the model copies a passage exactly as read_file
showed it and says what stands in its place. Arguments (JSON)::

    {"path": "src/app.py", "search": "return 41", "replace": "return 42"}
    {"path": "src/app.py", "edits": [{"search": "…", "replace": "…"}, …]}   # several, in order
    {"path": "notes/todo.md", "content": "…"}                              # a new file

Rules, and why:

- Confined to the working directory exactly as read_file is (the one rule,
  :func:`wisp.core.paths.confined_path`: ``..`` and links resolved, a link
  out counts as out), regular files only, a file of several hard links
  refused (its other name may lie outside), and never inside a ``.git``
  directory or wisp's own home and data (a repository's hooks and config run
  programs; wisp's record must not be the model's to change).
- A search text must match exactly once (overlapping matches count): none,
  or more than one, and nothing is written; the model is told the lines that
  came closest (the same passage with other spacing, or the most similar
  lines, numbered as read_file numbers them), or where each match is, so it
  can try again. A search text of only whitespace is refused: it says
  nothing about where.
- Replacements apply in order, each to the text the previous one left; all
  of them apply or none (the file is written once, atomically:
  :mod:`wisp.core.tools.file_write`). ``content`` only creates: an existing
  file is changed with search and replace, so a model never rewrites a file
  whole by mistake.
- Bytes are kept: the file is edited as bytes, so line endings (CRLF: a
  search text written with ``\\n`` matches the file's ``\\r\\n`` and its
  replacement gets ``\\r\\n`` too) and bytes that are not UTF-8 outside the
  replaced text stay as they were. A file that is not UTF-8 takes only ASCII
  replacements (anything else would mix two encodings). A file with a NUL
  byte is binary and refused. Files are capped at
  ``tools.edit_file.max_bytes`` before and after.
- Nothing changes without approval: the request shown to the person
  (:class:`~wisp.core.tools.approval.ApprovalRequest`) carries the unified
  diff, the path and the lines added and removed; what is approved is then
  written only if the file still holds what the diff was made from.
- Everything is recorded: the file's bytes before and after go to the store
  (:class:`~wisp.core.tools.edit_store.EditBook`) before the file is
  written, so ``/undo`` can put it back and nothing is lost; the tool
  result (what the model is told, with the diff) is an entry like any
  tool's, and its ``meta["edit"]`` says what changed.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import OutsideWorkdir, confined_path
from .approval import ApprovalRequest, ask_approver
from .base import ToolContext, ToolResult
from .file_write import Changed, HardLinkedFile, NotAFile, read_exactly, replace_checked

__all__ = ["EditFile", "Replacement", "EditPlan", "ArgumentError", "parse_arguments", "apply_replacements",
           "MatchError", "unified_diff", "DEFAULT_MAX_BYTES", "MAX_REPLACEMENTS", "DESCRIPTION", "PARAMETERS"]

#: Config ``tools.edit_file.max_bytes``'s default: the largest file edited or created (before and after).
DEFAULT_MAX_BYTES = 1 << 20
#: Replacements one call may hold.
MAX_REPLACEMENTS = 20
#: Seconds reading or writing the file may take before the tool gives up on the file system.
IO_DEADLINE_S = 10.0
#: Lines of the diff the model is told (the rest: the person's ``/show entry N``).
DIFF_LINES_FOR_MODEL = 80
#: Lines shown of the closest passage when a search text matches nothing.
CLOSEST_LINES = 12
#: Characters shown of one line in a refusal.
LINE_CHARS = 200

#: What the model reads of the tool: short, since it is sent with every request (on the embedded
#: SmolLM2 every token of the system message costs prompt time).
DESCRIPTION = ("Change a file: search is exact text from the file (once), replace is what goes there. "
               "For several changes give edits; for a new file give content.")
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "file path"},
        "search": {"type": "string"},
        "replace": {"type": "string"},
        "edits": {"type": "array", "description": "[{search, replace}, …]"},
        "content": {"type": "string", "description": "a new file's text"},
    },
    "required": ["path"],
}


class ArgumentError(ValueError):
    """Arguments that do not make an edit; the message says what to send instead."""


@dataclass(frozen=True)
class Replacement:
    """One exact ``search`` text and the ``replace`` text that takes its place."""

    search: str
    replace: str


@dataclass(frozen=True)
class EditPlan:
    """What a call asks: ``path`` (as given, stripped), ``replacements`` (in
    order), or ``content`` (a new file's whole text; ``None`` for an edit)."""

    path: str
    replacements: tuple[Replacement, ...] = ()
    content: str | None = None


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ArgumentError(f"{what} must be a string (JSON text in quotes), not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentError(f"{what} holds a lone surrogate (such as \\ud800), which no UTF-8 file can hold; "
                            "send the characters themselves") from None
    if "\0" in value:
        raise ArgumentError(f"{what} holds a NUL character, which would make the file binary; leave it out")
    return value


def _replacement(search: Any, replace: Any, where: str) -> Replacement:
    search = _text(search, f"{where}search")
    replace = _text(replace, f"{where}replace")
    if not search.strip():
        raise ArgumentError(f"{where}search is {'empty' if not search else 'only whitespace'}: it must be exact "
                            "text of the file, such as a whole line, so that it says where the change goes")
    if search == replace:
        raise ArgumentError(f"{where}replace is the same as search: nothing would change")
    return Replacement(search, replace)


def parse_arguments(arguments: Any) -> EditPlan:
    """The edit ``arguments`` ask for (see the module doc). Raises
    :class:`ArgumentError` with a message for the model: a missing or empty
    path; ``content`` beside search or edits; search without replace (or
    the other way); edits that are not a list of ``{search, replace}``
    objects, or more than :data:`MAX_REPLACEMENTS`; a search text of only
    whitespace; a replace equal to its search; text no UTF-8 file can hold
    (a lone surrogate) or a NUL. Never raises anything else."""
    if not isinstance(arguments, dict):
        raise ArgumentError('edit_file takes a JSON object, such as {"path": "a.py", "search": "old", '
                            '"replace": "new"}')
    raw_path = arguments.get("path")
    if not isinstance(raw_path, str) or not raw_path.strip():
        raise ArgumentError('edit_file needs a path, such as {"path": "a.py", "search": "old", "replace": "new"}')
    path = _text(raw_path, "path").strip()
    has = {k for k in ("search", "replace", "edits", "content") if arguments.get(k) is not None}
    if "content" in has:
        if has - {"content"}:
            raise ArgumentError("give content for a new file, or search and replace (or edits) to change one, "
                                "not both")
        return EditPlan(path, content=_text(arguments["content"], "content"))
    if "edits" in has and has & {"search", "replace"}:
        raise ArgumentError("give search and replace for one change, or edits for several, not both")
    if "edits" in has:
        edits = arguments["edits"]
        if not isinstance(edits, list) or not edits:
            raise ArgumentError('edits must be a list of changes, such as [{"search": "old", "replace": "new"}]')
        if len(edits) > MAX_REPLACEMENTS:
            raise ArgumentError(f"edits holds {len(edits)} changes; at most {MAX_REPLACEMENTS} go in one call")
        out = []
        for n, item in enumerate(edits, 1):
            where = f"edit {n}: "
            if not isinstance(item, dict):
                raise ArgumentError(f'{where}each change is an object, {{"search": "old", "replace": "new"}}')
            extra = sorted(set(item) - {"search", "replace"})
            if extra:
                raise ArgumentError(f"{where}a change has only search and replace, not {', '.join(extra)}")
            if "search" not in item or "replace" not in item:
                raise ArgumentError(f"{where}a change needs both search and replace (an empty replace deletes)")
            out.append(_replacement(item["search"], item["replace"], where))
        return EditPlan(path, tuple(out))
    if "search" in has and "replace" in has:
        return EditPlan(path, (_replacement(arguments["search"], arguments["replace"], ""),))
    if "search" in has:
        raise ArgumentError('search needs replace too (an empty replace, "", deletes the text)')
    if "replace" in has:
        raise ArgumentError("replace needs search: the exact text of the file that it takes the place of")
    raise ArgumentError('say what to change: search and replace, edits, or content for a new file, such as '
                        '{"path": "a.py", "search": "old", "replace": "new"}')


# --- matching ------------------------------------------------------------------------------------


class MatchError(ValueError):
    """Replacement ``index`` (from 1) of ``count`` does not match exactly once;
    the message says how, with the lines that help the model try again."""

    def __init__(self, message: str, index: int, count: int, found: int) -> None:
        super().__init__(message)
        self.index = index
        self.count = count
        self.found = found


def _positions(data: bytes, needle: bytes, limit: int = 50) -> list[int]:
    """Where ``needle`` starts in ``data``, overlapping matches included, at most ``limit``."""
    out: list[int] = []
    at = data.find(needle)
    while at >= 0 and len(out) < limit:
        out.append(at)
        at = data.find(needle, at + 1)
    return out


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _lines(data: bytes) -> list[str]:
    """The file's lines as text, as read_file shows them (a CR of a CRLF end dropped, invalid UTF-8 as U+FFFD)."""
    text = data.decode("utf-8", errors="replace")
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _numbered(lines: list[str], first: int) -> str:
    out = []
    for i, line in enumerate(lines):
        shown = line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…"
        out.append(f"{first + i}\t{shown}")
    return "\n".join(out)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _closest(data: bytes, search: str) -> str:
    """The lines of ``data`` that come closest to ``search``, numbered, with
    what the model should do about them."""
    lines = _lines(data)
    want = search.replace("\r\n", "\n").split("\n")[:50]
    while want and not want[-1].strip():
        want.pop()
    while want and not want[0].strip():
        want.pop(0)
    n = max(1, len(want))
    squeezed = _squeeze("\n".join(want))
    # the same passage with other spacing or indentation: the likeliest slip of a small model
    for start in range(0, max(1, min(len(lines), 20000) - n + 1)):
        if _squeeze("\n".join(lines[start:start + n])) == squeezed and squeezed:
            shown = lines[start:start + min(n, CLOSEST_LINES)]
            return (f"The same text is at line {start + 1} with other spacing or indentation:\n"
                    f"{_numbered(shown, start + 1)}\nCopy it exactly as read_file shows it (spaces and tabs "
                    "included), then try again.")
    first = next((w.strip() for w in want if w.strip()), "")
    scores: list[tuple[float, int]] = []
    for i, line in enumerate(lines[:20000]):
        if not line.strip():
            continue
        m = difflib.SequenceMatcher(None, first, line.strip(), autojunk=False)
        if m.real_quick_ratio() < 0.3 or m.quick_ratio() < 0.3:
            continue
        scores.append((m.ratio(), i))
    scores.sort(key=lambda s: (-s[0], s[1]))
    best: tuple[float, int] | None = None
    for _, i in scores[:8]:
        window = "\n".join(line.strip() for line in lines[i:i + n])
        ratio = difflib.SequenceMatcher(None, "\n".join(w.strip() for w in want), window, autojunk=False).ratio()
        if best is None or ratio > best[0]:
            best = (ratio, i)
    if best is None or best[0] < 0.3:
        return ("No line of the file is close to it. Read the file (read_file) and copy the lines to change "
                "exactly.")
    start = max(0, best[1] - 1)
    shown = lines[start:min(len(lines), best[1] + n + 1)][:CLOSEST_LINES]
    return (f"The closest lines are {start + 1}-{start + len(shown)}:\n{_numbered(shown, start + 1)}\n"
            "Copy the lines to change exactly as they are there, then try again.")


def _find_once(data: bytes, rep: Replacement) -> tuple[int, bytes, bytes] | list[int]:
    """``(offset, search bytes, replace bytes)`` of the one match of ``rep``,
    or the offsets of every match (none, or more than one). A search text
    written with ``\\n`` also matches a file's ``\\r\\n`` lines, and its
    replacement then ends its lines with ``\\r\\n``."""
    needle = rep.search.encode("utf-8")
    found = _positions(data, needle)
    if not found and "\n" in rep.search and "\r" not in rep.search and b"\r\n" in data:
        crlf = rep.search.replace("\n", "\r\n").encode("utf-8")
        again = _positions(data, crlf)
        if again:
            if len(again) == 1:
                return again[0], crlf, rep.replace.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8")
            return again
    if len(found) == 1:
        replace = rep.replace
        if b"\r\n" in data and "\r" not in replace and "\n" in replace and _ends_crlf(data, found[0], needle):
            replace = replace.replace("\n", "\r\n")
        return found[0], needle, replace.encode("utf-8")
    return found


def _ends_crlf(data: bytes, at: int, needle: bytes) -> bool:
    """True when the lines around a match end with CRLF (so a replacement's new lines should too)."""
    end = data.find(b"\n", at + len(needle))
    if end < 0:
        end = data.rfind(b"\n", 0, at)
    return end > 0 and data[end - 1:end] == b"\r"


def apply_replacements(data: bytes, replacements: tuple[Replacement, ...] | list[Replacement],
                       shown_path: str = "the file") -> tuple[bytes, list[tuple[int, int]]]:
    """``data`` with each replacement made in order, and for each the lines
    (``(first, last)``, from 1) of its replacement in the result. Raises
    :class:`MatchError` naming the first that does not match exactly once
    (then nothing is made: the caller writes nothing)."""
    total = len(replacements)
    spans: list[tuple[int, int]] = []
    for index, rep in enumerate(replacements, 1):
        found = _find_once(data, rep)
        which = f"edit {index} of {total}: " if total > 1 else ""
        unchanged = "nothing was changed" + (" (no edit of this call was made)" if total > 1 else "")
        if isinstance(found, list):
            if not found:
                raise MatchError(f"{which}the search text matches nothing in {shown_path}; {unchanged}. "
                                 + _closest(data, rep.search), index, total, 0)
            at = sorted({_line_of(data, f) for f in found})
            where = ", ".join(str(n) for n in at[:10]) + (" …" if len(at) > 10 else "")
            shown = "\n".join(_numbered([_lines(data)[n - 1]], n) for n in at[:6])
            more = "" if len(found) < 50 else " or more"
            raise MatchError(f"{which}the search text matches {len(found)}{more} times in {shown_path} (at line"
                             f"{'s' if len(at) > 1 else ''} {where}); {unchanged}. Include more of the lines "
                             f"around the one to change, so that it matches once:\n{shown}", index, total,
                             len(found))
        at, needle, replace = found
        data = data[:at] + replace + data[at + len(needle):]
        first = _line_of(data, at)
        spans.append((first, first + replace.count(b"\n")))
    return data, spans


# --- the diff -------------------------------------------------------------------------------------


def _diff_lines(data: bytes | None) -> list[str]:
    """Lines for difflib: each with its end as ``\\n`` (a CRLF shown as one),
    the last without one when the file does not end in a newline."""
    if not data:
        return []
    text = data.decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        out.append(body + ("\n" if line != body else ""))
    return out


def unified_diff(shown_path: str, before: bytes | None, after: bytes | None, context: int = 3) -> tuple[str, int, int]:
    """``(diff, added, removed)``: the unified diff of ``before`` → ``after``
    (``None``: no file) as ``git diff`` writes it (``--- a/PATH``, ``+++
    b/PATH``, ``/dev/null`` for no file, ``\\ No newline at end of file``),
    and its lines added and removed. Bytes that are not UTF-8 show as
    U+FFFD; a CRLF end shows as a line end."""
    a, b = _diff_lines(before), _diff_lines(after)
    old = "/dev/null" if before is None else f"a/{shown_path}"
    new = "/dev/null" if after is None else f"b/{shown_path}"
    out: list[str] = []
    added = removed = 0
    for line in difflib.unified_diff(a, b, fromfile=old, tofile=new, n=context):
        if line.startswith(("---", "+++")) and not out[2:]:
            out.append(line.rstrip("\n"))
            continue
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
        if line.endswith("\n"):
            out.append(line[:-1])
        else:
            out.append(line)
            out.append("\\ No newline at end of file")
    if not out and before != after:  # only line ends or bytes difflib cannot tell apart changed
        out = [f"--- {old}", f"+++ {new}", "@@ (only line endings or undecodable bytes changed) @@"]
    return "\n".join(out), added, removed


def _cut_diff(diff: str, limit: int) -> str:
    lines = diff.split("\n")
    if len(lines) <= limit:
        return diff
    return "\n".join(lines[:limit] + [f"[… {len(lines) - limit} more lines of the diff]"])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --- the tool ------------------------------------------------------------------------------------


@dataclass
class _Target:
    """The file an edit is about: ``raw`` (as given), ``path`` (resolved),
    ``shown`` (relative to the working directory), ``before`` (its bytes;
    ``None`` when it does not exist)."""

    raw: str
    path: Path
    shown: str
    before: bytes | None


def _forbidden(path: Path, workdir: Path, config: Any) -> str | None:
    """Why ``path`` is not the model's to change, or ``None``: inside a
    ``.git`` directory, or inside wisp's own home or data directory."""
    rel = path.relative_to(workdir) if path.is_relative_to(workdir) else path
    if ".git" in rel.parts:
        return ("is inside .git, the repository's own machinery (its config and hooks run programs); "
                "edit_file does not change it. Ask the person to")
    from ..paths import default_data_dir, wisp_home

    dirs = [wisp_home(), default_data_dir()]
    for attr in ("db_path", "audit_dir"):
        value = getattr(config, attr, None) if config is not None else None
        if value is not None:
            dirs.append(Path(value) if attr == "audit_dir" else Path(value).parent)
    for d in dirs:
        try:
            if path.is_relative_to(Path(d).resolve()):
                return "is wisp's own file (its home or its data); edit_file does not change it. Ask the person to"
        except (OSError, RuntimeError):
            continue
    return None


def _read_current(path: Path, max_bytes: int) -> bytes | None:
    """Runs in a thread: the file's bytes (``None`` when it does not exist),
    opened without following a link (the path is resolved already, so a
    link here was put in meanwhile), refused when it is not a regular file,
    has several hard links, or is over ``max_bytes``."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise NotAFile("a directory") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from ..paths import file_kind

            raise NotAFile(file_kind(st.st_mode))
        if st.st_nlink > 1:
            raise HardLinkedFile(st.st_nlink)
        if st.st_size > max_bytes:
            raise _TooBig(st.st_size)
        return read_exactly(fd)
    finally:
        os.close(fd)


class _TooBig(OSError):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


class EditFile:
    """Change or create a text file of the working directory, after the
    person approves the diff; made with the session's ``book``
    (:class:`~wisp.core.tools.edit_store.EditBook`), where every edit's
    bytes before and after are kept."""

    name = "edit_file"
    read_only = False
    description = DESCRIPTION
    parameters: dict[str, Any] = PARAMETERS

    def __init__(self, book: Any) -> None:
        self.book = book

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Make the edit ``arguments`` ask for (see the module doc). Never raises
        for bad arguments or a bad file; returns a result saying what happened."""
        try:
            plan = parse_arguments(arguments)
        except ArgumentError as exc:
            return ToolResult(f"error: {exc}", ok=False)
        workdir = Path(ctx.workdir).resolve()
        max_bytes = max(1, int(ctx.setting("tools.edit_file.max_bytes", DEFAULT_MAX_BYTES)))
        target = await self._target(plan, workdir, ctx, max_bytes)
        if isinstance(target, ToolResult):
            return target
        shown = target.shown
        meta: dict[str, Any] = {"path": shown}
        if plan.content is not None:
            if target.before is not None:
                return ToolResult(f"error: {shown} exists already; content only creates a new file. Change it "
                                  "with search and replace (or edits) instead, copying the lines to change "
                                  "exactly as read_file shows them.", ok=False, meta=meta)
            after = plan.content.encode("utf-8")
            spans: list[tuple[int, int]] = []
        else:
            if target.before is None:
                return ToolResult(f"error: there is no file {shown} in the working directory. To create it, "
                                  "give content (the whole file) instead of search and replace.", ok=False,
                                  meta=meta)
            before = target.before
            if not _is_utf8(before) and any(not r.replace.isascii() for r in plan.replacements):
                return ToolResult(f"error: {shown} is not UTF-8 text, so only a replacement of ASCII characters "
                                  "can go in it (any other would mix two encodings); nothing was changed.",
                                  ok=False, meta=meta)
            try:
                after, spans = apply_replacements(before, plan.replacements, shown)
            except MatchError as exc:
                meta.update(found=exc.found, failed_edit=exc.index)
                return ToolResult(f"error: {exc}", ok=False, meta=meta)
        if len(after) > max_bytes:
            return ToolResult(f"error: {shown} would be {len(after):,} bytes, over the {max_bytes:,} that "
                              "edit_file writes (config tools.edit_file.max_bytes); nothing was changed.",
                              ok=False, meta=meta)
        diff, added, removed = unified_diff(shown, target.before, after)
        created = target.before is None
        meta["edit"] = {"path": shown, "created": created, "added": added, "removed": removed,
                        "replacements": len(plan.replacements), "bytes_before": len(target.before or b""),
                        "bytes_after": len(after)}
        meta["diff"] = diff if len(diff) <= 65536 else _cut_diff(diff, 400)
        verb = "create" if created else "edit"
        request = ApprovalRequest("edit_file", f"{verb} {shown} (+{added} -{removed})", workdir,
                                  ctx.conversation_id, ctx.turn, path=shown, diff=diff, added=added,
                                  removed=removed, new_file=created)
        refused = await self._approve(request, ctx, meta)
        if refused is not None:
            del meta["edit"]  # nothing changed: no reference may say it did
            return refused
        return await self._apply(plan, target, after, spans, workdir, ctx, meta)

    async def _target(self, plan: EditPlan, workdir: Path, ctx: ToolContext,
                      max_bytes: int) -> _Target | ToolResult:
        """The file the plan names, read; or the result that refuses it."""
        raw = plan.path
        try:
            path = confined_path(raw, workdir)  # never outside: there is no setting that lets edits out
        except OutsideWorkdir as exc:
            return ToolResult(f"error: {raw} is outside the working directory {exc.workdir} (it resolves to "
                              f"{exc.path}); edit_file changes only files inside it", ok=False)
        except (OSError, ValueError) as exc:
            return ToolResult(f"error: cannot resolve {raw}: {exc}", ok=False)
        shown = str(path.relative_to(workdir)) if path != workdir else "."
        why = _forbidden(path, workdir, ctx.config)
        if why:
            return ToolResult(f"error: {shown} {why}, or do it another way.", ok=False)
        try:
            before = await asyncio.wait_for(asyncio.to_thread(_read_current, path, max_bytes), IO_DEADLINE_S)
        except asyncio.TimeoutError:
            return ToolResult(f"error: reading {shown} took longer than {IO_DEADLINE_S:g} s; the file system may "
                              "be slow or hung.", ok=False)
        except NotAFile as exc:
            if exc.kind == "a directory":
                return ToolResult(f"error: {shown} is a directory; give the path of a file in it", ok=False)
            return ToolResult(f"error: {shown} is {exc.kind}, not a regular file; edit_file edits only regular "
                              "files", ok=False)
        except HardLinkedFile as exc:
            return ToolResult(f"error: {shown} has {exc.links} hard links, so it may be a file outside the "
                              "working directory under another name; edit_file does not change it", ok=False)
        except _TooBig as exc:
            return ToolResult(f"error: {shown} is {exc.size:,} bytes, over the {max_bytes:,} that edit_file "
                              "edits (config tools.edit_file.max_bytes); change it another way", ok=False)
        except OSError as exc:
            if getattr(exc, "errno", None) == 40:  # ELOOP: the last part is a link put in after resolving
                return ToolResult(f"error: {shown} is a symbolic link now; read it again", ok=False)
            return ToolResult(f"error: cannot read {shown}: {exc.strerror or exc}", ok=False)
        nul = before.find(b"\0") if before is not None else -1
        if nul >= 0:
            return ToolResult(f"error: {shown} is a binary file (a NUL byte at byte {nul:,}); "
                              "edit_file edits text", ok=False)
        return _Target(raw, path, shown, before)

    async def _approve(self, request: ApprovalRequest, ctx: ToolContext, meta: dict[str, Any]) -> ToolResult | None:
        """Ask for approval; ``None`` when the edit may be made, else the result that says why not."""
        decision = await ask_approver(
            ctx, request, meta, nobody="The edit was not made: no one can approve edits here.",
            stopped="The turn was stopped before the person answered; the edit was not made.")
        if isinstance(decision, str):
            return ToolResult(decision, ok=False, meta=meta)
        if decision.allowed:
            return None
        if decision.choice == "needs_approval":
            return ToolResult(f"The edit of {request.path} was not made: edits need the person's approval, and no "
                              "one can give it here (wisp ask without --allow-edits). Tell the person what you "
                              "wanted to change and why; they can run wisp ask --allow-edits, or set "
                              "wisp config set tools.edit_file.allow on.", ok=False, meta=meta)
        return ToolResult(f"The person denied the edit of {request.path}; it was not made. Do not make it again "
                          "unless the person asks you to; say what you wanted it for, or go on another way.",
                          ok=False, meta=meta)

    async def _apply(self, plan: EditPlan, target: _Target, after: bytes, spans: list[tuple[int, int]],
                     workdir: Path, ctx: ToolContext, meta: dict[str, Any]) -> ToolResult:
        """Record the edit, write the file (checked: :func:`replace_checked`), and say what was done."""
        shown = target.shown
        edit_id = await self.book.begin(ctx.conversation_id, ctx.turn, ctx.call_entry, str(target.path), shown,
                                        target.before, after)
        meta["edit"]["id"] = edit_id
        try:
            written = await asyncio.wait_for(asyncio.to_thread(
                replace_checked, workdir, target.raw, target.path, target.before, after,
                make_dirs=target.before is None), IO_DEADLINE_S)
        except asyncio.TimeoutError:
            # the thread may still write: the edit stays pending, which /undo reads by the file's bytes
            del meta["edit"]
            meta["write_error"] = "timeout"
            return ToolResult(f"error: writing {shown} did not finish within {IO_DEADLINE_S:g} s (the file system "
                              "may be slow or hung); it may or may not be changed. Read it again before anything "
                              "else; the person's /undo puts it back if it was changed.", ok=False, meta=meta)
        except (Changed, HardLinkedFile, NotAFile, OSError) as exc:
            why = _write_problem(exc)
            await self.book.settle(edit_id, "failed", why)
            del meta["edit"]
            meta["write_error"] = why
            return ToolResult(f"error: {shown} was not changed: {why}. Nothing was written; read the file again "
                              "and make the edit again if it is still wanted.", ok=False, meta=meta)
        await self.book.settle(edit_id, "applied", mode=written.mode, created_dirs=written.created_dirs)
        diff = meta["diff"]
        edit = meta["edit"]
        if edit["created"]:
            lines = after.count(b"\n") + (1 if after and not after.endswith(b"\n") else 0)
            text = f"created {shown}: {_plural(lines, 'line')}, {len(after):,} bytes."
        else:
            where = ", ".join(f"line {a}" if a == b else f"lines {a}-{b}" for a, b in spans)
            text = (f"edited {shown}: {_plural(len(spans), 'replacement')} ({where}), "
                    f"{_plural(edit['added'], 'line')} added, {edit['removed']} removed.\n"
                    f"{_cut_diff(diff, DIFF_LINES_FOR_MODEL)}")
        if target.before is not None and not _is_utf8(target.before):
            text += "\n[the file is not UTF-8: its other bytes were kept as they were]"
        meta["changed_files"] = [shown]
        return ToolResult(text, meta=meta)


def _write_problem(exc: BaseException) -> str:
    """Why the write did not happen, in words."""
    if isinstance(exc, Changed):
        return str(exc)
    if isinstance(exc, HardLinkedFile):
        return f"it has {exc.links} hard links now"
    if isinstance(exc, NotAFile):
        return f"it is {exc.kind} now"
    return getattr(exc, "strerror", None) or str(exc)

