"""Readers for JavaScript and TypeScript tools: tsc, ESLint, npm and yarn, Jest and Vitest, Node.

- tsc: ``src/a.ts(12,5): error TS2322: …`` and the pretty
  ``src/a.ts:12:5 - error TS2322: …`` with its code lines; ``Found 3 errors``.
- ESLint: the stylish format (a file's path, then ``  12:5  error  message
  rule`` lines under it), the compact and unix formats; ``✖ 5 problems``.
- npm/yarn: an ``npm ERR!``/``npm error`` block is a root cause when its code
  says why (ERESOLVE, E404, ENOENT, …) and what followed when it only says a
  script failed (ELIFECYCLE, ``command failed``, ``Exit status 1``);
  ``npm WARN`` lines are warnings.
- Jest/Vitest: ``● suite › test`` (and Vitest's ``FAIL file > suite > test``)
  with the message under it; ``● Test suite failed to run`` is a root cause;
  the repeat in ``Summary of all failing tests`` is not counted twice;
  ``Tests: 1 failed, 2 passed`` kept.
- Node: an uncaught ``Error: …`` with ``at …`` frames, placed at the first
  frame in the program's own code.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, RANK_TEST, Doc, Finding, Reading, shorten

_EXT = r"(?:tsx?|jsx?|mts|cts|mjs|cjs|vue|svelte|astro)"
_TSC_PAREN = re.compile(rf"^(?P<path>[^\s(][^(\n]*?\.{_EXT})\((?P<line>\d+),(?P<col>\d+)\): "
                        r"(?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_PRETTY = re.compile(rf"^(?P<path>[^\s:][^:\n]*?\.{_EXT}):(?P<line>\d+):(?P<col>\d+) - "
                         r"(?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_BARE = re.compile(r"^(?:error|warning) (?P<code>TS\d+): (?P<msg>.*)$")
_TSC_FOUND = re.compile(r"^Found (?P<n>\d+) errors?(?: in .*)?\.?$")
_ESL_ITEM = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.+?)(?:\s{2,}(?P<rule>[@\w/.-]+))?\s*$")
_ESL_COMPACT = re.compile(r"^(?P<path>\S.*?): line (?P<line>\d+), col (?P<col>\d+), (?P<sev>Error|Warning) - "
                          r"(?P<msg>.*?)(?: \((?P<rule>[@\w/.-]+)\))?$")
_ESL_UNIX = re.compile(r"^(?P<path>\S.*?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*) \[(?P<sev>Error|Warning)"
                       r"(?:/(?P<rule>[@\w/.-]+))?\]$")
_ESL_SUMMARY = re.compile(r"^[✖×x] \d+ problems? \(\d+ errors?, \d+ warnings?\)$")
_NPM = re.compile(r"^(?P<tool>npm|pnpm) (?P<sev>ERR!|error|WARN|warn)(?P<msg>.*)$")
_NPM_AFTER_CODE = re.compile(r"^(?:ELIFECYCLE|\d+|E?\d+)$")
_NPM_BOILER = re.compile(r"^\s*(?:code\b|errno\b|syscall\b|path\b|dest\b|A complete log of this run|"
                         r"Log files were not written|This is probably not a problem with npm|"
                         r"Failed at the .* script|Exit status \d+|command (?:failed|sh -c)|workspace|location|"
                         r"Lifecycle script|signal\b|Error: command failed|\S+@\S+ \S+: `|$|"
                         r"You can rerun|Note that this|Additional logging|The log files|"
                         r"[\w@./-]+@[\w.-]+$)")
_YARN = re.compile(r"^error (?P<msg>.+)$")
_JEST_BULLET = re.compile(r"^\s*● (?P<title>.+?)\s*$")
_JEST_FILE = re.compile(r"^\s*(?P<res>FAIL|PASS)\s+(?P<path>\S+)(?:\s+\(.*\))?\s*$")
_JEST_TALLY = re.compile(r"^\s*(?:Tests|Test Suites|Test Files|Snapshots):\s+(?P<counts>.*\d.*)$")
_VITEST_FAIL = re.compile(r"^\s*FAIL\s+(?P<path>\S+)\s+>\s+(?P<title>.+?)\s*$")
_VITEST_X = re.compile(r"^\s*[×✕✗]\s+(?P<title>.+?)(?:\s+\d+\s*ms)?\s*$")
_NODE_ERR = re.compile(r"^(?:Uncaught )?(?P<name>(?:[A-Z]\w*)?(?:Error|Exception))(?: \[(?P<code>\w+)\])?: (?P<msg>.*)$")
_AT = re.compile(r"^\s+at (?:.*? \()?(?P<path>[^()\s]+?):(?P<line>\d+):(?P<col>\d+)\)?$")


def _skip_blank_context(doc: Doc, i: int, limit: int = 3, window: int = 10, stop: re.Pattern[str] | None = None) -> tuple[int, ...]:
    out: list[int] = []
    for j in range(i + 1, min(doc.n, i + 1 + window)):
        line = doc.lines[j]
        if stop is not None and stop.match(line):
            break
        if line.strip():
            out.append(j + 1)
            if len(out) >= limit:
                break
    return tuple(out)


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
                ctx = _skip_blank_context(doc, i, 2, 4, stop=re.compile(rf"^\S.*\.{_EXT}:\d+:\d+ - |^Found \d"))
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


def read_eslint(doc: Doc, r: Reading) -> None:
    """ESLint's stylish, compact and unix formats."""
    items = [i for i in doc.lines_with("error", "warning") if i + 1 not in r.claimed and _ESL_ITEM.match(doc.lines[i])]
    for i in items:
        m = _ESL_ITEM.match(doc.lines[i])
        assert m is not None
        # the file is the nearest unindented line above
        path = None
        for j in range(i - 1, max(-1, i - 2000), -1):
            line = doc.lines[j]
            if line.strip() and not line[:1].isspace():
                path = line.strip()
                r.claim(j + 1)
                break
        if path is None or not re.search(rf"\.{_EXT}$|\.(?:json|md|yml|yaml)$", path):
            continue
        rule = f" ({m.group('rule')})" if m.group("rule") else ""
        at = f"{path}:{m.group('line')}:{m.group('col')}"
        kind = "warning" if m.group("sev") == "warning" else "error"
        r.add(Finding(i + 1, kind, path, f"{m.group('sev')} at {at}: {shorten(m.group('msg'), 200)}{rule}",
                      RANK_ROOT, reader="eslint"))
    for i in doc.lines_with("Error", "Warning"):
        if i + 1 in r.claimed:
            continue
        m = _ESL_COMPACT.match(doc.lines[i]) or _ESL_UNIX.match(doc.lines[i])
        if m:
            rule = f" ({m.group('rule')})" if m.group("rule") else ""
            at = f"{m.group('path')}:{m.group('line')}:{m.group('col')}"
            kind = "warning" if m.group("sev") == "Warning" else "error"
            r.add(Finding(i + 1, kind, m.group("path"), f"{kind} at {at}: {shorten(m.group('msg'), 200)}{rule}",
                          RANK_ROOT, reader="eslint"))
    for i in doc.lines_with("problem"):
        if _ESL_SUMMARY.match(doc.lines[i].strip()):
            r.tally(i + 1, "eslint: " + doc.lines[i].strip().lstrip("✖×x "))
            for j in range(i + 1, min(doc.n, i + 3)):
                if "potentially fixable" in doc.lines[j]:
                    r.claim(j + 1)


