"""The shapes the summarise readers share: the output as lines, findings, a reading.

Also what every reader of an output needs: :data:`ANSI` (terminal colour
codes), :data:`CI_STAMP` (a CI runner's timestamp before a line) and
:func:`exit_status_of` (a tool result's exit status from its meta).

Line numbers are those of the stored output, 1-based: line ``k`` is the
``k``-th piece of the stored text split on ``\\n`` (a final newline does not
start a line), which is the numbering a recall shows, so a point's ``L154``
and ``recall entry N from line 154`` land on the same line
(wisp-memory-tool.txt, "summarise").

For matching, each line is read without terminal colour codes, for a
line rewritten in place with carriage returns (progress bars) as its last
state, and as its program produced it (:mod:`.prefixes`: wisp's own
trailer lines blank, read_file's numbers and per-line prefixes such as
BuildKit's ``#12 3.456`` or a process manager's ``web.1 | `` taken off).
The numbering is never changed by this.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Iterator, Pattern

from .prefixes import Produced, produced
from .testrun import TestRun

__all__ = ["Doc", "Finding", "Reading", "split_stored_lines", "exit_status_of", "context_after", "lines_after", "shorten",
           "ANSI", "CI_STAMP", "RANK_ROOT", "RANK_TEST", "RANK_AFTER"]

#: Terminal control sequences: CSI (colours, cursor), OSC (titles, links), charset and one-character escapes.
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[@-Z\\-_]")

#: A root cause: a located diagnostic, an exception, a collection error.
RANK_ROOT = 0
#: A failing test, or an error no file locates.
RANK_TEST = 1
#: What followed from the others: ``make: *** … Error 1``, ``could not compile``.
RANK_AFTER = 2


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
#: A CI runner's timestamp before every line (GitHub Actions: ``2024-05-02T10:11:12.1234567Z ``).
CI_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


#: Short words searched first, so that longer ones holding them are found among their lines.
_SEEDS = ("error", "fail", "warn", "test", "panic", "exception", "fatal", "npm ", ".go:", "swift", "[info]")


_EXIT_KEYS = ("exit_status", "exit_code", "returncode", "status")


def exit_status_of(meta: dict[str, Any] | None) -> int | None:
    """The exit status a tool reported in its result's ``meta``
    (``exit_status``, ``exit_code``, ``returncode`` or an integer ``status``),
    or ``None``."""
    for key in _EXIT_KEYS:
        value = (meta or {}).get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def split_stored_lines(text: str) -> list[str]:
    """The stored output's lines in recall's numbering: split on ``\\n``, with
    a final newline not starting an empty last line. ``""`` has no lines."""
    if not text:
        return []
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


class Doc:
    """An output ready to read: ``raw`` lines (as stored), ``lines`` (cleaned
    for matching), ``text`` (the cleaned lines joined by ``\\n``), ``n`` (the
    number of lines), ``size`` (bytes of the stored text, UTF-8) and ``meta``
    (the entry's meta, for its exit status)."""

    def __init__(self, text: str, meta: dict | None = None):
        self.raw_text = text or ""
        self.meta = dict(meta or {})
        self.size = len(self.raw_text.encode("utf-8", errors="replace"))
        clean = ANSI.sub("", self.raw_text) if "\x1b" in self.raw_text else self.raw_text
        lines = split_stored_lines(clean)
        if "\r" in clean:
            for i, line in enumerate(lines):
                if "\r" in line:
                    parts = [p for p in line.split("\r") if p.strip()]
                    lines[i] = parts[-1] if parts else ""
        self.stored_lines = lines
        # the output as its program produced it: wisp's own lines, read_file's numbers and
        # per-line prefixes taken off, the numbering kept (.prefixes)
        made = produced(lines)
        lines = made.lines
        self.produced = made
        self.ci_stamped = "timestamp" in made.prefixes
        self.self_numbered = made.numbered
        #: 1-based stored line numbers of this document's lines, when it is one stream of an
        #: output (:meth:`stream_docs`); ``None``: line k is the stored output's line k.
        self.numbers: list[int] | None = None
        self.lines = lines
        self.n = len(lines)
        self.text = "\n".join(lines)
        self._starts: list[int] | None = None
        self._lower: str | None = None
        self._needles: dict[str, list[int]] = {}
        self._lower_lines: list[str] | None = None

    @property
    def exit_status(self) -> int | None:
        """The command's exit status: its entry's meta, else run_command's own
        ``[exit status N]`` line at the end of the stored output, else ``None``."""
        status = exit_status_of(self.meta)
        return status if status is not None else self.produced.exit_status

    @property
    def changed(self) -> bool:
        """Whether reading it as produced changed any line (wisp's own lines,
        read_file's numbers or a prefix taken off)."""
        return self.lines != self.stored_lines

    @property
    def streams(self) -> dict[str, list[int]]:
        """Stream name → 0-based indices of its lines, when two or more
        processes' lines interleave in this output (else empty)."""
        return self.produced.streams

    def stream_docs(self) -> list["Doc"]:
        """The output read stream by stream: one :class:`Doc` per stream (its
        :attr:`numbers` map its lines to this one's, 1-based), or ``[self]``
        when the output is one stream."""
        if not self.streams:
            return [self]
        out = []
        for name, idx in self.streams.items():
            sub = Doc.__new__(Doc)
            sub.raw_text = ""
            sub.meta = self.meta
            sub.size = 0
            sub.stored_lines = [self.stored_lines[i] for i in idx]
            sub.lines = [self.lines[i] for i in idx]
            sub.produced = Produced(sub.lines)
            sub.ci_stamped, sub.self_numbered = self.ci_stamped, self.self_numbered
            sub.numbers = [i + 1 for i in idx]
            sub.n = len(sub.lines)
            sub.text = "\n".join(sub.lines)
            sub._starts, sub._lower, sub._needles, sub._lower_lines = None, None, {}, None
            sub.stream = name
            out.append(sub)
        return out

    @property
    def starts(self) -> list[int]:
        """Offsets in :attr:`text` where each line starts."""
        if self._starts is None:
            self._starts = [0, *accumulate(len(line) + 1 for line in self.lines[:-1])] if self.lines else []
        return self._starts

    def line_at(self, offset: int) -> int:
        """The 0-based index of the line holding character ``offset`` of :attr:`text`."""
        return bisect.bisect_right(self.starts, offset) - 1

    def find(self, pattern: Pattern[str]) -> Iterator[int]:
        """0-based indices of the lines where ``pattern`` (compiled with
        ``re.MULTILINE`` and anchored as it likes) matches, each once, in order.
        The search runs over the whole text at once, so a pattern that matches
        rarely costs about one pass of the regex engine."""
        last = -1
        for m in pattern.finditer(self.text):
            i = self.line_at(m.start())
            if i != last:
                last = i
                yield i

    def lines_with(self, *needles: str, lower: bool = False) -> list[int]:
        """Sorted 0-based indices of candidate lines holding any of
        ``needles``, matched without regard to case (so a few more lines
        than asked may come back: every reader checks its candidates with
        its own pattern). ``lower`` is kept for callers that say so.

        Found with ``str.find`` over the whole text, which is far quicker on
        a large output than a regular expression; each word is searched
        once per output, and a word holding a shorter one already searched
        (``error:`` holds ``error``) is found among that one's lines."""
        found: set[int] = set()
        for needle in needles:
            if needle:
                found.update(self._needle(needle.lower()))
        return sorted(found)

    def _needle(self, needle: str) -> list[int]:
        hit = self._needles.get(needle)
        if hit is not None:
            return hit
        for seed in _SEEDS:
            if seed in needle and seed != needle:
                self._needle(seed)
        base: list[int] | None = None
        for key, lines in self._needles.items():
            if key in needle and (base is None or len(lines) < len(base)):
                base = lines
        text = self.lower_text
        if base is not None:
            starts = self.starts
            out = [i for i in base if needle in text[starts[i]:starts[i] + len(self.lines[i])]]
        else:
            out = []
            pos = text.find(needle)
            while pos != -1:
                i = self.line_at(pos)
                out.append(i)
                if len(out) % 1024 == 0 and pos < 4000 * len(out):
                    # a common word: checking each remaining line is quicker
                    lower_lines = self.lower_lines
                    out.extend(j for j in range(i + 1, self.n) if needle in lower_lines[j])
                    break
                end = text.find("\n", pos)
                if end == -1:
                    break
                pos = text.find(needle, end + 1)
        self._needles[needle] = out
        return out

    @property
    def lower_lines(self) -> list[str]:
        """:attr:`lower_text` split into lines (computed once)."""
        if self._lower_lines is None:
            self._lower_lines = self.lower_text.split("\n")
        return self._lower_lines

    @property
    def lower_text(self) -> str:
        """:attr:`text` lower-cased (computed once)."""
        if self._lower is None:
            lowered = self.text.lower()
            if len(lowered) != len(self.text):  # a few letters lower-case to two characters
                lowered = self.text.translate(_ASCII_LOWER)
            self._lower = lowered
        return self._lower

    def get(self, i: int) -> str:
        """Line ``i`` (0-based) cleaned, or ``""`` outside the output."""
        return self.lines[i] if 0 <= i < self.n else ""


@dataclass
class Finding:
    """One point a reader makes about a line.

    ``line`` is 1-based; ``kind`` is ``error``, ``failure`` (a failing test)
    or ``warning``; ``place`` the file or test it belongs to (findings are
    grouped by it); ``text`` the point as shown after ``L<line>``; ``rank``
    one of :data:`RANK_ROOT`, :data:`RANK_TEST`, :data:`RANK_AFTER`;
    ``context`` the 1-based lines shown under it; ``reader`` the reader's name.
    """

    line: int
    kind: str
    place: str
    text: str
    rank: int = RANK_ROOT
    context: tuple[int, ...] = ()
    reader: str = ""


@dataclass
class Reading:
    """What the readers found in one output.

    ``findings`` in the order found; ``claimed`` the 1-based lines some
    reader accounted for (shown, counted or recognised as a summary);
    ``failing_tests`` test name → the line that names it, in the test run's
    order, and ``more_failing`` how many more there were (both from the
    one reading of the test run, :mod:`.runs`, so that summarise and the
    ``tests`` fact name the same tests); ``test_run`` that run (a
    :class:`~.testrun.TestRun`) or None; ``tallies`` the runners' own
    summary lines as ``(line, text)``; ``readers`` the names of the readers
    that recognised their format.
    """

    findings: list[Finding] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)
    failing_tests: dict[str, int] = field(default_factory=dict)
    more_failing: int = 0
    test_run: TestRun | None = None
    tallies: list[tuple[int, str]] = field(default_factory=list)
    readers: list[str] = field(default_factory=list)
    _lines: set[int] = field(default_factory=set, repr=False)

    def claim(self, *lines: int) -> None:
        """Mark 1-based lines as accounted for."""
        self.claimed.update(lines)

    def claim_range(self, first: int, last: int) -> None:
        """Mark 1-based lines ``first``..``last`` as accounted for."""
        self.claimed.update(range(first, last + 1))

    def add(self, finding: Finding) -> None:
        """Record a finding (and claim its line and context), once per line."""
        if finding.line in self._lines:
            return
        self._lines.add(finding.line)
        self.findings.append(finding)
        self.claim(finding.line, *finding.context)
        if finding.reader and finding.reader not in self.readers:
            self.readers.append(finding.reader)

    def merge(self, other: "Reading", numbers: list[int] | None) -> None:
        """Add what ``other`` found in one stream of this output, its 1-based
        lines mapped to this output's by ``numbers`` (``None``: the same)."""
        def at(k: int) -> int:
            return numbers[k - 1] if numbers is not None and 0 < k <= len(numbers) else k

        for f in other.findings:
            self.add(Finding(at(f.line), f.kind, f.place, f.text, f.rank, tuple(at(c) for c in f.context), f.reader))
        self.claim(*(at(k) for k in other.claimed))
        self.tallies.extend((at(k) if k else k, t) for k, t in other.tallies)
        for name in other.readers:
            if name not in self.readers:
                self.readers.append(name)

    def saw(self, reader: str) -> None:
        """Note that ``reader`` recognised its format (even with nothing to report)."""
        if reader not in self.readers:
            self.readers.append(reader)

    def tally(self, line: int, text: str) -> None:
        """Keep a runner's summary line (``2 failed, 48 passed``)."""
        if all(ln != line and t != text for ln, t in self.tallies):
            self.tallies.append((line, text))
        self.claim(line)

    def has_line(self, line: int) -> bool:
        return line in self._lines


