"""Fake model endpoints: real HTTP servers on 127.0.0.1 speaking Ollama's and OpenAI's protocols.

Each server runs ``http.server.ThreadingHTTPServer`` in a background thread on
a port the OS picks, and answers chat requests from a *script*: a queue of
replies, each a plain dict (so a script can also be a JSON file). When the
queue is empty it answers with the default reply, ``"You said: <last user
content>"``, so long tests need no script per turn.

    from tests.support.fakes import FakeOllama, reply, text, thinking, tool_call, fault

    script = [
        reply(text("Hel"), text("lo"), usage=(12, 2)),
        reply(tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"),
        fault.status(400, {"error": "the input exceeds the context length"}),
        fault.unavailable(times=2),                  # 503 twice, then the default reply
        fault.disconnect(text("partial ")),
    ]
    with FakeOllama(script=script) as srv:
        srv.base_url                                 # "http://127.0.0.1:PORT"
        ...
        srv.chat_bodies[0]["options"]["num_ctx"]     # every chat request body, decoded

Script entries
--------------
A reply::

    {"steps": [STEP, ...], "finish": "stop", "usage": {"prompt": 12, "completion": 5}}

where a STEP is one of::

    {"text": "Hel"}                                    one content chunk
    {"thinking": "hmm", "field": "reasoning_content"}  Ollama: message.thinking;
                                                       OpenAI: delta.<field> (or "reasoning")
    {"tool_call": {"name": "f", "arguments": {...}, "id": "call_1"}, "fragment": 5}
                                                       OpenAI splits the argument JSON into
                                                       pieces of ``fragment`` characters
    {"tool_calls": [CALL, CALL], "interleave": true, "fragment": 4}
                                                       OpenAI: fragments of several calls,
                                                       interleaved, joined by index
    {"raw": "any line"}                                sent as is (SSE: after "data: ")
    {"pause": 0.02}                                    sends nothing for that many seconds
                                                       (a slow stream: see :func:`trickled`)

A fault (mid-stream faults send their ``steps`` first)::

    {"fault": "status", "status": 400, "body": {...} or "text"}
    {"fault": "model_not_found"}                        404 in the protocol's own shape
    {"fault": "unavailable", "times": 2, "then": REPLY} 503 ``times`` times, then REPLY
                                                       (or the default reply)
    {"fault": "malformed", "steps": [...], "line": "{not json"}
                                                       Ollama: the line as is; OpenAI:
                                                       ``data: <line>``
    {"fault": "error_object", "steps": [...], "message": "boom"}
    {"fault": "disconnect", "steps": [...], "clean": false}
                                                       closes the socket mid-body; with
                                                       ``clean`` true, ends the body
                                                       properly but without the last line
    {"fault": "stall", "steps": [...]}                 holds the response open until the
                                                       server stops (a client timeout)
    {"fault": "trickle", "steps": [...], "every": 0.2, "line": null}
                                                       keeps the response alive without
                                                       finishing it: a keep-alive line every
                                                       ``every`` seconds (Ollama: a blank
                                                       line; OpenAI: an SSE comment
                                                       ``: keep-alive``; ``line`` overrides)
                                                       until the client leaves or the
                                                       server stops

The helper functions below (:func:`reply`, :func:`text`, :data:`fault` …) build
exactly these dicts.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

DEFAULT_MODELS = ["wisp-fake:latest", "wisp-fake-2:latest"]
OPENAI_DEFAULT_MODELS = ["wisp-fake", "wisp-fake-2"]


# --- script builders ---------------------------------------------------------


def text(piece: str) -> dict:
    """One content chunk."""
    return {"text": piece}


def thinking(piece: str, field: str = "reasoning_content") -> dict:
    """One reasoning chunk (OpenAI: sent in ``delta.<field>``)."""
    return {"thinking": piece, "field": field}


def tool_call(name: str, arguments: dict | None = None, id: str | None = None, fragment: int = 5) -> dict:
    """One tool call; OpenAI sends its argument JSON in ``fragment``-character pieces."""
    call: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if id:
        call["id"] = id
    return {"tool_call": call, "fragment": fragment}


def tool_calls(*calls: dict, interleave: bool = True, fragment: int = 4) -> dict:
    """Several tool calls in one step; OpenAI interleaves their fragments by index.
    Each call is ``{"name", "arguments", "id"?}``."""
    return {"tool_calls": list(calls), "interleave": interleave, "fragment": fragment}


def raw(line: str) -> dict:
    """A line sent as is."""
    return {"raw": line}


def pause(seconds: float) -> dict:
    """A step that sends nothing for ``seconds`` (keep it small: a slow stream, not a wait)."""
    return {"pause": seconds}


def trickled(pieces: Iterable[str], every: float, **kw: Any) -> dict:
    """A reply that sends each of ``pieces`` as a text chunk, ``every`` seconds apart."""
    steps: list[dict] = []
    for piece in pieces:
        steps += [pause(every), text(piece)]
    return reply(*steps, **kw)


def reply(*steps: dict | str, finish: str = "stop", usage: tuple[int, ...] | None = (10, 5)) -> dict:
    """A normal reply. Plain strings are text chunks. ``usage`` is (prompt, completion) tokens,
    or (prompt, completion, cached): the prompt tokens the server says came from its cache."""
    entry: dict[str, Any] = {"steps": [text(s) if isinstance(s, str) else s for s in steps], "finish": finish}
    if usage is not None:
        entry["usage"] = {"prompt": usage[0], "completion": usage[1]}
        if len(usage) > 2:
            entry["usage"]["cached"] = usage[2]
    return entry


def _steps(steps: Iterable[dict | str]) -> list[dict]:
    return [text(s) if isinstance(s, str) else s for s in steps]


class fault:  # noqa: N801 - a namespace of builders
    """Builders for fault entries (see the module doc)."""

    @staticmethod
    def status(code: int, body: Any = None) -> dict:
        return {"fault": "status", "status": code, "body": body}

    @staticmethod
    def model_not_found() -> dict:
        return {"fault": "model_not_found"}

    @staticmethod
    def unavailable(times: int = 1, then: dict | None = None, body: Any = None) -> dict:
        entry: dict[str, Any] = {"fault": "unavailable", "times": times}
        if then is not None:
            entry["then"] = then
        if body is not None:
            entry["body"] = body
        return entry

    @staticmethod
    def malformed(*steps: dict | str, line: str = "{this is not json") -> dict:
        return {"fault": "malformed", "steps": _steps(steps), "line": line}

    @staticmethod
    def error_object(*steps: dict | str, message: str = "the model crashed") -> dict:
        return {"fault": "error_object", "steps": _steps(steps), "message": message}

    @staticmethod
    def disconnect(*steps: dict | str, clean: bool = False) -> dict:
        return {"fault": "disconnect", "steps": _steps(steps), "clean": clean}

    @staticmethod
    def stall(*steps: dict | str) -> dict:
        return {"fault": "stall", "steps": _steps(steps)}

    @staticmethod
    def trickle(*steps: dict | str, every: float = 0.2, line: str | None = None) -> dict:
        return {"fault": "trickle", "steps": _steps(steps), "every": every, "line": line}


# --- the servers -------------------------------------------------------------


class _Closed(Exception):
    """The handler dropped the connection on purpose."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        # small writes go out at once (no Nagle / delayed-ACK pauses between chunks)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # plumbing
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace")

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(obj, (bytes, str)):
            data = obj.encode() if isinstance(obj, str) else obj
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(obj).encode()
            ctype = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data: str) -> None:
        raw_bytes = data.encode()
        self.wfile.write(f"{len(raw_bytes):x}\r\n".encode() + raw_bytes + b"\r\n")
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def drop(self) -> None:
        """Close the socket without finishing the body."""
        self.wfile.flush()
        self.close_connection = True
        raise _Closed()

    def _dispatch(self, method: str) -> None:
        body = self._read_body() if method == "POST" else None
        self.server.fake._record(method, self.path, body, dict(self.headers))
        try:
            self.server.fake._handle(self, method, self.path.split("?")[0], body)
        except (_Closed, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left mid-answer is part of the tests, not an error to print."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeServer:
    """Base of :class:`FakeOllama` and :class:`FakeOpenAI`.

    ``script``: the queue of script entries; ``models``: names listed by the
    model-list endpoint; ``check_model``: answer unknown models with the
    protocol's 404 (off by default, so any model name works); ``port``: 0 for
    a free one; ``context_length``: what Ollama's ``/api/show`` reports (tokens);
    ``responder``: a function of the decoded chat request body returning a
    script entry, used when the script is empty instead of the default
    reply (a model that answers by rule: :mod:`tests.support.fakes.scripted`).

    ``requests`` records every request as ``{"method", "path", "body",
    "headers"}``; ``chat_bodies`` holds the decoded bodies of chat requests.
    """

    protocol = "fake"
    chat_path = "/"

    def __init__(
        self,
        script: Iterable[dict] | None = None,
        *,
        models: list[str] | None = None,
        check_model: bool = False,
        port: int = 0,
        host: str = "127.0.0.1",
        context_length: int = 8192,
        responder: Callable[[Any], dict] | None = None,
    ) -> None:
        self.script: collections.deque[dict] = collections.deque(script or [])
        self.responder = responder
        self.models = list(models) if models is not None else list(self.default_models())
        self.check_model = check_model
        self.context_length = context_length
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._host = host
        self._port = port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._unavailable_served = 0

    def default_models(self) -> list[str]:
        return DEFAULT_MODELS

    # lifecycle
    def start(self) -> "FakeServer":
        self._httpd = _Server((self._host, self._port), _Handler)
        self._httpd.fake = self
        self._port = int(self._httpd.server_address[1])  # the real port, kept after stop
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fake-{self.protocol}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release stalled responses, stop serving and close the socket."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port in use (known once started; still readable after stop)."""
        assert self._port, "start the server first"
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # script and records
    def push(self, *entries: dict) -> None:
        """Append entries to the script queue (thread-safe)."""
        with self._lock:
            self.script.extend(entries)

    @property
    def chat_bodies(self) -> list[Any]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].split("?")[0] == self.chat_path]

    def _record(self, method: str, path: str, body: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body, "headers": headers})

    def _next_entry(self, body: Any) -> dict:
        """Take the next script entry for a chat request (503 entries stay until used up)."""
        with self._lock:
            if not self.script:
                return self.responder(body) if self.responder is not None else self.default_reply(body)
            entry = self.script[0]
            if entry.get("fault") == "unavailable":
                if self._unavailable_served < int(entry.get("times", 1)):
                    self._unavailable_served += 1
                    return {"fault": "status", "status": 503, "body": entry.get("body")}
                self._unavailable_served = 0
                self.script.popleft()
                return entry.get("then") or self.default_reply(body)
            return self.script.popleft()

    @staticmethod
    def default_reply(body: Any) -> dict:
        """``"You said: <last user content>"`` in word-sized chunks: the person's
        part of it, before the facts and task wisp puts at its end (a model
        answers the person, not the data it was given)."""
        from wisp.core.context.composer import person_part

        last = ""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        for msg in messages:
            if isinstance(msg, dict) and msg.get("role") == "user":
                last = person_part(str(msg.get("content") or ""))
        words = f"You said: {last}".split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages if isinstance(m, dict))
        return reply(*pieces, usage=(max(prompt_tokens, 1), len(pieces)))

    def wait_stopped(self) -> None:
        """Block the calling handler thread until the server stops (for ``stall``)."""
        self._stop.wait()

    # request handling
    def _handle(self, h: _Handler, method: str, path: str, body: Any) -> None:
        raise NotImplementedError

    def _play(self, h: _Handler, entry: dict, body: Any) -> None:
        """Answer one chat request from one script entry."""
        kind = entry.get("fault")
        if kind == "status":
            status = int(entry.get("status", 500))
            payload = entry.get("body")
            if payload is None:
                payload = self.error_body(status, f"fake error {status}")
            h._send_json(status, payload)
            return
        if kind == "model_not_found":
            model = body.get("model", "") if isinstance(body, dict) else ""
            h._send_json(404, self.model_missing_body(model))
            return
        stream = not (isinstance(body, dict) and body.get("stream") is False)
        if not stream and kind is None:
            h._send_json(200, self.whole_reply(entry, body))
            return
        self.begin_stream(h, body)
        for step in entry.get("steps", []):
            if "pause" in step:
                if self._stop.wait(float(step["pause"])):
                    h.drop()
                continue
            self.send_step(h, step, body)
        if kind is None:
            self.send_finish(h, entry, body)
            h.end_chunked()
        elif kind == "malformed":
            self.send_malformed(h, entry.get("line", "{this is not json"))
            h.end_chunked()
        elif kind == "error_object":
            self.send_error_object(h, entry.get("message", "the model crashed"))
            h.end_chunked()
        elif kind == "disconnect":
            if entry.get("clean"):
                h.end_chunked()
            else:
                h.drop()
        elif kind == "stall":
            self.wait_stopped()
            h.drop()
        elif kind == "trickle":
            line = entry.get("line")
            keep_alive = self.keep_alive_line() if line is None else line
            while not self._stop.wait(float(entry.get("every", 0.2))):
                h.chunk(keep_alive)  # raises BrokenPipeError once the client has gone
            h.drop()
        else:
            raise ValueError(f"unknown fault {kind!r}")

    # protocol hooks
    def error_body(self, status: int, message: str) -> Any:
        raise NotImplementedError

    def model_missing_body(self, model: str) -> Any:
        raise NotImplementedError

    def begin_stream(self, h: _Handler, body: Any) -> None:
        raise NotImplementedError

    def send_step(self, h: _Handler, step: dict, body: Any) -> None:
        raise NotImplementedError

    def send_finish(self, h: _Handler, entry: dict, body: Any) -> None:
        raise NotImplementedError

    def send_error_object(self, h: _Handler, message: str) -> None:
        raise NotImplementedError

    def send_malformed(self, h: _Handler, line: str) -> None:
        """Ollama: the line as is; OpenAI: ``data: <line>``."""
        h.chunk(line + "\n")

    def keep_alive_line(self) -> str:
        """What keeps a stream alive without adding to it (Ollama: a blank line)."""
        return "\n"

    def whole_reply(self, entry: dict, body: Any) -> Any:
        raise NotImplementedError


