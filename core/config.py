"""The config file, ``~/.wisp/config.json``: load, validate, dotted get/set.

Rules (issue "wisp runs end to end", "Config"; DESIGN.md, "Where things live"):

- The file is ``<wisp_home()>/config.json``; ``WISP_HOME`` moves the home.
- Every key is dotted (``model.name``) and known: :data:`SCHEMA` gives its
  type and default. A missing file means every key has its default.
- The file holds JSON objects nested by the dots (``{"model": {"name": "x"}}``);
  a flat dotted key at any level (``{"model.name": "x"}``) is read too. Writes
  always use the nested form and only hold the keys that were set.
- ``set`` takes a value from the command line as text and parses it by the
  key's type: ``on``/``off``/``true``/``false``/``yes``/``no`` (and ``1``/``0``)
  for booleans; integers; numbers; lists as JSON ``["a","b"]`` or
  comma-separated ``a,b``; ``null``, ``none`` or an empty value clears an
  optional key.
- An unknown key gets an error naming the closest keys. A wrong type gets one
  naming the type expected, with an example. A malformed file gets its path,
  line and column, and is never overwritten.
- Writes are atomic (temp file in the same directory, fsync, ``os.replace``)
  with mode 0600.
- No key holds an API key: ``model.api_key_env`` holds only the *name* of the
  environment variable that does (issue "wisp runs end to end", "Model
  endpoints").
- ``profiles`` holds named endpoint settings (issue 16, "Profiles")::

      {"profiles": {"work": {"provider": "openai", "endpoint": "http://10.0.0.5:8000",
                             "model": "qwen3-32b", "api_key_env": "WORK_KEY",
                             "context_window": 32768}}}

  Each field is checked as its ``model.*`` key is (:data:`PROFILE_FIELDS`).
  :meth:`Config.use_profile` lays one over ``model.*`` for this process
  only (``wisp --profile work``, ``/profile work``); the file is not
  changed.

All errors are :class:`ConfigError`, whose message is one line.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .paths import atomic_write_private, config_path, default_data_dir
from .redact import looks_like_key, redact
from .tool_names import MCP_PREFIX, TOOL_NAMES, tool_name_problem

__all__ = [
    "ConfigError",
    "KeySpec",
    "SCHEMA",
    "PROFILE_FIELDS",
    "Profile",
    "THEME_WORDS",
    "WISP_THEME_NAMES",
    "TEXTUAL_THEMES",
    "theme_names",
    "Config",
    "suggest_keys",
    "parse_value",
    "format_value",
]


class ConfigError(Exception):
    """A config problem, with a one-line message meant for the person.

    Attributes (each ``None`` when it does not apply):

    - ``key``: the dotted key concerned;
    - ``path``: the config file concerned;
    - ``line``, ``column``: 1-based position of a JSON syntax error;
    - ``suggestions``: the closest known keys, for an unknown key.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        path: Path | None = None,
        line: int | None = None,
        column: int | None = None,
        suggestions: Iterable[str] = (),
    ) -> None:
        super().__init__(message.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
        self.key = key
        self.path = path
        self.line = line
        self.column = column
        self.suggestions = list(suggestions)


# --- schema ---------------------------------------------------------------

_BOOL_WORDS = {
    "on": True, "true": True, "yes": True, "1": True,
    "off": False, "false": False, "no": False, "0": False,
}
_NULL_WORDS = {"null", "none", ""}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class KeySpec:
    """One known config key.

    - ``key``: dotted name;
    - ``type``: ``"str"``, ``"int"``, ``"float"``, ``"bool"``, ``"list"`` (a list
      of strings), ``"choice"`` (one of ``choices``) or ``"object"`` (a JSON
      object, validated by ``parse``);
    - ``default``: the value when the key is not set;
    - ``optional``: ``None`` (JSON ``null``) is allowed and clears the key;
    - ``minimum``/``exclusive_min``: lower bound for numbers; ``maximum``: upper bound;
    - ``unit``: what a number counts (``"tokens"``, ``"seconds"``, ``"bytes"``);
    - ``example``: a valid value as it would be typed, used in errors;
    - ``aliases``: extra words accepted for a choice (``"true"`` → ``"on"``);
    - ``check``: extra validation, returning an error text or ``None``;
    - ``parse``: for an ``"object"``, validates it, raising ``ValueError``
      with a one-line message that names the key;
    - ``help``: one line saying what the key does;
    - ``applies``: when a change applies, said after setting it, for a key
      read only when something starts (a conversation's tools are settled
      when it is opened).
    """

    key: str
    type: str
    default: Any
    optional: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    exclusive_min: bool = False
    maximum: float | None = None
    unit: str = ""
    example: str = ""
    aliases: tuple[tuple[str, str], ...] = ()
    check: Callable[[Any], str | None] | None = None
    parse: Callable[[Any], Any] | None = None
    help: str = ""
    #: Validation of a value typed on a command line only (``set``), not of
    #: one read from the file, which may name what this wisp does not know.
    typed_check: Callable[[Any], str | None] | None = None
    #: When a change applies, for a key that does not apply from the next request: the
    #: sentence ``/config set`` and ``wisp config set`` say after setting it (``""``: the next request).
    applies: str = ""

    def describe_type(self) -> str:
        """The type in words, as errors name it (``"an integer (tokens)"``)."""
        unit = f" ({self.unit})" if self.unit else ""
        if self.type == "int":
            text = f"an integer{unit}"
            if self.minimum is not None:
                text += f" {'above' if self.exclusive_min else 'of at least'} {int(self.minimum)}"
            if self.maximum is not None:
                text += f" {'and' if self.minimum is not None else 'of'} at most {int(self.maximum)}"
        elif self.type == "float":
            text = f"a number{unit}"
            if self.minimum is not None:
                text += f" {'above' if self.exclusive_min else 'of at least'} {self.minimum:g}"
        elif self.type == "bool":
            text = "a boolean (on, off, true, false, yes or no)"
        elif self.type == "list":
            text = 'a list of strings (JSON ["a","b"] or comma-separated a,b)'
        elif self.type == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.type == "object":
            text = "a JSON object"
        else:
            text = "a non-empty string"
        if self.optional:
            text += ", or null to clear it"
        return text


def _check_endpoint(value: str) -> str | None:
    if not re.match(r"^https?://[^\s/]+", value):
        return "a base URL starting with http:// or https://"
    from urllib.parse import urlsplit

    try:
        urlsplit(value).port  # raises for a port outside 0-65535
    except ValueError:
        return "a base URL with a port from 1 to 65535"
    return None


def _check_tool_name(value: str) -> str | None:
    """A tool wisp has, or an MCP server's (issue "Tools that act": a bad name
    would stop every run; issue 15: ``mcp__SERVER`` or ``mcp__SERVER__TOOL``).
    The rule is :func:`wisp.core.tool_names.tool_name_problem`."""
    if tool_name_problem(value) is not None:
        return (f"tool names wisp has ({', '.join(TOOL_NAMES)}) or an MCP server's (mcp__SERVER or "
                f"mcp__SERVER__TOOL); {value!r} is not one")
    return None


def _check_mcp_tool_name(value: str) -> str | None:
    """An MCP tool, or all of a server's (``tools.mcp.allow``)."""
    if not value.startswith(MCP_PREFIX) or tool_name_problem(value) is not None:
        return f"MCP tool names, mcp__SERVER__TOOL or mcp__SERVER for all of a server's tools; {value!r} is not one"
    return None


def _parse_mcp_servers(value: Any) -> Any:
    """Validate ``mcpServers`` (:func:`wisp.core.mcp_config.parse_mcp_servers`);
    the value is kept as written, so a pasted entry stays as it was. Imported here: only a config
    that names MCP servers needs it (issue 12, "wisp ask one turn")."""
    from .mcp_config import McpConfigError, parse_mcp_servers

    try:
        parse_mcp_servers(value)
    except McpConfigError as exc:
        raise ValueError(str(exc)) from None
    return json.loads(json.dumps(value))


def _check_env_name(value: str) -> str | None:
    if looks_like_key(value):  # the key itself, typed where its variable's name goes: never repeated
        return ("the NAME of the environment variable that holds the key (never the key itself): "
                "export MY_KEY=... in the shell that starts wisp, then set this to MY_KEY")
    if not _ENV_NAME.match(value):
        return ("the name of an environment variable (never the key itself), "
                "made of letters, digits and _")
    return None


def _check_env_pass(value: str) -> str | None:
    """A name of an environment variable (``tools.run_command.env_pass``)."""
    if not _ENV_NAME.match(value):
        return "names of environment variables, made of letters, digits and _"
    return None


_ENV_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")


def _check_env_pattern(value: str) -> str | None:
    """A glob pattern of environment variable names (``tools.run_command.env_drop``)."""
    if not _ENV_PATTERN.match(value):
        return ("glob patterns of environment variable names, made of letters, digits, _ and the "
                "wildcards * ? [ ]")
    return None


#: ``tools.run_command.env_drop``'s default: glob patterns (matched without
#: regard to case) of environment variable names that look like secrets; a
#: command runs without them (issue "Nothing runs, leaks, hangs or is lost
#: that shouldn't be", "Secrets reach commands").
DEFAULT_ENV_DROP = [
    "*_KEY", "*_KEY_*", "*API_KEY*", "*APIKEY*", "*ACCESS_KEY*", "*PRIVATE_KEY*",
    "*_TOKEN", "*_TOKEN_*", "TOKEN", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_PASS", "*CREDENTIAL*",
    "*_AUTH", "*AUTH_TOKEN*", "*_DSN", "DATABASE_URL", "AWS_*", "AZURE_*", "GCP_*", "CLOUDSDK_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
]


def _check_timezone(value: str) -> str | None:
    """An IANA time zone this machine knows (issue "Episodic memory", "Settings"). zoneinfo is
    imported only for a config that sets one."""
    from .timezones import check_timezone

    return check_timezone(value)


#: ``ui.theme``'s words: ``dark`` and ``light`` are wisp's two themes, ``auto``
#: picks one from the terminal's background (issue 16, "Themes").
THEME_WORDS = ("dark", "light", "auto")
#: wisp's own themes, dark and light (defined in :mod:`wisp.themes`).
WISP_THEME_NAMES = ("wisp", "wisp-light")
#: The themes Textual ships (``textual.theme.BUILTIN_THEMES``), named here so
#: that core can check a name without importing Textual; a test keeps the
#: two lists the same.
TEXTUAL_THEMES = (
    "textual-dark", "textual-light", "nord", "gruvbox", "catppuccin-mocha", "dracula", "tokyo-night",
    "monokai", "flexoki", "catppuccin-latte", "catppuccin-frappe", "catppuccin-macchiato", "solarized-light",
    "solarized-dark", "rose-pine", "rose-pine-moon", "rose-pine-dawn", "atom-one-dark", "atom-one-light",
    "ansi-dark", "ansi-light",
)


def theme_names() -> list[str]:
    """Every name ``ui.theme`` takes: the words, wisp's themes, Textual's."""
    return [*THEME_WORDS, *WISP_THEME_NAMES, *TEXTUAL_THEMES]


def _check_theme(value: str) -> str | None:
    if value not in theme_names():
        return "one of " + ", ".join(theme_names())
    return None


def _spec(*args: Any, **kwargs: Any) -> KeySpec:
    return KeySpec(*args, **kwargs)


#: The smallest window wisp takes (tokens): less cannot hold its own rules and a tool's schema.
MIN_CONTEXT_WINDOW = 512
#: The largest (tokens): beyond any local model's window, so a typo (99999999) is refused, not planned for.
MAX_CONTEXT_WINDOW = 4_194_304


#: When a change to a conversation's tools applies: they are settled when a conversation is
#: opened (wisp-memory-tool.txt: "it applies from the next conversation"), the same for the TUI
#: and ``wisp ask`` (:func:`wisp.core.session.settle`), and ``--continue`` or ``--resume`` opens an
#: existing one again. An explicit list is exactly that list: a conversation started with
#: ``--tool`` keeps it, and an AGENTS.md ``tools:`` line wins over both keys.
TOOLS_APPLY = ("It applies from the next conversation (/new), and to an existing one when it is opened again "
               "(wisp --continue, wisp ask --continue, --resume ID); a conversation open now keeps the tools "
               "it was opened with, and one whose tools were named (--tool, an AGENTS.md tools: line) keeps "
               "that list.")

#: Keys read afresh from the file each time they are read, so that a change made anywhere
#: applies on the next use without a restart (enso-episodic-memory.txt, "Setup and controls":
#: "Changes apply on the next turn or job invocation without a restart"): the memory
#: settings, which a running TUI, ``wisp memory serve`` and capture each read when they need them.
LIVE_KEYS = frozenset({"memory.timezone", "memory.enabled", "memory.workspace"})
_NOT_READ = object()

#: Every known key, in the order ``config list`` shows them.
SCHEMA: dict[str, KeySpec] = {
    s.key: s
    for s in [
        _spec("model.provider", "choice", "auto", choices=("ollama", "openai", "auto"),
              example="ollama",
              help="ollama, openai (OpenAI-compatible) or auto (Ollama, then :8080, then the embedded model)"),
        _spec("model.endpoint", "str", None, optional=True, example="http://127.0.0.1:11434",
              check=_check_endpoint, help="the endpoint's base URL"),
        _spec("model.name", "str", None, optional=True, example="qwen3:8b", help="the model"),
        _spec("model.context_window", "int", None, optional=True, minimum=MIN_CONTEXT_WINDOW,
              maximum=MAX_CONTEXT_WINDOW, unit="tokens", example="8192",
              help="the model's context window: sent to Ollama as num_ctx; the embedded server starts with it "
                   "(up to the model's trained length); unset asks the endpoint"),
        _spec("model.api_key_env", "str", None, optional=True, example="OPENAI_API_KEY",
              check=_check_env_name,
              help="the environment variable that holds the API key (never the key itself)"),
        _spec("model.think", "choice", "auto", choices=("on", "off", "auto"), example="off",
              aliases=(("true", "on"), ("yes", "on"), ("false", "off"), ("no", "off")),
              help="ask a reasoning model to think (Ollama's think)"),
        _spec("model.gguf", "str", None, optional=True, example="~/models/model.gguf",
              help="the GGUF file for the embedded llama.cpp server"),
        _spec("model.tool_mode", "choice", "auto", choices=("native", "prompted", "auto"), example="prompted",
              help="how tools reach the model: native (the request's tools), prompted (described in the "
                   "system prompt, calls parsed from the reply) or auto (prompted where the server drops tools)"),
        _spec("model.embedded_idle_s", "float", 300.0, minimum=1, unit="seconds", example="300",
              help="how long the shared embedded server lives unused before it stops"),
        _spec("model.embedded_threads", "int", 0, minimum=0, example="1",
              help="llama.cpp threads of the embedded server, for the prompt and for generating (0: every "
                   "usable core, fastest on a quiet machine; 1 can be faster where other work shares the cores); "
                   "a server started after a change uses it"),
        _spec("model.timeout_s", "float", 120.0, minimum=0, exclusive_min=True, unit="seconds",
              example="120", help="how long to wait for the endpoint"),
        _spec("model.load_wait_s", "float", 60.0, minimum=0, unit="seconds", example="60",
              help="how long to wait out a 503 while the server loads the model"),
        _spec("model.reply_timeout_s", "float", 900.0, minimum=0, exclusive_min=True, unit="seconds",
              example="900",
              help="the longest a whole reply may take, even while the server keeps the connection alive"),
        _spec("model.max_tokens", "int", None, optional=True, minimum=1, unit="tokens", example="1024",
              help="the most tokens one reply may have; unset caps it at the room the request kept for it "
                   "(context.reserve)"),
        _spec("model.repeat_stop_chars", "int", 600, minimum=0, unit="characters", example="600",
              help="stop a reply whose end repeats one span (3 times or more) over this many characters; "
                   "0 never stops one"),
        _spec("agent.max_steps", "int", 20, minimum=1, example="20",
              help="model requests in one turn, at most"),
        _spec("tools.enabled", "list", ["read_file", "system_info"], example='["read_file","system_info"]',
              check=_check_tool_name, help="the tools the model may call", applies=TOOLS_APPLY),
        _spec("tools.read_file.allow_outside_workdir", "bool", False, example="off",
              help="let read_file read outside the conversation's working directory"),
        _spec("tools.read_file.max_bytes", "int", 262144, minimum=1, unit="bytes", example="262144",
              help="the most read_file returns in one call"),
        _spec("tools.run_command.timeout_s", "float", 120.0, minimum=0, exclusive_min=True,
              unit="seconds", example="120", help="how long a command may run"),
        _spec("tools.run_command.max_output_bytes", "int", 1048576, minimum=1, unit="bytes",
              example="1048576", help="the most output kept from one command"),
        _spec("tools.run_command.allow", "list", [], example='["pytest","make"]',
              help="command prefixes (whole words) that run without asking; the only ones wisp ask runs"),
        _spec("tools.run_command.env_drop", "list", DEFAULT_ENV_DROP, example='["*_TOKEN","MY_SECRET"]',
              check=_check_env_pattern,
              help="environment variables commands run without (glob patterns, any case); "
                   "model.api_key_env's variable is always dropped"),
        _spec("tools.run_command.env_pass", "list", [], example='["CARGO_HOME","GOPATH"]',
              check=_check_env_pass,
              help="environment variables commands get besides PATH, HOME, LANG, LC_*, TERM and TZ "
                   "(env_drop's patterns and model.api_key_env's variable still keep theirs out)"),
        _spec("tools.run_command.network", "bool", False, example="off",
              help="let commands reach the network from their sandbox"),
        _spec("tools.run_command.allow_writes", "bool", False, example="off",
              help="let commands the allow list runs write the working directory (read-only otherwise)"),
        _spec("tools.edit_file.allow", "bool", False, example="off",
              help="make the model's file edits without asking (wisp ask --allow-edits does it for one turn); "
                   "off: the TUI asks with the diff and wisp ask does not edit"),
        _spec("tools.edit_file.max_bytes", "int", 1048576, minimum=1, unit="bytes", example="1048576",
              help="the largest file edit_file changes or creates, before and after the edit"),
        _spec("tools.mcp.allow", "list", [], example='["mcp__git__commit","mcp__notes"]',
              check=_check_mcp_tool_name,
              help="MCP tools that act which run without asking; the only ones wisp ask and wisp mcp serve run"),
        _spec("tools.mcp.timeout_s", "float", 60.0, minimum=0, exclusive_min=True, unit="seconds",
              example="60", help="how long an MCP tool call may take"),
        _spec("tools.mcp.start_timeout_s", "float", 30.0, minimum=0, exclusive_min=True, unit="seconds",
              example="30", help="how long an MCP server may take to start and list its tools"),
        _spec("tools.mcp.max_output_bytes", "int", 262144, minimum=1, unit="bytes", example="262144",
              help="the most text kept from one MCP tool result"),
        _spec("mcpServers", "object", {}, example='{"git": {"command": "uvx", "args": ["mcp-server-git"]}}',
              parse=_parse_mcp_servers,
              help="MCP servers whose tools conversations may use (Claude Desktop's shape)"),
        _spec("context.reserve", "int", 1024, minimum=0, unit="tokens", example="1024",
              help="tokens of the window kept for the reply"),
        _spec("context.recent_turns", "int", 0, minimum=0, example="0",
              help="ended turns whose tool outputs stay whole instead of references"),
        _spec("context.memory", "bool", False, example="on",
              help="give the model the memory tool", applies=TOOLS_APPLY),
        _spec("context.distill", "bool", False, example="on",
              help="after a turn, one side call proposes the facts it stated (decisions, preferences, names)"),
        _spec("context.distill_tokens", "int", 1024, minimum=128, unit="tokens", example="1024",
              help="the most of a turn the fact distiller reads"),
        _spec("context.assess", "bool", False, example="on",
              help="before a request, one side call infers the conversation's task (never over yours)"),
        _spec("audit.enabled", "bool", True, example="on", help="write the audit log"),
        _spec("audit.max_bytes", "int", 10485760, minimum=1, unit="bytes", example="10485760",
              help="size at which the audit log starts a new file"),
        _spec("audit.keep", "int", 5, minimum=1, example="5", help="audit files kept"),
        _spec("audit.dir", "str", None, optional=True, example="~/wisp-audit",
              help="where the audit log lives; unset uses the data dir"),
        _spec("store.path", "str", None, optional=True, example="~/wisp.db",
              help="the database file; unset uses the data dir"),
        _spec("memory.enabled", "bool", True, example="on",
              help="episodic memory across conversations"),
        _spec("memory.timezone", "str", None, optional=True, example="Europe/Paris",
              check=_check_timezone,
              help="IANA time zone for memory dates and calendar boundaries; unset uses the system's"),
        _spec("memory.workspace", "str", None, optional=True, example="website",
              help="the workspace exchanges are captured under; unset uses the project "
                   "(git top-level or directory name)"),
        _spec("memory.serve_allow_non_loopback", "bool", False, example="off",
              help="let the memory server listen beyond 127.0.0.1"),
        _spec("ui.theme", "str", "auto", example="light", typed_check=_check_theme,
              help="dark, light, auto (from the terminal's background) or a Textual theme's name"),
    ]
}

_GROUPS = {k.rsplit(".", i)[0] for k in SCHEMA for i in range(1, k.count(".") + 1)}


def suggest_keys(key: str, n: int = 3) -> list[str]:
    """The known keys closest to ``key``, best first, at most ``n``.

    Uses difflib on the whole dotted name, then keys with the same last part
    (``max_steps`` → ``agent.max_steps``), then the keys of a group
    (``model`` → ``model.provider``, …). difflib is imported on a typo only.
    """
    import difflib

    keys = list(SCHEMA)
    out: list[str] = []

    def add(k: str) -> None:
        if k not in out:
            out.append(k)

    scored = sorted(
        ((difflib.SequenceMatcher(None, key, k).ratio(), k) for k in keys), reverse=True
    )
    best = scored[0][0]
    for ratio, k in scored[:n]:
        if ratio >= 0.6 and ratio >= best - 0.1:
            add(k)
    last = key.rsplit(".", 1)[-1].lower()
    for k in keys:
        if k.endswith("." + key.lower()) or k.rsplit(".", 1)[-1] == last:
            add(k)
    if len(out) < n:
        lasts = {k.rsplit(".", 1)[-1]: k for k in keys}
        for m in difflib.get_close_matches(last, list(lasts), n=n, cutoff=0.75):
            add(lasts[m])
    if len(out) < n:
        for k in keys:
            if k.startswith(key.rstrip(".") + "."):
                add(k)
    return out[:n]


def _join_or(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def _unknown_key_error(key: str, path: Path | None = None) -> ConfigError:
    where = f"{path}: " if path else ""
    if key in _GROUPS:
        near = [k for k in SCHEMA if k.startswith(key + ".")]
        text = f"{where}'{key}' is a group of keys, not a key; use one of {_join_or(near)}"
        return ConfigError(text, key=key, path=path, suggestions=near)
    near = suggest_keys(key)
    if near:
        text = f"{where}unknown config key '{key}'; did you mean {_join_or(near)}?"
    else:
        text = f"{where}unknown config key '{key}'; `wisp config list` shows the keys"
    return ConfigError(text, key=key, path=path, suggestions=near)


def _spec_for(key: str) -> KeySpec:
    if not isinstance(key, str) or key not in SCHEMA:
        raise _unknown_key_error(str(key))
    return SCHEMA[key]


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_value(key: str, value: Any, *, from_text: bool | None = None) -> Any:
    """Validate ``value`` for ``key`` and return it in its stored form.

    ``from_text`` (default: whether ``value`` is a ``str``) says that the value
    was typed on a command line and is parsed by the key's type (see the
    module docstring). Otherwise it must already have the JSON type: the
    file's values go through here with ``from_text=False``.

    Returns ``None`` for a cleared optional key, a ``float`` for a number key
    (an ``int`` is widened), a new list for a list key. Raises
    :class:`ConfigError` for an unknown key or a value of the wrong type,
    naming the type expected and an example.
    """
    spec = _spec_for(key)
    text = isinstance(value, str) if from_text is None else from_text
    original = value

    def bad(why: str | None = None) -> ConfigError:
        expected = why or spec.describe_type()
        if not text and isinstance(original, str) and spec.type in ("bool", "int", "float"):
            # in config.json, "off" is a string: the file wants JSON's true/false or a bare number
            expected = {"bool": "true or false", "int": "a whole number",
                        "float": "a number"}[spec.type] + " (in config.json, without quotes)"
        got = ("what looks like a key (not shown)" if isinstance(original, str) and looks_like_key(original)
               and spec.check is _check_env_name else redact(_short(original)))
        return ConfigError(f"{key} expects {expected}, such as {spec.example}; got {got}", key=key)

    if text and isinstance(value, str):
        raw = value.strip()
        if spec.optional and raw.lower() in _NULL_WORDS:
            return None
        if spec.type == "bool":
            if raw.lower() not in _BOOL_WORDS:
                raise bad()
            value = _BOOL_WORDS[raw.lower()]
        elif spec.type == "int":
            try:
                value = int(raw, 10) if len(raw) <= 40 else None
            except ValueError:
                raise bad() from None
            if value is None:
                raise bad()
        elif spec.type == "float":
            try:
                value = float(raw)
            except ValueError:
                raise bad() from None
        elif spec.type == "list":
            if raw.startswith("["):
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError:
                    raise bad() from None
            else:
                value = [p.strip() for p in raw.split(",") if p.strip()]
        elif spec.type == "choice":
            value = raw.lower()
        elif spec.type == "object":
            try:
                value = json.loads(raw) if raw else {}
            except (json.JSONDecodeError, RecursionError):
                raise bad() from None
        else:
            value = raw

    if value is None:
        if spec.optional:
            return None
        raise bad()
    if spec.type == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if spec.type == "int":
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_INT:
            raise bad()
        out: Any = value
    elif spec.type == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        try:
            out = float(value)
        except OverflowError:  # an int past a double's range
            raise bad() from None
        if math.isnan(out) or math.isinf(out):
            raise bad()
    elif spec.type == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad()
        for v in value:
            _check_text(key, v, bad)
            if spec.check and (why := spec.check(v)):
                raise bad(why)
        return list(value)
    elif spec.type == "object":
        if not isinstance(value, dict):
            raise bad()
        if spec.parse is None:
            return json.loads(json.dumps(value))
        try:
            return spec.parse(value)
        except ValueError as exc:  # the parser's message names the key and what it expects
            raise ConfigError(str(exc), key=key) from None
    elif spec.type == "choice":
        if isinstance(value, bool) and spec.aliases:
            value = "true" if value else "false"
        if not isinstance(value, str):
            raise bad()
        value = dict(spec.aliases).get(value, value)
        if value not in spec.choices:
            raise bad()
        return value
    else:  # str
        if not isinstance(value, str) or not value:
            raise bad()
        _check_text(key, value, bad)
        if spec.check and (why := spec.check(value)):
            raise bad(why)
        if text and spec.typed_check and (why := spec.typed_check(value)):
            raise bad(why)
        if key == "model.gguf" and text and not Path(value).expanduser().is_file():
            raise bad("the path of an existing GGUF file")  # typed now; a file moved later is said at start
        return value
    # numbers: bounds
    if spec.minimum is not None:
        if out < spec.minimum or (spec.exclusive_min and out == spec.minimum):
            raise bad()
    if spec.maximum is not None and out > spec.maximum:
        raise bad()
    return out


def _check_text(key: str, value: str, bad: Callable[..., ConfigError]) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad("text without unpaired surrogates") from None


def format_value(value: Any) -> str:
    """A value as ``config get`` prints it and ``config set`` reads it back.

    ``None`` → ``null``; booleans → ``true``/``false``; lists → compact JSON;
    numbers and strings as they are.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --- the file ---------------------------------------------------------------


def _flatten(obj: dict[str, Any], prefix: str, out: dict[str, Any], dups: list[str]) -> None:
    for k, v in obj.items():
        full = f"{prefix}{k}"
        if isinstance(v, dict) and full not in SCHEMA:
            _flatten(v, full + ".", out, dups)
            continue
        if full in out:
            dups.append(full)
        out[full] = v


#: How deep the file's objects may nest (its keys need 4 levels at most).
MAX_DEPTH = 32
#: The largest integer the file may hold (SQLite's, and far past any setting).
MAX_INT = 2 ** 63 - 1


class _BadNumber(ValueError):
    """A number literal the file may not hold; ``literal`` is its text."""

    def __init__(self, literal: str, why: str) -> None:
        super().__init__(why)
        self.literal = literal


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > 19 or abs(int(literal)) > MAX_INT:
        raise _BadNumber(literal, f"the number {literal[:20]}{'…' if len(literal) > 20 else ''} is too large")
    return int(literal)


def _parse_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _BadNumber(literal, f"the number {literal[:20]} is too large")
    return value


def _parse_constant(literal: str) -> float:
    raise _BadNumber(literal, f"{literal} is not a JSON number")


def _malformed(path: Path, why: str, text: str = "", literal: str | None = None) -> ConfigError:
    """The malformed-file error: its path, where (when known), why, and that it was left unchanged."""
    line = column = None
    at = text.find(literal) if literal else -1
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
    where = f" at line {line}, column {column}" if line else ""
    return ConfigError(f"{path}: malformed JSON{where}: {why}; fix it by hand, wisp left the file unchanged",
                       path=path, line=line, column=column)


def _check_tree(obj: Any, path: Path) -> None:
    """Refuse a parsed file that nests deeper than :data:`MAX_DEPTH` or holds
    a lone surrogate (a ``\\ud800`` escape: not text, and it breaks the next
    write) in a key or a value. Iterative: no recursion on hostile input."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _malformed(path, f"it nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            items = list(node.items())
        elif isinstance(node, list):
            items = [("", v) for v in node]
        else:
            items = [("", node)]
            depth = 0
        for key, value in items:
            for text in (key, value):
                if isinstance(text, str) and _has_surrogate(text):
                    shown = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
                    shown = shown if len(shown) <= 40 else shown[:39] + "…"
                    raise _malformed(path, f'it holds a lone surrogate escape in "{shown}", which is not text')
            if depth and isinstance(value, (dict, list)):
                stack.append((value, depth + 1))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _read_file(path: Path) -> dict[str, Any] | None:
    """The parsed top-level object, or ``None`` if the file does not exist.

    Raises :class:`ConfigError` with the malformed-file message (path, line
    and column when known, "left unchanged") for anything that is not a
    sane JSON object: bad syntax, nesting deeper than :data:`MAX_DEPTH`
    (which could exhaust the stack), numbers past :data:`MAX_INT` or a
    double's range, ``NaN``, lone surrogates (issue "Nothing runs, leaks,
    hangs or is lost that shouldn't be", "Config files"); and for a file
    that cannot be read or is not a regular file.
    """
    from .paths import NotRegularFile, open_regular

    try:
        with open_regular(path) as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except NotRegularFile as e:
        raise ConfigError(f"{path}: is {e.kind}, not a config file", path=path) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file", path=path) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror or e}", path=path) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {e.start}); fix or remove the file, it was left unchanged",
            path=path,
        ) from None
    if not text.strip():
        return {}
    try:
        obj = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}; "
            "fix it by hand, wisp left the file unchanged",
            path=path, line=e.lineno, column=e.colno,
        ) from None
    except _BadNumber as e:
        raise _malformed(path, str(e), text, e.literal) from None
    except RecursionError:
        raise _malformed(path, f"it nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # anything else json refuses that is not a syntax error
        raise _malformed(path, str(e)) from None
    _check_tree(obj, path)
    if not isinstance(obj, dict):
        raise ConfigError(
            f"{path}: the config must be a JSON object such as {{\"model\": {{\"name\": \"qwen3:8b\"}}}}; "
            "wisp left the file unchanged",
            path=path, line=1, column=1,
        )
    return obj


#: A profile's fields and the ``model.*`` key each stands for (issue 16, "Profiles").
PROFILE_FIELDS = {
    "provider": "model.provider",
    "endpoint": "model.endpoint",
    "model": "model.name",
    "api_key_env": "model.api_key_env",
    "context_window": "model.context_window",
}
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class Profile:
    """Named endpoint settings: ``name`` and ``values``, the ``model.*``
    keys it sets (every key of :data:`PROFILE_FIELDS`; a field it leaves out
    has its key's default)."""

    name: str
    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The profile as the file writes it (fields it sets only)."""
        back = {v: k for k, v in PROFILE_FIELDS.items()}
        return {back[k]: v for k, v in self.values.items() if v != SCHEMA[k].default}

    def describe(self) -> str:
        """One line: ``provider openai, endpoint http://…, model qwen3``."""
        d = self.to_dict()
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "every setting at its default"


def _parse_profiles(raw: Any, path: Path) -> tuple[dict[str, Profile], dict[str, str]]:
    """The profiles of the file's ``profiles`` object, and a problem text per
    bad one (keyed ``profiles.NAME``)."""
    profiles: dict[str, Profile] = {}
    problems: dict[str, str] = {}
    if raw is None:
        return profiles, problems
    example = '{"profiles": {"work": {"provider": "openai", "endpoint": "http://127.0.0.1:8000", "model": "m"}}}'
    if not isinstance(raw, dict):
        problems["profiles"] = f"{path}: profiles must be an object of named settings, such as {example}"
        return profiles, problems
    fields = ", ".join(PROFILE_FIELDS)
    for name, body in raw.items():
        key = f"profiles.{name}"
        if not _PROFILE_NAME.match(str(name)):
            problems[key] = (f"{path}: profile name {str(name)[:40]!r} must be letters, digits, ., _ or - "
                             "(at most 40, starting with a letter or digit)")
            continue
        if not isinstance(body, dict):
            problems[key] = f"{path}: profile {name!r} must be an object with some of {fields}"
            continue
        values = {k: SCHEMA[k].default for k in PROFILE_FIELDS.values()}
        for field_name, value in body.items():
            target = PROFILE_FIELDS.get(field_name)
            if target is None:
                import difflib

                near = difflib.get_close_matches(str(field_name), list(PROFILE_FIELDS), n=1)
                hint = f"; did you mean {near[0]}?" if near else ""
                problems[key] = (f"{path}: profile {name!r} has no field {str(field_name)[:40]!r}{hint} "
                                 f"(a profile has {fields})")
                break
            try:
                values[target] = parse_value(target, value, from_text=False)
            except ConfigError as exc:
                problems[key] = f"{path}: profile {name!r}: {str(exc).replace(target, field_name, 1)}"
                break
        else:
            profiles[str(name)] = Profile(str(name), values)
    return profiles, problems


class Config:
    """The config: known keys with their values, backed by one JSON file.

    Build it with :meth:`load`. ``Config()`` with no arguments is all defaults
    and points at :func:`wisp.core.paths.config_path`.

    Attributes:

    - ``path``: the config file (it may not exist);
    - ``problems``: one-line texts for unknown or invalid keys found in the
      file by a non-strict load (their values are kept in the file but not
      used).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 values: dict[str, Any] | None = None) -> None:
        """``values`` maps dotted keys to values, validated as by :func:`parse_value`
        with ``from_text=False``; raises :class:`ConfigError`."""
        self.path = Path(path).expanduser() if path is not None else config_path()
        self._values: dict[str, Any] = {}
        self._kept: dict[str, Any] = {}  # unknown or invalid entries of the file, preserved
        self._problems: dict[str, str] = {}
        self._profiles: dict[str, Profile] = {}
        self._raw_profiles: Any = None  # the file's "profiles" object, written back as it was
        #: Values laid over the file's for this process only (a profile in use).
        self._overlay: dict[str, Any] = {}
        #: The name of the profile in use, or ``None``.
        self.profile: str | None = None
        #: The file's signature when it was last read or written (:meth:`refresh`).
        self._read_as: Any = _NOT_READ
        for k, v in (values or {}).items():
            self._values[k] = parse_value(k, v, from_text=False)

    # -- loading ---------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, *, strict: bool = True) -> "Config":
        """Read the config file (default :func:`~wisp.core.paths.config_path`).

        A missing (or empty) file gives all defaults. Raises
        :class:`ConfigError` for a malformed file (path, line and column), a
        top-level value that is not an object, or a file that cannot be read.
        With ``strict`` (the default) it also raises for unknown keys (naming
        the closest) and values of the wrong type; with ``strict=False`` those
        are listed in ``problems`` and ignored. Never writes the file.
        """
        cfg = cls(path)
        cfg._reload(strict=strict)
        return cfg

    def _reload(self, *, strict: bool) -> None:
        obj = _read_file(self.path)
        values: dict[str, Any] = {}
        kept: dict[str, Any] = {}
        problems: dict[str, str] = {}
        raw_profiles = None
        if obj and "profiles" in obj:
            obj = dict(obj)
            raw_profiles = obj.pop("profiles")
        profiles, bad_profiles = _parse_profiles(raw_profiles, self.path)
        problems.update(bad_profiles)
        if obj:
            flat: dict[str, Any] = {}
            dups: list[str] = []
            _flatten(obj, "", flat, dups)
            for k, v in flat.items():
                if k not in SCHEMA:
                    kept[k] = v
                    problems[k] = str(_unknown_key_error(k, self.path))
                    continue
                try:
                    values[k] = parse_value(k, v, from_text=False)
                except ConfigError as e:
                    kept[k] = v
                    problems[k] = f"{self.path}: {e}"
            for d in dups:
                problems.setdefault(d, f"{self.path}: key '{d}' is given twice; the last one is used")
        if strict and problems:
            raise ConfigError("; ".join(problems.values()), path=self.path,
                              key=next(iter(problems)) if len(problems) == 1 else None)
        self._values, self._kept, self._problems = values, kept, problems
        self._profiles, self._raw_profiles = profiles, raw_profiles
        self._read_as = self._signature()

    @property
    def problems(self) -> list[str]:
        """One-line texts for unknown or invalid keys a non-strict load found
        in the file (their entries are preserved in the file but not used)."""
        return list(self._problems.values())

    # -- reading ---------------------------------------------------------

    def get(self, key: str) -> Any:
        """The value of ``key``: the one set, else the default.

        Lists and objects are returned as copies. Raises :class:`ConfigError` for an
        unknown key, naming the closest keys.
        """
        spec = _spec_for(key)
        if key in LIVE_KEYS:
            self.refresh()
        if key in self._overlay:
            value = self._overlay[key]
        else:
            value = self._values[key] if key in self._values else spec.default
        if isinstance(value, dict):
            return json.loads(json.dumps(value))
        return list(value) if isinstance(value, list) else value

    # -- profiles ----------------------------------------------------------

    @property
    def profiles(self) -> dict[str, Profile]:
        """The file's valid profiles by name (see the module doc)."""
        return dict(self._profiles)

    def use_profile(self, name: str | None) -> Profile | None:
        """Lay profile ``name`` over ``model.*`` for this process (``None``
        goes back to the file's settings); returns it. Every key of
        :data:`PROFILE_FIELDS` takes the profile's value or its default, so
        nothing of another profile or of the file's ``model.*`` leaks in.
        The file is not changed. Raises :class:`ConfigError` naming the
        profiles there are for an unknown name, or the problem of a
        profile the file holds but that is not valid."""
        if name is None:
            self._overlay = {}
            self.profile = None
            return None
        profile = self._profiles.get(name)
        if profile is None:
            if f"profiles.{name}" in self._problems:
                raise ConfigError(self._problems[f"profiles.{name}"], path=self.path)
            have = ", ".join(sorted(self._profiles)) or "none yet"
            raise ConfigError(f"no profile {name!r} in {self.path} (profiles: {have}); add one under "
                              f'"profiles", such as {{"profiles": {{"{name}": {{"provider": "ollama", '
                              '"model": "qwen3:8b"}}}', path=self.path)
        self._overlay = dict(profile.values)
        self.profile = name
        return profile

    def is_set(self, key: str) -> bool:
        """Whether ``key`` is set in the file (``False`` means it has its default)."""
        _spec_for(key)
        return key in self._values

    def items(self) -> list[tuple[str, Any, bool]]:
        """Every known key as ``(key, value, is_default)``, in :data:`SCHEMA` order."""
        return [(k, self.get(k), k not in self._values) for k in SCHEMA]

    def to_dict(self) -> dict[str, Any]:
        """Every known key and its value (set or default), flat and dotted."""
        return {k: v for k, v, _ in self.items()}

    @staticmethod
    def spec(key: str) -> KeySpec:
        """The :class:`KeySpec` of ``key``; raises :class:`ConfigError` if unknown."""
        return _spec_for(key)

    @staticmethod
    def keys() -> list[str]:
        """Every known key, in :data:`SCHEMA` order."""
        return list(SCHEMA)

    # -- paths -------------------------------------------------------------

    def _resolve(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.path.parent / p)

    @property
    def db_path(self) -> Path:
        """The database file: ``store.path`` (``~`` expanded, a relative path
        taken from the config file's directory), else ``<data dir>/wisp.db``."""
        value = self.get("store.path")
        return self._resolve(value) if value else default_data_dir() / "wisp.db"

    @property
    def data_dir(self) -> Path:
        """The data directory (not created): ``$WISP_HOME/data`` or platformdirs'
        user data dir. Shared embedded servers keep their files in
        ``<data dir>/embedded`` (issue 10)."""
        return default_data_dir()

    @property
    def audit_dir(self) -> Path:
        """The audit log's directory: ``audit.dir`` (resolved like
        :attr:`db_path`), else ``<data dir>/audit``."""
        value = self.get("audit.dir")
        return self._resolve(value) if value else default_data_dir() / "audit"

    # -- writing -----------------------------------------------------------

    def set(self, key: str, value: Any) -> Any:
        """Set ``key`` to ``value`` and save the file atomically (mode 0600).

        A ``str`` value is parsed by the key's type (see the module
        docstring); ``null``/``none``/empty clears an optional key. The file is
        read again first, so edits made meanwhile are kept; unknown entries in
        it are preserved. Returns the value stored (``None`` when cleared).
        Raises :class:`ConfigError` for an unknown key or a wrong type (nothing
        is written), or when the file is malformed (it is left byte-for-byte
        unchanged).
        """
        parsed = parse_value(key, value)
        self._reload(strict=False)
        self._overlay.pop(key, None)  # the person's own setting wins over the profile in use
        self._kept.pop(key, None)
        self._problems.pop(key, None)
        if parsed is None:
            self._values.pop(key, None)
        else:
            self._values[key] = parsed
        self._save()
        return parsed

    def unset(self, key: str) -> None:
        """Remove ``key`` from the file so that it has its default again.

        A key that is unknown but present in the file can be unset too, which
        is how to clean up a stale key. Raises :class:`ConfigError` for a key
        that is neither known nor in the file, or when the file is malformed
        (it is left unchanged).
        """
        self._reload(strict=False)
        if key not in SCHEMA and key not in self._kept:
            raise _unknown_key_error(key)
        self._overlay.pop(key, None)
        if key not in self._values and key not in self._kept:
            return
        self._values.pop(key, None)
        self._kept.pop(key, None)
        self._problems.pop(key, None)
        self._save()

    def _save(self) -> None:
        nested: dict[str, Any] = {}
        ordered = [(k, self._values[k]) for k in SCHEMA if k in self._values]
        ordered += list(self._kept.items())
        for key, value in ordered:
            parts = key.split(".")
            node = nested
            for i, part in enumerate(parts[:-1]):
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    raise ConfigError(
                        f"{self.path}: '{'.'.join(parts[:i + 1])}' is both a value and a group "
                        "of keys; fix the file by hand, it was left unchanged",
                        path=self.path, key=key,
                    )
                node = child
            if parts[-1] in node and isinstance(node[parts[-1]], dict):
                raise ConfigError(
                    f"{self.path}: '{key}' is both a value and a group of keys; fix the file by hand, "
                    "it was left unchanged",
                    path=self.path, key=key,
                )
            node[parts[-1]] = value
        if self._raw_profiles is not None:
            nested["profiles"] = self._raw_profiles
        data = (json.dumps(nested, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            atomic_write_private(self.path, data)
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot write the config file: {e.strerror or e}",
                              path=self.path) from None
        self._read_as = self._signature()

    # -- settings read afresh -----------------------------------------------

    def _signature(self) -> tuple[int, int, int, int] | None:
        """What identifies the file's current contents without reading it
        (modification and change times in ns, size, inode), or ``None`` when
        there is no file."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

    def refresh(self) -> bool:
        """Read the file again if it changed since it was last read or
        written (another wisp, ``wisp config set`` in another terminal, an
        edit by hand); returns whether it did. A config not loaded from its
        file (``Config(values=…)``) is never re-read, and a file that became
        malformed is not taken (the values read before stay), so a running
        wisp never fails on a setting being edited. A profile in use stays
        laid over it."""
        if self._read_as is _NOT_READ:
            return False
        now = self._signature()
        if now == self._read_as:
            return False
        try:
            self._reload(strict=False)
        except ConfigError:
            self._read_as = now
            return False
        return True
