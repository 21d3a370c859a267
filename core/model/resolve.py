"""Pick the model endpoint from the settings: Ollama, OpenAI-compatible, or the embedded default.

Settings are plain values (config ``model.*``)::

    provider     "ollama" | "openai" | "auto"
    endpoint     base URL or None (the provider's default)
    name         model name or None (the first model the endpoint lists)
    api_key_env  name of the environment variable holding the API key, or None
    gguf         path of a GGUF file for the embedded default, or None
    timeout_s    seconds (reads and connecting, see the adapters)
    reply_timeout_s  seconds a whole reply may take
    load_wait_s  seconds of waiting out HTTP 503
    context_window   tokens, or None: the embedded server's n_ctx (capped at the
                     model's trained length)
    tool_mode    "native" | "prompted" | "auto": native starts the embedded
                 server with the function-calling chat format
    embedded_idle_s  seconds a shared embedded server lives unused (None: embedded.DEFAULT_IDLE_S)
    embedded_threads llama.cpp threads of the embedded server (0 or None: every usable core)
    data_dir     where shared embedded servers keep their lock, port file and
                 log (``<data_dir>/embedded``); None runs a private server

``auto`` tries Ollama at 127.0.0.1:11434 (``GET /api/tags``), then an
OpenAI-compatible server at 127.0.0.1:8080 (``GET /v1/models``), then the
embedded default (llama.cpp's server with SmolLM2), and otherwise raises
:class:`NoEndpoint` with one message saying how to get a model.

Connect once (issue 12): each candidate is probed through the client of the
endpoint made for it, and the endpoint that answers keeps that client for
listing and chatting; its probe's answer is its model list, so the models
are not asked for twice. A configured model is never listed.

The API key is read from the environment variable at resolve time, taken
out of wisp's environment, and lives only in the endpoint's request headers
(and :mod:`wisp.core.redact`'s list of values to mask).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from ..redact import redact, take_secret
from ._transport import DEFAULT_LOAD_WAIT_S, DEFAULT_REPLY_TIMEOUT_S, DEFAULT_TIMEOUT_S
from .base import EndpointError, NoEndpoint
from .ollama import DEFAULT_OLLAMA_URL, OllamaEndpoint
from .openai import DEFAULT_OPENAI_URL, OpenAIEndpoint

if TYPE_CHECKING:  # the embedded server's module is imported only to start or find one (issue 12)
    from .embedded import EmbeddedServer, SharedServer

PROBE_CONNECT_TIMEOUT_S = 1.0
PROBE_READ_TIMEOUT_S = 3.0
SUGGESTED_OLLAMA_MODEL = "llama3.2"


@dataclass
class EndpointSettings:
    """The ``model.*`` settings :func:`resolve_endpoint` needs (see the module doc)."""

    provider: str = "auto"
    endpoint: str | None = None
    name: str | None = None
    api_key_env: str | None = None
    gguf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    load_wait_s: float = DEFAULT_LOAD_WAIT_S
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S
    context_window: int | None = None
    tool_mode: str = "auto"
    embedded_idle_s: float | None = None
    embedded_threads: int | None = None
    data_dir: str | None = None

    @classmethod
    def from_config(cls, config: Any) -> "EndpointSettings":
        """The settings from a config's ``model.*`` keys (anything with ``get(key)``,
        like :class:`wisp.core.config.Config`), with ``data_dir`` from its
        ``data_dir`` attribute when it has one (shared embedded servers)."""
        get = config.get
        data_dir = getattr(config, "data_dir", None)
        return cls(
            provider=get("model.provider") or "auto", endpoint=get("model.endpoint"), name=get("model.name"),
            api_key_env=get("model.api_key_env"), gguf=get("model.gguf"),
            timeout_s=float(get("model.timeout_s") or DEFAULT_TIMEOUT_S),
            load_wait_s=float(get("model.load_wait_s") if get("model.load_wait_s") is not None else DEFAULT_LOAD_WAIT_S),
            reply_timeout_s=float(get("model.reply_timeout_s") or DEFAULT_REPLY_TIMEOUT_S),
            context_window=get("model.context_window"), tool_mode=get("model.tool_mode") or "auto",
            embedded_idle_s=get("model.embedded_idle_s"), embedded_threads=get("model.embedded_threads"),
            data_dir=str(data_dir) if data_dir else None,
        )


@dataclass
class ResolvedEndpoint:
    """What :func:`resolve_endpoint` found.

    ``endpoint`` is ready to stream; ``label`` is for the status bar, like
    ``"ollama http://127.0.0.1:11434"``; ``embedded`` is the embedded server
    (or ``None``): a :class:`SharedServer` handle, which :meth:`aclose` only
    lets go of (the server serves other wisps and stops when idle), or a
    private :class:`EmbeddedServer`, which :meth:`aclose` stops.
    ``context_window`` (tokens) is known only for the embedded server (its
    ``n_ctx``, authoritative: the server cannot take more), so the caller
    keeps the token budget under it.
    """

    endpoint: OllamaEndpoint | OpenAIEndpoint
    label: str
    embedded: EmbeddedServer | SharedServer | None = None
    context_window: int | None = None

    @property
    def provider(self) -> str:
        return self.endpoint.provider

    @property
    def model(self) -> str:
        return self.endpoint.model

    async def aclose(self) -> None:
        """Close the endpoint's client and stop the embedded server, if any."""
        try:
            await self.endpoint.aclose()
        finally:
            if self.embedded is not None:
                await self.embedded.stop()


