"""The ``memory`` tool as the model calls it: one ``request`` argument, answered by
:class:`wisp.core.memory.verbs.Memory` (issue "The memory tool";
wisp-memory-tool.txt). It only reads the conversation's record and keeps the
model's notes as proposals, so it runs without approval (``read_only``)."""

from __future__ import annotations

from typing import Any

from ..memory.verbs import DESCRIPTION, PARAMETERS, Memory, MemoryBinding
from .base import ToolContext, ToolResult

__all__ = ["MemoryTool"]


class MemoryTool:
    """The ``memory`` tool, made with the session's ``binding``."""

    name = "memory"
    read_only = True
    description = DESCRIPTION
    parameters: dict[str, Any] = PARAMETERS

    def __init__(self, binding: MemoryBinding) -> None:
        self.memory = Memory(binding)

    @property
    def binding(self) -> MemoryBinding:
        return self.memory.binding

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Answer ``arguments["request"]`` in the call's conversation and turn.
        Never raises for a bad request (the result is an ``error:`` or
        ``memory:`` line)."""
        raw = arguments.get("request", "")
        request = raw if isinstance(raw, str) else str(raw)
        answer = await self.memory.answer(request, ctx.conversation_id, ctx.turn, entry=ctx.call_entry)
        return ToolResult(answer.content, ok=answer.ok, meta=dict(answer.meta))
