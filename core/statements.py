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

__all__ = ["DECISION", "NAMING", "CORRECTION", "UNFINISHED", "REMEMBER", "sentences", "statements",
           "states_something", "stated", "person_statements", "statement_strength", "STATEMENT_CHARS", "SCAN_CHARS", "DECIDED"]

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

#: A sentence that asks for something to be kept in mind, or sets a limit for the work.
REMEMBER = re.compile(
    r"\b(?:remember|keep in mind|note that|don'?t forget|for the record|fyi|make sure|be careful|"
    r"at most|at least|no more than|is not allowed|never)\b",
    re.IGNORECASE)
#: A sentence that says what was decided in so many words (stronger than :data:`DECISION`'s
#: "should" or "always", which prose is full of).
DECIDED = re.compile(
    r"\b(?:we(?:'ll| will| decided| agreed| chose| picked| settled)|let'?s (?:go with|use|keep|call)|decided|"
    r"agreed|go with|from now on|instead of|rather than|switched to|moved (?:to|from)|upgraded|downgraded)\b",
    re.IGNORECASE)

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
#: A sentence shorter than this (characters) states nothing worth keeping.
MIN_CHARS = 8


def sentences(text: str) -> list[str]:
    """``text``'s sentences, each on one line with its spaces collapsed."""
    return [" ".join(s.split()) for s in _SPLIT.split(text or "") if s.strip()]


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each of :func:`sentences`'s sentences lies in ``text``: ``(start, end)`` character offsets."""
    spans, at = [], 0
    for m in [*_SPLIT.finditer(text), None]:
        end = m.start() if m else len(text)
        if text[at:end].strip():
            spans.append((at, end))
        at = m.end() if m else at
    return spans


#: A quotation mark that opens a passage (at the start, or after a space, a colon or a bracket) and one
#: that closes it (before the end, a space or punctuation); an apostrophe inside a word (``file's``) is neither.
_QUOTE_OPEN = re.compile(r"(?:^|(?<=[\s:(\[—-]))[\"“'‘](?=\S)")
_QUOTE_CLOSE = re.compile(r"(?<=\S)[\"”'’](?=$|[\s.,;:!?)\]—-])")
_CLOSER = {'"': '"”', "“": "”\"", "'": "'’", "‘": "’'"}
#: A quoted span of at least this many words is a passage the person works on, not words they state.
PASSAGE_WORDS = 15


def _marks_own_words(sentence: str, at: int, passages: list[tuple[int, int]]) -> bool:
    """Whether the words of ``sentence`` (at offset ``at`` of its text) outside the quoted ``passages``
    ask for the quote to be kept or say it was decided (``Remember: "…"``, ``We agreed on this: "…"``)."""
    own = "".join(ch for i, ch in enumerate(sentence, at) if not any(a <= i < b for a, b in passages))
    return bool(REMEMBER.search(own) or DECIDED.search(own) or CORRECTION.search(own))


def quoted_passages(text: str) -> list[tuple[int, int]]:
    """The passages ``text`` quotes: ``(start, end)`` character offsets of
    each span between a quotation mark that opens and the next one of its
    kind that closes, of at least :data:`PASSAGE_WORDS` words (a draft to
    edit, a colleague's paragraph; a short quote such as a name or a value
    is not one). Pure; never raises."""
    out: list[tuple[int, int]] = []
    at = 0
    while True:
        opened = _QUOTE_OPEN.search(text, at)
        if opened is None:
            return out
        closers = _CLOSER[opened.group()]
        close = next((m for m in _QUOTE_CLOSE.finditer(text, opened.end()) if m.group() in closers), None)
        if close is None:
            return out
        if len(text[opened.end():close.start()].split()) >= PASSAGE_WORDS:
            out.append((opened.start(), close.end()))
        at = close.end()


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


#: A statement kept from the person's words is cut to this many characters (a sentence, never a paste).
STATEMENT_CHARS = 200
#: Of a prompt longer than this (characters: a paste), only the head and tail are read for statements.
SCAN_CHARS = 4_000
#: A sentence of more words than this is prose or a paste, not a statement.
MAX_STATEMENT_WORDS = 45
#: A sentence with a word longer than this (characters) is a paste (base64, a minified line), not a statement.
MAX_WORD_CHARS = 100

