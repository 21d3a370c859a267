"""Tools the model may call: read_file, system_info, run_command (and, in
later issues, memory). :func:`build_registry` turns names into tools."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolRegistry, ToolResult, UnknownTool, tool_schema
from .read_file import ReadFile
from .run_command import RunCommand
from .system_info import SystemInfo
from ..memory.tool import MemoryTool  # issue "The memory tool"; off by default (config context.memory)

#: Every tool wisp has, by name.
AVAILABLE: dict[str, type] = {
    "read_file": ReadFile,
    "system_info": SystemInfo,
    "run_command": RunCommand,
    "memory": MemoryTool,
}


def build_registry(names: list[str]) -> ToolRegistry:
    """A registry of the named tools, in order.

    Raises :class:`UnknownTool` naming the tools wisp has when a name is not one.
    """
    tools: list[Tool] = []
    for name in names:
        cls = AVAILABLE.get(name)
        if cls is None:
            raise UnknownTool(f"no tool named {name!r}; wisp has {', '.join(AVAILABLE)}")
        tools.append(cls())
    return ToolRegistry(tools)


__all__ = ["AVAILABLE", "Tool", "ToolContext", "ToolRegistry", "ToolResult", "UnknownTool",
           "build_registry", "tool_schema"]
