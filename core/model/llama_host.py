"""The embedded server's own process: llama-cpp-python's server, as wisp runs it.

    python -m wisp.core.model.llama_host --state-dir DIR --model FILE.gguf --alias NAME
        --n-ctx 8192 [--chat-format F] [--idle-s 300] [--detach] [--log-max-bytes N] [--log-keep K]

This module runs in the server process, never in wisp's (it imports
llama_cpp, uvicorn and FastAPI). It is llama-cpp-python's own server
(``llama_cpp.server.app.create_app``) with what wisp needs around it
(issue 10, "One embedded server, shared and fast"):

* **One server per state directory.** It takes ``DIR/server.lock`` with
  ``fcntl.flock`` before anything else, writes its pid into it, and holds it
  for its whole life; a second server for the same directory exits with
  code 3. The kernel drops
  the lock when the process ends, however it ends, so a killed server never
  leaves it wedged.
* **The port file.** It binds 127.0.0.1 on a port the OS picks, loads the
  model, then writes ``DIR/server.json`` (pid, port, base URL, model, n_ctx,
  chat format, log path) atomically; wisp processes read it to find the
  server. It removes the file when it stops.
* **Idle stop.** It counts requests in flight and the time of the last one
  (an ASGI middleware); a watchdog thread stops it after ``--idle-s``
  seconds with nothing in flight. ``GET /wisp/status`` reports this and does
  not count as use.
* **Detached.** With ``--detach`` it takes the lock, forks, and the parent
  exits at once (0 when the child holds the lock, 3 when another server
  does), so the server outlives the wisp that started it and is no child of
  it (no zombie, no kill when that wisp's event loop closes).
* **Requests from several wisps.** ``interrupt_requests`` is off: by default
  llama-cpp-python cuts a streaming reply short as soon as another request
  waits, which would end one wisp's reply in the middle.
* **Usage in streams, and the prompt cache.** llama-cpp-python streams no
  usage. Here every streamed reply ends with a chunk carrying ``usage`` (prompt
  and completion tokens) and ``prompt_tokens_details.cached_tokens``: the
  prompt tokens the server reused from its cache (llama.cpp keeps the last
  prompt's KV cache and reuses the longest common prefix), so the prompt
  tokens evaluated are ``prompt_tokens - cached_tokens``. Non-streamed
  replies get the same detail.
* **Overflow in a stream.** A prompt longer than the window raises inside
  the stream, which llama-cpp-python answers by closing the connection.
  Here it becomes an error chunk ``{"error": {"code":
  "context_length_exceeded", "n_prompt_tokens": N, "n_ctx": M, ...}}``, so
  wisp can say what happened.
* **The log.** Its stdout and stderr are the log file wisp opened; when the
  file passes ``--log-max-bytes`` it is copied to ``.1`` (older copies shift
  up to ``--log-keep``) and truncated in place.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
EXIT_BUSY = 3
LOCK_NAME = "server.lock"
INFO_NAME = "server.json"
STATUS_PATH = "/wisp/status"
#: The server's prompt-state cache in RAM (bytes): llama-cpp-python's LlamaRAMCache keeps the
#: evaluated state of recent prompts and restores the longest matching one, so a side call (the
#: running summary, refinement) no longer evicts the conversation's prompt: its next turn evaluates
#: only its new tokens (issue "Real models, real work": "keep the llama.cpp prompt cache warm";
#: measured on SmolLM2 under load: a 1,500-token prompt again after another request 41.6 s → 3.0 s).
PROMPT_CACHE_BYTES = 512 << 20


def state_bytes(state: Any) -> int:
    """The memory one cached prompt state holds (bytes): its llama.cpp state
    and the token ids and logits kept beside it. llama-cpp-python's
    LlamaRAMCache counts only the first, so its capacity did not bound the
    cache (a server with the default ``logits_all`` kept n_ctx × n_vocab
    floats a state, 1.6 GB at 8,192 tokens, and was killed for memory)."""
    extra = 0
    for name in ("scores", "input_ids"):
        array = getattr(state, name, None)
        extra += int(getattr(array, "nbytes", 0) or 0)
    return int(getattr(state, "llama_state_size", 0) or 0) + extra


def bound_prompt_cache() -> None:
    """Make LlamaRAMCache count :func:`state_bytes`, so that
    :data:`PROMPT_CACHE_BYTES` bounds what it holds. Does nothing to a
    llama_cpp without it."""
    try:
        from llama_cpp import llama_cache
    except ImportError:
        return
    cls = getattr(llama_cache, "LlamaRAMCache", None)
    if cls is not None:
        cls.cache_size = property(lambda self: sum(state_bytes(s) for s in self.cache_state.values()))

_OVERFLOW_RE = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


# --- activity ------------------------------------------------------------


class Activity:
    """Requests in flight and the time of the last one (monotonic seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.inflight = 0
        self.requests = 0
        self.last = time.monotonic()

    def begin(self) -> None:
        with self._lock:
            self.inflight += 1
            self.requests += 1
            self.last = time.monotonic()

    def end(self) -> None:
        with self._lock:
            self.inflight -= 1
            self.last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight."""
        with self._lock:
            return 0.0 if self.inflight else time.monotonic() - self.last


class ActivityMiddleware:
    """ASGI middleware: counts every HTTP request but ``/wisp/status`` as use.
    The count ends when the response is fully sent (a stream included)."""

    def __init__(self, app: Any, activity: Activity) -> None:
        self.app = app
        self.activity = activity

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("path") == STATUS_PATH:
            await self.app(scope, receive, send)
            return
        self.activity.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.end()


# --- usage and overflow ------------------------------------------------------


def instrument() -> None:
    """Patch ``llama_cpp.Llama`` in this process: record the prompt and cached
    tokens of each generation, add them to chat replies (a last ``usage``
    chunk in streams), and turn an overflow inside a stream into an error
    chunk. Does nothing to a llama_cpp without these methods."""
    import llama_cpp

    cls = llama_cpp.Llama
    if getattr(cls, "_wisp_instrumented", False):
        return
    original_generate = getattr(cls, "generate", None)
    original_chat = getattr(cls, "create_chat_completion", None)
    if original_generate is None or original_chat is None:
        return

    def generate(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        tokens = list(tokens)
        stats = getattr(self, "_wisp_stats", None)
        if stats is not None and stats.get("prompt") is None:
            cached = 0
            try:
                n_past = int(self.n_tokens)
                for a, b in zip(self._input_ids[:n_past], tokens):
                    if a != b:
                        break
                    cached += 1
                if cached >= len(tokens):
                    cached = max(0, len(tokens) - 1)  # the last token is evaluated again
            except Exception:
                cached = 0
            stats["prompt"] = len(tokens)
            stats["cached"] = cached
        return original_generate(self, tokens, *args, **kwargs)

    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        stats: dict[str, Any] = {"prompt": None, "cached": None}
        self._wisp_stats = stats
        stream = bool(kwargs.get("stream"))
        result = original_chat(self, *args, **kwargs)
        if not stream:
            self._wisp_stats = None
            usage = result.get("usage") if isinstance(result, dict) else None
            if isinstance(usage, dict) and stats["cached"] is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": stats["cached"]}
            return result

        def chunks() -> Any:
            completion = 0
            last: dict[str, Any] = {}
            try:
                for chunk in result:
                    last = chunk if isinstance(chunk, dict) else last
                    for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
                        delta = choice.get("delta") or {}
                        if delta.get("content") or delta.get("tool_calls"):
                            completion += 1
                    yield chunk
            except ValueError as exc:
                m = _OVERFLOW_RE.search(str(exc))
                if m is None:
                    raise
                yield {"error": {"message": str(exc), "type": "invalid_request_error",
                                 "code": "context_length_exceeded",
                                 "n_prompt_tokens": int(m.group(1)), "n_ctx": int(m.group(2))}}
                return
            finally:
                self._wisp_stats = None
            prompt = stats["prompt"]
            if prompt is None:
                return
            yield {
                "id": last.get("id", "chatcmpl-wisp"), "object": "chat.completion.chunk",
                "created": last.get("created", int(time.time())), "model": last.get("model", ""),
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": stats["cached"] or 0}},
            }

        return chunks()

    cls.generate = generate
    cls.create_chat_completion = create_chat_completion
    cls._wisp_instrumented = True


# --- the log ---------------------------------------------------------------


def rotate_log(path: Path, max_bytes: int, keep: int) -> bool:
    """Copy ``path`` to ``path.1`` (shifting older copies up to ``keep``) and
    truncate it in place, when it is larger than ``max_bytes``. Writers that
    opened it with ``O_APPEND`` go on writing at its new end. Returns True
    when it rotated. Never raises."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
        for i in range(keep - 1, 0, -1):
            older = path.with_name(f"{path.name}.{i}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{i + 1}"))
        if keep > 0:
            shutil.copyfile(path, path.with_name(f"{path.name}.1"))
        os.truncate(path, 0)
        return True
    except OSError:
        return False


