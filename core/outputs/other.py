"""Readers for what any program may print: bare ``error:`` lines, crashes, CI markers.

- ``error: message`` / ``ERROR: message`` / ``fatal: message`` at the start
  of a line (pip, git, swift, cargo without a location, shell tools): a root
  cause, unless it says only that something before it failed (``command
  failed with exit code``, ``Process completed with exit code``), which
  followed from the others.
- Crashes: ``Segmentation fault``, ``Killed``, ``Aborted (core dumped)``,
  ``out of memory``, AddressSanitizer reports.
- GitHub Actions' ``##[error]`` and ``::error`` markers.
- An uncaught exception written as Ruby writes it, its class in parentheses
  at the end (``bin/import.rb:27:in `block in <main>': undefined method
  `strip' for nil (NoMethodError)``): a root cause at its file.
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

_BARE = re.compile(r"^(?:(?P<tool>[\w.+-]{1,30}): )?(?P<sev>fatal error|fatal|error|ERROR|Error|FATAL|FAILED|"
                   r"failed)(?:\[\w+\])?:\s*(?P<msg>\S.*)$")
_CI = re.compile(r"^(?:##\[error\]|::error(?: [^:]*)?::)(?P<msg>.*)$")
_AFTER = re.compile(r"command failed|exited with (?:code|status)|exit (?:code|status) \d|Process completed with|"
                    r"returned (?:a )?non-zero|subprocess-exited-with-error|build failed|see above|previous errors?|"
                    r"could not compile|failed with exit code|ld returned|linker command failed|"
                    r"Compilation failed|Build failed|had \d+ errors?", re.IGNORECASE)
_CRASH = re.compile(r"(?:^|\s)(?:Segmentation fault|Bus error|Aborted|Illegal instruction|Floating point exception)"
                    r"(?: \(core dumped\))?\s*$|^Killed\s*$|\bOut of memory\b|\bout of memory\b|"
                    r"^==\d+==ERROR: \w*Sanitizer|^fatal error: runtime: out of memory|\bOOMKilled\b")


#: Ruby's uncaught exception: ``FILE:LINE:in `WHERE': MESSAGE (Class::Name)``.
_RUBY = re.compile(r"^(?P<file>\S+?\.rb):(?P<line>\d+):in [`'][^']*': (?P<msg>.*) \((?P<cls>[A-Z]\w*(?:::\w+)*)\)$")


def read_bare_errors(doc: Doc, r: Reading) -> None:
    """Bare error lines, crashes and CI markers (see the module doc)."""
    for i in doc.lines_with("error", "Error", "ERROR", "fatal", "Fatal", "FATAL", "failed", "FAILED", "Segmentation", "Killed", "Aborted",
                            "out of memory", "Out of memory", "Sanitizer", "Bus error", "Illegal instruction",
                            "OOMKilled", ".rb:", lower=False):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _RUBY.match(line.strip())
        if m:
            ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 4)) if doc.lines[j].strip())[:2]
            r.add(Finding(i + 1, "error", m.group("file"), f"{m.group('cls')}: {shorten(m.group('msg'), 200)} (raised at "
                          f"{m.group('file')}:{m.group('line')})", RANK_ROOT, ctx, reader="ruby"))
            continue
        m = _CI.match(line)
        if m:
            msg = m.group("msg").strip()
            rank = RANK_AFTER if _AFTER.search(msg) else RANK_ROOT
            r.add(Finding(i + 1, "error", "ci", f"CI error: {shorten(msg, 200)}", rank, reader="ci"))
            continue
        m = _BARE.match(line.strip()) if not line[:1].isspace() else None
        if m:
            tool = m.group("tool")
            msg = m.group("msg").strip()
            if m.group("sev").lower() == "failed" and not tool:
                continue  # "failed: 3" and the like say too little
            place = tool or "output"
            rank = RANK_AFTER if _AFTER.search(msg) else RANK_ROOT
            ctx = ()
            if rank == RANK_ROOT:
                ctx = tuple(j + 1 for j in range(i + 1, min(doc.n, i + 3))
                            if doc.lines[j].strip() and doc.lines[j][:1].isspace())
            r.add(Finding(i + 1, "error", place, shorten(line.strip(), 220), rank, ctx, reader="error lines"))
            continue
        if _CRASH.search(line):
            r.add(Finding(i + 1, "error", "crash", shorten(line.strip(), 200), RANK_ROOT, reader="crash"))


__all__ = ["read_bare_errors"]
