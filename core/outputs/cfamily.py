"""Compilers that write ``path:line:col: error: message``, linkers, make and ninja.

The diagnostic form is GCC's, which clang, javac, swiftc and many others
share (``path:line[:col]: error|warning|fatal error: message``, MSVC's and
tsc's ``path(line,col): error CODE: message`` too). Each error is placed at
its file; the source and caret lines that follow it are shown under it;
``note:`` lines and the ``In function``/``In file included from`` lines
around it are accounted for. Linkers: undefined references, missing
libraries, duplicate symbols. make, ninja and the compiler drivers'
closing lines (``make: *** … Error 1``, ``ninja: build stopped``,
``collect2: error: ld returned 1 exit status``) are what followed from the
errors, ranked after them; ``No rule to make target`` and ``missing
separator`` are root causes. (CMake's own messages: :mod:`.cmake`.)
"""

from __future__ import annotations

import re

from .doc import RANK_AFTER, RANK_ROOT, Doc, Finding, Reading, shorten

__all__ = ["read_cc", "read_linker", "read_make"]

_DIAG = re.compile(
    r"^(?P<path>(?:[A-Za-z]:[\\/])?[^\s:\[(<][^:\n]*?):(?P<line>\d+)(?::(?P<col>\d+))?(?::\d+)?:\s*"
    r"(?P<sev>fatal error|error|warning|Error|Warning|ERROR|WARNING)(?:\s*\[[^\]\n]*\])?:\s*(?P<msg>.*)$")
_DIAG_PAREN = re.compile(
    r"^(?P<path>(?:[A-Za-z]:[\\/])?[^\s(][^(\n]*?)\((?P<line>\d+)(?:,(?P<col>\d+))?\)\s*:\s*"
    r"(?P<sev>fatal error|error|warning)\s*(?P<code>[A-Z]+\d+)?\s*:\s*(?P<msg>.*)$")
_NOTE = re.compile(r"^(?:[A-Za-z]:[\\/])?[^\s:][^:\n]*?:\d+(?::\d+)?:\s*(?:note|remark):")
_INCLUDED = re.compile(r"^(?:In file included from|\s+from) \S+:\d+|^\S+: In (?:function|member function|"
                       r"constructor|destructor|instantiation|static member function|lambda)|^\S+: At (?:top level|global scope)")
_DRIVER = re.compile(r"^(?P<tool>(?:\S*/)?(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|cc1|cc1plus|collect2|ld|ld\.lld|"
                     r"ld\.gold|lld|swiftc|swift-frontend|javac|nvcc|emcc|zig)(?:-[\d.]+)?(?:\.exe)?): "
                     r"(?P<sev>fatal error|error|warning): (?P<msg>.*)$")
_AFTER_DRIVER = re.compile(r"linker command failed|ld returned \d+ exit status|compilation terminated|"
                           r"errors? (?:were )?generated", re.IGNORECASE)
_MAKE = re.compile(r"^(?P<tool>(?:\S*/)?(?:g|mingw32-)?make)(?:\[\d+\])?: \*\*\* (?P<msg>.*)$")
_MAKEFILE = re.compile(r"^(?P<path>\S*(?:[Mm]akefile|\.mk)):(?P<line>\d+): \*\*\* (?P<msg>.*)$")
_MAKE_ROOT = re.compile(r"No rule to make target|missing separator|recipe commences before first target|"
                        r"No targets specified|multiple target patterns|commands commence before", re.IGNORECASE)
_NINJA_FAILED = re.compile(r"^FAILED: (?P<target>.*)$")
_NINJA = re.compile(r"^ninja: (?:error: )?(?P<msg>.*)$")


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _code_context(doc: Doc, i: int, limit: int = 3) -> tuple[int, ...]:
    """The lines after a diagnostic that show its code: up to ``limit``
    non-blank lines, stopping at the next diagnostic or heading."""
    out: list[int] = []
    j = i + 1
    while j < doc.n and len(out) < limit:
        line = doc.lines[j]
        if not line.strip() or _DIAG.match(line) or _DIAG_PAREN.match(line) or _NOTE.match(line) \
                or _INCLUDED.match(line) or _MAKE.match(line) or _DRIVER.match(line):
            break
        if line.startswith(("FAILED: ", "ninja: ", "[", "make", "CMake ", "error: ", "warning: ", "note: ")) \
                and not line.startswith("[ERROR]"):
            break
        out.append(j + 1)
        j += 1
    return tuple(out)


