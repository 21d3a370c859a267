"""How a session starts: :class:`SessionOptions`, kept apart from the session so that a view can
hold them without importing the session (issue 12, "Paint first, then open": the TUI's first frame
needs no part of the core that opens a conversation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sidecall import SideCall
    from .tools.approval import AskFunction
    from .tools.base import Tool

__all__ = ["SessionOptions", "SessionError", "unknown_conversation"]


class SessionError(Exception):
    """A session could not open: a bad config, an unknown conversation or tool.
    The message is one line saying what to do."""


def unknown_conversation(conversation_id: int) -> SessionError:
    """The error of ``--resume ID`` for a conversation that is not stored."""
    return SessionError(f"no conversation {conversation_id}; `wisp conversations` lists them")


@dataclass
class SessionOptions:
    """How a session starts. ``resume`` is a conversation id; ``continue_last``
    reopens the newest; ``tools`` is an explicit tool list (``--tool``), which
    is exactly that list; ``transport`` is ``tui``, ``ask`` or ``mcp``;
    ``ask`` is the person's answer to an approval (the TUI's modal; ``None``
    in ``wisp ask``, where only the allow list counts); ``channel``,
    ``thread`` and ``sender`` name the exchange's origin for episodic memory
    (``None``: the conversation, none, the local user). ``side_call`` is the
    :class:`~wisp.core.sidecall.SideCall` for wisp's own requests (``None``:
    the session's model, through its link; a test hands in a scripted one),
    and ``extra_tools`` are tools an embedding program gives beside the
    named ones (made already; they join the registry after them).
    ``continue_last`` takes the newest conversation of ``workdir``, or with
    ``continue_all`` the newest anywhere (issue 16, "The conversation of
    this directory"); ``model`` is a model for this session only (``wisp ask
    --model``), ``profile`` a profile of config ``profiles`` to use
    (``--profile``); ``allow_edits`` makes the model's file edits without
    asking (``wisp ask --allow-edits``)."""

    workdir: Path = field(default_factory=Path.cwd)
    continue_last: bool = False
    continue_all: bool = False
    model: str | None = None
    profile: str | None = None
    resume: int | None = None
    tools: list[str] | None = None
    transport: str = "tui"
    ask: "AskFunction | None" = None
    channel: str | None = None
    thread: str | None = None
    sender: str | None = None
    side_call: "SideCall | None" = None
    extra_tools: "tuple[Tool, ...]" = ()
    allow_edits: bool = False
