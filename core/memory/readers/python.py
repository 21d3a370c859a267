"""Readers for Python: pytest, unittest, and tracebacks anywhere.

pytest: the ``FAILURES`` and ``ERRORS`` sections (one per test, headed
``____ name ____``), the first ``E`` line of each as the point; collection
errors as root causes; ``--tb=line`` and ``--tb=no`` outputs through the
short test summary; the warnings summary tallied; the final
``== 2 failed, 48 passed in 3.2s ==`` line kept. unittest: the
``FAIL:``/``ERROR:`` blocks, the exception line of each as the point, and
``Ran N tests`` / ``FAILED (failures=1)``. A traceback outside those: its
exception line, placed at its innermost frame; in a chain the first
traceback is the root cause.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten

_HEADING = re.compile(r"^=+ ?(.*?) ?=+$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_E_LINE = re.compile(r"^E\s{1,}(\S.*)$")
_LOCATION = re.compile(r"^(\S+\.py):(\d+): (\w[\w.]*)$")
_TB_LINE = re.compile(r"^(\S+\.py):(\d+): (.+)$")
_SUMMARY_ITEM = re.compile(r"^(FAILED|ERROR|XPASS\(strict\)) (\S+)(?: - (.*))?$")
_FINAL = re.compile(r"^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
                    r"(?:, )?)+) in [\d.]+s(?: \([\d:]+\))?\s*=*$")
_PROGRESS_LINE = re.compile(r"^\S+::\S.*? (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b.*(?:\[\s*\d+%\])?$")
_WARN_ITEM = re.compile(r"^\s+(\S+\.py):(\d+): (\w*Warning): (.*)$")
_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|error)"
                  r"|AssertionError|KeyboardInterrupt|StopIteration)(?:\s*:\s*(.*))?$")
_FRAME = re.compile(r'^\s+File "(.+?)", line (\d+)(?:, in (.+))?$')
_UT_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]*)\)(.*)$")
_UT_PROGRESS = re.compile(r"^\w+ \([\w.]+\)(?: \(.*\))? \.\.\. (?:ok|FAIL|ERROR|skipped.*|expected failure|"
                          r"unexpected success)$")
_UT_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UT_RESULT = re.compile(r"^(FAILED|OK)(?: \((.*)\))?$")


def _clip(s: str) -> str:
    return shorten(s, 200)


def read_pytest(doc: Doc, r: Reading) -> None:
    """pytest's report (see the module doc)."""
    heads = [i for i in doc.lines_with("=" * 3) if _HEADING.match(doc.lines[i])]
    summary_items = [i for i in doc.lines_with("FAILED ", "ERROR ") if _SUMMARY_ITEM.match(doc.lines[i])
                     and ("::" in doc.lines[i] or ".py" in doc.lines[i])]
    if not heads and not summary_items:
        return
    titles = {i: _HEADING.match(doc.lines[i]).group(1).strip().lower() for i in heads}  # type: ignore[union-attr]
    if not any(t in ("failures", "errors", "short test summary info", "warnings summary")
               or t.startswith("test session starts") or _FINAL.match(doc.lines[i])
               for i, t in titles.items()) and not summary_items:
        return
    r.saw("pytest")
    sections: dict[str, int] = {}  # test title -> finding line
    for k, i in enumerate(heads):
        title = titles[i]
        end = heads[k + 1] if k + 1 < len(heads) else doc.n
        r.claim(i + 1)
        if title in ("failures", "errors"):
            _pytest_sections(doc, r, i + 1, end, sections, errors=title == "errors")
        elif title == "warnings summary":
            _pytest_warnings(doc, r, i + 1, end)
        elif title == "short test summary info":
            for j in range(i + 1, end):
                m = _SUMMARY_ITEM.match(doc.lines[j])
                if m:
                    _summary_item(doc, r, j, m, sections)
        m = _FINAL.match(doc.lines[i])
        if m:
            r.tally(i + 1, "pytest: " + m.group(1).strip())
    for j in doc.lines_with(" FAILED", " ERROR", " PASSED", " SKIPPED", " XFAIL", " XPASS"):
        if _PROGRESS_LINE.match(doc.lines[j]):
            r.claim(j + 1)
    # -q / -rN outputs: summary items with no heading above them
    for j in summary_items:
        if j + 1 not in r.claimed:
            m = _SUMMARY_ITEM.match(doc.lines[j])
            if m:
                _summary_item(doc, r, j, m, sections)
    for j in doc.lines_with(" in "):
        m = _FINAL.match(doc.lines[j])
        if m and j + 1 not in r.claimed and re.match(r"^=*\s*\d", doc.lines[j]):
            r.tally(j + 1, "pytest: " + m.group(1).strip())


