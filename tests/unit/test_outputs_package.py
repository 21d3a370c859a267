"""wisp.core.outputs is a leaf (issue 9, "One home for output knowledge"): it reads text and
imports nothing of wisp's but the token estimates, so every feature can use it and none is
pulled in with it; and its old homes are gone."""

from __future__ import annotations

import ast
from pathlib import Path

import wisp.core.outputs as outputs

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "core" / "outputs"
#: What wisp.core.outputs may import from wisp itself.
ALLOWED = {"wisp.core.tokens"}


def _imports(path: Path) -> set[str]:
    """The absolute names a module imports (relative imports resolved against wisp.core.outputs)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["wisp", "core", "outputs"][: 3 - (node.level - 1)]
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
    return out


def test_the_package_is_a_leaf() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 15
    for path in modules:
        wisp_imports = {m for m in _imports(path) if m.startswith(("wisp", "core", "tui"))}
        foreign = {m for m in wisp_imports if not m.startswith("wisp.core.outputs") and m not in ALLOWED}
        assert not foreign, f"{path.name} imports {sorted(foreign)}"


def test_the_leaf_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The check above can fail: a module importing the context package is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from ..context.digest import exit_status_of\nimport wisp.core.memory\n")
    assert _imports(bad) >= {"wisp.core.context.digest", "wisp.core.memory"}


def test_the_old_homes_are_gone() -> None:
    assert not (ROOT / "core" / "tools" / "test_results.py").exists()
    assert not (ROOT / "core" / "context" / "testruns.py").exists()
    assert not (ROOT / "core" / "memory" / "readers").exists()
    for path in (ROOT / "core").rglob("*.py"):
        text = path.read_text()
        for old in ("test_results import", "testruns import", "readers import", ".readers.doc"):
            assert old not in text, f"{path.relative_to(ROOT)} still imports {old!r}"


def test_the_public_api() -> None:
    for name in ("TestRun", "TestOutputParser", "read_test_run", "framework_for_command", "fact_name_for_command",
                 "looks_like_test_command", "summarise", "analyse", "Summary", "Analysis", "split_stored_lines",
                 "exit_status_of"):
        assert name in outputs.__all__ and getattr(outputs, name).__doc__, name
