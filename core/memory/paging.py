"""Numbering and paging stored text within a token budget (wisp-memory-tool.txt, "recall").

A recalled entry's lines are shown as ``N<TAB>text``, ``N`` being the line's
number in the stored output (:func:`wisp.core.outputs.split_stored_lines`), the
same numbering summarise's ``L154`` cites. A line that already begins with
its own number and a tab (read_file's output) is shown as it is, not
numbered twice; read_file's own last line ``[end of file]`` is shown bare
(``file_end``), since it is the file's end, not a line of it. Nothing else
ends with ``[end of file]``: a reply or a command output has no file, and its
page ends where its last line does.
A page takes whole lines until the next would pass the budget (always at
least one); the next page starts at the next line. A line longer than
:data:`~.limits.MAX_LINE_CHARS` characters is shown cut, saying so. Pages
are pure: the same text, start and budget always give the same page, so
following the ``[more: …]`` lines rebuilds the output exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tokens import estimate_tokens
from .limits import MAX_LINE_CHARS
from ..outputs import split_stored_lines

__all__ = ["Page", "page_lines", "numbered", "EOF_MARK", "split_stored_lines"]

#: read_file's (and the reference's) end-of-file line.
EOF_MARK = "[end of file]"


@dataclass(frozen=True)
class Page:
    """One page: ``lines`` to show, ``first`` and ``last`` (1-based line
    numbers shown), ``total`` lines, ``next_line`` (where the next page
    starts, or ``None`` at the end) and ``own_end`` (the text's own last
    line was ``[end of file]`` and was shown as the end)."""

    lines: list[str]
    first: int
    last: int
    total: int
    next_line: int | None
    own_end: bool = False


def numbered(number: int, line: str) -> str:
    """Line ``number`` as a recall shows it (see the module doc)."""
    if len(line) > MAX_LINE_CHARS:
        line = f"{line[:MAX_LINE_CHARS]}… [line {number} cut: {len(line):,} characters]"
    prefix = f"{number}\t"
    return line if line.startswith(prefix) else prefix + line


def page_lines(lines: list[str], start: int, budget_tokens: int, *, file_end: bool = False) -> Page:
    """The page of ``lines`` (the stored text's lines) from 1-based line
    ``start`` that fits ``budget_tokens`` (each line estimated by
    :func:`~wisp.core.tokens.estimate_tokens`). ``start`` past the end gives an empty page at the end.
    ``file_end``: the lines are read_file's, whose own last line ``[end of file]`` is shown bare."""
    total = len(lines)
    start = max(1, start)
    if start > total:
        return Page([], start, start - 1, total, None)
    budget = max(1, budget_tokens)
    out: list[str] = []
    used = 0
    k = start
    own_end = False
    while k <= total:
        line = lines[k - 1]
        if file_end and k == total and line == EOF_MARK:
            shown, own_end = EOF_MARK, True
        else:
            shown = numbered(k, line)
        cost = estimate_tokens(shown) + 1
        if out and used + cost > budget:
            break
        out.append(shown)
        used += cost
        k += 1
    return Page(out, start, k - 1, total, k if k <= total else None, own_end)


def fits(text: str, budget_tokens: int) -> bool:
    """Whether ``text`` fits ``budget_tokens`` (estimated)."""
    return estimate_tokens(text) <= budget_tokens
