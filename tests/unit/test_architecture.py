"""The structure, read from the imports with ``ast`` (issue "One core, built once").

Fails on an import cycle (between modules, and between core's parts), on
``core`` importing Textual or the TUI, on any arrow DESIGN.md forbids
("Arrows that never exist"), and on a part importing one above it in the
layers below. Every import counts, at module level or inside a function.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.home import ROOT

PACKAGES = {"wisp.core": ROOT / "core", "wisp.tui": ROOT / "tui", "wisp.themes": ROOT / "themes"}

#: DESIGN.md, "Arrows that never exist", written out: (importer part, imported part).
FORBIDDEN = [
    *[(a, "model") for a in ("context", "memory", "episodes")],   # composing is pure; side calls are handed in
    *[(a, b) for a in ("store", "audit") for b in ("model", "context", "memory", "episodes")],  # storage knows no feature
    ("model", "store"), ("model", "audit"),                       # the endpoint client knows no database
]

#: core's parts from the bottom up; a part may import only parts on its own level or below.
LAYERS = [
    {"tokens", "sidecall", "events", "paths", "transactions", "migrations", "command_base", "tool_names", "timezones", "clock",
     "text", "mcp_config", "processes", "statements", "collector", "redact", "messages"},
    {"audit", "store", "streamed", "outputs"},
    {"config"},
    {"model", "context", "episodes"},
    {"memory"},
    {"tools", "agents_md", "session_options"},
    {"toolset", "agent", "transcript", "conversations", "mcp"},
    {"database", "commands", "chat_commands"},
    {"session"},
    {"eval"},
    {"cli"},
]


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[str]:
    """What module ``name`` imports (whole dotted names of wisp modules, and other top-level names)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append(sub if sub in MODULES else target)
    return found


def _resolve(target: str) -> str | None:
    while target and target not in MODULES:
        if "." not in target:
            return None
        target = target.rsplit(".", 1)[0]
    return target or None


GRAPH: dict[str, set[str]] = defaultdict(set)
EXTERNAL: dict[str, set[str]] = defaultdict(set)
for _name, _path in MODULES.items():
    for _target in _imports(_name, _path):
        _resolved = _resolve(_target) if _target.startswith("wisp") else None
        if _resolved and _resolved != _name:
            GRAPH[_name].add(_resolved)
        elif not _target.startswith("wisp"):
            EXTERNAL[_name].add(_target.split(".")[0])


