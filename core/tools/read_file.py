"""The ``read_file`` tool: a text file's lines, numbered, one page at a time.

Rules (issue "wisp runs end to end"; issue "Nothing runs, leaks, hangs or is
lost that shouldn't be", "Nothing hangs"):

- Confined to the conversation's working directory unless config
  ``tools.read_file.allow_outside_workdir`` is true
  (:func:`wisp.core.paths.confined_path`, the one confinement rule).
- Only regular files are read: a FIFO, a device or a socket is refused
  before anything opens it (:func:`wisp.core.paths.open_regular`).
- A file with more than one hard link is refused unless reads outside the
  working directory are allowed: its other name may lie outside, and a hard
  link, unlike a symlink, does not say where (:class:`HardLinked`).
- The reading happens in a thread, never on the event loop, and within
  :data:`READ_DEADLINE_S` seconds; past it the tool answers that the file
  system is too slow, and the thread stops at its next chunk.
- It reads by bytes: one page is at most ``tools.read_file.max_bytes`` bytes
  and ``limit`` lines. Finding line ``offset`` scans the file in
  :data:`CHUNK`-byte pieces (never a whole line in memory); the total of
  lines is counted only for files up to :data:`COUNT_LIMIT` bytes.
- A line longer than the page is cut at the page's end (on a UTF-8
  character boundary) with a marker naming ``from_byte``, the byte of the
  file where the next page starts, so the model always makes progress.

Output lines are ``N<TAB>text`` as in the reference document's recall
(``wisp-memory-tool.txt``), ending ``[end of file]`` or naming the next page.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..paths import NotRegularFile, OutsideWorkdir, confined_path, open_regular
from ..text import without_surrogates
from .base import ToolContext, ToolResult

DEFAULT_LIMIT = 400  # lines per page
#: Seconds a read may take before the tool gives up on the file system.
READ_DEADLINE_S = 10.0
#: Bytes read at a time while scanning for a line.
CHUNK = 1 << 20
#: Files up to this size (bytes) get their lines counted for the "of N" in markers.
COUNT_LIMIT = 32 << 20
#: Bytes at the start of the file that must hold no NUL for it to count as text.
BINARY_SNIFF = 8192


class HardLinked(OSError):
    """The file has ``links`` hard links (``st_nlink`` > 1), so it may be a
    file outside the working directory under a second name."""

    def __init__(self, links: int) -> None:
        super().__init__(f"{links} hard links")
        self.links = links


class _Stopped(Exception):
    """The deadline passed; the reading thread gives up."""


@dataclass
class _Page:
    """What one read found (see :func:`_read_page`)."""

    lines: list[str]
    first: int  # the number of the first line shown
    size: int  # bytes in the file
    total: int | None  # lines in the file, when counted
    next_line: int | None = None  # more: the next page starts at this line
    next_byte: int | None = None  # more: the next page starts at this byte (a long line was cut)
    from_byte: int | None = None  # this page started at this byte, in the middle of line ``first``
    binary_at: int | None = None  # a NUL byte at this position: not text
    past_end: bool = False  # offset (or from_byte) is past the end


class ReadFile:
    """Read a text file from the working directory."""

    name = "read_file"
    read_only = True
    description = (
        "Read a text file from the working directory, with numbered lines. "
        "Use offset (first line, from 1) and limit (lines) to page through long files; "
        "a line too long for one page is cut, and from_byte (given in the marker) reads on."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path, relative to the working directory"},
            "offset": {"type": "integer", "description": "first line to read, from 1"},
            "limit": {"type": "integer", "description": "how many lines to read"},
            "from_byte": {"type": "integer",
                          "description": "read from this byte of the file (from 0) instead of from a line; "
                                         "the marker of a cut line names it"},
        },
        "required": ["path"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Read ``path`` from line ``offset`` (1-based, default 1), or from byte
        ``from_byte``, for ``limit`` lines (default 400) within
        ``tools.read_file.max_bytes`` bytes. Never raises for a bad path or
        file; never blocks the event loop."""
        raw = str(arguments.get("path", "")).strip()
        if not raw:
            return ToolResult("error: read_file needs a path, such as {\"path\": \"README.md\"}", ok=False)
        offset = max(1, _int(arguments.get("offset"), 1))
        limit = max(1, _int(arguments.get("limit"), DEFAULT_LIMIT))
        from_byte = arguments.get("from_byte")
        from_byte = None if from_byte is None else max(0, _int(from_byte, 0))
        allow_outside = bool(ctx.setting("tools.read_file.allow_outside_workdir", False))
        try:
            path = confined_path(raw, ctx.workdir, allow_outside=allow_outside)
        except OutsideWorkdir as exc:
            return ToolResult(
                f"error: {raw} is outside the working directory {exc.workdir}; "
                "read files inside it (the person can allow more with "
                "/config set tools.read_file.allow_outside_workdir on)",
                ok=False,
            )
        except (OSError, ValueError) as exc:
            return ToolResult(f"error: cannot resolve {raw}: {exc}", ok=False)
        workdir = Path(ctx.workdir)
        max_bytes = max(1, int(ctx.setting("tools.read_file.max_bytes", 262144)))
        stop = threading.Event()
        try:
            page = await asyncio.wait_for(
                asyncio.to_thread(_read, path, offset, limit, max_bytes, from_byte, stop, allow_outside),
                timeout=READ_DEADLINE_S)
        except asyncio.TimeoutError:
            return ToolResult(f"error: reading {raw} took longer than {READ_DEADLINE_S:g} s; the file system "
                              "may be slow or hung. Try a smaller page, or another file.", ok=False)
        except FileNotFoundError:
            return ToolResult(f"error: no file {raw} in {workdir}", ok=False)
        except HardLinked as exc:
            return ToolResult(
                f"error: {raw} has {exc.links} hard links, so it may be a file outside the working directory "
                "under another name; read_file does not read it (the person can allow reads outside with "
                "/config set tools.read_file.allow_outside_workdir on)", ok=False)
        except IsADirectoryError:
            return _directory(raw, path)
        except NotRegularFile as exc:
            if exc.kind == "a directory":
                return _directory(raw, path)
            return ToolResult(f"error: {raw} is {exc.kind}, not a regular file; read_file reads only "
                              "regular files", ok=False)
        except OSError as exc:
            return ToolResult(f"error: cannot read {raw}: {exc.strerror or exc}", ok=False)
        finally:
            stop.set()  # a thread still scanning (deadline, Esc) stops at its next chunk
        return _result(raw, path, page, offset, from_byte, max_bytes)


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError, OverflowError):
        return default


