"""The ``/memory`` slash command: recent memories, one in full, search.

``/memory`` lists recent memories (``$WISP_WORKSPACE`` or every workspace),
``/memory show MEM-000001`` shows one with its sources, and ``/memory
WORDS`` takes the words of the model's ``memories`` verb (search words and
filters such as ``workspace website since 7d``). Listed in
:data:`wisp.core.commands.COMMANDS`; the TUI opens a list screen for a
result titled ``memory`` whose ``data`` holds ``memories`` (issue
"Episodic memory across conversations", "In the TUI"). Costs the model
nothing, and, like every slash command, is not captured as an exchange.
"""

from __future__ import annotations

from typing import Any

from ..command_base import CommandResult
from .dates import DateError, memory_timezone
from .ids import MemoryIdError, format_memory_id, parse_memory_id
from .query import QueryError, find_memories, get_memory, memory_sources
from .render import list_markdown, memory_dict, page_dict, show_markdown
from .tool_verbs import parse_memories_request

__all__ = ["memory_command", "USAGE"]

USAGE = "/memory [WORDS and filters | show MEM-000001]"


async def memory_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/memory``: see the module docstring. ``data`` of a listing is the
    page as JSON (:func:`~wisp.core.episodes.render.page_dict`); of ``show``,
    the memory with ``summary`` and ``markdown``."""
    try:
        tz = memory_timezone(session.config)
        if words and words[0].lower() in ("show", "recall") or (len(words) == 1 and words[0].upper().startswith("MEM-")):
            ref = words[1] if words[0].lower() in ("show", "recall") and len(words) > 1 else words[-1]
            number = parse_memory_id(ref)
            m = await get_memory(session.store.db, number)
            if m is None:
                return CommandResult(f"No memory {format_memory_id(number)} (never made, or forgotten). "
                                     "`/memory` lists them.", error=True)
            md = show_markdown(m, tz, await memory_sources(session.store.db, number))
            data = {**memory_dict(m, tz, full=True), "markdown": md}
            return CommandResult(md, title=f"memory {m.ref}", data=data)
        f = parse_memories_request(" ".join(words[1:]) if words and words[0].lower() in ("list", "search") else rest,
                                   tz)
        page = await find_memories(session.store.db, f)
        return CommandResult(list_markdown(page, tz), title="memory", data=page_dict(page, tz))
    except (DateError, QueryError, MemoryIdError) as exc:
        return CommandResult(f"{exc}. Usage: `{USAGE}`, such as `/memory launch workspace website since 7d`.",
                             error=True)
