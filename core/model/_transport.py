"""HTTP plumbing shared by the Ollama and OpenAI-compatible adapters.

Private to :mod:`wisp.core.model`. It owns the httpx client, maps every httpx
failure and every non-200 status to a typed :class:`EndpointError`, and waits
out HTTP 503 (a server still loading its model) with bounded backoff, yielding
:class:`Waiting` events so the UI can show the wait.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from typing import Any, AsyncIterator

import httpx

from .base import (
    BadRequest,
    Disconnected,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedStream,
    ModelNotFound,
    ServerError,
    Waiting,
)

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_LOAD_WAIT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
RETRY_MAX_DELAY_S = 4.0

_OVERFLOW_RE = re.compile(
    r"context[ _-]?(length|window|size)|too many tokens|exceed|maximum context|n_ctx|num_ctx|too long",
    re.IGNORECASE,
)
_MODEL_MISSING_RE = re.compile(
    r"model\b.*\b(not found|does not exist|not exist|no such|unknown|not available)"
    r"|(unknown|no such|invalid) model",
    re.IGNORECASE,
)


_OVERFLOW_NUMBERS = (
    # llama-cpp-python (inside a stream, and the server's own formatter), vLLM and OpenAI
    (re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)"), "prompt", "window"),
    (re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens(?: \((\d+) in the messages)?",
                re.IGNORECASE | re.DOTALL), "window", "total"),
)


def suggest_window(tokens: int) -> int:
    """A window that holds ``tokens`` with a quarter to spare: the next power of two,
    at least 4,096 (tokens)."""
    size = 4096
    while size < tokens * 1.25:
        size *= 2
    return size


def overflow_numbers(message: str, obj: Any = None) -> tuple[int | None, int | None]:
    """``(prompt_tokens, window)`` from an overflow error, as far as it says them.

    Reads llama.cpp's ``n_prompt_tokens`` and ``n_ctx`` fields (in the error
    object or beside it), and the messages of llama-cpp-python ("Requested
    tokens (N) exceed context window of M"), vLLM and OpenAI ("maximum context
    length is M tokens. However, you requested T tokens (N in the messages,
    …)").
    """
    prompt = window = None
    for holder in (obj, obj.get("error") if isinstance(obj, dict) else None):
        if isinstance(holder, dict):
            prompt = prompt or _int(holder.get("n_prompt_tokens"))
            window = window or _int(holder.get("n_ctx"))
    for pattern, first, second in _OVERFLOW_NUMBERS:
        m = pattern.search(message or "")
        if not m:
            continue
        if first == "prompt":
            prompt, window = prompt or int(m.group(1)), window or int(m.group(2))
        else:
            window = window or int(m.group(1))
            prompt = prompt or int(m.group(3) or m.group(2))
        break
    return prompt, window


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def new_call_id() -> str:
    """A fresh tool-call id, ``call_`` and 12 hex digits."""
    return "call_" + uuid.uuid4().hex[:12]


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as sent (object or JSON text) → ``(arguments, raw_arguments)``.

    ``raw_arguments`` is the text when it could not be decoded into an object
    (then ``arguments`` is ``{}``), else ``None``.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            value = json.loads(raw)
        except ValueError:
            return {}, raw
        if isinstance(value, dict):
            return value, None
        return {}, raw
    return {}, json.dumps(raw)


def short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, for messages."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def error_text(body: bytes) -> tuple[str, str | None]:
    """Pull the message (and a code, if any) out of an error body.

    Understands Ollama's ``{"error": "..."}``, OpenAI's
    ``{"error": {"message": ..., "code": ...}}``, FastAPI's ``{"detail": ...}``
    and plain text.
    """
    text = body.decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return text, None
    return error_from_object(obj)


def error_from_object(obj: Any) -> tuple[str, str | None]:
    """Message and code of an error object (see :func:`error_text`)."""
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message")))
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or json.dumps(err)
            code = err.get("code") or err.get("type")
            return str(msg), (str(code) if code is not None else None)
        if isinstance(err, list):  # FastAPI validation errors
            return "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in err), None
        if err is not None:
            return str(err), None
    return json.dumps(obj), None


class HttpEndpoint:
    """Base of the adapters: client, URL joining, error mapping and the 503 wait.

    ``timeout_s`` (seconds) bounds every read, so a stream that stalls between
    chunks also times out; connecting is bounded by ``connect_timeout_s``.
    ``load_wait_s`` (seconds) is the longest total wait on HTTP 503 before
    giving up; ``retry_base_s`` is the first pause, doubled each try up to 4 s.
    """

    provider = "endpoint"
    display_name = "the endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        load_wait_s: float = DEFAULT_LOAD_WAIT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        retry_base_s: float = 0.25,
        client: httpx.AsyncClient | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = self.normalise_base_url(base_url)
        self.model = model
        self.timeout_s = float(timeout_s)
        self.load_wait_s = float(load_wait_s)
        self.retry_base_s = float(retry_base_s)
        #: What to do when the server refuses access (HTTP 401/403); the
        #: resolver says more when it knows where the key should come from.
        self.auth_hint = "Set model.api_key_env to the environment variable that holds the API key."
        self._headers = dict(headers or {})
        self._owns_client = client is None
        if client is None:
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=min(connect_timeout_s, self.timeout_s)),
                trust_env=False,
            )
        self._client = client

    # -- hooks ----------------------------------------------------------

    @staticmethod
    def normalise_base_url(base_url: str) -> str:
        return base_url.strip().rstrip("/")

    def start_hint(self) -> str:
        """What to do when nothing listens at ``base_url``."""
        return "Start the server or set model.endpoint."

    def log_advice(self) -> str:
        """Where to look when the server misbehaves (the embedded server names its log)."""
        return "Check the server's log and try again."

    def window_advice(self, tokens: int) -> str:
        """How to give this endpoint a window of at least ``tokens`` (see the
        :class:`~wisp.core.model.base.Endpoint` protocol). This default is for
        an OpenAI-compatible server wisp did not start: its window is its own
        start flag."""
        size = suggest_window(tokens)
        return (f"Restart the server with a window of at least {size:,} tokens (llama.cpp's llama-server: "
                f"--ctx-size {size}; llama-cpp-python: --n_ctx {size}; vLLM: --max-model-len {size}; LM Studio: "
                f"the model's context length), then set model.context_window to {size}")

    def overflow_error(self, detail: str, prompt_tokens: int | None, window: int | None) -> "BadRequest":
        """The error for a prompt that did not fit: what happened, in numbers when
        known, and how to raise the window for this endpoint."""
        if prompt_tokens and window:
            what = f"The prompt needed {prompt_tokens:,} tokens of the server's {window:,}-token window"
        elif window:
            what = f"The prompt did not fit the server's {window:,}-token window"
        else:
            what = f"The prompt did not fit the model's context window ({short(detail, 100)})"
        advice = self.window_advice(max(prompt_tokens or 0, (window or 0) + 1))
        return BadRequest(f"{what}. {advice}, or start a new conversation.", context_overflow=True,
                          prompt_tokens=prompt_tokens, window=window)

    async def count_tokens(self, text: str) -> int | None:
        """Not supported by this endpoint: ``None`` (see the Endpoint protocol)."""
        return None

    async def probe_tools(self) -> bool | None:
        """Cannot tell: ``None`` (see the Endpoint protocol)."""
        return None

    def model_missing_message(self, available: list[str]) -> str:
        have = ", ".join(available) if available else "no models"
        return (
            f'{self.display_name} at {self.base_url} has no model "{self.model}". '
            f"It has: {have}. Set model.name to one of them."
        )

    async def list_models(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- public helpers --------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client if this endpoint created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:  # never shows headers (they may hold an API key)
        return f"{type(self).__name__}({self.base_url!r}, {self.model!r})"

    # -- errors ---------------------------------------------------------

    def map_http_error(self, exc: Exception, path: str, *, streaming: bool = False) -> EndpointError:
        """An httpx exception → the typed error, with a one-line message."""
        url = self.base_url + path
        if isinstance(exc, EndpointError):
            return exc
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
            return EndpointUnreachable(
                f"The endpoint URL {url} is not usable ({short(exc)}). "
                "Set model.endpoint to a URL like http://127.0.0.1:11434."
            )
        if isinstance(exc, httpx.ConnectTimeout):
            return EndpointTimeout(
                f"Connecting to {self.display_name} at {self.base_url} timed out. "
                f"Check that the server is running and model.endpoint is right."
            )
        if isinstance(exc, httpx.ConnectError):
            return EndpointUnreachable(f"Cannot connect to {self.display_name} at {self.base_url}. {self.start_hint()}")
        if isinstance(exc, httpx.TimeoutException):
            what = "sent nothing more of the reply for" if streaming else "did not answer within"
            return EndpointTimeout(
                f"{self.display_name} at {self.base_url} {what} {self.timeout_s:g} s. "
                "The model may still be loading or be too slow; try again or raise model.timeout_s."
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError)):
            when = "in the middle of the reply" if streaming else "before answering"
            return Disconnected(
                f"{self.display_name} at {self.base_url} closed the connection {when} ({short(exc, 80)}). "
                f"{self.log_advice()}"
            )
        if isinstance(exc, httpx.HTTPError):
            return EndpointError(f"Request to {url} failed: {type(exc).__name__}: {short(exc)}. Try again.")
        return EndpointError(f"Request to {url} failed unexpectedly: {type(exc).__name__}: {short(exc)}.")

    def is_model_missing(self, status: int, message: str, code: str | None) -> bool:
        if code and "model_not_found" in code:
            return True
        return status in (400, 404) and bool(_MODEL_MISSING_RE.search(message))

    async def status_error(self, status: int, body: bytes, path: str) -> EndpointError:
        """A non-200 answer → the typed error. Fetches the model list for an unknown model."""
        message, code = error_text(body)
        if self.is_model_missing(status, message, code):
            available = await self.safe_list_models()
            return ModelNotFound(self.model_missing_message(available), self.model, available)
        detail = short(message) if message else "no details"
        if status == 400:
            overflow = bool(_OVERFLOW_RE.search(message)) or (code or "") in ("context_length_exceeded",
                                                                               "exceed_context_size_error")
            if overflow:
                try:
                    obj = json.loads(body)
                except ValueError:
                    obj = None
                prompt, window = overflow_numbers(message, obj)
                return self.overflow_error(message, prompt, window)
            return BadRequest(
                f"{self.display_name} rejected the request with HTTP 400 ({detail}). Check model.name and the settings sent.",
                context_overflow=False,
            )
        if status in (401, 403):
            return ServerError(
                f"{self.display_name} at {self.base_url} refused access (HTTP {status}: {detail}). "
                f"{self.auth_hint}",
                status,
            )
        if status == 404:
            return ServerError(
                f"{self.display_name} at {self.base_url} has no {path} (HTTP 404: {detail}). "
                "Check model.endpoint and model.provider.",
                status,
            )
        if status == 503:
            return ServerError(
                f"{self.display_name} at {self.base_url} was still not ready after {self.load_wait_s:g} s "
                f"(HTTP 503: {detail}). Wait for the model to load and try again, or raise model.load_wait_s.",
                status,
            )
        if status >= 500:
            return ServerError(
                f"{self.display_name} at {self.base_url} failed with HTTP {status} ({detail}). {self.log_advice()}",
                status,
            )
        return ServerError(f"{self.display_name} at {self.base_url} answered HTTP {status} ({detail}).", status)

    async def safe_list_models(self) -> list[str]:
        """:meth:`list_models`, or ``[]`` when that fails too."""
        try:
            return await self.list_models()
        except EndpointError:
            return []

    # -- requests -------------------------------------------------------

    async def request_json(self, method: str, path: str, body: Any = None) -> Any:
        """One plain request; returns the decoded JSON answer. Raises EndpointError."""
        try:
            resp = await self._client.request(method, self.base_url + path, json=body, headers=self._headers)
            content = resp.content
        except Exception as exc:  # httpx and anything below it
            raise self.map_http_error(exc, path) from exc
        if resp.status_code != 200:
            raise await self.status_error(resp.status_code, content, path)
        try:
            return json.loads(content)
        except ValueError as exc:
            raise MalformedStream(
                f"{self.display_name} at {self.base_url} answered {path} with something that is not JSON "
                f"({short(content.decode('utf-8', 'replace'), 60)!r}). Check model.endpoint and model.provider."
            ) from exc

    async def open_stream(self, path: str, body: Any) -> AsyncIterator[Waiting | httpx.Response]:
        """POST ``body`` and yield ``Waiting`` for each 503 pause, then the 200 response.

        The caller must close the response (``await resp.aclose()``). Raises
        EndpointError for every failure, including a 503 that outlasts
        ``load_wait_s``.
        """
        url = self.base_url + path
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                request = self._client.build_request("POST", url, json=body, headers=self._headers)
                resp = await self._client.send(request, stream=True)
            except Exception as exc:
                raise self.map_http_error(exc, path) from exc
            if resp.status_code == 200:
                yield resp
                return
            try:
                content = await resp.aread()
            except Exception as exc:
                raise self.map_http_error(exc, path) from exc
            finally:
                await resp.aclose()
            if resp.status_code == 503:
                waited = time.monotonic() - started
                remaining = self.load_wait_s - waited
                if remaining > 0:
                    attempt += 1
                    delay = min(self.retry_base_s * (2 ** (attempt - 1)), RETRY_MAX_DELAY_S, remaining)
                    retry_after = resp.headers.get("retry-after", "")
                    if retry_after.replace(".", "", 1).isdigit():
                        delay = min(max(delay, float(retry_after)), RETRY_MAX_DELAY_S, remaining)
                    message, _ = error_text(content)
                    reason = f"{self.display_name} is not ready (HTTP 503: {short(message, 80) or 'loading'}); retrying"
                    yield Waiting(reason=reason, attempt=attempt, delay_s=delay, waited_s=waited)
                    await asyncio.sleep(delay)
                    continue
            raise await self.status_error(resp.status_code, content, path)

    async def stream_lines(self, resp: httpx.Response, path: str) -> AsyncIterator[str]:
        """The response's lines (without line endings), mapping read failures."""
        try:
            async for line in resp.aiter_lines():
                yield line
        except EndpointError:
            raise
        except Exception as exc:
            raise self.map_http_error(exc, path, streaming=True) from exc

    def unexpected(self, exc: Exception) -> EndpointError:
        """A bug-shaped failure while reading a stream → MalformedStream (never a raw exception)."""
        return MalformedStream(
            f"{self.display_name} at {self.base_url} sent a reply wisp could not read "
            f"({type(exc).__name__}: {short(exc, 80)}). Check that model.provider matches the server."
        )