def part(module: str) -> str:
    """``wisp.core.context.manager`` → ``context``; ``wisp.core.session`` → ``session``."""
    bits = module.split(".")
    return bits[2] if len(bits) > 2 and bits[1] == "core" else bits[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read() -> None:
    # the test must be able to fail: it sees the imports it is about
    assert "wisp.core.model.base" in GRAPH["wisp.core.agent"]
    assert "wisp.core.session" in GRAPH["wisp.core.cli"]
    assert "textual" in EXTERNAL["wisp.tui.app"]


def test_no_module_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_no_cycle_between_core_parts() -> None:
    parts: dict[str, set[str]] = defaultdict(set)
    for a, targets in GRAPH.items():
        if a.startswith("wisp.core."):
            for b in targets:
                if b.startswith("wisp.core.") and part(a) != part(b):
                    parts[part(a)].add(part(b))
    assert _cycles(parts) == []


def test_core_imports_neither_textual_nor_the_tui() -> None:
    bad = sorted((a, b) for a, bs in GRAPH.items() if a.startswith("wisp.core") for b in bs if b.startswith("wisp.tui"))
    bad += sorted((a, b) for a, bs in EXTERNAL.items() if a.startswith("wisp.core") for b in bs if b == "textual")
    assert bad == []


def test_the_tui_holds_no_sql_and_no_http() -> None:
    bad = sorted((a, b) for a, bs in EXTERNAL.items() if a.startswith("wisp.tui")
                 for b in bs if b in ("sqlite3", "aiosqlite", "httpx", "http", "urllib", "socket"))
    bad += sorted((a, b) for a, bs in GRAPH.items() if a.startswith("wisp.tui")
                  for b in bs if part(b) in ("store", "model", "database", "migrations"))
    assert bad == []


#: What the TUI reaches only through the session's facade (DESIGN.md: "no tui/ module reads the
#: store, the audit log or the context directly").
PAST_THE_SESSION = ("store", "audit", "context")


def reaches_past_the_session(source: str) -> list[tuple[int, str]]:
    """Where ``source`` (a module's text) touches an attribute named in
    :data:`PAST_THE_SESSION` (``s.store``, ``self.session.context``, a
    ``getattr(x, "audit")``): ``(line, name)`` pairs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.lstrip("_") in PAST_THE_SESSION:
            found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and str(node.args[1].value).lstrip("_") in PAST_THE_SESSION):
            found.append((node.lineno, str(node.args[1].value)))
    return found


def test_the_tui_reaches_the_core_through_the_session_only() -> None:
    bad = [(name, where) for name, path in MODULES.items() if name.startswith("wisp.tui")
           for where in reaches_past_the_session(path.read_text())]
    assert bad == [], "add what the screen needs to the session (core/session.py) or its Transcript"


def test_the_session_check_sees_a_reach_past_it() -> None:
    assert reaches_past_the_session("async def f(s):\n    await s.store.count_turns(1)\n") == [(2, "store")]
    assert reaches_past_the_session("def f(app):\n    app.session.context.x()\n") == [(2, "context")]
    assert reaches_past_the_session("def f(s):\n    return getattr(s, '_audit')\n") == [(2, "_audit")]
    assert reaches_past_the_session("def f(s):\n    return s.transcript.count(1)\n") == []


@pytest.mark.parametrize("importer,imported", FORBIDDEN)
def test_no_forbidden_arrow(importer: str, imported: str) -> None:
    bad = sorted((a, b) for a, bs in GRAPH.items() if a.startswith("wisp.core.") and part(a) == importer
                 for b in bs if b.startswith("wisp.core.") and part(b) == imported)
    assert bad == [], f"DESIGN.md forbids {importer} → {imported}"


def test_every_core_part_has_a_layer() -> None:
    known = set().union(*LAYERS)
    parts = {part(m) for m in MODULES if m.startswith("wisp.core.")}
    assert parts - known == set(), "put the new part in LAYERS"


def test_no_import_runs_upward() -> None:
    level = {p: i for i, layer in enumerate(LAYERS) for p in layer}
    bad = sorted((a, b) for a, bs in GRAPH.items() if a.startswith("wisp.core.")
                 for b in bs if b.startswith("wisp.core.") and part(a) != part(b)
                 and level.get(part(b), 0) > level.get(part(a), 0))
    assert bad == []


def test_the_checks_catch_a_forbidden_arrow() -> None:
    """Break the rule on purpose in a copy of the graph: the check must see it."""
    graph: dict[str, set[str]] = defaultdict(set, {k: set(v) for k, v in GRAPH.items()})
    graph["wisp.core.context.composer"].add("wisp.core.model.base")
    bad = [(a, b) for a, bs in graph.items() if part(a) == "context" for b in bs if part(b) == "model"]
    assert bad
    graph["wisp.core.model.base"].add("wisp.core.agent")
    assert _cycles(graph)


# --- each table has one owner ------------------------------------------------------------------------

_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?: IF NOT EXISTS)?|ON)\s+([a-z_][a-z0-9_]*)\b")
_CREATE = re.compile(r"CREATE (?:VIRTUAL )?TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)")


def _owners() -> dict[str, str]:
    """Table → the part whose migrations create it."""
    out: dict[str, str] = {}
    for name, path in MODULES.items():
        if not name.startswith("wisp.core."):
            continue
        for table in _CREATE.findall(path.read_text()):
            out.setdefault(table, part(name))
    return out


def test_no_module_runs_sql_on_a_table_it_does_not_own() -> None:
    """Issue "One core, built once", "Each table has one owner": the store owns conversations, turns and
    entries; a feature owns the tables its migrations create; nobody else runs SQL on them."""
    owners = _owners()
    assert owners["entries"] == "store" and owners["facts"] == "context"
    assert owners["episode_memories"] == "episodes"
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("wisp.core."):
            continue
        for table in set(_SQL_TABLE.findall(path.read_text())):
            owner = owners.get(table)
            if owner is not None and owner != part(name):
                bad.append((name, table, owner))
    assert sorted(bad) == []


def _type_checking_names_used_at_run_time(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` for each name imported only under ``if TYPE_CHECKING:`` that the module
    reads at run time (outside annotations, with no import of its own in the enclosing function)."""
    tree = ast.parse(source)
    only_typing: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for n in ast.walk(node):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    only_typing |= {a.asname or a.name.split(".")[0] for a in n.names}
    if not only_typing:
        return []
    in_annotation: set[int] = set()
    for node in ast.walk(tree):
        annotations: list[ast.AST] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            annotations = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                           if x is not None and x.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            in_annotation |= {id(n) for n in ast.walk(annotation)}
    imported_in: dict[int, set[str]] = {}  # per function: the names it imports itself
    enclosing: dict[int, list[ast.AST]] = defaultdict(list)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            imported_in[id(fn)] = {a.asname or a.name.split(".")[0] for n in ast.walk(fn)
                                   if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            for n in ast.walk(fn):
                enclosing[id(n)].append(fn)
    return [(node.lineno, node.id) for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in only_typing
            and id(node) not in in_annotation
            and not any(node.id in imported_in[id(fn)] for fn in enclosing[id(node)])]


def test_no_name_imported_for_type_checking_alone_is_used_at_run_time() -> None:
    """Modules load their parts lazily (issue 12): a name moved under ``TYPE_CHECKING`` that is
    still called at run time fails only on the path that calls it (a NameError a user would meet)."""
    bad = [f"{path.relative_to(ROOT)}:{line} {name}" for path in MODULES.values()
           for line, name in _type_checking_names_used_at_run_time(path.read_text())]
    assert bad == []


def test_the_type_checking_check_sees_a_run_time_use() -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zoneinfo import ZoneInfo\n"
              "def ok(x: ZoneInfo) -> ZoneInfo:\n    from zoneinfo import ZoneInfo\n    return ZoneInfo(x)\n"
              "def bad(x: 'ZoneInfo'):\n    return ZoneInfo.from_file(x)\n")
    assert _type_checking_names_used_at_run_time(source) == [(8, "ZoneInfo")]
