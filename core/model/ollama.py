"""Ollama's native API over httpx: ``POST /api/chat`` (NDJSON), ``GET /api/tags``, ``POST /api/show``.

Wire shape of one streamed line::

    {"model": "...", "message": {"role": "assistant", "content": "Hel",
                                 "thinking": "...", "tool_calls": [...]}, "done": false}
    ...
    {"model": "...", "message": {...}, "done": true, "done_reason": "stop",
     "prompt_eval_count": 26, "eval_count": 12}

Every request sends ``options.num_ctx``: Ollama's default window is small and it
silently drops the start of a longer prompt.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator

import httpx

from ._transport import (
    suggest_window,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_LOAD_WAIT_S,
    DEFAULT_REPLY_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    HttpEndpoint,
    ReplyClock,
    clamp_count,
    decode_arguments,
    error_from_object,
    loads,
    new_call_id,
    short,
)
from ..tokens import DEFAULT_CONTEXT_WINDOW
from .base import (
    PROBE_TOOL,
    BadRequest,
    ChatOptions,
    Disconnected,
    Done,
    EndpointError,
    MalformedStream,
    Message,
    StreamErrorObject,
    StreamEvent,
    StreamThinking,
    ToolCallRequest,
    ToolSchema,
    StreamUsage,
    Waiting,
)
from .thinking import ThinkSplitter

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
#: ``num_ctx`` sent when neither the caller nor ``/api/show`` gives a window (tokens): wisp's one default.
FALLBACK_NUM_CTX = DEFAULT_CONTEXT_WINDOW


def to_ollama_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages (see :mod:`wisp.core.model.base`) → Ollama's ``messages``.

    Assistant tool calls become ``{"function": {"name", "arguments": {...}}}``;
    tool results become ``{"role": "tool", "content", "tool_name"}`` (the name is
    looked up from the matching call when the message lacks it).
    """
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role", "user")
        content = msg.get("content") or ""
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": content}
            calls = msg.get("tool_calls") or []
            if calls:
                item["tool_calls"] = []
                for call in calls:
                    names[str(call.get("id", ""))] = call.get("name", "")
                    item["tool_calls"].append(
                        {"function": {"name": call.get("name", ""), "arguments": call.get("arguments") or {}}}
                    )
            out.append(item)
        elif role == "tool":
            name = msg.get("name") or names.get(str(msg.get("tool_call_id", "")), "")
            out.append({"role": "tool", "content": content, "tool_name": name})
        else:
            out.append({"role": role, "content": content})
    return out


