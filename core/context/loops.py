"""Loops in the record, and what stands for them in later requests.

A small model that fell into a loop once copies it from the history: the
turn after 20 identical failed ``read_file`` calls began the same 20 again.
So an ended turn is sent with its loops collapsed, while the store keeps
every entry as it was (only the request changes):

- **Repeated failed calls**: the same call (tool name and arguments,
  :func:`call_key`) whose result was an error (``meta.error``) two times or
  more in one turn stands as its first call, with one result that says so:
  ``[the same call failed 20 times in this turn: read_file {"path": "src"}:
  error: src is a directory]``. The later copies, and a reply made only to
  introduce them, are left out. Calls that succeeded, and calls that
  differ in any argument, are untouched.
- **A reply stopped for repeating itself** (``meta.repeat``, written by the
  agent: the character offset where the repetition began, the span's
  length and its copies) is sent up to the first copy of the span, then one
  line saying it repeated and was stopped.

:func:`call_key` is also the agent's rule for "the same call" within a
turn (:mod:`wisp.core.agent`), so that the two agree.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["call_key", "call_text", "collapse_loops", "repeat_marker", "ERROR_CHARS"]

#: A collapsed result quotes at most this many characters of the first error (characters).
ERROR_CHARS = 300


def call_key(name: str | None, arguments: Any, raw: str | None = None) -> str:
    """The identity of a tool call: its tool's name and its arguments as
    canonical JSON (keys sorted, no spaces), or the raw text the model sent
    when that did not decode (``raw``). Two calls are "the same" when their
    keys are equal."""
    if raw is not None and not arguments:
        body = raw
    else:
        try:
            body = json.dumps(arguments if arguments is not None else {}, sort_keys=True,
                              separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            body = repr(arguments)
    return f"{name or ''}\x00{body}"


def call_text(name: str | None, arguments: Any, limit: int = 200) -> str:
    """A call as one short line for the model and the person: ``read_file {"path": "src"}``."""
    try:
        body = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        body = repr(arguments)
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    return f"{name or 'tool'} {body}"


def _first_error(content: str) -> str:
    text = " ".join((content or "").split())
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def repeat_marker(copies: int, span_chars: int) -> str:
    """The line that stands in a request for the copies of a repeated span after the first."""
    return (f" [the reply repeated this {span_chars:,}-character span {copies:,} times in a row and was "
            "stopped there; do not repeat it]")


def _cut_repeat(entry: Any) -> Any:
    rep = (entry.meta or {}).get("repeat")
    if not isinstance(rep, dict):
        return entry
    try:
        start, span, copies = int(rep["start"]), int(rep["span"]), int(rep["copies"])
    except (KeyError, TypeError, ValueError):
        return entry
    content = entry.content or ""
    if not (0 <= start and span > 0 and start + span <= len(content)):
        return entry
    return dataclasses.replace(entry, content=content[: start + span] + repeat_marker(copies, span))


def collapse_loops(entries: list[Any]) -> list[Any]:
    """An ended turn's ``entries`` (in their stored order; objects with
    ``kind``, ``content``, ``tool_name``, ``tool_call_id``, ``arguments``,
    ``meta``, as :class:`wisp.core.store.Entry`) as a request sends them,
    with the loops of the module doc collapsed. Returns a new list; the
    entries given are not changed. A result stands with its call when it is
    the next entry (the agent records a call, then its result)."""
    # the failed calls of each key, as (index of the call, index of its result)
    failed: dict[str, list[tuple[int, int]]] = {}
    for i, e in enumerate(entries):
        if e.kind != "tool_call" or i + 1 >= len(entries):
            continue
        result = entries[i + 1]
        if result.kind != "tool_result" or not (result.meta or {}).get("error"):
            continue
        failed.setdefault(call_key(e.tool_name, e.arguments), []).append((i, i + 1))
    drop: set[int] = set()
    replace: dict[int, str] = {}
    for pairs in failed.values():
        if len(pairs) < 2:
            continue
        first_call, first_result = pairs[0]
        call = entries[first_call]
        replace[first_result] = (f"[the same call failed {len(pairs)} times in this turn: "
                                 f"{call_text(call.tool_name, call.arguments)}: "
                                 f"{_first_error(entries[first_result].content)}]")
        for c, r in pairs[1:]:
            drop.update((c, r))
    if drop:  # a reply made only to introduce calls that all left goes with them
        for i, e in enumerate(entries):
            if e.kind != "reply" or not (e.meta or {}).get("before_tool_call"):
                continue
            j = i + 1
            calls = []
            while j < len(entries) and entries[j].kind in ("tool_call", "tool_result"):
                if entries[j].kind == "tool_call":
                    calls.append(j)
                j += 1
            if calls and all(c in drop for c in calls):
                drop.add(i)
    out = []
    for i, e in enumerate(entries):
        if i in drop:
            continue
        if i in replace:
            e = dataclasses.replace(e, content=replace[i], meta={**(e.meta or {}), "collapsed": True})
        elif e.kind == "reply":
            e = _cut_repeat(e)
        out.append(e)
    return out
