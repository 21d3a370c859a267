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


def test_after_preload_building_imports_nothing_new() -> None:
    code = ("import sys; from wisp.core.session import preload, SESSION_PARTS; preload(); "
            "missing = [p for p in SESSION_PARTS if 'wisp.core.' + p not in sys.modules]; print(missing)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
