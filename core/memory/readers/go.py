"""Reader for go build, go vet and go test.

Compile and vet errors are unindented ``path.go:line:col: message`` lines
(with a ``# package`` line above them). go test: ``--- FAIL: TestName
(0.00s)`` lists a failing test, and the indented lines under it (subtests,
``file_test.go:12: got 1, want 2``) are shown with it; ``FAIL pkg 0.01s``
and ``FAIL pkg [build failed]`` followed from them; ``ok pkg`` lines are
counted. A ``panic:`` is a root cause, placed at its first frame in the
program's own code.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten

_COMPILE = re.compile(r"^(?P<path>[^\s:][^:\n]*?\.go):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<msg>.+)$")
_FAIL = re.compile(r"^(?P<indent>\s*)--- FAIL: (?P<name>\S+)(?: \([\d.]+s\))?$")
_SUBRESULT = re.compile(r"^\s*--- (?:PASS|SKIP|FAIL): ")
_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE)\s+(?P<name>\S+)")
_MESSAGE = re.compile(r"^\s+[\w.-]+\.go:\d+: ")
_PKG_FAIL = re.compile(r"^FAIL\s+(?P<pkg>\S+)\s+(?P<rest>[\d.]+s|\[(?:build failed|setup failed|no test files)\])\s*$")
_PKG_OK = re.compile(r"^ok\s+(?P<pkg>\S+)\s+(?:[\d.]+s|\(cached\))")
_PANIC = re.compile(r"^panic: (?P<msg>.+)$")
_FRAME_FILE = re.compile(r"^\s+(?P<path>\S+\.go):(?P<line>\d+)(?: \+0x[0-9a-f]+)?$")
_GO_TOOL = re.compile(r"^go: (?P<msg>.+)$")
_RACE = re.compile(r"^WARNING: DATA RACE$")


def read_go(doc: Doc, r: Reading) -> None:
    """go build/vet/test output (see the module doc)."""
    go_lines = doc.lines_with(".go:")
    fails = doc.lines_with("--- FAIL")
    pkgs = doc.lines_with("FAIL\t", "FAIL ", "ok \t", "ok  ")
    panics = doc.lines_with("panic: ")
    tool = doc.lines_with("go: ")
    if not (go_lines or fails or panics or tool or pkgs):
        return
    seen = False
    for i in go_lines:
        if i + 1 in r.claimed:
            continue
        m = _COMPILE.match(doc.lines[i])
        if not m or re.search(r":\d+(?::\d+)?:\s*(?:fatal error|error|warning):", doc.lines[i]):
            continue
        seen = True
        path = m.group("path")
        path = path[2:] if path.startswith("./") else path
        at = f"{path}:{m.group('line')}" + (f":{m.group('col')}" if m.group("col") else "")
        msg = m.group("msg")
        if msg.startswith("warning:") or "vet:" in msg[:6]:
            r.add(Finding(i + 1, "warning", path, f"warning at {at}: {shorten(msg, 200)}", reader="go"))
            continue
        ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)) if doc.lines[j].startswith("\t"))
        r.add(Finding(i + 1, "error", path, f"error at {at}: {shorten(msg, 200)}", RANK_ROOT, ctx, reader="go"))
        if i > 0 and doc.lines[i - 1].startswith("# "):
            r.claim(i)
    for i in fails:
        m = _FAIL.match(doc.lines[i])
        if not m or i + 1 in r.claimed:
            continue
        seen = True
        name = m.group("name")
        r.fail_test(name, i + 1)
        if m.group("indent"):
            r.claim(i + 1)
            continue
        # the indented lines under it, to the next unindented line
        body: list[int] = []
        j = i + 1
        while j < doc.n and doc.lines[j][:1].isspace() and j - i < 400:
            body.append(j)
            j += 1
        r.claim_range(i + 1, j)
        names = [name]
        for b in body:
            sub = _FAIL.match(doc.lines[b])
            if sub:
                r.fail_test(sub.group("name"), b + 1)
                names.append(sub.group("name"))
            elif _SUBRESULT.match(doc.lines[b]):
                continue
        messages = [b + 1 for b in body if _MESSAGE.match(doc.lines[b])]
        # go test -v prints a test's messages as they happen, under its "=== RUN" line
        for k in range(i - 1, max(-1, i - 400), -1):
            line = doc.lines[k]
            run = _RUN.match(line)
            if run and run.group("name") == name:
                break
            if _MESSAGE.match(line):
                owner = next((doc.lines[q] for q in range(k - 1, max(-1, k - 200), -1) if _RUN.match(doc.lines[q])), "")
                om = _RUN.match(owner)
                if om is None or om.group("name") in names:
                    messages.append(k + 1)
                    r.claim(k + 1)
        messages.sort()
        if not messages:
            messages = [b + 1 for b in body if doc.lines[b].strip() and not _SUBRESULT.match(doc.lines[b])]
        first = doc.lines[messages[0] - 1].strip() if messages else ""
        r.add(Finding(i + 1, "failure", name, f"failed {name}" + (f": {shorten(first, 200)}" if first else ""),
                      RANK_TEST, tuple(messages[:3]), reader="go test"))
    n_ok, first_ok = 0, 0
    for i in pkgs:
        line = doc.lines[i]
        m = _PKG_FAIL.match(line)
        if m:
            seen = True
            r.add(Finding(i + 1, "error", "go test", f"FAIL {m.group('pkg')} {m.group('rest')}", RANK_AFTER,
                          reader="go test"))
        elif _PKG_OK.match(line):
            n_ok += 1
            first_ok = first_ok or i + 1
            r.claim(i + 1)
    for i in doc.lines_with("FAIL"):
        if doc.lines[i].strip() == "FAIL":
            r.claim(i + 1)
    for i in panics:
        if i + 1 in r.claimed:
            continue
        m = _PANIC.match(doc.lines[i])
        if not m:
            continue
        seen = True
        place, where = "panic", ""
        j = i + 1
        frames = 0
        while j < doc.n and j - i < 400:
            fm = _FRAME_FILE.match(doc.lines[j])
            if fm:
                frames += 1
                p = fm.group("path")
                if "/runtime/" not in p and "/testing/" not in p and place == "panic":
                    place, where = p, f" (at {p}:{fm.group('line')})"
            elif doc.lines[j].strip() == "" and frames and j + 1 < doc.n and not doc.lines[j + 1].startswith("goroutine"):
                break
            r.claim(j + 1)
            j += 1
        r.add(Finding(i + 1, "error", place, f"panic: {shorten(m.group('msg'), 200)}{where}", RANK_ROOT,
                      reader="go"))
    for i in tool:
        if i + 1 in r.claimed:
            continue
        m = _GO_TOOL.match(doc.lines[i])
        if not m or re.match(r"(downloading|finding|extracting|added|upgraded|found) ", m.group("msg")):
            continue
        seen = True
        r.add(Finding(i + 1, "error", "go", f"go: {shorten(m.group('msg'), 200)}", RANK_ROOT, reader="go"))
    for i in doc.lines_with("WARNING: DATA RACE"):
        if _RACE.match(doc.lines[i]) and i + 1 not in r.claimed:
            seen = True
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3)))
            r.add(Finding(i + 1, "error", "data race", "WARNING: DATA RACE", RANK_ROOT, ctx, reader="go"))
    if seen:
        r.saw("go")
    if n_ok and seen:
        r.tally(first_ok, f"go test: {n_ok} package{'s' if n_ok != 1 else ''} ok")


__all__ = ["read_go"]
