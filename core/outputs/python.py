"""Python tracebacks anywhere in an output, and the traceback shapes pytest and unittest share.

A traceback outside a test runner's report: its exception line, placed at
its innermost frame; in a chain the first traceback is the root cause.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_tracebacks", "read_pip", "EXCEPTION", "FRAME", "clip"]

#: An exception line: ``ValueError: bad value``, ``pkg.errors.Timeout``.
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|error)"
                       r"|AssertionError|KeyboardInterrupt|StopIteration)(?:\s*:\s*(.*))?$")
#: A traceback's frame: ``  File "app.py", line 12, in main``.
FRAME = re.compile(r'^\s+File "(.+?)", line (\d+)(?:, in (.+))?$')


def clip(s: str) -> str:
    """A message as a point shows it: stripped, at most 200 characters."""
    return shorten(s, 200)


#: The first line of an exception group's traceback (Python 3.11+), drawn in a box; a logger may
#: write its own words before it on that line (uvicorn's ``ERROR:      + Exception Group …``).
_GROUP_HEAD = re.compile(r"^(?P<lead>.*?\S)??(?P<indent>\s*)\+ Exception Group Traceback \(most recent call last\):"
                         r"\s*$")
#: A box line of an exception group: ``+-+---- 1 ----``, ``+---- 2 ----``, ``+------------``, ``+---- ... ----``.
_GROUP_RULE = re.compile(r"^\s*\+[-+]*-{3,}(?: (?:\d+|\.\.\.(?: and \d+ more exceptions)?) -+)?\s*$")
#: The bar before each line inside the box.
_GROUP_BAR = re.compile(r"^\s*[|+] ?")
#: An exception group's own exception line: its sub-exceptions are the causes.
_GROUP_EXC = re.compile(r"^(?:[\w.]+\.)?(?:Base)?ExceptionGroup\b|\(\d+ sub-exceptions?\)\s*$")
_CHAIN = ("The above exception was the direct cause", "During handling of the above exception")


def _unboxed(doc: Doc) -> list[str]:
    """``doc``'s lines with the box of each exception group taken off (its
    bars and rules), so that the tracebacks inside read as plain ones; the
    other lines as they are."""
    lines = list(doc.lines)
    for i in doc.lines_with("Exception Group Traceback"):
        m = _GROUP_HEAD.match(lines[i])
        if not m:
            continue
        base = len(m.group("indent"))
        if m.group("lead") and i + 1 < doc.n:
            # the box's bars stand where its next line says, not after the logger's words
            nxt = doc.lines[i + 1]
            base = len(nxt) - len(nxt.lstrip())
        lines[i] = "Exception Group Traceback (most recent call last):"
        j = i + 1
        while j < doc.n:
            line = doc.lines[j]
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            if _GROUP_RULE.match(line):
                lines[j] = ""
                if indent <= base and re.match(r"^\s*\+-{10,}\s*$", line):
                    break  # the box's last rule
                j += 1
                continue
            if not stripped or indent < base or stripped[:1] not in "|+":
                break
            lines[j] = _GROUP_BAR.sub("", stripped, count=1)
            j += 1
    return lines


def read_tracebacks(doc: Doc, r: Reading) -> None:
    """Python tracebacks not inside a test runner's report: the exception
    line of each, placed at the innermost frame.

    Chains and groups, by what caused what: in a chain (``During handling of
    the above exception``, ``The above exception was the direct cause``) the
    first traceback is the root cause and comes first by its line; an
    exception group's own line (``ExceptionGroup: unhandled errors in a
    TaskGroup (2 sub-exceptions)``) only says that its sub-exceptions were
    raised, so it is ranked after them, and the sub-exceptions inside its box
    are read as tracebacks of their own."""
    lines = _unboxed(doc) if doc.lines_with("Exception Group Traceback") else doc.lines
    heads = sorted(set(doc.lines_with("Traceback (most recent call last)")))
    for i in heads:
        if i + 1 in r.claimed or "Traceback (most recent call last)" not in lines[i]:
            continue
        group = lines[i].startswith("Exception Group Traceback")
        frames: list[int] = []
        j = i + 1
        exc_line = None
        while j < doc.n:
            line = lines[j]
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
            fm = FRAME.match(lines[frames[-1]])
            assert fm is not None
            place, location = fm.group(1), f" (raised at {fm.group(1)}:{fm.group(2)})"
            context = [frames[-1] + 1]
            if frames[-1] + 1 < doc.n and lines[frames[-1] + 1].startswith("    ") \
                    and not FRAME.match(lines[frames[-1] + 1]):
                context.append(frames[-1] + 2)
        message = lines[exc_line].strip()
        rank = RANK_AFTER if group and _GROUP_EXC.search(message) else RANK_ROOT
        r.claim_range(i + 1, exc_line + 1)
        r.add(Finding(exc_line + 1, "error", place, f"{clip(message)}{location}", rank, tuple(context),
                      reader="python traceback"))
        # the lines of a multi-line exception message belong to it
        k = exc_line + 1
        while k < doc.n and lines[k].strip() and k - exc_line < 20 and not FRAME.match(lines[k]) \
                and "Traceback (most recent call last)" not in lines[k]:
            r.claim(k + 1)
            k += 1
    for i in doc.lines_with(*_CHAIN):
        r.claim(i + 1)
    if lines is not doc.lines:
        for i, (a, b) in enumerate(zip(lines, doc.lines)):
            if a != b and not a.strip():
                r.claim(i + 1)  # the box's rules


#: pip's own lines, by which an output is pip's.
_PIP_SEEN = re.compile(r"^(?:Collecting |Requirement already satisfied|Downloading \S+\.(?:whl|tar\.gz)|"
                       r"\s+Downloading \S+|Installing collected packages|Looking in indexes|Obtaining |"
                       r"Building wheels? for|Successfully installed|\S*pip install )")
#: pip's lines that say only that what it ran failed, or why it is about to: ranked after the cause.
_PIP_AFTER = re.compile(r"subprocess-exited-with-error|did not run successfully|Could not build wheels for|"
                        r"metadata-generation-failed|Failed to build \S+|No matching distribution found|"
                        r"See above for (?:output|details)|ERROR: Command errored out", re.IGNORECASE)
#: pip's notes written as errors: the versions it passed over.
_PIP_NOTE = re.compile(r"^ERROR: Ignored the following (?:yanked )?versions")
_PIP_ERROR = re.compile(r"^(?:ERROR|error): (?P<msg>.+)$|^×\s+(?P<x>.+)$")


def read_pip(doc: Doc, r: Reading) -> None:
    """pip's errors, when the output is pip's: ``ERROR: Could not find a
    version that satisfies the requirement …``, a resolution conflict, a
    wheel that failed to build, are root causes; ``No matching distribution
    found`` and ``subprocess-exited-with-error`` followed from them; pip's
    ``ERROR: Ignored the following versions`` is a note, not an error."""
    errors = doc.lines_with("ERROR: ", "error: ", "× ")
    if not errors or not any(_PIP_SEEN.match(doc.lines[i]) for i in doc.lines_with(
            "Collecting ", "Requirement already", "Downloading ", "Installing collected", "Looking in indexes",
            "Obtaining ", "Building wheel", "Successfully installed", "pip install")):
        return
    r.saw("pip")
    for i in errors:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i].strip()
        if _PIP_NOTE.match(line):
            r.claim(i + 1)
            continue
        m = _PIP_ERROR.match(line)
        if not m:
            continue
        msg = m.group("msg") or m.group("x") or ""
        rank = RANK_AFTER if _PIP_AFTER.search(line) else RANK_ROOT
        r.add(Finding(i + 1, "error", "pip", f"pip: {clip(msg)}", rank, reader="pip"))
