"""Argument parsing for ``wisp`` and its subcommands, and the headless commands.

``wisp`` alone opens the TUI (through the ``run_tui`` callback that
:mod:`wisp.tui.launch` passes in, so core never imports Textual).
``wisp ask``, ``wisp conversations`` (list, ``search``, ``rm``), ``wisp
export``, ``wisp import`` and ``wisp config`` run here.

Exit codes (issue "wisp runs end to end", "Headless"): 0 done; 2 bad usage
(including a bad config); 3 endpoint error, with one line on stderr and no
traceback.

What a subcommand writes to a terminal goes through
:class:`wisp.core.text.TerminalText`: a model's reply, a command's output or
a server's message cannot send the terminal control sequences (issue
"Nothing runs, leaks, hangs or is lost that shouldn't be", "Raw terminal
escapes"). ``--json`` output is left as it is, and so is anything written
to a pipe or a file.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from dataclasses import asdict, is_dataclass

from . import __version__, collector
from .config import Config, ConfigError
from .context.cli import add_compact_parser, add_inspect_parser
from .paths import config_path
from .redact import RedactingStream, make_undumpable
from .session_options import SessionError, SessionOptions, unknown_conversation
from .text import TerminalText

if TYPE_CHECKING:
    from .audit import AuditLog
    from .command_base import CommandResult
    from .session import Session

# Only what parsing the command line needs is imported here: the TUI's first frame waits for this
# module, so each command imports the rest of the core when it runs (issue 12, "Paint first, then open").

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ENDPOINT = 3
#: ``wisp ask``: the conversation has a turn running in another wisp (nothing was sent; try again later).
EXIT_BUSY = 4
#: ``wisp ask`` whose output's reader left mid-turn (128 + SIGPIPE, as a shell shows a process a closed pipe ended).
EXIT_PIPE = 141


class UsageError(Exception):
    """Bad usage: exit 2 with the message on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as argparse does, minus the usage dump
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"wisp: error: {message}\n")


def _add_mcp_parser(sub: Any) -> None:
    from .mcp.cli import add_mcp_parser

    add_mcp_parser(sub)


def _add_memory_parser(sub: Any) -> None:
    from .episodes.cli import add_memory_parser

    add_memory_parser(sub)


def _add_eval_parser(sub: Any) -> None:
    from .eval.cli import add_eval_parser

    add_eval_parser(sub)


#: Commands whose modules take long to import (episodic memory's queries; the MCP SDK; the
#: evaluation's scenarios): their parsers are built only when the command line names them (or
#: asks for help); otherwise a stub with the same one-line help stands in, which nothing can
#: select (issue 12, "Paint first, then open"; `wisp ask` loads none of them).
_LATE_COMMANDS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "memory": ("episodic memory across conversations: list, search, show, forget, status, refine, serve",
               _add_memory_parser),
    "mcp": ("MCP servers: list them, or serve wisp over MCP", _add_mcp_parser),
    "eval": ("measure whether wisp's context and memory tool help on your model", _add_eval_parser),
}


def _add_conversations_parser(sub: Any) -> None:
    """`wisp conversations [search|rm]`."""
    conv = sub.add_parser("conversations", help=_EARLY_COMMANDS["conversations"][0]())
    conv.add_argument("--json", action="store_true")
    conv.add_argument("--limit", type=int, default=50)
    conv_sub = conv.add_subparsers(dest="conversations_command", metavar="search|rm", parser_class=_Parser)
    srch = conv_sub.add_parser("search", help="find TEXT in every conversation's prompts, replies, tool calls and outputs")
    srch.add_argument("text", nargs="+", help="the words to find (all of them, as word beginnings)")
    srch.add_argument("--json", action="store_true")
    srch.add_argument("--limit", type=int, default=50)
    rm = conv_sub.add_parser("rm", help="delete a conversation (says what goes with it)")
    rm.add_argument("id", type=int, metavar="ID")
    rm.add_argument("--yes", action="store_true", help="delete it; without --yes, only say what would go")
    rm.add_argument("--purge-audit", action="store_true", help="also blank its events in the audit log")
    rm.add_argument("--json", action="store_true")


def _add_export_parser(sub: Any) -> None:
    """`wisp export ID`."""
    exp = sub.add_parser("export", help=_EARLY_COMMANDS["export"][0]())
    exp.add_argument("id", type=int, metavar="ID")
    exp.add_argument("--format", choices=("md", "json"), default=None,
                     help="md: for people (thinking and tools folded); json: every entry, fact and summary version "
                          "(default: json for a FILE ending .json, else md)")
    exp.add_argument("-o", "--output", type=Path, metavar="FILE", help="the file (default: stdout)")


def _add_import_parser(sub: Any) -> None:
    """`wisp import FILE`."""
    imp = sub.add_parser("import", help=_EARLY_COMMANDS["import"][0]())
    imp.add_argument("file", type=Path, metavar="FILE", help="a file written by `wisp export ID --format json`")
    imp.add_argument("--json", action="store_true")
    imp.add_argument("--workdir", type=Path, metavar="DIR",
                     help="the new conversation's working directory (default: the export's)")


