"""A conversation on a real SQLite store and audit log, with the memory tool bound, for tests.

Entries are recorded as the agent records them (store, then audit event,
then the link), so recall reads them back the way it does in a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wisp.core.agent import Agent
from wisp.core.audit import AuditLog
from wisp.core.memory.tool import MemoryTool, attach_memory
from wisp.core.store import Store
from wisp.core.tools import ToolContext, build_registry


@dataclass
class Harness:
    store: Store
    audit: AuditLog
    agent: Agent
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
        """End the open turn and run the agent's after-turn hooks (as the agent does)."""
        from wisp.core.agent import TurnRecord

        await self.store.end_turn(self.turn.id, state)
        record = TurnRecord(self.conversation, self.turn.number, self.turn.id, "", "", state, "", "")
        for hook in self.agent.after_turn:
            await hook(record)

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

    async def ask(self, request: str, turn: int | None = None) -> str:
        """The memory tool's answer to ``request`` in the open turn."""
        ctx = ToolContext(workdir=self.workdir, config=None, conversation_id=self.conversation,
                          turn=self.turn_number if turn is None else turn)
        result = await self.tool.run({"request": request}, ctx)
        return result.content

    def memory_events(self) -> list[dict]:
        return [e["payload"] for e in self.audit.iter_events() if e["kind"] == "context.memory"]

    async def close(self) -> None:
        self.audit.close()
        await self.store.close()


async def make_harness(tmp_path: Path, *, audit_enabled: bool = True, max_bytes: int = 10 * 1024 * 1024,
                       keep: int = 5, endpoint: Any = None, context_window: int | None = None) -> Harness:
    store = await Store.open(tmp_path / "wisp.db")
    audit = AuditLog(tmp_path / "audit", enabled=audit_enabled, max_bytes=max_bytes, keep=keep)
    agent = Agent(store=store, audit=audit, endpoint=endpoint, tools=build_registry(["read_file", "memory"]),
                  workdir=tmp_path)
    agent.settings.context_window = context_window
    tool = attach_memory(agent)
    assert tool is not None
    conv = await store.create_conversation(str(tmp_path))
    return Harness(store, audit, agent, tool, tmp_path, conv.id)
