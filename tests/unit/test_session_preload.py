"""The TUI imports the session's parts in a thread before it builds the session (issue 12, "Paint
first, then open"): :data:`wisp.core.session.SESSION_PARTS` must name every module
:class:`Session` imports when it is built, or building would again hold the event loop."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

from wisp.core import session


def test_session_parts_name_every_module_the_session_imports_when_built() -> None:
    tree = ast.parse(inspect.getsource(session.Session.__init__).strip().replace("\n    ", "\n"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}
    assert imported and imported <= set(session.SESSION_PARTS), sorted(imported - set(session.SESSION_PARTS))


def test_after_preload_building_imports_nothing_new(tmp_path) -> None:
    """Build a real session (``Session.__init__``, through ``Session.open``) in a fresh
    interpreter after :func:`preload`, and list the modules of wisp that building imported: none.
    A part missing from SESSION_PARTS shows up here by name."""
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from wisp.core.session import Session, SessionOptions, preload\n"
        "preload()\n"
        "new = []\n"
        "init = Session.__init__\n"
        "def watched(self, *a, **k):\n"
        "    before = set(sys.modules)\n"
        "    init(self, *a, **k)\n"
        "    new.extend(sorted(m for m in set(sys.modules) - before if m.startswith('wisp.')))\n"
        "Session.__init__ = watched\n"
        "async def main():\n"
        "    s = await Session.open(SessionOptions(workdir=Path(sys.argv[1])))\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
        "print(new)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
