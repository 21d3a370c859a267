"""The TUI's layout (issue 9, "The TUI renders events, one widget per file"):
widgets one per module under tui/widgets/, screens with their .tcss beside
them and one modal base, stylesheets shipped by a non-editable install,
and only Textual's public modules imported."""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import tomllib
from pathlib import Path

from textual.screen import ModalScreen
from textual.widget import Widget

from wisp.tui.screens import WispModal

ROOT = Path(__file__).resolve().parent.parent.parent
TUI = ROOT / "tui"


def _classes(package: str, folder: Path, base: type) -> dict[str, list[type]]:
    out: dict[str, list[type]] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = importlib.import_module(f"{package}.{path.stem}")
        out[path.name] = [c for _n, c in inspect.getmembers(module, inspect.isclass)
                          if c.__module__ == module.__name__ and issubclass(c, base)]
    return out


def test_one_widget_per_file_each_with_its_css() -> None:
    by_file = _classes("wisp.tui.widgets", TUI / "widgets", Widget)
    assert len(by_file) >= 14
    for name, classes in by_file.items():
        assert len(classes) == 1, f"{name} holds {[c.__name__ for c in classes]}"
        cls = classes[0]
        assert cls.__dict__.get("DEFAULT_CSS") or (TUI / "widgets" / f"{Path(name).stem}.tcss").exists(), name


def test_screens_are_modal_with_a_tcss_beside_each() -> None:
    by_file = _classes("wisp.tui.screens", TUI / "screens", ModalScreen)
    screens = [c for classes in by_file.values() for c in classes]
    assert {c.__name__ for c in screens} >= {"HelpScreen", "ApprovalScreen", "InspectContextScreen", "ShowScreen",
                                             "MemoryScreen", "MemoryDetailScreen", "WispModal"}
    for cls in screens:
        assert issubclass(cls, WispModal)
        paths = [cls.CSS_PATH] if isinstance(cls.CSS_PATH, str) else list(cls.CSS_PATH)
        assert paths[0] == "modal.tcss"
        for css in paths:
            assert (TUI / "screens" / css).is_file(), f"{cls.__name__}: {css} is missing"
        if cls is not WispModal:
            own = inspect.getfile(cls).replace(".py", ".tcss")
            assert own.endswith(paths[-1]), f"{cls.__name__}'s own stylesheet is not beside it"


def test_every_stylesheet_is_shipped_by_a_non_editable_install() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {package: ROOT / folder for package, folder in meta["package-dir"].items()}
    missing = []
    for tcss in sorted([*TUI.rglob("*.tcss"), *(ROOT / "themes").rglob("*.tcss")]):
        rel_root = "tui" if TUI in tcss.parents else "themes"
        package = ".".join(["wisp." + rel_root, *tcss.parent.relative_to(ROOT / rel_root).parts])
        assert package in meta["packages"]
        assert dirs["wisp." + rel_root] == ROOT / rel_root
        globs = meta["package-data"].get(package, [])
        if not any(fnmatch.fnmatch(tcss.name, g) for g in globs):
            missing.append(str(tcss.relative_to(ROOT)))
    assert missing == []


def test_only_textual_public_modules_are_imported() -> None:
    """``textual.widgets.markdown``, never ``textual.widgets._markdown``."""
    private = []
    for path in [*TUI.rglob("*.py"), *(ROOT / "themes").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] == "textual" and any(part.startswith("_") for part in name.split(".")):
                    private.append(f"{path.relative_to(ROOT)}: {name}")
    assert private == []


def test_the_chat_never_scrolls_to_the_end_by_hand() -> None:
    """The chat pane is anchored (Textual's anchor()); nothing in the chat's
    drawing calls scroll_end on a delta."""
    for name in ("chat_pane.py", "assistant_message.py"):
        assert "scroll_end" not in (TUI / "widgets" / name).read_text(), name
    assert "anchor()" in (TUI / "widgets" / "chat_pane.py").read_text()