def _directory(raw: str, path: Path) -> ToolResult:
    try:
        # a name that is not UTF-8 would hold surrogates, which cannot be stored: U+FFFD instead
        names = sorted(without_surrogates(p.name) + ("/" if p.is_dir() else "") for p in path.iterdir())[:200]
    except OSError as exc:
        return ToolResult(f"error: {raw} is a directory ({exc.strerror or exc})", ok=False)
    return ToolResult(f"error: {raw} is a directory; it holds: " + ", ".join(names), ok=False)


def _result(raw: str, path: Path, page: _Page, offset: int, from_byte: int | None, max_bytes: int) -> ToolResult:
    meta = {"path": str(path), "lines": page.total, "bytes": page.size}
    if page.binary_at is not None:
        return ToolResult(f"error: {raw} is a binary file, not text (a NUL byte at byte {page.binary_at:,})",
                          ok=False, meta=meta)
    if page.past_end:
        if from_byte is not None:
            return ToolResult(f"error: {raw} has {page.size:,} bytes; from_byte {from_byte} is past the end",
                              ok=False, meta=meta)
        lines = f"{page.total} lines" if page.total is not None else f"fewer than {offset} lines"
        return ToolResult(f"error: {raw} has {lines}; offset {offset} is past the end", ok=False, meta=meta)
    out = []
    if page.from_byte is not None and page.lines:
        out.append(f"[from byte {page.from_byte:,}: the rest of line {page.first}]")
    out += [f"{page.first + i}\t{text}" for i, text in enumerate(page.lines)]
    last = page.first + len(page.lines) - 1
    if page.next_byte is not None:
        out.append(f"[line {last} goes on past this page of {max_bytes:,} bytes (the file is {page.size:,} "
                   f"bytes); call read_file with from_byte={page.next_byte} to read on]")
    elif page.next_line is not None:
        if page.total is not None:
            out.append(f"[more: lines {page.next_line}-{page.total} of {page.total}; "
                       f"call read_file with offset={page.next_line}]")
        else:
            out.append(f"[more: from line {page.next_line} (the file is {page.size:,} bytes); "
                       f"call read_file with offset={page.next_line}]")
    else:
        out.append("[end of file]")
    return ToolResult("\n".join(out), meta=meta)


def _read(path: Path, offset: int, limit: int, max_bytes: int, from_byte: int | None,
          stop: threading.Event, allow_outside: bool = False) -> _Page:
    """Runs in a thread: open (regular files only) and read one page. A
    deadline that passed (``stop`` set) ends it with an empty page that no
    one reads. Raises :class:`HardLinked` for a file of several hard links
    unless ``allow_outside`` (checked on the open file, so a swap in between
    is caught)."""
    with open_regular(path) as fh:
        links = os.fstat(fh.fileno()).st_nlink
        if links > 1 and not allow_outside:
            raise HardLinked(links)
        try:
            return _read_page(fh, offset, limit, max_bytes, from_byte, stop)
        except _Stopped:
            return _Page([], offset, 0, None)