# --- main ------------------------------------------------------------------


def _name_holder(lock_fd: int, pid: int) -> None:
    """Write the pid of the lock's holder into the lock file (which wisp reads)."""
    os.ftruncate(lock_fd, 0)
    os.pwrite(lock_fd, f"{pid}\n".encode(), 0)


def _write_info(state: Path, info: dict[str, Any]) -> None:
    tmp = state / f".{INFO_NAME}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh)
    os.replace(tmp, state / INFO_NAME)


def _remove_info(state: Path) -> None:
    path = state / INFO_NAME
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m wisp.core.model.llama_host", description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", required=True, help="holds server.lock and server.json")
    ap.add_argument("--model", required=True, help="the GGUF file")
    ap.add_argument("--alias", required=True, help="the model name the server reports")
    ap.add_argument("--n-ctx", type=int, required=True, help="the context window (tokens)")
    ap.add_argument("--chat-format", default=None, help="llama-cpp-python's chat format (default: the GGUF's template)")
    ap.add_argument("--idle-s", type=float, default=0.0, help="stop after this many seconds unused (0: never)")
    ap.add_argument("--detach", action="store_true", help="fork; the parent exits once the child holds the lock")
    ap.add_argument("--log", default=None, help="the log file (stdout and stderr already point at it)")
    ap.add_argument("--log-max-bytes", type=int, default=5 * 1024 * 1024)
    ap.add_argument("--log-keep", type=int, default=3)
    ap.add_argument("--n-threads", type=int, default=None,
                    help="threads for generation and for the prompt (default: every core this process may use)")
    return ap.parse_args(argv)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container's
    cpuset narrows), at least 1. llama-cpp-python's own default is half of
    ``os.cpu_count()`` for generation: on a quiet 2-core machine llama.cpp
    generated SmolLM2's tokens at 57 a second so, and at 96-107 with both
    cores (``benchmarks/embedded_speed.py`` measures it on yours)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def model_settings(args: argparse.Namespace) -> dict[str, Any]:
    """llama-cpp-python's ``ModelSettings`` for the parsed ``args``: the GGUF,
    its alias and window, the chat format, the prompt cache, and
    ``n_threads`` = ``n_threads_batch`` = ``--n-threads`` or every usable core
    (:func:`usable_cores`)."""
    threads = args.n_threads or usable_cores()
    return dict(model=args.model, model_alias=args.alias, n_ctx=args.n_ctx, chat_format=args.chat_format,
                verbose=True, cache=True, cache_type="ram", cache_size=PROMPT_CACHE_BYTES, logits_all=False,
                n_threads=threads, n_threads_batch=threads)


