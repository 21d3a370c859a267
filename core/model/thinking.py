"""Separate ``<think>…</think>`` reasoning from a streamed reply.

Some models write their reasoning into the content itself, wrapped in
``<think>`` and ``</think>``. The tags can be split across stream chunks
(``"<thi"`` then ``"nk>"``), so :class:`ThinkSplitter` keeps back any tail of a
chunk that could be the start of a tag until the next chunk says what it is.

Usage::

    splitter = ThinkSplitter()
    for chunk in chunks:
        for event in splitter.feed(chunk):   # StreamText | StreamThinking
            ...
    for event in splitter.flush():           # at the end of the stream
        ...

Rules (kept deliberately small):

* text outside the tags is :class:`StreamText`, text inside is :class:`StreamThinking`;
* tags do not nest; a ``<think>`` inside thinking is plain thinking text;
* whitespace right after ``</think>`` (the blank line models put before the
  answer) is dropped, so the reply does not start with empty lines;
* at :meth:`flush`, a held-back partial tag is released as ordinary text of
  the current kind, and an unclosed ``<think>`` simply ends.

The result never depends on how the input was split into chunks.
"""

from __future__ import annotations

from .base import StreamText, StreamThinking


def after_tag(text: str, stripping: bool) -> tuple[str, bool]:
    """Text shown right after a tag the reader hid (``</think>``, a prompted
    tool block): with ``stripping``, its leading whitespace goes, until a
    piece with something else in it comes. Returns the text to show and
    whether to go on stripping. One rule for the think splitter and the
    prompted protocol's parser."""
    if not stripping:
        return text, False
    stripped = text.lstrip()
    return stripped, not stripped

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def _partial_tag_len(buf: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``buf`` ends with (chars)."""
    if buf.rfind("<", max(0, len(buf) - len(tag) + 1)) < 0:  # no "<" near the end: no tag can start there
        return 0
    for n in range(min(len(tag) - 1, len(buf)), 0, -1):
        if buf.endswith(tag[:n]):
            return n
    return 0


class ThinkSplitter:
    """A streaming splitter for ``<think>…</think>``. Not thread-safe; one per reply.

    ``in_thinking`` says whether the text seen so far ends inside a think block.
    """

    def __init__(self) -> None:
        self.in_thinking = False
        self._buf = ""
        self._strip_ws = False  # just after </think>: drop leading whitespace

    def feed(self, chunk: str) -> list[StreamText | StreamThinking]:
        """Take the next piece of content; return the events it completes (maybe none)."""
        if not chunk:
            return []
        self._buf += chunk
        out: list[StreamText | StreamThinking] = []
        while self._buf:
            tag = CLOSE_TAG if self.in_thinking else OPEN_TAG
            idx = self._buf.find(tag)
            if idx >= 0:
                self._emit(self._buf[:idx], out)
                self._buf = self._buf[idx + len(tag) :]
                self.in_thinking = not self.in_thinking
                self._strip_ws = not self.in_thinking
                continue
            keep = _partial_tag_len(self._buf, tag)
            self._emit(self._buf[: len(self._buf) - keep], out)
            self._buf = self._buf[len(self._buf) - keep :]
            break
        return out

    def flush(self) -> list[StreamText | StreamThinking]:
        """End of stream: release whatever is held back. The splitter is reset afterwards."""
        out: list[StreamText | StreamThinking] = []
        self._emit(self._buf, out)
        self._buf = ""
        self.in_thinking = False
        self._strip_ws = False
        return out

    def _emit(self, text: str, out: list[StreamText | StreamThinking]) -> None:
        if self.in_thinking:
            if text:
                out.append(StreamThinking(text))
            return
        text, self._strip_ws = after_tag(text, self._strip_ws)
        if text:
            out.append(StreamText(text))


def split_thinking(text: str) -> tuple[str, str]:
    """Split a whole string at once: returns ``(reply_text, thinking_text)``."""
    splitter = ThinkSplitter()
    events = splitter.feed(text) + splitter.flush()
    reply = "".join(e.text for e in events if isinstance(e, StreamText))
    thinking = "".join(e.text for e in events if isinstance(e, StreamThinking))
    return reply, thinking
