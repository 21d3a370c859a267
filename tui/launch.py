"""The ``wisp`` console script: parse the command line in core, open the TUI here.

Keeping this entry point in ``wisp.tui`` lets ``wisp.core`` stay free of
Textual: core's :func:`wisp.core.cli.main` receives :func:`run_tui` as a callback.
"""

from __future__ import annotations

import sys

from wisp.core.cli import main as cli_main
from wisp.core.session import SessionOptions


def run_tui(options: SessionOptions) -> int:
    """Run the Textual app until the person quits; returns the exit code."""
    from .app import WispApp

    app = WispApp(options)
    code = app.run()
    return int(code or 0)


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli_main(sys.argv[1:], run_tui=run_tui))