def _chunks(fh: BinaryIO, start: int, end: int | None, stop: threading.Event):
    """``(position, bytes)`` pieces of the file from ``start`` up to ``end``
    (or its end), :data:`CHUNK` bytes at a time."""
    fh.seek(start)
    pos = start
    while end is None or pos < end:
        if stop.is_set():
            raise _Stopped()
        want = CHUNK if end is None else min(CHUNK, end - pos)
        data = _read_exact(fh, want)
        if not data:
            return
        yield pos, data
        pos += len(data)


def _read_exact(fh: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes: fewer only at the end of the file."""
    parts = []
    while size > 0:
        data = fh.read(size)
        if not data:
            break
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _read_page(fh: BinaryIO, offset: int, limit: int, max_bytes: int, from_byte: int | None,
               stop: threading.Event) -> _Page:
    size = os.fstat(fh.fileno()).st_size
    head = _read_exact(fh, BINARY_SNIFF)
    if b"\0" in head:
        return _Page([], offset, size, None, binary_at=head.index(b"\0"))
    total = None
    if size <= COUNT_LIMIT:
        total = 0
        last = b"\n"
        for _, data in _chunks(fh, 0, None, stop):
            total += data.count(b"\n")
            last = data[-1:]
        if last != b"\n":
            total += 1
    # where the page starts, and the number of its first line
    if from_byte is not None:
        start = min(from_byte, size)
        first = 1
        for _, data in _chunks(fh, 0, start, stop):
            first += data.count(b"\n")
        mid_line = start > 0 and _byte_at(fh, start - 1) != b"\n"
    else:
        start, first, mid_line = _line_start(fh, offset, stop)
        if start is None:
            return _Page([], offset, size, total, past_end=True)
    fh.seek(start)
    data = _read_exact(fh, max_bytes + 1)
    if not data:
        past = from_byte is None and offset > 1 or from_byte is not None and from_byte > 0 and from_byte >= size
        if past:
            return _Page([], first, size, total, past_end=True)
        return _Page([], first, size, total)
    skip = 0
    while mid_line and skip < min(3, len(data)) and (data[skip] & 0xC0) == 0x80:
        skip += 1  # from_byte fell inside a UTF-8 character: start at the next one
    full = len(data) > max_bytes
    data = data[skip:max_bytes]
    start += skip
    nul = data.find(b"\0")
    if nul >= 0:
        return _Page([], first, size, total, binary_at=start + nul)
    lines: list[str] = []
    used = 0
    next_line = next_byte = None
    while True:
        if len(lines) >= limit:
            next_line = first + len(lines) if used < len(data) or full else None
            break
        end = data.find(b"\n", used)
        if end < 0:
            rest = data[used:]
            if not rest:
                if full and lines:
                    next_line = first + len(lines)
                elif full:  # the page held only the end of a character cut by from_byte
                    next_byte = start + used
                break
            if not full and start + len(data) >= size:  # the last line, without a newline
                lines.append(_text(rest))
                break
            if lines:  # a line the page has no room for: the next page starts with it
                next_line = first + len(lines)
                break
            cut = _cut(rest)  # one line longer than the page: cut it, name the byte to go on from
            lines.append(_text(rest[:cut], whole=False))
            next_byte = start + used + cut
            break
        lines.append(_text(data[used:end]))
        used = end + 1
    if next_line is not None and total is not None and next_line > total:
        next_line = None
    return _Page(lines, first, size, total, next_line=next_line, next_byte=next_byte,
                 from_byte=start if mid_line else None)


def _line_start(fh: BinaryIO, offset: int, stop: threading.Event) -> tuple[int | None, int, bool]:
    """``(byte where line offset starts, offset, False)``; ``None`` for the
    byte when the file has fewer lines."""
    if offset <= 1:
        return 0, 1, False
    seen = 0
    for pos, data in _chunks(fh, 0, None, stop):
        count = data.count(b"\n")
        if seen + count < offset - 1:
            seen += count
            continue
        at = -1
        while True:
            at = data.find(b"\n", at + 1)
            if at < 0:
                break
            seen += 1
            if seen == offset - 1:
                return pos + at + 1, offset, False
    return None, offset, False


def _byte_at(fh: BinaryIO, position: int) -> bytes:
    fh.seek(position)
    return fh.read(1)


def _cut(data: bytes) -> int:
    """Where to cut ``data`` so that no UTF-8 character is split (at most 3 bytes back)."""
    cut = len(data)
    back = 0
    while back < 3 and cut - back > 0 and (data[cut - back - 1] & 0xC0) == 0x80:
        back += 1
    if back < 3 and cut - back > 0 and data[cut - back - 1] >= 0xC0:
        lead = data[cut - back - 1]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if back + 1 < need:  # the character is incomplete: cut before its lead byte
            return cut - back - 1 if cut - back - 1 > 0 else cut
    return cut


def _text(data: bytes, whole: bool = True) -> str:
    """A line's bytes as text (invalid UTF-8 as U+FFFD); a whole line loses the CR of a CRLF end."""
    text = data.decode("utf-8", errors="replace")
    return text[:-1] if whole and text.endswith("\r") else text
