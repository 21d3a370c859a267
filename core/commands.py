"""Slash commands, parsed and run here so that the TUI, the CLI and tests share them.

Each command is an async handler that takes the session and the words after
the command's name and returns a :class:`~wisp.core.command_base.CommandResult`
of Markdown text. No command costs the model anything but ``/compact``,
whose preview asks the model for the summary it proposes (marked
``asks_model``). :data:`COMMANDS` is the one explicit table of every command:
the built-in ``/help`` and ``/config`` here, and the handlers of the
features (the layered context's ``/fact``, ``/task``, ``/show``,
``/inspect``; ``/tools``; episodic memory's ``/memory``).
"""

from __future__ import annotations

import difflib
import json
import shlex
from typing import Any

from . import chat_commands as chat
from .command_base import Command, CommandResult
from .config import ConfigError
from .context.commands import compact_command, fact_command, inspect_command, show_command, task_command
from .episodes.commands import USAGE as MEMORY_USAGE, memory_command
from .toolset import tools_command
from .text import without_surrogates

__all__ = ["COMMANDS", "CommandResult", "is_command", "run_command", "help_text", "command_for"]


def is_command(text: str) -> bool:
    """True when the prompt is a slash command (``/word``), not a path like ``/etc/x``
    sent as a prompt: the first word must be a registered command or look like one."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return False
    first = stripped[1:].split(maxsplit=1)[0] if len(stripped) > 1 else ""
    return "/" not in first


def command_for(text: str) -> Command | None:
    """The registered command a slash command line names, or ``None``."""
    name = without_surrogates(text).strip()[1:].partition(" ")[0].lower()
    return COMMANDS.get(name)


async def run_command(session: Any, text: str) -> CommandResult:
    """Parse and run one slash command line against ``session`` (a
    :class:`wisp.core.session.Session`). Never raises for bad input: an
    unknown command or bad arguments give a result with ``error=True`` that
    says what to type instead."""
    stripped = without_surrogates(text).strip()[1:]  # a lone surrogate cannot be stored or shown
    name, _, rest = stripped.partition(" ")
    name = name.lower()
    cmd = COMMANDS.get(name)
    if cmd is None:
        close = difflib.get_close_matches(name, list(COMMANDS), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join('/' + c for c in close)}?" if close else ""
        return CommandResult(f"No command /{name}.{hint} Type /help for the list.", error=True)
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    try:
        return await cmd.handler(session, words, rest.strip())
    except ConfigError as exc:
        return CommandResult(str(exc), error=True)


def help_text() -> str:
    """The commands and keys as Markdown (F1 and /help show it)."""
    seen: set[str] = set()
    rows = []
    for cmd in COMMANDS.values():
        if cmd.name in seen:
            continue
        seen.add(cmd.name)
        usage = cmd.usage.replace("|", "\\|")
        rows.append(f"| {usage} | {cmd.help} |")
    keys = [
        ("Enter", "send the prompt"),
        ("Shift+Enter, Ctrl+J", "insert a newline"),
        ("Up / Down", "walk the history of prompts (at the first or last line)"),
        ("Ctrl+R", "search the history of prompts"),
        ("Esc, Ctrl+C", "stop a streaming reply, or a /model waiting for a busy endpoint "
                        "(Esc with the input empty: leave /edit)"),
        ("Left / Right", "on a reply with versions (/retry, /edit): show the earlier or later one"),
        ("Ctrl+Y", "copy the last reply (as /copy)"),
        ("Ctrl+T", "next theme"),
        ("Ctrl+P", "the command palette: type part of a command's name (compact, inspect …) and Enter runs it"),
        ("F1", "this help"),
        ("F2 / F3 / F4", "show or hide the facts, task and running summary panels (over the chat when narrow)"),
        ("F5", "inspect the next request's context (as /inspect context)"),
        ("Ctrl+Q", "quit"),
    ]
    return "\n".join([
        "## Commands", "", "| command | what it does |", "|---|---|", *rows, "",
        "## Keys", "", "| key | what it does |", "|---|---|",
        *[f"| {k} | {v} |" for k, v in keys],
    ])


async def help_command(session: Any, words: list[str], rest: str) -> CommandResult:
    return CommandResult(help_text(), title="help")


def _format_value(value: Any) -> str:
    return json.dumps(value)


def _server_note(cfg: Any, key: str) -> str:
    """For a key the shared embedded server takes only when it starts: that a running one keeps
    its old value until it stops (a new paragraph), else nothing."""
    from .model.embedded import running_server_note

    note = running_server_note(key, cfg.get("model.embedded_idle_s"))
    return f"\n\n{note}" if note else ""


async def config_command(session: Any, words: list[str], rest: str) -> CommandResult:
    cfg = session.config
    if not words or words[0] == "list":
        rows = [f"| `{k}` | `{_format_value(v)}` | {'default' if d else 'set'} |" for k, v, d in cfg.items()]
        data = {k: v for k, v, _ in cfg.items()}
        return CommandResult("| key | value | |\n|---|---|---|\n" + "\n".join(rows), title="config", data=data)
    verb = words[0]
    if verb == "get" and len(words) == 2:
        value = cfg.get(words[1])
        return CommandResult(f"`{words[1]}` = `{_format_value(value)}`", data={words[1]: value})
    if verb == "set" and len(words) >= 3:
        key = words[1]
        raw = rest.split(None, 2)[2] if len(rest.split(None, 2)) == 3 else " ".join(words[2:])
        value = cfg.set(key, raw)
        model_key = key.startswith("model.")
        applies = cfg.spec(key).applies  # a key read only when something starts says when
        when = f" {applies}" if applies else (" It applies from the next request"
                                              + (" (reconnecting to the endpoint)." if model_key else "."))
        return CommandResult(f"Set `{key}` = `{_format_value(value)}`.{when}" + _server_note(cfg, key),
                             data={key: value}, reconnect=model_key)
    if verb == "unset" and len(words) == 2:
        cfg.unset(words[1])
        return CommandResult(f"Unset `{words[1]}`; it is back to its default "
                             f"`{_format_value(cfg.get(words[1]))}`." + _server_note(cfg, words[1]),
                             reconnect=words[1].startswith("model."))
    return CommandResult("Usage: /config, /config get KEY, /config set KEY VALUE, /config unset KEY",
                         error=True)


def _table(commands: list[Command]) -> dict[str, Command]:
    out: dict[str, Command] = {}
    for cmd in commands:
        for name in (cmd.name, *cmd.aliases):
            if name in out:
                raise ValueError(f"two commands are named /{name}")
            out[name] = cmd
    return out


#: Every slash command, by name and alias, in the order ``/help`` lists them.
COMMANDS: dict[str, Command] = _table([
    Command("help", help_command, "/help", "show the commands and keys"),
    Command("config", config_command, "/config [get KEY | set KEY VALUE | unset KEY]",
            "show or change settings (on/off for booleans)"),
    Command("memory", memory_command, MEMORY_USAGE,
            "episodic memory: recent memories, search them, or show one with its sources"),
    Command("tools", tools_command, "/tools", "list this conversation's tools and their token cost"),
    Command("fact", fact_command, "/fact [SUBJECT [NAME] = VALUE | history NAME | forget ID | keep ID]",
            "list the facts, set one, show its versions, forget or keep one"),
    Command("task", task_command, "/task [THE TASK; objective: WHAT DONE LOOKS LIKE | clear]",
            "show, set or clear the conversation's task"),
    Command("show", show_command, "/show entry N | turn N | fact NAME",
            "show an entry, a turn or a fact's versions in full (not sent to the model)"),
    Command("inspect", inspect_command, "/inspect context",
            "the next request layer by layer, and its exact messages (no model cost)"),
    Command("compact", compact_command, "/compact [focus on …] | /compact undo",
            "preview a running summary of the older turns (Enter applies it, Esc cancels); undo restores the "
            "previous version", asks_model=True),
    # issue 16: conversations and models at hand
    Command("retry", chat.retry_command, "/retry", "ask the last prompt again; the old reply stays as a version"),
    Command("edit", chat.edit_command, "/edit", "put the last prompt back in the input; sending it replaces that turn"),
    Command("undo", chat.undo_command, chat.UNDO_USAGE,
            "put back the files the model's edits of the last turn (or turn N) changed; list or diff them"),
    Command("fork", chat.fork_command, "/fork [TURN]",
            "a new conversation with the turns up to TURN, and the facts and summary as they stood"),
    Command("search", chat.search_command, "/search TEXT", "find TEXT in this conversation and jump to it"),
    Command("copy", chat.copy_command, "/copy [code [N]]", "copy the last reply, or its code block N"),
    Command("title", chat.title_command, "/title [TEXT]", "show or change the conversation's title"),
    Command("export", chat.export_command, "/export [md|json] [FILE]",
            "write the conversation to a file: Markdown for people, or JSON with everything"),
    Command("model", chat.model_command, "/model [NAME]", "list the endpoint's models, or switch to one",
            asks_endpoint=True),
    Command("profile", chat.profile_command, "/profile [NAME | off]", "list the endpoint profiles, or use one"),
    Command("new", chat.new_command, "/new", "start a new conversation"),
    Command("clear", chat.clear_command, "/clear", "clear the screen (the record stays)"),
    Command("quit", chat.quit_command, "/quit", "quit wisp", aliases=("exit",)),
])
