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
server's ``n_ctx``, Ollama's ``/api/show``: asked once per endpoint and
model, then kept in ``endpoints.json``, :mod:`wisp.core.model.known`), else
:data:`wisp.core.tokens.DEFAULT_CONTEXT_WINDOW`.

Switching the model (issue 16, "Models and endpoints") happens here too,
the one place that holds the connection: :meth:`ModelLink.switch_model`
changes the model of the endpoint in use from its next request and re-reads
the window; :meth:`ModelLink.choose_model` picks the model before a connect
(``wisp ask --model``). The choice outlives a reconnect. Calibration is kept
per model by the context, which reads :attr:`ModelLink.model`. The link
writes no audit event (``core/model`` knows no audit log): the caller does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable

from ..tokens import window_from
from . import base as mb
from .known import KnownWindows
from .resolve import EndpointSettings, ResolvedEndpoint, resolve_endpoint
from .prompted import to_prompted_messages
from .tool_modes import ToolLayer, ToolModeEndpoint, apply_tool_mode, make_layer

__all__ = ["ModelLink", "ModelSwitch", "settings_from_config", "match_model"]


@dataclass(frozen=True)
class ModelSwitch:
    """What :meth:`ModelLink.switch_model` did: the model ``before`` and
    ``after`` (names), and the ``window`` requests are made with from now on
    (tokens) with the endpoint's ``reported`` one (tokens, or ``None``)."""

    before: str
    after: str
    window: int | None
    reported: int | None