def read_npm(doc: Doc, r: Reading) -> None:
    """npm, pnpm and yarn's own error and warning lines."""
    lines = doc.lines_with("npm ERR!", "npm error", "npm WARN", "npm warn", "pnpm ERR", "error Command failed",
                           "ERR_PNPM")
    if not lines:
        return
    r.saw("npm")
    block: list[int] = []

    def close_block() -> None:
        if not block:
            return
        code = None
        for b in block:
            m = re.match(r"^\s*code\s+(\S+)", _NPM.match(doc.lines[b]).group("msg"))  # type: ignore[union-attr]
            if m:
                code = m.group(1)
                break
        after = code is None or bool(_NPM_AFTER_CODE.match(code))
        point = next((b for b in block if not _NPM_BOILER.match(_NPM.match(doc.lines[b]).group("msg"))), None)  # type: ignore[union-attr]
        if point is None and code is None and not re.search(r"failed|Exit status|Test failed", " ".join(
                doc.lines[b] for b in block)):
            r.claim(*(b + 1 for b in block))
            block.clear()
            return
        if point is None or (after and code in (None, "ELIFECYCLE") and point != block[0]
                             and re.search(r"script|failed|Exit status", doc.lines[block[0]])):
            point = block[0]
        text = _NPM.match(doc.lines[point]).group("msg").strip()  # type: ignore[union-attr]
        if re.match(r"^(?:Missing script|ERESOLVE|404|Could not resolve|notarget|enoent|code E|"
                    r"Cannot find module|gyp ERR)", text, re.IGNORECASE):
            after = False
        label = f"npm error{' ' + code if code else ''}"
        ctx = tuple(b + 1 for b in block if b > point and not _NPM_BOILER.match(
            _NPM.match(doc.lines[b]).group("msg")))[:2]  # type: ignore[union-attr]
        r.claim(*(b + 1 for b in block))
        r.add(Finding(point + 1, "error", "npm", f"{label}: {shorten(text, 200)}", RANK_AFTER if after else RANK_ROOT,
                      ctx, reader="npm"))
        block.clear()

    for i in lines:
        line = doc.lines[i]
        m = _NPM.match(line)
        if m and m.group("sev") in ("ERR!", "error"):
            if block and i != block[-1] + 1:
                close_block()
            block.append(i)
            continue
        close_block()
        if m:  # a warning
            r.add(Finding(i + 1, "warning", "npm", f"npm warn{shorten(m.group('msg'), 200)}", reader="npm"))
        elif line.startswith("error Command failed"):
            r.add(Finding(i + 1, "error", "yarn", shorten(line, 200), RANK_AFTER, reader="yarn"))
        elif "ERR_PNPM" in line:
            r.add(Finding(i + 1, "error", "pnpm", shorten(line.strip(), 200), RANK_ROOT, reader="pnpm"))
    close_block()
    for i in doc.lines_with("info Visit https://yarnpkg.com"):
        r.claim(i + 1)


