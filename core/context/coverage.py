"""The running summary's coverage check, with no model call.

Issue "Layered context", "Running summary": every file path, test name,
entry id, commit hash and error code in the covered turns must appear in the
summary, a fact or a reference. So must a function named as code is
written (``build_index()``): it is what a finding names, and a small model's
summary drops it as readily as a path.

What counts as "in the covered turns" here: the text of their prompts and
replies and the arguments of their tool calls. A tool output's own contents
are covered by its reference, which the summary layer keeps (one line per
output naming its entry, so a recall is one step away); the output's entry
id must then appear in that reference.

Items are found by patterns (:func:`extract_items`) and matched by
:func:`is_present`: exact text for paths, test names and error codes
(case-sensitive), ``entry N`` as words, and a commit hash by its first seven
characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

__all__ = ["Item", "extract_items", "is_present", "missing_items", "ITEM_KINDS"]

ITEM_KINDS = ("path", "test", "entry", "commit", "error_code", "symbol")

_EXT = (r"py|pyi|js|jsx|ts|tsx|mjs|cjs|md|rst|txt|json|jsonl|toml|yaml|yml|ini|cfg|conf|lock|rs|go|c|h|cc|cpp|hpp|"
        r"java|kt|swift|rb|php|cs|sh|bash|zsh|sql|csv|tsv|log|html|css|scss|xml|proto|tf|gradle|mk|env|"
        r"ipynb|vue|svelte|lua|pl|r|dart|scala|ex|exs|erl|hs|ml|zig|nim|tcss|svg|png|gguf")
_PATH = re.compile(
    r"(?<![\w/.:@-])("
    r"(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"          # a/b/c, /etc/x, ./x/y, ~/x
    r"|[\w@+-][\w.@+-]*\.(?:" + _EXT + r")"                # name.ext
    r")(?::\d+(?::\d+)?)?(?![\w/])"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_TEST = re.compile(
    r"(?<![\w.])("
    r"[\w./-]+\.py::[\w:\[\]\-.]+"                        # pytest node ids
    r"|test_\w+"                                           # python test functions
    r"|Test[A-Z]\w*"                                       # Go / JUnit / XCTest names
    r"|\w+Tests?\.test\w+"                                 # Swift/Java Class.testMethod
    r")"
)
_ENTRY = re.compile(r"\bentry (\d+)\b", re.IGNORECASE)
#: A function or method named as code is written (``build_index()``, ``Client.refresh()``): what a
#: finding names ("the leak comes from resolve_account()"), as exact as a path.
_SYMBOL = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,}(?:\.[A-Za-z_]\w*){0,3}\(\))")
_COMMIT = re.compile(r"(?<![\w-])([0-9a-f]{7,40})(?![\w-])")
_ERROR_CODE = re.compile(r"(?<![\w-])(E[A-Z]{3,}|[A-Z]{1,4}\d{3,5}|[A-Z]{1,4}-\d{3,5})(?![\w-])")
_ERRNO_WORDS = {"ENOENT", "EACCES", "EPERM", "EEXIST", "EISDIR", "ENOTDIR", "EINVAL", "EPIPE", "EAGAIN",
                "ENOSPC", "EADDRINUSE", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EBUSY", "ENOMEM",
                "EMFILE", "ENOTEMPTY", "EROFS", "EXDEV", "ENOTFOUND", "EHOSTUNREACH"}


@dataclass(frozen=True, order=True)
class Item:
    """One thing the summary must keep: ``kind`` (one of :data:`ITEM_KINDS`) and ``text``."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


def _is_hash(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token) and not token.isdigit()


def _looks_like_path(p: str) -> bool:
    """A slashed token is a path when it is absolute or relative (``/``,
    ``./``, ``~/``), ends in a file name with an extension, or has three or
    more parts."""
    if p.startswith(("/", "./", "../", "~/")):
        return True
    last = p.rstrip("/").rsplit("/", 1)[-1]
    if re.fullmatch(r"[\w@+-][\w.@+-]*\.(?:" + _EXT + r")", last):
        return True
    return p.strip("/").count("/") >= 2


def extract_items(text: str) -> set[Item]:
    """The file paths, test names, entry ids, commit hashes and error codes in
    ``text`` (URLs are not paths; version numbers like ``1.2.3`` are not
    paths)."""
    found: set[Item] = set()
    if not text:
        return found
    scrubbed = _URL.sub(" ", text)
    for m in _TEST.finditer(scrubbed):
        found.add(Item("test", m.group(1).rstrip(".:")))
    for m in _PATH.finditer(scrubbed):
        p = m.group(1).rstrip(".,;:")
        if "::" in m.group(0):
            continue
        if re.fullmatch(r"[\d./]+", p) or len(p) < 3:
            continue  # dates, versions, fractions
        if "/" not in p and re.fullmatch(r"[\w-]+\.\w+", p) is None:
            continue
        if "/" in p and not _looks_like_path(p):
            continue  # and/or, read/write, feature/login: words, not paths
        found.add(Item("path", p))
    for m in _SYMBOL.finditer(scrubbed):
        found.add(Item("symbol", m.group(1)))
    for m in _ENTRY.finditer(scrubbed):
        found.add(Item("entry", f"entry {int(m.group(1))}"))
    for m in _COMMIT.finditer(scrubbed):
        if _is_hash(m.group(1)):
            found.add(Item("commit", m.group(1)))
    for m in _ERROR_CODE.finditer(scrubbed):
        code = m.group(1)
        if code.startswith("E") and code.isalpha() and code not in _ERRNO_WORDS:
            continue  # ERROR, EOF, … are words, not codes
        found.add(Item("error_code", code))
    # a test node id's path part is a path too, covered when the id is
    tests = {i.text for i in found if i.kind == "test"}
    found = {i for i in found if not (i.kind == "path" and any(t.startswith(i.text + "::") for t in tests))}
    return found


def is_present(item: Item, haystack: str) -> bool:
    """Whether ``item`` appears in ``haystack`` (see the module doc)."""
    if item.kind == "entry":
        number = item.text.split()[-1]
        return re.search(rf"\bentr(?:y|ies)\b[^.\n]{{0,40}}?\b{number}\b", haystack, re.IGNORECASE) is not None \
            or re.search(rf"\bentry {number}\b", haystack, re.IGNORECASE) is not None
    if item.kind == "commit":
        return item.text[:7] in haystack
    if item.kind == "symbol":  # build_index() is kept as build_index too
        name = item.text[:-2]
        return re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", haystack) is not None
    return item.text in haystack


def missing_items(items: Iterable[Item], *haystacks: str) -> list[Item]:
    """The items found in none of ``haystacks`` (the summary, the facts, the
    references), sorted."""
    joined = "\n".join(h for h in haystacks if h)
    return sorted(i for i in set(items) if not is_present(i, joined))
