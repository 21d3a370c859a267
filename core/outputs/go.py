"""go build, go vet and go test: the test run and the notable lines.

- The test run: ``--- FAIL/PASS/SKIP: Name (0.00s)`` (subtests too; a
  parent whose subtest failed is not counted again, and only the subtest
  is named), the package lines (``ok pkg 0.01s``, ``FAIL pkg 0.01s``,
  ``FAIL pkg [build failed]``, ``? pkg [no test files]``) and ``go test
  -json`` events. Without ``-v`` (or ``-json``) go test lists only
  failures, so the passed and skipped counts are unknown. A package that
  failed without a failing test (a panic in ``init``, ``TestMain``) or did
  not build is named as failing.
- Notable lines: compile and vet errors are unindented ``path.go:line:col:
  message`` lines (with a ``# package`` line above them). ``--- FAIL:
  TestName (0.00s)`` with the indented lines under it (subtests,
  ``file_test.go:12: got 1, want 2``); ``FAIL pkg 0.01s`` and ``FAIL pkg
  [build failed]`` followed from them; ``ok pkg`` lines are counted. A
  ``panic:`` is a root cause, placed at its first frame in the program's
  own code.
"""

from __future__ import annotations

import json
import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten
from .testrun import MAX_TRACKED, Collector, Names, TestRun

__all__ = ["GoRun", "read_go"]

_COMPILE = re.compile(r"^(?P<path>[^\s:][^:\n]*?\.go):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<msg>.+)$")
_RESULT = re.compile(r"^(?P<indent>\s*)--- (?P<status>FAIL|PASS|SKIP): (?P<name>\S+)(?: \([\d.]+s\))?\s*$")
_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE)\s+(?P<name>\S+)")
_MESSAGE = re.compile(r"^\s+[\w.-]+\.go:\d+: ")
_PKG_FAIL = re.compile(r"^FAIL\s+(?P<pkg>\S+)\s+(?P<rest>[\d.]+s|\[(?P<why>build|setup) failed\])\s*$")
_PKG_OK = re.compile(r"^ok\s+(?P<pkg>\S+)\s+(?:[\d.]+s|\(cached\))")
_PKG_NONE = re.compile(r"^\?\s+(\S+)\s+\[no test files\]")
_JSON = re.compile(r'^\{.*"Action":\s*"(?P<action>[\w-]+)"')
_PANIC = re.compile(r"^panic: (?P<msg>.+)$")
_FRAME_FILE = re.compile(r"^\s+(?P<path>\S+\.go):(?P<line>\d+)(?: \+0x[0-9a-f]+)?$")
_GO_TOOL = re.compile(r"^go: (?P<msg>.+)$")
_RACE = re.compile(r"^WARNING: DATA RACE$")


