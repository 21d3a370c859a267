"""What a person's words state: a decision, a name, a correction, unfinished work.

One place for these patterns (issues "Compaction you can see and trust" and
"The model's own bookkeeping"): the running summary keeps the person's own
statements of decisions when the model's summary leaves them out
(:mod:`wisp.core.context.summariser`); the fact distiller makes no side call
for a turn that states nothing of the kind (:mod:`wisp.core.context.bookkeeping`:
"the distiller first checks the prompt and reply for a statement of a
decision, preference or name, with no model"); and refinement retries a batch
whose requests state a decision, a correction or unfinished work before an
empty answer counts as nothing (:mod:`wisp.core.episodes.refine`). A leaf: it
knows no part of wisp.

The patterns are English phrasings; they find statements, they do not
understand them, so a match is a reason to keep or to ask again, never a
fact on its own.
"""

from __future__ import annotations

import re

__all__ = ["DECISION", "NAMING", "CORRECTION", "UNFINISHED", "sentences", "statements",
           "states_something", "stated"]

#: A sentence that says what was decided, preferred or ruled out.
DECISION = re.compile(
    r"\b(?:we(?:'ll| will| shall| decided| agreed| are going to|'re going to)|let'?s|let us|decided|agreed|"
    r"go with|from now on|always|never|don'?t|do not|must|should|prefer|instead of|use \S+ for|keep \S+ in)\b",
    re.IGNORECASE)
#: A sentence that names something (a codename, what a thing is called).
NAMING = re.compile(r"\b(?:called|named|codenamed?|code name|is known as|stands for)\b", re.IGNORECASE)
#: A sentence that corrects something said before.
CORRECTION = re.compile(
    r"\b(?:actually|correction|i meant|that'?s (?:wrong|not right|incorrect)|was wrong|is wrong|not \w+ but|"
    r"rather than|no,|scratch that|change (?:it|that) to|instead)\b", re.IGNORECASE)
#: A sentence that leaves work for later, or says it failed.
UNFINISHED = re.compile(
    r"\b(?:todo|to do|later|tomorrow|next (?:time|week|step)|not (?:yet|done|finished)|still (?:need|have|to)|"
    r"unfinished|remaining|left to|pending|follow up|remind me|failed|broken|blocked)\b", re.IGNORECASE)

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
#: A sentence shorter than this (characters) states nothing worth keeping.
MIN_CHARS = 8


def sentences(text: str) -> list[str]:
    """``text``'s sentences, each on one line with its spaces collapsed."""
    return [" ".join(s.split()) for s in _SPLIT.split(text or "") if s.strip()]


def statements(text: str, *, limit: int = 240) -> list[str]:
    """The sentences of ``text`` that decide, prefer or name something
    (:data:`DECISION`, :data:`NAMING`), whitespace collapsed, each cut to
    ``limit`` characters (an ellipsis marks a cut)."""
    out = []
    for s in sentences(text):
        if len(s) >= MIN_CHARS and (DECISION.search(s) or NAMING.search(s)):
            out.append(s if len(s) <= limit else s[: limit - 1].rstrip() + "…")
    return out


def states_something(*texts: str) -> bool:
    """Whether any of ``texts`` holds a statement worth keeping (:func:`statements`)."""
    return any(statements(t) for t in texts)


def stated(text: str) -> list[tuple[str, str]]:
    """What ``text`` states, as ``(kind, sentence)`` pairs, kind ``decision``,
    ``correction`` or ``unfinished`` (a sentence counts once, as the first
    kind it matches)."""
    out: list[tuple[str, str]] = []
    for s in sentences(text):
        if len(s) < MIN_CHARS:
            continue
        for kind, pattern in (("decision", DECISION), ("correction", CORRECTION), ("unfinished", UNFINISHED)):
            if pattern.search(s):
                out.append((kind, s))
                break
    return out
