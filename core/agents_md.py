"""AGENTS.md: a project's instructions for the model, and its tool list.

Rules (issue "Tools that act", "Which tools a conversation has"):

- The file is ``AGENTS.md`` in the conversation's working directory (only
  there; ``agents.md`` is read too on a file system that tells them apart).
- A ``tools:`` line names the conversation's tools, as a JSON list
  (``tools: ["run_command", "read_file"]``), a bracketed list without quotes
  (``tools: [run_command, read_file]``) or comma- or space-separated names
  (``tools: run_command, read_file``). ``tools: []`` (or ``tools: none``)
  gives no tools. The first such line counts, outside fenced code blocks;
  it may sit in a ``---`` front-matter block at the top, and may be written
  ``- tools:`` or ``**tools:**`` (lower case: ``Tools:`` in prose is not
  it). A second ``tools:`` line is reported as a
  problem and ignored.
- Everything else is the project's instructions, given to the model as a
  layer (the ``tools:`` line and an emptied front-matter block are left
  out). Empty instructions are ``None``.
- The file is read as UTF-8 (invalid bytes become U+FFFD, reported as a
  problem); at most :data:`MAX_BYTES` bytes are read, and a longer file is
  cut there with a note, reported too.
- It is confined as ``read_file`` is (:func:`wisp.core.paths.confined_path`):
  an AGENTS.md that is a symlink to a file outside the working directory (or
  whose path resolves outside it) is not read, and neither is one that is not
  a regular file (a FIFO would hang wisp's start); each is reported as a
  problem, which the startup problems line shows (issue "Nothing runs, leaks,
  hangs or is lost that shouldn't be").

Precedence of tool lists (command line, then AGENTS.md, then config) is
applied by :func:`wisp.core.toolset.choose_tools`, not here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .paths import NotRegularFile, OutsideWorkdir, confined_path, open_regular

__all__ = ["AgentsMd", "AgentsMdError", "parse_agents_md", "load_agents_md", "FILE_NAMES", "MAX_BYTES"]

#: The names looked for in the working directory, in order.
FILE_NAMES = ("AGENTS.md", "agents.md")
#: The most of AGENTS.md that is read (bytes); the rest is cut with a note.
MAX_BYTES = 65536

_TOOLS_LINE = re.compile(r"^\s*(?:[-*]\s+)?(?:\*\*|__)?tools(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(.*?)\s*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class AgentsMdError(ValueError):
    """A ``tools:`` line that cannot be read. The message names the file and
    line and shows the form to write."""


@dataclass
class AgentsMd:
    """What AGENTS.md says: ``tools`` (a list of names, or None when it has
    no ``tools:`` line), ``tools_line`` (its 1-based line number),
    ``instructions`` (the rest, or None when empty), ``path`` and
    ``problems`` (one-line texts for the person: a second tools line,
    invalid UTF-8, a cut file)."""

    tools: list[str] | None = None
    tools_line: int | None = None
    instructions: str | None = None
    path: Path | None = None
    problems: list[str] = field(default_factory=list)


def _parse_tools_value(raw: str, where: str) -> list[str]:
    """The names in a ``tools:`` value; raises :class:`AgentsMdError`."""
    value = raw.strip().strip("`").strip()
    if value.lower() in ("", "none", "[]"):
        if value == "":
            raise AgentsMdError(f'{where}: the tools: line names no tools; write tools: ["run_command"], '
                                "or tools: [] for none")
        return []
    names: list[str]
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            if not value.endswith("]"):
                raise AgentsMdError(f'{where}: the tools: list is not closed; write tools: ["run_command", '
                                    '"read_file"]') from None
            parsed = [p.strip().strip("'\"") for p in value[1:-1].split(",") if p.strip()]
        if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
            raise AgentsMdError(f'{where}: the tools: list must hold tool names, such as '
                                'tools: ["run_command", "read_file"]')
        names = [p.strip() for p in parsed if p.strip()]
    else:
        names = [p.strip().strip("'\"`") for p in re.split(r"[,\s]+", value) if p.strip()]
    bad = [n for n in names if not _NAME.match(n)]
    if bad:
        raise AgentsMdError(f"{where}: {bad[0]!r} is not a tool name; write names such as "
                            'tools: ["run_command", "read_file"]')
    return list(dict.fromkeys(names))


def parse_agents_md(text: str, path: Path | None = None) -> AgentsMd:
    """Read AGENTS.md's ``text``: its tool list and its instructions.

    Raises :class:`AgentsMdError` for a ``tools:`` line whose value cannot be
    read (an unclosed list, something that is not a name); a problem the
    person should hear about but that does not stop wisp goes in ``problems``.
    """
    name = str(path) if path is not None else "AGENTS.md"
    lines = text.splitlines()
    result = AgentsMd(path=path)

    def tools_line(line: str, number: int) -> bool:
        """True when ``line`` is a tools line (recorded, or reported as a second one)."""
        m = _TOOLS_LINE.match(line)
        if m is None:
            return False
        where = f"{name} line {number}"
        if result.tools is None:
            result.tools = _parse_tools_value(m.group(1), where)
            result.tools_line = number
        else:
            result.problems.append(f"{where}: a second tools: line; only the one on line "
                                   f"{result.tools_line} counts")
        return True

    keep: list[str] = []
    body_start = 0
    if lines and lines[0].strip() == "---":  # front matter: --- … --- (or ...)
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            inner = [line for i, line in enumerate(lines[1:end], start=2) if not tools_line(line, i)]
            if any(line.strip() for line in inner):
                keep = [lines[0], *inner, lines[end]]
            body_start = end + 1
    in_fence = False
    drop_blank = False  # a removed tools line between blank lines leaves one blank line, not two
    for i in range(body_start, len(lines)):
        line = lines[i]
        if drop_blank:
            drop_blank = False
            if not line.strip():
                continue
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and tools_line(line, i + 1):
            drop_blank = bool(keep) and not keep[-1].strip()
            continue
        keep.append(line)
    body = "\n".join(keep).strip("\n")
    result.instructions = body if body.strip() else None
    return result


def load_agents_md(workdir: Path) -> AgentsMd | None:
    """AGENTS.md of ``workdir``, parsed, or None when there is none.

    Raises :class:`AgentsMdError` for an unreadable ``tools:`` line, or a
    file that exists but cannot be read (naming the OS's reason).
    """
    for file_name in FILE_NAMES:
        path = Path(workdir) / file_name
        if not os.path.lexists(path):
            continue
        try:
            real = confined_path(path, workdir)
            with open_regular(real) as fh:
                data = b""
                while len(data) <= MAX_BYTES:
                    piece = fh.read(MAX_BYTES + 1 - len(data))
                    if not piece:
                        break
                    data += piece
        except FileNotFoundError:
            continue  # a link to nothing
        except OutsideWorkdir as exc:
            return AgentsMd(path=path, problems=[
                f"{path} leads outside the working directory (to {exc.path}); it was not read, so its "
                "instructions and tools: line do not count"])
        except NotRegularFile as exc:
            return AgentsMd(path=path, problems=[f"{path} is {exc.kind}, not a regular file; it was not read"])
        except OSError as exc:
            raise AgentsMdError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        problems = []
        cut = len(data) > MAX_BYTES
        if cut:
            data = data[:MAX_BYTES]
            problems.append(f"{path} is longer than {MAX_BYTES:,} bytes; only the first {MAX_BYTES:,} "
                            "are given to the model")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            if not cut or "\ufffd" in text[:-4]:
                problems.append(f"{path} is not valid UTF-8; invalid bytes are shown as \ufffd")
        parsed = parse_agents_md(text, path)
        if cut and parsed.instructions:
            parsed.instructions += f"\n\n[AGENTS.md was cut at {MAX_BYTES:,} bytes]"
        parsed.problems = problems + parsed.problems
        return parsed
    return None
