"""The parser of ``wisp inspect context [--conversation ID] [--json]``: the next request, in the shell.

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

__all__ = ["add_inspect_parser"]


def add_inspect_parser(sub: Any) -> None:
    """Add ``inspect`` (with its ``context`` subcommand) to the ``wisp`` subparsers."""
    ins = sub.add_parser("inspect", help="show what the next request would send, layer by layer (no model cost)")
    ins_sub = ins.add_subparsers(dest="inspect_command", metavar="context", parser_class=type(ins))
    ctx = ins_sub.add_parser("context", help="the layers of the next request and its exact messages")
    ctx.add_argument("--conversation", type=int, metavar="ID",
                     help="the conversation (default: the newest of this directory)")
    ctx.add_argument("--all", action="store_true", help="the newest conversation anywhere, not only here")
    ctx.add_argument("--json", action="store_true", help="print the report as JSON")
