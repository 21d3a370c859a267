"""``wisp memory``: list, search, show, forget, status, refine and serve.

Registered on wisp's parser by :func:`add_memory_parser` and run by
:func:`run_memory` (both called from :mod:`wisp.core.cli`). Exit codes as
the rest of wisp (issue "wisp runs end to end", "Headless"): 0 done; 2 bad
usage, an unknown memory, or ``forget`` without ``--yes``; 3 an endpoint
error during ``refine``.

Behaviour: issue "Episodic memory across conversations", "Commands"; the
reference ``enso-episodic-memory.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

from .dates import DateError, format_local, memory_timezone, zone_name
from .ids import MemoryIdError, format_memory_id, parse_memory_id
from .query import DEFAULT_LIMIT, MAX_LIMIT, WORKSPACE_ENV, QueryError, make_filter, preview

__all__ = ["add_memory_parser", "run_memory"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ENDPOINT = 3


def _filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters")
    ws = g.add_mutually_exclusive_group()
    ws.add_argument("--workspace", metavar="NAME",
                    help=f"only this workspace (default: ${WORKSPACE_ENV}, else every workspace)")
    ws.add_argument("--all-workspaces", action="store_true", help=f"every workspace, whatever ${WORKSPACE_ENV} says")
    g.add_argument("--transport", metavar="NAME", help="only this transport: tui, ask or mcp")
    g.add_argument("--channel", metavar="ID", help="only this channel (exact id; for tui and ask, the conversation id)")
    g.add_argument("--since", metavar="WHEN", help="events from WHEN on (included): today, yesterday, week, month, "
                   "7d, 24h, 2025-03-30, or 2025-03-30T14:00:00+01:00")
    g.add_argument("--until", metavar="WHEN", help="events before WHEN (excluded); same forms as --since")
    g.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"at most N results (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})")
    g.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N results")
    p.add_argument("--json", action="store_true", help="JSON, with the total number of matches")


def add_memory_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``memory`` and its subcommands to wisp's subparsers ``sub``."""
    mem = sub.add_parser(
        "memory", help="episodic memory across conversations: list, search, show, forget, status, refine, serve",
        description="Episodic memory: dated accounts of what happened in earlier conversations. "
                    "Results are newest event first; dates use config memory.timezone.")
    msub = mem.add_subparsers(dest="memory_command", metavar="list|search|show|forget|status|refine|serve",
                              parser_class=type(mem))
    lst = msub.add_parser("list", help="list memories, newest event first")
    _filters(lst)
    se = msub.add_parser("search", help="search the summaries (SQLite FTS5; every word must match)")
    se.add_argument("text", help='the words to find, such as "website launch"')
    _filters(se)
    sh = msub.add_parser("show", help="one memory in full, with its event and recording times")
    sh.add_argument("id", help="the memory, such as MEM-000001")
    sh.add_argument("--sources", action="store_true", help="add the source exchanges, whole")
    sh.add_argument("--json", action="store_true")
    fo = msub.add_parser("forget", help="delete a memory, its source exchanges, and every memory they connect")
    fo.add_argument("id", help="the memory, such as MEM-000001")
    fo.add_argument("--yes", action="store_true", help="really delete everything in scope (without it, "
                    "forget only prints the scope)")
    fo.add_argument("--json", action="store_true")
    st = msub.add_parser("status", help="counts, the last refinement run, and the settings")
    st.add_argument("--json", action="store_true")
    rf = msub.add_parser("refine", help="refine new exchanges into memories once (for cron)")
    rf.add_argument("--json", action="store_true")
    sv = msub.add_parser("serve", help="a read-only web viewer on 127.0.0.1")
    sv.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 picks a free one)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="the address (loopback only, unless config memory.serve_allow_non_loopback is on)")
    return mem


def run_memory(args: argparse.Namespace, side_call_for: Callable[[Any, Any], Any],
               open_store: Callable[[Any], Awaitable[Any]]) -> int:
    """Run ``wisp memory …``; returns the exit code. ``side_call_for(config, store)``
    makes the :class:`~wisp.core.sidecall.SideCall` that ``wisp memory
    refine`` asks the model through (it connects on first use; its
    ``aclose()`` is awaited at the end); ``open_store(path)`` opens the
    database with every table (:func:`wisp.core.database.open_store`).
    Config and store problems propagate to :func:`wisp.core.cli.main`; the
    rest is handled here."""
    from ..config import Config

    cmd = getattr(args, "memory_command", None) or "list"
    if cmd == "list" and not hasattr(args, "limit"):  # bare `wisp memory`
        args = argparse.Namespace(**{**vars(args), "workspace": None, "all_workspaces": False, "transport": None,
                                     "channel": None, "since": None, "until": None, "limit": DEFAULT_LIMIT,
                                     "offset": 0, "json": False})
    config = Config.load()
    try:
        if cmd == "serve":
            from .viewer import serve

            return serve(config, open_store, host=args.host, port=args.port)
        return asyncio.run(_run(cmd, args, config, side_call_for, open_store))
    except (DateError, QueryError, MemoryIdError) as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def _run(cmd: str, args: argparse.Namespace, config: Any, side_call_for: Callable[[Any, Any], Any],
               open_store: Callable[[Any], Awaitable[Any]]) -> int:
    tz = memory_timezone(config)
    async with await open_store(config.db_path) as store:
        if cmd in ("list", "search"):
            return await _list(store, args, tz, text=args.text if cmd == "search" else None)
        if cmd == "show":
            return await _show(store, args, tz)
        if cmd == "forget":
            return await _forget(store, args, tz)
        if cmd == "status":
            return await _status(store, args, config, tz)
        if cmd == "refine":
            return await _refine(store, args, config, side_call_for)
    raise QueryError(f"unknown memory command {cmd!r}")


