"""What a slash command is and what it returns: the shapes every command module shares.

A leaf: the feature modules that hold command handlers
(:mod:`wisp.core.context.commands`, :mod:`wisp.core.episodes.commands`,
:mod:`wisp.core.toolset`) import it, and :mod:`wisp.core.commands` lists
them all in its one explicit table (issue "One core, built once": "Register
commands in one explicit registry").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

__all__ = ["CommandResult", "Command", "Handler"]


@dataclass
class CommandResult:
    """What a command shows. ``text`` is Markdown; ``error`` marks a failure;
    ``title`` names the view; ``data`` is the same material as JSON-ready
    values for ``--json`` listings."""

    text: str
    error: bool = False
    title: str | None = None
    data: Any = None
    #: The endpoint settings changed (``model.*``): the caller reconnects.
    reconnect: bool = False
    #: What the front end does next, beyond showing ``text`` (issue 16): ``retry`` and
    #: ``edit`` (``data``: ``turn``, ``prompt``), ``open`` (``data``: ``conversation``),
    #: ``new``, ``clear``, ``quit``, ``copy`` (``data``: ``text``, ``what``), ``pick-model``
    #: (``data``: ``models``, ``current``), ``model`` (a switch), ``profile``, ``search``
    #: (``data``: ``hits``), ``undo`` (files put back: ``data``: ``turn``, ``files``, ``removed``);
    #: ``None`` for nothing.
    action: str | None = None


#: A command's handler: ``(session, words, rest) -> CommandResult``, where
#: ``words`` are the arguments split as a shell would and ``rest`` the text
#: after the command's name as typed.
Handler = Callable[[Any, list[str], str], Awaitable[CommandResult]]


@dataclass(frozen=True)
class Command:
    """A slash command: its name, handler, usage line, one-line help and
    aliases; ``asks_model`` marks one that makes a side call (``/compact``'s
    preview) and ``asks_endpoint`` one that asks the endpoint something
    (``/model``'s list): a screen runs either without waiting on it, since a
    busy server (the embedded one serves one request at a time) can take
    minutes to answer."""

    name: str
    handler: Handler
    usage: str
    help: str
    aliases: tuple[str, ...] = field(default_factory=tuple)
    asks_model: bool = False
    asks_endpoint: bool = False
