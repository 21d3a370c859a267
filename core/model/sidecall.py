"""Side calls over an endpoint: the implementations of :class:`wisp.core.sidecall.SideCall`.

- :class:`LinkSideCall` asks the session's model through its
  :class:`~wisp.core.model.link.ModelLink` (the running summary, condense,
  refinement in the TUI).
- :class:`EndpointSideCall` asks one given endpoint;
- :class:`ConfigSideCall` resolves an endpoint from config ``model.*`` on
  first use and closes it with :meth:`ConfigSideCall.aclose`
  (``wisp memory refine`` from a shell, where no session runs): a run with
  nothing to do resolves nothing and starts no server.

Both send no tools and ``think="off"`` (issue "Layered context": "a side
call of the same model, with thinking off and no tools"), and turn every
:class:`~wisp.core.model.base.EndpointError` into a
:class:`~wisp.core.sidecall.SideCallError` of the same kind, so the callers
never import ``core/model`` (issue "One core, built once").

A side call that needs a shape (the running summary's sections,
refinement's memories) passes a JSON schema; :func:`complete_with` asks for
it with the endpoint's own constrained decoding and falls back to the plain
request when the server refuses it, remembering per endpoint which form
worked (:class:`ShapeForms`; issue "Compaction you can see and trust",
"Structured side calls").
"""

from __future__ import annotations

import re
from typing import Any

from ..sidecall import Message, ShapeMemory, SideCallError, SideCallInfo
from . import base as mb
from .link import ModelLink

__all__ = ["LinkSideCall", "ConfigSideCall", "EndpointSideCall", "ShapeForms", "complete_with", "forms_for"]

#: An error text that names the part of a request that asks for a shape: a server that answers
#: a shaped request with one of these (even as HTTP 500, as llama-cpp-python's does for a
#: ``response_format`` it does not know) refused the shape, not the request.
_SHAPE_WORDS = re.compile(r"response_format|json_schema|json_object|schema|grammar|\bformat\b", re.IGNORECASE)


def forms_for(endpoint: Any) -> tuple[str, ...]:
    """The forms of shaped output to try with ``endpoint``, in order
    (:data:`wisp.core.sidecall.SHAPE_FORMS`): an OpenAI-compatible server
    ``json_schema``, then ``json_object``, then ``plain``; Ollama ``format``,
    then ``plain``; anything else ``plain``. An endpoint that knows its
    server's forms says so in ``shape_forms`` (a tuple; the embedded
    llama-cpp-python server's is ``("json_object", "plain")``), so that a
    new server's first shaped side call is not a refusal."""
    declared = getattr(endpoint, "shape_forms", None)
    if isinstance(declared, tuple) and declared:
        return declared
    provider = getattr(endpoint, "provider", "")
    if provider == "openai":
        return ("json_schema", "json_object", "plain")
    if provider == "ollama":
        return ("format", "plain")
    return ("plain",)


def refused_shape(exc: mb.EndpointError) -> bool:
    """Whether ``exc``, the answer to a shaped request, says the server
    refused the shape (issue "Compaction you can see and trust": "fall back
    to the plain request when the server refuses it"): HTTP 400 (not a
    context overflow), 415 or 422, an error object in the stream, or an HTTP
    500 whose message names the shape (``response_format``, ``schema`` …)."""
    if isinstance(exc, mb.BadRequest):
        return not exc.context_overflow
    if isinstance(exc, mb.StreamErrorObject):
        return True
    if isinstance(exc, mb.ServerError):
        return exc.status in (400, 415, 422) or (exc.status >= 500 and bool(_SHAPE_WORDS.search(str(exc))))
    return False


