"""unittest (``python -m unittest``, Django's and others' runners that print its report).

- The test run: ``Ran 8 tests in 0.012s`` then ``OK``, ``OK (skipped=1)`` or
  ``FAILED (failures=1, errors=1, skipped=2, expected failures=1,
  unexpected successes=1)``; failing names from the ``FAIL:``, ``ERROR:``
  and ``UNEXPECTED SUCCESS:`` headings, as ``module.Class.method``
  (Python 3.11+ writes ``method (module.Class.method)``, older versions
  ``method (module.Class)``; both give the same name), with a subtest's
  parameters after it. Expected failures count as skipped, unexpected
  successes as failed, as unittest's own verdict does.
- Notable lines: each ``FAIL:``/``ERROR:`` block's exception line, at its
  innermost frame; a loader's failure (``unittest.loader._FailedTest``)
  is a root cause; the ``Ran N tests`` and result lines are kept.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, RANK_TEST, Doc, Finding, Reading
from .python import FRAME, clip
from .testrun import Collector, TestRun

__all__ = ["UnittestRun", "read_unittest"]

_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]*)\)(.*)$")
_PROGRESS = re.compile(r"^\w+ \([\w.]+\)(?: \(.*\))? \.\.\. (?:ok|FAIL|ERROR|skipped.*|expected failure|"
                       r"unexpected success)$")
_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\b")
_RESULT = re.compile(r"^(FAILED|OK)(?: \((.*)\))?$")


def _name(m: re.Match[str]) -> str:
    """A ``FAIL:``/``ERROR:`` heading's test as ``module.Class.method [params]``."""
    _, method, where, extra = m.groups()
    test = where if where.endswith("." + method) else f"{where}.{method}"
    return test + (extra.strip() and f" {extra.strip()}")


class UnittestRun(Collector):
    """unittest's run (see the module doc)."""

    framework = "unittest"
    prefilter = r"FAIL: |ERROR: |UNEXPECTED SUCCESS: |Ran \d|OK\b|FAILED\b"
    needles = ("fail", "error", "test", "ok")

    def __init__(self) -> None:
        super().__init__()
        self.ran: int | None = None
        self.ran_at = 0
        self.verdict: str | None = None
        self.details: dict[str, int] = {}

    def line(self, line: str, number: int) -> None:
        if m := _HEAD.match(line):
            self.names.add(_name(m), number)
            self.evidence += 1
        elif m := _RAN.match(line):
            self.ran, self.ran_at = int(m.group(1)), number
            self.verdict, self.details = None, {}
            self.summary_at(number)
        elif (m := _RESULT.match(line)) and self.ran is not None and number - self.ran_at <= 3:
            self.verdict = m.group(1)
            self.details = {k.strip(): int(n) for k, n in re.findall(r"([a-z ]+)=(\d+)", m.group(2) or "")}
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.ran is None:
            return None
        d = self.details
        failed = d.get("failures", 0) + d.get("unexpected successes", 0)
        errors = d.get("errors", 0)
        skipped = d.get("skipped", 0) + d.get("expected failures", 0)
        passed = max(0, self.ran - failed - errors - skipped)
        return self.run(failed_any=bool(failed or errors or self.verdict == "FAILED"), passed=passed, failed=failed,
                        skipped=skipped, errors=errors, total=self.ran)


def read_unittest(doc: Doc, r: Reading) -> None:
    """unittest's report (see the module doc)."""
    heads = [i for i in doc.lines_with("FAIL: ", "ERROR: ", "UNEXPECTED SUCCESS: ")
             if i + 1 not in r.claimed and _HEAD.match(doc.lines[i])]
    ran = [i for i in doc.lines_with("Ran ") if _RAN.match(doc.lines[i])]
    if not heads and not ran:
        return
    r.saw("unittest")
    for i in doc.lines_with(" ... "):
        if _PROGRESS.match(doc.lines[i]):
            r.claim(i + 1)
    for i in ran:
        r.claim(i + 1)
        for j in range(i + 1, min(doc.n, i + 4)):
            m = _RESULT.match(doc.lines[j])
            if m:
                r.tally(j + 1, "unittest: " + doc.lines[i].strip() + "; " + doc.lines[j].strip())
                break
    for k, h in enumerate(heads):
        m = _HEAD.match(doc.lines[h])
        assert m is not None
        kind_word, where = m.group(1), m.group(3)
        test = _name(m)
        stop = doc.n
        for j in range(h + 1, doc.n):
            if j > h + 1 and (doc.lines[j].startswith("=" * 20) or _RAN.match(doc.lines[j])
                              or (doc.lines[j].startswith("-" * 20) and j + 1 < doc.n
                                  and _RAN.match(doc.lines[j + 1]))):
                stop = j
                break
            if j in heads[k + 1:k + 2]:
                stop = j
                break
        r.claim_range(h + 1, stop)
        frames = [j for j in range(h + 1, stop) if FRAME.match(doc.lines[j])]
        exc_line = None
        after = frames[-1] + 1 if frames else h + 1
        for j in range(after, stop):
            line = doc.lines[j]
            if line.strip() and not line[:1].isspace() and not line.startswith("-" * 10):
                exc_line = j
                break
        loader = "_FailedTest" in where or "loader" in where
        rank = RANK_ROOT if loader else RANK_TEST
        kind = "error" if kind_word == "ERROR" else "failure"
        place = test
        location = ""
        context: list[int] = []
        if frames:
            fm = FRAME.match(doc.lines[frames[-1]])
            assert fm is not None
            location = f" ({fm.group(1)}:{fm.group(2)})"
            context = [frames[-1] + 1]
            if frames[-1] + 1 < stop and doc.lines[frames[-1] + 1].startswith("    "):
                context.append(frames[-1] + 2)
        line_no = (exc_line if exc_line is not None else h)
        message = doc.lines[line_no].strip()
        verb = "failed" if kind == "failure" else "error in"
        r.add(Finding(line_no + 1, kind, place, f"{verb} {test}{location}: {clip(message)}", rank,
                      tuple(context), reader="unittest"))
