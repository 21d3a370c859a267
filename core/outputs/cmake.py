"""CMake: its errors and warnings, and its closing lines.

``CMake Error at FILE:LINE (command):`` with its message (indented on the
lines after, in paragraphs; the rest of the block and the call stack are
accounted for) is a root cause; ``CMake Warning`` (and ``(dev)``,
``Deprecation Warning``) a warning; ``Configuring incomplete, errors
occurred!`` and ``Generate step failed`` followed from the errors. Status
lines (``-- Could NOT find …``) only inform.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_cmake"]

_CMAKE = re.compile(r"^CMake (?P<sev>Error|Warning|Deprecation Warning)(?: \(dev\))?(?: (?:at|in) "
                    r"(?P<path>[^:\n]+?)(?::(?P<line>\d+))?(?: \((?P<cmd>[^)]*)\))?)?:\s*(?P<msg>.*)$")


def read_cmake(doc: Doc, r: Reading) -> None:
    """CMake's errors and warnings, and its closing line."""
    for i in doc.lines_with("CMake Error", "CMake Warning", "CMake Deprecation Warning"):
        if i + 1 in r.claimed:
            continue
        m = _CMAKE.match(doc.lines[i])
        if not m:
            continue
        path = m.group("path")
        place = path.strip() if path else "cmake"
        at = f" at {place}" + (f":{m.group('line')}" if m.group("line") else "") + \
            (f" ({m.group('cmd')})" if m.group("cmd") else "") if path else ""
        msg = m.group("msg").strip()
        # the message is indented on the lines after, in paragraphs
        body: list[int] = []
        j = i + 1
        while j < doc.n and len(body) < 3 and j - i < 8:
            line = doc.lines[j]
            if line.strip() and not line[:1].isspace():
                break
            if line.strip() and not line.strip().startswith("Call Stack"):
                body.append(j + 1)
            j += 1
        # the rest of the block (more paragraphs, the call stack) is accounted for
        k = j
        while k < doc.n and (not doc.lines[k].strip() or doc.lines[k][:1].isspace()) and k - i < 60:
            r.claim(k + 1)
            k += 1
        sev = m.group("sev")
        first_words = msg or (doc.lines[body[0] - 1].strip() if body else "")
        text = f"CMake {sev.lower()}{at}: {shorten(first_words, 200)}".rstrip(": ")
        if sev == "Error":
            r.add(Finding(i + 1, "error", place, text, RANK_ROOT, tuple(body[:2]), reader="cmake"))
        else:
            r.add(Finding(i + 1, "warning", place, text, reader="cmake"))
    # status lines ("-- Looking for pthread_create in pthreads - not found") only inform
    for i in doc.lines_with("-- "):
        line = doc.lines[i]
        if line.startswith("-- ") and re.search(r"not found|[Ff]ailed|NOT found|Could NOT find|missing", line):
            r.claim(i + 1)
    for i in doc.lines_with("Configuring incomplete, errors occurred", "Generate step failed",
                            "Build files have not been written"):
        r.add(Finding(i + 1, "error", "cmake", shorten(doc.lines[i], 160), RANK_AFTER, reader="cmake"))