def read_cc(doc: Doc, r: Reading) -> None:
    """GCC-style diagnostics (gcc, clang, javac, swiftc, …) and MSVC-style ones."""
    candidates = doc.lines_with("error", "warning", "Error", "Warning", "ERROR", "WARNING")
    for i in candidates:
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _DIAG.match(line) or _DIAG_PAREN.match(line)
        if m is None:
            continue
        path = _rel(m.group("path").strip())
        if path.lower() in ("error", "warning", "note") or " " in path and not ("/" in path or "\\" in path):
            continue
        sev = m.group("sev").lower()
        col = m.group("col")
        at = f"{path}:{m.group('line')}" + (f":{col}" if col else "")
        code = m.groupdict().get("code")
        label = f"{sev}{' ' + code if code else ''}"
        msg = shorten(m.group("msg"), 200)
        if sev.startswith("warning"):
            r.add(Finding(i + 1, "warning", path, f"warning at {at}: {msg}", reader="compiler"))
            continue
        ctx = _code_context(doc, i)
        r.add(Finding(i + 1, "error", path, f"{label} at {at}: {msg}", RANK_ROOT, ctx, reader="compiler"))
        # notes that follow belong to it
        j = i + 1 + len(ctx)
        while j < doc.n and (_NOTE.match(doc.lines[j]) or (doc.lines[j][:1].isspace() and doc.lines[j].strip()
                                                             and j - i < 12)):
            r.claim(j + 1)
            j += 1
    for i in doc.lines_with("In file included from", ": In ", ": At ", "note:"):
        if _INCLUDED.match(doc.lines[i]) or _NOTE.match(doc.lines[i]):
            r.claim(i + 1)
    for i in doc.lines_with("error", "warning"):
        if i + 1 in r.claimed:
            continue
        m = _DRIVER.match(doc.lines[i])
        if not m:
            continue
        msg = shorten(m.group("msg"), 200)
        tool = m.group("tool").rsplit("/", 1)[-1]
        if m.group("sev") == "warning":
            r.add(Finding(i + 1, "warning", tool, f"{tool}: warning: {msg}", reader="compiler"))
        elif _AFTER_DRIVER.search(msg):
            r.add(Finding(i + 1, "error", tool, f"{tool}: error: {msg}", RANK_AFTER, reader="compiler"))
        else:
            r.add(Finding(i + 1, "error", tool, f"{tool}: {m.group('sev')}: {msg}", RANK_ROOT,
                          _code_context(doc, i, 2), reader="compiler"))
    for i in doc.lines_with("errors generated", "error generated", "warnings generated", "warning generated"):
        if re.match(r"^\d+ (?:errors?|warnings?)(?: and \d+ (?:errors?|warnings?))? generated\.?$",
                    doc.lines[i].strip()):
            r.tally(i + 1, doc.lines[i].strip())


#: A linker's own message that says why a link failed, wherever it stands on its line: after
#: ``/usr/bin/ld: ``, ``ld.lld: error: ``, ``mold: error: ``, inside rustc's ``= note:``, or on a
#: line of its own under the linker's ``in function`` line.
_LINK_ROOT = re.compile(
    r"undefined reference to|undefined symbols?:|undefined symbol\b|multiple definition of|duplicate symbols?\b|"
    r"cannot find -l\S+|library not found for -l|framework not found|unable to find (?:library|framework)|"
    r"cannot find [^\s:]+: No such file|cannot open (?:output )?file|unresolved external symbol|"
    r"\bLNK(?:20\d\d|1104|1181|4\d\d\d)\b|^Undefined symbols for architecture|relocation [\w.]+ against|"
    r"could not read symbols|file format not recognized|file not recognized|incompatible with \S+ output|"
    r"skipping incompatible .* when searching for|error adding symbols|undefined-symbol|hidden symbol .* is referenced")
#: What only says that a link failed, because of the lines above.
_LINK_AFTER = re.compile(r"symbol\(s\) not found|ld returned \d+ exit status|linker command failed|"
                         r"\bLNK1120\b|\d+ unresolved externals|running (?:gcc|clang|cc) failed|"
                         r"linking with `[^`]+` failed")
#: The linker's own name before its message.
_LINKER_NAME = re.compile(r"(?:^|\s)(?:\S*/)?(?:ld|ld\.lld|ld\.gold|ld\.bfd|ld64(?:\.lld)?|lld|lld-link|mold|"
                          r"link\.exe|rust-lld|wasm-ld)(?:-[\d.]+)?: ")
#: A linker's line naming where a symbol was referenced (shown under the error, not counted).
_LINK_CONTEXT = re.compile(r"^\s*(?:>>> |referenced by\b|\S*: in function [`'‘]|\S*: in \S+ [`'‘]|"
                           r"\(maybe you meant:|\S+\.o(?:bj)?:\(|\s+\S+ in \S+\.o\b|\s+-\[.*\] in |"
                           r"\s*\"[^\"]+\", referenced from:)")
#: rustc's ``= note:`` before a line it quotes from the linker.
_NOTE_PREFIX = re.compile(r"^\s*= note:\s*")


def _link_text(line: str) -> str:
    """A linker line as a point shows it: without rustc's ``= note:`` and the indentation."""
    return shorten(_NOTE_PREFIX.sub("", line).strip(), 200)


