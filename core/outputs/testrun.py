"""The shapes of a test run read from output: :class:`TestRun`, and the base of the
format modules' line readers (:class:`Collector`).

Each format module (:mod:`.pytest`, :mod:`.go`, :mod:`.cargo` …) holds one
:class:`Collector` subclass that reads its format's test results a line at a
time; :mod:`.runs` feeds them and picks the run. The ``tests`` fact
(:mod:`wisp.core.context.manager`), ``run_command``'s ``meta["tests"]`` and
``summarise``'s failing tests all come from that one reading (issue 9, "One
home for output knowledge").
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["TestRun", "Collector", "Names", "pairs", "MAX_NAMES", "MAX_TRACKED", "MAX_LINE_CHARS",
           "FACT_VALUE_CHARS"]

#: Failing test names kept in a :class:`TestRun`; the rest are only counted.
MAX_NAMES = 50
#: Test results one run keeps by name (go test, pytest's sections), so memory stays bounded.
MAX_TRACKED = 10000
#: Characters of one output line that the parser reads; test lines are short.
MAX_LINE_CHARS = 4096
#: Characters of the ``tests`` fact's value (:meth:`TestRun.value`).
FACT_VALUE_CHARS = 500
#: Failing names the one-line summary shows; the rest are counted.
_SUMMARY_NAMES = 10


@dataclass
class TestRun:
    """One test run's result.

    - ``framework``: ``pytest``, ``unittest``, ``go``, ``cargo``, ``jest``,
      ``vitest``, ``swift``, ``maven`` or ``gradle``; for a test command
      whose output no reader knows, the runner the command names
      (``make test``, ``tox``);
    - ``outcome``: ``passed``, ``failed`` or ``no tests``;
    - ``passed``, ``failed``, ``skipped``, ``errors``, ``total``: test counts,
      ``None`` where the output does not say (``go test`` without ``-v``
      lists only failures);
    - ``failing``: failing test names in the framework's own form
      (``tests/test_x.py::test_a``, ``TestTable/negative``,
      ``tests::it_works``, ``Suite › test``, ``Module.Class.testX``), at
      most :data:`MAX_NAMES`; ``more_failing``: how many more there were;
    - ``note``: why the result is partial (``the build failed`` …), or None;
    - ``exit_status``: the command's, when it was known.
    """

    __test__ = False  # not a pytest test class

    framework: str
    outcome: str
    passed: int | None = None
    failed: int | None = None
    skipped: int | None = None
    errors: int | None = None
    total: int | None = None
    failing: list[str] = field(default_factory=list)
    more_failing: int = 0
    note: str | None = None
    exit_status: int | None = None

    @property
    def ok(self) -> bool:
        """True when the run passed (``no tests`` is not a pass)."""
        return self.outcome == "passed"

    def counts_text(self) -> str:
        """``4 failed, 1 error, 2 passed, 1 skipped`` (only the counts known and
        non-zero; ``N tests`` when only the total is known)."""
        parts = []
        for label, n in (("failed", self.failed), ("errors", self.errors), ("passed", self.passed),
                         ("skipped", self.skipped)):
            if n:
                parts.append(f"{n} {'error' if label == 'errors' and n == 1 else label}")
        if not parts and self.total is not None:
            parts.append(f"{self.total} tests")
        return ", ".join(parts)

    def headline(self) -> str:
        """``failed (pytest): 1 failed, 2 passed`` (no names, no note)."""
        counts = self.counts_text()
        return f"{self.outcome} ({self.framework})" + (f": {counts}" if counts else "")

    def summary(self) -> str:
        """One line, as ``meta["tests"]["summary"]``: ``failed (pytest): 1 failed,
        2 passed; failing: tests/test_x.py::test_a`` (at most ten names, the
        rest counted), then the note in parentheses."""
        text = self.headline()
        if self.failing:
            names = ", ".join(self.failing[:_SUMMARY_NAMES])
            more = len(self.failing) - _SUMMARY_NAMES + self.more_failing
            text += f"; failing: {names}" + (f" and {more} more" if more > 0 else "")
        if self.note:
            text += f" ({self.note})"
        return text

    def value(self, limit: int = FACT_VALUE_CHARS) -> str:
        """The ``tests`` fact's value when the tool that ran the command did
        not read the run itself (issue "Layered context", "Facts"): ``failed
        (exit status 1): 1 failed, 2 passed; failing: tests/test_x.py::test_b``,
        at most ``limit`` characters, failing names dropped from the end
        first (and counted)."""
        head = self.outcome
        if self.exit_status is not None:
            head += f" (exit status {self.exit_status})"
        counts = self.counts_text()
        text = head + (f": {counts}" if counts else "")
        names = list(self.failing)
        total = len(names) + self.more_failing
        while names:
            rest = total - len(names)
            candidate = text + "; failing: " + ", ".join(names) + (f" and {rest} more" if rest else "")
            if len(candidate) <= limit:
                return candidate
            names.pop()
        if total:
            return (text + f"; failing: {total} tests")[:limit]
        return text[:limit]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the one-line ``summary`` added (``meta["tests"]``)."""
        return {**asdict(self), "summary": self.summary()}


