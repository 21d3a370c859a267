"""The parsers of ``wisp inspect context`` and ``wisp compact``: the layered context, in the shell.

``wisp inspect context [--conversation ID] [--json]``: the next request.

Issue "Layered context": prints what ``/inspect context`` shows (one row per
layer with tokens, share of the window, items and a hint; the tokens left;
the exact messages of the next request), for a stored conversation (the
last one by default). It opens the session without connecting: no request
goes to the endpoint. The window is config ``model.context_window``, else
the last window seen for the conversation's model, else the default; the
report says which.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_inspect_parser", "add_compact_parser"]


def add_inspect_parser(sub: Any) -> None:
    """Add ``inspect`` (with its ``context`` subcommand) to the ``wisp`` subparsers."""
    ins = sub.add_parser("inspect", help="show what the next request would send, layer by layer (no model cost)")
    ins_sub = ins.add_subparsers(dest="inspect_command", metavar="context", parser_class=type(ins))
    ctx = ins_sub.add_parser("context", help="the layers of the next request and its exact messages")
    ctx.add_argument("--conversation", type=int, metavar="ID",
                     help="the conversation (default: the newest of this directory)")
    ctx.add_argument("--all", action="store_true", help="the newest conversation anywhere, not only here")
    ctx.add_argument("--json", action="store_true", help="print the report as JSON")


def add_compact_parser(sub: Any) -> None:
    """Add ``compact`` to the ``wisp`` subparsers (issue "Compaction you can
    see and trust"): ``wisp compact [--conversation ID] [--focus TEXT]
    [--dry-run] [--json]`` previews the running summary the model would
    write of the older turns and, without ``--dry-run``, applies it (as
    ``/compact`` and Enter do); ``--undo`` restores the previous version."""
    cmp = sub.add_parser("compact", help="summarise the older turns now, showing what leaves the window first")
    cmp.add_argument("--conversation", type=int, metavar="ID",
                     help="the conversation (default: the newest of this directory)")
    cmp.add_argument("--focus", metavar="TEXT", help="what the summary should keep in detail")
    cmp.add_argument("--dry-run", action="store_true", help="show the preview only; change nothing")
    cmp.add_argument("--undo", action="store_true", help="restore the previous summary version instead")
    cmp.add_argument("--json", action="store_true", help="print the preview (and what was applied) as JSON")