class ShapeForms:
    """Which form of shaped output each endpoint takes: remembered in memory
    for the session, and through ``memory`` (a
    :class:`~wisp.core.sidecall.ShapeMemory`, per endpoint URL and model)
    across sessions, so a server that refused a schema is asked plainly from
    then on."""

    def __init__(self, memory: ShapeMemory | None = None) -> None:
        self.memory = memory
        self.known: dict[tuple[str, str], str] = {}

    async def get(self, endpoint: Any) -> str | None:
        """The form that worked last with ``endpoint``, or ``None``."""
        key = (str(getattr(endpoint, "base_url", "")), str(getattr(endpoint, "model", "")))
        if key not in self.known and self.memory is not None:
            try:
                found = await self.memory.get(*key)
            except Exception:  # a closed or locked database: ask again, from the first form
                found = None
            if found:
                self.known[key] = found
        return self.known.get(key)

    async def put(self, endpoint: Any, form: str, reason: str) -> None:
        """Remember ``form`` for ``endpoint`` (never raises)."""
        key = (str(getattr(endpoint, "base_url", "")), str(getattr(endpoint, "model", "")))
        self.known[key] = form
        if self.memory is not None:
            try:
                await self.memory.put(*key, form, reason)
            except Exception:
                pass


async def _stream_text(endpoint: mb.Endpoint, messages: list[Message], options: mb.ChatOptions) -> str:
    parts: list[str] = []
    async for item in endpoint.stream_chat(messages, None, options):
        if isinstance(item, mb.StreamText):
            parts.append(item.text)
    return "".join(parts).strip()


#: Tokens a chat template adds around each message (its role and markers), over its content's count, with a
#: margin (SmolLM2's ChatML adds about 6; at 8 a real-model run left 3 tokens of an 8,192-token window).
TEMPLATE_TOKENS = 16
#: The least room for a side call's reply (tokens); a prompt that leaves less is not sent.
MIN_REPLY_TOKENS = 64


async def fit_reply_room(endpoint: Any, messages: list[Message], context_window: int | None,
                         max_tokens: int) -> int:
    """``max_tokens`` lowered so that the prompt, as the server's tokenizer
    counts it, and the reply fit ``context_window`` (tokens): a side call
    sized by wisp's estimate (base64 counts 1.4 × it on SmolLM2) must not
    ask for room the window does not have (CI's real-model chat: 9,129 of
    8,192 tokens). Unchanged where the endpoint cannot count or the window
    is unknown. Raises :class:`SideCallError` (kind ``context_overflow``)
    when the prompt leaves less than :data:`MIN_REPLY_TOKENS`."""
    count = getattr(endpoint, "count_tokens", None)
    if not context_window or count is None:
        return max_tokens
    try:
        counted = await count("\n".join(str(m.get("content") or "") for m in messages))
    except mb.EndpointError:
        return max_tokens
    if not isinstance(counted, int):
        return max_tokens
    prompt = counted + TEMPLATE_TOKENS * len(messages)
    room = context_window - prompt
    if room < MIN_REPLY_TOKENS:
        raise SideCallError(f"the side call's prompt needs {prompt:,} tokens of the {context_window:,}-token "
                            "window, with no room for its reply", "context_overflow")
    return min(max_tokens, room)


async def complete_with(endpoint: mb.Endpoint, messages: list[Message], *, context_window: int | None,
                        max_tokens: int, schema: dict[str, Any] | None = None,
                        temperature: float | None = None, forms: ShapeForms | None = None) -> str:
    """The visible text of ``endpoint``'s reply to ``messages``: no tools,
    thinking off, at most ``max_tokens`` tokens.

    With a ``schema``, the reply is asked for with the endpoint's own
    constrained decoding (``ChatOptions.extra["schema"]`` and
    ``["schema_form"]``, which the endpoint turns into Ollama's ``format``
    or OpenAI's ``response_format``), trying the forms of :func:`forms_for`
    from the one ``forms`` remembers; a form the server refuses
    (:func:`refused_shape`) gives way to the next, down to the plain
    request, and the one that answered is remembered in ``forms``. The reply
    is the model's text either way: the caller reads it leniently
    (:func:`wisp.core.sidecall.read_json_object`). Raises
    :class:`SideCallError` (kind of the endpoint error; for a request that
    fails in every form, the last form's). Where the endpoint counts tokens,
    ``max_tokens`` is first lowered to the room the counted prompt leaves
    (:func:`fit_reply_room`)."""
    max_tokens = await fit_reply_room(endpoint, messages, context_window, max_tokens)

    def options(form: str | None) -> mb.ChatOptions:
        extra = {"schema": schema, "schema_form": form} if schema and form else {}
        return mb.ChatOptions(context_window=context_window, think="off", max_tokens=max_tokens,
                              temperature=temperature, extra=extra)

    if not schema:
        try:
            return await _stream_text(endpoint, messages, options(None))
        except mb.EndpointError as exc:
            raise SideCallError(str(exc) or exc.kind, exc.kind) from exc
    forms = forms or ShapeForms()
    order = forms_for(endpoint)
    known = await forms.get(endpoint)
    start = order.index(known) if known in order else 0
    refusal: str | None = None
    for form in order[start:]:
        try:
            text = await _stream_text(endpoint, messages, options(form))
        except mb.EndpointError as exc:
            if form != order[-1] and refused_shape(exc):
                refusal = f"{form} refused: {' '.join(str(exc).split())[:200]}"
                continue
            raise SideCallError(str(exc) or exc.kind, exc.kind) from exc
        if form != known:
            await forms.put(endpoint, form, refusal or f"{form} answered")
        return text
    raise SideCallError("no form of the request was answered", "side_call")  # pragma: no cover - plain raises