def _pytest_sections(doc: Doc, r: Reading, start: int, end: int, sections: dict[str, int], *,
                     errors: bool) -> None:
    """The per-test sections between ``start`` and ``end`` (0-based, end excluded)."""
    heads = [j for j in range(start, end) if _SECTION.match(doc.lines[j])]
    if not heads:  # --tb=line: "path.py:42: message" lines
        for j in range(start, end):
            m = _TB_LINE.match(doc.lines[j])
            if m:
                r.add(Finding(j + 1, "failure", m.group(1), f"failed at {m.group(1)}:{m.group(2)}: {_clip(m.group(3))}",
                              RANK_TEST, reader="pytest"))
        return
    for k, h in enumerate(heads):
        stop = heads[k + 1] if k + 1 < len(heads) else end
        title = _SECTION.match(doc.lines[h]).group(1).strip()  # type: ignore[union-attr]
        r.claim_range(h + 1, stop)
        e_lines = [j for j in range(h + 1, stop) if _E_LINE.match(doc.lines[j])]
        location = None
        for j in range(h + 1, stop):
            m = _LOCATION.match(doc.lines[j])
            if m:
                location = (j, f"{m.group(1)}:{m.group(2)}")
        collecting = title.lower().startswith("error collecting")
        setup = title.lower().startswith(("error at setup of ", "error at teardown of "))
        stage = ""
        if setup:
            stage = "setup" if title.lower().startswith("error at setup") else "teardown"
            title = title.split(" of ", 1)[1].strip()
        place = title
        if collecting:
            place = title[len("ERROR collecting "):].strip() or title
        rank = RANK_ROOT if collecting else RANK_TEST
        kind = "error" if (collecting or setup or errors) else "failure"
        if e_lines:
            first = e_lines[0]
            message = _E_LINE.match(doc.lines[first]).group(1)  # type: ignore[union-attr]
            context = [j + 1 for j in (first + 1, first + 2) if j < stop and _E_LINE.match(doc.lines[j])]
            if location and location[0] not in e_lines[:3]:
                context.append(location[0] + 1)
        else:
            exc = [j for j in range(h + 1, stop) if _EXC.match(doc.lines[j])]
            first = exc[-1] if exc else h
            message = doc.lines[first].strip()
            context = []
        where = f" ({location[1]})" if location else ""
        verb = "error collecting" if collecting else (f"error at {stage} of" if stage else
                                                      "error in" if kind == "error" else "failed")
        name = place if collecting else title
        text = f"{verb} {name}{where}: {_clip(message)}"
        r.add(Finding(first + 1, kind, place, text, rank, tuple(sorted(set(context))), reader="pytest"))
        sections[title] = first + 1
        if not collecting:
            r.fail_test(title, h + 1)


def _summary_item(doc: Doc, r: Reading, j: int, m: re.Match[str], sections: dict[str, int]) -> None:
    kind_word, node, message = m.group(1), m.group(2), (m.group(3) or "").strip()
    r.claim(j + 1)
    # the section's title is the node id's last part(s): Class.test or test[param]
    parts = node.split("::")
    candidates = {parts[-1], ".".join(parts[1:]) if len(parts) > 1 else parts[-1]}
    matched = next((t for t in sections if t in candidates), None)
    if node.endswith(".py") or "::" not in node:
        matched = matched or next((t for t in sections if t.endswith(node) or node.endswith(t)), None)
    if matched is not None:
        # name the section's finding by the full node id
        for f in r.findings:
            if f.line == sections[matched] and f.place == matched:
                f.place = node
        if matched in r.failing_tests:
            line = r.failing_tests.pop(matched)
            r.fail_test(node, line)
        return
    if kind_word == "ERROR" and "::" not in node:
        r.add(Finding(j + 1, "error", node, f"error collecting {node}: {_clip(message)}", RANK_ROOT,
                      reader="pytest"))
        return
    r.add(Finding(j + 1, "failure" if kind_word != "ERROR" else "error", node,
                  f"{'failed' if kind_word != 'ERROR' else 'error in'} {node}" + (f": {_clip(message)}" if message else ""),
                  RANK_TEST, reader="pytest"))
    r.fail_test(node, j + 1)


def _pytest_warnings(doc: Doc, r: Reading, start: int, end: int) -> None:
    for j in range(start, end):
        m = _WARN_ITEM.match(doc.lines[j])
        r.claim(j + 1)
        if m:
            r.add(Finding(j + 1, "warning", m.group(1), f"{m.group(3)} at {m.group(1)}:{m.group(2)}: "
                          f"{_clip(m.group(4))}", reader="pytest"))