def _step_calls(step: dict) -> list[dict]:
    if "tool_call" in step:
        return [step["tool_call"]]
    return list(step.get("tool_calls", []))


class FakeOllama(FakeServer):
    """Ollama's protocol: ``POST /api/chat`` (NDJSON), ``GET /api/tags``, ``POST /api/show``."""

    protocol = "ollama"
    chat_path = "/api/chat"

    def _model_ok(self, body: Any) -> bool:
        model = body.get("model") if isinstance(body, dict) else None
        return not self.check_model or model in self.models

    def _handle(self, h: _Handler, method: str, path: str, body: Any) -> None:
        if method == "GET" and path in ("/", "/api/version"):
            if path == "/":
                h._send_json(200, "Ollama is running")
            else:
                h._send_json(200, {"version": "0.0.0-fake"})
        elif method == "GET" and path == "/api/tags":
            gate = getattr(self, "tags_gate", None)  # a test's threading.Event: a server busy until it is set
            if gate is not None:
                gate.wait(30)
            h._send_json(200, {"models": [
                {"name": m, "model": m, "size": 1000, "digest": "0" * 12, "details": {"family": "fake"}}
                for m in self.models
            ]})  # fmt: skip
        elif method == "POST" and path == "/api/show":
            if not self._model_ok(body):
                h._send_json(404, {"error": f"model '{body.get('model')}' not found"})
                return
            h._send_json(200, {
                "parameters": "temperature 0.7",
                "details": {"family": "fake"},
                "model_info": {"general.architecture": "fakearch",
                               "fakearch.context_length": self.context_length},
            })  # fmt: skip
        elif method == "POST" and path == self.chat_path:
            if not self._model_ok(body):
                h._send_json(404, self.model_missing_body(body.get("model", "")))
                return
            self._play(h, self._next_entry(body), body)
        else:
            h._send_json(404, "404 page not found")

    def _line(self, obj: dict) -> str:
        return json.dumps(obj) + "\n"

    def _base(self, body: Any) -> dict:
        model = body.get("model", "") if isinstance(body, dict) else ""
        return {"model": model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def error_body(self, status: int, message: str) -> Any:
        return {"error": message}

    def model_missing_body(self, model: str) -> Any:
        return {"error": f'model "{model}" not found, try pulling it first'}

    def begin_stream(self, h: _Handler, body: Any) -> None:
        h.start_chunked("application/x-ndjson")

    def _message(self, step: dict) -> dict:
        msg: dict[str, Any] = {"role": "assistant", "content": ""}
        if "text" in step:
            msg["content"] = step["text"]
        if "thinking" in step:
            msg["thinking"] = step["thinking"]
        calls = _step_calls(step)
        if calls:
            msg["tool_calls"] = []
            for call in calls:
                item: dict[str, Any] = {"function": {"name": call["name"], "arguments": call.get("arguments", {})}}
                if call.get("id"):
                    item["id"] = call["id"]
                msg["tool_calls"].append(item)
        return msg

    def send_step(self, h: _Handler, step: dict, body: Any) -> None:
        if "raw" in step:
            h.chunk(step["raw"] + "\n")
            return
        h.chunk(self._line({**self._base(body), "message": self._message(step), "done": False}))

    def _final(self, entry: dict, body: Any) -> dict:
        usage = entry.get("usage") or {}
        final = {
            **self._base(body),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": entry.get("finish", "stop"),
            "total_duration": 1000,
        }
        if "prompt" in usage:
            final["prompt_eval_count"] = usage["prompt"]
        if "completion" in usage:
            final["eval_count"] = usage["completion"]
        return final

    def send_finish(self, h: _Handler, entry: dict, body: Any) -> None:
        h.chunk(self._line(self._final(entry, body)))

    def send_error_object(self, h: _Handler, message: str) -> None:
        h.chunk(self._line({"error": message}))

    def whole_reply(self, entry: dict, body: Any) -> Any:
        msg: dict[str, Any] = {"role": "assistant", "content": ""}
        for step in entry.get("steps", []):
            part = self._message(step)
            msg["content"] += part.get("content", "")
            if part.get("thinking"):
                msg["thinking"] = msg.get("thinking", "") + part["thinking"]
            if part.get("tool_calls"):
                msg.setdefault("tool_calls", []).extend(part["tool_calls"])
        return {**self._final(entry, body), "message": msg}


class FakeOpenAI(FakeServer):
    """OpenAI's protocol: ``POST /v1/chat/completions`` (SSE), ``GET /v1/models``.

    ``api_key``: when set, requests without ``Authorization: Bearer <api_key>``
    get HTTP 401.
    """

    protocol = "openai"
    chat_path = "/v1/chat/completions"

    def __init__(self, script: Iterable[dict] | None = None, *, api_key: str | None = None,
                 drops_tools: bool = False, tokenize: str | None = None, **kw: Any) -> None:
        super().__init__(script, **kw)
        self.api_key = api_key
        #: Which tokenize route it serves, counting words: ``"llama-cpp-python"``
        #: (``POST /extras/tokenize/count``), ``"llama.cpp"`` (``POST /tokenize``) or ``None``.
        self.tokenize = tokenize
        #: Like llama-cpp-python's server without a function-calling chat format: the
        #: prompt tokens it counts leave out ``tools``.
        self.drops_tools = drops_tools
        #: wisp's tool probes (requests with ``"user": "wisp-probe"``), answered apart:
        #: they take no script entry and are not in ``requests`` or ``chat_bodies``.
        self.probes: list[Any] = []
        self._completion_id = 0
        self._call_index = 0

    def default_models(self) -> list[str]:
        return OPENAI_DEFAULT_MODELS

    def _authorised(self, h: _Handler) -> bool:
        if not self.api_key:
            return True
        if h.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        h._send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}})  # fmt: skip
        return False

    def _handle(self, h: _Handler, method: str, path: str, body: Any) -> None:
        if path.startswith("/v1/") and not self._authorised(h):
            return
        if method == "GET" and path == "/v1/models":
            h._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "wisp-fake"} for m in self.models
            ]})  # fmt: skip
        elif method == "POST" and path == "/extras/tokenize/count" and self.tokenize == "llama-cpp-python":
            h._send_json(200, {"count": len(str(body.get("input", "")).split())})
        elif method == "POST" and path == "/tokenize" and self.tokenize == "llama.cpp":
            h._send_json(200, {"tokens": list(range(len(str(body.get("content", "")).split())))})
        elif method == "POST" and path == self.chat_path and isinstance(body, dict) and body.get("user") == "wisp-probe":
            with self._lock:
                self.requests = [r for r in self.requests if r["body"] is not body]  # a probe is kept apart
                self.probes.append(body)
            h._send_json(200, self.probe_reply(body))
        elif method == "POST" and path == self.chat_path:
            model = body.get("model") if isinstance(body, dict) else None
            if self.check_model and model not in self.models:
                h._send_json(404, self.model_missing_body(model or ""))
                return
            self._play(h, self._next_entry(body), body)
        else:
            h._send_json(404, {"error": {"message": f"Not found: {path}", "type": "not_found_error"}})

    def probe_reply(self, body: dict) -> dict:
        """A one-token reply whose prompt tokens are the words of the messages, and of
        the tools unless :attr:`drops_tools`."""
        words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
        if body.get("tools") and not self.drops_tools:
            words += len(json.dumps(body["tools"]).split())
        return {"id": "chatcmpl-probe", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1}}

    def error_body(self, status: int, message: str) -> Any:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "code": status}}

    def model_missing_body(self, model: str) -> Any:
        return {"error": {"message": f"The model `{model}` does not exist.", "type": "invalid_request_error",
                          "param": "model", "code": "model_not_found"}}  # fmt: skip

    def _chunk_obj(self, body: Any, delta: dict, finish: str | None = None) -> dict:
        model = body.get("model", "") if isinstance(body, dict) else ""
        return {
            "id": f"chatcmpl-fake{self._completion_id}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _event(self, h: _Handler, obj: Any) -> None:
        h.chunk("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n")

    def begin_stream(self, h: _Handler, body: Any) -> None:
        with self._lock:
            self._completion_id += 1
            # tool-call indexes restart at 0 in each reply
            self._call_index = 0
        h.start_chunked("text/event-stream")
        self._event(h, self._chunk_obj(body, {"role": "assistant", "content": ""}))

    def send_step(self, h: _Handler, step: dict, body: Any) -> None:
        if "raw" in step:
            h.chunk(step["raw"] + "\n\n")
            return
        if "text" in step:
            self._event(h, self._chunk_obj(body, {"content": step["text"]}))
        if "thinking" in step:
            self._event(h, self._chunk_obj(body, {step.get("field", "reasoning_content"): step["thinking"]}))
        calls = _step_calls(step)
        if not calls:
            return
        size = max(1, int(step.get("fragment", 5)))
        streams = []
        for call in calls:
            index = self._call_index
            self._call_index += 1
            args = json.dumps(call.get("arguments", {}))
            pieces = [args[i : i + size] for i in range(0, len(args), size)] or [""]
            head = {
                "index": index,
                "id": call.get("id") or f"call_fake_{self._completion_id}_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            frags = [head] + [{"index": index, "function": {"arguments": p}} for p in pieces]
            streams.append(frags)
        if step.get("interleave"):
            order = []
            for i in range(max(len(s) for s in streams)):
                order.extend(s[i] for s in streams if i < len(s))
        else:
            order = [f for s in streams for f in s]
        for frag in order:
            self._event(h, self._chunk_obj(body, {"tool_calls": [frag]}))

    def send_finish(self, h: _Handler, entry: dict, body: Any) -> None:
        self._event(h, self._chunk_obj(body, {}, entry.get("finish", "stop")))
        usage = entry.get("usage")
        wants_usage = isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage")
        if usage and wants_usage:
            prompt, completion = usage.get("prompt", 0), usage.get("completion", 0)
            obj = self._chunk_obj(body, {})
            obj["choices"] = []
            obj["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}  # fmt: skip
            if "cached" in usage:  # OpenAI's shape of the prompt cache's share
                obj["usage"]["prompt_tokens_details"] = {"cached_tokens": usage["cached"]}
            self._event(h, obj)
        self._event(h, "[DONE]")

    def send_error_object(self, h: _Handler, message: str) -> None:
        self._event(h, {"error": {"message": message, "type": "server_error", "code": 500}})

    def send_malformed(self, h: _Handler, line: str) -> None:
        self._event(h, line)

    def keep_alive_line(self) -> str:
        """An SSE comment, as OpenAI-compatible servers send to keep a stream open."""
        return ": keep-alive\n\n"

    def whole_reply(self, entry: dict, body: Any) -> Any:
        content, reasoning, calls = "", "", []
        for step in entry.get("steps", []):
            content += step.get("text", "")
            reasoning += step.get("thinking", "")
            for call in _step_calls(step):
                calls.append({"id": call.get("id") or f"call_fake_{len(calls)}", "type": "function",
                              "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}})  # fmt: skip
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = calls
        usage = entry.get("usage") or {}
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model", "") if isinstance(body, dict) else "",
            "choices": [{"index": 0, "message": message, "finish_reason": entry.get("finish", "stop")}],
            "usage": {"prompt_tokens": usage.get("prompt", 0), "completion_tokens": usage.get("completion", 0)},
        }


def make_server(protocol: str, script: Iterable[dict] | None = None, **kw: Any) -> FakeServer:
    """``"ollama"`` → :class:`FakeOllama`, ``"openai"`` → :class:`FakeOpenAI`."""
    if protocol == "ollama":
        return FakeOllama(script, **kw)
    if protocol == "openai":
        return FakeOpenAI(script, **kw)
    raise ValueError(f"unknown protocol {protocol!r}")
