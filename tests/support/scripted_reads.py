"""A proxy in front of a real model's server that scripts each turn's file read.

Issue "Compaction you can see and trust", "Real-model tests on SmolLM2": "a
scripted 80-turn chat with 200-line file reads". A 135M model does not call
tools on cue, so the read is scripted here, at the HTTP boundary, and
everything else is the real thing: the real ``wisp`` command talks to this
proxy as an OpenAI-compatible endpoint, and the proxy

* answers the first request of a scripted turn (its last message is a
  prompt in :attr:`ScriptedReads.reads`) with a ``read_file`` call of that
  turn's file, written as the prompted protocol's block
  (:func:`wisp.core.model.prompted.render_call`: what wisp reads from a model
  on a server that drops ``tools``, as the embedded one does), without the
  model (or, for a prompt in :attr:`ScriptedReads.calls`, with that tool call: an edit
  scripted the same way);
* forwards every other request, unchanged and streamed, to ``upstream`` (the
  real server): the model's answer after wisp's real ``read_file`` ran, every
  side call (the running summary, ``/compact``'s preview, refinement), the
  token counts (``/extras/tokenize/count``) and the model list.

Each forwarded chat request is kept in :attr:`ScriptedReads.forwarded` with
what its body asked for (``max_tokens``, a ``response_format``) and what the
server reported (HTTP status, the prompt and completion tokens it counted),
so a test can check that every request wisp sent fit the server's window.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from wisp.core.model.prompted import render_call

__all__ = ["Forwarded", "ScriptedReads"]


@dataclass
class Forwarded:
    """One chat request the real server answered: ``status`` (HTTP),
    ``max_tokens`` (the body's, or ``None``), ``shaped`` (the body asked for
    a ``response_format``: a side call that needs a shape), ``prompt_tokens``
    and ``completion_tokens`` (the server's usage report, ``None`` without
    one), ``seconds`` (wall time), ``last`` (the first 200 characters of
    the request's last message) and ``overflow``."""

    status: int
    max_tokens: int | None
    shaped: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    last: str = ""
    #: The prompt tokens the server counted when it refused the request as over its window, else ``None``.
    overflow: int | None = None
    #: The request's system message (its first 64 KB): the layers the model was given.
    system: str = ""


def _usage(raw: bytes) -> tuple[int | None, int | None, int | None]:
    """The prompt and completion tokens of a chat reply (an SSE stream or one
    JSON object; the last usage report wins), and the prompt tokens an error
    object says it counted when the server refused the prompt as over its
    window (llama.cpp's ``n_prompt_tokens``; ``None`` for no refusal)."""
    prompt = completion = overflow = None
    text = raw.decode("utf-8", "replace")
    bodies = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    for body in bodies:
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if isinstance(usage, dict) and usage.get("prompt_tokens") is not None:
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        error = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(error, dict) and error.get("n_prompt_tokens") is not None:
            overflow = int(error["n_prompt_tokens"])
    return prompt, completion, overflow


@dataclass
class ScriptedReads:
    """The proxy (see the module doc). ``upstream`` is the real server's base
    URL; ``reads`` maps a turn's prompt to the path its first request reads
    (add to it between turns), ``calls`` a turn's prompt to any tool call
    ``(name, arguments)`` its first request makes. Use as a context manager, or
    :meth:`start`/:meth:`stop`; :attr:`base_url` is where wisp points."""

    upstream: str
    reads: dict[str, str] = field(default_factory=dict)
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    forwarded: list[Forwarded] = field(default_factory=list)
    scripted: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._client = httpx.Client(base_url=self.upstream, timeout=httpx.Timeout(3600, connect=30),
                                    trust_env=False)

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "ScriptedReads":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                proxy._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-reads", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._client.close()

    def __enter__(self) -> "ScriptedReads":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request -------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        chat = method == "POST" and h.path.rstrip("/").endswith("/chat/completions")
        body: dict[str, Any] = {}
        if chat:
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            messages = body.get("messages") or []
            last = messages[-1] if messages else {}
            content = last.get("content") if isinstance(last, dict) else None
            if isinstance(content, str):  # the person's words: before the facts and task wisp puts at its end
                from wisp.core.context.composer import person_part

                content = person_part(content)
            asked = content.strip() if last.get("role") == "user" and isinstance(content, str) else None
            if asked is not None and asked in self.reads:
                self._scripted(h, body, render_call("read_file", {"path": self.reads[asked]}))
                return
            if asked is not None and asked in self.calls:
                self._scripted(h, body, render_call(*self.calls[asked]))
                return
        started = time.monotonic()
        headers = {k: v for k, v in h.headers.items() if k.lower() in ("content-type", "authorization")}
        kept = bytearray()
        with self._client.stream(method, h.path, content=raw, headers=headers) as r:
            h.send_response(r.status_code)
            h.send_header("Content-Type", r.headers.get("content-type", "application/json"))
            h.send_header("Connection", "close")
            h.end_headers()
            for piece in r.iter_raw():
                if chat:
                    kept += piece
                h.wfile.write(piece)
                h.wfile.flush()
            status = r.status_code
        if chat:
            prompt, completion, overflow = _usage(bytes(kept))
            messages = body.get("messages") or [{}]
            record = Forwarded(status, body.get("max_tokens"), "response_format" in body, prompt, completion,
                               time.monotonic() - started, str(messages[-1].get("content") or "")[:200], overflow,
                               str(messages[0].get("content") or "")[:65536] if messages[0].get("role") == "system"
                               else "")
            with self._lock:
                self.forwarded.append(record)

    def _scripted(self, h: BaseHTTPRequestHandler, body: dict[str, Any], block: str) -> None:
        with self._lock:
            self.scripted += 1
            n = self.scripted
        model = str(body.get("model") or "")
        head = {"id": f"scripted-{n}", "object": "chat.completion.chunk", "created": 0, "model": model}
        if body.get("stream", True):
            chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": block},
                                            "finish_reason": None}]},
                      {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            content_type = "text/event-stream"
        else:
            data = json.dumps({**head, "object": "chat.completion",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": block},
                                            "finish_reason": "stop"}]})
            content_type = "application/json"
        out = data.encode()
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(out)))
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(out)
        h.wfile.flush()
