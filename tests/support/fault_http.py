"""Real HTTP servers on 127.0.0.1 that misbehave on purpose, for the
endpoint fault tests: an endless line, a gzip bomb, HTTP 429, TLS where
plain HTTP is expected and back, a reset, silence.

Each server is a plain socket server in threads (no framework between the
bytes and the wire). A scenario is a function ``(conn, request) -> None``
that writes the answer to the connected socket; :class:`Request` is what
the client sent. Every loop that sends is bounded in bytes and time, and
ends when the client closes.

    with FaultServer(endless("data: {\\"x\\": \\"", b"a")) as srv:
        srv.base_url       # http://127.0.0.1:PORT
        srv.requests       # every Request, in order
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["FaultServer", "Request", "endless", "gzip_bomb", "rate_limited", "reset", "silent", "sse_reply",
           "ndjson_reply", "self_signed", "head", "mcp_speaker", "text_answer", "endless_answer", "bomb_answer",
           "SEND_LIMIT_BYTES", "SEND_LIMIT_S"]

#: The most one scenario sends on one connection (bytes) and for how long (seconds).
SEND_LIMIT_BYTES = 2 * 1024 ** 3
SEND_LIMIT_S = 60.0


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def json(self):
        return json.loads(self.body or b"null")


Scenario = Callable[[socket.socket, Request], None]


def head(status: str = "200 OK", content_type: str = "application/json", **extra: str) -> bytes:
    """A response head with ``Connection: close`` and no length (the body ends when the socket closes)."""
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _send_bounded(conn: socket.socket, first: bytes, chunk: bytes) -> None:
    """``first``, then ``chunk`` again and again, until the client closes or the bounds are reached."""
    sent, started = 0, time.monotonic()
    try:
        conn.sendall(first)
        while sent < SEND_LIMIT_BYTES and time.monotonic() - started < SEND_LIMIT_S:
            conn.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass


def endless(prefix: str, unit: bytes, content_type: str = "text/event-stream") -> Scenario:
    """200, then ``prefix`` and ``unit`` repeated (64 KiB a send) with no line end ever."""
    chunk = unit * max(1, 65536 // len(unit))

    def scenario(conn: socket.socket, req: Request) -> None:
        _send_bounded(conn, head(content_type=content_type) + prefix.encode(), chunk)
    return scenario


_BOMBS: dict[int, bytes] = {}


def bomb_bytes(inflated: int) -> bytes:
    """A gzip member of ``inflated`` zero bytes (about 1 KB of it a MB)."""
    if inflated not in _BOMBS:
        comp = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        block = bytes(1024 * 1024)
        parts = [comp.compress(block) for _ in range(inflated // len(block))]
        parts.append(comp.flush())
        _BOMBS[inflated] = b"".join(parts)
    return _BOMBS[inflated]


def gzip_bomb(inflated: int = 1100 * 1024 * 1024, content_type: str = "application/json") -> Scenario:
    """200 with ``Content-Encoding: gzip`` and a body inflating to ``inflated`` bytes (more than 1 GiB)."""
    body = bomb_bytes(inflated)

    def scenario(conn: socket.socket, req: Request) -> None:
        try:
            conn.sendall(head(content_type=content_type, Content_Encoding="gzip",
                              Content_Length=str(len(body))).replace(b"Connection: close\r\n", b""))
            conn.sendall(body)
        except OSError:
            pass
    return scenario


def sse_reply(text: str) -> bytes:
    """A whole OpenAI-compatible streamed reply of ``text``."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def ndjson_reply(text: str) -> bytes:
    """A whole Ollama streamed reply of ``text``."""
    lines = [{"model": "m", "message": {"role": "assistant", "content": text}, "done": False},
             {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
              "prompt_eval_count": 5, "eval_count": 2}]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def rate_limited(refusals: int, retry_after: str | None, then: bytes = b"") -> Scenario:
    """429 (with ``Retry-After: retry_after`` when given) for the first
    ``refusals`` chat requests, then 200 and ``then`` (an SSE reply)."""
    count = {"n": 0}
    lock = threading.Lock()

    def scenario(conn: socket.socket, req: Request) -> None:
        with lock:
            count["n"] += 1
            n = count["n"]
        try:
            if n <= refusals:
                extra = {"Retry_After": retry_after} if retry_after is not None else {}
                body = json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit"}}).encode()
                conn.sendall(head("429 Too Many Requests", Content_Length=str(len(body)), **extra) + body)
            else:
                conn.sendall(head(content_type="text/event-stream") + then)
        except OSError:
            pass
    return scenario


