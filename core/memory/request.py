"""The memory tool's one argument, ``request``, parsed into a verb and its target.

Rules (wisp-memory-tool.txt, "Arguments", "recall", "summarise", "condense",
"note", "task"; issue 4, "Verbs"):

- The first word is the verb: ``recall``, ``note`` (``remember`` is taken as
  note), ``task``, ``summarise`` (or ``summarize``), ``condense``, and the
  episodic ``memories`` (issue "Episodic memory"). A request with no verb is
  a recall, so ``entry 7`` alone works.
- A recall target is ``entry N``, ``turn N``, ``task``, ``fact NAME``,
  ``summary`` or ``summary vN``, or a memory reference ``MEM-000001``; a
  page after the first adds ``from line K`` (for a turn, ``from entry E`` or
  ``from entry E line K``; for the summary, ``from line K``).
- Words that name no target are a search of the conversation's own record
  (``recall port 8437``, ``recall gateway error``, bare ``port 8437``, or
  ``search port 8437``): the reference says a request with no verb is a
  recall, and a recall of words finds where they were said. Its next page
  adds ``from hit K``. A request that starts like a target (``entry``,
  ``turn`` without a number) stays an error saying how to write one, so a
  target is never read as a search.
- ``note SUBJECT NAME = VALUE``; also ``SUBJECT: NAME = VALUE`` and
  ``SUBJECT NAME: VALUE`` with no ``=``. Quotes around the value are dropped.
- ``task THE TASK; objective: WHAT DONE LOOKS LIKE`` (also ``. Objective:``
  and ``, objective:``), kept as one value and cut to 300 characters;
  ``task`` alone recalls the task.
- ``summarise entry N`` or ``summarise output ID``, with ``overview`` after it
  for the overview.
- ``condense entry N: QUESTION``.

A request the model wrote badly is never an exception for the caller:
:func:`parse_request` raises only :class:`RequestError`, whose ``line`` is
the one line to answer with, starting ``error:`` (and saying what to write,
with an example the model can copy) or ``memory:``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..context.facts import FactError
from ..context.task import parse_task
from ..text import search_words

__all__ = [
    "SUBJECTS",
    "NAMED_SUBJECTS",
    "UNNAMED_SUBJECTS",
    "NOTE_EXAMPLE",
    "VERBS",
    "Target",
    "Request",
    "RequestError",
    "parse_request",
    "parse_note",
    "parse_task_value",
]

#: Subject kinds the model may note (those of facts; issue "Layered context").
SUBJECTS: tuple[str, ...] = ("task", "decision", "preference", "entity", "tests", "workdir", "branch")
#: Subjects whose facts must say which one they are (``entity release codename``).
NAMED_SUBJECTS: tuple[str, ...] = ("entity", "decision")
#: Subjects with a single value and no name.
UNNAMED_SUBJECTS: tuple[str, ...] = ("task", "workdir", "branch")
#: The example every note error ends with (reference, "note").
NOTE_EXAMPLE = "note entity release codename = BLUE HERON"
#: The example of a recall.
RECALL_EXAMPLE = "recall entry 7"
#: The verbs, with the words taken as each.
VERBS: dict[str, str] = {
    "recall": "recall", "note": "note", "remember": "note", "task": "task",
    "summarise": "summarise", "summarize": "summarise", "condense": "condense",
    "memories": "memories",
}

_TASK_FORM = "error: write task THE TASK; objective: WHAT DONE LOOKS LIKE"
_RECALL_FORM = ("error: write recall entry N, recall turn N, recall task, recall fact NAME, "
                "recall summary, or recall WORDS to search for them, such as recall entry 7")
_SUMMARISE_FORM = ("error: write summarise entry N (or summarise entry N overview), "
                   "such as summarise entry 7")
_CONDENSE_FORM = "error: write condense entry N: QUESTION, such as condense entry 7: why did the link step fail"

_QUOTES = "\"'`“”‘’"
_NUMBER = r"#?(\d{1,12})"
_ENTRY = re.compile(rf"^(?:the\s+)?(?:output\s+of\s+)?(?:entry|entries|output\s+of\s+entry)\s*{_NUMBER}\b\s*(.*)$",
                    re.IGNORECASE)
_BARE_NUMBER = re.compile(rf"^{_NUMBER}\b\s*(.*)$")
_TURN = re.compile(rf"^(?:the\s+)?turn\s*{_NUMBER}\b\s*(.*)$", re.IGNORECASE)
#: ``output 7`` (a short decimal number) is taken as entry 7; output ids are 8+ hex digits.
_OUTPUT_NUMBER = re.compile(r"^output\s+#?(\d{1,7})\b\s*(.*)$", re.IGNORECASE)
_OUTPUT = re.compile(r"^output\s+([0-9a-f]{4,64})\b\s*(.*)$", re.IGNORECASE)
_SUMMARY = re.compile(r"^(?:the\s+)?(?:running\s+)?summary(?:\s*(?:v|version\s*)(\d{1,9}))?\b\s*(.*)$",
                      re.IGNORECASE)
_FACT = re.compile(r"^(?:the\s+)?facts?\b\s*:?\s*(.*)$", re.IGNORECASE)
_TASK_TARGET = re.compile(r"^(?:the\s+)?task\b\s*(.*)$", re.IGNORECASE)
_MEM = re.compile(r"^\[?(MEM-\d{1,18})\]?\b\s*(.*)$", re.IGNORECASE)
_FROM_LINE = re.compile(r"^(?:,\s*)?(?:from\s+)?(?:line|lines|l)\s*#?(\d{1,12})(?:\s*[-–]\s*\d{1,12})?\s*$",
                        re.IGNORECASE)
#: The words of a search, and the first hit of a later page (``port 8437 from hit 4``).
_SEARCH = re.compile(r"^(.*?)\s*,?\s*\bfrom\s+hit\s*#?(\d{1,9})\s*$", re.IGNORECASE)
#: Words that start a search as its verb (``search port 8437``).
SEARCH_VERBS = ("search", "find", "grep")
#: A request whose first word is one of these means a target: without its number it is an error, not a search.
_TARGET_WORDS = ("entry", "entries", "turn", "turns")
_FROM_ENTRY = re.compile(rf"^(?:,\s*)?from\s+entry\s*{_NUMBER}(?:\s*,?\s*(?:from\s+)?line\s*#?(\d{{1,12}}))?\s*$",
                         re.IGNORECASE)


class RequestError(ValueError):
    """A request the tool cannot act on. ``line`` is the whole answer: one
    line starting ``error:`` (a malformed request, with the form to write)
    or ``memory:`` (a well-formed request for nothing)."""

    def __init__(self, line: str, *, verb: str | None = None, target: "Target | None" = None,
                 failure: str | None = None):
        """``verb`` and ``target``: what the request was recognisably about, when it
        said that much (``condense entry 7`` with no question), so that its audit
        event can name them; ``failure``: the failure in a word for the event."""
        super().__init__(line)
        self.line = line
        self.verb = verb
        self.target = target
        self.failure = failure


@dataclass(frozen=True)
class Target:
    """What a recall, summarise or condense is about.

    ``kind`` is ``entry``, ``turn``, ``task``, ``fact``, ``summary``,
    ``output`` (a stored output named by its id), ``episode`` (a memory
    ``MEM-000001``) or ``search`` (words of the conversation's record).
    ``number`` is the entry, turn or summary version (``None`` for the
    latest summary); ``name`` the fact's name, the output's id, the memory
    reference or the search's words; ``from_line`` the first line of the
    page (1-based, ``None`` for the first page); ``from_entry`` the first
    entry of a turn's page; ``from_hit`` the first hit of a search's page
    (1-based, ``None`` for the first).
    """

    kind: str
    number: int | None = None
    name: str | None = None
    from_line: int | None = None
    from_entry: int | None = None
    from_hit: int | None = None

    def phrase(self) -> str:
        """The target as a request writes it (``entry 4``, ``fact ci``)."""
        if self.kind in ("entry", "turn"):
            return f"{self.kind} {self.number}"
        if self.kind == "summary":
            return f"summary v{self.number}" if self.number else "summary"
        if self.kind == "fact":
            return f"fact {self.name}"
        if self.kind in ("output",):
            return f"output {self.name}"
        if self.kind in ("episode", "search"):
            return str(self.name)
        return self.kind


@dataclass(frozen=True)
class Request:
    """A parsed request.

    ``verb``: ``recall``, ``note``, ``task``, ``summarise``, ``condense`` or
    ``memories``; ``raw``: the request as given; ``target`` (recall,
    summarise, condense); for a note ``subject``, ``name`` (``""`` for none)
    and ``value``; for a task ``value`` (``THE TASK; objective: …``, at most
    300 characters); ``overview`` for ``summarise … overview``; ``question``
    for condense; ``query`` for ``memories``.
    """

    verb: str
    raw: str
    target: Target | None = None
    subject: str | None = None
    name: str | None = None
    value: str | None = None
    overview: bool = False
    question: str | None = None
    query: str | None = None


def _strip_quotes(text: str) -> str:
    t = text.strip()
    while len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES:
        t = t[1:-1].strip()
    return t


def _clean(text: str) -> str:
    """The request with whitespace collapsed, and a copied ``memory "…"``
    wrapper and surrounding quotes removed."""
    t = " ".join(str(text or "").split())
    t = _strip_quotes(t)
    m = re.match(r"^memory\s*[:(]?\s*(.*?)\s*\)?$", t, re.IGNORECASE)
    if m and m.group(1) and m.group(1)[0] in _QUOTES:
        t = _strip_quotes(m.group(1))
    elif m and m.group(1) and re.match(r"^(recall|note|remember|task|summari[sz]e|condense)\b",
                                        m.group(1), re.IGNORECASE):
        t = m.group(1)
    return t.strip()


def parse_request(text: str, subjects: tuple[str, ...] = SUBJECTS) -> Request:
    """Parse the memory tool's ``request`` argument (see the module doc).

    ``subjects`` are the subject kinds the model may note. Returns a
    :class:`Request`; raises :class:`RequestError` (never anything else) for
    a request that cannot be acted on.
    """
    try:
        return _parse(text, subjects)
    except RequestError:
        raise
    except Exception:  # a bug here must still give the model a line to act on
        raise RequestError(_RECALL_FORM) from None


def _parse(text: str, subjects: tuple[str, ...]) -> Request:
    raw = str(text if text is not None else "")
    cleaned = _clean(raw)
    if not cleaned:
        raise RequestError("error: the request is empty; write a verb and what it is about, such as "
                           f"{RECALL_EXAMPLE} or {NOTE_EXAMPLE}")
    first, _, rest = cleaned.partition(" ")
    word = first.lower().rstrip(":,.;!?")
    rest = rest.strip()
    if first.endswith(":") or rest.startswith(":"):
        rest = rest.lstrip(": ").strip()
    verb = VERBS.get(word)
    if verb is None and word in SEARCH_VERBS and rest:
        return Request("recall", raw, target=_search_target(rest))
    if verb is None:
        # No verb: a recall of the whole request ("entry 7").
        try:
            return Request("recall", raw, target=_recall_target(cleaned))
        except RequestError:
            if _ENTRY.match(cleaned) or _TURN.match(cleaned) or word in _TARGET_WORDS \
                    or not search_words(cleaned):
                raise
            raise RequestError(f"error: {first!r} is not a verb of memory; start with recall, note, task, "
                               f"summarise, condense or memories, such as {RECALL_EXAMPLE} or "
                               f"{NOTE_EXAMPLE}") from None
    if verb == "recall":
        if not rest:
            raise RequestError(_RECALL_FORM)
        return Request("recall", raw, target=_recall_target(rest))
    if verb == "note":
        subject, name, value = parse_note(rest, subjects)
        if subject == "task":
            return Request("task", raw, value=parse_task_value(value))
        return Request("note", raw, subject=subject, name=name, value=value)
    if verb == "task":
        body = rest.strip().strip(".?!").strip()
        if not body or body.lower() in ("recall", "show", "current", "?"):
            return Request("recall", raw, target=Target("task"))
        return Request("task", raw, value=parse_task_value(rest))
    if verb == "summarise":
        target, tail = _summarise_target(rest)
        words = [w for w in re.split(r"[\s,;:.]+", tail.lower()) if w]
        overview = "overview" in words
        if any(w not in ("overview", "notable", "lines", "the", "an", "please") for w in words):
            raise RequestError(_SUMMARISE_FORM)
        return Request("summarise", raw, target=target, overview=overview)
    if verb == "condense":
        target, question = _condense_target(rest)
        return Request("condense", raw, target=target, question=question)
    if verb == "memories":
        return Request("memories", raw, query=rest)
    raise RequestError(_RECALL_FORM)  # pragma: no cover - every verb is handled above


def _recall_target(text: str) -> Target:
    """A recall target from ``text`` (no verb). Raises :class:`RequestError`."""
    t = text.strip().strip(".?!").strip()
    if not t:
        raise RequestError(_RECALL_FORM)
    first, _, rest = t.partition(" ")
    if first.lower() in SEARCH_VERBS and rest.strip():  # "recall search port 8437"
        return _search_target(rest)
    m = _MEM.match(t)
    if m and not m.group(2):
        return Target("episode", name=m.group(1).upper())
    m = _ENTRY.match(t) or _OUTPUT_NUMBER.match(t)
    if m:
        return Target("entry", number=int(m.group(1)), from_line=_from_line(m.group(2)))
    m = _BARE_NUMBER.match(t)
    if m:  # "7" alone is entry 7, "7 from line 60" its next page; "8437 port" is words to look for
        tail = m.group(2).strip()
        if not tail or _FROM_LINE.match(tail):
            return Target("entry", number=int(m.group(1)), from_line=_from_line(tail))
        return _search_target(t)
    if re.fullmatch(r"#?\d+", t):  # a number alone names an entry, even one too long to be one
        raise RequestError(_RECALL_FORM)
    m = _TURN.match(t)
    if m:
        tail = m.group(2).strip()
        if not tail:
            return Target("turn", number=int(m.group(1)))
        fe = _FROM_ENTRY.match(tail)
        if fe:
            return Target("turn", number=int(m.group(1)), from_entry=int(fe.group(1)),
                          from_line=int(fe.group(2)) if fe.group(2) else None)
        raise RequestError(f"error: write recall turn {m.group(1)}, or for its next page recall turn "
                           f"{m.group(1)} from entry N")
    m = _OUTPUT.match(t)
    if m:
        return Target("output", name=m.group(1).lower(), from_line=_from_line(m.group(2)))
    m = _SUMMARY.match(t)
    if m:
        tail = m.group(2).strip()
        if tail and not _FROM_LINE.match(tail):
            raise RequestError("error: write recall summary, or recall summary v2 for an earlier version "
                               "(recall summary v2 from line K for its next page)")
        return Target("summary", number=int(m.group(1)) if m.group(1) else None, from_line=_from_line(tail))
    m = _TASK_TARGET.match(t)
    if m and not m.group(1).strip():
        return Target("task")
    m = _FACT.match(t)
    if m:
        name = _strip_quotes(m.group(1).strip())
        if not name:
            raise RequestError("error: say which fact, such as recall fact codename")
        return Target("fact", name=name)
    if t.split(maxsplit=1)[0].lower().rstrip(":,.;") in _TARGET_WORDS:
        raise RequestError(_RECALL_FORM)  # "entry seven": a target written wrong, not words to look for
    return _search_target(t)


def _search_target(text: str) -> Target:
    """A search of ``text``'s words (``… from hit K`` names a later page).
    Raises :class:`RequestError` when it holds no word to look for."""
    t = _strip_quotes(text.strip().strip(".?!").strip())
    m = _SEARCH.match(t)
    from_hit = None
    if m and search_words(m.group(1)):
        t, from_hit = _strip_quotes(m.group(1)), max(1, int(m.group(2)))
    if not search_words(t):
        raise RequestError(_RECALL_FORM)
    return Target("search", name=t, from_hit=from_hit)


def _from_line(tail: str) -> int | None:
    tail = (tail or "").strip()
    if not tail:
        return None
    m = _FROM_LINE.match(tail)
    if not m:
        raise RequestError("error: write recall entry N, or for a later page recall entry N from line K, "
                           "such as recall entry 7 from line 60")
    return max(1, int(m.group(1)))


def _output_target(text: str) -> tuple[Target, str]:
    """``entry N …`` or ``output ID …`` at the start of ``text``: the target and the rest."""
    t = text.strip()
    m = _ENTRY.match(t) or _BARE_NUMBER.match(t) or _OUTPUT_NUMBER.match(t)
    if m:
        return Target("entry", number=int(m.group(1))), m.group(2)
    m = _OUTPUT.match(t)
    if m:
        return Target("output", name=m.group(1).lower()), m.group(2)
    raise ValueError(t)


def _summarise_target(text: str) -> tuple[Target, str]:
    try:
        return _output_target(text)
    except ValueError:
        raise RequestError(_SUMMARISE_FORM) from None


def _condense_target(text: str) -> tuple[Target, str]:
    try:
        target, tail = _output_target(text)
    except ValueError:
        raise RequestError(_CONDENSE_FORM) from None
    question = _strip_quotes(tail.strip().lstrip(":-—,;").strip())
    if not question:
        raise RequestError(_CONDENSE_FORM, verb="condense", target=target, failure="no question")
    return target, question


def parse_note(text: str, subjects: tuple[str, ...] = SUBJECTS) -> tuple[str, str, str]:
    """``SUBJECT NAME = VALUE`` (or ``SUBJECT: NAME = VALUE``, or ``SUBJECT
    NAME: VALUE``) → ``(subject, name, value)``; ``name`` is ``""`` for a
    subject that has none. Quotes around the name and value are dropped.

    Raises :class:`RequestError` with the reference document's error lines:
    an unknown subject (naming the subjects), a named subject without its
    name, or no recognisable form.
    """
    example = NOTE_EXAMPLE
    t = " ".join((text or "").split())
    form_error = RequestError(f"error: write note SUBJECT NAME = VALUE, such as {example}")
    if not t:
        raise form_error
    m = re.match(r"^([^\s:=]+)\s*(:)?\s*(.*)$", t)
    if not m:
        raise form_error
    word = _strip_quotes(m.group(1)).lower()
    subject = word[:-1] if word.endswith("s") and word[:-1] in subjects and word not in subjects else word
    colon, rest = m.group(2), m.group(3)
    if subject not in subjects:
        shown = subject[:40] or "(none)"
        raise RequestError(f"error: no subject {shown} to note; use one of {', '.join(subjects)}, "
                           f"such as {example}")
    if "=" in rest:
        name, _, value = rest.partition("=")
    elif colon and ":" not in rest:
        name, value = "", rest
    elif ":" in rest:
        name, _, value = rest.partition(":")
    elif subject in UNNAMED_SUBJECTS or subject == "task":
        name, value = "", rest
    else:
        raise form_error
    name = _strip_quotes(name.strip(" :"))
    value = _strip_quotes(value)
    if not value:
        raise form_error
    if subject in NAMED_SUBJECTS and not name:
        raise RequestError(f"error: say which {subject} it is before the =, such as {example}")
    if subject in UNNAMED_SUBJECTS:
        name = ""
    return subject, name, value


def parse_task_value(text: str) -> str:
    """The task's value from ``THE TASK; objective: WHAT DONE LOOKS LIKE``:
    :func:`wisp.core.context.task.parse_task`, the one parser of a task.
    Raises :class:`RequestError` when there is no task before the objective."""
    try:
        return parse_task(text)
    except FactError:
        raise RequestError(_TASK_FORM) from None
