"""The session's link to its model: which endpoint answers, under what label, with what window.

A :class:`ModelLink` is made once with the session, before the endpoint is
known, and handed to everything that needs the model: the agent (which
streams through :attr:`ModelLink.endpoint`), the side calls
(:class:`wisp.core.model.sidecall.LinkSideCall`) and the context (which
reads :attr:`model` and :attr:`context_window`). :meth:`connect` fills it in;
a reconnect (``/config set model.name …``) changes it in place, so nothing
has to be re-bound (issue "One core, built once").

The window's resolution lives here, in one place: config
``model.context_window``, else what the endpoint says (the embedded
server's ``n_ctx``, Ollama's ``/api/show``), else
:data:`wisp.core.tokens.DEFAULT_CONTEXT_WINDOW`.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from ..tokens import window_from
from . import base as mb
from .resolve import EndpointSettings, ResolvedEndpoint, resolve_endpoint
from .tool_modes import apply_tool_mode

__all__ = ["ModelLink", "settings_from_config"]


def settings_from_config(config: Any) -> EndpointSettings:
    """The :class:`EndpointSettings` of config ``model.*`` (a
    :class:`wisp.core.config.Config`): :meth:`EndpointSettings.from_config`."""
    return EndpointSettings.from_config(config)


class ModelLink:
    """The connection to the model (see the module doc).

    Attributes: ``endpoint`` (an :class:`~wisp.core.model.base.Endpoint`, or
    ``None`` until connected), ``label`` (for the status bar, e.g. ``ollama
    http://127.0.0.1:11434``), ``model`` (its name, ``""`` until known),
    ``reported_window`` (tokens, what the endpoint said, or ``None``),
    ``context_window`` (tokens, ``None`` until connected), ``error`` (why
    the last connect failed, or ``None``), ``provider``.
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self.endpoint: mb.Endpoint | None = None
        self.label = "not connected"
        self.model = ""
        self.reported_window: int | None = None
        #: True once a connect succeeded (and until the next one fails).
        self.connected = False
        self.error: str | None = None
        self._resolved: ResolvedEndpoint | None = None

    @property
    def context_window(self) -> int | None:
        """The window requests are made with (tokens; :func:`wisp.core.tokens.window_from`
        of config ``model.context_window`` and the endpoint's), or ``None``
        while nothing is connected. Read afresh, so ``/config set
        model.context_window`` applies from the next request."""
        if not self.connected:
            return None
        if self.embedded and self.reported_window:  # the embedded server's n_ctx: it cannot take more
            return self.reported_window
        return window_from(self.config.get("model.context_window"), self.reported_window)[0]

    def refresh(self) -> None:
        """Apply settings that need no reconnect (``model.tool_mode``) before a turn."""
        if self.endpoint is not None:
            apply_tool_mode(self.endpoint, self.config.get("model.tool_mode"))

    @property
    def provider(self) -> str | None:
        """``ollama`` or ``openai`` once connected, else ``None``."""
        return getattr(self.endpoint, "provider", None) if self.endpoint is not None else None

    async def connect(self, on_status: Callable[[str], Awaitable[Any] | Any] | None = None) -> bool:
        """Resolve the endpoint from config ``model.*`` (which may start the
        embedded server) and the window (see the module doc). ``on_status``
        gets a short line before slow steps. Returns False and sets
        :attr:`error` on failure; never raises an endpoint error. A link that
        was connected closes its old endpoint first."""
        await self.close()
        self.connected = False
        self.reported_window = None
        try:
            resolved = await resolve_endpoint(settings_from_config(self.config), on_status=on_status)
        except mb.EndpointError as exc:
            self.error = str(exc)
            self.label = "no endpoint"
            return False
        self._resolved = resolved
        # the tools reach the model natively or by wisp's prompted protocol (issue "Real models, real work")
        self.endpoint = apply_tool_mode(resolved.endpoint, self.config.get("model.tool_mode"))
        self.label = resolved.label
        self.model = resolved.endpoint.model
        window = resolved.context_window
        if window is None and not self.config.get("model.context_window"):
            try:
                window = await resolved.endpoint.context_length()
            except mb.EndpointError:
                window = None
        self.reported_window = int(window) if window else None
        self.connected = True
        self.error = None
        return True

    @property
    def embedded(self) -> bool:
        """True when the endpoint is wisp's embedded llama.cpp server."""
        return self._resolved is not None and getattr(self._resolved, "embedded", None) is not None

    def window_advice(self, tokens: int) -> str:
        """How to give the model a window of at least ``tokens`` tokens, true
        for the endpoint in use (issue "Real models, real work": for Ollama it
        is ``num_ctx``, sent from ``model.context_window``; for the embedded
        server it is ``model.context_window``, which it is started with; for
        other servers, their own flag, named). One sentence, no full stop."""
        size = 4096
        while size < tokens * 1.25:
            size *= 2
        setting = (f"/config set model.context_window {size} (in a shell: wisp config set model.context_window "
                   f"{size})")
        if self.provider == "ollama":
            return f"Raise the window to at least {size:,} tokens: {setting}; it is sent to Ollama as num_ctx"
        if self.embedded:
            return (f"Raise the window to at least {size:,} tokens: {setting}; the embedded server is started "
                    "with it, up to the model's trained length")
        return (f"Start the server with a context of at least {size:,} tokens (llama.cpp: --ctx-size {size}; "
                f"vLLM: --max-model-len {size}; LM Studio: the model's Context Length), then {setting}")

    async def close(self) -> None:
        """Close the endpoint's client and stop an embedded server this link
        started. Never raises."""
        resolved, self._resolved = self._resolved, None
        endpoint, self.endpoint = self.endpoint, None
        if resolved is not None:
            try:
                await resolved.aclose()
            except Exception:
                pass
        elif endpoint is not None:
            try:
                await endpoint.aclose()
            except Exception:
                pass
