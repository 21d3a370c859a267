"""The package layout of DESIGN.md: folders mapped to wisp.core, wisp.tui, wisp.themes."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """A non-editable install only ships listed packages, so a new folder must be listed."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(meta["tool"]["setuptools"]["packages"])
    mapping = meta["tool"]["setuptools"]["package-dir"]
    found = set()
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    assert found == listed


def test_core_never_imports_textual() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "core").rglob("*.py")
                 if "import textual" in p.read_text() or "from textual" in p.read_text()]
    assert offenders == []


def test_tui_has_no_sql_and_no_http() -> None:
    for p in (ROOT / "tui").rglob("*.py"):
        text = p.read_text()
        for word in ("import httpx", "import sqlite3", "import aiosqlite", "SELECT ", "INSERT "):
            assert word not in text, f"{p.name} has {word!r}"


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    marker = readme.index("<!-- test-command -->")
    command = next(line for line in readme[marker:marker + 4] if line.startswith("python3"))
    assert "pytest" in command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci, "the README's test command must stand word for word in .ci/run"
