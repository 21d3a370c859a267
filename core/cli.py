"""Argument parsing for ``wisp`` and its subcommands, and the headless commands.

``wisp`` alone opens the TUI (through the ``run_tui`` callback that
:mod:`wisp.tui.launch` passes in, so core never imports Textual).
``wisp ask``, ``wisp conversations`` and ``wisp config`` run here.

Exit codes (issue "wisp runs end to end", "Headless"): 0 done; 2 bad usage
(including a bad config); 3 endpoint error, with one line on stderr and no
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__
from . import events as ev
from .config import Config, ConfigError
from .session import Session, SessionError, SessionOptions

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ENDPOINT = 3


class UsageError(Exception):
    """Bad usage: exit 2 with the message on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as argparse does, minus the usage dump
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"wisp: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser for ``wisp [options] [COMMAND ...]``."""
    p = _Parser(prog="wisp", description="A terminal chat client for local language models "
                "that shows you everything the model is given.")
    p.add_argument("--version", action="version", version=f"wisp {__version__}")
    _session_flags(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ask = sub.add_parser("ask", help="run one turn and stream the reply to stdout")
    ask.add_argument("prompt", help="the prompt; - reads it from stdin")
    ask.add_argument("--json", action="store_true", help="print one JSON event a line")
    _session_flags(ask)

    conv = sub.add_parser("conversations", help="list stored conversations")
    conv.add_argument("--json", action="store_true")
    conv.add_argument("--limit", type=int, default=50)

    cfg = sub.add_parser("config", help="show or change settings in ~/.wisp/config.json")
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
    return p


def _session_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--continue", dest="continue_last", action="store_true",
                   default=argparse.SUPPRESS, help="reopen the last conversation")
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
        resume=getattr(args, "resume", None),
        tools=getattr(args, "tools", None),
        transport=transport,
    )


def main(argv: Sequence[str] | None = None,
         run_tui: Callable[[SessionOptions], int] | None = None) -> int:
    """Run ``wisp`` with ``argv``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command is None:
            if run_tui is None:
                raise UsageError("the TUI is not available here; use `wisp ask`")
            Config.load()  # a malformed config stops here, with its line and column
            return run_tui(session_options(args, "tui"))
        if args.command == "ask":
            return asyncio.run(_ask(args))
        if args.command == "conversations":
            return asyncio.run(_conversations(args))
        if args.command == "config":
            return _config(args)
    except (ConfigError, UsageError, SessionError) as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


async def _ask(args: argparse.Namespace) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    out = sys.stdout
    async with await Session.open(session_options(args, "ask")) as session:
        if not await session.connect():
            print(f"wisp: error: {session.endpoint_error}", file=sys.stderr)
            return EXIT_ENDPOINT
        code = EXIT_OK
        wrote_text = False
        async for item in session.run_turn(prompt):
            if args.json:
                out.write(json.dumps(ev.event_to_dict(item), ensure_ascii=False) + "\n")
                out.flush()
                if isinstance(item, ev.Error):
                    code = EXIT_ENDPOINT
                continue
            if isinstance(item, ev.TextDelta):
                out.write(item.text)
                out.flush()
                wrote_text = True
            elif isinstance(item, ev.ToolCall):
                print(f"[{item.name} {json.dumps(item.arguments, ensure_ascii=False)}]", file=sys.stderr)
            elif isinstance(item, ev.Notice):
                print(f"wisp: {item.text}", file=sys.stderr)
            elif isinstance(item, ev.Error):
                if wrote_text:
                    out.write("\n")
                    out.flush()
                print(f"wisp: error: {item.message}", file=sys.stderr)
                code = EXIT_ENDPOINT
            elif isinstance(item, ev.TurnEnded) and item.state != "error":
                if wrote_text:
                    out.write("\n")
                    out.flush()
                if item.state == "cut":
                    print("wisp: the reply was cut at the output limit", file=sys.stderr)
        return code


async def _conversations(args: argparse.Namespace) -> int:
    config = Config.load()
    from .store import Store

    async with await Store.open(config.db_path) as store:
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


def _conv_dict(row: Any) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    return asdict(row) if is_dataclass(row) else dict(row)


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
    elif sub == "unset":
        config.unset(args.key)
        print(f"{args.key} = {json.dumps(config.get(args.key))}  (default)")
    return EXIT_OK