def _add_config_parser(sub: Any) -> None:
    """`wisp config list|get|set|unset`."""
    cfg = sub.add_parser("config", help=_EARLY_COMMANDS["config"][0]())
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="list|get|set|unset", parser_class=_Parser)
    lst = cfg_sub.add_parser("list", help="every setting with its value")
    lst.add_argument("--json", action="store_true")
    get = cfg_sub.add_parser("get", help="one setting")
    get.add_argument("key")
    get.add_argument("--json", action="store_true")
    st = cfg_sub.add_parser("set", help="change a setting (on/off/true/false for booleans)")
    st.add_argument("key")
    st.add_argument("value")
    un = cfg_sub.add_parser("unset", help="return a setting to its default")
    un.add_argument("key")


#: The commands listed before ``inspect`` and ``compact``, with their one-line help: built when
#: named, like :data:`_LATE_COMMANDS` (issue 12, "wisp ask one turn": argparse spends about 4 ms
#: building them, and `wisp ask` builds none).
_EARLY_COMMANDS: dict[str, tuple[Callable[[], str], Callable[[Any], None]]] = {
    "conversations": (lambda: "list, search or delete stored conversations", _add_conversations_parser),
    "export": (lambda: "write a conversation as Markdown or JSON", _add_export_parser),
    "import": (lambda: "restore a JSON export as a new conversation", _add_import_parser),
    "config": (lambda: f"show or change settings in {config_path()}", _add_config_parser),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``wisp [options] [COMMAND ...]``. With ``argv`` given,
    the parsers of :data:`_EARLY_COMMANDS` and :data:`_LATE_COMMANDS` that ``argv`` cannot select (it
    holds neither their name nor ``-h``/``--help``) are stubs, so that
    parsing loads none of their modules."""
    p = _Parser(prog="wisp", description="A terminal chat client for local language models "
                "that shows you everything the model is given.",
                epilog=f"Settings: {config_path()} (WISP_HOME moves it; `wisp config list` shows them).")
    p.add_argument("--version", action="version", version=f"wisp {__version__}")
    _session_flags(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ask = sub.add_parser("ask", help="run one turn and stream the reply to stdout")
    ask.add_argument("prompt", nargs="?", default=None,
                     help="the prompt; - (or none, with stdin not a terminal) reads it from stdin")
    ask.add_argument("--json", action="store_true", help="print one JSON event a line")
    ask.add_argument("--model", metavar="NAME", help="use model NAME for this turn (the endpoint must list it)")
    ask.add_argument("--allow-edits", action="store_true",
                     help="let the model edit and create files in the working directory without asking; each "
                          "diff is printed (config tools.edit_file.allow does it always; /undo takes them back)")
    _session_flags(ask)

    _add_commands(sub, argv, _EARLY_COMMANDS)
    add_inspect_parser(sub)  # `wisp inspect context` (issue "Layered context")
    add_compact_parser(sub)  # `wisp compact` (issue "Compaction you can see and trust")
    _add_commands(sub, argv, _LATE_COMMANDS)  # `wisp memory …`, `wisp mcp …` (issue 15), `wisp eval`
    return p


def _add_commands(sub: Any, argv: Sequence[str] | None,
                  commands: dict[str, tuple[Any, Callable[[Any], None]]]) -> None:
    """Each command's parser when ``argv`` may select it (it holds the command's name, or
    ``-h``/``--help``, or ``argv`` is ``None``), else a stub with the same one-line help
    (given as text, or as a function that returns it)."""
    words = None if argv is None else set(argv)
    for name, (help_line, add) in commands.items():
        if words is None or words & {name, "-h", "--help"}:
            add(sub)
        else:
            sub.add_parser(name, help=help_line() if callable(help_line) else help_line)


def _session_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--continue", dest="continue_last", action="store_true",
                   default=argparse.SUPPRESS, help="reopen the newest conversation of this directory")
    p.add_argument("--all", dest="continue_all", action="store_true", default=argparse.SUPPRESS,
                   help="with --continue: the newest conversation anywhere")
    p.add_argument("--fork", metavar="ID[:TURN]", default=argparse.SUPPRESS,
                   help="start a new conversation holding conversation ID's turns (up to TURN)")
    p.add_argument("--profile", metavar="NAME", default=argparse.SUPPRESS,
                   help="use the endpoint settings of config profile NAME")
    p.add_argument("--resume", type=int, metavar="ID", default=argparse.SUPPRESS,
                   help="reopen conversation ID")
    p.add_argument("--tool", action="append", metavar="NAME", dest="tools", default=argparse.SUPPRESS,
                   help="give the model exactly these tools (repeatable)")
    p.add_argument("--workdir", type=Path, default=argparse.SUPPRESS,
                   help="the conversation's working directory (default: the current one)")


def session_options(args: argparse.Namespace, transport: str) -> SessionOptions:
    """SessionOptions from parsed arguments."""
    return SessionOptions(
        workdir=(getattr(args, "workdir", None) or Path.cwd()),
        continue_last=getattr(args, "continue_last", False),
        continue_all=getattr(args, "continue_all", False),
        resume=getattr(args, "resume", None),
        tools=getattr(args, "tools", None),
        transport=transport,
        model=getattr(args, "model", None),
        profile=getattr(args, "profile", None),
        allow_edits=bool(getattr(args, "allow_edits", False)),
    )


def main(argv: Sequence[str] | None = None,
         run_tui: Callable[[SessionOptions], int] | None = None) -> int:
    """Run ``wisp`` with ``argv``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == sys.argv[1:]:
        # wisp run as a program (the console script hands in its own arguments; a test calling main()
        # hands in others): no process of the same user may read its /proc/PID/environ or mem (an MCP
        # server, a command, a script the model wrote)
        make_undumpable()
    args = build_parser(argv).parse_args(argv)
    # the words before the command's name: the chat's flags written there (see _check_chat_flags)
    args.before_command = argv[:argv.index(args.command)] if args.command in argv else []
    if args.command is None:
        return _main(args, run_tui)
    saved = sys.stdout, sys.stderr
    if sys.stdout.isatty() and not getattr(args, "json", False):
        sys.stdout = TerminalText(sys.stdout)
    if sys.stderr.isatty():
        sys.stderr = TerminalText(sys.stderr)
    sys.stderr = RedactingStream(sys.stderr)  # a key, a URL's password or a bearer token is masked
    try:
        return _main(args, run_tui)
    finally:
        sys.stdout, sys.stderr = saved