def pairs(text: str) -> dict[str, int]:
    """``'4 failed, 2 passed'`` → ``{'failed': 4, 'passed': 2}`` (the plurals
    ``errors``, ``warnings``, ``failures``, ``tests`` lose their ``s``)."""
    out: dict[str, int] = {}
    for n, word in re.findall(r"(\d+) ([a-z]+)", text):
        key = word.rstrip("s") if word in ("errors", "warnings", "failures", "tests") else word
        out[key] = out.get(key, 0) + int(n)
    return out


class Names:
    """Failing names in order, without repeats, at most :data:`MAX_NAMES` kept
    (``more`` counts the rest), each with the line that first named it
    (``lines``, 1-based, in the numbering of the lines fed)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.names: list[str] = []
        self.lines: dict[str, int] = {}
        self.more = 0

    def add(self, name: str, line: int = 0) -> None:
        """Add ``name`` (stripped; blank and repeated names are ignored)."""
        name = name.strip()
        if not name or name in self.seen:
            return
        if len(self.names) >= MAX_NAMES:
            if len(self.seen) < 10 * MAX_NAMES:
                self.seen.add(name)
            self.more += 1
            return
        self.seen.add(name)
        self.names.append(name)
        self.lines[name] = line

    def __len__(self) -> int:
        return len(self.names) + self.more


class Collector:
    """Reads one format's test results a line at a time.

    Subclasses set ``framework``, ``prefilter`` (a regular expression
    that a line's start must match for the line to reach any collector:
    :mod:`.runs` joins them all into one) and ``needles`` (lower-case
    words, one of which every line that changes what the collector returns
    holds: a test result holds ``fail``, ``pass``, ``skip``, ``error`` or
    ``test``; a whole output's candidate lines are found with one quick
    search each, :meth:`.doc.Doc.lines_with`), and implement :meth:`line` and
    :meth:`result`. ``evidence`` counts lines recognised; ``summary_seen``
    and ``order`` (the line of the last summary) say which run to pick when
    several formats are present; ``names`` are the failing names seen;
    ``counts`` the summary's counts once one was read (for the formats that
    count in one line).
    """

    framework = ""
    prefilter = ""
    needles: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.evidence = 0
        self.summary_seen = False
        self.order = -1
        self.names = Names()
        self.counts: dict[str, int] | None = None

    def summary_at(self, number: int) -> None:
        """Note a summary line at line ``number``."""
        self.summary_seen, self.order = True, number
        self.evidence += 1

    def line(self, line: str, number: int) -> None:  # pragma: no cover - abstract
        """Read one line (cleaned: no colours, no line break, at most
        :data:`MAX_LINE_CHARS` characters); ``number`` is 1-based."""
        raise NotImplementedError

    def result(self) -> TestRun | None:  # pragma: no cover - abstract
        """The run read so far, or None when no run was recognised."""
        raise NotImplementedError

    def run(self, *, failed_any: bool | None = None, passed_any: bool | None = None, note: str | None = None,
            **counts: int | None) -> TestRun:
        """This format's :class:`TestRun` from its ``counts`` (``passed``,
        ``failed``, ``skipped``, ``errors``, ``total``) and :attr:`names`.

        The outcome is the one rule for every format: ``failed`` when
        ``failed_any`` (by default: a failed test or an error), else
        ``passed`` when ``passed_any`` (by default: a passed test), else
        ``no tests``."""
        if failed_any is None:
            failed_any = bool(counts.get("failed") or counts.get("errors"))
        if passed_any is None:
            passed_any = bool(counts.get("passed"))
        outcome = "failed" if failed_any else ("passed" if passed_any else "no tests")
        return TestRun(self.framework, outcome, failing=self.names.names, more_failing=self.names.more, note=note,
                       **counts)

    def line_of(self, name: str) -> int:
        """The line that named failing test ``name`` (0 when unknown)."""
        return self.names.lines.get(name, 0)
