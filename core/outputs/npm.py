"""npm, pnpm and yarn: their own error and warning lines.

An ``npm ERR!``/``npm error`` block is a root cause when its code says why
(ERESOLVE, E404, ENOENT, …) and what followed when it only says a script
failed (ELIFECYCLE, ``command failed``, ``Exit status 1``); ``npm WARN``
lines are warnings; yarn's ``error Command failed`` followed from the
others; pnpm's ``ERR_PNPM_…`` is a root cause.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_npm"]

_NPM = re.compile(r"^(?P<tool>npm|pnpm) (?P<sev>ERR!|error|WARN|warn)(?P<msg>.*)$")
_NPM_AFTER_CODE = re.compile(r"^(?:ELIFECYCLE|\d+|E?\d+)$")
_NPM_BOILER = re.compile(r"^\s*(?:code\b|errno\b|syscall\b|path\b|dest\b|A complete log of this run|"
                         r"Log files were not written|This is probably not a problem with npm|"
                         r"Failed at the .* script|Exit status \d+|command (?:failed|sh -c)|workspace|location|"
                         r"Lifecycle script|signal\b|Error: command failed|\S+@\S+ \S+: `|$|"
                         r"You can rerun|Note that this|Additional logging|The log files|"
                         r"[\w@./-]+@[\w.-]+$)")


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
