"""Test runs read from a command's output: passed or failed, counts, failing names.

Pure text in, :class:`~.testrun.TestRun` out; nothing is run here. Three
users read a test run through this one module (issue 9, "One home for output
knowledge"):

- ``run_command`` feeds every piece of a command's output through a
  :class:`TestOutputParser` while the command runs (so a summary or a
  failing name in the part of the output that the cap drops still counts)
  and puts the result in its tool result's ``meta["tests"]``;
- the ``tests`` fact is made from that, or, for a tool that did not read
  the run, from :func:`read_test_run` over the stored output;
- ``summarise`` lists the failing tests that :func:`read_lines` reads
  from the same lines.

Each format's collector lives in its format's module (:mod:`.pytest`,
:mod:`.unittest`, :mod:`.go`, :mod:`.cargo`, :mod:`.jest`, :mod:`.swift`,
:mod:`.java`); its module doc says what it reads.

When no format printed a summary: a known framework's command (``pytest``,
``go test`` …, :func:`~.commands.framework_for_command`) that exited
non-zero is a ``failed`` run with a note (the build failed, or the run
crashed or was cut), and one that exited 0 held no run (``pytest
--version``); a test command whose runner wisp cannot read (``make test``,
``tox``, ``mvn test`` …, :func:`~.commands.runner_for_command`) passed or
failed by its exit status. Otherwise output that holds no test run gives
``None``. ANSI colour codes, carriage returns and CI runners' timestamps
are ignored. Lines longer than :data:`~.testrun.MAX_LINE_CHARS` are read
only up to that length.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from .cargo import CargoRun
from .commands import framework_for_command, runner_for_command
from .doc import ANSI, CI_STAMP
from .go import GoRun
from .java import GradleRun, MavenRun
from .jest import JestRun, VitestRun
from .pytest import PytestRun
from .swift import SwiftRun
from .testrun import MAX_LINE_CHARS, Collector, TestRun
from .unittest import UnittestRun

__all__ = ["TestOutputParser", "read_test_run", "read_lines", "COLLECTORS", "NEEDLES"]

#: Every format's collector, in the order a tie in evidence is broken.
COLLECTORS: tuple[type[Collector], ...] = (PytestRun, UnittestRun, GoRun, CargoRun, JestRun, VitestRun, SwiftRun,
                                           MavenRun, GradleRun)
_PREFILTER = re.compile("|".join(f"(?:{c.prefilter})" for c in COLLECTORS))
#: Every collector's needles: a line without any of them is read by none.
NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(n for c in COLLECTORS for n in c.needles))


class TestOutputParser:
    """Reads a command's output as it streams and says what test run it held.

    ``command`` (the command line, optional) names the framework to prefer
    when the output could be read several ways, and lets a run that printed
    no summary still count from its exit status. Call :meth:`feed` with
    text pieces in order (any split, even mid-line), then :meth:`result`.
    Memory stays bounded whatever the output's size: one partial line of at
    most :data:`~.testrun.MAX_LINE_CHARS` characters and at most
    :data:`~.testrun.MAX_NAMES` names per format.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, command: str | None = None) -> None:
        self.command = command
        self.hint = framework_for_command(command)
        self.collectors = [cls() for cls in COLLECTORS]
        self.chosen: Collector | None = None
        self._partial = ""
        self._skipping = False  # inside an over-long line
        self._lines = 0

    def feed(self, text: str) -> None:
        """Read another piece of output (``str``; decode bytes first)."""
        if not text:
            return
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        pieces = text.split("\n")
        last = pieces.pop()
        for i, piece in enumerate(pieces):
            if i == 0:
                if self._skipping:
                    self._skipping = False
                    self._partial = ""
                    self._lines += 1
                    continue
                piece = self._partial + piece
                self._partial = ""
            self._lines += 1
            self.line(piece, self._lines)
        if pieces:
            self._skipping = False
        if self._skipping:
            return
        self._partial += last
        if len(self._partial) > MAX_LINE_CHARS:
            self._lines += 1
            self.line(self._partial[:MAX_LINE_CHARS], self._lines)
            self._partial = ""
            self._skipping = True

    def gap(self) -> None:
        """Say that some output was not fed (it was skipped): the line in
        progress is dropped, and so is the start of the next piece up to its
        first line break."""
        self._partial = ""
        self._skipping = True

    def line(self, line: str, number: int) -> None:
        """Read one whole line (no line break in it), numbered ``number``
        (1-based), for a caller that has the lines already (summarise)."""
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        if "\x1b" in line:
            line = ANSI.sub("", line)
        if line[:1].isdigit():
            line = CI_STAMP.sub("", line, count=1)
        if not _PREFILTER.match(line):
            return
        line = line.rstrip()
        for c in self.collectors:
            c.line(line, number)

    def result(self, exit_status: int | None = None) -> TestRun | None:
        """The test run the output held, or None.

        ``exit_status`` (the command's) turns a test command that printed no
        summary into a run (see the module doc); it never turns a summary's
        ``failed`` into ``passed``, and a ``passed`` run with a non-zero
        status gets a note. :attr:`chosen` is then the collector read.
        """
        if self._partial and not self._skipping:
            self._lines += 1
            self.line(self._partial, self._lines)
            self._partial = ""
        with_summary = [c for c in self.collectors if c.summary_seen]
        chosen: Collector | None = None
        if self.hint:
            chosen = next((c for c in with_summary if c.framework == self.hint), None)
        if chosen is None and with_summary:
            chosen = max(with_summary, key=lambda c: (c.evidence, c.order))
        run = chosen.result() if chosen is not None else None
        if run is None and self.hint:
            # a test command whose build failed, with no summary (cargo, swift)
            chosen = next((c for c in self.collectors if c.framework == self.hint and c.evidence), None)
            run = chosen.result() if chosen is not None else None
        self.chosen = chosen if run is not None else None
        failed_status = exit_status not in (None, 0)
        if run is None and self.hint and failed_status:
            run = TestRun(self.hint, "failed",
                          note=f"no test summary in the output (exit status {exit_status}): "
                               "the build may have failed, or the run crashed or was cut")
        elif run is None and not self.hint and exit_status is not None:
            runner = runner_for_command(self.command)
            if runner is not None:
                # a runner wisp cannot read (make test, tox …): its exit status says
                run = TestRun(runner, "failed" if failed_status else "passed")
        if run is not None and run.outcome == "passed" and failed_status:
            # e.g. a coverage threshold: the tests passed, the command did not
            run.note = run.note or f"the tests passed but the command exited {exit_status}"
        if run is not None:
            run.exit_status = exit_status
        return run

    def failing_seen(self) -> Collector | None:
        """After :meth:`result`: the collector whose failing names to list —
        the chosen run's, else (no run) the one that named the most."""
        if self.chosen is not None:
            return self.chosen
        named = [c for c in self.collectors if c.names.names]
        return max(named, key=lambda c: (len(c.names), c.evidence)) if named else None


def read_test_run(output: str, exit_status: int | None = None, command: str | None = "") -> TestRun | None:
    """The test run in ``output`` (a command's whole output, as stored), or
    None; ``exit_status`` and ``command`` as :class:`TestOutputParser` uses
    them. This is what the ``tests`` fact reads when the tool did not read
    the run as it ran (:meth:`wisp.core.context.manager.ContextManager.record_test_run`)."""
    parser = TestOutputParser(command or None)
    parser.feed(output or "")
    return parser.result(exit_status)


def read_lines(lines: Sequence[str], exit_status: int | None = None, command: str | None = None,
               candidates: Iterable[int] | None = None) -> tuple[TestRun | None, TestOutputParser]:
    """The test run in ``lines`` (already split; line ``i`` is numbered
    ``i + 1``), and the parser that read it (for
    :meth:`TestOutputParser.failing_seen` and the lines that named each
    failing test). ``candidates``: the sorted 0-based indices of the lines
    that hold one of :data:`NEEDLES` (the others are read by no
    collector), for a large output; all lines when None."""
    parser = TestOutputParser(command or None)
    for i in (range(len(lines)) if candidates is None else candidates):
        parser.line(lines[i], i + 1)
    return parser.result(exit_status), parser
