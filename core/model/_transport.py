"""HTTP plumbing shared by the Ollama and OpenAI-compatible adapters.

Private to :mod:`wisp.core.model`. It owns the httpx client, maps every httpx
failure and every non-200 status to a typed :class:`EndpointError`, and waits
out HTTP 503 (a server still loading its model) with bounded backoff, yielding
:class:`Waiting` events so the UI can show the wait.

Two clocks bound a reply (issue "Nothing runs, leaks, hangs or is lost that
shouldn't be", "Nothing hangs"): ``timeout_s`` (config ``model.timeout_s``)
is the longest silence between two reads, and ``reply_timeout_s`` (config
``model.reply_timeout_s``) the longest a whole reply may take, from sending
the request to its last line, so a server that keeps the connection alive
with blank lines or SSE comments but never finishes cannot hold a turn open
forever. :meth:`HttpEndpoint.reply_deadline` starts the clock;
:meth:`HttpEndpoint.keep_alive` makes the :class:`KeepAlive` events that let
the UI show the wait.

Every number an endpoint sends goes through :func:`clamp_count` (same issue,
"Nothing crashes": a ``prompt_eval_count`` past 2^63 crashed a turn).
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import re
import ssl
import time
import uuid
import zlib
from typing import Any, AsyncIterator

import httpx

from ..redact import remember
from ..text import without_surrogates
from .base import (
    BadRequest,
    Disconnected,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    KeepAlive,
    MalformedStream,
    ModelNotFound,
    RateLimited,
    ServerError,
    TooLarge,
    Waiting,
)

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_LOAD_WAIT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
#: The longest a whole reply may take (seconds), config ``model.reply_timeout_s``.
DEFAULT_REPLY_TIMEOUT_S = 900.0
RETRY_MAX_DELAY_S = 4.0
#: Seconds between two :class:`KeepAlive` events of one reply.
KEEP_ALIVE_EVERY_S = 1.0
#: The longest line of a stream (an NDJSON line, an SSE line) and the
#: largest SSE event (bytes, 16 MiB). The one cap on what wisp holds of a
#: line not ended yet: a server that never sends a newline would otherwise
#: fill memory (17 GB in 91 s) before any clock ran out. Counted in characters
#: of the decoded text, never more than its bytes.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The largest body wisp reads whole (bytes, 32 MiB, after decompression): a
#: model list, ``/api/show``, an unstreamed reply. A gzip body that inflates
#: to GiBs stops here.
MAX_BODY_BYTES = 32 * 1024 * 1024
#: What wisp reads of an error answer (bytes): a message is far shorter, and
#: the rest is dropped unread.
MAX_ERROR_BODY_BYTES = 64 * 1024
#: The most a compressed body yields at once (bytes), so no single network
#: chunk inflates to more than this in memory.
INFLATE_PIECE_BYTES = 1024 * 1024
#: Retries of a request the server refused with HTTP 429 and a ``Retry-After``.
RATE_LIMIT_RETRIES = 2
#: The longest ``Retry-After`` wisp waits out (seconds); a longer one is told.
RATE_LIMIT_MAX_WAIT_S = 30.0
#: The only encodings wisp asks for; it inflates them itself, in bounded pieces.
ACCEPT_ENCODING = "gzip, deflate"
#: The largest count an endpoint may report (2^53: exact as a float, and far
#: inside SQLite's 64-bit integers); larger ones are clamped to it.
MAX_COUNT = 2 ** 53


def clamp_count(value: Any) -> int | None:
    """A count (tokens, a context length, an index) as an endpoint sent it →
    an ``int`` from 0 to :data:`MAX_COUNT`, or ``None`` when it is not a
    number (a bool, a non-numeric string, NaN), is infinite or is negative.
    Never raises."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit() or not text.isascii():
            return None
        if len(text) > 16:
            return MAX_COUNT
        value = int(text)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        value = int(value) if abs(value) < MAX_COUNT else (MAX_COUNT if value > 0 else -1)
    if not isinstance(value, int) or value < 0:
        return None
    return min(value, MAX_COUNT)

