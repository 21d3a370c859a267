"""The ``wisp`` console script: parse the command line in core, open the TUI here.

Keeping this entry point in ``wisp.tui`` lets ``wisp.core`` stay free of
Textual: core's :func:`wisp.core.cli.main` receives :func:`run_tui` as a callback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from wisp.core import collector

if TYPE_CHECKING:
    from wisp.core.session_options import SessionOptions


def exit_status(app: Any, returned: Any) -> int:
    """The exit status of a finished app: its return code when Textual set
    one (1 after a crash that ended it with a traceback), else what it
    returned, else 0. Never 0 after a traceback (issue 11, "Every path answers")."""
    code = getattr(app, "return_code", None)
    if code:
        return int(code)
    try:
        return int(returned or 0)
    except (TypeError, ValueError):
        return 1


def run_tui(options: SessionOptions) -> int:
    """Run the Textual app until the person quits; returns the exit status."""
    from .app import WispApp

    app = WispApp(options)
    returned = app.run()
    return exit_status(app, returned)


def main() -> None:
    """Console-script entry point. The garbage collector is held while wisp
    starts and frozen before it exits (:mod:`wisp.core.collector`)."""
    collector.hold()  # before the imports: startup makes no garbage worth a collection
    try:
        from wisp.core.cli import main as cli_main

        status = cli_main(sys.argv[1:], run_tui=run_tui)
    finally:
        collector.started()  # a command that never said it started: the collector is back on for its cleanup
    collector.before_exit()
    sys.exit(status)
