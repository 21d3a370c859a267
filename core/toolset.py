"""Which tools a conversation has, and the ``/tools`` command.

Precedence (issue "Tools that act", "Which tools a conversation has"): the
command line (``--tool NAME``, repeatable: exactly those tools), then a
``tools:`` line in the working directory's AGENTS.md, then config
``tools.enabled``. :func:`choose_tools` applies it; ``/tools`` lists the
conversation's tools with their token cost (the schema each adds to every
request, estimated by :mod:`wisp.core.tokens`) and where the list
came from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .agents_md import AgentsMd
from .tokens import estimate_tokens
from .tool_names import TOOL_NAMES, mcp_parts, tool_name_problem
from .tools.base import tool_schema

if TYPE_CHECKING:  # the commands' shapes load with /tools (issue 12)
    from .command_base import CommandResult

__all__ = ["ToolChoice", "choose_tools", "tool_costs"]


@dataclass
class ToolChoice:
    """The tools chosen: ``names`` in order, and ``source``: ``command line``,
    ``AGENTS.md`` or ``config``; ``detail`` says more (the file and line, or
    the config key)."""

    names: list[str]
    source: str
    detail: str


class ToolListError(ValueError):
    """A tool list that names a tool wisp does not have; the message says
    where the list came from and which tools wisp has."""


def choose_tools(cli: list[str] | None, agents: AgentsMd | None, config: Any) -> ToolChoice:
    """The conversation's tools: ``cli`` if given (even empty), else the
    AGENTS.md ``tools:`` line if there is one, else config ``tools.enabled``.
    Repeated names count once. Raises :class:`ToolListError` for a name that
    is not one of :data:`wisp.core.tool_names.TOOL_NAMES` nor
    ``mcp__SERVER[__TOOL]`` of a server config ``mcpServers`` has
    (:func:`wisp.core.tool_names.tool_name_problem`), naming its source."""
    if cli is not None:
        choice = ToolChoice(list(dict.fromkeys(cli)), "command line", "--tool")
    elif agents is not None and agents.tools is not None:
        where = f"{agents.path or 'AGENTS.md'} line {agents.tools_line}"
        choice = ToolChoice(list(dict.fromkeys(agents.tools)), "AGENTS.md", where)
    else:
        choice = ToolChoice(list(dict.fromkeys(config.get("tools.enabled") or [])), "config",
                            "tools.enabled")
    servers = _mcp_servers(config) if any(mcp_parts(n) for n in choice.names) else None
    unknown = [n for n in choice.names if tool_name_problem(n, servers)]
    if unknown:
        have = ", ".join(TOOL_NAMES)
        if choice.source == "AGENTS.md":
            fix = "fix its tools: line, or give the tools with --tool NAME"
        elif choice.source == "config":
            fix = "fix it with wisp config set tools.enabled '[\"read_file\"]'"
        else:
            fix = "use one of those names"
        if mcp_parts(unknown[0]) is not None:
            raise ToolListError(f"{choice.detail}: {tool_name_problem(unknown[0], servers)}: {fix}")
        raise ToolListError(f"{choice.detail} names {unknown[0]!r}, which is not a wisp tool; wisp has "
                            f"{have} (and MCP servers' tools as mcp__SERVER__TOOL): {fix}")
    return choice


def _mcp_servers(config: Any) -> list[str]:
    """The names of the servers config ``mcpServers`` has and does not disable (none without the
    key, and then the MCP settings' parser is not even imported)."""
    servers = config.get("mcpServers")
    if not servers:
        return []
    from .mcp_config import McpConfigError, parse_mcp_servers

    try:
        return list(parse_mcp_servers(servers))
    except McpConfigError:  # the config refuses it on load; a non-strict one may still hold it
        return []


def tool_costs(registry: Any) -> list[dict[str, Any]]:
    """Per tool of ``registry`` (a :class:`~wisp.core.tools.ToolRegistry`):
    ``name``, ``read_only``, ``description`` and ``tokens``, the estimated
    tokens its schema adds to every request."""
    rows = []
    for name in registry.names:
        tool = registry.get(name)
        schema = tool_schema(tool)
        rows.append({"name": name, "read_only": bool(getattr(tool, "read_only", False)),
                     "description": tool.description,
                     "tokens": estimate_tokens(json.dumps(schema, ensure_ascii=False))})
    return rows


async def tools_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/tools``: each tool the model is given, with what its schema costs in tokens."""
    from .command_base import CommandResult

    rows = tool_costs(session.agent.tools)
    choice = getattr(session, "tool_choice", None)
    origin = ""
    if choice is not None:
        origin = {"command line": "given on the command line (--tool)",
                  "AGENTS.md": f"from AGENTS.md ({choice.detail})",
                  "config": "from config tools.enabled"}.get(choice.source, f"from {choice.source}")
    if not rows:
        text = (f"This conversation has no tools {origin}. Start wisp with --tool NAME, or name them in "
                f"AGENTS.md (tools: [\"run_command\"]) or config tools.enabled. wisp has: "
                f"{', '.join(TOOL_NAMES)}.")
        return CommandResult(text, title="tools", data={"tools": [], "total_tokens": 0,
                                                        "source": choice.source if choice else None})
    total = sum(r["tokens"] for r in rows)
    lines = [f"| tool | acts? | tokens | what it does |", "|---|---|---:|---|"]
    for r in rows:
        acts = "read only" if r["read_only"] else "acts (asks first)"
        lines.append(f"| `{r['name']}` | {acts} | {r['tokens']:,} | {r['description']} |")
    lines.append(f"| **total** | | **{total:,}** | sent with every request |")
    text = f"Tools {origin}:\n\n" + "\n".join(lines)
    layer = await _tools_layer(session)
    text += "\n\n" + counted_note(layer)
    return CommandResult(text, title="tools", data={"tools": rows, "total_tokens": total,
                                                    "layer_tokens": layer[0] if layer else None,
                                                    "source": choice.source if choice else None})


async def _tools_layer(session: Any) -> tuple[int, str, str] | None:
    """The tools layer as F5 (``/inspect context``) reports it for the next
    request: ``(tokens, how, mode)``, or ``None`` when nothing can be composed
    (no context manager, nothing stored yet). Composing makes no model call."""
    manager = getattr(session, "context", None)
    if manager is None or not hasattr(manager, "compose"):
        return None
    from .context.inspect import inspect_context

    try:
        report = await inspect_context(manager, session.conversation_id or 0)
    except Exception:  # noqa: BLE001 - the table stands without the layer's figure
        return None
    row = next((r for r in report.rows if r.key == "tools"), None)
    return (row.tokens, row.how, report.tool_mode) if row is not None else None


def counted_note(layer: tuple[int, str, str] | None) -> str:
    """What ``/tools`` counts against what F5 counts, in one paragraph: the
    two figures differ because they count different things, and the person
    should not have to guess which one the request pays."""
    text = ("The tokens column is wisp's estimate of each tool's schema alone (about 4 characters a token, "
            "before any calibration).")
    if layer is None:
        return text
    tokens, how, mode = layer
    form = ("written into the system message as instructions, since this endpoint takes tools in the prompt"
            if mode == "prompted" else "as the request's tools field")
    return text + (f" F5's tools layer counts them as the next request sends them ({form}), {how}: "
                   f"**{tokens:,}** tokens; that is what every request pays.")
