"""OpenAI-compatible ``POST /v1/chat/completions`` over httpx (llama.cpp's server, vLLM, LM Studio, …).

The reply streams as server-sent events::

    data: {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}
    data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
           "function": {"name": "read_file", "arguments": "{\\"pa"}}]}}]}
    data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
           "function": {"arguments": "th\\": \\"a\\"}"}}]}}]}
    data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    data: {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 9}}
    data: [DONE]

Tool-call argument fragments are joined by ``index``; a call is emitted whole
when ``finish_reason`` arrives (or at the end of the stream).

Servers' quirks, each read as the server meant it (issue 16, "Every
server's quirks"; the trackers named are where each was reported):

- parallel tool calls that all carry the same ``index`` and differ only by
  ``id`` (Ollama's ``/v1``, ollama/ollama#15457): a fragment whose ``id``
  differs from the call being built at its index starts another call;
- whole tool calls with no ``index`` and no ``id``, one a chunk (older
  Ollama, ollama/ollama#7881): a fragment naming a tool while the call at
  its index already has a name and complete arguments starts another call;
- a failure sent as an SSE ``error:`` field instead of ``data:`` (llama.cpp
  servers before ggml-org/llama.cpp#16109), or as ``event: error`` before
  its ``data:``: the server's message is shown;
- an empty ``data:`` frame (llama.cpp keep-alives): skipped;
- a last chunk that sends a call's arguments whole again after streaming
  them (vLLM's end-of-stream flush, vllm-project/vllm#42167, #51697): the
  complete object is taken, not the two joined;
- a ``tool_calls`` entry with neither a name nor arguments (LM Studio,
  lmstudio-ai/lmstudio-bug-tracker#830): dropped, not run as a nameless
  tool.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any, AsyncIterator

import httpx

from ._transport import (
    _OVERFLOW_RE,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_LOAD_WAIT_S,
    DEFAULT_REPLY_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    MAX_BODY_BYTES,
    MAX_LINE_BYTES,
    HttpEndpoint,
    ReplyClock,
    clamp_count,
    decode_arguments,
    error_from_object,
    loads,
    new_call_id,
    overflow_numbers,
    short,
)
from .base import (
    PROBE_TOOL,
    BadRequest,
    ChatOptions,
    Disconnected,
    Done,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedStream,
    Message,
    ServerError,
    StreamErrorObject,
    StreamEvent,
    StreamThinking,
    ToolCallRequest,
    ToolSchema,
    StreamUsage,
    Waiting,
)
from .thinking import ThinkSplitter

DEFAULT_OPENAI_URL = "http://127.0.0.1:8080"
#: The fewest extra prompt tokens that show the probe's tool reached the model
#: (its schema is about 40 tokens).
PROBE_MIN_TOKENS = 8
PROBE_USER = "wisp-probe"
_SSE_FIELDS = ("event:", "id:", "retry:")


def to_openai_messages(messages: list[Message], *, results_as_user: bool = False) -> list[dict[str, Any]]:
    """Neutral messages → OpenAI's ``messages``.

    Assistant tool calls become ``{"id", "type": "function", "function": {"name",
    "arguments": "<JSON text>"}}``; tool results become ``{"role": "tool",
    "tool_call_id", "content"}``, or, with ``results_as_user``, a ``user``
    message that names the tool (for chat formats that drop ``tool`` messages,
    such as llama-cpp-python's ``chatml-function-calling``).
    """
    names = {str(c.get("id", "")): str(c.get("name", "")) for m in messages for c in (m.get("tool_calls") or [])}
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role", "user")
        content = msg.get("content") or ""
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": content}
            calls = msg.get("tool_calls") or []
            if calls:
                item["tool_calls"] = [
                    {
                        "id": str(call.get("id") or new_call_id()),
                        "type": "function",
                        "function": {
                            "name": call.get("name", ""),
                            "arguments": json.dumps(call.get("arguments") or {}),
                        },
                    }
                    for call in calls
                ]
            out.append(item)
        elif role == "tool" and results_as_user:
            name = msg.get("name") or names.get(str(msg.get("tool_call_id", "")), "") or "the tool"
            out.append({"role": "user", "content": f"[result of {name}]\n{content}"})
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": str(msg.get("tool_call_id", "")), "content": content})
        else:
            out.append({"role": role, "content": content})
    return out


class _PendingCall:
    __slots__ = ("id", "name", "parts")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.parts: list[str] = []

    @property
    def complete(self) -> bool:
        """The arguments so far are a whole JSON object."""
        return _is_object(join_arguments(self.parts))

    def starts_another(self, frag_id: str, name: str | None) -> bool:
        """Whether a fragment at this call's index is another call (the
        quirks in the module doc): another ``id``, or, with no ``id``, a
        tool name once this call is whole."""
        if frag_id and self.id and frag_id != self.id:
            return True
        return not frag_id and bool(name) and bool(self.name) and self.complete


def _is_object(text: str) -> bool:
    try:
        return isinstance(loads(text), dict)
    except ValueError:
        return False


def join_arguments(parts: list[str]) -> str:
    """A tool call's argument fragments joined into its arguments' text.

    Normally the fragments concatenated. When that is not a JSON object but
    the last fragment alone is, the server sent the arguments whole again at
    the end (vLLM's end-of-stream flush): the last fragment is taken. When
    it is one object twice in a row, the first is taken. Otherwise the
    concatenation, which the caller reports as arguments that are not JSON."""
    joined = "".join(parts)
    if not parts or not joined.strip() or _is_object(joined):
        return joined
    if len(parts) > 1 and _is_object(parts[-1]):
        return parts[-1]
    try:
        first, end = json.JSONDecoder().raw_decode(joined.strip())
    except ValueError:
        return joined
    rest = joined.strip()[end:].strip()
    if isinstance(first, dict) and rest and _is_object(rest) and loads(rest) == first:
        return joined.strip()[:end]
    return joined


class OpenAIEndpoint(HttpEndpoint):
    """A model behind an OpenAI-compatible server.

    ``base_url`` like ``http://127.0.0.1:8080`` (a trailing ``/v1`` is accepted
    and dropped). ``api_key`` is sent as ``Authorization: Bearer …`` and kept
    only in this object's headers (never in its repr). ``timeout_s`` (seconds)
    bounds connecting and every read; ``reply_timeout_s`` (seconds) bounds a
    whole reply; ``load_wait_s`` (seconds) bounds the total wait on HTTP 503.

    Raises only :class:`~wisp.core.model.base.EndpointError` subclasses.
    """

    provider = "openai"
    display_name = "The OpenAI-compatible server"
    #: Whether ``tools`` reach the model: ``None`` until :meth:`probe_tools` says
    #: (the embedded server knows its own and sets it).
    tools_dropped: bool | None = None
    #: The server refuses to stream a tool call (llama-cpp-python's
    #: ``chatml-function-calling``): a request that offers tools is sent unstreamed.
    stream_tools = True
    #: Send ``tool_choice: "auto"`` with tools (``chatml-function-calling`` drops
    #: the tools without it).
    send_tool_choice = False
    #: Send tool results as ``user`` messages (for chat formats that drop ``tool`` messages).
    results_as_user = False
    #: The server takes llama.cpp's ``grammar`` field (the prompted protocol uses it).
    accepts_grammar = False
    #: Paths tried by :meth:`count_tokens`, in order (llama-cpp-python, then llama.cpp).
    TOKENIZE_PATHS = ("/extras/tokenize/count", "/tokenize")
    #: Texts whose counts :meth:`count_tokens` keeps.
    COUNT_CACHE = 1024

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        load_wait_s: float = DEFAULT_LOAD_WAIT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        retry_base_s: float = 0.25,
        client: httpx.AsyncClient | None = None,
        reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            base_url,
            model,
            timeout_s=timeout_s,
            load_wait_s=load_wait_s,
            connect_timeout_s=connect_timeout_s,
            retry_base_s=retry_base_s,
            client=client,
            headers=headers,
            reply_timeout_s=reply_timeout_s,
        )
        self._tokenize_path: str | None = None  # found by count_tokens; "" when none works
        self._counts: "OrderedDict[str, int]" = OrderedDict()

    @staticmethod
    def normalise_base_url(base_url: str) -> str:
        url = base_url.strip().rstrip("/")
        if url.endswith("/v1"):
            url = url[: -len("/v1")]
        return url

    def start_hint(self) -> str:
        return (
            "Start it (for example `python -m llama_cpp.server --model FILE.gguf --port 8080`), "
            "or set model.endpoint."
        )

    async def list_models(self) -> list[str]:
        """Ids from ``GET /v1/models``, in the server's order. Raises EndpointError."""
        return self.models_in(await self.request_json("GET", "/v1/models"))

    def models_in(self, data: Any) -> list[str]:
        """The ids in a ``/v1/models`` answer. Raises MalformedStream when it lists none."""
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise MalformedStream(
                f"{self.base_url}/v1/models did not list models; is this an OpenAI-compatible server? "
                "Check model.provider."
            )
        return [str(m.get("id")) for m in models if isinstance(m, dict) and m.get("id") is not None]

    async def context_length(self) -> int | None:
        """Not reported by the OpenAI API: always ``None``."""
        return None

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` by the server's tokenizer, without special tokens added.

        Tries llama-cpp-python's ``POST /extras/tokenize/count`` (``{"input"}`` →
        ``{"count"}``), then llama.cpp's ``POST /tokenize`` (``{"content"}`` →
        ``{"tokens"}``), and remembers which works; ``None`` when neither does
        (then it never asks again). Counts are cached by the text's hash
        (:data:`COUNT_CACHE` texts). Never raises for a server that cannot
        count; raises EndpointError when the server is down.
        """
        if not text:
            return 0
        key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        if key in self._counts:
            self._counts.move_to_end(key)
            return self._counts[key]
        paths = [self._tokenize_path] if self._tokenize_path else list(self.TOKENIZE_PATHS)
        if self._tokenize_path == "":
            return None
        for path in paths:
            body = {"input": text} if path.startswith("/extras") else {"content": text, "add_special": False}
            try:
                data = await self.request_json("POST", path, body)
            except (BadRequest, ServerError, MalformedStream):
                continue
            count = None
            if isinstance(data, dict):
                if isinstance(data.get("count"), int):
                    count = data["count"]
                elif isinstance(data.get("tokens"), list):
                    count = len(data["tokens"])
            if count is None:
                continue
            self._tokenize_path = path
            self._counts[key] = count
            if len(self._counts) > self.COUNT_CACHE:
                self._counts.popitem(last=False)
            return count
        self._tokenize_path = ""
        return None

    async def probe_tools(self) -> bool | None:
        """Whether ``tools`` reach the model, from the prompt tokens the server counts
        for a one-token request with and without one small tool (issue 10: a server
        that drops ``tools`` counts the same for both). ``None`` when the server
        reports no usage or the requests fail for another reason; ``False`` too
        when it refuses tools outright (HTTP 400). Sets :attr:`tools_dropped`.
        Raises :class:`EndpointTimeout` and :class:`EndpointUnreachable`: a
        server that did not answer the probe within ``timeout_s`` (or
        ``reply_timeout_s``) would not answer the request after it either,
        and taking the probe as "cannot tell" made a turn wait both clocks
        twice."""
        messages = [{"role": "user", "content": "Hi"}]
        counts = []
        for tools in (None, [PROBE_TOOL]):
            body = self.build_body(messages, tools, ChatOptions(max_tokens=1, temperature=0.0))
            body["stream"] = False
            body.pop("stream_options", None)
            body["user"] = PROBE_USER  # OpenAI's end-user field: marks the probe in servers' logs
            try:
                data = await self.request_json("POST", "/v1/chat/completions", body)
            except BadRequest as exc:
                if tools and not exc.context_overflow:
                    self.tools_dropped = True
                    return False
                return None
            except (EndpointTimeout, EndpointUnreachable):
                # the turn's own request would wait as long again for nothing: say it now
                raise
            except EndpointError:
                return None
            usage = data.get("usage") if isinstance(data, dict) else None
            counted = clamp_count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
            if counted is None:
                return None
            counts.append(counted)
        reached = counts[1] - counts[0] >= PROBE_MIN_TOKENS
        self.tools_dropped = not reached
        return reached

    def build_body(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions
    ) -> dict[str, Any]:
        """The JSON body for ``/v1/chat/completions``. ``options.extra`` is
        merged into the body, except ``schema`` (a JSON schema the reply must
        follow) and ``schema_form`` (how to ask for it), which become
        ``response_format``: ``json_schema`` (the default) sends
        ``{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}``
        (OpenAI's structured outputs; llama.cpp's server turns it into a
        grammar, vLLM into guided decoding), ``json_object`` sends
        ``{"type": "json_object", "schema": …}`` (what llama-cpp-python's
        server takes), ``plain`` sends none (the server refused both).

        A request that offers tools to a server that cannot stream a tool call
        (:attr:`stream_tools` false) is not streamed."""
        extra = dict(options.extra or {})
        schema = extra.pop("schema", None)
        form = extra.pop("schema_form", None) or "json_schema"
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages, results_as_user=self.results_as_user),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
            if self.send_tool_choice:
                body["tool_choice"] = "auto"
            if not self.stream_tools:
                body["stream"] = False
                body.pop("stream_options")
        if options.max_tokens is not None:
            body["max_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if schema and form == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "wisp_side_call", "strict": True, "schema": schema}}
        elif schema and form == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        body.update(extra)
        return body

    async def stream_chat(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream one reply from ``POST /v1/chat/completions``.

        Yields ``Waiting`` (503 pauses), ``KeepAlive`` (SSE comments while the
        reply is held open), ``TextDelta``, ``StreamThinking``
        (``delta.reasoning_content``, ``delta.reasoning`` or ``<think>`` in the
        content), whole ``ToolCallRequest`` objects, ``StreamUsage`` (the last one
        reported, right before the end; absent if the server sent none), then ``Done``
        (``reason`` from ``finish_reason``: ``"length"`` means cut).

        A stream that ends after ``finish_reason`` but without ``data: [DONE]``
        is taken as finished; one that ends before ``finish_reason`` raises
        Disconnected. Raises only EndpointError subclasses.
        """
        options = options or ChatOptions()
        path = "/v1/chat/completions"
        resp: httpx.Response | None = None
        try:
            body = self.build_body(messages, tools, options)
            clock = self.reply_deadline()
            async for item in self.open_stream(path, body, clock):
                if isinstance(item, Waiting):
                    yield item
                else:
                    resp = item
            assert resp is not None
            if "application/json" in resp.headers.get("content-type", ""):
                reader = self._read_whole(resp, path, clock)  # the server ignored stream: true
            else:
                reader = self._read(resp, path, clock)
            async for event in reader:
                yield event
        except EndpointError:
            raise
        except Exception as exc:
            raise self.unexpected(exc) from exc
        finally:
            if resp is not None:
                await resp.aclose()

    def _sse_error(self, text: str) -> EndpointError:
        """The error a server sent as an SSE ``error:`` field (or after
        ``event: error``): its JSON object's message, else the text (an
        overflow reads as one, as in :meth:`_stream_error`)."""
        try:
            obj = loads(text) if text else None
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return self._stream_error(obj if "error" in obj or "message" in obj else {"error": obj})
        return self._stream_error({"error": text or "no message"})

    def _stream_error(self, obj: Any) -> EndpointError:
        message, code = error_from_object(obj)
        if (code or "") in ("context_length_exceeded", "exceed_context_size_error") or _OVERFLOW_RE.search(message):
            prompt, window = overflow_numbers(message, obj)
            return self.overflow_error(message, prompt, window)
        return StreamErrorObject(
            f"{self.display_name} reported an error in the middle of the reply: {short(message)}. "
            f"The reply so far is kept. {self.log_advice()}"
        )

    async def _read(self, resp: httpx.Response, path: str, clock: ReplyClock) -> AsyncIterator[StreamEvent]:
        splitter = ThinkSplitter()
        calls: list[_PendingCall] = []  # in the order they began
        at_index: dict[int, _PendingCall] = {}  # the call being built at each index
        finish: str | None = None
        event_type = ""  # the last SSE ``event:`` field: ``error`` makes the next data an error
        usage: StreamUsage | None = None  # the last one seen (some servers send one per chunk)
        saw_tool_call = False

        def complete_calls() -> list[ToolCallRequest]:
            nonlocal saw_tool_call
            done = []
            for pending in calls:
                text = join_arguments(pending.parts)
                if not pending.name and not text.strip():  # an empty entry (LM Studio): no call at all
                    continue
                arguments, raw = decode_arguments(text)
                done.append(
                    ToolCallRequest(
                        id=pending.id or new_call_id(), name=pending.name, arguments=arguments, raw_arguments=raw
                    )
                )
            saw_tool_call = saw_tool_call or bool(done)
            calls.clear()
            at_index.clear()
            return done

        def finish_events() -> list[StreamEvent]:
            events: list[StreamEvent] = list(splitter.flush())
            events.extend(complete_calls())
            reason = finish or "stop"
            if saw_tool_call and reason == "stop":
                reason = "tool_calls"
            if usage is not None:
                events.append(usage)
            events.append(Done(reason))
            return events

        idle = True  # no data line since the last blank line: a blank line now is a keep-alive
        event_size = 0  # characters of the SSE event so far: capped like a line (MAX_LINE_BYTES)
        async for raw_line in self.stream_lines(resp, path, clock):
            event_size = 0 if not raw_line.strip() else event_size + len(raw_line) + 1
            if event_size > MAX_LINE_BYTES:
                await resp.aclose()
                raise self.too_large_line(MAX_LINE_BYTES, "a server-sent event")
            line = raw_line.strip()
            if (not line and idle) or line.startswith(":"):
                waiting = self.keep_alive(clock)
                if waiting is not None:
                    yield waiting
                continue
            if not line:
                idle = True
                event_type = ""  # a blank line ends the SSE event
                continue
            idle = False
            clock.saw_data()
            if line.startswith("error:"):  # older llama.cpp: the failure as its own SSE field
                raise self._sse_error(line[len("error:"):].strip())
            if line.startswith("event:"):
                event_type = line[len("event:"):].strip().lower()
                continue
            if line.startswith(_SSE_FIELDS):
                continue
            if not line.startswith("data:"):
                raise MalformedStream(
                    f"{self.display_name} at {self.base_url} sent a line that is not server-sent events "
                    f"({short(line, 60)!r}). The reply so far is kept; try again."
                )
            data = line[len("data:") :].strip()
            if event_type == "error":
                raise self._sse_error(data)
            if not data:  # an empty data frame carries nothing
                continue
            if data == "[DONE]":
                for event in finish_events():
                    yield event
                return
            try:
                obj = loads(data)
            except ValueError:
                raise MalformedStream(
                    f"{self.display_name} at {self.base_url} sent an event that is not JSON "
                    f"({short(data, 60)!r}). The reply so far is kept; try again."
                ) from None
            if not isinstance(obj, dict):
                raise MalformedStream(
                    f"{self.display_name} at {self.base_url} sent an event that is not a JSON object. Try again."
                )
            if obj.get("error") is not None:
                raise self._stream_error(obj)
            for choice in obj.get("choices") or []:
                delta = choice.get("delta") or {}
                for key in ("reasoning_content", "reasoning"):
                    value = delta.get(key)
                    if isinstance(value, str) and value:
                        yield StreamThinking(value)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    for event in splitter.feed(content):
                        yield event
                for position, frag in enumerate(delta.get("tool_calls") or []):
                    if not isinstance(frag, dict):
                        continue
                    index = clamp_count(frag.get("index", position))
                    key = position if index is None else index
                    fn = frag.get("function") or {}
                    if not isinstance(fn, dict):
                        fn = {}
                    name = fn.get("name") if isinstance(fn.get("name"), str) else None
                    frag_id = str(frag.get("id") or "")
                    pending = at_index.get(key)
                    if pending is None or pending.starts_another(frag_id, name):
                        pending = at_index[key] = _PendingCall()
                        calls.append(pending)
                    if frag_id:
                        pending.id = frag_id
                    if name and name != pending.name:
                        pending.name += name
                    args = fn.get("arguments")
                    if isinstance(args, str):
                        pending.parts.append(args)
                    elif isinstance(args, dict):
                        pending.parts = [json.dumps(args)]
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
                    for event in splitter.flush():
                        yield event
                    for call in complete_calls():
                        yield call
            found = usage_of(obj)
            if found is not None:
                usage = found
        if finish is not None:
            for event in finish_events():
                yield event
            return
        raise Disconnected(
            f"{self.display_name} at {self.base_url} ended the reply before it finished. "
            f"The reply so far is kept. {self.log_advice()}"
        )

    async def _read_whole(self, resp: httpx.Response, path: str, clock: ReplyClock) -> AsyncIterator[StreamEvent]:
        """A non-streamed ``chat.completion`` object, turned into the same events."""
        try:
            content = await self.read_body(resp, path, clock, limit=MAX_BODY_BYTES, streaming=True)
        except EndpointError:
            raise
        except Exception as exc:
            raise self.map_http_error(exc, path, streaming=True) from exc
        try:
            obj = loads(content)
        except ValueError:
            raise MalformedStream(
                f"{self.display_name} at {self.base_url} sent a reply that is not JSON. Try again."
            ) from None
        if not isinstance(obj, dict):
            raise MalformedStream(f"{self.display_name} at {self.base_url} sent a reply that is not an object.")
        if obj.get("error") is not None:
            raise self._stream_error(obj)
        choice = (obj.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            yield StreamThinking(reasoning)
        splitter = ThinkSplitter()
        for event in splitter.feed(str(message.get("content") or "")) + splitter.flush():
            yield event
        n_calls = 0
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            arguments, raw = decode_arguments(fn.get("arguments"))
            n_calls += 1
            yield ToolCallRequest(
                id=str(call.get("id") or new_call_id()), name=str(fn.get("name") or ""), arguments=arguments,
                raw_arguments=raw,
            )
        usage = usage_of(obj)
        if usage is not None:
            yield usage
        reason = str(choice.get("finish_reason") or "stop")
        if n_calls and reason == "stop":
            reason = "tool_calls"
        yield Done(reason)


def usage_of(obj: Any) -> StreamUsage | None:
    """The :class:`StreamUsage` in a chunk or reply: ``usage.prompt_tokens``,
    ``completion_tokens`` and ``prompt_tokens_details.cached_tokens`` (OpenAI's
    shape, which the embedded server sends too), or llama.cpp's ``timings``
    (``prompt_n`` evaluated + ``cache_n`` cached, ``predicted_n``). ``None``
    when the object has neither."""
    if not isinstance(obj, dict):
        return None
    reported = obj.get("usage")
    timings = obj.get("timings") if isinstance(obj.get("timings"), dict) else {}
    cached = clamp_count(timings.get("cache_n"))
    if isinstance(reported, dict):
        details = reported.get("prompt_tokens_details")
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            cached = clamp_count(details.get("cached_tokens"))
        return StreamUsage(clamp_count(reported.get("prompt_tokens")), clamp_count(reported.get("completion_tokens")),
                     cached)
    if timings and timings.get("prompt_n") is not None:
        evaluated = clamp_count(timings.get("prompt_n")) or 0
        return StreamUsage(evaluated + (cached or 0), clamp_count(timings.get("predicted_n")), cached)
    return None




__all__ = ["OpenAIEndpoint", "to_openai_messages", "usage_of", "DEFAULT_OPENAI_URL", "PROBE_TOOL"]
