"""Side calls: wisp asking the model on its own behalf.

The running summary, condense, episodic refinement, and anything later that
asks the model for wisp's own bookkeeping reach it through one interface,
:class:`SideCall`, which the session builds from its endpoint and hands in
(issue "One core, built once", "One side-call interface"). A side call sends
no tools and asks the model not to think; it returns the reply's visible
text.

This module is a leaf: ``core/context``, ``core/memory`` and
``core/episodes`` import it, and never ``core/model`` (DESIGN.md, "Arrows
that never exist": composing is pure, and side calls are handed in). The
implementation over an endpoint is :mod:`wisp.core.model.sidecall`; tests
hand in a scripted one (``tests/support/sidecalls.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["SideCall", "SideCallError", "SideCallInfo", "Message"]

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, Any]


class SideCallError(Exception):
    """A side call could not be answered. ``kind`` is the endpoint error's
    kind (``unreachable``, ``timeout``, ``no_endpoint``, ``model_not_found``,
    ``server_error``, ``malformed`` …) or ``side_call``; the message is one
    line saying what happened."""

    def __init__(self, message: str, kind: str = "side_call") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class SideCallInfo:
    """What a side call's model is: ``model`` (its name, or ``None`` when not
    known yet) and ``context_window`` (tokens, or ``None``)."""

    model: str | None
    context_window: int | None


@runtime_checkable
class SideCall(Protocol):
    """The model, asked on wisp's own behalf (no tools, thinking off)."""

    async def info(self) -> SideCallInfo:
        """The model's name and context window. May connect to the endpoint
        (lazily, on first use); raises :class:`SideCallError` when none
        answers."""
        ...

    async def complete(self, messages: list[Message], *, max_tokens: int,
                       schema: dict[str, Any] | None = None, temperature: float | None = None) -> str:
        """The visible text of the model's reply to ``messages`` (thinking
        left out), at most ``max_tokens`` tokens long. ``schema`` is a JSON
        schema the reply should follow, for endpoints that can constrain
        their output (Ollama ``format``, OpenAI ``response_format``); an
        endpoint that cannot ignores it. Raises :class:`SideCallError`."""
        ...