_OVERFLOW_RE = re.compile(
    r"context[ _-]?(length|window|size)|too many tokens|exceed|maximum context|n_ctx|num_ctx|too long",
    re.IGNORECASE,
)
_MODEL_MISSING_RE = re.compile(
    r"model\b.*\b(not found|does not exist|not exist|no such|unknown|not available)"
    r"|(unknown|no such|invalid) model",
    re.IGNORECASE,
)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads(text: str | bytes) -> Any:
    """``json.loads`` for what an endpoint sends: every lone surrogate in a
    string or a key (a ``\\ud800`` escape, which JSON allows and UTF-8 cannot
    hold) becomes U+FFFD, so the text can be stored, shown and sent again
    (issue "Nothing runs, leaks, hangs or is lost that shouldn't be",
    "Nothing crashes"). Raises ``ValueError`` (and ``RecursionError``) as
    ``json.loads`` does."""
    obj = json.loads(text)
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return _clean(obj) if "\\u" in raw and _SURROGATE_ESCAPE.search(raw) else obj


def _clean(obj: Any) -> Any:
    if isinstance(obj, str):
        return without_surrogates(obj)
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    if isinstance(obj, dict):
        return {without_surrogates(k): _clean(v) for k, v in obj.items()}
    return obj


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
            value = loads(raw)
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
        obj = loads(text)
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


def mib(n: int) -> str:
    """A byte count in whole MB (MiB), for messages: ``16 MB``."""
    return f"{n / (1024 * 1024):g} MB"


class LineTooLong(ValueError):
    """A line grew past :class:`LineSplitter`'s ``limit`` without ending."""