class GoRun(Collector):
    """go test's run (see the module doc)."""

    framework = "go"
    prefilter = r"\s*--- (?:FAIL|PASS|SKIP):|=== RUN|ok\s|FAIL\b|\?\s|\{"
    needles = ("fail", "pass", "skip", "test", "ok")

    def __init__(self) -> None:
        super().__init__()
        self.tests: dict[str, tuple[str, int]] = {}  # name -> (PASS/FAIL/SKIP, line), the last seen
        self.ok_packages: list[str] = []
        self.failed_packages: dict[str, tuple[str | None, int]] = {}  # package -> ("build"/"setup"/None, line)
        self.verbose = False  # -v or -json: every test is listed, so passes can be counted

    def _test_result(self, name: str, status: str, number: int) -> None:
        if len(self.tests) < MAX_TRACKED or name in self.tests:
            self.tests[name] = (status, number)

    def line(self, line: str, number: int) -> None:
        if m := _RESULT.match(line):
            self._test_result(m.group("name"), m.group("status"), number)
            self.evidence += 1
            if m.group("status") != "FAIL":
                self.verbose = True
        elif line.startswith("=== RUN"):
            self.verbose = True
        elif m := _PKG_OK.match(line):
            self.ok_packages.append(m.group("pkg"))
            self.summary_at(number)
        elif m := _PKG_FAIL.match(line):
            self.failed_packages[m.group("pkg")] = (m.group("why"), number)
            self.summary_at(number)
        elif _PKG_NONE.match(line):
            self.evidence += 1
        elif (m := _JSON.match(line)) and m.group("action") in ("pass", "fail", "skip", "build-fail"):
            self._event(line, number)

    def _event(self, line: str, number: int) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        action, pkg, test = event.get("Action"), event.get("Package"), event.get("Test")
        self.evidence += 1
        self.verbose = True
        status = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}.get(str(action))
        if test and status:
            self._test_result(str(test), status, number)
        elif action == "build-fail":
            self.failed_packages[str(event.get("ImportPath") or pkg)] = ("build", number)
            self.summary_seen, self.order = True, number
        elif pkg and status:
            self.summary_seen, self.order = True, number
            if status == "FAIL":
                self.failed_packages.setdefault(str(pkg), (None, number))
            elif status == "PASS":
                self.ok_packages.append(str(pkg))

    def result(self) -> TestRun | None:
        if not self.summary_seen and not self.tests:
            return None
        self.names = failing = Names()
        parents: set[str] = set()
        failed_children: set[str] = set()
        for name, (status, _) in self.tests.items():
            parts = name.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                parents.add(parent)
                if status == "FAIL":
                    failed_children.add(parent)
        failed = passed = skipped = 0
        for name, (status, number) in self.tests.items():
            if name in parents:
                # a parent counts only when it failed by itself, with no failing subtest
                if status == "FAIL" and name not in failed_children:
                    failing.add(name, number)
                    failed += 1
                continue
            if status == "FAIL":
                failing.add(name, number)
                failed += 1
            elif status == "PASS":
                passed += 1
            elif status == "SKIP":
                skipped += 1
        notes = []
        for pkg, (why, number) in self.failed_packages.items():
            if why:
                failing.add(f"{pkg} [{why} failed]", number)
                notes.append(f"{pkg}: {why} failed")
            elif failed == 0:
                failing.add(pkg, number)
        failed_any = bool(self.failed_packages or failed)
        verbose = self.verbose
        note = "; ".join(notes) if notes else None
        if not verbose and self.ok_packages and not failed_any:
            note = f"{len(self.ok_packages)} packages ok; go test -v lists each test"
        return self.run(failed_any=failed_any, passed_any=bool(passed or self.ok_packages), note=note,
                        passed=passed if verbose else None, failed=failed if (verbose or failed_any) else None,
                        skipped=skipped if verbose else None, total=(passed + failed + skipped) if verbose else None)


def read_go(doc: Doc, r: Reading) -> None:
    """go build/vet/test output (see the module doc)."""
    go_lines = doc.lines_with(".go:")
    fails = doc.lines_with("--- FAIL")
    pkgs = doc.lines_with("FAIL\t", "FAIL ", "ok \t", "ok  ")
    panics = doc.lines_with("panic: ")
    tool = doc.lines_with("go: ")
    if not (go_lines or fails or panics or tool or pkgs or doc.lines_with('"Action"')):
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
        m = _RESULT.match(doc.lines[i])
        if not m or m.group("status") != "FAIL" or i + 1 in r.claimed:
            continue
        seen = True
        name = m.group("name")
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
            sub = _RESULT.match(doc.lines[b])
            if sub and sub.group("status") == "FAIL":
                names.append(sub.group("name"))
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
            messages = [b + 1 for b in body if doc.lines[b].strip() and not _RESULT.match(doc.lines[b])]
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
    for i in doc.lines_with('"Action"'):
        if _JSON.match(doc.lines[i]):  # go test -json: the run's events, read by GoRun
            seen = True
            r.claim(i + 1)
    if seen:
        r.saw("go")
    if n_ok and seen:
        r.tally(first_ok, f"go test: {n_ok} package{'s' if n_ok != 1 else ''} ok")