def context_after(doc: Doc, i: int, limit: int = 2, *, stop: Pattern[str] | None = None,
                  indented_only: bool = False) -> tuple[int, ...]:
    """1-based numbers of up to ``limit`` non-blank lines right after 0-based
    line ``i`` that belong to it: stopping at a blank line, at a line
    ``stop`` matches, or (with ``indented_only``) at an unindented line."""
    out: list[int] = []
    j = i + 1
    while j < doc.n and len(out) < limit:
        line = doc.lines[j]
        if not line.strip():
            break
        if stop is not None and stop.search(line):
            break
        if indented_only and not line[:1].isspace():
            break
        out.append(j + 1)
        j += 1
    return tuple(out)


def lines_after(doc: Doc, i: int, limit: int = 3, window: int = 10,
                stop: Pattern[str] | None = None) -> tuple[int, ...]:
    """1-based numbers of up to ``limit`` non-blank lines among the ``window``
    lines after 0-based line ``i``, blank lines passed over, stopping at a
    line ``stop`` matches at its start."""
    out: list[int] = []
    for j in range(i + 1, min(doc.n, i + 1 + window)):
        line = doc.lines[j]
        if stop is not None and stop.match(line):
            break
        if line.strip():
            out.append(j + 1)
            if len(out) >= limit:
                break
    return tuple(out)


def shorten(text: str, limit: int = 160) -> str:
    """``text`` stripped and cut to ``limit`` characters with ``…``."""
    t = text.strip()
    return t if len(t) <= limit else t[: limit - 1].rstrip() + "…"