class LineSplitter:
    """Text fed in pieces → its lines, split exactly as ``str.splitlines``
    splits the whole text (``\\n``, ``\\r\\n``, a lone ``\\r`` and the other
    Unicode line breaks; a ``\\r`` at a piece's end waits to see whether
    ``\\n`` follows), without their line ends.

    At most ``limit`` characters of a line are held: :meth:`feed` raises
    :class:`LineTooLong` as soon as a line would grow past it, so memory
    stays bounded whatever the server sends. Only the new piece is scanned,
    never what is held again."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._held: list[str] = []
        self._size = 0
        self._open = False  # a line has begun (it may still be empty)
        self._cr = False  # the held line ended with "\r"; a "\n" first in the next piece belongs to it

    @property
    def held(self) -> int:
        """Characters of the line not ended yet."""
        return self._size

    def _take(self, end: str = "") -> str:
        if self._size + len(end) > self.limit:
            raise LineTooLong(self._size + len(end))
        line = "".join(self._held) + end
        self._held, self._size, self._open = [], 0, False
        return line

    def _hold(self, text: str) -> None:
        if self._size + len(text) > self.limit:
            raise LineTooLong(self._size + len(text))
        if text:
            self._held.append(text)
        self._size += len(text)
        self._open = True

    def feed(self, text: str) -> list[str]:
        """The lines that ``text`` ends. Raises :class:`LineTooLong`."""
        out: list[str] = []
        if not text:
            return out
        if self._cr:
            self._cr = False
            if text[0] == "\n":
                text = text[1:]
            out.append(self._take())
            if not text:
                return out
        parts = text.splitlines(keepends=True)
        for part in parts[:-1]:
            out.append(self._take(part.splitlines()[0]))
        last = parts[-1]
        body = last.splitlines()[0]
        if body == last:  # no line end yet
            self._hold(last)
        elif last.endswith("\r"):
            self._hold(body)
            self._cr = True
        else:
            out.append(self._take(body))
        return out

    def end(self) -> list[str]:
        """The last line, when the text did not end with a line end."""
        if self._open or self._cr:
            self._cr = False
            return [self._take()]
        return []


class _Inflater:
    """One ``Content-Encoding`` (``gzip``, ``deflate`` or none) undone in
    pieces of at most :data:`INFLATE_PIECE_BYTES`, so that a gzip bomb's
    small chunk never becomes a large string at once (httpx's own decoder
    inflates a whole network chunk, up to about 1,000 times its size).
    Raises ``zlib.error`` for a body that is not what it says."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._wbits = zlib.MAX_WBITS | 16 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._d = zlib.decompressobj(self._wbits)
        self._start = b"" if encoding == "deflate" else None  # deflate: its first bytes, until the kind is known

    def feed(self, data: bytes) -> Any:
        """The inflated pieces of ``data`` (a generator of ``bytes``)."""
        if self._start is not None:
            # "deflate" is zlib's format, or raw deflate as some servers send it: its 2-byte header tells
            self._start += data
            if len(self._start) < 2:
                return
            data, self._start = self._start, None
            if not ((data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0):
                self._wbits = -zlib.MAX_WBITS
                self._d = zlib.decompressobj(self._wbits)
        while True:
            out = self._d.decompress(data, INFLATE_PIECE_BYTES)
            if out:
                yield out
            if self._d.eof:  # a next gzip member may follow
                data = self._d.unused_data
                self._d = zlib.decompressobj(self._wbits)
                if not data:
                    return
                continue
            data = self._d.unconsumed_tail
            if not data and len(out) < INFLATE_PIECE_BYTES:
                return


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` (delay seconds, or an HTTP date) → seconds from now
    (at least 0), ``None`` when absent or unreadable. ``now`` is epoch
    seconds (for tests)."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            import datetime as _dt

            when = when.replace(tzinfo=_dt.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


async def capped_json(client: httpx.AsyncClient, url: str, *, limit: int = MAX_ERROR_BODY_BYTES,
                      timeout: Any = None) -> tuple[int, Any]:
    """``GET url`` → ``(status, the JSON answer)``, reading at most ``limit``
    bytes of it (once inflated: wisp undoes gzip and deflate itself, in
    bounded pieces); the answer is ``None`` when the status is not 200. For
    the small answers of wisp's own embedded server, whose port another
    program could hold. Raises ``httpx.HTTPError``, and ``ValueError`` for
    an answer over ``limit``, in an encoding not asked for, or not JSON."""
    kwargs = {"timeout": timeout} if timeout is not None else {}
    async with client.stream("GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING}, **kwargs) as resp:
        if resp.status_code != 200:
            return resp.status_code, None
        names = [e.strip().lower() for e in resp.headers.get("content-encoding", "").split(",")]
        names = [n for n in names if n and n != "identity"]
        if any(n not in ("gzip", "x-gzip", "deflate") for n in names):
            raise ValueError(f"an answer encoded as {', '.join(names)}")
        inflaters = [_Inflater(n) for n in reversed(names)]
        buf = bytearray()
        async for chunk in resp.aiter_raw():
            try:
                for piece in _undone(inflaters, chunk):
                    buf += piece
                    if len(buf) > limit:
                        raise ValueError(f"an answer of over {limit:,} bytes")
            except zlib.error as exc:
                raise ValueError(f"an answer that does not inflate ({exc})") from None
    return resp.status_code, loads(bytes(buf))


def _undone(inflaters: list["_Inflater"], data: bytes, at: int = 0) -> Any:
    """``data`` through ``inflaters[at:]``, one bounded piece at a time."""
    if at == len(inflaters):
        if data:
            yield data
        return
    for piece in inflaters[at].feed(data):
        yield from _undone(inflaters, piece, at + 1)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen and len(seen) < 16:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def _reason(exc: BaseException) -> str:
    """The first words of ``exc``'s chain that say something (httpx's
    errors are often empty), or ``""``."""
    for item in _chain(exc):
        if isinstance(item, ConnectionResetError):
            return "the connection was reset"
        text = short(str(item), 80)
        if text and text not in ("()", "''"):
            return text
    return ""


def _tls_for(base_url: str) -> dict[str, Any]:
    """The client's TLS settings for ``base_url``: httpx's own (the system's
    trusted certificates, loaded when the client is made, about 0.1 s) for
    an ``https`` endpoint; for a plain ``http`` one, which never makes a TLS
    connection, a context that trusts no certificate at all, so nothing is
    loaded and a stray TLS connection could only fail, never pass unchecked
    (issue 12, "Connect once")."""
    if base_url.lower().startswith("http://"):
        import ssl

        return {"verify": ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)}
    return {}


def _remember_url_password(url: str) -> None:
    """A password in the endpoint's URL (``http://user:pw@host``) is masked
    everywhere from now on, and so is the ``Basic`` credential httpx makes
    of it (a server that echoes its Authorization header would show it)."""
    import base64
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        remember(unquote(parts.password))
        remember(parts.password)
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}".encode()
        remember(base64.b64encode(pair).decode())


class HttpEndpoint:
    """Base of the adapters: client, URL joining, error mapping and the 503 wait.

    ``timeout_s`` (seconds) bounds every read, so a stream that stalls between
    chunks also times out; connecting is bounded by ``connect_timeout_s``.
    ``reply_timeout_s`` (seconds) bounds a whole reply, keep-alives or not.
    ``load_wait_s`` (seconds) is the longest total wait on HTTP 503 before
    giving up; ``retry_base_s`` is the first pause, doubled each try up to 4 s.
    """

    provider = "endpoint"
    display_name = "the endpoint"

    def name_within(self) -> str:
        """``display_name`` as written inside a sentence: ``The embedded…``
        becomes ``the embedded…``; a proper name (``Ollama``) stays as it is.
        ``display_name`` itself is written to open a sentence."""
        name = self.display_name
        return "t" + name[1:] if name.startswith("The ") else name

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
        reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    ) -> None:
        self.base_url = self.normalise_base_url(base_url)
        _remember_url_password(self.base_url)
        self.model = model
        self.timeout_s = float(timeout_s)
        self.reply_timeout_s = float(reply_timeout_s)
        self.load_wait_s = float(load_wait_s)
        self.retry_base_s = float(retry_base_s)
        #: What to do when the server refuses access (HTTP 401/403); the
        #: resolver says more when it knows where the key should come from.
        self.auth_hint = "Set model.api_key_env to the environment variable that holds the API key."
        # wisp inflates bodies itself, in bounded pieces, and only these encodings (:class:`_Inflater`)
        self._headers = {"Accept-Encoding": ACCEPT_ENCODING, **dict(headers or {})}
        self._owns_client = client is None
        if client is None:
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=min(connect_timeout_s, self.timeout_s)),
                trust_env=False, **_tls_for(self.base_url),
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
        known, and how to raise the window for this endpoint. With neither number
        (an older llama.cpp), no window size is advised: the endpoint does not
        know the window it runs, and a guess may be the one it already has
        (the agent, which knows the window it planned for, says more)."""
        said = short(detail, 100) if detail else None
        if not prompt_tokens and not window:
            return BadRequest(
                f"The server refused the prompt as larger than its context window ({said or 'no details'}), "
                "without saying how many tokens it counted or how large its window is. Make the request smaller "
                "(/compact, a shorter prompt, or a new conversation), or give the server a larger window than it "
                "has and set model.context_window to it.", context_overflow=True, detail=said)
        if prompt_tokens and window:
            what = f"The prompt needed {prompt_tokens:,} tokens of the server's {window:,}-token window"
        elif window:
            what = f"The prompt did not fit the server's {window:,}-token window"
        else:
            what = f"The prompt needed {prompt_tokens:,} tokens, more than the server's context window"
        advice = self.window_advice(max(prompt_tokens or 0, (window or 0) + 1))
        return BadRequest(f"{what}. {advice}, or start a new conversation.", context_overflow=True,
                          prompt_tokens=prompt_tokens, window=window, detail=said)

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

    # -- the reply's clock -------------------------------------------------

    def reply_deadline(self) -> "ReplyClock":
        """Start the clock of one reply (call it before sending the request)."""
        return ReplyClock(asyncio.get_running_loop().time(), self.reply_timeout_s)

    def reply_timeout(self, clock: "ReplyClock") -> EndpointTimeout:
        """The error for a reply that outlasted ``reply_timeout_s``."""
        how = (", sending only keep-alives" if clock.keep_alives else "")
        return EndpointTimeout(
            f"{self.display_name} at {self.base_url} did not finish the reply within "
            f"{self.reply_timeout_s:g} s (it kept the connection open{how}). The reply so far is kept; "
            "check the server, or raise model.reply_timeout_s for very long replies."
        )

    def keep_alive(self, clock: "ReplyClock") -> KeepAlive | None:
        """A :class:`KeepAlive` for a keep-alive line (a blank line, an SSE
        comment), at most one every :data:`KEEP_ALIVE_EVERY_S` seconds, and
        only when no data has come for that long: sse-starlette (under
        llama-cpp-python's server) sends ``: ping`` comments every 15 s while
        the reply streams, which are no wait (a new user saw the notice in
        the middle of a streaming reply)."""
        clock.keep_alives += 1
        now = asyncio.get_running_loop().time()
        if now - max(clock.last_shown, clock.last_data) < KEEP_ALIVE_EVERY_S:
            return None
        clock.last_shown = now
        return KeepAlive(waited_s=now - clock.started, limit_s=self.reply_timeout_s)

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
                f"Connecting to {self.name_within()} at {self.base_url} timed out. "
                f"Check that the server is running and model.endpoint is right."
            )
        tls = self._tls_error(exc)
        if tls is not None:
            return tls
        if isinstance(exc, httpx.ConnectError) and any(isinstance(e, ConnectionResetError) for e in _chain(exc)):
            return Disconnected(f"{self.display_name} at {self.base_url} reset the connection before "
                                f"answering. {self.log_advice()}")
        if isinstance(exc, httpx.ConnectError):
            return EndpointUnreachable(f"Cannot connect to {self.name_within()} at {self.base_url}. {self.start_hint()}")
        if isinstance(exc, httpx.TimeoutException):
            what = "sent nothing more of the reply for" if streaming else "did not answer within"
            return EndpointTimeout(
                f"{self.display_name} at {self.base_url} {what} {self.timeout_s:g} s. "
                "The model may still be loading or be too slow; try again or raise model.timeout_s."
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError)):
            when = "in the middle of the reply" if streaming else "before answering"
            reason = _reason(exc)
            if reason == "the connection was reset":
                return Disconnected(f"{self.display_name} at {self.base_url} reset the connection {when}. "
                                    f"{self.log_advice()}")
            return Disconnected(
                f"{self.display_name} at {self.base_url} closed the connection {when}"
                f"{f' ({reason})' if reason else ''}. {self.log_advice()}"
            )
        if isinstance(exc, httpx.HTTPError):
            return EndpointError(f"Request to {url} failed: {type(exc).__name__}: {short(exc)}. Try again.")
        return EndpointError(f"Request to {url} failed unexpectedly: {type(exc).__name__}: {short(exc)}.")

    def _tls_error(self, exc: Exception) -> EndpointError | None:
        """The error for a failed TLS handshake with an ``https`` endpoint:
        a certificate the system does not trust (a self-signed one), or a
        server that does not speak TLS on that port (plain HTTP). ``None``
        when ``exc`` is no TLS failure."""
        found = next((e for e in _chain(exc) if isinstance(e, ssl.SSLError)), None)
        if found is None:
            return None
        plain = self.base_url.replace("https://", "http://", 1)
        if isinstance(found, ssl.SSLCertVerificationError):
            why = short(getattr(found, "verify_message", "") or found.reason or found, 80)
            return EndpointUnreachable(
                f"{self.display_name} at {self.base_url} sent a TLS certificate that is not trusted ({why}). wisp "
                "checks it against the system's trusted certificates: add the certificate (or its authority) to "
                "them (update-ca-certificates) or give the server one they trust; or, if the server also serves "
                f"plain HTTP on a trusted network, set model.endpoint to {plain}."
            )
        return EndpointUnreachable(
            f"{self.display_name} at {self.base_url} does not speak TLS on that port (the handshake failed: "
            f"{short(found.reason or found, 60)}); a server that answers plain HTTP is reached without it: set "
            f"model.endpoint to {plain}."
        )

    async def _speaks_tls(self) -> bool:
        """Whether the ``http://`` endpoint's port finishes a TLS handshake
        (certificate unchecked: nothing is sent over it), within 2 s."""
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(self.base_url)
            host, port = parts.hostname, parts.port or 80
        except ValueError:
            return False
        if parts.scheme != "http" or not host:
            return False
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), 2.0)
        except (OSError, asyncio.TimeoutError, ssl.SSLError, ValueError):
            return False
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass
        return True

    async def explained(self, exc: Exception, path: str, *, streaming: bool = False) -> EndpointError:
        """:meth:`map_http_error`, and for a plain ``http://`` endpoint that
        closed the connection before answering, whether it speaks TLS there
        (then the message says to use ``https://``)."""
        err = self.map_http_error(exc, path, streaming=streaming)
        if isinstance(err, Disconnected) and not streaming and await self._speaks_tls():
            secure = self.base_url.replace("http://", "https://", 1)
            return EndpointUnreachable(
                f"{self.display_name} at {self.base_url} speaks TLS (https), not plain HTTP: it closed the "
                f"connection at wisp's plain request. Set model.endpoint to {secure}."
            )
        return err

    def too_large_line(self, limit: int, what: str = "a line") -> TooLarge:
        """The error for a stream line (or SSE event) past ``limit`` bytes."""
        return TooLarge(
            f"{self.display_name} at {self.base_url} sent {what} of over {mib(limit)} without ending it: wisp "
            "stopped reading and closed the request (the reply so far is kept). Check that model.endpoint and "
            "model.provider name a model server.", limit)

    def too_large_body(self, path: str, limit: int) -> TooLarge:
        """The error for a body that inflates past ``limit`` bytes."""
        return TooLarge(
            f"{self.display_name} at {self.base_url} answered {path} with over {mib(limit)} (once decompressed): "
            "wisp stopped reading and closed the request. Check that model.endpoint names a model server.", limit)

    async def pieces(self, resp: httpx.Response, path: str, clock: "ReplyClock | None" = None, *,
                     streaming: bool = True) -> AsyncIterator[bytes]:
        """The body of a streamed ``resp``, its ``Content-Encoding`` undone in
        pieces of at most :data:`INFLATE_PIECE_BYTES` bytes; each network read
        under the reply's ``clock``. Read failures are mapped (EndpointError);
        an encoding wisp did not ask for, or a body that does not inflate, is
        :class:`MalformedStream`."""
        names = [e.strip().lower() for e in resp.headers.get("content-encoding", "").split(",")]
        names = [n for n in names if n and n != "identity"]
        for name in names:
            if name not in ("gzip", "x-gzip", "deflate"):
                raise MalformedStream(
                    f"{self.display_name} at {self.base_url} sent its answer encoded as {name!r}, which wisp did "
                    f"not ask for (it asks for {ACCEPT_ENCODING}). Check model.endpoint.")
        inflaters = [_Inflater(n) for n in reversed(names)]  # the last one applied is undone first

        raw = resp.aiter_raw().__aiter__()
        while True:
            try:
                async with self._within(clock):
                    chunk = await raw.__anext__()
            except StopAsyncIteration:
                break
            except EndpointError:
                raise
            except Exception as exc:
                raise await self.explained(exc, path, streaming=streaming) from exc
            try:
                for piece in _undone(inflaters, chunk):
                    yield piece
            except zlib.error as exc:
                raise MalformedStream(
                    f"{self.display_name} at {self.base_url} sent a {', '.join(names)} body that does not "
                    f"inflate ({short(exc, 60)}). Check the server's log and try again.") from None

    async def read_body(self, resp: httpx.Response, path: str, clock: "ReplyClock | None" = None, *,
                        limit: int = MAX_BODY_BYTES, truncate: bool = False, streaming: bool = False) -> bytes:
        """The whole body of a streamed ``resp``, decompressed, at most
        ``limit`` bytes: past it, :class:`TooLarge` (or, with ``truncate``,
        the first ``limit`` bytes: for error answers, whose message is at
        their start). Raises EndpointError."""
        buf = bytearray()
        async for piece in self.pieces(resp, path, clock, streaming=streaming):
            if len(buf) + len(piece) > limit:
                if truncate:
                    buf += piece[: limit - len(buf)]
                    break
                raise self.too_large_body(path, limit)
            buf += piece
        return bytes(buf)

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
        if status == 429:
            return self.rate_limited(detail, None)
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

    def rate_limited(self, detail: str, retry_after_s: float | None, retried: int = 0) -> RateLimited:
        """The error for HTTP 429 that wisp does not wait out: the server's
        ``Retry-After`` (seconds) is said when it gave one."""
        tried = f" (after {retried} retr{'y' if retried == 1 else 'ies'})" if retried else ""
        if retry_after_s is None:
            when = "It did not say when: try again in a minute"
        elif retry_after_s < 120:
            when = f"It asks to wait {retry_after_s:.0f} s: try again after that"
        elif retry_after_s < 7200:
            when = f"It asks to wait {retry_after_s / 60:.0f} minutes: try again after that"
        else:
            until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() + retry_after_s))
            when = f"It asks to wait until {until}: try again after that"
        return RateLimited(
            f"{self.display_name} at {self.base_url} is rate-limiting requests (HTTP 429: {detail}){tried}. "
            f"{when}, or send requests less often.", retry_after_s)

    async def safe_list_models(self) -> list[str]:
        """:meth:`list_models`, or ``[]`` when that fails too."""
        try:
            return await self.list_models()
        except EndpointError:
            return []

    # -- requests -------------------------------------------------------

    async def probe(self, path: str, key: str, *, connect_s: float = 1.0,
                    read_s: float = 3.0) -> tuple[bool, str, Any]:
        """``GET path`` on this endpoint's own client, with short timeouts
        (``connect_s``, ``read_s`` seconds): ``(True, "", data)`` when it answers
        200 with a JSON object holding ``key``, else ``(False, why, None)``.
        Never raises. The same client then lists the models and streams the
        replies (issue 12, "Connect once")."""
        resp = None
        try:
            request = self._client.build_request("GET", self.base_url + path, headers=self._headers,
                                                 timeout=httpx.Timeout(read_s, connect=connect_s))
            resp = await self._client.send(request, stream=True)
            if resp.status_code != 200:
                return False, f"HTTP {resp.status_code}", None
            content = await asyncio.wait_for(self.read_body(resp, path), read_s)
        except httpx.ConnectError:
            return False, "not running", None
        except (httpx.TimeoutException, asyncio.TimeoutError):
            return False, "no answer", None
        except TooLarge:
            return False, "too large", None
        except Exception as exc:
            return False, type(exc).__name__, None
        finally:
            if resp is not None:
                await resp.aclose()
        try:
            data = loads(content)
        except ValueError:
            return False, "not JSON", None
        if not isinstance(data, dict) or key not in data:
            return False, "not this protocol", None
        return True, "", data

    def models_in(self, data: Any) -> list[str]:  # pragma: no cover - overridden
        """The model names of a model-list answer (``list_models``'s reading of it)."""
        raise NotImplementedError

    async def request_json(self, method: str, path: str, body: Any = None) -> Any:
        """One plain request; returns the decoded JSON answer, within
        ``reply_timeout_s`` in all. Raises EndpointError."""
        clock = self.reply_deadline()
        resp = None
        try:
            async with self._within(clock):
                request = self._client.build_request(method, self.base_url + path, json=body,
                                                     headers=self._headers)
                resp = await self._client.send(request, stream=True)
            ok = resp.status_code == 200
            content = await self.read_body(resp, path, clock, limit=MAX_BODY_BYTES if ok else MAX_ERROR_BODY_BYTES,
                                           truncate=not ok)
        except EndpointError:
            raise
        except Exception as exc:  # httpx and anything below it
            raise await self.explained(exc, path) from exc
        finally:
            if resp is not None:
                await resp.aclose()
        if resp.status_code != 200:
            raise await self.status_error(resp.status_code, content, path)
        try:
            return loads(content)
        except ValueError as exc:
            raise MalformedStream(
                f"{self.display_name} at {self.base_url} answered {path} with something that is not JSON "
                f"({short(content.decode('utf-8', 'replace'), 60)!r}). Check model.endpoint and model.provider."
            ) from exc

    async def open_stream(self, path: str, body: Any,
                          clock: "ReplyClock | None" = None) -> AsyncIterator[Waiting | httpx.Response]:
        """POST ``body`` and yield ``Waiting`` for each 503 pause, then the 200 response.

        The caller must close the response (``await resp.aclose()``). Raises
        EndpointError for every failure, including a 503 that outlasts
        ``load_wait_s`` and, with a ``clock`` (:meth:`reply_deadline`), a
        reply that outlasts ``reply_timeout_s``.
        """
        url = self.base_url + path
        started = time.monotonic()
        attempt = 0
        limited = 0  # retries after HTTP 429
        while True:
            try:
                request = self._client.build_request("POST", url, json=body, headers=self._headers)
                async with self._within(clock):
                    resp = await self._client.send(request, stream=True)
            except EndpointError:
                raise
            except Exception as exc:
                raise await self.explained(exc, path) from exc
            if resp.status_code == 200:
                yield resp
                return
            try:
                content = await self.read_body(resp, path, clock, limit=MAX_ERROR_BODY_BYTES, truncate=True)
            finally:
                await resp.aclose()
            if resp.status_code == 429:
                wait = retry_after_seconds(resp.headers.get("retry-after"))
                detail = short(error_text(content)[0], 80) or "too many requests"
                if wait is None or wait > RATE_LIMIT_MAX_WAIT_S or limited >= RATE_LIMIT_RETRIES:
                    raise self.rate_limited(detail, wait, limited)
                limited += 1
                reason = (f"{self.display_name} is rate-limiting requests (HTTP 429: {detail}); "
                          f"retrying in {wait:.0f} s as it asks ({limited} of {RATE_LIMIT_RETRIES})")
                yield Waiting(reason=reason, attempt=limited, delay_s=wait, waited_s=time.monotonic() - started,
                              why="rate_limited")
                async with self._within(clock):
                    await asyncio.sleep(wait)
                continue
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
                    async with self._within(clock):
                        await asyncio.sleep(delay)
                    continue
            raise await self.status_error(resp.status_code, content, path)

    def _within(self, clock: "ReplyClock | None") -> Any:
        """A context that raises the reply timeout when ``clock`` runs out inside it."""
        return _Within(self, clock)

    async def stream_lines(self, resp: httpx.Response, path: str,
                           clock: "ReplyClock | None" = None) -> AsyncIterator[str]:
        """The response's lines (without line endings, split as ``str.splitlines``
        splits them, as httpx's ``aiter_lines`` does, but each at most
        :data:`MAX_LINE_BYTES`: a longer one is :class:`TooLarge` and the
        request is closed, where ``aiter_lines`` would hold it all), mapping read failures;
        with a ``clock``, raises :class:`EndpointTimeout` once the reply has
        taken ``reply_timeout_s``, even while lines keep coming.

        The body is read a network chunk at a time, each read under the
        reply's clock, and the chunk's lines are given without waiting again:
        a server that sends a long reply at once is read as fast as it sends
        (issue 12, "Decouple receiving from rendering")."""
        try:
            decoder = codecs.getincrementaldecoder(resp.encoding or "utf-8")(errors="replace")
        except LookupError:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        lines = LineSplitter(MAX_LINE_BYTES)
        try:
            async for piece in self.pieces(resp, path, clock):
                for line in lines.feed(decoder.decode(piece)):
                    yield line
            for line in lines.feed(decoder.decode(b"", final=True)) + lines.end():
                yield line
        except LineTooLong:
            await resp.aclose()
            raise self.too_large_line(MAX_LINE_BYTES) from None

    def unexpected(self, exc: Exception) -> EndpointError:
        """A bug-shaped failure while reading a stream → MalformedStream (never a raw exception)."""
        return MalformedStream(
            f"{self.display_name} at {self.base_url} sent a reply wisp could not read "
            f"({type(exc).__name__}: {short(exc, 80)}). Check that model.provider matches the server."
        )


class ReplyClock:
    """The clock of one reply: ``started`` (event-loop time, seconds),
    ``limit_s`` (``reply_timeout_s``), the keep-alive lines seen so far and
    when a :class:`KeepAlive` was last given and data last came (event-loop
    time: :meth:`saw_data`)."""

    __slots__ = ("started", "limit_s", "keep_alives", "last_shown", "last_data")

    def __init__(self, started: float, limit_s: float) -> None:
        self.started = started
        self.limit_s = limit_s
        self.keep_alives = 0
        self.last_shown = started
        self.last_data = started

    def saw_data(self) -> None:
        """A line of the reply's data arrived (not a keep-alive)."""
        self.last_data = asyncio.get_running_loop().time()

    @property
    def deadline(self) -> float:
        """When the reply must have ended (event-loop time)."""
        return self.started + self.limit_s


class _Within:
    """``async with``: :func:`asyncio.timeout_at` the clock's deadline, turning
    its expiry into the endpoint's reply-timeout error (nothing without a clock)."""

    def __init__(self, endpoint: HttpEndpoint, clock: ReplyClock | None) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self._timeout: Any = None

    async def __aenter__(self) -> None:
        if self.clock is None:
            return
        if asyncio.get_running_loop().time() >= self.clock.deadline:
            raise self.endpoint.reply_timeout(self.clock)
        self._timeout = asyncio.timeout_at(self.clock.deadline)
        await self._timeout.__aenter__()

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        if self._timeout is None:
            return False
        try:
            await self._timeout.__aexit__(kind, exc, tb)
        except TimeoutError:
            raise self.endpoint.reply_timeout(self.clock) from None  # type: ignore[arg-type]
        return False
