"""Node.js: an uncaught error with its stack.

An ``Error: …`` (``TypeError``, ``Uncaught Error [CODE]``) line followed by
``    at …`` frames is a root cause, placed at the first frame in the
program's own code (not ``node:``, ``internal/`` or ``node_modules``); the
throwing line node prints above it is accounted for.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_node", "read_bundlers"]

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


_WEBPACK = re.compile(r"^(?P<sev>ERROR|WARNING) in (?P<path>\S+?)(?: (?P<loc>\d+:\d+(?:-\d+(?::\d+)?)?))?\s*$")
_WEBPACK_TALLY = re.compile(r"^webpack \S+ compiled (?:with \d+ (?:errors?|warnings?)(?: and \d+ warnings?)?|"
                            r"successfully)\b")
_ESBUILD = re.compile(r"^\s*(?:✘|X) \[ERROR\] (?P<msg>.+)$")
_ESBUILD_WARN = re.compile(r"^\s*▲ \[WARNING\] (?P<msg>.+)$")
_ESBUILD_AT = re.compile(r"^\s+(?P<path>\S+):(?P<line>\d+):(?P<col>\d+):\s*$")
_VITE = re.compile(r"^(?:error during build:|\[vite\]: Rollup failed to resolve import|"
                   r"\[vite:[\w-]+\] (?P<msg>.+))")


def read_bundlers(doc: Doc, r: Reading) -> None:
    """JavaScript bundlers: webpack's ``ERROR in ./src/a.jsx 14:0-47`` with
    its message on the next line, esbuild's ``✘ [ERROR] …`` with its
    location below, vite's ``error during build:`` with what follows; each
    is a root cause at its file."""
    for i in doc.lines_with("ERROR in ", "WARNING in ", "[ERROR]", "[WARNING]", "error during build",
                            "[vite", "webpack "):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _WEBPACK.match(line)
        if m:
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].strip())
            first = doc.lines[ctx[0] - 1].strip() if ctx else ""
            at = m.group("path") + (f" {m.group('loc')}" if m.group("loc") else "")
            text = f"{'error' if m.group('sev') == 'ERROR' else 'warning'} in {at}" + (f": {shorten(first, 200)}"
                                                                                      if first else "")
            kind = "error" if m.group("sev") == "ERROR" else "warning"
            r.add(Finding(i + 1, kind, m.group("path"), text, RANK_ROOT, ctx[1:] if kind == "error" else (),
                          reader="webpack"))
            r.claim(*ctx)
            continue
        if _WEBPACK_TALLY.match(line):
            r.tally(i + 1, line.strip())
            continue
        m = _ESBUILD.match(line) or _ESBUILD_WARN.match(line)
        if m:
            place, ctx = "esbuild", []
            for j in range(i + 1, min(doc.n, i + 4)):
                am = _ESBUILD_AT.match(doc.lines[j])
                if am:
                    place = am.group("path")
                    ctx = [j + 1] + [k + 1 for k in range(j + 1, min(doc.n, j + 3)) if doc.lines[k].strip()]
                    break
            kind = "error" if _ESBUILD.match(line) else "warning"
            r.add(Finding(i + 1, kind, place, f"esbuild: {shorten(m.group('msg'), 200)}", RANK_ROOT, tuple(ctx),
                          reader="esbuild"))
            continue
        m = _VITE.match(line)
        if m:
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].strip())
            r.add(Finding(i + 1, "error", "vite", shorten(line, 200), RANK_ROOT, ctx, reader="vite"))
