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

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["SideCall", "SideCallError", "SideCallInfo", "Message", "ShapeMemory", "SHAPE_FORMS",
           "read_json_object", "side_messages"]

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, Any]


def side_messages(rules: str, prompt: str, prefix: str = "") -> list[Message]:
    """A side call's messages. With ``prefix``, the start of the chat's own
    system message (its rules and the project's instructions:
    :attr:`~wisp.core.context.composer.ComposedContext.prefix`), that is the
    system message and the side call's ``rules`` go first in the user
    message, before its ``prompt``: the server's prompt cache, which keeps an
    unchanged start, then serves the prefix the chat's requests evaluated
    (and a server that keeps one prompt keeps that start for the next turn).
    Without one, ``rules`` are the system message."""
    if prefix.strip():
        return [{"role": "system", "content": prefix}, {"role": "user", "content": f"{rules}\n\n{prompt}"}]
    return [{"role": "system", "content": rules}, {"role": "user", "content": prompt}]


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


#: The forms a shaped side call can take, most constrained first (issue "Compaction you can see
#: and trust", "Structured side calls"): ``json_schema`` (OpenAI-compatible ``response_format``
#: ``{"type": "json_schema", …}``: llama.cpp's server, vLLM, LM Studio), ``json_object``
#: (``{"type": "json_object", "schema": …}``: llama-cpp-python's server), ``format`` (Ollama's
#: ``format`` with the schema) and ``plain`` (the request without any: the server refused them).
SHAPE_FORMS = ("json_schema", "json_object", "format", "plain")


class ShapeMemory(Protocol):
    """Where side calls remember which form of shaped output an endpoint
    takes (one of :data:`SHAPE_FORMS`), per endpoint URL and model, so that a
    server that refused a schema is not asked again (the context's
    ``side_call_shapes`` table is one: :class:`wisp.core.context.shapes.ShapeBook`)."""

    async def get(self, endpoint: str, model: str) -> str | None:
        """The form that worked last for this endpoint and model, or ``None``."""
        ...

    async def put(self, endpoint: str, model: str, form: str, reason: str = "") -> None:
        """Remember ``form`` for this endpoint and model (``reason``: why, one line)."""
        ...


_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?|\n?\s*```\s*$")


def _closings(text: str, tries: int = 40) -> list[str]:
    """Ways to close ``text``, a JSON object cut short (as a reply that
    reached its token limit is), best first: close its open string, arrays
    and objects where it ends; else cut it back to each earlier ``,``
    (outside strings) and close what is open there."""
    stack: list[str] = []
    in_string = False
    escaped = False
    commas: list[tuple[int, str]] = []
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
        elif ch == ",":
            commas.append((i, "".join(reversed(stack))))
    out = [(text[:-1] if escaped else text) + ('"' if in_string else "") + "".join(reversed(stack))]
    out += [text[:i] + closers for i, closers in reversed(commas[-tries:])]
    return out


def read_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a shaped side call answered, read leniently: code
    fences and text around the object are dropped, and an object cut short
    (a reply that reached its token limit) is closed, and control
    characters inside strings are taken as they are (SmolLM2 writes a code
    block's newlines raw: strict JSON refused the whole object, and its
    braces and keys reached the summary layer). ``None`` when the reply
    holds no object (a server that ignored the schema answered in prose).
    Never raises."""
    if not text:
        return None
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    if start < 0:
        return None
    body = body[start:]
    end = body.rfind("}")
    candidates = [body[: end + 1]] if end >= 0 else []
    candidates.append(body)
    for candidate in candidates:
        for attempt in (candidate, *_closings(candidate)):
            try:
                value = json.loads(attempt, strict=False)  # a small model writes raw newlines in strings
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                return value
    return None
