"""A bound on one message from a local MCP server (its stdout is one JSON-RPC
message a line).

The SDK's stdio transport reads a line whole, however long: a 50 MB answer
took all of ``tools.mcp.timeout_s`` to gather (each chunk joined to all
that came before) and was reported as a timeout. :class:`BoundedLines`
sits between the server's stdout and the SDK: it hands on whole lines, and
a line longer than its cap is dropped as it comes (only its first and last
bytes are kept, to find the request's ``id``), and in its place the SDK
reads a JSON-RPC error for that request with :data:`TOO_LARGE_CODE`, which
the connection reports as too big, naming the setting. Memory stays within
about the cap, whatever the server writes.

A remote server (streamable HTTP) is held to the same cap by
:func:`bounded_http_client`: the HTTP client the SDK is handed reads each
response body through :class:`CappedBody`. A JSON body, or one server-sent
event, that grows past the cap (50 MB, or a body that never ends) is not
read further: the response is closed and the SDK reads, in its place, the
same JSON-RPC error for the request (:data:`TOO_LARGE_CODE`). wisp asks for
bodies uncompressed; a gzip or deflate body a server sends anyway is
inflated here, and the cap counts what it inflates to.
"""

from __future__ import annotations

import contextvars
import json
import re
import zlib
from typing import Any

import anyio
import httpx2  # the SDK's own HTTP client (it imports it with itself)
from anyio.abc import ByteReceiveStream

__all__ = ["BoundedLines", "TOO_LARGE_CODE", "MESSAGE_CAP", "message_cap_for", "MIN_MESSAGE_BYTES",
           "install", "CappedBody", "bounded_http_client", "too_large_message", "SSE_EVENT_SLACK"]

#: The JSON-RPC error code of the error that stands for a dropped message
#: (in the range JSON-RPC leaves to implementations).
TOO_LARGE_CODE = -32099
#: The smallest cap on one message (bytes, 16 MiB): a message carries more
#: than its text (JSON escapes, an image's base64, which wisp only names).
MIN_MESSAGE_BYTES = 16 * 1024 * 1024
#: The cap of the connection being started (bytes; ``None``: no bound), read
#: where the SDK starts the server's process.
MESSAGE_CAP: contextvars.ContextVar[int | None] = contextvars.ContextVar("wisp_mcp_message_cap", default=None)
_KEEP = 512  # bytes kept of a dropped line's start and end, where its "id" is
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")(?=\s*[,}])')


def message_cap_for(max_output_bytes: int) -> int:
    """The most one message may hold (bytes): 4 × ``tools.mcp.max_output_bytes``,
    at least :data:`MIN_MESSAGE_BYTES`."""
    return max(MIN_MESSAGE_BYTES, 4 * int(max_output_bytes))


def too_large_message(ident: Any, size: int, cap: int, *, more: bool = False) -> dict[str, Any]:
    """The JSON-RPC error that stands for the answer to request ``ident``
    dropped at ``size`` bytes (``more``: the answer went on past them, unread)."""
    said = f"more than {size:,}" if more else f"{size:,}"
    return {"jsonrpc": "2.0", "id": ident, "error": {
        "code": TOO_LARGE_CODE, "message": f"the answer was {said} bytes, over the {cap:,} bytes wisp reads of "
                                           "one message",
        "data": {"bytes": size, "cap": cap, **({"more": True} if more else {})}}}


