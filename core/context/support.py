"""Whether a model-written summary is about the conversation it summarises.

A small model asked for a running summary may write about something else
entirely (SmolLM2 wrote 1,400 tokens about Docker Desktop for a conversation
that never mentioned it), and such a summary, once recorded, rides along in
every request while pushing out what was said. So before a model's summary
is used it is checked against what it was given, with no model call: the
share of its content words and identifiers that occur in the turns it covers
(with the summary so far, the task and the facts it was shown). A summary
below :data:`SUPPORT_MIN` is dropped and wisp's own summary stands in its
place (:mod:`wisp.core.context.summariser`).

Words are compared by a crude stem (lower case, the first
:data:`STEM_CHARS` characters of a long word), so that a faithful
paraphrase ("decided", "decision") is supported; the words any summary
uses about a conversation ("person", "asked", "discussed") and common
English words count neither way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .coverage import extract_items

__all__ = ["Support", "support", "SUPPORT_MIN", "MIN_WORDS"]

#: A model's summary with less than this share of its content words (and identifiers) found in
#: what it summarises is not about the conversation: it is dropped.
SUPPORT_MIN = 0.5
#: A summary of fewer content words than this is too short to judge: it is taken as it is.
MIN_WORDS = 8
#: Words are compared by their first this many characters (a stem good enough for English).
STEM_CHARS = 6

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
#: Common English words and the words every summary uses about a conversation: neither support nor
#: contradict a summary.
_STOP = frozenset("""
the and for are but not you all any can had her was one our out day get has him his how man new now old see
two way who boy did its let put say she too use that with this from they will would there their what when
which where been have were into more than then them these those some such only also very just over about
after before again could should might must shall your yours ours hers mine each every both either neither
other another same while until because since though although however therefore thus here what's it's
person persons people asked asks ask assistant user conversation summary summaries discussed discuss said
says told tell mentioned mention noted note notes turn turns entry entries decided decide decision
decisions open still found find finds looked look looks wanted want wants need needs needed question
questions answer answered answers reply replied replies request requested requests agreed agree talked
talk explained explain provided provide gave give given made make makes working work works worked things
thing something anything nothing everything well much many most less least first last next later earlier
""".split())


@dataclass(frozen=True)
class Support:
    """How much of a summary its sources hold: ``words`` (content words and
    identifiers counted), ``found`` (of them, found in the sources),
    ``share`` (found ÷ words; 1.0 when too few to judge) and ``unknown``
    (some of the words not found, for the reason shown to the person)."""

    words: int
    found: int
    unknown: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.found / self.words if self.words >= MIN_WORDS else 1.0

    @property
    def supported(self) -> bool:
        """True when the summary may be used (:data:`SUPPORT_MIN`)."""
        return self.share >= SUPPORT_MIN

    def reason(self, *, words: bool = False) -> str:
        """One clause saying why an unsupported summary was dropped; with
        ``words``, some of the words the turns do not hold (for the person's
        notice, not for the summary the model reads: they would bring the
        invented topic back into the request)."""
        shown = ", ".join(self.unknown[:6]) if words else ""
        return (f"only {self.found} of its {self.words} content words occur in the turns it covers "
                f"({int(self.share * 100)}%, at least {SUPPORT_MIN:.0%} needed)" + (f"; it spoke of {shown}" if shown else ""))


def _stem(word: str) -> str:
    w = word.lower().strip("'-")
    return w[:STEM_CHARS] if len(w) > STEM_CHARS else w


def _content_words(text: str) -> list[str]:
    return [w for w in (_stem(m.group(0)) for m in _WORD.finditer(text or "")) if w not in _STOP and len(w) >= 3]


def support(summary: str, sources: str) -> Support:
    """How far ``summary`` (a model's text) is supported by ``sources``
    (the text it summarises): each distinct content word's stem and each
    identifier (:func:`~wisp.core.context.coverage.extract_items`) of the
    summary counts once, and is found when the sources hold it. Pure;
    linear in the texts."""
    have = set(_content_words(sources))
    low = (sources or "").lower()
    seen: dict[str, str] = {}  # stem: the word as the summary wrote it first
    for m in _WORD.finditer(summary or ""):
        stem = _stem(m.group(0))
        if stem not in _STOP and len(stem) >= 3:
            seen.setdefault(stem, m.group(0).strip("'-"))
    words = list(seen)
    found = sum(1 for w in words if w in have)
    unknown = [seen[w] for w in words if w not in have]
    items = sorted({i.text for i in extract_items(summary or "")})
    found += sum(1 for i in items if i.lower() in low)
    unknown += [i for i in items if i.lower() not in low]
    return Support(len(words) + len(items), found, tuple(unknown))
