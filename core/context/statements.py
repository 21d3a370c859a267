"""Statements worth keeping: the sentences in which a person (or a reply) decides, prefers or names something.

One rule, read with no model, that the running summary's completion (the
person's own words it keeps) and the fact distiller's gate (no side call
when a turn stated nothing of the kind) both use (issue "The model's own
bookkeeping": "the distiller first checks the prompt and reply for a
statement of a decision, preference or name, with no model").
"""

from __future__ import annotations

import re

__all__ = ["DECISION", "NAMING", "statements", "states_something"]

#: A sentence that decides, agrees, rules out or prefers.
DECISION = re.compile(
    r"\b(?:we(?:'ll| will| shall| decided| agreed| are going to|'re going to)|let'?s|let us|decided|agreed|"
    r"go with|from now on|always|never|don'?t|do not|must|should|prefer|instead of|use \S+ for|keep \S+ in)\b",
    re.IGNORECASE)
#: A sentence that names something (a codename, what a thing is called).
NAMING = re.compile(r"\b(?:called|named|codenamed?|code name|is known as|stands for)\b", re.IGNORECASE)

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def statements(text: str, *, limit: int = 240) -> list[str]:
    """The sentences of ``text`` that decide, prefer or name something
    (:data:`DECISION`, :data:`NAMING`), whitespace collapsed, each cut to
    ``limit`` characters."""
    out = []
    for sentence in _SPLIT.split(text or ""):
        s = " ".join(sentence.split())
        if len(s) >= 8 and (DECISION.search(s) or NAMING.search(s)):
            out.append(s if len(s) <= limit else s[: limit - 1].rstrip() + "…")
    return out


def states_something(*texts: str) -> bool:
    """Whether any of ``texts`` holds a statement worth keeping."""
    return any(statements(t) for t in texts)