def _out(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


async def _list(store: Any, args: argparse.Namespace, tz: Any, text: str | None) -> int:
    from .query import find_memories
    from .render import list_text, page_dict

    f = make_filter(tz, workspace=args.workspace, all_workspaces=args.all_workspaces, transport=args.transport,
                    channel=args.channel, since=args.since, until=args.until, text=text, limit=args.limit,
                    offset=args.offset)
    page = await find_memories(store.db, f)
    if args.json:
        _out(page_dict(page, tz))
    else:
        print(list_text(page, tz))
    return EXIT_OK


async def _not_found(store: Any, number: int) -> int:
    from .query import number_range

    span = await number_range(store.db)
    there = (f"the memories stored run from {format_memory_id(span[0])} to {format_memory_id(span[1])}"
             if span else "there are no memories yet")
    print(f"wisp: error: no memory {format_memory_id(number)} (never made, or forgotten); {there}; "
          "`wisp memory list` shows them", file=sys.stderr)
    return EXIT_USAGE


async def _show(store: Any, args: argparse.Namespace, tz: Any) -> int:
    from .query import get_memory, memory_sources
    from .render import exchange_dict, memory_dict, show_text

    number = parse_memory_id(args.id)
    m = await get_memory(store.db, number)
    if m is None:
        return await _not_found(store, number)
    sources = await memory_sources(store.db, number) if args.sources else None
    if args.json:
        data = memory_dict(m, tz, full=True)
        data["timezone"] = zone_name(tz)
        if sources is not None:
            data["source_exchanges"] = [exchange_dict(x, tz) for x in sources]
        _out(data)
    else:
        print(show_text(m, tz, sources))
    return EXIT_OK


async def _forget(store: Any, args: argparse.Namespace, tz: Any) -> int:
    from .forget import forget, forget_scope

    number = parse_memory_id(args.id)
    ref = format_memory_id(number)
    scope = await (forget(store, number) if args.yes else forget_scope(store.db, number))
    if scope is None:
        return await _not_found(store, number)
    if args.json:
        _out({"id": ref, "deleted": bool(args.yes), "memories": scope.refs,
              "exchanges": [x.id for x in scope.exchanges]})
        if not args.yes:
            print(f"wisp: error: nothing deleted; add --yes to delete all of it", file=sys.stderr)
        return EXIT_OK if args.yes else EXIT_USAGE
    n_m, n_x = len(scope.memories), len(scope.exchanges)
    what = (f"{n_m} memor{'y' if n_m == 1 else 'ies'} and {n_x} source exchange{'s' if n_x != 1 else ''}")
    head = (f"Forgot {ref}: deleted {what}:" if args.yes else
            f"Forgetting {ref} would permanently delete {what}"
            + (" (memories connected through shared source exchanges go too)" if n_m > 1 else "") + ":")
    lines = [head]
    for m in scope.memories:
        lines.append(f"  {m.ref}  {format_local(m.event_at, tz, weekday=True)}  "
                     f"{m.workspace} · {m.transport} · channel {m.channel}  {m.preview(90)}")
    for x in scope.exchanges:
        lines.append(f"  exchange {x.id}  {format_local(x.requested_at, tz, weekday=True)}  "
                     f"{x.workspace} · {x.transport} · channel {x.channel}  {preview(x.request, 90)}")
    if args.yes:
        lines.append("The conversation's own record (its entries and the audit log) is kept; "
                     "provider logs and backups are not touched.")
        print("\n".join(lines))
        return EXIT_OK
    print("\n".join(lines))
    print(f"wisp: error: nothing deleted; run `wisp memory forget {ref} --yes` to delete all of it",
          file=sys.stderr)
    return EXIT_USAGE


async def _status(store: Any, args: argparse.Namespace, config: Any, tz: Any) -> int:
    from .capture import memory_enabled, workspace_for
    from .refine import REFINE_INTERVAL_S, read_status

    s = await read_status(store.db)
    here = workspace_for(Path.cwd(), config)
    settings = {
        "memory.enabled": memory_enabled(config),
        "memory.timezone": config.get("memory.timezone"),
        "memory.workspace": config.get("memory.workspace"),
        "memory.serve_allow_non_loopback": config.get("memory.serve_allow_non_loopback"),
    }
    env_ws = (os.environ.get(WORKSPACE_ENV) or "").strip() or None
    if args.json:
        _out({**s, "settings": settings, "timezone": zone_name(tz), "workspace_here": here,
              "workspace_filter": env_ws, "refine_interval_s": REFINE_INTERVAL_S, "database": str(store.path)})
        return EXIT_OK
    job = s["last_job"]
    if job:
        span = format_local(job["started_at"], tz, seconds=True, weekday=True)
        if job["ended_at"]:
            span += f" → {format_local(job['ended_at'], tz, seconds=True).split(' ', 1)[1]}"
        job_line = (f"run {job['id']} ({job['trigger']}), {span}: {job['outcome']} — {job['batches']} "
                    f"batch{'es' if job['batches'] != 1 else ''} recorded, {job['failed_batches']} failed, "
                    f"{job['exchanges']} exchanges → {job['memories']} memories, {job['model_calls']} model calls")
        if job["error"]:
            job_line += f"\n                 error: {job['error']}"
    else:
        job_line = "never run"
    last = f" (last recorded {format_local(s['last_recorded'], tz, weekday=True)})" if s["last_recorded"] else ""
    tz_set = settings["memory.timezone"]
    lines = [
        f"Memory:          {'enabled' if settings['memory.enabled'] else 'disabled: nothing is captured or refined; reads work'}",
        f"Memories:        {s['memories']}{last}",
        f"Exchanges:       {s['exchanges']} captured; {s['awaiting']} awaiting refinement"
        + (f" ({s['retrying']} after a failed attempt)" if s["retrying"] else "")
        + f", {s['in_progress']} being refined now, {s['pending']} in a turn still running",
        f"Last refinement: {job_line}",
        f"Fell back:       {_fallback_line(s)}",
        f"Next reference:  {format_memory_id(s['next_number'])}",
        "Settings:",
        f"  memory.enabled = {'true' if settings['memory.enabled'] else 'false'}",
        f"  memory.timezone = {tz_set if tz_set else 'unset: the machine’s, ' + zone_name(tz)}",
        f"  memory.workspace = {settings['memory.workspace'] or 'unset: the project of the working directory'}"
        f" (here: {here})",
        f"  memory.serve_allow_non_loopback = {'true' if settings['memory.serve_allow_non_loopback'] else 'false'}",
        f"  {WORKSPACE_ENV} = {env_ws or 'unset: list and search include every workspace'}",
        f"  refinement: every {REFINE_INTERVAL_S // 60} minutes while the TUI runs; "
        "`wisp memory refine` runs it once (for cron)",
        f"  database: {store.path}",
    ]
    print("\n".join(lines))
    return EXIT_OK


def _fallback_line(s: dict[str, Any]) -> str:
    """How many batches fell back, and how (issue "Compaction you can see and trust")."""
    f = s.get("fallbacks") or {}
    total = int(s.get("fell_back") or 0)
    if not total:
        return "no batch (every answer was in the format asked for)"
    parts = []
    if f.get("unstructured"):
        parts.append(f"{f['unstructured']} kept the model's answer as it came (unstructured)")
    if f.get("retried"):
        parts.append(f"{f['retried']} kept something once asked again, more strictly")
    if f.get("retried-nothing"):
        parts.append(f"{f['retried-nothing']} still kept nothing after the stricter retry")
    if f.get("stated"):
        parts.append(f"{f['stated']} kept what the person stated, in their words (the model kept nothing twice)")
    if f.get("stated-beside"):
        parts.append(f"{f['stated-beside']} kept what the person stated beside the model's memories, which did not name it")
    return f"{total} batch{'es' if total != 1 else ''}: " + "; ".join(parts)


async def _refine(store: Any, args: argparse.Namespace, config: Any,
                  side_call_for: Callable[[Any, Any], Any]) -> int:
    from .refine import refine_with

    side_call = side_call_for(config, store)
    try:
        report = await refine_with(store, config, side_call, trigger="cli")
    finally:
        close = getattr(side_call, "aclose", None)
        if close is not None:
            await close()
    if args.json:
        _out(report.to_dict())
    elif report.outcome == "disabled":
        print("Memory is disabled (memory.enabled = false): nothing refined. "
              "`wisp config set memory.enabled true` turns it on.")
    elif report.outcome == "nothing new":
        print("Nothing new to refine; no model call made.")
    else:
        made = ", ".join(report.memories) if report.memories else "none"
        if report.batches:
            print(f"Refined {report.batches} batch{'es' if report.batches != 1 else ''} "
                  f"({report.exchanges} exchange{'s' if report.exchanges != 1 else ''}) with "
                  f"{report.model or 'the model'}: {len(report.memories)} new "
                  f"memor{'y' if len(report.memories) == 1 else 'ies'} ({made}).")
        if report.failed_batches or not report.batches:
            print(f"Refinement failed for {report.failed_batches or 'every'} "
                  f"batch{'es' if report.failed_batches != 1 else ''}; those exchanges wait for the next run "
                  "(`wisp memory status` shows them).")
        for err in report.errors:
            print(f"wisp: error: {err}", file=sys.stderr)
    return EXIT_ENDPOINT if report.outcome in ("failed", "partly failed") else EXIT_OK
