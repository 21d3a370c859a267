"""Python tracebacks anywhere in an output, and the traceback shapes pytest and unittest share.

A traceback outside a test runner's report: its exception line, placed at
its innermost frame; in a chain the first traceback is the root cause.
"""

from __future__ import annotations

import re

from .doc import RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_tracebacks", "EXCEPTION", "FRAME", "clip"]

#: An exception line: ``ValueError: bad value``, ``pkg.errors.Timeout``.
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|error)"
                       r"|AssertionError|KeyboardInterrupt|StopIteration)(?:\s*:\s*(.*))?$")
#: A traceback's frame: ``  File "app.py", line 12, in main``.
FRAME = re.compile(r'^\s+File "(.+?)", line (\d+)(?:, in (.+))?$')


def clip(s: str) -> str:
    """A message as a point shows it: stripped, at most 200 characters."""
    return shorten(s, 200)


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
            if FRAME.match(line):
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
            fm = FRAME.match(doc.lines[frames[-1]])
            assert fm is not None
            place, location = fm.group(1), f" (raised at {fm.group(1)}:{fm.group(2)})"
            context = [frames[-1] + 1]
            if frames[-1] + 1 < doc.n and doc.lines[frames[-1] + 1].startswith("    ") \
                    and not FRAME.match(doc.lines[frames[-1] + 1]):
                context.append(frames[-1] + 2)
        r.claim_range(i + 1, exc_line + 1)
        message = doc.lines[exc_line].strip()
        r.add(Finding(exc_line + 1, "error", place, f"{clip(message)}{location}", RANK_ROOT, tuple(context),
                      reader="python traceback"))
        # the lines of a multi-line exception message belong to it
        k = exc_line + 1
        while k < doc.n and doc.lines[k].strip() and k - exc_line < 20 and not FRAME.match(doc.lines[k]) \
                and "Traceback (most recent call last)" not in doc.lines[k]:
            r.claim(k + 1)
            k += 1
    for i in doc.lines_with("The above exception was the direct cause", "During handling of the above exception"):
        r.claim(i + 1)