class OllamaEndpoint(HttpEndpoint):
    """A model served by Ollama.

    ``base_url`` like ``http://127.0.0.1:11434``; ``model`` like ``llama3.2:3b``.
    ``timeout_s`` (seconds) bounds connecting and every read (a stalled stream
    times out too); ``reply_timeout_s`` (seconds) bounds a whole reply;
    ``load_wait_s`` (seconds) bounds the total wait on HTTP 503.
    Pass ``client`` to share an ``httpx.AsyncClient`` (then its timeouts apply
    and :meth:`aclose` leaves it open).

    Raises only :class:`~wisp.core.model.base.EndpointError` subclasses.
    """

    provider = "ollama"
    display_name = "Ollama"

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
        reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    ) -> None:
        super().__init__(
            base_url,
            model,
            timeout_s=timeout_s,
            load_wait_s=load_wait_s,
            connect_timeout_s=connect_timeout_s,
            retry_base_s=retry_base_s,
            client=client,
            reply_timeout_s=reply_timeout_s,
        )
        self._context_length: int | None = None

    def start_hint(self) -> str:
        return "Start it with `ollama serve` (then `ollama pull MODEL`), or set model.endpoint."

    def window_advice(self, tokens: int) -> str:
        """Ollama's window is the request's ``num_ctx``, which wisp sends from model.context_window."""
        size = suggest_window(tokens)
        return (f"Set model.context_window to {size} (wisp sends it to Ollama as num_ctx): in chat "
                f"/config set model.context_window {size}, in a shell wisp config set model.context_window {size}")

    async def probe_tools(self) -> bool | None:
        """Whether the model takes tools: Ollama answers HTTP 400 "does not support
        tools" for a model whose template has none (``False``); ``True`` when a
        one-token request with a tool succeeds; ``None`` on other failures."""
        body = await self.build_body([{"role": "user", "content": "Hi"}], [PROBE_TOOL],
                                     ChatOptions(max_tokens=1, temperature=0.0))
        body["stream"] = False
        try:
            await self.request_json("POST", "/api/chat", body)
        except BadRequest as exc:
            return False if "tools" in str(exc).lower() else None
        except EndpointError:
            return None
        return True

    def model_missing_message(self, available: list[str]) -> str:
        have = ", ".join(available) if available else "no models yet"
        return (
            f'Ollama at {self.base_url} has no model "{self.model}" (it has: {have}). '
            f"Run `ollama pull {self.model}` or set model.name to one it has."
        )

    async def list_models(self) -> list[str]:
        """Names from ``GET /api/tags``, in the server's order. Raises EndpointError."""
        return self.models_in(await self.request_json("GET", "/api/tags"))

    def models_in(self, data: Any) -> list[str]:
        """The names in an ``/api/tags`` answer. Raises MalformedStream when it lists none."""
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise MalformedStream(
                f"{self.base_url}/api/tags did not list models; is this an Ollama server? Check model.provider."
            )
        return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)]

    async def context_length(self) -> int | None:
        """The model's context window (tokens) from ``POST /api/show``'s
        ``model_info["<arch>.context_length"]``; ``None`` if not reported. Cached.
        Raises EndpointError (ModelNotFound for an unknown model)."""
        if self._context_length is not None:
            return self._context_length
        data = await self.request_json("POST", "/api/show", {"model": self.model})
        info = data.get("model_info") if isinstance(data, dict) else None
        if not isinstance(info, dict):
            return None
        arch = info.get("general.architecture")
        value = info.get(f"{arch}.context_length") if arch else None
        if value is None:
            value = next((v for k, v in info.items() if k.endswith(".context_length")), None)
        self._context_length = clamp_count(value) or None
        return self._context_length

    async def _num_ctx(self, options: ChatOptions) -> int:
        if options.context_window:
            return int(options.context_window)
        try:
            found = await self.context_length()
        except EndpointError:
            found = None  # the chat request itself will report the problem
        return found or FALLBACK_NUM_CTX

    async def build_body(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions
    ) -> dict[str, Any]:
        """The JSON body for ``/api/chat``. ``options.extra`` is merged into
        Ollama's ``options``, except ``schema`` (a JSON schema the reply must
        follow), which goes as the body's ``format`` (Ollama's structured
        outputs), and ``schema_form``, which says whether to send it
        (``format``, the default) or not (``plain``: the server refused it)."""
        extra = dict(options.extra or {})
        schema = extra.pop("schema", None)
        form = extra.pop("schema_form", None) or "format"
        opts: dict[str, Any] = {"num_ctx": await self._num_ctx(options)}
        if options.max_tokens is not None:
            opts["num_predict"] = options.max_tokens
        if options.temperature is not None:
            opts["temperature"] = options.temperature
        opts.update(extra)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_ollama_messages(messages),
            "stream": True,
            "options": opts,
        }
        if schema and form != "plain":
            body["format"] = schema
        if tools:
            body["tools"] = tools
        if options.think == "on":
            body["think"] = True
        elif options.think == "off":
            body["think"] = False
        return body

    async def stream_chat(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream one reply from ``POST /api/chat``.

        Yields ``Waiting`` (503 pauses), ``KeepAlive`` (blank lines while the
        reply is held open), ``TextDelta``, ``StreamThinking``,
        ``ToolCallRequest`` (each with an id; Ollama sends none), then ``StreamUsage``
        and ``Done`` (``reason`` from ``done_reason``; ``"tool_calls"`` when the
        reply asked for tools and the server said ``stop``).

        Raises only EndpointError subclasses: EndpointUnreachable, EndpointTimeout,
        ModelNotFound, BadRequest, ServerError, MalformedStream,
        StreamErrorObject, Disconnected.
        """
        options = options or ChatOptions()
        path = "/api/chat"
        resp: httpx.Response | None = None
        try:
            body = await self.build_body(messages, tools, options)
            clock = self.reply_deadline()
            async for item in self.open_stream(path, body, clock):
                if isinstance(item, Waiting):
                    yield item
                else:
                    resp = item
            assert resp is not None
            async for event in self._read(resp, path, clock):
                yield event
        except EndpointError:
            raise
        except Exception as exc:
            raise self.unexpected(exc) from exc
        finally:
            if resp is not None:
                await resp.aclose()

    async def _read(self, resp: httpx.Response, path: str, clock: ReplyClock) -> AsyncIterator[StreamEvent]:
        splitter = ThinkSplitter()
        saw_tool_call = False
        async for line in self.stream_lines(resp, path, clock):
            line = line.strip()
            if not line:  # a keep-alive
                waiting = self.keep_alive(clock)
                if waiting is not None:
                    yield waiting
                continue
            clock.saw_data()
            try:
                obj = loads(line)
            except ValueError:
                raise MalformedStream(
                    f"Ollama at {self.base_url} sent a line that is not JSON ({short(line, 60)!r}). "
                    "The reply so far is kept; try again."
                ) from None
            if not isinstance(obj, dict):
                raise MalformedStream(
                    f"Ollama at {self.base_url} sent a line that is not a JSON object ({short(line, 60)!r}). Try again."
                )
            if obj.get("error") is not None:
                message, _ = error_from_object(obj)
                raise StreamErrorObject(
                    f"Ollama reported an error in the middle of the reply: {short(message)}. "
                    f"The reply so far is kept. {self.log_advice()}"
                )
            msg = obj.get("message") or {}
            if not isinstance(msg, dict):
                raise MalformedStream(f"Ollama at {self.base_url} sent a message that is not an object. Try again.")
            thinking = msg.get("thinking")
            if thinking:
                yield StreamThinking(str(thinking))
            content = msg.get("content")
            if content:
                for event in splitter.feed(str(content)):
                    yield event
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                arguments, raw = decode_arguments(fn.get("arguments"))
                saw_tool_call = True
                yield ToolCallRequest(
                    id=str(call.get("id") or new_call_id()),
                    name=str(fn.get("name") or ""),
                    arguments=arguments,
                    raw_arguments=raw,
                )
            if obj.get("done"):
                for event in splitter.flush():
                    yield event
                yield StreamUsage(
                    prompt_tokens=clamp_count(obj.get("prompt_eval_count")),
                    completion_tokens=clamp_count(obj.get("eval_count")),
                )
                reason = str(obj.get("done_reason") or "stop")
                if saw_tool_call and reason == "stop":
                    reason = "tool_calls"
                yield Done(reason)
                return
        raise Disconnected(
            f"Ollama at {self.base_url} ended the reply before its last line. "
            f"The reply so far is kept. {self.log_advice()}"
        )