EmbeddedFactory = Callable[[], "EmbeddedServer"]


def coerce_settings(settings: Any) -> EndpointSettings:
    """Accept an :class:`EndpointSettings`, a mapping, or any object with the same attributes."""
    if isinstance(settings, EndpointSettings):
        return settings
    names = EndpointSettings.__dataclass_fields__.keys()
    if isinstance(settings, Mapping):
        values = {k: settings[k] for k in names if k in settings and settings[k] is not None}
    else:
        values = {k: getattr(settings, k) for k in names if getattr(settings, k, None) is not None}
    return EndpointSettings(**values)


def read_api_key(env_name: str | None) -> str | None:
    """The API key from the environment variable ``env_name`` (``None`` if
    unset or empty). The variable is taken out of wisp's environment and the
    key kept in memory (:func:`wisp.core.redact.take_secret`), so no child
    process inherits it and every message masks it."""
    return take_secret(env_name)


async def _pick_model(endpoint: OllamaEndpoint | OpenAIEndpoint, name: str | None, empty_hint: str,
                      listed: list[str] | None = None) -> None:
    """Set the endpoint's model: ``name`` when configured (nothing is asked),
    else the first one ``listed`` (a probe's answer) or the endpoint lists."""
    if name:
        endpoint.model = name
        return
    models = listed if listed is not None else await endpoint.list_models()
    if not models:
        raise NoEndpoint(f"{endpoint.display_name} at {endpoint.base_url} has no models. {empty_hint}")
    endpoint.model = models[0]


def _ollama(s: EndpointSettings, url: str) -> OllamaEndpoint:
    return OllamaEndpoint(url, s.name or "", timeout_s=s.timeout_s, load_wait_s=s.load_wait_s,
                          reply_timeout_s=s.reply_timeout_s)


def _openai(s: EndpointSettings, url: str) -> OpenAIEndpoint:
    key = read_api_key(s.api_key_env)
    endpoint = OpenAIEndpoint(url, s.name or "", api_key=key, timeout_s=s.timeout_s, load_wait_s=s.load_wait_s,
                              reply_timeout_s=s.reply_timeout_s)
    if s.api_key_env and key is None:  # the setting is there; the variable it names is not
        endpoint.auth_hint = (f"model.api_key_env names {s.api_key_env}, which is not set in wisp's "
                              f"environment: export {s.api_key_env}=YOUR_KEY before starting wisp.")
    elif key is not None:
        endpoint.auth_hint = f"The key in {s.api_key_env} was refused: check it."
    return endpoint


