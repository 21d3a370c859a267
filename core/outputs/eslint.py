"""ESLint: the stylish, compact and unix formats, and its count.

The stylish format gives a file's path, then ``  12:5  error  message
rule`` lines under it; compact is ``path: line 12, col 5, Error - message
(rule)``; unix is ``path:12:5: message [Error/rule]``. Each problem is
placed at its file; ``✖ 5 problems (3 errors, 2 warnings)`` is kept.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, Doc, Finding, Reading, shorten
from .tsc import JS_EXT

__all__ = ["read_eslint"]

_ESL_ITEM = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.+?)(?:\s{2,}(?P<rule>[@\w/.-]+))?\s*$")
_ESL_COMPACT = re.compile(r"^(?P<path>\S.*?): line (?P<line>\d+), col (?P<col>\d+), (?P<sev>Error|Warning) - "
                          r"(?P<msg>.*?)(?: \((?P<rule>[@\w/.-]+)\))?$")
_ESL_UNIX = re.compile(r"^(?P<path>\S.*?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*) \[(?P<sev>Error|Warning)"
                       r"(?:/(?P<rule>[@\w/.-]+))?\]$")
_ESL_SUMMARY = re.compile(r"^[✖×x] \d+ problems? \(\d+ errors?, \d+ warnings?\)$")


def read_eslint(doc: Doc, r: Reading) -> None:
    """ESLint's stylish, compact and unix formats."""
    items = [i for i in doc.lines_with("error", "warning") if i + 1 not in r.claimed and _ESL_ITEM.match(doc.lines[i])]
    for i in items:
        m = _ESL_ITEM.match(doc.lines[i])
        assert m is not None
        # the file is the nearest unindented line above
        path = None
        for j in range(i - 1, max(-1, i - 2000), -1):
            line = doc.lines[j]
            if line.strip() and not line[:1].isspace():
                path = line.strip()
                r.claim(j + 1)
                break
        if path is None or not re.search(rf"\.{JS_EXT}$|\.(?:json|md|yml|yaml)$", path):
            continue
        rule = f" ({m.group('rule')})" if m.group("rule") else ""
        at = f"{path}:{m.group('line')}:{m.group('col')}"
        kind = "warning" if m.group("sev") == "warning" else "error"
        r.add(Finding(i + 1, kind, path, f"{m.group('sev')} at {at}: {shorten(m.group('msg'), 200)}{rule}",
                      RANK_ROOT, reader="eslint"))
    for i in doc.lines_with("Error", "Warning"):
        if i + 1 in r.claimed:
            continue
        m = _ESL_COMPACT.match(doc.lines[i]) or _ESL_UNIX.match(doc.lines[i])
        if m:
            rule = f" ({m.group('rule')})" if m.group("rule") else ""
            at = f"{m.group('path')}:{m.group('line')}:{m.group('col')}"
            kind = "warning" if m.group("sev") == "Warning" else "error"
            r.add(Finding(i + 1, kind, m.group("path"), f"{kind} at {at}: {shorten(m.group('msg'), 200)}{rule}",
                          RANK_ROOT, reader="eslint"))
    for i in doc.lines_with("problem"):
        if _ESL_SUMMARY.match(doc.lines[i].strip()):
            r.tally(i + 1, "eslint: " + doc.lines[i].strip().lstrip("✖×x "))
            for j in range(i + 1, min(doc.n, i + 3)):
                if "potentially fixable" in doc.lines[j]:
                    r.claim(j + 1)
