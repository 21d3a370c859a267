"""Config ``mcpServers``: the MCP servers wisp may start, parsed and validated.

The shape is the one Claude Desktop, Cursor and oterm use, so that people
can paste what they have (issue 15, "MCP both ways", "Configuration")::

    "mcpServers": {
      "git":    {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_AUTHOR_NAME": "me"}},
      "remote": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    }

- ``command`` (with optional ``args``, ``env`` and ``cwd``) is a local server
  over stdio. It inherits no secrets: wisp's environment is not passed on,
  except a few harmless variables (:data:`SAFE_ENV`: ``PATH``, ``HOME``,
  ``LANG`` …) and what ``env`` names.
- ``url`` (with optional ``headers``) is a remote server over streamable HTTP.
- ``type`` may say which (``stdio``; ``http``, ``streamable-http`` or
  ``streamableHttp``); ``sse``, the transport the protocol retired, is refused.
- ``disabled: true`` keeps an entry without using it.
- ``trust: true`` takes the server's word for its tools: one it marks
  ``readOnlyHint: true`` then runs without asking. Without it a tool's
  annotations are the server's claim, not a fact (a hostile server marks a
  tool that deletes files read only), so every tool asks first unless config
  ``tools.mcp.allow`` names it or its server.
- A value in ``env`` or ``headers`` may name a variable of wisp's own
  environment as ``${NAME}`` (or Cursor's ``${env:NAME}``), so a token need
  not be written in config.json; it is filled in when the server starts.

This module is a leaf (config validation reads it, below every feature);
:mod:`wisp.core.mcp` starts and calls the servers. Errors are
:class:`McpConfigError`, whose message is one line naming the key, such as
``mcpServers.git.args expects a list of strings, such as ["mcp-server-git"]; got "x"``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from .tool_names import server_name_problem

__all__ = ["McpConfigError", "StdioServer", "HttpServer", "ServerSpec", "parse_mcp_servers", "expand_env",
           "SAFE_ENV", "fingerprint"]

#: Variables of wisp's environment a stdio server is given without asking:
#: what a program needs to find its tools, its home and its language, and
#: nothing that holds a secret.
SAFE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
            "TERM")

_KEYS = ("command", "args", "env", "cwd", "url", "headers", "type", "disabled", "trust")
_STDIO_TYPES = ("stdio",)
_HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
#: The most servers and the longest texts one config may hold: far past
#: any real use, and a hostile file cannot make wisp start thousands.
MAX_SERVERS = 64
MAX_ARGS = 256
MAX_TEXT = 8192


class McpConfigError(ValueError):
    """An ``mcpServers`` entry wisp cannot use; the message is one line that
    names the key and says what it expects."""


@dataclass(frozen=True)
class StdioServer:
    """A local server started as ``command args…`` and spoken to over its
    stdin and stdout. ``env`` are the variables config gives it (values may
    hold ``${NAME}``, filled in by :func:`expand_env` when it starts);
    ``cwd`` its directory (``None``: the conversation's)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    #: ``trust: true``: the server's ``readOnlyHint`` is believed (its read-only tools run without asking).
    trust: bool = False

    @property
    def transport(self) -> str:
        return "stdio"

    @property
    def where(self) -> str:
        """The command line, as lists show it (env values left out: they may be secrets)."""
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """A remote server at ``url`` over streamable HTTP, sent ``headers``
    (values may hold ``${NAME}``)."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    #: ``trust: true``: the server's ``readOnlyHint`` is believed (its read-only tools run without asking).
    trust: bool = False

    @property
    def transport(self) -> str:
        return "http"

    @property
    def where(self) -> str:
        return self.url


ServerSpec = StdioServer | HttpServer


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(value: Any, key: str, example: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise McpConfigError(f"{key} expects {'a' if empty else 'a non-empty'} string, such as {example}; "
                             f"got {_short(value)}")
    if len(value) > MAX_TEXT:
        raise McpConfigError(f"{key} is longer than {MAX_TEXT} characters")
    if "\x00" in value:
        raise McpConfigError(f"{key} holds a NUL character, which no program can be given")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise McpConfigError(f"{key} holds an unpaired surrogate, which is not text") from None
    return value


def _mapping(value: Any, key: str, example: str, name_rule: re.Pattern[str], what: str,
             *, header: bool = False) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise McpConfigError(f"{key} expects an object of {what}s and their values, such as {example}; "
                             f"got {_short(value)}")
    out = []
    for name, item in value.items():
        if not isinstance(name, str) or not name_rule.match(name):
            raise McpConfigError(f"{key} has {_short(name)}, which is not a {what} name; use letters, digits "
                                 f"and {'-' if header else '_'}")
        text = _text(item, f"{key}.{name}", '"value"', empty=True)
        if header and ("\r" in text or "\n" in text):
            raise McpConfigError(f"{key}.{name} holds a line break, which no HTTP header may hold")
        out.append((name, text))
    return tuple(out)


def _parse_one(name: Any, entry: Any) -> ServerSpec | None:
    problem = server_name_problem(name)
    if problem:
        raise McpConfigError(f"mcpServers: {problem}")
    key = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        raise McpConfigError(f'{key} expects an object such as {{"command": "uvx", "args": ["mcp-server-git"]}} '
                             f'or {{"url": "https://example.org/mcp"}}; got {_short(entry)}')
    for k in entry:
        if k not in _KEYS:
            near = difflib.get_close_matches(str(k), _KEYS, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise McpConfigError(f"{key} has no key {_short(k)}; {hint}a server takes command, args, env and cwd "
                                 "(local), or url and headers (remote)")
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise McpConfigError(f"{key}.disabled expects true or false; got {_short(disabled)}")
    trust = entry.get("trust", False)
    if not isinstance(trust, bool):
        raise McpConfigError(f"{key}.trust expects true or false; got {_short(trust)}")
    kind = entry.get("type")
    if kind is not None:
        kind = _text(kind, f"{key}.type", '"stdio"')
        if kind == "sse":
            raise McpConfigError(f"{key}.type is sse, the transport MCP retired; wisp speaks stdio and streamable "
                                 "HTTP: point url at the server's streamable HTTP endpoint (often /mcp)")
        if kind not in _STDIO_TYPES + _HTTP_TYPES:
            raise McpConfigError(f"{key}.type expects stdio or http; got {_short(kind)}")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command and has_url:
        raise McpConfigError(f"{key} has both command and url; give command for a local server or url for a "
                             "remote one")
    if not has_command and not has_url:
        raise McpConfigError(f'{key} needs command (a local server, such as "uvx") or url (a remote one, such as '
                             '"https://example.org/mcp")')
    if has_command:
        if kind in _HTTP_TYPES:
            raise McpConfigError(f"{key}.type is {kind}, but the entry has a command; an http server needs url")
        for k in ("headers",):
            if k in entry:
                raise McpConfigError(f"{key}.{k} is for a remote server (url); a local one takes env")
        command = _text(entry["command"], f"{key}.command", '"uvx"').strip()
        if not command:
            raise McpConfigError(f'{key}.command expects a non-empty string, such as "uvx"; got {_short(entry["command"])}')
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise McpConfigError(f'{key}.args expects a list of strings, such as ["mcp-server-git"]; got {_short(args)}')
        if len(args) > MAX_ARGS:
            raise McpConfigError(f"{key}.args has more than {MAX_ARGS} arguments")
        parsed_args = tuple(_text(a, f"{key}.args[{i}]", '"mcp-server-git"', empty=True) for i, a in enumerate(args))
        env = _mapping(entry.get("env", {}), f"{key}.env", '{"GIT_AUTHOR_NAME": "me"}', _ENV_NAME, "variable")
        cwd = entry.get("cwd")
        if cwd is not None:
            cwd = _text(cwd, f"{key}.cwd", '"~/src/project"')
        spec: ServerSpec = StdioServer(name, command, parsed_args, env, cwd, trust=trust)
    else:
        if kind in _STDIO_TYPES:
            raise McpConfigError(f"{key}.type is stdio, but the entry has a url; a stdio server needs command")
        for k in ("args", "env", "cwd"):
            if k in entry:
                raise McpConfigError(f"{key}.{k} is for a local server (command); a remote one takes headers")
        url = _text(entry["url"], f"{key}.url", '"https://example.org/mcp"').strip()
        if not re.match(r"^https?://[^\s/]+", url) or any(c.isspace() for c in url):
            raise McpConfigError(f'{key}.url expects an http:// or https:// URL, such as "https://example.org/mcp"; '
                                 f"got {_short(url)}")
        headers = _mapping(entry.get("headers", {}), f"{key}.headers", '{"Authorization": "Bearer ${TOKEN}"}',
                           _HEADER_NAME, "header", header=True)
        spec = HttpServer(name, url, headers, trust=trust)
    return None if disabled else spec


def parse_mcp_servers(value: Any) -> dict[str, ServerSpec]:
    """The servers of config ``mcpServers`` (a JSON object of name → entry),
    by name, in the file's order, leaving out those ``disabled``.

    Raises :class:`McpConfigError` for anything wisp could not start: a name
    that is not 1-32 letters, digits, ``-`` and single ``_``
    (:func:`wisp.core.tool_names.server_name_problem`); an entry that is not
    an object, has an unknown key, both or neither of ``command`` and
    ``url``, a value of the wrong type, an ``env`` or header name that is not
    one, a value with a NUL or a header with a line break; an ``sse`` type;
    more than :data:`MAX_SERVERS` servers."""
    if not isinstance(value, dict):
        raise McpConfigError('mcpServers expects an object of servers, such as {"git": {"command": "uvx", '
                             f'"args": ["mcp-server-git"]}}}}; got {_short(value)}')
    if len(value) > MAX_SERVERS:
        raise McpConfigError(f"mcpServers has more than {MAX_SERVERS} servers")
    out: dict[str, ServerSpec] = {}
    for name, entry in value.items():
        spec = _parse_one(name, entry)
        if spec is not None:
            out[name] = spec
    return out


class MissingVariable(LookupError):
    """``${NAME}`` names a variable wisp's environment does not have."""


def expand_env(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${NAME}`` or ``${env:NAME}`` replaced by that
    variable of ``environ`` (default: wisp's environment). Raises
    :class:`MissingVariable` naming the first variable that is not set."""
    source = os.environ if environ is None else environ

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in source:
            raise MissingVariable(m.group(1))
        return source[m.group(1)]

    return _VAR.sub(fill, text)


def fingerprint(spec: ServerSpec) -> str:
    """A digest of how ``spec`` starts (command, args, env and cwd, or url
    and headers, before ``${…}`` is filled in): a cached tool list is used
    only for the server it was listed from. 16 hex digits of SHA-256."""
    if isinstance(spec, StdioServer):
        body: Any = ["stdio", spec.command, list(spec.args), sorted(spec.env), spec.cwd]
    else:
        body = ["http", spec.url, sorted(spec.headers)]
    return hashlib.sha256(json.dumps(body, ensure_ascii=False).encode()).hexdigest()[:16]