def _main(args: argparse.Namespace, run_tui: Callable[[SessionOptions], int] | None) -> int:
    try:
        _check_flags(args)
        if getattr(args, "fork", None) is not None:
            asyncio.run(_fork(args))  # --fork ID[:TURN]: then this run resumes the new conversation
        if args.command is None:
            if run_tui is None:
                raise UsageError("the TUI is not available here; use `wisp ask`")
            options = session_options(args, "tui")
            # a malformed config, an unknown conversation, profile or tool stops here, before the screen opens
            _check_tui_options(options)
            return run_tui(options)
        if args.command == "ask":
            return asyncio.run(_ask(args))
        collector.started()  # the other commands are not timed: the garbage collector runs as usual
        if args.command == "conversations":
            return asyncio.run(_conversations(args))
        if args.command == "export":
            return asyncio.run(_export(args))
        if args.command == "import":
            return asyncio.run(_import(args))
        if args.command == "config":
            return _config(args)
        if args.command == "memory":
            from .database import audit_dir_of, open_store
            from .episodes.cli import run_memory

            return run_memory(args, _config_side_call, open_store)
        if args.command == "inspect":
            return asyncio.run(_inspect(args))
        if args.command == "compact":
            return asyncio.run(_compact(args))
        if args.command == "mcp":
            from .mcp.cli import run_mcp

            return run_mcp(args, _mcp_opener(args))
        if args.command == "eval":
            from .eval.cli import run_eval_command

            return run_eval_command(args)
    except _usage_errors() as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if args.command == "ask":  # the turn was stopped and recorded as such (issue 11: nothing is lost)
            lead = "\n" if sys.stderr.isatty() else ""
            print(f"{lead}wisp: stopped (Ctrl+C); what the model had said is kept, and `wisp ask --continue` "
                  "goes on from it.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `wisp conversations | head`: the reader left; say nothing
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        if exc.errno in _NO_ROOM:  # a full disk, or the file size limit: say where, and what frees it
            print(f"wisp: error: no room to write{where or _storage_places()}: {exc.strerror or exc}; free space "
                  "on its disk (or raise the file size limit, ulimit -f), then run wisp again.", file=sys.stderr)
            return EXIT_USAGE
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            print(f"wisp: error: cannot use{where}: {exc.strerror or exc}; check the permissions and owner of the "
                  "file and its directory, or point store.path and audit.dir elsewhere.", file=sys.stderr)
            return EXIT_USAGE
        print(f"wisp: error: cannot use{where}: {exc.strerror or exc}. Check WISP_HOME, store.path "
              "and audit.dir (wisp config get store.path).", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug: one line, and the traceback only when asked for
        damage = _database_damage(exc)
        if damage is not None:  # a damaged, full or unusable database is named, with what to do
            print(f"wisp: error: {damage}", file=sys.stderr)
            return EXIT_USAGE
        if os.environ.get("WISP_DEBUG"):
            raise
        print(f"wisp: internal error: {type(exc).__name__}: {exc} (run with WISP_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1
    return EXIT_OK


#: The errors of a write that found no room: a full disk, a full quota, the file size limit (RLIMIT_FSIZE).
_NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _storage_places() -> str:
    """`` the database DB or the audit log in DIR``, as config names them (for a write that names no file)."""
    try:
        config = Config.load()
        return f" the database {config.db_path} or the audit log in {config.audit_dir}"
    except Exception:
        return " wisp's data directory"


def _database_damage(exc: BaseException) -> str | None:
    """The one line naming the database and what to do when ``exc`` comes
    from a damaged, full or unusable database file (at whatever moment:
    opening it or a later write), else ``None``."""
    import sqlite3

    from .database import DatabaseDamaged, damage_message

    if isinstance(exc, DatabaseDamaged):
        return str(exc)
    here: BaseException | None = exc
    for _ in range(6):  # the SQLite error may be the cause of another
        if here is None or isinstance(here, sqlite3.DatabaseError):
            break
        here = here.__cause__ or here.__context__
    if not isinstance(here, sqlite3.DatabaseError):
        return None
    try:
        path = Config.load().db_path
    except Exception:
        path = Path("the database")
    return damage_message(path, here)


def _config_side_call(config: Config, store: Any = None) -> Any:
    """``wisp memory refine``'s side call (a
    :class:`~wisp.core.model.sidecall.ConfigSideCall`): it connects from config
    on first use and remembers in ``store`` which form of shaped output the
    endpoint takes (:class:`~wisp.core.context.shapes.ShapeBook`)."""
    from .context.shapes import ShapeBook
    from .model.sidecall import ConfigSideCall

    return ConfigSideCall(config, shapes=ShapeBook(store) if store is not None else None)


def _usage_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean bad usage (exit 2): a bad config, bad usage, a
    session that cannot open, and an export, import, fork or delete that
    cannot be done (:class:`wisp.core.conversations.ArchiveError`, counted
    once its module is loaded: only the commands that load it can raise it)."""
    archive = sys.modules.get(f"{__package__}.conversations")
    return (ConfigError, UsageError, SessionError) + ((archive.ArchiveError,) if archive is not None else ())


def _mcp_opener(args: argparse.Namespace) -> Callable[[int | None, bool], Any]:
    """How ``wisp mcp serve`` opens a session: transport ``mcp``, no one to
    ask (tools that act follow the allow lists, as in ``wisp ask``)."""
    workdir = getattr(args, "workdir", None) or Path.cwd()
    tools = getattr(args, "tools", None)

    async def open_session(conversation: int | None, continue_last: bool) -> "Session":
        from .session import Session

        return await Session.open(SessionOptions(workdir=workdir, resume=conversation,
                                                 continue_last=continue_last and conversation is None,
                                                 tools=tools, transport="mcp"))

    return open_session


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _check_flags(args: argparse.Namespace) -> None:
    """Usage errors argparse cannot see: --continue with --resume, a missing --workdir."""
    if getattr(args, "continue_last", False) and getattr(args, "resume", None) is not None:
        raise UsageError("use --continue or --resume ID, not both")
    if getattr(args, "fork", None) is not None and (getattr(args, "continue_last", False)
                                                   or getattr(args, "resume", None) is not None):
        raise UsageError("--fork starts a new conversation: use it without --continue or --resume")
    if getattr(args, "continue_all", False) and not getattr(args, "continue_last", False):
        raise UsageError("--all goes with --continue (the newest conversation anywhere)")
    model = getattr(args, "model", None)
    if model is not None and not model.strip():
        raise UsageError("--model needs a model's name (the endpoint's models: /model in wisp)")
    workdir = getattr(args, "workdir", None)
    if workdir is not None and not Path(workdir).is_dir():
        raise UsageError(f"--workdir {workdir} is not a directory")
    if args.command not in (None, "ask"):
        _check_chat_flags(args)


#: The chat's flags (:func:`_session_flags`), as written before a command: ``wisp --resume 6 inspect context``.
_CHAT_FLAGS = ("--continue", "--all", "--resume", "--fork", "--profile", "--tool", "--workdir")


def _check_chat_flags(args: argparse.Namespace) -> None:
    """A command other than the chat and ``ask`` given the chat's flags: ``--resume ID`` means
    ``--conversation ID`` where the command takes one (a new user's ``wisp --resume 6 inspect
    context`` took the newest conversation), and ``--continue [--all]`` its default (``--all``);
    any other is refused with a :class:`UsageError`, not ignored."""
    before = set()
    for word in getattr(args, "before_command", []):  # argparse takes a flag's unique prefix too
        named = [flag for flag in _CHAT_FLAGS if word.startswith("--") and flag.startswith(word.split("=", 1)[0])]
        before.update(named if len(named) == 1 else [])
    if "--resume" in before and hasattr(args, "conversation"):
        if args.conversation is not None and args.conversation != args.resume:
            raise UsageError(f"--resume {args.resume} and --conversation {args.conversation} name two "
                             "conversations")
        args.conversation = args.resume
        before.discard("--resume")
    if hasattr(args, "conversation") and "--continue" in before:
        before.discard("--continue")  # the newest conversation of this directory is these commands' default
        if "--all" in before and hasattr(args, "all"):
            args.all = True
            before.discard("--all")
    given = [flag for flag in _CHAT_FLAGS if flag in before]
    if given:
        picks = " (--conversation ID picks the conversation)" if hasattr(args, "conversation") else ""
        one = len(given) == 1
        raise UsageError(f"{', '.join(given)} belong{'s' if one else ''} to the chat (`wisp {given[0]} …`) and "
                         f"`wisp ask`; `wisp {args.command}` does not take {'it' if one else 'them'}{picks}")


def _check_tui_options(options: SessionOptions) -> None:
    """What would stop the TUI from opening, found before its screen opens and
    without opening a session (issue 12, "Paint first, then open"): a bad
    config (:class:`ConfigError`), ``--resume`` of a conversation that is not
    stored, an unknown ``--tool`` or a bad ``tools:`` line in the working
    directory's AGENTS.md (:class:`SessionError`), an unknown ``--profile``
    (:class:`ConfigError`). A resumed conversation's own directory and tools
    are settled when the session opens, in the TUI."""
    from .agents_md import load_agents_md
    from .toolset import choose_tools

    config = Config.load()
    if options.profile:
        config.use_profile(options.profile)  # ConfigError names the profiles there are
    if options.resume is not None:
        from .store import conversation_exists

        if not conversation_exists(config.db_path, options.resume):
            raise unknown_conversation(options.resume)
        if options.tools is not None:
            try:
                choose_tools(options.tools, None, config)
            except ValueError as exc:
                raise SessionError(str(exc)) from None
        return
    try:
        choose_tools(options.tools, load_agents_md(Path(options.workdir).resolve()), config)
    except ValueError as exc:
        raise SessionError(str(exc)) from None


async def _ask(args: argparse.Namespace) -> int:
    """``wisp ask``: one turn (:func:`_ask_turn`). SIGTERM stops it as Ctrl+C
    does: the turn is recorded as stopped with what the model had said (a new
    user's SIGTERM left the turn open until the next run), and the exit code
    is 143 (128 + SIGTERM)."""
    import signal

    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # no signal handlers here (not the main thread)
        return await _ask_turn(args)
    try:
        return await _ask_turn(args)
    except asyncio.CancelledError:
        if not terminated or task is None:
            raise
        task.uncancel()
        lead = "\n" if sys.stderr.isatty() else ""
        print(f"{lead}wisp: stopped (SIGTERM); what the model had said is kept, and `wisp ask --continue` "
              "goes on from it.", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _has_words(prompt: str) -> bool:
    """True when ``prompt`` holds something to read: a character that is
    neither whitespace nor a control or format character (a prompt of only
    escape codes or NULs is empty; a new user's was sent to the model)."""
    import unicodedata

    return any(not c.isspace() and unicodedata.category(c)[0] != "C" for c in prompt)


async def _ask_turn(args: argparse.Namespace) -> int:
    if args.prompt is None and sys.stdin.isatty():
        raise UsageError('say what to ask: wisp ask "PROMPT", or pipe it in (echo PROMPT | wisp ask)')
    if args.prompt in ("-", None):  # bytes that are not UTF-8 become replacement characters, not a crash
        prompt = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    else:
        prompt = args.prompt.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    if not _has_words(prompt):
        raise UsageError("the prompt is empty" if not prompt.strip() else
                         "the prompt has only control characters; nothing was sent")
    from . import events as ev
    from .session import Session

    out = sys.stdout
    async with await Session.open(session_options(args, "ask")) as session:
        collector.started()  # what one turn needs is imported and open (issue 12, "wisp ask one turn")
        for problem in session.startup_problems:
            print(f"wisp: {problem}", file=sys.stderr)
        for note in session.startup_notes:
            print(f"wisp: {note}", file=sys.stderr)
        supersedes = None
        # the commands load only for a prompt that may be one (issue 12, "wisp ask one turn")
        is_command = prompt.lstrip().startswith("/") and _commands().is_command
        if is_command and is_command(prompt):  # /fact, /task, /show …: run here as in the TUI, at no model cost
            if prompt.split()[0].lower() == "/model":  # it lists or checks the endpoint's models
                await session.connect()
            result = await _commands().run_command(session, prompt)
            if result.action != "retry" or result.error:
                return _print_command(result, args.json)
            print(f"wisp: {result.text}", file=sys.stderr)  # /retry: ask the last prompt again, headless
            prompt, supersedes = result.data["prompt"], result.data["turn"]
        if session.conversation_id is not None:  # say a conversation is busy before waiting for its endpoint
            from .store import ConversationBusy

            try:
                await session.store.check_not_busy(session.conversation_id)
            except ConversationBusy as exc:
                if args.json:
                    out.write(json.dumps(ev.event_to_dict(ev.Error("busy", str(exc)))) + "\n")
                    out.flush()
                print(f"wisp: error: {exc}", file=sys.stderr)
                return EXIT_BUSY
        # a slow connect says why on stderr: the embedded model starting, or busy with another wisp's reply
        if not await session.connect(on_status=lambda line: print(f"wisp: {line}", file=sys.stderr, flush=True)):
            if args.json:
                out.write(json.dumps(ev.event_to_dict(ev.Error("no_endpoint", session.endpoint_error or "")))
                          + "\n")
                out.flush()
            print(f"wisp: error: {session.endpoint_error}", file=sys.stderr)
            return EXIT_ENDPOINT
        code = EXIT_OK
        wrote_text = False
        mid_line = False  # the reply's last text did not end its line
        shown_keys: set[str] = set()
        sandbox_said = False  # the line that commands have no sandbox here, printed with the first refusal
        # a changing state's newest line, printed when the state is over: how long the wait took
        last_of_key: dict[str, str] = {}

        def to_stderr(line: str) -> None:
            """A line for the person: on its own line, when the reply shares the terminal with it."""
            nonlocal mid_line
            if mid_line and out.isatty():
                out.write("\n")
                out.flush()
                mid_line = False
            print(line, file=sys.stderr)

        turns = session.run_turn(prompt, supersedes=supersedes)
        try:
            async for item in turns:
                if args.json:
                    out.write(json.dumps(ev.event_to_dict(item), ensure_ascii=False) + "\n")
                    out.flush()
                    if isinstance(item, ev.Error):
                        print(f"wisp: error: {item.message}", file=sys.stderr)
                        code = EXIT_BUSY if item.kind == "busy" else EXIT_ENDPOINT
                    continue
                if last_of_key and not (isinstance(item, ev.Notice) and item.key in last_of_key):
                    for line in last_of_key.values():
                        to_stderr(f"wisp: {line}")
                    last_of_key.clear()
                if isinstance(item, ev.TextDelta):
                    out.write(item.text)
                    out.flush()
                    wrote_text = True
                    if item.text:
                        mid_line = not item.text.endswith("\n")
                elif isinstance(item, ev.ToolCall) and item.name == "edit_file":  # its diff follows, not its texts
                    to_stderr(f"[edit_file {json.dumps(str(item.arguments.get('path', '')), ensure_ascii=False)}]")
                elif isinstance(item, ev.ToolCall):
                    to_stderr(f"[{item.name} {json.dumps(item.arguments, ensure_ascii=False)}]")
                elif isinstance(item, ev.ToolOutput):  # a command's output as it runs
                    sys.stderr.write(item.text)
                    sys.stderr.flush()
                elif isinstance(item, ev.ToolResult) and item.name == "edit_file":
                    _print_edit(item, to_stderr)
                elif isinstance(item, ev.ToolResult) and (item.meta.get("approval") or {}).get("choice") \
                        == "needs_approval" and item.meta.get("mcp_server"):  # an MCP tool that acts (issue 15)
                    print(f"wisp: not run, it needs approval: {item.meta.get('command', item.name)} (allow it with: "
                          f"wisp config set tools.mcp.allow '[\"{item.name}\"]')", file=sys.stderr)
                elif isinstance(item, ev.McpServerFailed):
                    print(f"wisp: MCP server {item.server} failed: {item.message}", file=sys.stderr)
                elif isinstance(item, ev.ToolResult) and (item.meta.get("approval") or {}).get("choice") \
                        == "needs_approval":
                    from .tools.shell import NotSimple, simple_words

                    from .tools import sandbox

                    command = str(item.meta.get("command", ""))
                    notice = sandbox.approval_notice()  # commands have no sandbox here, so no allow list
                    try:
                        simple_words(command)
                        how = "allow a prefix with: wisp config set tools.run_command.allow '[\"PREFIX\"]'"
                    except NotSimple as exc:  # no prefix ever allows it
                        how = f"not a simple command: {exc.reason}; no allowed prefix covers it, run it in the TUI"
                    if notice is not None:
                        how = "with no sandbox here, only the TUI can allow it"
                    print(f"wisp: not run, it needs approval: {command} ({how})", file=sys.stderr)
                    if notice is not None and not sandbox_said:  # why, once
                        sandbox_said = True
                        print(f"wisp: {notice}", file=sys.stderr)
                elif isinstance(item, ev.Notice):
                    if item.key is not None and item.key in shown_keys:
                        if (item.key == "wait" and "answers again" in item.text) or item.key == "summary-writing":
                            # the embedded server's restart, a running summary: a line as it begins, one with its
                            # seconds at its end
                            last_of_key[item.key] = item.text
                        continue  # no line a second for a changing state (the wait for a loading model)
                    if item.key is not None:
                        shown_keys.add(item.key)
                    to_stderr(f"wisp: {item.text}")
                elif isinstance(item, ev.Error):
                    if wrote_text:
                        out.write("\n")
                        out.flush()
                    print(f"wisp: error: {item.message}", file=sys.stderr)
                    code = EXIT_BUSY if item.kind == "busy" else EXIT_ENDPOINT
                elif isinstance(item, ev.TurnEnded) and item.state != "error":
                    if wrote_text:
                        out.write("\n")
                        out.flush()
        except BrokenPipeError:  # `wisp ask … | head`: the reader left before the turn ended
            await turns.aclose()  # the turn ends stopped, what was said kept, as on Ctrl+C
            _silence_stdout()
            print("wisp: the output's reader left (a closed pipe) before wisp had written it all; the turn is "
                  "kept as far as it went, and `wisp ask --continue` goes on from it.", file=sys.stderr)
            return EXIT_PIPE
        return code


def _print_edit(item: Any, to_stderr: Callable[[str], None]) -> None:
    """What ``wisp ask`` prints of an edit's result, on stderr (stdout is the
    reply): the diff of an edit made, with its entry; the diff of one that
    needed approval, with how to allow it; else the result's first line."""
    meta = item.meta or {}
    diff = str(meta.get("diff") or "")
    path = meta.get("path", "")
    if item.ok and diff:
        to_stderr(f"wisp: edited {path} (entry {item.entry}; /undo takes it back):\n{diff}")
    elif (meta.get("approval") or {}).get("choice") == "needs_approval":
        shown = f"; the edit it asked for:\n{diff}" if diff else ""
        to_stderr(f"wisp: not edited, edits need approval: {path} (allow them with wisp ask --allow-edits, or "
                  f"wisp config set tools.edit_file.allow on){shown}")
    else:
        to_stderr(f"wisp: {item.content.splitlines()[0] if item.content else 'the edit was not made'}")


def _print_command(result: "CommandResult", as_json: bool) -> int:
    """Print a slash command's result for ``wisp ask "/fact …"``: its Markdown
    text, or with ``--json`` one ``{"event": "command", …}`` line holding its
    data. Exit 2 when the command failed (bad usage), else 0."""
    if as_json:
        print(json.dumps({"event": "command", "title": result.title, "error": result.error, "text": result.text,
                          "data": result.data}, ensure_ascii=False, default=_jsonable))
    else:
        print(result.text, file=sys.stderr if result.error else sys.stdout)
    return EXIT_USAGE if result.error else EXIT_OK


def _jsonable(value: Any) -> Any:
    """JSON for a command's data: ``to_dict()`` where a value has one, else
    its dataclass fields, else its text."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def _commands() -> Any:
    """:mod:`wisp.core.commands`, loaded on first use (it loads every command's feature module)."""
    from . import commands

    return commands


def _audit(config: Config) -> "AuditLog":
    from .audit import AuditLog

    return AuditLog(config.audit_dir, enabled=bool(config.get("audit.enabled")),
                    max_bytes=int(config.get("audit.max_bytes")), keep=int(config.get("audit.keep")))


async def _fork(args: argparse.Namespace) -> None:
    """``--fork ID[:TURN]``: make the fork, say so, and resume it in this run."""
    from .conversations import count_turns, fork, parse_fork, turns_phrase
    from .database import audit_dir_of, open_store

    source, turn = parse_fork(args.fork)
    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        with _audit(config) as audit:
            new = await fork(store, audit, source, turn)
            held = turns_phrase(*count_turns(await store.turns(new, versions=True)))
    at = f" up to turn {turn}" if turn is not None else ""
    print(f"wisp: forked conversation {source}{at} as conversation {new} ({held})", file=sys.stderr)
    args.resume = new


async def _export(args: argparse.Namespace) -> int:
    """``wisp export ID [--format md|json] [-o FILE]``: the format defaults to
    the FILE's ending (``.json``: json), else md. A FILE whose directory does
    not exist is a usage error (a new user's ``-o /nonexistent/dir/x.json``
    made directories at / and wrote Markdown into it)."""
    from .conversations import export_format, export_target_problem, gather, to_json, to_markdown
    from .database import audit_dir_of, open_store
    from .paths import atomic_write_private

    if args.output is not None:
        try:
            args.output = args.output.expanduser()
        except RuntimeError:  # ~name of no user on this machine
            raise UsageError(f"-o {args.output}: no user's home is named so; give the file as a path, "
                             "or write to stdout (leave out -o)") from None
        if problem := export_target_problem(args.output):
            raise UsageError(f"-o {args.output}: {problem}, or write to stdout (leave out -o)")
    args.format = export_format(args.format, args.output)
    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        with _audit(config) as audit:
            data = await gather(store, audit, args.id)
    text = to_json(data) if args.format == "json" else to_markdown(data)
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    atomic_write_private(args.output, text.encode("utf-8"))
    print(f"wisp: wrote conversation {args.id} ({len(data['turns'])} turns) to {args.output}", file=sys.stderr)
    return EXIT_OK


async def _import(args: argparse.Namespace) -> int:
    """``wisp import FILE``: a JSON export restored as a new conversation."""
    from .conversations import load_export, restore
    from .database import audit_dir_of, open_store

    try:
        raw = Path(args.file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    data = load_export(raw.decode("utf-8", errors="replace"))
    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        with _audit(config) as audit:
            workdir = str(Path(args.workdir).resolve()) if args.workdir is not None else None
            new = await restore(store, audit, data, workdir=workdir,
                                origin={"file": str(Path(args.file).resolve()),
                                        "conversation": data["conversation"].get("id")})
    summary = {"conversation": new, "from": data["conversation"].get("id"), "turns": len(data["turns"]),
               "entries": len(data["entries"]), "facts": len(data.get("facts") or []),
               "summaries": len(data.get("summaries") or [])}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"Imported as conversation {new}: {summary['turns']} turns, {summary['entries']} entries, "
              f"{summary['facts']} fact versions, {summary['summaries']} summary versions. "
              f"`wisp --resume {new}` opens it.")
    return EXIT_OK


async def _conversations(args: argparse.Namespace) -> int:
    sub = getattr(args, "conversations_command", None)
    if sub == "search":
        return await _search(args)
    if sub == "rm":
        return await _rm(args)
    from .database import audit_dir_of, open_store

    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        rows = await store.list_conversations(limit=args.limit)
    if args.json:
        data = [_conv_dict(r) for r in rows]
        print(json.dumps({"total": len(data), "conversations": data}, ensure_ascii=False, indent=2))
        return EXIT_OK
    if not rows:
        print("No conversations yet. Start one with `wisp` or `wisp ask \"…\"`.")
        return EXIT_OK
    print(f"{'ID':>5}  {'UPDATED':<20} {'TURNS':>5}  TITLE")
    for r in rows:
        d = _conv_dict(r)
        print(f"{d['id']:>5}  {str(d.get('updated_at', ''))[:19]:<20} {d.get('turn_count', 0):>5}  "
              f"{d.get('title') or ''}")
    return EXIT_OK


async def _search(args: argparse.Namespace) -> int:
    """``wisp conversations search TEXT [--json]``: hits with their
    conversation, turn, date and a snippet, newest first (SQLite FTS5)."""
    from .database import audit_dir_of, open_store

    text = " ".join(args.text)
    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        hits = await store.search(text, limit=args.limit)
    if args.json:
        print(json.dumps({"query": text, "total": len(hits), "hits": [h.to_dict() for h in hits]},
                         ensure_ascii=False, indent=2))
        return EXIT_OK
    if not hits:
        print(f"Nothing holds {text!r}.")
        return EXIT_OK
    for h in hits:
        where = f"#{h.conversation_id} turn {h.turn}" if h.turn is not None else f"#{h.conversation_id}"
        old = " (earlier version)" if not h.current else ""
        title = f"  {h.title}" if h.title else ""
        print(f"{where:<16} {h.created_at[:16].replace('T', ' ')}  {h.kind}{old}{title}\n    {h.snippet}")
    return EXIT_OK


async def _rm(args: argparse.Namespace) -> int:
    """``wisp conversations rm ID --yes [--purge-audit]``: without --yes,
    only says what would go (exit 2)."""
    from .conversations import describe, remove
    from .database import audit_dir_of, open_store

    config = Config.load()
    async with await open_store(config.db_path, audit_dir_of(config)) as store:
        with _audit(config) as audit:
            if not args.yes:
                report = await describe(store, audit, args.id)
                print(f"wisp: conversation {args.id} has {report.turns} turns, {report.entries} entries, "
                      f"{report.facts} fact versions and {report.summaries} summary versions; "
                      f"add --yes to delete them (the audit log keeps its {report.audit_kept} events unless "
                      "--purge-audit)", file=sys.stderr)
                return EXIT_USAGE
            report = await remove(store, audit, args.id, purge_audit=args.purge_audit)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print(report.text())
    return EXIT_OK


def _conv_dict(row: Any) -> dict[str, Any]:
    return asdict(row) if is_dataclass(row) else dict(row)


async def _inspect(args: argparse.Namespace) -> int:
    """``wisp inspect context [--conversation ID] [--json]``: the next request
    of a stored conversation (the last one by default), layer by layer,
    composed without connecting: no request goes to the endpoint. Exit 0,
    or 2 for an unknown conversation or none stored, with one line on
    stderr (issue "Layered context")."""
    if getattr(args, "inspect_command", None) != "context":
        print("wisp: error: say what to inspect: wisp inspect context", file=sys.stderr)
        return EXIT_USAGE
    from .context.inspect import inspect_context
    from .session import Session

    options = SessionOptions(resume=args.conversation, continue_last=args.conversation is None,
                             continue_all=bool(getattr(args, "all", False)), transport="ask")
    try:
        session = await Session.open(options)
    except SessionError as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    async with session:
        if session.conversation_id is None:
            where = "" if getattr(args, "all", False) else f" in {session.workdir} (--all: anywhere)"
            print(f"wisp: error: no conversation is stored yet{where}; start one with `wisp` or `wisp ask`",
                  file=sys.stderr)
            return EXIT_USAGE
        if args.conversation is None:
            for note in session.startup_notes:
                print(f"wisp: {note}", file=sys.stderr)
        report = await inspect_context(session.context, session.conversation_id)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(report.to_text())
    return EXIT_OK


async def _compact(args: argparse.Namespace) -> int:
    """``wisp compact [--conversation ID] [--focus TEXT] [--dry-run] [--undo]
    [--json]``: what ``/compact`` does, from a shell. The preview asks the
    model for the summary it proposes (with no endpoint, wisp writes it
    alone and says so); without ``--dry-run`` it is applied. ``--json``
    prints ``{"dry_run", "preview", "applied"}``. Exit 0; 2 for bad usage,
    an unknown conversation or none stored, or a compaction that cannot be
    applied or undone (one line on stderr)."""
    from .context.compaction import CompactError, apply_compaction, preview_compaction, undo_compaction
    from .context.summary import turns_named
    from .session import Session

    if args.undo and (args.focus or args.dry_run):
        raise UsageError("--undo takes neither --focus nor --dry-run")
    options = SessionOptions(resume=args.conversation, continue_last=args.conversation is None, transport="ask")
    async with await Session.open(options) as session:
        conversation = session.conversation_id
        if conversation is None:
            raise UsageError("no conversation in this directory yet; name one with --conversation ID "
                             "(`wisp conversations` lists them), or start one with `wisp` or `wisp ask`")
        if args.undo:
            try:
                version, restored = await undo_compaction(session.context, conversation)
            except CompactError as exc:
                raise UsageError(str(exc)) from None
            if args.json:
                print(json.dumps({"undone": version.to_dict(),
                                  "restored": restored.version if restored else None}, ensure_ascii=False, indent=2))
            else:
                print(f"Version {version.version} restores "
                      + (f"version {restored.version}." if restored else "no summary: every turn is whole again."))
            return EXIT_OK
        if not await session.connect():
            print(f"wisp: no model endpoint ({session.endpoint_error}); wisp writes the summary alone",
                  file=sys.stderr)
        preview = await preview_compaction(session.context, conversation, args.focus or None)
        applied = None
        if not args.dry_run and preview.draft is not None:
            try:
                applied = await apply_compaction(session.context, preview)
            except CompactError as exc:
                raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({"dry_run": bool(args.dry_run), "preview": preview.to_dict(),
                          "applied": applied.to_dict() if applied else None}, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(preview.to_markdown())
    if applied is not None:
        print(f"\nApplied: running summary version {applied.version} covers {turns_named(applied.covers)}; "
              "`wisp compact --undo` restores the previous one.")
    elif args.dry_run and preview.draft is not None:
        print("\n(dry run: nothing applied)")
    return EXIT_OK


def _config(args: argparse.Namespace) -> int:
    config = Config.load()
    sub = args.config_command or "list"
    if sub == "list":
        items = config.items()
        if getattr(args, "json", False):
            print(json.dumps({k: v for k, v, _ in items}, indent=2))
        else:
            for key, value, is_default in items:
                print(f"{key} = {json.dumps(value)}{'' if not is_default else '  (default)'}")
    elif sub == "get":
        value = config.get(args.key)
        print(json.dumps(value) if args.json or not isinstance(value, str) else value)
    elif sub == "set":
        value = config.set(args.key, args.value)
        print(f"{args.key} = {json.dumps(value)}")
        if config.spec(args.key).applies:  # the same sentence as /config set, so the two agree
            print(config.spec(args.key).applies)
        _running_server_note(config, args.key)
    elif sub == "unset":
        config.unset(args.key)
        print(f"{args.key} = {json.dumps(config.get(args.key))}  (default)")
        _running_server_note(config, args.key)
    return EXIT_OK


def _running_server_note(config: Config, key: str) -> None:
    """After a setting the shared embedded server takes only when it starts: that a running one
    keeps its old value (threads, window, file) until it stops."""
    from .model.embedded import running_server_note

    note = running_server_note(key, config.get("model.embedded_idle_s"))
    if note:
        print(note)
