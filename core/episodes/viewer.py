"""``wisp memory serve``: a read-only web viewer of episodic memory.

Rules (issue "Episodic memory across conversations", "Viewer"; the
reference ``enso-episodic-memory.txt``, "Browse in the web viewer"):

- ``/memory`` is a timeline grouped by event date (in the memory time
  zone), newest first, with search (FTS5 over summaries) and filters for
  workspace, transport, channel and dates (the ``--since``/``--until``
  forms), 50 memories a page. ``/memory/MEM-000001`` is an entry: the full
  summary, event and recording times, origin, and the source exchanges.
- It changes nothing: GET and HEAD only (anything else is 405), each
  request reads through its own SQLite connection with ``PRAGMA
  query_only`` on, and reloading shows new entries.
- It listens on 127.0.0.1 by default and refuses any address that is not
  loopback unless config ``memory.serve_allow_non_loopback`` is true. On a
  loopback address it also refuses requests whose ``Host`` header names
  another host (a DNS-rebinding page cannot read it).
- Every value from the database or the URL is HTML-escaped; the page has
  no script, and its Content-Security-Policy allows none.
- Every request gets an answer: a query it cannot serve (``?page=`` past
  any page) is 400 with the reason (issue "Nothing runs, leaks, hangs or is
  lost that shouldn't be").

Built on the standard library's :mod:`http.server` (no new dependency).
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import socket
import sqlite3
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs, urlencode, urlsplit

from .dates import DateError, format_local, local, memory_timezone, zone_name
from .ids import MemoryIdError, format_memory_id, parse_memory_id
from .query import (QueryError, find_memories_sync, get_memory_sync, list_transports_sync,
                    list_workspaces_sync, make_filter, memory_sources_sync)

__all__ = ["ViewerError", "check_host", "MemoryViewer", "serve", "PAGE_SIZE"]

#: Memories on one timeline page.
PAGE_SIZE = 50
_ALL = "*"


class ViewerError(Exception):
    """The viewer cannot start (a refused address, a port in use); the message says what to do."""


def check_host(host: str, allow_non_loopback: bool) -> str:
    """``host`` if the viewer may listen there, else :class:`ViewerError`.

    Loopback is ``127.0.0.0/8``, ``::1`` or ``localhost``. A host name is
    resolved and allowed only when every address it names is loopback.
    """
    h = (host or "").strip().strip("[]")
    if not h:
        raise ViewerError("give an address to listen on, such as --host 127.0.0.1")
    if h == "localhost" or _is_loopback(h):
        return h
    if allow_non_loopback:
        return h
    raise ViewerError(
        f"the memory viewer listens only on loopback (127.0.0.1, ::1, localhost), not {host}: memories hold "
        "your conversations. To allow it anyway: wisp config set memory.serve_allow_non_loopback true")


def _is_loopback(h: str) -> bool:
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(h, None)
    except OSError:
        return False
    addrs = {i[4][0] for i in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


# --- HTML -----------------------------------------------------------------------------

_CSS = """
*{box-sizing:border-box}body{margin:0;font:15px/1.5 system-ui,-apple-system,Segoe UI,sans-serif;
color:#1d2330;background:#f6f7f9}header{background:#23304a;color:#fff;padding:.7rem 1rem}
header a{color:#fff;text-decoration:none;font-weight:600}header small{opacity:.75;margin-left:.6rem}
main{max-width:60rem;margin:0 auto;padding:1rem}form.filters{display:flex;flex-wrap:wrap;gap:.5rem;
align-items:end;background:#fff;padding:.8rem;border-radius:.5rem;border:1px solid #dde1e8}
form.filters label{display:flex;flex-direction:column;font-size:.8rem;color:#566}
form.filters input,form.filters select{font:inherit;padding:.3rem .4rem;border:1px solid #c5cad3;
border-radius:.3rem;min-width:8rem}form.filters button{font:inherit;padding:.35rem .9rem;border-radius:.3rem;
border:0;background:#23304a;color:#fff}h2.day{font-size:1rem;margin:1.4rem 0 .4rem;color:#445}
article.memory{background:#fff;border:1px solid #dde1e8;border-radius:.5rem;padding:.6rem .8rem;
margin:.4rem 0}article.memory a.ref{font-weight:600;font-family:ui-monospace,monospace}
.meta{color:#667;font-size:.85rem}.error{background:#fde8e8;border:1px solid #e3a0a0;padding:.6rem;
border-radius:.4rem}.summary{white-space:pre-wrap;background:#fff;border:1px solid #dde1e8;
border-radius:.5rem;padding:.8rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{color:#667}dd{margin:0}section.exchange{background:#fff;border:1px solid #dde1e8;border-radius:.5rem;
padding:.6rem .8rem;margin:.6rem 0}pre{white-space:pre-wrap;word-break:break-word;background:#f2f4f7;
padding:.5rem;border-radius:.3rem;margin:.2rem 0 .6rem}nav.pages{display:flex;justify-content:space-between;
margin:1rem 0}@media (max-width:40rem){form.filters label{flex:1 1 45%}main{padding:.5rem}}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str, tz: Any) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)} · wisp memory</title><style>{_CSS}</style></head><body>"
            f"<header><a href=\"/memory\">wisp · Memory</a><small>read-only · times in {_e(zone_name(tz))}"
            f"</small></header><main>{body}</main></body></html>")


def _day_heading(text: str, tz: Any) -> str:
    d = local(text, tz)
    return d.strftime("%A %d %B %Y").replace(" 0", " ")


class _Viewer:
    """Builds the pages; one instance per server (thread-safe: no state per request)."""

    def __init__(self, db_path: Path, config: Any, env: dict[str, str]) -> None:
        self.db_path = db_path
        self.config = config
        self.env = env

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=5.0)
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn

    # -- the timeline -------------------------------------------------------

    def timeline(self, query: dict[str, str]) -> tuple[int, str]:
        tz = memory_timezone(self.config)
        q = query.get("q", "").strip()
        ws_param = query.get("workspace")
        workspace = None if ws_param in (None, "", _ALL) else ws_param
        all_ws = ws_param in (_ALL, "")
        transport = query.get("transport") or None
        channel = query.get("channel", "").strip() or None
        since = query.get("since", "").strip() or None
        until = query.get("until", "").strip() or None
        try:
            page_no = max(1, int(query.get("page", "1") or 1))
        except ValueError:
            page_no = 1
        conn = self.connect()
        try:
            workspaces = list_workspaces_sync(conn)
            transports = list_transports_sync(conn)
            error = None
            page = None
            try:
                f = make_filter(tz, workspace=workspace, all_workspaces=all_ws,
                                transport=transport, channel=channel, since=since, until=until,
                                text=q or None, limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE, env=self.env)
                page = find_memories_sync(conn, f)
            except (QueryError, DateError) as exc:
                error = str(exc)
        finally:
            conn.close()
        chosen_ws = page.filter.workspace if page is not None else workspace
        form = self._form(q, chosen_ws, transport, channel, since, until, workspaces, transports)
        parts = [form]
        if error:
            parts.append(f"<p class=\"error\" id=\"error\">{_e(error)}</p>")
            return HTTPStatus.BAD_REQUEST, _page("Memory", "".join(parts), tz)
        assert page is not None
        n = page.total
        parts.append(f"<p class=\"meta\" id=\"count\">{n} memor{'y' if n == 1 else 'ies'}"
                     f"{' match' if n != 1 else ' matches'}"
                     f"{' “' + _e(q) + '”' if q else ''}"
                     f"{' in workspace ' + _e(chosen_ws) if chosen_ws else ' in all workspaces'}; newest first.</p>")
        parts.append("<div id=\"timeline\">")
        day = None
        for m in page.memories:
            this_day = local(m.event_at, tz).date()
            if this_day != day:
                if day is not None:
                    parts.append("</section>")
                day = this_day
                parts.append(f"<section class=\"day\" data-date=\"{this_day.isoformat()}\">"
                             f"<h2 class=\"day\">{_e(_day_heading(m.event_at, tz))}</h2>")
            parts.append(
                f"<article class=\"memory\" id=\"{_e(m.ref)}\"><a class=\"ref\" href=\"/memory/{_e(m.ref)}\">"
                f"{_e(m.ref)}</a> <span class=\"meta\">{_e(format_local(m.event_at, tz).split(' ', 1)[1])} · "
                f"{_e(m.workspace)} · {_e(m.transport)} · channel {_e(m.channel)} · {m.sources} "
                f"source{'s' if m.sources != 1 else ''}</span><div class=\"preview\">{_e(m.preview(300))}</div>"
                "</article>")
        if day is not None:
            parts.append("</section>")
        if not page.memories:
            parts.append("<p id=\"empty\">No memories here. Exchanges become memories when refinement runs "
                         "(<code>wisp memory refine</code>, or every 15 minutes while wisp runs).</p>")
        parts.append("</div>")
        nav = []
        keep = {k: v for k, v in query.items() if k != "page" and v}
        if page_no > 1:
            nav.append(f"<a href=\"/memory?{_e(urlencode({**keep, 'page': page_no - 1}))}\">← Newer</a>")
        else:
            nav.append("<span></span>")
        if page.filter.offset + len(page.memories) < n:
            nav.append(f"<a href=\"/memory?{_e(urlencode({**keep, 'page': page_no + 1}))}\" id=\"older\">Older →</a>")
        parts.append(f"<nav class=\"pages\">{''.join(nav)}</nav>")
        return HTTPStatus.OK, _page("Memory", "".join(parts), tz)

    def _form(self, q: str, workspace: str | None, transport: str | None, channel: str | None,
              since: str | None, until: str | None, workspaces: list[str], transports: list[str]) -> str:
        def options(values: list[str], chosen: str | None, all_label: str, all_value: str) -> str:
            opts = [f"<option value=\"{all_value}\"{' selected' if not chosen else ''}>{all_label}</option>"]
            shown = list(values)
            if chosen and chosen not in shown:
                shown.append(chosen)
            for v in shown:
                opts.append(f"<option value=\"{_e(v)}\"{' selected' if v == chosen else ''}>{_e(v)}</option>")
            return "".join(opts)

        return (
            "<form class=\"filters\" id=\"search\" method=\"get\" action=\"/memory\">"
            f"<label>Search<input type=\"search\" name=\"q\" id=\"q\" value=\"{_e(q)}\" "
            "placeholder=\"words in summaries\"></label>"
            f"<label>Workspace<select name=\"workspace\" id=\"workspace\">"
            f"{options(workspaces, workspace, 'All workspaces', _ALL)}</select></label>"
            f"<label>Transport<select name=\"transport\" id=\"transport\">"
            f"{options(transports, transport, 'Any', '')}</select></label>"
            f"<label>Channel<input name=\"channel\" id=\"channel\" value=\"{_e(channel or '')}\" "
            "placeholder=\"exact id\"></label>"
            f"<label>Since<input name=\"since\" id=\"since\" value=\"{_e(since or '')}\" "
            "placeholder=\"7d, week, 2025-03-01\"></label>"
            f"<label>Until<input name=\"until\" id=\"until\" value=\"{_e(until or '')}\" "
            "placeholder=\"today, 2025-03-08\"></label>"
            "<button type=\"submit\">Search</button></form>")

    # -- an entry --------------------------------------------------------------

    def entry(self, ref: str) -> tuple[int, str]:
        tz = memory_timezone(self.config)
        try:
            number = parse_memory_id(ref)
        except MemoryIdError as exc:
            return HTTPStatus.NOT_FOUND, _page("Not found", f"<p class=\"error\">{_e(exc)}</p>", tz)
        conn = self.connect()
        try:
            m = get_memory_sync(conn, number)
            sources = memory_sources_sync(conn, number) if m is not None else []
        finally:
            conn.close()
        if m is None:
            return HTTPStatus.NOT_FOUND, _page(
                "Not found", f"<p class=\"error\" id=\"error\">No memory {_e(format_memory_id(number))}: never "
                "made, or forgotten. <a href=\"/memory\">Back to the timeline</a></p>", tz)
        end = f" → {_e(format_local(m.event_end, tz, seconds=True))}" if m.event_end else ""
        body = [
            "<p><a href=\"/memory\">← Timeline</a></p>",
            f"<h1 id=\"ref\">{_e(m.ref)}</h1>",
            "<dl id=\"times\">",
            f"<dt>Event</dt><dd id=\"event\">{_e(format_local(m.event_at, tz, seconds=True, weekday=True))}{end}"
            " <span class=\"meta\">(the earliest source request)</span></dd>",
            f"<dt>Recorded</dt><dd id=\"recorded\">{_e(format_local(m.recorded_at, tz, seconds=True, weekday=True))}"
            "</dd>",
            f"<dt>Workspace</dt><dd>{_e(m.workspace)}</dd><dt>Transport</dt><dd>{_e(m.transport)}</dd>",
            f"<dt>Channel</dt><dd>{_e(m.channel)}</dd><dt>Thread</dt><dd>{_e(m.thread or '—')}</dd>",
            f"<dt>Conversation</dt><dd>{_e(m.conversation_id if m.conversation_id is not None else '—')}</dd>",
            f"<dt>Written by</dt><dd>{_e(m.model or '—')}</dd>",
            "</dl>",
            f"<h2>Summary</h2><div class=\"summary\" id=\"summary\">{_e(m.summary)}</div>",
            f"<h2>Sources ({len(sources)})</h2><div id=\"sources\">",
        ]
        for x in sources:
            cut_req = f" (cut at 64 KiB of {x.request_bytes} bytes)" if x.request_truncated else ""
            cut_rep = f" (cut at 64 KiB of {x.reply_bytes} bytes)" if x.reply_truncated else ""
            body.append(
                f"<section class=\"exchange\" id=\"exchange-{x.id}\"><h3>Exchange {x.id}</h3>"
                f"<p class=\"meta\">{_e(format_local(x.requested_at, tz, seconds=True, weekday=True))} → "
                f"{_e(format_local(x.finished_at, tz, seconds=True))} · {_e(x.outcome or 'pending')}"
                f"{' (' + _e(x.error) + ')' if x.error else ''} · sender {_e(x.sender or '—')} · "
                f"{_e(x.workspace)} · {_e(x.transport)} · channel {_e(x.channel)} · model {_e(x.model or '—')}"
                f"{' (' + _e(x.endpoint) + ')' if x.endpoint else ''}</p>"
                f"<h4>Request{_e(cut_req)}</h4><pre class=\"request\">{_e(x.request)}</pre>"
                f"<h4>Reply{_e(cut_rep)}</h4><pre class=\"reply\">{_e(x.reply or '(no reply)')}</pre></section>")
        body.append("</div>")
        return HTTPStatus.OK, _page(m.ref, "".join(body), tz)


def _make_handler(viewer: _Viewer, allowed_hosts: set[str] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "wisp-memory"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the CLI prints the URL only
            pass

        def _send(self, status: int, body: str, *, head: bool = False, extra: dict[str, str] | None = None) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy",
                             "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                             "base-uri 'none'; frame-ancestors 'none'")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def _route(self, head: bool) -> None:
            if allowed_hosts is not None:
                host = (self.headers.get("Host") or "").strip().lower()
                if host not in allowed_hosts:
                    self._send(HTTPStatus.MISDIRECTED_REQUEST, "wrong host", head=head)
                    return
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            path = parts.path.rstrip("/") or "/"
            try:
                if path == "/":
                    self._send(HTTPStatus.FOUND, "", head=head, extra={"Location": "/memory"})
                elif path == "/memory":
                    status, body = viewer.timeline(query)
                    self._send(status, body, head=head)
                elif path.startswith("/memory/"):
                    status, body = viewer.entry(path[len("/memory/"):])
                    self._send(status, body, head=head)
                else:
                    self._send(HTTPStatus.NOT_FOUND, "<p>Not found. <a href=\"/memory\">Memory</a></p>", head=head)
            except (DateError, sqlite3.Error) as exc:
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, f"<p>wisp could not read memory: {_e(exc)}</p>",
                           head=head)
            except Exception as exc:  # a bug: still an answer, never a dropped connection and a traceback
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR,
                           f"<p>wisp could not answer: {_e(type(exc).__name__)}: {_e(exc)}</p>", head=head)

        def do_GET(self) -> None:  # noqa: N802
            self._route(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._route(head=True)

        def _refuse(self) -> None:
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, "<p>The memory viewer is read-only.</p>",
                       extra={"Allow": "GET, HEAD"})

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    return Handler