async def _finish(
    endpoint: OllamaEndpoint | OpenAIEndpoint, name: str | None, empty_hint: str,
    listed: list[str] | None = None,
) -> ResolvedEndpoint:
    try:
        await _pick_model(endpoint, name, empty_hint, listed)
    except BaseException:
        await endpoint.aclose()
        raise
    return ResolvedEndpoint(endpoint, redact(f"{endpoint.provider} {endpoint.base_url}"))


async def _start_embedded(
    s: EndpointSettings,
    factory: EmbeddedFactory | None,
    log_path: str | os.PathLike[str] | None,
    on_status: Callable[[str], Awaitable[None] | None] | None,
) -> ResolvedEndpoint:
    """Find or start the embedded server: shared under ``s.data_dir`` when set,
    else a private child (``factory`` makes it, for tests)."""
    from .embedded import (
        DEFAULT_IDLE_S, DEFAULT_START_TIMEOUT_S, FUNCTION_CALLING_FORMAT, EmbeddedEndpoint, EmbeddedServer,
        EmbeddedSpec, check_gguf, ensure_shared_server, window_for,
    )

    chat_format = FUNCTION_CALLING_FORMAT if (s.tool_mode or "auto") == "native" else None
    if factory is None:  # the model it would serve is its GGUF's name: say a wrong name before any wait
        _refuse_other_model(s.name, check_gguf(s.gguf).stem)
    server: EmbeddedServer | SharedServer
    if factory is None and s.data_dir:
        path = check_gguf(s.gguf)
        n_ctx, trained = window_for(path, s.context_window)
        spec = EmbeddedSpec(path, n_ctx, chat_format, float(s.embedded_idle_s or DEFAULT_IDLE_S), trained,
                            threads=int(s.embedded_threads or 0))
        server = await ensure_shared_server(spec, s.data_dir, start_timeout_s=max(DEFAULT_START_TIMEOUT_S, s.timeout_s),
                                            on_status=on_status)
    else:
        if factory is not None:
            server = factory()
        else:
            n_ctx, _ = window_for(check_gguf(s.gguf), s.context_window)
            server = EmbeddedServer(log_path=log_path, n_ctx=n_ctx, chat_format=chat_format)
        if on_status is not None:
            result = on_status("Starting the embedded model (llama.cpp, SmolLM2)…")
            if result is not None:
                await result
        await server.start(s.gguf)
    try:
        # a restart after an idle stop takes a second or two and says nothing (on_status is
        # for the first start: the TUI shows its line until the connection is made)
        _refuse_other_model(s.name, server.model)
        endpoint = EmbeddedEndpoint(server, timeout_s=s.timeout_s, load_wait_s=s.load_wait_s,  # its own name
                                    reply_timeout_s=s.reply_timeout_s)
        if not endpoint.model:
            await _pick_model(endpoint, None, OPENAI_EMPTY_HINT)
    except BaseException:
        await server.stop()
        raise
    return ResolvedEndpoint(endpoint, f"embedded llama.cpp {server.base_url}", embedded=server,
                            context_window=server.n_ctx)


def _refuse_other_model(name: str | None, served: str | None) -> None:
    """Raise :class:`NoEndpoint` when ``name`` (``--model``, ``model.name``) is
    not ``served``, the one model the embedded server serves (its GGUF's
    name): it answers whatever a request names, and answering as another
    model would record a model that never answered (a new user's
    ``wisp ask --model nonexistent:1b``)."""
    if name and served and name.strip().lower() != served.lower():
        raise NoEndpoint(
            f'No server with model "{name}" answered, and the embedded server serves only {served}. '
            f"Start the server that has it (Ollama: `ollama pull {name}`; or set model.endpoint), or "
            "leave out --model / `wisp config unset model.name` to chat on the embedded model.")


