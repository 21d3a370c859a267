"""Shared shapes for model endpoints: messages, stream events and typed errors.

Every endpoint adapter (Ollama's ``/api/chat``, OpenAI-compatible
``/v1/chat/completions``) turns the wire protocol into the same stream of
:class:`StreamEvent` objects and raises only :class:`EndpointError` subclasses,
so the agent loop never sees HTTP.

Messages handed to :meth:`Endpoint.stream_chat` use one neutral shape,
close to OpenAI's::

    {"role": "system" | "user" | "assistant" | "tool",
     "content": str,
     # assistant only, optional:
     "tool_calls": [{"id": str, "name": str, "arguments": dict}],
     # tool only:
     "tool_call_id": str, "name": str}

Tool schemas use OpenAI's function shape, which Ollama also accepts::

    {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Literal, Protocol, Union

from ..redact import redact

Message = dict[str, Any]
ToolSchema = dict[str, Any]

#: The small tool ``probe_tools`` offers to see whether tools reach the model.
PROBE_TOOL: ToolSchema = {"type": "function", "function": {
    "name": "wisp_probe", "description": "Reports whether tools reach the model.",
    "parameters": {"type": "object", "properties": {"note": {"type": "string", "description": "any text"}},
                   "required": ["note"]}}}


# --- stream events -------------------------------------------------------


@dataclass(frozen=True)
class StreamText:
    """A piece of the reply's visible text."""

    text: str


@dataclass(frozen=True)
class StreamThinking:
    """A piece of the model's reasoning, never part of the reply.

    Comes from Ollama's ``message.thinking``, OpenAI-compatible
    ``delta.reasoning_content`` / ``delta.reasoning``, or ``<think>…</think>``
    inside the content (issue "wisp runs end to end", "Reasoning models").
    """

    text: str