class BoundedLines(ByteReceiveStream):
    """``inner`` (a byte stream of ``\\n``-ended lines) handed on a whole
    line or more at a time, no line longer than ``cap`` bytes. A longer one
    becomes one line: ``{"jsonrpc": "2.0", "id": …, "error": {"code":
    TOO_LARGE_CODE, "message": …, "data": {"bytes": N, "cap": cap}}}`` when
    its ``id`` was found, else nothing (:attr:`dropped` counts both)."""

    def __init__(self, inner: Any, cap: int) -> None:
        self.inner = inner
        self.cap = int(cap)
        self.dropped = 0
        self._buf = bytearray()
        self._skipping = False
        self._size = 0  # bytes of the line being dropped
        self._head = b""
        self._tail = b""
        self._ended = False

    def _error_line(self) -> bytes:
        found = _ID.search(self._head) or (list(_ID.finditer(self._tail)) or [None])[-1]
        self.dropped += 1
        if found is None:
            return b""
        try:
            ident = json.loads(found.group(1))
        except ValueError:
            return b""
        return json.dumps(too_large_message(ident, self._size, self.cap)).encode() + b"\n"

    def _take(self, chunk: bytes) -> bytes:
        """What of ``chunk`` (with what is held) can be handed on now: every
        line it ends, the too-long ones replaced."""
        out = bytearray()
        pos, n = 0, len(chunk)
        while pos < n:
            nl = chunk.find(b"\n", pos)
            piece = chunk[pos:n if nl < 0 else nl]
            if self._skipping:
                self._size += len(piece)
                if len(self._head) < _KEEP:
                    self._head += piece[:_KEEP - len(self._head)]
                self._tail = (self._tail + piece[-_KEEP:])[-_KEEP:]
            elif len(self._buf) + len(piece) > self.cap:
                self._skipping = True
                self._size = len(self._buf) + len(piece)
                self._head = (bytes(self._buf[:_KEEP]) + piece[:_KEEP])[:_KEEP]
                self._tail = (bytes(self._buf[-_KEEP:]) + piece[-_KEEP:])[-_KEEP:]
                self._buf.clear()
            else:
                self._buf += piece
            if nl < 0:
                break
            if self._skipping:
                out += self._error_line()
                self._skipping, self._size, self._head, self._tail = False, 0, b"", b""
            else:
                out += self._buf
                out += b"\n"
                self._buf.clear()
            pos = nl + 1
        return bytes(out)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._ended:
                raise anyio.EndOfStream
            try:
                chunk = await self.inner.receive()
            except anyio.EndOfStream:
                self._ended = True
                rest = bytes(self._buf)
                self._buf.clear()
                if rest and not self._skipping:
                    return rest
                raise
            out = self._take(chunk)
            if out:
                return out

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def extra_attributes(self) -> Any:
        return getattr(self.inner, "extra_attributes", {})


_installed = False


