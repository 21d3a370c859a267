"""The ``workdir`` and ``branch`` facts: where the conversation works, and on which git branch.

Issue "Layered context", "Facts" (sources: a tool, ``workdir`` and
``branch`` from the working directory and git). The branch is read from
``.git/HEAD`` (the working directory's, or the nearest parent's; a
``.git`` file of a worktree or submodule is followed), falling back to
``git rev-parse --abbrev-ref HEAD`` when that cannot be read. A detached
HEAD is ``detached at <first 12 hex digits>``. Outside a repository there is
no branch.

The ``workdir`` fact's value is the directory and, once wisp has changed
files in it for this conversation, what it changed
(:func:`workdir_picture`): the files edited or created, with their turns,
and those ``/undo`` put back, so that the model's picture of the directory
follows its edits without reading them again. What changed is handed in as
:class:`FileChange` rows by whoever keeps the edits (the session gives the
context a function for it), so this module reads no table but the facts'.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["find_git_dir", "read_branch", "current_branch", "FileChange", "workdir_picture", "PICTURE_FILES"]

#: The most files the ``workdir`` fact names (the newest); the rest are counted.
PICTURE_FILES = 8


@dataclass(frozen=True)
class FileChange:
    """What wisp did to one file of the working directory in a conversation:
    ``path`` (relative to it), ``state`` (``edited``, ``created``, or
    ``undone``: ``/undo`` put it back) and ``turns`` (the turn numbers of
    its edits, in order)."""

    path: str
    state: str
    turns: tuple[int, ...] = ()

GIT_TIMEOUT_S = 2.0


def find_git_dir(start: str | os.PathLike[str]) -> Path | None:
    """The git directory for ``start`` (searching its parents), or ``None``."""
    try:
        here = Path(start).resolve()
    except OSError:
        return None
    for folder in (here, *here.parents):
        dot = folder / ".git"
        try:
            if dot.is_dir():
                return dot
            if dot.is_file():
                text = dot.read_text(encoding="utf-8", errors="replace").strip()
                if text.startswith("gitdir:"):
                    target = Path(text.split(":", 1)[1].strip())
                    if not target.is_absolute():
                        target = (folder / target).resolve()
                    return target if target.exists() else None
        except OSError:
            return None
    return None


def read_branch(workdir: str | os.PathLike[str]) -> str | None:
    """The branch from ``.git/HEAD`` (``main``; ``detached at 3f9a2c1b0a1d``),
    or ``None`` outside a repository or when HEAD cannot be read."""
    git_dir = find_git_dir(workdir)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    if len(head) >= 7 and all(c in "0123456789abcdef" for c in head.lower()):
        return f"detached at {head[:12]}"
    return None


async def current_branch(workdir: str | os.PathLike[str]) -> str | None:
    """The branch (see :func:`read_branch`), asking ``git rev-parse
    --abbrev-ref HEAD`` when a repository's HEAD could not be read; ``None``
    when there is none or git fails (within :data:`GIT_TIMEOUT_S` seconds)."""
    branch = read_branch(workdir)
    if branch is not None or find_git_dir(workdir) is None:
        return branch
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", "rev-parse", "--abbrev-ref", "HEAD", cwd=str(workdir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    except (OSError, ValueError):
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    name = out.decode("utf-8", errors="replace").strip()
    return name if proc.returncode == 0 and name else None


def workdir_picture(workdir: str, changes: list[FileChange]) -> str:
    """The ``workdir`` fact's value: ``workdir`` alone when nothing changed,
    else ``/p/project; changed by edits in this conversation: src/app.py
    (turn 3), notes.md (created, turn 4); put back by /undo: README.md``,
    the newest :data:`PICTURE_FILES` files named and the rest counted (the
    fact stays short: it goes with every request)."""
    if not changes:
        return workdir
    shown = changes[-PICTURE_FILES:]
    more = len(changes) - len(shown)

    def turns(c: FileChange) -> str:
        if not c.turns:
            return ""
        return ("turn " if len(c.turns) == 1 else "turns ") + ", ".join(str(t) for t in c.turns)

    standing = []
    for c in shown:
        if c.state == "undone":
            continue
        how = ", ".join(x for x in ("created" if c.state == "created" else "", turns(c)) if x)
        standing.append(f"{c.path} ({how})" if how else c.path)
    undone = [c.path for c in shown if c.state == "undone"]
    parts = [workdir]
    if standing:
        parts.append("changed by edits in this conversation: " + ", ".join(standing))
    if undone:
        parts.append("put back by /undo: " + ", ".join(undone))
    if more:
        parts.append(f"and {more} more file{'s' if more != 1 else ''} (/undo list names them)")
    return "; ".join(parts)