_QUESTION_START = re.compile(
    r"^(?:what|which|where|when|why|how|who|whom|whose|is|are|was|were|am|can|could|do|does|did|should|shall|"
    r"would|will|have|has|had|may|might|any|anything)\b", re.IGNORECASE)
#: A request to the assistant that states nothing by itself (``Read docs/x.md``, ``Run the tests``).
_REQUEST_START = re.compile(
    r"^(?:please\s+)?(?:read|run|show|open|list|explain|tell|summari[sz]e|sum up|check|look|find|search|write|"
    r"fix|add|give|help|print|try|go|carry on|continue|next|ok(?:ay)?|thanks?|thank you|hi|hello|hey|great|"
    r"good|sure|yes|no|now|then|so|and|also|let'?s see|can you|could you|would you|please)\b", re.IGNORECASE)
#: A request phrased as a suggestion (``Let's see what make build says.``, ``Let's look at x first.``).
_LOOK_START = re.compile(r"^(?:ok(?:ay)?,?\s+|so,?\s+|now,?\s+)?let'?s (?:see|look|check|try|run|read|open|start|have a look|"
                         r"find out|figure out|take a look|dig|go through)\b", re.IGNORECASE)
#: A value worth keeping: a number of two digits or more, or with a unit or separator (port 8437, 02:30,
#: 2.4.0, 12 workers), an identifier mixing letters with digits or separators (bravo-3.internal, AUTH-401,
#: src/app.py), a quoted text, or a name capitalised inside the sentence.
_VALUE = re.compile(
    r"\d[\d,.:]*\d|\b\d+\s*(?:%|[a-zA-Z]+)\b|\b[\w-]*[A-Za-z][\w-]*[._/:-][\w./:-]*\w|\b[A-Za-z]+\d\w*|"
    r"[\"“'`‘][^\"”'`’]{2,}[\"”'`’]|(?<=[a-z,;:]\s)[A-Z][\w-]+")
#: Numbers that only count steps of the talk (``step 23``, ``turn 4``), not values.
_ORDINAL = re.compile(r"\b(?:step|turn|entry|entries|part|item|point|number|no\.|#|question|page|line)\s*\d+\b",
                      re.IGNORECASE)


#: A sentence that sets a rule for the work by its first word (``Keep answers short.``, ``Use tabs.``).
_RULE_START = re.compile(r"^(?:please\s+)?(?:keep|use|prefer|avoid|stick to|stay|answer|reply|call it|name it)\b",
                         re.IGNORECASE)


#: Words a sentence may start with that are not names.
_COMMON_START = frozenset("""a an the this that these those we i you he she they it its our my your their there here
then now so and but or if when while also next first last one some all any each no not yes ok okay please
let's lets maybe just still""".split())


#: What machine output looks like inside a paste: a timestamp, a key=value pair, a log level, a JSON key.
_MACHINE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}|\b\w+=\S|\[(?:INFO|WARN|WARNING|ERROR|DEBUG)\]|"
                      r"\b(?:INFO|WARN|ERROR|DEBUG|TRACE)\b|\"\w+\"\s*:|"  # log levels in capitals only
                      r"^Traceback \(most recent call last\)|^File \"[^\"]*\", line \d+")  # a Python traceback
_PROSE_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*[,;:.!?]?$")


def _is_prose(sentence: str) -> bool:
    """Whether ``sentence`` reads as a person's words, not a line of output
    pasted with them (a log line, a config line, JSON): at least three words,
    most of them plain words, and nothing shaped like machine output."""
    words = sentence.split()
    plain = sum(1 for w in words if _PROSE_WORD.match(w))
    return len(words) >= 3 and plain >= 0.6 * len(words) and not _MACHINE.search(sentence)