def main(argv: list[str] | None = None) -> int:
    """Run the server; returns the exit code (0 stopped, 3 another server holds the lock)."""
    args = parse_args(argv)
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_fd = os.open(state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"wisp: another embedded server holds {state / LOCK_NAME}; this one exits.", file=sys.stderr)
        return EXIT_BUSY
    holder = os.getpid()
    if args.detach:
        child = os.fork()
        if child > 0:
            _name_holder(lock_fd, child)  # before exiting, so the starter reads the right pid
            os._exit(0)  # the child holds the lock (flock locks belong to the open file, shared by fork)
        os.setsid()
    else:
        _name_holder(lock_fd, holder)
    print(f"wisp: embedded server {os.getpid()} starting: {args.model} n_ctx={args.n_ctx} "
          f"chat_format={args.chat_format or 'template'} idle_s={args.idle_s:g}", file=sys.stderr, flush=True)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    port = int(sock.getsockname()[1])

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    instrument()
    bound_prompt_cache()
    model_kwargs = model_settings(args)
    print(f"wisp: llama.cpp runs with n_threads={model_kwargs['n_threads']} "
          f"n_threads_batch={model_kwargs['n_threads_batch']}", file=sys.stderr, flush=True)
    app = create_app(server_settings=ServerSettings(host=HOST, port=port, interrupt_requests=False),
                     model_settings=[ModelSettings(**model_kwargs)])
    activity = Activity()
    started = time.time()

    async def status() -> dict[str, Any]:
        return {"pid": os.getpid(), "n_ctx": args.n_ctx, "chat_format": args.chat_format, "idle_s": args.idle_s,
                "inflight": activity.inflight, "requests": activity.requests,
                "idle_for_s": round(activity.idle_for(), 3), "uptime_s": round(time.time() - started, 3)}

    app.add_api_route(STATUS_PATH, status, methods=["GET"])
    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:  # uvicorn re-raises SIGTERM after shutting down, skipping cleanup
            yield

    server = Server(uvicorn.Config(ActivityMiddleware(app, activity), log_level="info",
                                   lifespan="off", timeout_graceful_shutdown=5))

    def on_signal(signum: int, frame: Any) -> None:
        print(f"wisp: embedded server {os.getpid()} got signal {signum}; stopping.", file=sys.stderr, flush=True)
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log = Path(args.log) if args.log else None

    def watchdog() -> None:
        while not server.should_exit:
            time.sleep(0.5)
            if log is not None:
                rotate_log(log, args.log_max_bytes, args.log_keep)
            if args.idle_s > 0 and activity.idle_for() >= args.idle_s:
                print(f"wisp: embedded server {os.getpid()} unused for {args.idle_s:g} s; stopping.",
                      file=sys.stderr, flush=True)
                server.should_exit = True

    info = {"pid": os.getpid(), "port": port, "base_url": f"http://{HOST}:{port}", "model": args.alias,
            "gguf": args.model, "n_ctx": args.n_ctx, "chat_format": args.chat_format, "idle_s": args.idle_s,
            "log": args.log, "started": started}
    try:
        threading.Thread(target=watchdog, name="wisp-idle", daemon=True).start()
        _write_info(state, info)
        server.run(sockets=[sock])
    finally:
        _remove_info(state)
        print(f"wisp: embedded server {os.getpid()} stopped.", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
