"""A short digest of a tool output, carried by its reference.

Issue "Layered context", "References" (beyond the reference document): each
reference carries the output's size in lines and bytes, its exit status
where there was one, and the first error line where there was one, so that
the model can judge whether to recall it.

The first error line is looked for only where an error is plausible: in a
command's output (a tool that does not only read, or one that reported an
exit status) and in any output the tool marked as failed. A file that was
read successfully is not searched, since source code mentions ``Error``
without anything having failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..outputs import exit_status_of

__all__ = ["Digest", "digest_output", "exit_status_of", "first_error_line", "ERROR_LINE_CHARS"]

#: The first error line is cut to this many characters.
ERROR_LINE_CHARS = 120

_ERROR = re.compile(
    r"(\berror\b|\berrors?:|\bexception\b|traceback \(most recent call last\)|\bfailed\b|\bfailure\b"
    r"|^FAIL\b|^E\s{2,}\S|\bfatal\b|\bpanic(ked)?\b|\bsegmentation fault\b|\bnot found\b"
    r"|\bdenied\b|\bcannot\b|\bcan't\b|\bunable to\b|\bno such file\b|\binvalid\b"
    r"|^\S+:\d+(?::\d+)?:\s*[A-Z]{1,4}\d{2,5}\b)",  # path:line:col: CODE (ruff, flake8, pylint, tsc)
    re.IGNORECASE,
)
_NOT_ERROR = re.compile(r"\b(0|no|zero) (errors?|failures?|failed)\b|\berrors?=0\b|\bfailed=0\b", re.IGNORECASE)
_LINE_NUMBER = re.compile(r"^\s*\d+\t")


def first_error_line(text: str) -> str | None:
    """The first line of ``text`` that reads as an error (``error``,
    ``Traceback``, ``FAILED``, pytest's ``E   …``, ``fatal``, ``panic``,
    ``No such file`` …), stripped and cut to :data:`ERROR_LINE_CHARS`, or
    ``None``. Lines saying there were no errors (``0 errors``) do not count."""
    for line in (text or "").splitlines():
        stripped = _LINE_NUMBER.sub("", line).strip()
        if not stripped or _NOT_ERROR.search(stripped):
            continue
        if _ERROR.search(stripped):
            if len(stripped) > ERROR_LINE_CHARS:
                stripped = stripped[: ERROR_LINE_CHARS - 1] + "…"
            return stripped
    return None


@dataclass(frozen=True)
class Digest:
    """A tool output in brief: ``lines`` and ``bytes`` (UTF-8) of its text,
    its ``exit_status`` (or ``None``), its ``first_error`` line (or ``None``)
    and whether the tool marked it as failed (``failed``)."""

    lines: int
    bytes: int
    exit_status: int | None = None
    first_error: str | None = None
    failed: bool = False
    #: ``stopped`` (the person pressed Esc) or ``timed out``, when the tool said so.
    ended: str | None = None

    def text(self) -> str:
        """``77 lines, 3,104 bytes, exit status 1, first error: "…"``."""
        parts = [f"{self.lines:,} line{'s' if self.lines != 1 else ''}", f"{self.bytes:,} bytes"]
        if self.ended:
            parts.append(self.ended)
        if self.exit_status is not None:
            parts.append(f"exit status {self.exit_status}")
        elif self.failed:
            parts.append("failed")
        if self.first_error:
            quoted = self.first_error.replace('"', "'")
            parts.append(f'first error: "{quoted}"')
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "bytes": self.bytes, "exit_status": self.exit_status,
                "first_error": self.first_error, "failed": self.failed}


def digest_output(content: str, meta: dict[str, Any] | None = None, *, read_only: bool | None = None) -> Digest:
    """The :class:`Digest` of a tool output.

    ``content`` is the output's text; ``meta`` the result's meta (exit
    status, ``error`` for a failed result); ``read_only`` whether the tool
    only reads (``None`` when unknown, treated as a command). The first error
    line is searched in a command's output and in a failed output only.
    """
    meta = meta or {}
    text = content or ""
    lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    status = exit_status_of(meta)
    failed = bool(meta.get("error")) or (status is not None and status != 0)
    search = failed or status is not None or read_only is not True
    first = first_error_line(text) if search else None
    ended = "stopped by the person" if meta.get("stopped") else ("timed out" if meta.get("timed_out") else None)
    return Digest(lines=lines, bytes=len(text.encode("utf-8")), exit_status=status, first_error=first,
                  failed=failed, ended=ended)