def reset(conn: socket.socket, req: Request) -> None:
    """Read the request, then reset the connection (RST, no answer)."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def silent(hold_s: float = 30.0) -> Scenario:
    """Read the request and answer nothing until the client closes (at most ``hold_s`` seconds)."""
    def scenario(conn: socket.socket, req: Request) -> None:
        conn.settimeout(hold_s)
        try:
            conn.recv(1)
        except OSError:
            pass
    return scenario


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key for 127.0.0.1, made now (``cryptography`` when installed, else
    ``openssl req``). Returns ``(cert, key)`` paths. Raises RuntimeError when neither is there."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            raise RuntimeError("neither the cryptography package nor openssl is installed") from None
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
             .sign(private, hashes.SHA256()))
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


def _json_answer(conn: socket.socket, message: dict, status: str = "200 OK", **extra: str) -> None:
    body = json.dumps(message).encode()
    conn.sendall(head(status, Content_Length=str(len(body)), **extra) + body)


def mcp_speaker(calls: dict[str, Scenario]) -> Scenario:
    """An MCP server over streamable HTTP, as raw as the rest here: it answers ``initialize``,
    takes notifications (202), lists one read-only tool per name of ``calls`` (taking any
    arguments), and answers a ``tools/call`` with that tool's scenario; the GET stream is refused
    (405). ``text_answer`` makes an ordinary scenario."""

    def scenario(conn: socket.socket, req: Request) -> None:
        if req.method != "POST":
            conn.sendall(head("405 Method Not Allowed", Content_Length="0"))
            return
        message = req.json()
        method, ident = message.get("method"), message.get("id")
        if ident is None:  # a notification
            conn.sendall(head("202 Accepted", Content_Length="0"))
        elif method == "initialize":
            version = (message.get("params") or {}).get("protocolVersion", "2025-06-18")
            _json_answer(conn, {"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-hostile", "version": "1"}}}, Mcp_Session_Id="raw-1")
        elif method == "tools/list":
            tools = [{"name": name, "description": f"{name} (reads only)", "annotations": {"readOnlyHint": True},
                      "inputSchema": {"type": "object", "additionalProperties": True}} for name in calls]
            _json_answer(conn, {"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call" and (message.get("params") or {}).get("name") in calls:
            calls[message["params"]["name"]](conn, req)
        else:
            _json_answer(conn, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such"}})
    return scenario


def text_answer(text: str, sse: bool = False) -> Scenario:
    """A ``tools/call`` answered with ``text``, as JSON or as one server-sent event."""
    def scenario(conn: socket.socket, req: Request) -> None:
        message = {"jsonrpc": "2.0", "id": req.json()["id"],
                   "result": {"content": [{"type": "text", "text": text}], "isError": False}}
        if sse:
            body = b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"
            conn.sendall(head(content_type="text/event-stream", Content_Length=str(len(body))) + body)
        else:
            _json_answer(conn, message)
    return scenario


def endless_answer(sse: bool = False) -> Scenario:
    """A ``tools/call`` answered with a result whose text never ends (as JSON, or in one server-sent event)."""
    def scenario(conn: socket.socket, req: Request) -> None:
        start = json.dumps({"jsonrpc": "2.0", "id": req.json()["id"]})[:-1] + ', "result": {"content": [' \
            '{"type": "text", "text": "'
        if sse:
            start = "event: message\r\ndata: " + start
        _send_bounded(conn, head(content_type="text/event-stream" if sse else "application/json")
                      + start.encode(), b"x" * 65536)
    return scenario


def bomb_answer(inflated: int = 1100 * 1024 * 1024) -> Scenario:
    """A ``tools/call`` answered with a gzip body that inflates to ``inflated`` zero bytes."""
    return gzip_bomb(inflated)


class FaultServer:
    """A socket server on 127.0.0.1 answering every request with ``scenario``
    (or ``routes[path]`` when the path is there). With ``tls`` (a
    ``(cert, key)`` pair) it speaks TLS. A context manager; :attr:`requests`
    lists what came, :attr:`tls_failures` counts handshakes that failed."""

    def __init__(self, scenario: Scenario, *, routes: dict[str, Scenario] | None = None,
                 tls: tuple[Path, Path] | None = None) -> None:
        self.scenario = scenario
        self.routes = dict(routes or {})
        self.requests: list[Request] = []
        self.tls_failures = 0
        self._ctx = None
        if tls is not None:
            self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ctx.load_cert_chain(str(tls[0]), str(tls[1]))
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def base_url(self) -> str:
        return f"{'https' if self._ctx else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> "FaultServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        try:
            self._sock.close()
        except OSError:
            pass
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self._ctx is not None:
                conn.settimeout(10)
                try:
                    conn = self._ctx.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    self.tls_failures += 1
                    return
            conn.settimeout(30)
            req = self._read(conn)
            if req is None:
                return
            self.requests.append(req)
            self.routes.get(req.path, self.scenario)(conn, req)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    @staticmethod
    def _read(conn: socket.socket) -> Request | None:
        data = b""
        while b"\r\n\r\n" not in data:
            part = conn.recv(65536)
            if not part:
                return None
            data += part
            if data[:1] == b"\x16":  # a TLS handshake: a plain HTTP server (nginx, h11) answers 400 at once
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return None
            if len(data) > 1024 * 1024:
                return None
        top, rest = data.split(b"\r\n\r\n", 1)
        lines = top.decode("latin-1").split("\r\n")
        try:
            method, path, _ = lines[0].split(" ", 2)
        except ValueError:
            return Request("?", "?", {}, b"")
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0") or 0)
        while len(rest) < length:
            part = conn.recv(65536)
            if not part:
                break
            rest += part
        return Request(method, path, headers, rest[:length])
