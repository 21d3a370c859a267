"""tsc, the TypeScript compiler: its diagnostics and its count.

``src/a.ts(12,5): error TS2322: …`` and the pretty ``src/a.ts:12:5 - error
TS2322: …`` with its code lines (shown under the point); a bare ``error
TS5023: …`` (a config error); ``Found 3 errors`` kept, with the table of
files after it accounted for.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, Doc, Finding, Reading, lines_after, shorten

__all__ = ["read_tsc", "JS_EXT"]

#: The endings of JavaScript and TypeScript sources (and the frameworks' single-file components).
JS_EXT = r"(?:tsx?|jsx?|mts|cts|mjs|cjs|vue|svelte|astro)"
_TSC_PAREN = re.compile(rf"^(?P<path>[^\s(][^(\n]*?\.{JS_EXT})\((?P<line>\d+),(?P<col>\d+)\): "
                        r"(?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_PRETTY = re.compile(rf"^(?P<path>[^\s:][^:\n]*?\.{JS_EXT}):(?P<line>\d+):(?P<col>\d+) - "
                         r"(?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_BARE = re.compile(r"^(?:error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_FOUND = re.compile(r"^Found (?P<n>\d+) errors?(?: in .*)?\.?$")


def read_tsc(doc: Doc, r: Reading) -> None:
    """tsc's diagnostics and its ``Found N errors`` line."""
    for i in doc.lines_with(" TS"):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _TSC_PAREN.match(line) or _TSC_PRETTY.match(line)
        if m:
            path, at = m.group("path"), f"{m.group('path')}:{m.group('line')}:{m.group('col')}"
            label = f"{m.group('sev')} {m.group('code')}"
            if m.group("sev") == "warning":
                r.add(Finding(i + 1, "warning", path, f"{label} at {at}: {shorten(m.group('msg'), 200)}", reader="tsc"))
                continue
            ctx: tuple[int, ...] = ()
            if m.re is _TSC_PRETTY:  # a blank line, the code, the ~~~ markers
                ctx = lines_after(doc, i, 2, 4, stop=re.compile(rf"^\S.*\.{JS_EXT}:\d+:\d+ - |^Found \d"))
                r.claim(*ctx)
                for j in range(i + 1, min(doc.n, i + 8)):
                    if _TSC_PRETTY.match(doc.lines[j]) or _TSC_FOUND.match(doc.lines[j]):
                        break
                    r.claim(j + 1)
            r.add(Finding(i + 1, "error", path, f"{label} at {at}: {shorten(m.group('msg'), 200)}", RANK_ROOT, ctx,
                          reader="tsc"))
            continue
        m = _TSC_BARE.match(line)
        if m:
            r.add(Finding(i + 1, "error", "tsc", f"tsc {m.group('code')}: {shorten(m.group('msg'), 200)}", RANK_ROOT,
                          reader="tsc"))
    for i in doc.lines_with("Found "):
        if _TSC_FOUND.match(doc.lines[i].strip()):
            r.tally(i + 1, "tsc: " + doc.lines[i].strip())
            j = i + 1
            while j < doc.n and j - i < 200 and (doc.lines[j].strip() == "" or re.match(r"^\s*(?:Errors\s+Files|\d+\s+\S)", doc.lines[j])):
                r.claim(j + 1)
                j += 1
