"""A conversation on a real SQLite store and audit log, with the memory tool made as a session makes it.

The tool comes from :func:`wisp.core.tools.registry.build_registry` with the
same :class:`~wisp.core.memory.verbs.MemoryBinding` a session builds (the
model's notes, a side call over the given endpoint), and the turn's notes
are recorded by the same :meth:`~wisp.core.context.notes.ModelNotes.record`
the session's context calls when a turn ends. Entries are recorded as the
agent records them (store, then audit event, then the link), so recall
reads them back the way it does in a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wisp.core.audit import AuditLog
from wisp.core.context.notes import ModelNotes
from wisp.core.database import open_store
from wisp.core.memory.verbs import MemoryBinding
from wisp.core.model.sidecall import EndpointSideCall
from wisp.core.store import Store
from wisp.core.tools import ToolContext
from wisp.core.tools.memory import MemoryTool
from wisp.core.tools.registry import build_registry


@dataclass
class Harness:
    store: Store
    audit: AuditLog
    notes: ModelNotes
    tool: MemoryTool
    workdir: Path
    conversation: int
    turn: Any = None
    turn_number: int = 0
    calls: int = field(default=0)

    async def begin(self) -> int:
        """Open the next turn; returns its number."""
        self.turn = await self.store.begin_turn(self.conversation)
        self.turn_number = self.turn.number
        return self.turn_number

    async def end(self, state: str = "done") -> None:
        """End the open turn and record its notes (as the session's context does when a turn ends)."""
        await self.store.end_turn(self.turn.id, state)
        await self.notes.record(self.conversation, self.turn.number)

    async def record(self, kind: str, content: str, *, audit_kind: str | None = None, **fields: Any) -> Any:
        """Store an entry of the open turn and its audit event, linked."""
        entry = await self.store.add_entry(self.conversation, self.turn.id, kind, content, **fields)
        body = {"content": content, **{k: v for k, v in fields.items() if v is not None}}
        ref = self.audit.write(audit_kind or kind, body, conversation=self.conversation, turn=self.turn.number,
                               entry=entry.number)
        if ref is not None:
            await self.store.set_entry_audit(entry.id, ref)
        return await self.store.get_entry(self.conversation, entry.number)

    async def tool_output(self, tool: str, arguments: dict, content: str, meta: dict | None = None) -> Any:
        """A tool call and its result in the open turn; returns the result entry."""
        self.calls += 1
        call_id = f"call_{self.calls}"
        import json

        await self.record("tool_call", json.dumps(arguments), audit_kind="tool.call", tool_name=tool,
                          tool_call_id=call_id, arguments=arguments)
        return await self.record("tool_result", content, audit_kind="tool.result", tool_name=tool,
                                 tool_call_id=call_id, meta=meta)

    async def ask(self, request: str, turn: int | None = None, *, call_entry: int | None = None) -> str:
        """The memory tool's answer to ``request`` in the open turn (``call_entry``: the entry
        recording the call, as the agent passes it; ``None`` as a tool called directly)."""
        ctx = ToolContext(workdir=self.workdir, config=None, conversation_id=self.conversation,
                          turn=self.turn_number if turn is None else turn, call_entry=call_entry)
        result = await self.tool.run({"request": request}, ctx)
        return result.content

    async def call(self, request: str) -> tuple[int, str]:
        """The memory tool called as the agent calls it: the call recorded as an entry first,
        the tool told that entry, its result recorded after; returns ``(call entry, answer)``."""
        import json

        self.calls += 1
        call_id = f"call_{self.calls}"
        arguments = {"request": request}
        call = await self.record("tool_call", json.dumps(arguments), audit_kind="tool.call", tool_name="memory",
                                 tool_call_id=call_id, arguments=arguments)
        answer = await self.ask(request, call_entry=call.number)
        await self.record("tool_result", answer, audit_kind="tool.result", tool_name="memory", tool_call_id=call_id)
        return call.number, answer

    def memory_events(self) -> list[dict]:
        return [e["payload"] for e in self.audit.iter_events() if e["kind"] == "context.memory"]

    async def close(self) -> None:
        if self in LEFT_OPEN:
            LEFT_OPEN.remove(self)
        self.audit.close()
        await self.store.close()


#: Harnesses not closed yet. A test that fails before its ``close()`` would leave the store's
#: connection thread running, and the test process would never exit; the autouse fixture in
#: ``tests/conftest.py`` closes what is left (:func:`close_left_open`).
LEFT_OPEN: list[Harness] = []


def close_left_open() -> None:
    """Close every harness a test left open (after a failure), each on a fresh event loop."""
    import asyncio

    while LEFT_OPEN:
        h = LEFT_OPEN.pop()
        try:
            asyncio.run(h.close())
        except Exception:
            pass


async def make_harness(tmp_path: Path, *, audit_enabled: bool = True, max_bytes: int = 10 * 1024 * 1024,
                       keep: int = 5, endpoint: Any = None, context_window: int | None = None) -> Harness:
    store = await open_store(tmp_path / "wisp.db")
    audit = AuditLog(tmp_path / "audit", enabled=audit_enabled, max_bytes=max_bytes, keep=keep)
    notes = ModelNotes.over(store, audit)
    side_call = EndpointSideCall(endpoint, context_window) if endpoint is not None else None
    binding = MemoryBinding(store, audit, notes, side_call, lambda: context_window, None)
    tool = build_registry(["read_file", "memory"], memory=binding).get("memory")
    assert isinstance(tool, MemoryTool)
    conv = await store.create_conversation(str(tmp_path))
    h = Harness(store, audit, notes, tool, tmp_path, conv.id)
    LEFT_OPEN.append(h)
    return h
