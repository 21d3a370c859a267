"""Reader for cargo and rustc: diagnostics, cargo test's failures, panics.

rustc writes ``error[E0425]: message`` and, on a following line,
``--> src/main.rs:4:13``: the error is placed at that file, and the code
lines with their markers (``4 |     let y = x + 1;``, ``|  ^ not found``)
are shown under it. ``error: could not compile `app` ``, ``aborting due
to …`` and ``test failed, to rerun …`` followed from the others. cargo
test: ``test name ... FAILED`` lists a failing test, its ``---- name stdout
----`` section gives the panic message, and ``test result: FAILED. …`` is
kept. A panic outside a test is a root cause at its file.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten

_HEAD = re.compile(r"^(?P<sev>error|warning)(?:\[(?P<code>[A-Z]?\d+|[\w:-]+)\])?: (?P<msg>.+)$")
_ARROW = re.compile(r"^\s*--> (?P<path>.+?):(?P<line>\d+):(?P<col>\d+)\s*$")
_CODE = re.compile(r"^\s*\d*\s*\|")
_AFTER = re.compile(r"could not compile|linking with `[^`]+` failed|aborting due to|test failed, to rerun|build failed|"
                    r"^\d+ previous errors?|failed to compile|generated \d+ warnings?|warnings? emitted|"
                    r"due to \d+ previous", re.IGNORECASE)
_TEST_LINE = re.compile(r"^test (?P<name>\S+) \.\.\. (?P<res>FAILED|ok|ignored)(?:.*)$")
_STDOUT = re.compile(r"^---- (?P<name>\S+) stdout ----$")
_PANIC_OLD = re.compile(r"^thread '(?P<thread>[^']*)' panicked at '(?P<msg>.*)', (?P<path>\S+?):(?P<line>\d+):\d+$")
_PANIC_NEW = re.compile(r"^thread '(?P<thread>[^']*)' panicked at (?P<path>\S+?):(?P<line>\d+):\d+:$")
_PANIC_ANY = re.compile(r"^thread '(?P<thread>[^']*)' (?:\(\d+\) )?panicked at (?P<rest>.*)$")
_RESULT = re.compile(r"^test result: (?P<res>FAILED|ok)\. (?P<counts>.*?)(?:; finished in .*)?$")


def read_rust(doc: Doc, r: Reading) -> None:
    """rustc/cargo diagnostics, cargo test failures and panics (see the module doc)."""
    heads = [i for i in doc.lines_with("error", "warning") if i + 1 not in r.claimed and _HEAD.match(doc.lines[i])]
    panics = doc.lines_with("panicked at")
    results = [i for i in doc.lines_with("test result: ") if _RESULT.match(doc.lines[i])]
    arrows = doc.lines_with("--> ")
    if not arrows and not panics and not results and not any(_AFTER.search(doc.lines[i]) for i in heads):
        return
    before = len(r.findings), len(r.tallies), len(r.failing_tests)
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
        m = _TEST_LINE.match(doc.lines[i])
        if m:
            r.claim(i + 1)
            if m.group("res") == "FAILED":
                r.fail_test(m.group("name"), i + 1)
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
        is_test = thread in r.failing_tests or any(name == thread for name in sections.values())
        r.claim(i + 1, *ctx)
        for j in range(i + 1, min(doc.n, i + 6)):
            if doc.lines[j].startswith("note: run with `RUST_BACKTRACE"):
                r.claim(j + 1)
        if is_test:
            r.add(Finding(i + 1, "failure", thread, f"failed {thread}: panicked at {where}: {shorten(message, 200)}",
                          RANK_TEST, ctx, reader="cargo test"))
            r.fail_test(thread, i + 1)
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
    if (len(r.findings), len(r.tallies), len(r.failing_tests)) != before:
        r.saw("cargo")


__all__ = ["read_rust"]
