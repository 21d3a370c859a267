"""A reply that repeats itself: the detector that stops it while it streams.

A small model can fall into a loop and write one span again and again until
its output limit (SmolLM2 wrote 4,058 tokens of one repeated line in 258 s).
The rule is deliberately narrow, so that nothing a person wants is stopped:

- the **end** of the text (never a passage in the middle) is one span
  repeated exactly, character for character;
- the span comes at least :data:`MIN_COPIES` (3) times in a row;
- the repetition covers at least ``min_chars`` characters
  (``model.repeat_stop_chars``, 600 by default: about 150 tokens).

Code, Markdown tables and lists repeat their *structure* (``| --- |``, a
``self.`` on every line, numbered items) but not several hundred characters
character for character: a table's rows differ in their cells, a list's
items in their numbers and words. Text repeated exactly over hundreds of
characters is what a loop looks like. A loop whose copies differ (a counter
in each) is not caught here; the reply's cap (``model.max_tokens``, by
default the context's reserve) still ends it.

Spans longer than :data:`MAX_SPAN` characters are not looked for (such a
loop is ended by the cap). Pure and synchronous; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MIN_CHARS", "MAX_SPAN", "MIN_COPIES", "CHECK_EVERY", "Repeat", "find_repeat", "RepeatWatch"]

#: ``model.repeat_stop_chars``'s default (characters).
DEFAULT_MIN_CHARS = 600
#: The fewest copies of a span in a row that count as a loop.
MIN_COPIES = 3
#: The longest span looked for (characters).
MAX_SPAN = 1000
#: :class:`RepeatWatch` looks again once this many characters have come in since its last look
#: (so the cost stays small while a long reply streams; a loop runs at most this much further).
CHECK_EVERY = 48


@dataclass(frozen=True)
class Repeat:
    """A repetition at the end of a text: ``span`` (the repeated text, one
    copy), ``copies`` (whole copies in a row, at least :data:`MIN_COPIES`)
    and ``chars`` (how many characters at the end the repetition covers)."""

    span: str
    copies: int
    chars: int

    def describe(self) -> str:
        """One line for a person: ``a 42-character span, 15 times (630 characters)``."""
        shown = self.span if len(self.span) <= 40 else self.span[:39] + "…"
        return (f"{len(self.span):,}-character span {shown!r}, {self.copies:,} times in a row "
                f"({self.chars:,} characters)")


def find_repeat(text: str, min_chars: int = DEFAULT_MIN_CHARS) -> Repeat | None:
    """The repetition at the end of ``text`` by the module's rule, or ``None``.

    ``min_chars`` (characters) is the least the repetition must cover; 0 or
    less never finds one. The span found is the shortest that repeats over
    the required length; ``chars`` is the whole run of it at the end. The
    cost is bounded: only the last ``max(min_chars, MIN_COPIES × MAX_SPAN)``
    characters are read, at most :data:`MAX_SPAN` spans are tried, each a
    comparison done in C.
    """
    if min_chars <= 0 or len(text) < min_chars:
        return None
    window = max(min_chars, MIN_COPIES * MAX_SPAN)
    tail = text[-window:]
    size = len(tail)
    last = tail[-1]
    for p in range(1, MAX_SPAN + 1):
        need = max(min_chars, MIN_COPIES * p)
        if need > size:
            break
        if tail[-1 - p] != last:  # quick reject: the last character must come back one span earlier
            continue
        if tail[size - need + p:] == tail[size - need:size - p]:  # the last `need` chars have period p
            run = _run_length(tail, p, need)
            return Repeat(tail[size - p:], run // p, run)
    return None


def _run_length(tail: str, p: int, start: int) -> int:
    """How far back from the end ``tail`` keeps period ``p``, given it does over the last ``start``."""
    n = start
    size = len(tail)
    while n < size and tail[size - n - 1] == tail[size - n - 1 + p]:
        n += 1
    return n


class RepeatWatch:
    """Watches a stream of text for :func:`find_repeat`, cheaply: text is fed
    as it arrives (:meth:`feed`), and the end is looked at once at least
    :data:`CHECK_EVERY` characters came in since the last look. ``min_chars``
    as in :func:`find_repeat` (0 watches nothing).

    ``quoted`` is text the model was given (the person's prompts, tool
    results): a repetition whose whole run occurs there is the model quoting
    it (a pasted log of one line over and over, asked to be repeated back),
    not a loop of its own, and does not stop the reply; once the run grows
    past what the quoted text holds, it does."""

    def __init__(self, min_chars: int = DEFAULT_MIN_CHARS, quoted: str = "") -> None:
        self.min_chars = min_chars
        self.quoted = quoted
        self._parts: list[str] = []
        self._size = 0
        self._looked_at = 0

    def feed(self, piece: str) -> Repeat | None:
        """Take the next ``piece``; the repetition the text now ends with, if it is time to look and there is one."""
        if self.min_chars <= 0 or not piece:
            return None
        self._parts.append(piece)
        self._size += len(piece)
        if self._size < self.min_chars or self._size - self._looked_at < CHECK_EVERY:
            return None
        self._looked_at = self._size
        keep = max(self.min_chars, MIN_COPIES * MAX_SPAN)
        text = "".join(self._parts)
        if len(text) > 2 * keep:  # what lies before the window is never read again
            text = text[-keep:]
        self._parts = [text]
        found = find_repeat(text, self.min_chars)
        if found is not None and self.quoted and text[-found.chars:] in self.quoted:
            return None
        return found