def install() -> None:
    """Wrap the SDK's stdio process start once, so that a server started
    while :data:`MESSAGE_CAP` is set reads its stdout through
    :class:`BoundedLines`. Does nothing for an SDK without that hook (then
    the tests that hold the bound fail)."""
    global _installed
    if _installed:
        return
    from mcp.client import stdio as sdk

    original = getattr(sdk, "_create_platform_compatible_process", None)
    if original is None:
        return

    async def bounded_process(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        cap = MESSAGE_CAP.get()
        if cap and getattr(process, "_stdout", None) is not None:
            process._stdout = BoundedLines(process._stdout, cap)
        return process

    sdk._create_platform_compatible_process = bounded_process
    _installed = True


# --- remote servers: HTTP bodies -----------------------------------------------------------

#: Bytes the SDK's own bound on one server-sent event is set above the cap, so
#: that :class:`CappedBody` always meets an event too large first.
SSE_EVENT_SLACK = 64 * 1024
#: Bytes of a compressed body inflated at a time.
_INFLATE_PIECE = 256 * 1024
#: The JSON-RPC error code for a body in an encoding wisp does not read.
_INTERNAL_ERROR = -32603


def _request_id(request: Any) -> Any:
    """The JSON-RPC id of the request ``request`` (an ``httpx2.Request``)
    carries, or ``None`` (a notification, the GET stream, a body not read)."""
    try:
        body = json.loads(request.content)
    except Exception:
        return None
    if isinstance(body, dict) and "method" in body and isinstance(body.get("id"), (int, str)):
        return body["id"]
    return None


class CappedBody(httpx2.AsyncByteStream):
    """A response body (an ``httpx2`` async byte stream, ``inner``) handed on
    within ``cap`` bytes. ``sse``: the body is a stream of server-sent
    events, handed on an event at a time, each at most ``cap`` bytes; else
    the body is one message (JSON), handed on whole when it ends within
    ``cap``. Past the cap, reading stops, ``inner`` is closed, and the rest
    of the body is one message, the error :func:`too_large_message` for
    request ``ident`` (an SSE event ``data:`` line when ``sse``; nothing
    when ``ident`` is ``None``). ``encoding``: the body's
    ``Content-Encoding`` (``gzip``, ``deflate``; inflated here, the cap
    counting the inflated bytes); another gives the error of an unread
    encoding. :attr:`dropped` counts the bodies cut."""

    def __init__(self, inner: Any, cap: int, ident: Any, *, sse: bool, encoding: str = "") -> None:
        self.inner = inner
        self.cap = int(cap)
        self.ident = ident
        self.sse = sse
        self.encoding = encoding.strip().lower()
        self.dropped = 0

    def _message(self, message: dict[str, Any]) -> bytes:
        if self.ident is None:
            return b""
        line = json.dumps(message).encode()
        return b"data: " + line + b"\n\n" if self.sse else line

    async def _pieces(self) -> Any:
        """The body's bytes, inflated when it is compressed (each piece at most :data:`_INFLATE_PIECE`)."""
        if self.encoding in ("", "identity"):
            async for chunk in self.inner:
                yield chunk
            return
        gzip = self.encoding in ("gzip", "x-gzip")
        d = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        first = True
        async for chunk in self.inner:
            if first and not gzip and chunk and (chunk[0] & 0x0F) != 8:  # raw deflate, as some servers send it
                d = zlib.decompressobj(-zlib.MAX_WBITS)
            first = False
            data = chunk
            while data:
                out = d.decompress(data, _INFLATE_PIECE)
                data = d.unconsumed_tail
                if out:
                    yield out
                if d.eof:
                    break

    async def __aiter__(self) -> Any:
        if self.encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            await self.aclose()
            yield self._message({"jsonrpc": "2.0", "id": self.ident, "error": {
                "code": _INTERNAL_ERROR, "message": f"the answer came in the Content-Encoding "
                                                    f"{self.encoding!r}, which wisp does not read"}})
            return
        held = bytearray()
        looked = 0  # bytes of ``held`` already searched for the end of an event
        try:
            async for piece in self._pieces():
                held += piece
                while self.sse:  # hand on every event that has ended (a blank line ends it)
                    ends = [i for i in (held.find(b"\n\n", looked), held.find(b"\n\r\n", looked)) if i >= 0]
                    if not ends:
                        looked = max(0, len(held) - 2)
                        break
                    end = min(ends) + (2 if held[min(ends) + 1:min(ends) + 2] == b"\n" else 3)
                    event = bytes(held[:end])
                    del held[:end]
                    looked = 0
                    yield event
                if len(held) > self.cap:
                    size = len(held)
                    held.clear()
                    self.dropped += 1
                    await self.aclose()
                    yield self._message(too_large_message(self.ident, size, self.cap, more=True))
                    return
        except zlib.error as exc:
            await self.aclose()
            yield self._message({"jsonrpc": "2.0", "id": self.ident, "error": {
                "code": _INTERNAL_ERROR, "message": f"the answer's {self.encoding} body is damaged: {exc}"}})
            return
        if held:
            yield bytes(held)

    async def aclose(self) -> None:
        await self.inner.aclose()


def bounded_http_client(cap: int, **kwargs: Any) -> Any:
    """An ``httpx2.AsyncClient`` (made with ``kwargs``) whose every response
    body is read through :class:`CappedBody` within ``cap`` bytes, and which
    asks for bodies uncompressed (``Accept-Encoding: identity``)."""
    async def cap_body(response: Any) -> None:
        kind = response.headers.get("content-type", "").lower()
        encoding = response.headers.get("content-encoding", "")
        if encoding:  # inflated by CappedBody, within the cap: httpx2 must not inflate it again
            del response.headers["content-encoding"]
        response.stream = CappedBody(response.stream, cap, _request_id(response.request),
                                     sse=kind.startswith("text/event-stream"), encoding=encoding)

    headers = {**dict(kwargs.pop("headers", None) or {}), "Accept-Encoding": "identity"}
    return httpx2.AsyncClient(headers=headers, event_hooks={"response": [cap_body]}, **kwargs)
