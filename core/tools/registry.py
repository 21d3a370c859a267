"""The registry: tool names turned into a conversation's tools.

:func:`build_registry` makes each named tool once. The memory tool is made
with its :class:`~wisp.core.memory.verbs.MemoryBinding` (the session's store,
audit log, the model's notes, the side call and the window), so no memory
tool exists unbound (issue "One core, built once").
"""

from __future__ import annotations

from typing import Any, Iterable

from ..memory.verbs import MemoryBinding
from .base import Tool, ToolRegistry, UnknownTool
from .edit_file import EditFile
from .memory import MemoryTool
from ..tool_names import TOOL_NAMES
from .read_file import ReadFile
from .run_command import RunCommand
from .system_info import SystemInfo

__all__ = ["AVAILABLE", "build_registry"]

#: Every tool wisp has, by name (the same names, in order, as
#: :data:`wisp.core.tool_names.TOOL_NAMES`).
AVAILABLE: dict[str, type] = {
    "read_file": ReadFile,
    "system_info": SystemInfo,
    "run_command": RunCommand,
    "edit_file": EditFile,
    "memory": MemoryTool,
}
assert tuple(AVAILABLE) == TOOL_NAMES, "core/tool_names.py and tools/registry.py must list the same tools"


def build_registry(names: list[str], *, memory: MemoryBinding | None = None, edits: Any = None,
                   extra: Iterable[Tool] = ()) -> ToolRegistry:
    """A registry of the named tools, in order, then the ``extra`` tools
    (made already, e.g. by an embedding program). ``memory`` is the memory
    tool's binding, needed when ``names`` has ``memory``; ``edits`` the
    :class:`~wisp.core.tools.edit_store.EditBook` where ``edit_file`` keeps
    every edit's bytes, needed when ``names`` has ``edit_file`` (an edit that
    could not be undone must not be made).

    Raises :class:`UnknownTool` naming the tools wisp has when a name is not
    one, and ``ValueError`` when ``memory`` or ``edit_file`` is named without
    what it is made with.
    """
    tools: list[Tool] = []
    for name in names:
        cls = AVAILABLE.get(name)
        if cls is None:
            raise UnknownTool(f"no tool named {name!r}; wisp has {', '.join(AVAILABLE)}")
        if cls is MemoryTool:
            if memory is None:
                raise ValueError("the memory tool is made with its session's binding (store, notes, side call)")
            tools.append(MemoryTool(memory))
        elif cls is EditFile:
            if edits is None:
                raise ValueError("edit_file is made with its session's record of edits (an EditBook)")
            tools.append(EditFile(edits))
        else:
            tools.append(cls())
    tools.extend(extra)
    return ToolRegistry(tools)