def read_unittest(doc: Doc, r: Reading) -> None:
    """unittest's report (see the module doc)."""
    heads = [i for i in doc.lines_with("FAIL: ", "ERROR: ", "UNEXPECTED SUCCESS: ")
             if i + 1 not in r.claimed and _UT_HEAD.match(doc.lines[i])]
    ran = [i for i in doc.lines_with("Ran ") if _UT_RAN.match(doc.lines[i])]
    if not heads and not ran:
        return
    r.saw("unittest")
    for i in doc.lines_with(" ... "):
        if _UT_PROGRESS.match(doc.lines[i]):
            r.claim(i + 1)
    for i in ran:
        r.claim(i + 1)
        for j in range(i + 1, min(doc.n, i + 4)):
            m = _UT_RESULT.match(doc.lines[j])
            if m:
                r.tally(j + 1, "unittest: " + doc.lines[i].strip() + "; " + doc.lines[j].strip())
                break
    for k, h in enumerate(heads):
        m = _UT_HEAD.match(doc.lines[h])
        assert m is not None
        kind_word, method, where, extra = m.groups()
        # Python 3.11+: "(module.Class.method)"; older: "(module.Class)"
        test = where if where.endswith("." + method) else f"{where}.{method}"
        test += extra.strip() and f" {extra.strip()}"
        stop = doc.n
        for j in range(h + 1, doc.n):
            if j > h + 1 and (doc.lines[j].startswith("=" * 20) or _UT_RAN.match(doc.lines[j])
                              or (doc.lines[j].startswith("-" * 20) and j + 1 < doc.n
                                  and _UT_RAN.match(doc.lines[j + 1]))):
                stop = j
                break
            if j in heads[k + 1:k + 2]:
                stop = j
                break
        r.claim_range(h + 1, stop)
        frames = [j for j in range(h + 1, stop) if _FRAME.match(doc.lines[j])]
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
            fm = _FRAME.match(doc.lines[frames[-1]])
            assert fm is not None
            location = f" ({fm.group(1)}:{fm.group(2)})"
            context = [frames[-1] + 1]
            if frames[-1] + 1 < stop and doc.lines[frames[-1] + 1].startswith("    "):
                context.append(frames[-1] + 2)
        line_no = (exc_line if exc_line is not None else h)
        message = doc.lines[line_no].strip()
        verb = "failed" if kind == "failure" else "error in"
        r.add(Finding(line_no + 1, kind, place, f"{verb} {test}{location}: {_clip(message)}", rank,
                      tuple(context), reader="unittest"))
        r.fail_test(test, h + 1)


def read_tracebacks(doc: Doc, r: Reading) -> None:
    """Python tracebacks not inside a test runner's report: the exception
    line of each, placed at the innermost frame."""
    for i in doc.lines_with("Traceback (most recent call last)"):
        if i + 1 in r.claimed:
            continue
        frames: list[int] = []
        j = i + 1
        exc_line = None
        while j < doc.n:
            line = doc.lines[j]
            if _FRAME.match(line):
                frames.append(j)
            elif line.strip() and not line[:1].isspace() and not line.lstrip().startswith("^"):
                exc_line = j
                break
            j += 1
            if j - i > 2000:
                break
        if exc_line is None:
            continue
        place = "traceback"
        location = ""
        context: list[int] = []
        if frames:
            fm = _FRAME.match(doc.lines[frames[-1]])
            assert fm is not None
            place, location = fm.group(1), f" (raised at {fm.group(1)}:{fm.group(2)})"
            context = [frames[-1] + 1]
            if frames[-1] + 1 < doc.n and doc.lines[frames[-1] + 1].startswith("    ") \
                    and not _FRAME.match(doc.lines[frames[-1] + 1]):
                context.append(frames[-1] + 2)
        r.claim_range(i + 1, exc_line + 1)
        message = doc.lines[exc_line].strip()
        r.add(Finding(exc_line + 1, "error", place, f"{_clip(message)}{location}", RANK_ROOT, tuple(context),
                      reader="python traceback"))
        # the lines of a multi-line exception message belong to it
        k = exc_line + 1
        while k < doc.n and doc.lines[k].strip() and k - exc_line < 20 and not _FRAME.match(doc.lines[k]) \
                and "Traceback (most recent call last)" not in doc.lines[k]:
            r.claim(k + 1)
            k += 1
    for i in doc.lines_with("The above exception was the direct cause", "During handling of the above exception"):
        r.claim(i + 1)


__all__ = ["read_pytest", "read_unittest", "read_tracebacks", "RANK_AFTER"]
