"""Paint first, then open (issue 12): what `wisp` loads before its first frame.

The command line is parsed and checked, and the TUI's app module imported,
in a fresh interpreter; none of the parts the session builds after the
first paint may be loaded by then: HTTP, the database driver, the MCP SDK,
the model layer, the commands, the tools that act, the output readers, the
memory tool, the agent, the evaluation. The commands whose modules are slow
to import (``mcp``, ``eval``) still parse and show in ``--help``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Loaded only after the first frame (or on first use).
LATE = ("httpx", "aiosqlite", "mcp", "wisp.core.session", "wisp.core.model", "wisp.core.commands",
        "wisp.core.agent", "wisp.core.outputs", "wisp.core.memory", "wisp.core.mcp", "wisp.core.eval",
        "wisp.core.tools.run_command", "wisp.core.tools.registry", "wisp.core.store",
        "wisp.core.context.manager", "wisp.core.context.composer", "wisp.core.episodes.refine")

PROBE = """
import json, sys
from wisp.core.cli import main

def probe(options):
    import wisp.tui.app  # the module the first frame is drawn from
    print(json.dumps(sorted(sys.modules)))
    return 0

sys.exit(main(sys.argv[1:], run_tui=probe))
"""


def loaded_before_first_frame(home: Path, *argv: str) -> set[str]:
    env = {**os.environ, "WISP_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env,
                         timeout=120, cwd=home)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_first_frame_loads_none_of_what_the_session_builds(wisp_home: Path) -> None:
    loaded = loaded_before_first_frame(wisp_home)
    assert "wisp.tui.app" in loaded and "textual.app" in loaded
    early = sorted(m for m in loaded if any(m == late or m.startswith(late + ".") for late in LATE))
    assert early == [], f"loaded before the first frame: {early}"


def test_the_late_commands_still_parse_and_show_in_help() -> None:
    from wisp.core.cli import build_parser

    assert build_parser(["eval", "--list"]).parse_args(["eval", "--list"]).list is True
    args = build_parser(["mcp", "list", "--json"]).parse_args(["mcp", "list", "--json"])
    assert args.mcp_command == "list" and args.json is True
    helped = build_parser(["--help"]).format_help()
    assert "mcp" in helped and "eval" in helped
    stubbed = build_parser([]).format_help()  # the stubs carry the same one-line help
    for line in ("MCP servers: list them", "measure whether wisp's context"):
        assert line in helped and line in stubbed