@dataclass(frozen=True)
class ToolCallRequest:
    """One complete tool call the model asked for.

    ``arguments`` is the decoded JSON object; ``raw_arguments`` keeps the text
    as sent when it could not be decoded (then ``arguments`` is ``{}``).
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None


@dataclass(frozen=True)
class StreamUsage:
    """Token counts the endpoint reported for one request (tokens).

    ``cached_tokens`` is how many of the prompt tokens the server took from
    its prompt cache instead of evaluating them (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``, llama.cpp's
    ``timings.cache_n``; the embedded server reports it too), ``None`` when
    the server does not say. :attr:`evaluated_tokens` is the prompt tokens
    the server had to process for this request (issue 10, "prompt-eval
    tokens per turn").
    """

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None

    @property
    def evaluated_tokens(self) -> int | None:
        """Prompt tokens processed for this request: ``prompt - cached`` (``prompt``
        when the cache is not reported; ``None`` when the prompt is not)."""
        if self.prompt_tokens is None:
            return None
        return max(0, self.prompt_tokens - (self.cached_tokens or 0))


@dataclass(frozen=True)
class Waiting:
    """The endpoint is not ready (HTTP 503 while loading a model) or asks wisp
    to slow down (HTTP 429 with ``Retry-After``); wisp waits and retries.

    ``attempt`` counts from 1, ``delay_s`` is the pause before the next try
    (seconds) and ``waited_s`` the time spent waiting so far (seconds).
    """

    reason: str
    attempt: int
    delay_s: float
    waited_s: float
    #: ``"loading"`` (HTTP 503) or ``"rate_limited"`` (HTTP 429 with ``Retry-After``).
    why: str = "loading"

    @property
    def notice(self) -> str:
        """One line for the person: what is waited for, and how long so far."""
        if self.why == "rate_limited":
            return f"{self.reason}; {self.waited_s:.1f} s waited so far."
        return (f"Waiting for the server to load the model: try {self.attempt + 1}, "
                f"{self.waited_s:.1f} s so far ({self.reason}).")


@dataclass(frozen=True)
class KeepAlive:
    """The server holds the reply open with a keep-alive (a blank line, an SSE
    comment) and nothing of the reply. ``waited_s``: seconds since the request
    was sent; ``limit_s``: config ``model.reply_timeout_s``, after which the
    reply ends with :class:`EndpointTimeout`. At most one a second, so the UI
    can show the wait (issue "Nothing runs, leaks, hangs or is lost that
    shouldn't be", "Nothing hangs")."""

    waited_s: float
    limit_s: float


@dataclass(frozen=True)
class Done:
    """The stream ended normally.

    ``reason`` is ``"stop"``, ``"length"`` (cut at the output limit),
    ``"tool_calls"`` or another string the server sent.
    """

    reason: str


StreamEvent = Union[StreamText, StreamThinking, ToolCallRequest, StreamUsage, Waiting, KeepAlive, Done]


@dataclass
class ChatOptions:
    """Per-request settings.

    ``context_window`` (tokens) is sent as Ollama's ``options.num_ctx``;
    ``think`` is ``"on"``, ``"off"`` or ``"auto"`` (Ollama's ``think``; ``auto``
    sends nothing); ``max_tokens`` caps the reply (tokens); ``temperature``.
    """

    context_window: int | None = None
    think: Literal["on", "off", "auto"] = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# --- errors --------------------------------------------------------------


class EndpointError(Exception):
    """Base of every error an endpoint raises. ``str(err)`` is one line for a person,
    saying what happened and what to do. The message is passed through
    :func:`wisp.core.redact.redact` when the error is made: a server that
    echoes the bearer token in a 401, or a password in ``model.endpoint``'s
    URL, never reaches the screen, the store or the audit log from here."""

    kind = "endpoint"

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(redact(message) if isinstance(message, str) else message, *args)


class EndpointUnreachable(EndpointError):
    """Connection refused or host unreachable."""

    kind = "unreachable"


class EndpointTimeout(EndpointError):
    """No answer (or no next chunk) within the configured timeout."""

    kind = "timeout"


class ModelNotFound(EndpointError):
    """The endpoint does not have the model. ``available`` lists the names it has."""

    kind = "model_not_found"

    def __init__(self, message: str, model: str, available: list[str]):
        super().__init__(message)
        self.model = model
        self.available = available


class BadRequest(EndpointError):
    """HTTP 400. ``context_overflow`` is true when the prompt did not fit the window;
    then ``prompt_tokens`` and ``window`` (tokens) are set when the server said
    them (llama.cpp, llama-cpp-python, vLLM and OpenAI do; an older llama.cpp
    says neither), and ``detail`` is the server's own words, shortened."""

    kind = "bad_request"

    def __init__(self, message: str, context_overflow: bool = False, *, prompt_tokens: int | None = None,
                 window: int | None = None, detail: str | None = None):
        super().__init__(message)
        self.context_overflow = context_overflow
        self.prompt_tokens = prompt_tokens
        self.window = window
        self.detail = redact(detail)


class ServerError(EndpointError):
    """HTTP 5xx (after the bounded wait for 503), or another unexpected status."""

    kind = "server_error"

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class MalformedStream(EndpointError):
    """A line of the NDJSON or SSE stream could not be read."""

    kind = "malformed"


class RateLimited(ServerError):
    """HTTP 429 past the retries wisp makes. ``retry_after_s`` is the wait
    the server asked for (seconds, from ``Retry-After``), ``None`` when it
    did not say."""

    kind = "rate_limited"

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message, 429)
        self.retry_after_s = retry_after_s


class TooLarge(EndpointError):
    """The endpoint sent more than wisp reads at once: a stream line or an
    SSE event without its end, or a body (once decompressed) past its cap.
    ``limit`` is the cap (bytes); the request is closed when this is raised."""

    kind = "too_large"

    def __init__(self, message: str, limit: int):
        super().__init__(message)
        self.limit = limit


class StreamErrorObject(EndpointError):
    """The server sent an error object inside a stream that began with HTTP 200."""

    kind = "stream_error"


class Disconnected(EndpointError):
    """The connection closed before the stream's last line."""

    kind = "disconnected"


class NoEndpoint(EndpointError):
    """``auto`` found nothing: no Ollama, no OpenAI-compatible server, no embedded model."""

    kind = "no_endpoint"


# --- the endpoint protocol ----------------------------------------------


class Endpoint(Protocol):
    """A model endpoint. ``provider`` is ``"ollama"`` or ``"openai"``;
    ``base_url`` like ``http://127.0.0.1:11434``; ``model`` the model name."""

    provider: str
    base_url: str
    model: str

    def stream_chat(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        """Stream one chat request. Raises :class:`EndpointError` subclasses only."""
        ...

    async def list_models(self) -> list[str]:
        """Model names the endpoint serves. Raises :class:`EndpointError`."""
        ...

    async def context_length(self) -> int | None:
        """The model's context window in tokens, if the endpoint says (Ollama ``/api/show``)."""
        ...

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` by the server's own tokenizer (llama.cpp's ``/tokenize``,
        llama-cpp-python's ``/extras/tokenize/count``), cached; ``None`` when the
        server cannot count (Ollama, most OpenAI-compatible servers)."""
        ...

    async def probe_tools(self) -> bool | None:
        """Whether ``tools`` in a request reach the model: ``False`` for a server
        that drops them, ``None`` when it cannot tell. Costs two tiny requests."""
        ...

    def window_advice(self, tokens: int) -> str:
        """How to give this endpoint a window of at least ``tokens`` tokens, in words
        that are true for it (Ollama: num_ctx via model.context_window; the embedded
        server: model.context_window; other servers: their own flag, named)."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP client."""
        ...