OLLAMA_EMPTY_HINT = f"Pull one with `ollama pull {SUGGESTED_OLLAMA_MODEL}`, or set model.name."
OPENAI_EMPTY_HINT = "Load a model into the server, or set model.name."


async def resolve_endpoint(
    settings: Any,
    *,
    ollama_url: str = DEFAULT_OLLAMA_URL,
    openai_url: str = DEFAULT_OPENAI_URL,
    embedded: bool = True,
    embedded_factory: EmbeddedFactory | None = None,
    embedded_log_path: str | os.PathLike[str] | None = None,
    on_status: Callable[[str], Awaitable[None] | None] | None = None,
) -> ResolvedEndpoint:
    """Build the endpoint the settings ask for.

    ``provider="ollama"`` / ``"openai"``: use ``settings.endpoint`` (or the
    default URL); with no ``name``, ask the endpoint for its models and take the
    first. ``provider="auto"``: probe ``settings.endpoint`` if set (as Ollama,
    then as OpenAI-compatible), else ``ollama_url`` then ``openai_url`` (about
    1 s connect timeout each), then start the embedded default when
    ``embedded`` is true and it is installed.

    ``ollama_url``, ``openai_url``, ``embedded`` and ``embedded_factory`` are
    there for tests. ``on_status`` is called with a short line before slow steps
    (starting the embedded server).

    Raises NoEndpoint when ``auto`` finds nothing (or a server has no models),
    EmbeddedServerError when the embedded server fails to start, and other
    EndpointError subclasses from listing models on an explicit provider.
    """
    s = coerce_settings(settings)
    provider = (s.provider or "auto").lower()
    if provider == "ollama":
        return await _finish(_ollama(s, s.endpoint or ollama_url), s.name, OLLAMA_EMPTY_HINT)
    if provider == "openai":
        return await _finish(_openai(s, s.endpoint or openai_url), s.name, OPENAI_EMPTY_HINT)
    if provider != "auto":
        raise NoEndpoint(f'model.provider is "{s.provider}"; set it to ollama, openai or auto.')

    tried: list[str] = []
    if s.endpoint:
        candidates = [("ollama", s.endpoint), ("openai", s.endpoint)]
    else:
        candidates = [("ollama", ollama_url), ("openai", openai_url)]
    for kind, url in candidates:
        endpoint = _ollama(s, url) if kind == "ollama" else _openai(s, url)
        if kind == "ollama":
            path, key, label = "/api/tags", "models", f"Ollama at {url}"
        else:
            path, key, label = "/v1/models", "data", f"an OpenAI-compatible server at {endpoint.base_url}"
        ok, why, data = await endpoint.probe(path, key, connect_s=PROBE_CONNECT_TIMEOUT_S,
                                             read_s=PROBE_READ_TIMEOUT_S)
        if not ok:
            await endpoint.aclose()
            tried.append(f"{label} ({why})")
            continue
        try:
            listed = None if s.name else endpoint.models_in(data)  # the probe's answer is the model list
        except EndpointError as exc:
            await endpoint.aclose()
            tried.append(f"{label} ({exc})")
            continue
        try:
            return await _finish(endpoint, s.name, OLLAMA_EMPTY_HINT if kind == "ollama" else OPENAI_EMPTY_HINT,
                                 listed)
        except EndpointError as exc:
            tried.append(f"{label} ({exc})")

    if embedded and (s.gguf or not s.endpoint):
        from .embedded import embedded_available, server_importable

        available = server_importable() and (bool(s.gguf) or embedded_available())
        if available or embedded_factory is not None:
            return await _start_embedded(s, embedded_factory, embedded_log_path, on_status)
        tried.append("the embedded default (not installed)")

    raise NoEndpoint(
        "No model endpoint answered (tried " + "; ".join(tried) + "). "
        f"Start Ollama with `ollama serve` and `ollama pull {SUGGESTED_OLLAMA_MODEL}`, "
        "or install the embedded default with `pip install 'wisp[local]'`."
    )
