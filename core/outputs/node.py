"""Node.js: an uncaught error with its stack.

An ``Error: …`` (``TypeError``, ``Uncaught Error [CODE]``) line followed by
``    at …`` frames is a root cause, placed at the first frame in the
program's own code (not ``node:``, ``internal/`` or ``node_modules``); the
throwing line node prints above it is accounted for.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_node"]

_NODE_ERR = re.compile(r"^(?:Uncaught )?(?P<name>(?:[A-Z]\w*)?(?:Error|Exception))(?: \[(?P<code>\w+)\])?: (?P<msg>.*)$")
_AT = re.compile(r"^\s+at (?:.*? \()?(?P<path>[^()\s]+?):(?P<line>\d+):(?P<col>\d+)\)?$")


def read_node(doc: Doc, r: Reading) -> None:
    """An uncaught Node error with its stack (see the module doc)."""
    for i in doc.lines_with("Error", "Exception"):
        if i + 1 in r.claimed:
            continue
        m = _NODE_ERR.match(doc.lines[i])
        if not m or i + 1 >= doc.n:
            continue
        frames = []
        j = i + 1
        while j < doc.n and j - i < 60 and (doc.lines[j].startswith("    at ") or doc.lines[j].startswith("Require stack")
                                             or doc.lines[j].startswith("- ")):
            frames.append(j)
            j += 1
        if not frames:
            continue
        place, where = "node", ""
        for f in frames:
            fm = _AT.match(doc.lines[f])
            if fm and not fm.group("path").startswith("node:") and "node_modules" not in fm.group("path") \
                    and "internal/" not in fm.group("path"):
                place, where = fm.group("path"), f" (at {fm.group('path')}:{fm.group('line')})"
                break
        r.claim_range(i + 1, frames[-1] + 1)
        r.add(Finding(i + 1, "error", place, f"{shorten(doc.lines[i].strip(), 200)}{where}", RANK_ROOT,
                      (frames[0] + 1,), reader="node"))
        # node prints the throwing line above: "path.js:12", the code, a caret
        for k in range(max(0, i - 5), i):
            if re.match(r"^\S+\.\w+:\d+$", doc.lines[k]) or doc.lines[k].strip() == "^":
                r.claim(k + 1)