class LinkSideCall:
    """A side call through a session's :class:`ModelLink` (the endpoint
    connected at the time of the call)."""

    def __init__(self, link: ModelLink, forms: ShapeForms | None = None) -> None:
        self.link = link
        #: Which form of shaped output each endpoint takes (see :class:`ShapeForms`).
        self.forms = forms or ShapeForms()

    async def info(self) -> SideCallInfo:
        """The link's model and window; raises :class:`SideCallError` (kind
        ``no_endpoint``) while nothing is connected. A connect under way is
        waited for (:meth:`ModelLink.settled`): its endpoint is the one to use."""
        await self.link.settled()
        if self.link.endpoint is None:
            raise SideCallError(self.link.error or "no model endpoint is connected", "no_endpoint")
        return SideCallInfo(self.link.model or None, self.link.context_window)

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        await self.link.settled()
        endpoint = self.link.endpoint
        if endpoint is None:
            raise SideCallError(self.link.error or "no model endpoint is connected", "no_endpoint")
        return await complete_with(endpoint, messages, context_window=self.link.context_window,
                                   max_tokens=max_tokens, schema=schema, temperature=temperature,
                                   forms=self.forms)


class EndpointSideCall:
    """A side call over one given endpoint and window (``context_window``,
    tokens, or ``None``): for a caller that holds an endpoint itself."""

    def __init__(self, endpoint: mb.Endpoint, context_window: int | None = None,
                 forms: ShapeForms | None = None) -> None:
        self.endpoint = endpoint
        self.context_window = context_window
        self.forms = forms or ShapeForms()

    async def info(self) -> SideCallInfo:
        return SideCallInfo(getattr(self.endpoint, "model", None) or None, self.context_window)

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        return await complete_with(self.endpoint, messages, context_window=self.context_window,
                                   max_tokens=max_tokens, schema=schema, temperature=temperature,
                                   forms=self.forms)


class ConfigSideCall:
    """A side call that connects from config ``model.*`` on first use (see
    the module doc). Call :meth:`aclose` when done: it closes the endpoint
    and stops an embedded server it started."""

    def __init__(self, config: Any, shapes: ShapeMemory | None = None) -> None:
        self.link = ModelLink(config)
        self._tried = False
        self._call = LinkSideCall(self.link, ShapeForms(shapes))

    async def _ensure(self) -> None:
        if not self._tried:
            self._tried = True
            await self.link.connect()
        if self.link.endpoint is None:
            raise SideCallError(f"no model endpoint: {self.link.error or 'none answered'}", "no_endpoint")

    async def info(self) -> SideCallInfo:
        await self._ensure()
        return SideCallInfo(self.link.model or None, self.link.context_window)

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        await self._ensure()
        return await self._call.complete(messages, max_tokens=max_tokens, schema=schema,
                                         temperature=temperature)

    async def aclose(self) -> None:
        """Close what :meth:`info` or :meth:`complete` connected. Never raises."""
        await self.link.close()
