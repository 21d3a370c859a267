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
"""

from __future__ import annotations

from typing import Any

from ..sidecall import Message, SideCallError, SideCallInfo
from . import base as mb
from .link import ModelLink

__all__ = ["LinkSideCall", "ConfigSideCall", "EndpointSideCall", "complete_with"]


async def complete_with(endpoint: mb.Endpoint, messages: list[Message], *, context_window: int | None,
                        max_tokens: int, schema: dict[str, Any] | None = None,
                        temperature: float | None = None) -> str:
    """The visible text of ``endpoint``'s reply to ``messages``: no tools,
    thinking off, at most ``max_tokens`` tokens. ``schema`` is passed to the
    endpoint as ``ChatOptions.extra["schema"]`` for endpoints that constrain
    their output. Raises :class:`SideCallError` (kind of the endpoint error)."""
    options = mb.ChatOptions(context_window=context_window, think="off", max_tokens=max_tokens,
                             temperature=temperature, extra={"schema": schema} if schema else {})
    parts: list[str] = []
    try:
        async for item in endpoint.stream_chat(messages, None, options):
            if isinstance(item, mb.TextDelta):
                parts.append(item.text)
    except mb.EndpointError as exc:
        raise SideCallError(str(exc) or exc.kind, exc.kind) from exc
    return "".join(parts).strip()


class LinkSideCall:
    """A side call through a session's :class:`ModelLink` (the endpoint
    connected at the time of the call)."""

    def __init__(self, link: ModelLink) -> None:
        self.link = link

    async def info(self) -> SideCallInfo:
        """The link's model and window; raises :class:`SideCallError` (kind
        ``no_endpoint``) while nothing is connected."""
        if self.link.endpoint is None:
            raise SideCallError(self.link.error or "no model endpoint is connected", "no_endpoint")
        return SideCallInfo(self.link.model or None, self.link.context_window)

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        endpoint = self.link.endpoint
        if endpoint is None:
            raise SideCallError(self.link.error or "no model endpoint is connected", "no_endpoint")
        return await complete_with(endpoint, messages, context_window=self.link.context_window,
                                   max_tokens=max_tokens, schema=schema, temperature=temperature)


class EndpointSideCall:
    """A side call over one given endpoint and window (``context_window``,
    tokens, or ``None``): for a caller that holds an endpoint itself."""

    def __init__(self, endpoint: mb.Endpoint, context_window: int | None = None) -> None:
        self.endpoint = endpoint
        self.context_window = context_window

    async def info(self) -> SideCallInfo:
        return SideCallInfo(getattr(self.endpoint, "model", None) or None, self.context_window)

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        return await complete_with(self.endpoint, messages, context_window=self.context_window,
                                   max_tokens=max_tokens, schema=schema, temperature=temperature)


class ConfigSideCall:
    """A side call that connects from config ``model.*`` on first use (see
    the module doc). Call :meth:`aclose` when done: it closes the endpoint
    and stops an embedded server it started."""

    def __init__(self, config: Any) -> None:
        self.link = ModelLink(config)
        self._tried = False

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
        return await LinkSideCall(self.link).complete(messages, max_tokens=max_tokens, schema=schema,
                                                      temperature=temperature)

    async def aclose(self) -> None:
        """Close what :meth:`info` or :meth:`complete` connected. Never raises."""
        await self.link.close()