def read_jest(doc: Doc, r: Reading) -> None:
    """Jest's and Vitest's failures (see the module doc)."""
    bullets = [i for i in doc.lines_with("● ") if _JEST_BULLET.match(doc.lines[i])]
    files = [i for i in doc.lines_with("FAIL ", "PASS ") if _JEST_FILE.match(doc.lines[i])]
    vitest = [i for i in doc.lines_with("FAIL ") if _VITEST_FAIL.match(doc.lines[i])]
    tallies = [i for i in doc.lines_with("Tests:", "Test Suites:", "Tests ", "Test Files ")
               if _JEST_TALLY.match(doc.lines[i]) or re.match(r"^\s*(?:Tests|Test Files)\s+\d+ (?:failed|passed)", doc.lines[i])]
    if not (bullets or files or vitest or tallies):
        return
    r.saw("jest")
    current_file = None
    file_at = {i: _JEST_FILE.match(doc.lines[i]) for i in files}
    summary_start = next((i for i in doc.lines_with("Summary of all failing tests")), None)
    seen_titles: set[str] = set()
    stop = re.compile(r"^\s*● |^\s*(?:FAIL|PASS)\s+\S|^\s*(?:Tests|Test Suites):")
    events = sorted([(i, "file") for i in files] + [(i, "bullet") for i in bullets] + [(i, "vitest") for i in vitest])
    for i, kind in events:
        if kind == "file":
            m = file_at[i]
            assert m is not None
            r.claim(i + 1)
            if m.group("res") == "FAIL":
                current_file = m.group("path")
            continue
        if i + 1 in r.claimed:
            continue
        if kind == "vitest":
            m = _VITEST_FAIL.match(doc.lines[i])
            assert m is not None
            title = f"{m.group('path')} > {m.group('title')}"
        else:
            title = _JEST_BULLET.match(doc.lines[i]).group("title")  # type: ignore[union-attr]
            if title.startswith("Console"):
                r.claim(i + 1)
                continue
        ctx = _skip_blank_context(doc, i, 3, 10, stop=stop)
        # the whole block to the next bullet is the failure's
        j = i + 1
        while j < doc.n and j - i < 300 and not stop.match(doc.lines[j]):
            r.claim(j + 1)
            j += 1
        if title in seen_titles or (summary_start is not None and i > summary_start and title in seen_titles):
            r.claim(i + 1)
            continue
        seen_titles.add(title)
        first = doc.lines[ctx[0] - 1].strip() if ctx else ""
        if title == "Test suite failed to run":
            place = current_file or "test suite"
            r.add(Finding(i + 1, "error", place, f"test suite {place} failed to run: {shorten(first, 200)}",
                          RANK_ROOT, ctx, reader="jest"))
            continue
        r.add(Finding(i + 1, "failure", title, f"failed {title}" + (f": {shorten(first, 200)}" if first else ""),
                      RANK_TEST, ctx, reader="jest"))
        r.fail_test(title, i + 1)
    for i in doc.lines_with("×", "✕", "✗"):
        m = _VITEST_X.match(doc.lines[i])
        if m and i + 1 not in r.claimed:
            r.claim(i + 1)
            if not any(m.group("title").strip() in t for t in r.failing_tests):
                r.fail_test(m.group("title").strip(), i + 1)
    for i in tallies:
        r.tally(i + 1, "jest: " + " ".join(doc.lines[i].split()))
    if summary_start is not None:
        r.claim(summary_start + 1)


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


__all__ = ["read_tsc", "read_eslint", "read_npm", "read_jest", "read_node", "RANK_AFTER"]
