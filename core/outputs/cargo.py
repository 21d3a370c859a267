"""cargo and rustc: the test run (cargo test, cargo-nextest) and the notable lines.

- The test run: ``test name ... ok|FAILED|ignored`` and every ``test
  result:`` line, summed over the test binaries and doc-tests; ``error:
  could not compile`` (the build failed); cargo-nextest's result lines
  (``FAIL [ 0.005s] calc tests::it_multiplies``, named as nextest names
  them, binary first) and its ``Summary`` line, which win over the libtest
  lines nextest repeats.
- Notable lines: rustc writes ``error[E0425]: message`` and, on a
  following line, ``--> src/main.rs:4:13``: the error is placed at that
  file, and the code lines with their markers (``4 |     let y = x + 1;``,
  ``|  ^ not found``) are shown under it. ``error: could not compile `app```,
  ``aborting due to …`` and ``test failed, to rerun …`` followed from the
  others. A failing test's ``---- name stdout ----`` section gives its
  panic message, and ``test result: FAILED. …`` is kept. A panic outside a
  test is a root cause at its file.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten
from .testrun import Collector, Names, TestRun, pairs

__all__ = ["CargoRun", "read_cargo"]

_HEAD = re.compile(r"^(?P<sev>error|warning)(?:\[(?P<code>[A-Z]?\d+|[\w:-]+)\])?: (?P<msg>.+)$")
_ARROW = re.compile(r"^\s*--> (?P<path>.+?):(?P<line>\d+):(?P<col>\d+)\s*$")
_CODE = re.compile(r"^\s*\d*\s*\|")
_AFTER = re.compile(r"could not compile|linking with `[^`]+` failed|aborting due to|test failed, to rerun|build failed|"
                    r"^\d+ previous errors?|failed to compile|generated \d+ warnings?|warnings? emitted|"
                    r"due to \d+ previous", re.IGNORECASE)
_TEST_LINE = re.compile(r"^test (?P<name>.+?) \.\.\. (?P<res>ok|FAILED|ignored)\b")
_RESULT = re.compile(r"^test result: (?P<res>ok|FAILED)\. (?P<counts>(?P<passed>\d+) passed; (?P<failed>\d+) failed; "
                     r"(?P<ignored>\d+) ignored\b.*?)(?:; finished in .*)?$")
_COMPILE_FAILED = re.compile(r"^error: could not compile")
_NEXT = re.compile(r"^\s*(PASS|FAIL|SKIP|SIGSEGV|SIGABRT|SIGBUS|TIMEOUT|LEAK) \[\s*[\d.]+s\] (.+?)\s*$")
_NEXT_SUMMARY = re.compile(r"^\s*Summary \[\s*[\d.]+s\] (\d+) tests? run: (.*)$")
_STDOUT = re.compile(r"^---- (?P<name>\S+) stdout ----$")
_PANIC_OLD = re.compile(r"^thread '(?P<thread>[^']*)' panicked at '(?P<msg>.*)', (?P<path>\S+?):(?P<line>\d+):\d+$")
_PANIC_NEW = re.compile(r"^thread '(?P<thread>[^']*)' panicked at (?P<path>\S+?):(?P<line>\d+):\d+:$")
_PANIC_ANY = re.compile(r"^thread '(?P<thread>[^']*)' (?:\(\d+\) )?panicked at (?P<rest>.*)$")


class CargoRun(Collector):
    """cargo test's and cargo-nextest's run (see the module doc)."""

    framework = "cargo"
    prefilter = r"test |error|\s*(?:PASS|FAIL|SKIP|SIGSEGV|SIGABRT|SIGBUS|TIMEOUT|LEAK) \[|\s*Summary \["
    needles = ("test", "error", "fail", "pass", "skip", "s] ")

    def __init__(self) -> None:
        super().__init__()
        self.sums = {"passed": 0, "failed": 0, "ignored": 0}
        self.results = 0
        self.build_failed = False
        self.next_counts: dict[str, int] | None = None
        self.next_names = Names()
        self.libtest_names = self.names

    def line(self, line: str, number: int) -> None:
        if m := _RESULT.match(line):
            self.results += 1
            for key in self.sums:
                self.sums[key] += int(m.group(key))
            self.summary_at(number)
        elif m := _TEST_LINE.match(line):
            if m.group("res") == "FAILED":
                self.libtest_names.add(m.group("name"), number)
            self.evidence += 1
        elif _COMPILE_FAILED.match(line):
            self.build_failed = True
            self.evidence += 1
        elif m := _NEXT_SUMMARY.match(line):
            counts = pairs(m.group(2))
            counts["run"] = int(m.group(1))
            self.next_counts = counts
            self.summary_at(number)
        elif m := _NEXT.match(line):
            if m.group(1) not in ("PASS", "SKIP"):
                self.next_names.add(m.group(2), number)
            self.evidence += 1

    def result(self) -> TestRun | None:
        if self.next_counts is not None:
            self.names = names = self.next_names
            c = self.next_counts
            failed = c.get("failed", 0) + c.get("timed", 0)
            passed, skipped = c.get("passed", 0), c.get("skipped", 0)
            return self.run(failed_any=bool(failed or names.names), passed=passed,
                            failed=max(failed, len(names.names)), skipped=skipped,
                            total=c.get("run", passed + failed) + skipped)
        self.names = names = self.libtest_names
        if self.results:
            s = self.sums
            failed = s["failed"]
            return self.run(failed_any=bool(failed or self.build_failed), passed=s["passed"], failed=failed,
                            skipped=s["ignored"], total=s["passed"] + failed + s["ignored"],
                            note="a target did not build" if self.build_failed else None)
        if self.build_failed:
            return TestRun("cargo", "failed", note="the build failed")
        return None


def _failing_test(r: Reading, thread: str) -> bool:
    """Whether a panicking thread is a failing test (nextest names it after its binary)."""
    return thread in r.failing_tests or any(name.endswith(" " + thread) for name in r.failing_tests)


def read_cargo(doc: Doc, r: Reading) -> None:
    """rustc/cargo diagnostics, cargo test failures and panics (see the module doc)."""
    heads = [i for i in doc.lines_with("error", "warning") if i + 1 not in r.claimed and _HEAD.match(doc.lines[i])]
    panics = doc.lines_with("panicked at")
    results = [i for i in doc.lines_with("test result: ") if _RESULT.match(doc.lines[i])]
    arrows = doc.lines_with("--> ")
    if not arrows and not panics and not results and not any(_AFTER.search(doc.lines[i]) for i in heads):
        return
    before = len(r.findings), len(r.tallies)
    for i in heads:
        m = _HEAD.match(doc.lines[i])
        assert m is not None
        sev, code, msg = m.group("sev"), m.group("code"), m.group("msg")
        label = f"{sev}[{code}]" if code else sev
        arrow = None
        for j in range(i + 1, min(doc.n, i + 4)):
            a = _ARROW.match(doc.lines[j])
            if a:
                arrow = (j, a)
                break
            if _HEAD.match(doc.lines[j]):
                break
        if arrow is None:
            if sev == "warning":
                r.claim(i + 1)  # "warning: `app` (lib) generated 3 warnings"
                continue
            rank = RANK_AFTER if _AFTER.search(msg) else RANK_ROOT
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3))
                        if doc.lines[j].strip() and not _HEAD.match(doc.lines[j]))
            r.add(Finding(i + 1, "error", "cargo", f"{label}: {shorten(msg, 200)}", rank,
                          ctx if rank == RANK_ROOT else (), reader="cargo"))
            continue
        j, a = arrow
        path = a.group("path")
        at = f"{path}:{a.group('line')}:{a.group('col')}"
        # the block runs to the next blank line; show its code and marker lines
        block: list[int] = []
        k = j + 1
        while k < doc.n and doc.lines[k].strip() and k - j < 40:
            block.append(k)
            k += 1
        r.claim_range(i + 1, k)
        shown = [b + 1 for b in block if _CODE.match(doc.lines[b]) and doc.lines[b].split("|", 1)[1].strip()][:2]
        if sev == "warning":
            r.add(Finding(i + 1, "warning", path, f"{label} at {at}: {shorten(msg, 200)}", reader="cargo"))
        else:
            r.add(Finding(i + 1, "error", path, f"{label} at {at}: {shorten(msg, 200)}", RANK_ROOT,
                          (j + 1, *shown), reader="cargo"))
    # cargo test
    for i in doc.lines_with(" ... FAILED", " ... ok", " ... ignored"):
        if _TEST_LINE.match(doc.lines[i]):
            r.claim(i + 1)
    sections = {}
    for i in doc.lines_with("---- "):
        m = _STDOUT.match(doc.lines[i])
        if m:
            sections[i] = m.group("name")
            r.claim(i + 1)
    for i in panics:
        if i + 1 in r.claimed and not any(s < i for s in sections):
            continue
        line = doc.lines[i]
        m = _PANIC_ANY.match(line)
        if not m:
            continue
        thread = m.group("thread")
        old = _PANIC_OLD.match(line)
        new = _PANIC_NEW.match(line)
        ctx: tuple[int, ...] = ()
        if old:
            where, message = f"{old.group('path')}:{old.group('line')}", old.group("msg")
            path = old.group("path")
        elif new:
            where, path = f"{new.group('path')}:{new.group('line')}", new.group("path")
            body = [j for j in range(i + 1, min(doc.n, i + 4)) if doc.lines[j].strip()
                    and not doc.lines[j].startswith("note:")]
            message = doc.lines[body[0]].strip() if body else ""
            r.claim(*(b + 1 for b in body[:1]))
            ctx = tuple(b + 1 for b in body[1:3])
        else:
            where, path, message = m.group("rest"), "panic", ""
        is_test = _failing_test(r, thread) or any(name == thread for name in sections.values())
        r.claim(i + 1, *ctx)
        for j in range(i + 1, min(doc.n, i + 6)):
            if doc.lines[j].startswith("note: run with `RUST_BACKTRACE"):
                r.claim(j + 1)
        if is_test:
            r.add(Finding(i + 1, "failure", thread, f"failed {thread}: panicked at {where}: {shorten(message, 200)}",
                          RANK_TEST, ctx, reader="cargo test"))
        else:
            r.add(Finding(i + 1, "error", path, f"thread '{thread}' panicked at {where}: {shorten(message, 200)}",
                          RANK_ROOT, ctx, reader="cargo"))
    for i in doc.lines_with("failures:"):
        if doc.lines[i].strip() == "failures:":
            r.claim(i + 1)
            j = i + 1
            while j < doc.n and (doc.lines[j].startswith("    ") or not doc.lines[j].strip()) and j - i < 500:
                r.claim(j + 1)
                j += 1
    for i in doc.lines_with("Some errors have detailed explanations", "For more information about an error",
                            "For more information about this error"):
        r.claim(i + 1)
    for i in results:
        m = _RESULT.match(doc.lines[i])
        assert m is not None
        r.tally(i + 1, f"cargo test: {m.group('res')}. {m.group('counts')}")
    if (len(r.findings), len(r.tallies)) != before:
        r.saw("cargo")

