"""An entry written to the store while its text streams in.

Issue "Nothing runs, leaks, hangs or is lost that shouldn't be", "Nothing is
lost": a reply, its thinking and a command's output are written to the store
as they stream, in batches of at most about a second, so that a crash
(``kill -9``) leaves what had arrived; the reopened conversation shows it,
marked stopped (:meth:`wisp.core.store.Store.recover_open_turns` marks the
entries it finds still ``streaming`` as partial).

:class:`StreamedEntry` creates the entry at the first piece (``meta`` has
``"streaming": true``), rewrites its content in place at most once every
:data:`WRITE_INTERVAL_S` seconds while pieces arrive (a small task of its
own does it, so a stream that pauses is still written), and
:meth:`StreamedEntry.finish` writes the final content and meta and drops
the ``streaming`` flag. Cost: one write to create, at most one a second
while streaming, one to finish; each rewrite carries the text so far (a
command's streamed output is capped by ``tools.run_command.max_output_bytes``).

The entry's audit event is written when it ends (by the agent, with its
whole content). One a crash cut short never ended: :func:`recover_open_turns`,
which the next wisp runs on start-up, stops the turns a dead process left
open and writes the audit events their streamed entries never got (the text
the store had, marked partial, reason ``exited``), and the turn's
``turn.ended``, so the audit log holds what was streamed before the kill too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .store import RECOVERED_ERROR
from .transactions import to_the_end

__all__ = ["StreamedEntry", "WRITE_INTERVAL_S", "STREAMING", "AUDIT_KINDS", "recover_open_turns"]

#: Seconds between two writes of a streaming entry: what a crash can lose at most.
WRITE_INTERVAL_S = 1.0
#: The meta key of an entry still being written as it streams.
STREAMING = "streaming"
#: The audit event kind of each entry kind that streams, as the agent writes it when the entry ends.
AUDIT_KINDS = {"reply": "response", "thinking": "thinking", "tool_result": "tool.result"}


class StreamedEntry:
    """One entry of ``kind`` in a turn, written as its text arrives.

    ``store`` is a :class:`wisp.core.store.Store`; ``conversation`` and
    ``turn_id`` say where the entry goes; ``fields`` are given to
    :meth:`~wisp.core.store.Store.add_entry` (``tool_name``,
    ``tool_call_id``); ``interval`` is the seconds between two writes while
    streaming (default :data:`WRITE_INTERVAL_S`). :meth:`add` takes each piece; :meth:`finish` ends it. A write
    made while streaming that fails (the store is closing) stops the
    streaming writes, never the turn; :meth:`finish` raises what the store
    raises.
    """

    def __init__(self, store: Any, conversation: int, turn_id: int, kind: str, *,
                 interval: float | None = None, **fields: Any) -> None:
        self.store = store
        self.conversation = conversation
        self.turn_id = turn_id
        self.kind = kind
        self.fields = fields
        self.interval = WRITE_INTERVAL_S if interval is None else interval
        self.entry: Any = None  # the stored Entry once created
        self.writes = 0  # store writes made (created, rewritten, finished): for tests and measurements
        self._parts: list[str] = []
        self._dirty = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    @property
    def text(self) -> str:
        """Everything that has arrived so far."""
        return "".join(self._parts)

    async def add(self, piece: str) -> None:
        """Take the next piece of text. The first creates the entry (awaited
        to its end even if the caller is cancelled meanwhile, so its id is
        known to :meth:`finish`); later ones are written by the entry's own
        task, at most once per ``interval``."""
        if not piece:
            return
        self._parts.append(piece)
        if self.entry is None:
            await to_the_end(self._create())
        else:
            self._dirty.set()

    async def _create(self) -> None:
        if self.entry is not None:
            return
        count = len(self._parts)
        self.entry = await self.store.add_entry(self.conversation, self.turn_id, self.kind,
                                                "".join(self._parts[:count]),
                                                meta={STREAMING: True}, **self.fields)
        self.writes += 1
        if len(self._parts) > count:
            self._dirty.set()
        self._writer = asyncio.ensure_future(self._write_batches())

    async def _write_batches(self) -> None:
        """Rewrite the entry's content with the text so far, at most once per interval."""
        try:
            while True:
                await asyncio.sleep(self.interval)
                await self._dirty.wait()
                self._dirty.clear()
                count = len(self._parts)
                await self.store.update_entry(self.entry.id, content="".join(self._parts[:count]))
                self.writes += 1
        except asyncio.CancelledError:
            raise
        except Exception:  # the store is closing: finish() will say so, if it is called
            return

    async def _stop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            writer.cancel()  # a write it had begun is rolled back or committed whole
            await to_the_end(asyncio.wait({writer}))

    async def finish(self, content: str | None = None, meta: dict[str, Any] | None = None) -> Any:
        """End the stream: write ``content`` (default: the text that arrived)
        and ``meta`` (merged; the ``streaming`` flag removed) and return the
        stored :class:`~wisp.core.store.Entry`. An entry no piece created is
        created now, whole. Raises what the store raises (``StoreError``,
        ``sqlite3.Error``)."""
        await self._stop_writer()
        text = self.text if content is None else content
        if self.entry is None:
            self.entry = await self.store.add_entry(self.conversation, self.turn_id, self.kind, text,
                                                    meta=dict(meta or {}) or None, **self.fields)
        else:
            self.entry = await self.store.update_entry(self.entry.id, content=text,
                                                       meta={**(meta or {}), STREAMING: None})
        self.writes += 1
        return self.entry

    async def abandon(self) -> None:
        """Stop the streaming writes without a final one (what was written stays, marked streaming)."""
        await self._stop_writer()


async def recover_open_turns(store: Any, audit: Any) -> list[int]:
    """Stop the turns left open by processes that are gone
    (:meth:`wisp.core.store.Store.recover_open_turns`, which keeps what
    their entries had streamed, marked partial) and write to ``audit`` (a
    :class:`wisp.core.audit.AuditLog`, or ``None``) what the dead process
    never did: each such entry's audit event (kind :data:`AUDIT_KINDS`, its
    content and meta as recovered, ``"recovered": true``), linked to the
    entry, then the turn's ``turn.ended`` (``stopped``). Returns the turns'
    ids. Raises what the store raises, and ``OSError`` when the audit log
    cannot be written (the turns are stopped by then)."""
    stale = await store.recover_open_turns()
    if not stale or audit is None or not getattr(audit, "enabled", True):
        return stale
    entries = await store.turn_entries(stale)
    for tid in stale:
        turn = await store.turn_by_id(tid)
        if turn is None:  # deleted meanwhile (wisp conversations rm)
            continue
        for entry in entries.get(tid, []):
            kind = AUDIT_KINDS.get(entry.kind)
            if kind is None or entry.audit_event_id is not None or entry.meta.get("reason") != "exited":
                continue
            body = {"content": entry.content, "meta": entry.meta, "recovered": True,
                    **{k: v for k, v in (("tool_name", entry.tool_name), ("tool_call_id", entry.tool_call_id))
                       if v is not None}}
            ref = audit.write(kind, body, conversation=entry.conversation_id, turn=turn.number,
                              entry=entry.number)
            if ref is not None:
                await store.set_entry_audit(entry.id, ref)
        audit.write("turn.ended", {"state": "stopped", "error": RECOVERED_ERROR, "recovered": True},
                    conversation=turn.conversation_id, turn=turn.number)
    return stale