def _states_a_value(sentence: str, text: str = "") -> bool:
    if _VALUE.search(_ORDINAL.sub(" ", sentence)) is not None:
        return True
    # a name at the sentence's start: capitalised, not a common first word, and never written in lower
    # case in the person's text (``Aiko owns the deploys``, not ``Small fail that code``)
    first = sentence.split(maxsplit=1)[0].strip(",;:!.") if sentence.split() else ""
    return (len(first) >= 3 and first[0].isupper() and first[1:].islower() and first.lower() not in _COMMON_START
            and re.search(r"\b" + re.escape(first.lower()) + r"\b", text) is None)


def statement_strength(sentence: str) -> int:
    """How surely ``sentence`` (one of :func:`person_statements`) states
    something to keep: 2 when it states a value (a number, an identifier,
    a quoted text or a name inside it), asks to be remembered, names, corrects or
    says what was decided in so many words (:data:`DECIDED`); 1 when it only
    sounds like a rule ("should", "always", "Keep …"). The strong are kept
    before the weak when they do not all fit."""
    strong = (_VALUE.search(_ORDINAL.sub(" ", sentence)) or REMEMBER.search(sentence) or NAMING.search(sentence)
              or DECIDED.search(sentence) or CORRECTION.search(sentence))
    return 2 if strong else 1


def person_statements(text: str, *, limit: int = STATEMENT_CHARS) -> list[str]:
    """What the person states in ``text`` (a prompt), sentence by sentence:
    facts about the work ("The service listens on port 8437."), names,
    constraints, preferences, "remember that …" and decisions (not only
    "we decided"). Questions, and requests that state nothing by themselves
    ("Read the config."), are left out, and so are sentences mostly inside a
    passage the person quotes (:func:`quoted_passages`: a draft to edit is
    not what they state), sentences of prose longer
    than :data:`MAX_STATEMENT_WORDS` words or with a word longer than
    :data:`MAX_WORD_CHARS` characters (a paste), and lines of output pasted
    with the person's words (a log line, a config line: :func:`_is_prose`).
    A sentence is kept when it
    decides, names, corrects, or asks to be remembered (:data:`DECISION`,
    :data:`NAMING`, :data:`CORRECTION`, :data:`REMEMBER`), or when it states a
    value (a number, an identifier, a quoted text or a name; step and turn
    numbers do not count). Each is whitespace-collapsed and cut to ``limit``
    characters (an ellipsis marks a cut); of a paste (over :data:`SCAN_CHARS`
    characters) only the head and tail are read, so no statement is ever a
    whole paste. In the order they come. Never raises.

    The patterns are English phrasings: a match is a reason to keep the
    sentence beside the running summary (the person said it; a model's
    summary may leave it out), never a fact on its own.
    """
    text = text or ""
    if len(text) > SCAN_CHARS:
        half = SCAN_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    out: list[str] = []
    lowered = text
    passages = quoted_passages(text)
    for start, end in _sentence_spans(text):
        # a sentence mostly inside a quoted passage is the text the person works on (a draft, a colleague's
        # words), not what they state: the turn keeps it, and the search finds it
        inside = sum(max(0, min(end, b) - max(start, a)) for a, b in passages)
        if inside * 2 >= end - start and not _marks_own_words(text[start:end], start, passages):
            continue
        s = " ".join(text[start:end].split())
        words = s.split()
        if len(s) < MIN_CHARS or len(words) > MAX_STATEMENT_WORDS or any(len(w) > MAX_WORD_CHARS for w in words):
            continue
        if s.endswith("?") or _QUESTION_START.match(s) or not _is_prose(s):
            continue
        if _LOOK_START.match(s):  # "Let's see what the build says": a request, however it starts
            continue
        marked = bool(DECISION.search(s) or NAMING.search(s) or CORRECTION.search(s) or REMEMBER.search(s)
                      or DECIDED.search(s) or _RULE_START.match(s))
        if not marked and (_REQUEST_START.match(s) or not _states_a_value(s, lowered)):
            continue
        kept = s if len(s) <= limit else s[: limit - 1].rstrip() + "…"
        if kept not in out:
            out.append(kept)
    return out