def match_model(name: str, models: list[str]) -> str | None:
    """The name in ``models`` that ``name`` means: itself, else Ollama's
    ``NAME:latest``, else the only one it matches ignoring case; ``None``
    when none (or several) do."""
    name = (name or "").strip()
    if not name:
        return None
    if name in models:
        return name
    if ":" not in name and f"{name}:latest" in models:
        return f"{name}:latest"
    folded = [m for m in models if m.lower() == name.lower() or m.lower() == f"{name.lower()}:latest"]
    return folded[0] if len(folded) == 1 else None


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
        #: The model chosen for this session (``/model``, ``wisp ask --model``), used on every
        #: connect instead of config ``model.name``; ``None`` follows the config.
        self.chosen_model: str | None = None
        #: Set while :meth:`connect` runs (and until it ends); see :meth:`settled`.
        self._connecting: asyncio.Event | None = None

    async def settled(self) -> None:
        """Return once no :meth:`connect` is under way. A side call that
        comes while the session connects (the embedded server can take a
        minute or two to start on 2 cores) waits for that connection rather
        than failing with "no model endpoint is connected" beside a chat that
        works. Returns at once when nothing connects."""
        connecting = self._connecting
        if connecting is not None and not connecting.is_set():
            await connecting.wait()

    def choose_model(self, name: str | None) -> None:
        """Use model ``name`` from the next :meth:`connect` on, whatever
        config ``model.name`` says (``None`` follows the config again)."""
        self.chosen_model = (name or "").strip() or None

    async def list_models(self) -> list[str]:
        """The models the endpoint in use serves (Ollama's ``/api/tags``,
        ``/v1/models``), in its order. Raises
        :class:`~wisp.core.model.base.NoEndpoint` while not connected, and
        what the endpoint raises."""
        if self.endpoint is None:
            raise mb.NoEndpoint(self.error or "no model endpoint is connected")
        return await self.endpoint.list_models()

    async def switch_model(self, name: str) -> ModelSwitch:
        """Ask the endpoint in use for model ``name`` from its next request.

        The name must be one the endpoint lists (:func:`match_model`);
        the window is read again for the new model (config
        ``model.context_window`` still wins); the choice outlives a
        reconnect. Raises :class:`~wisp.core.model.base.NoEndpoint` while not
        connected, :class:`~wisp.core.model.base.ModelNotFound` (naming the
        models it has) for another name, an
        :class:`~wisp.core.model.base.EndpointError` for the embedded server
        (it serves the one GGUF file it was started with) or when the list
        cannot be read."""
        if self.endpoint is None:
            raise mb.NoEndpoint(self.error or "no model endpoint is connected")
        models = await self.endpoint.list_models()
        chosen = match_model(name, models)
        if chosen is None:
            have = ", ".join(models) if models else "none"
            raise mb.ModelNotFound(f'{self.label} has no model "{name}"; it has: {have}', name, models)
        if self.embedded and chosen != self.model:
            raise mb.EndpointError("the embedded server serves the one GGUF file it was started with; "
                                   "set model.gguf to another file (it restarts), or use Ollama for several models")
        before = self.model
        inner = getattr(self.endpoint, "inner", self.endpoint)  # the client under the tool-mode layer
        inner.model = chosen
        if hasattr(inner, "_context_length"):  # Ollama keeps the window of the model it was made for
            inner._context_length = None
        if chosen != before:  # whether tools reach the model natively is the new model's to say again
            self.endpoint = apply_tool_mode(inner, self.config.get("model.tool_mode"))
        self.model = chosen
        self.chosen_model = chosen
        window = None
        if not self.config.get("model.context_window"):
            try:
                window = await inner.context_length()
            except mb.EndpointError:
                window = None
        self.reported_window = int(window) if window else None
        return ModelSwitch(before, chosen, self.context_window, self.reported_window)

    @property
    def context_window(self) -> int | None:
        """The window requests are made with (tokens; :func:`wisp.core.tokens.window_from`
        of config ``model.context_window`` and the endpoint's), or ``None``
        while nothing is connected. Read afresh, so ``/config set
        model.context_window`` applies from the next request."""
        if not self.connected:
            return None
        return window_from(self.config.get("model.context_window"), self.reported_window, cap=self.window_cap)[0]

    @property
    def window_cap(self) -> int | None:
        """The window the endpoint cannot go beyond whatever config says
        (tokens): the embedded server's ``n_ctx``; ``None`` for other endpoints
        (Ollama takes ``num_ctx`` from config; other servers say so in an error)."""
        return self.reported_window if self.connected and self.embedded else None

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
        was connected closes its old endpoint first. :meth:`settled` waits
        for it to end."""
        self._connecting = done = asyncio.Event()
        try:
            return await self._connect(on_status)
        finally:
            done.set()

    async def _connect(self, on_status: Callable[[str], Awaitable[Any] | Any] | None) -> bool:
        await self.close()
        self.connected = False
        self.reported_window = None
        try:
            settings = settings_from_config(self.config)
            if self.chosen_model:
                settings = replace(settings, name=self.chosen_model)
            resolved = await resolve_endpoint(settings, on_status=on_status)
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
            # asked of the endpoint once, then kept (issue 12, "Connect once")
            known = self._known()
            window = known.get(resolved.label, resolved.endpoint.model) if known is not None else None
            if window is None:
                try:
                    window = await resolved.endpoint.context_length()
                except mb.EndpointError:
                    window = None
                if window and known is not None:
                    known.remember(resolved.label, resolved.endpoint.model, int(window))
        self.reported_window = int(window) if window else None
        self.connected = True
        self.error = None
        return True

    def _known(self) -> KnownWindows | None:
        """The windows kept beside the config file (``None`` for a config that has no file)."""
        path = getattr(self.config, "path", None)
        return KnownWindows.beside(path) if path else None

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

    def tool_layer(self, schemas: list[dict[str, Any]] | None) -> tuple[str, str] | None:
        """How the next request gives ``schemas`` to the model: ``(mode, text)``,
        ``mode`` ``native`` or ``prompted`` and ``text`` everything of the tools
        the model reads (the schemas as JSON, or the prompted protocol's text
        and worked examples); ``None`` for no tools or while not connected.
        The context counts its tools layer from it, so a prompted layer is
        counted as sent (issue "Real models, real work")."""
        layer = self._layer(schemas)
        return (layer.mode, layer.prompt_text) if layer is not None else None

    def _layer(self, schemas: list[dict[str, Any]] | None) -> ToolLayer | None:
        """The connected endpoint's layer; not connected, the one config
        ``model.tool_mode`` names (``None`` for ``auto``: unknown until connected)."""
        if not schemas or not self.tool_mode_known:
            return None
        if isinstance(self.endpoint, ToolModeEndpoint):
            return self.endpoint.layer_now(schemas)
        return make_layer(self.config.get("model.tool_mode"), schemas)

    @property
    def tool_mode_known(self) -> bool:
        """Whether how the endpoint takes tools is known: connected, or set by
        config ``model.tool_mode`` (``auto`` is known only once connected)."""
        return isinstance(self.endpoint, ToolModeEndpoint) or self.config.get("model.tool_mode") in ("native",
                                                                                                  "prompted")

    def as_sent(self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]]
                ) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
        """``(mode, messages, tools)`` exactly as the next request sends them
        (see :meth:`ToolModeEndpoint.as_sent`); ``("native", messages, schemas)``
        while not connected."""
        layer = self._layer(schemas)
        if layer is None or layer.mode == "native":
            return "native", messages, schemas
        return "prompted", to_prompted_messages(messages, schemas), []

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