def read_linker(doc: Doc, r: Reading) -> None:
    """Linker failures, by kind rather than by linker: the linker's own lines
    that say why (undefined references and symbols, missing libraries,
    duplicates, unresolved externals, wrong formats) are root causes, wherever
    they stand: after ``ld:``, ``ld.lld:``, ``mold:``, MSVC's ``error
    LNK2019``, on the line under ``in function``, or quoted inside a
    compiler's summary (rustc's ``error: linking with `cc` failed`` and its
    ``= note:`` lines, go's ``running gcc failed``), which is why the summary
    is ranked after them: it says only that the link failed. The lines naming
    where a symbol is referenced are shown under the first of them."""
    needles = ("undefined", "multiple definition", "duplicate symbol", "cannot find", "library not found",
               "framework not found", "unable to find", "cannot open", "unresolved external", "LNK", "relocation",
               "could not read symbols", "not recognized", "incompatible", "error adding symbols", "hidden symbol",
               "symbol(s) not found", "ld returned", "linker command failed", "running gcc failed",
               "running clang failed", "running cc failed", "linking with", "ld: ", "ld.lld: ", "mold: ", "lld: ")
    for i in doc.lines_with(*needles):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        body = _NOTE_PREFIX.sub("", line).strip()
        if not body:
            continue
        named = bool(_LINKER_NAME.search(" " + body))
        if _LINK_AFTER.search(body):
            if named or re.search(r"collect2|clang|gcc|cc\b|link|rustc|\berror\b", body):
                r.add(Finding(i + 1, "error", "the link", f"link failed: {shorten(body, 200)}", RANK_AFTER,
                              reader="linker"))
            continue
        if not _LINK_ROOT.search(body):
            if named and re.search(r"\bwarning\b", body):
                r.add(Finding(i + 1, "warning", "the link", f"link warning: {shorten(body, 200)}", reader="linker"))
            elif named and re.search(r"in function|: in \S+ [`'‘]", body):
                r.claim(i + 1)
            elif named and re.search(r"\berror\b", body):
                r.add(Finding(i + 1, "error", "the link", f"link error: {shorten(body, 200)}", RANK_ROOT,
                              reader="linker"))
            continue
        if re.search(r"\bwarning\b", body) and not re.search(r"\berror\b", body):
            r.add(Finding(i + 1, "warning", "the link", f"link warning: {shorten(body, 200)}", reader="linker"))
            continue
        # the lines after it that say where (>>> referenced by, "_sym", referenced from:, in function)
        ctx: list[int] = []
        j = i + 1
        while j < doc.n and j - i <= 12:
            nxt = doc.lines[j]
            if not nxt.strip():
                break
            if _LINK_CONTEXT.match(nxt) or (body.startswith("Undefined symbols") and nxt[:1].isspace()):
                r.claim(j + 1)
                if len(ctx) < 2:
                    ctx.append(j + 1)
                j += 1
                continue
            break
        # the "in function" line above it says where, too
        if i > 0 and re.search(r"in function [`'‘]|: in \S+ [`'‘]", doc.lines[i - 1]):
            r.claim(i)
        r.add(Finding(i + 1, "error", "the link", f"link error: {_link_text(line)}", RANK_ROOT, tuple(ctx),
                      reader="linker"))


def read_make(doc: Doc, r: Reading) -> None:
    """make's and ninja's own lines (see the module doc)."""
    for i in doc.lines_with("***"):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _MAKEFILE.match(line)
        if m:
            r.add(Finding(i + 1, "error", m.group("path"), f"make error at {m.group('path')}:{m.group('line')}: "
                          f"{shorten(m.group('msg'), 200)}", RANK_ROOT, reader="make"))
            continue
        m = _MAKE.match(line)
        if not m:
            continue
        msg = m.group("msg")
        if msg.startswith("Waiting for unfinished jobs"):
            r.claim(i + 1)
            continue
        rank = RANK_ROOT if _MAKE_ROOT.search(msg) else RANK_AFTER
        r.add(Finding(i + 1, "error", "make", f"make: *** {shorten(msg, 200)}", rank, reader="make"))
    for i in doc.lines_with("not remade because of errors", "Leaving directory", "Entering directory"):
        r.claim(i + 1)
    for i in doc.lines_with("FAILED: ", "ninja: "):
        if i + 1 in r.claimed:
            continue
        line = doc.lines[i]
        m = _NINJA_FAILED.match(line)
        if m:
            r.add(Finding(i + 1, "error", "ninja", f"ninja: FAILED: {shorten(m.group('target'), 160)}", RANK_AFTER,
                          reader="ninja"))
            if i + 1 < doc.n and not _DIAG.match(doc.lines[i + 1]):
                r.claim(i + 2)  # the command that failed
            continue
        m = _NINJA.match(line)
        if m:
            msg = m.group("msg")
            if msg.startswith(("Entering directory", "no work to do")):
                continue
            rank = RANK_AFTER if "build stopped" in msg else RANK_ROOT
            r.add(Finding(i + 1, "error", "ninja", f"ninja: {shorten(msg, 200)}", rank, reader="ninja"))