class _Server(ThreadingHTTPServer):
    """One thread a connection, but bounded: at most :attr:`MAX_CONNECTIONS`
    at once (another is closed at once rather than given a thread), and a
    connection that sends nothing for :attr:`IDLE_TIMEOUT_S` seconds is
    closed, so idle sockets (800 of them held 801 threads) cannot pile up
    threads. A client that leaves mid-answer is no error worth a traceback."""

    daemon_threads = True
    #: Connections served at once; more are closed unanswered.
    MAX_CONNECTIONS = 32
    #: Seconds a connection may stay silent (before or within its request) before it is closed.
    IDLE_TIMEOUT_S = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: closed at once, no thread
            return
        try:
            request.settimeout(self.IDLE_TIMEOUT_S)
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up or went silent is nothing to report; anything
        else is one line on stderr, never a traceback."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, TimeoutError)):
            return
        print(f"wisp memory serve: a request from {client_address[0]} failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)


class MemoryViewer:
    """The viewer's HTTP server. ``MemoryViewer(config, host, port)`` checks
    the address (:func:`check_host`) and binds; :attr:`url` is its base URL;
    :meth:`serve_forever` serves until :meth:`stop`; :meth:`start` does it
    in a thread. Raises :class:`ViewerError`."""

    def __init__(self, config: Any, host: str = "127.0.0.1", port: int = 8765,
                 env: dict[str, str] | None = None) -> None:
        import os

        h = check_host(host, bool(config.get("memory.serve_allow_non_loopback")))
        memory_timezone(config)  # a bad memory.timezone stops here, not on the first page
        self.config = config
        viewer = _Viewer(Path(config.db_path), config, dict(os.environ if env is None else env))
        family = socket.AF_INET6 if ":" in h else socket.AF_INET
        server_cls = type("_Srv", (_Server,), {"address_family": family})
        try:
            self.httpd = server_cls((h, port), _make_handler(viewer, None))
        except OSError as exc:
            raise ViewerError(f"cannot listen on {h}:{port}: {exc.strerror or exc}; "
                              "try another --port (0 picks a free one)") from None
        self.host = h
        self.port = int(self.httpd.server_address[1])
        shown = f"[{h}]" if ":" in h else h
        self.url = f"http://{shown}:{self.port}"
        loopback = h == "localhost" or _is_loopback(h)
        if loopback:
            allowed = {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]", shown)}
            self.httpd.RequestHandlerClass = _make_handler(viewer, allowed)
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` (or Ctrl+C in the caller)."""
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> "MemoryViewer":
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="wisp-memory-viewer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def serve(config: Any, open_store: Callable[[Path], Awaitable[Any]], host: str = "127.0.0.1",
          port: int = 8765) -> int:
    """``wisp memory serve``: migrate the database (``open_store(path)``
    opens it with every table: :func:`wisp.core.database.open_store`), then
    serve until Ctrl+C. Prints the viewer's address as its first line.
    Returns the exit code (2 for a refused address or a port in use)."""

    async def migrate() -> None:
        async with await open_store(config.db_path):
            pass

    try:
        asyncio.run(migrate())
        viewer = MemoryViewer(config, host, port)
    except ViewerError as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return 2
    print(f"{viewer.url}/memory", flush=True)
    print("wisp: serving the memory viewer (read-only); Ctrl+C stops it", file=sys.stderr, flush=True)
    try:
        viewer.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        viewer.httpd.server_close()
    return 0
