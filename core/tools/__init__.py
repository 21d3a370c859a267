"""Tools the model may call: read_file, system_info, run_command, edit_file and memory.

The shapes (:class:`Tool`, :class:`ToolContext`, :class:`ToolResult`,
:class:`ToolRegistry`) are in :mod:`.base`; the names wisp has in
:mod:`wisp.core.tool_names` (a leaf that config validation reads); the registry that
turns names into tools in :mod:`.registry`. Importing this package loads
no tool.
"""

from __future__ import annotations

from .base import Tool, ToolContext, ToolRegistry, ToolResult, UnknownTool, tool_schema

__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolResult", "UnknownTool", "tool_schema"]
