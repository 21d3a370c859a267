"""The shape of a tool the model may call, and the registry of a conversation's tools.

A tool has a name, a description, a JSON-schema for its arguments (OpenAI's
function shape, which Ollama also accepts) and an async ``run``. Results are
plain text for the model plus ``meta`` for wisp (exit status, flags).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol


@dataclass
class ToolContext:
    """What a running tool may know: the conversation's working directory,
    the config (a :class:`wisp.core.config.Config`), the conversation id and
    the turn number, ``call_entry`` (the entry recording the call), ``emit``
    to stream pieces of output to the person, and
    ``approve``: an async function that takes a
    :class:`wisp.core.tools.approval.ApprovalRequest` and returns an
    :class:`~wisp.core.tools.approval.Approval` (None: nothing may be
    approved, so a tool that acts must not act; issue "Tools that act")."""

    workdir: Path
    config: Any
    conversation_id: int | None = None
    turn: int | None = None
    emit: Callable[[str], None] | None = None
    approve: Callable[[Any], Awaitable[Any]] | None = None
    #: The number of the entry that records this tool call (``None``: not recorded, as in a
    #: test that calls a tool directly), so that what the tool keeps can name where it came from.
    call_entry: int | None = None

    def setting(self, key: str, default: Any) -> Any:
        """Config ``key``, or ``default`` when there is no config, the key is
        unset (None) or cannot be read."""
        if self.config is None:
            return default
        try:
            value = self.config.get(key)
        except Exception:
            return default
        return default if value is None else value


@dataclass
class ToolResult:
    """A tool's answer. ``content`` goes to the model; ``ok`` is false for an
    error; ``meta`` is stored with the entry (e.g. ``{"exit_status": 1}``)."""

    content: str
    ok: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    """A tool. ``read_only`` is true for a tool that only reads (its output
    can be had again by calling it again; issue "Layered context")."""

    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the tool. Must not raise for bad arguments: return ``ok=False``."""
        ...


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The tool in OpenAI's function shape: ``{"type": "function", "function": {...}}``."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


class UnknownTool(ValueError):
    """A tool name that wisp does not have. The message lists the names it has."""


class ToolRegistry:
    """The tools one conversation has, in the order given."""

    def __init__(self, tools: list[Tool]):
        self._tools = {t.name: t for t in tools}

    @property
    def names(self) -> list[str]:
        """Tool names in order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's schema, for the request."""
        return [tool_schema(t) for t in self._tools.values()]

    def __len__(self) -> int:
        return len(self._tools)


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """A one-line error for arguments that don't fit the tool's schema, or None.

    Checks required keys, unknown keys (unless the schema's
    ``additionalProperties`` allows them) and the JSON types of the values
    that name one type. Never raises, whatever the schema holds: an MCP
    server's schema is outside input (issue 15).
    """
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    props = schema.get("properties", {})
    props = props if isinstance(props, dict) else {}
    required = schema.get("required", [])
    if not isinstance(arguments, dict):
        return f"error: {tool.name} takes a JSON object of arguments"
    for key in required if isinstance(required, list) else []:
        if isinstance(key, str) and key not in arguments:
            return f"error: {tool.name} needs the argument {key!r}"
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
             "array": list, "object": dict}
    for key, value in arguments.items():
        if key not in props:
            if schema.get("additionalProperties") not in (None, False):
                continue  # a schema that says it takes other keys (an MCP server's may)
            return f"error: {tool.name} has no argument {key!r}; it takes {', '.join(props) or 'none'}"
        spec = props[key] if isinstance(props[key], dict) else {}
        want = spec.get("type")
        if not isinstance(want, str):  # a JSON schema's list of types, or none: not checked here
            continue
        py = types.get(want)
        if py is None or value is None:
            continue
        if want == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            arguments[key] = int(value)
            continue
        if isinstance(value, bool) and want in ("integer", "number"):
            return f"error: {tool.name}'s {key!r} must be a {want}"
        if not isinstance(value, py):
            return f"error: {tool.name}'s {key!r} must be a {want}"
        enum = spec.get("enum")
        if isinstance(enum, list) and value not in enum:
            return f"error: {tool.name}'s {key!r} must be one of {', '.join(map(str, enum))}"
    return None
