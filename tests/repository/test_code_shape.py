"""The package's shape rules that no linter states: a function fits on a screen, and a module
uses only the public names of another (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "controller" / "innet"
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def long_functions(max_lines: int = MAX_FUNCTION_LINES) -> list[str]:
    """`path:line name (N lines)` of every function or method longer than `max_lines`,
    counted from its `def` to its last line (decorators not counted)."""
    out = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > max_lines:
                    out.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} "
                               f"({lines} lines)")
    return out


def private_imports() -> list[str]:
    """Every `from innet.x import _name` and `x._name` on a module imported from innet."""
    out = []
    for path, tree in _modules():
        where = path.relative_to(PACKAGE)
        modules: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                    "innet")):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        out.append(f"{where}:{node.lineno} imports {alias.name} from "
                                   f"{node.module}")
                    modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules.update((a.asname or a.name).split(".")[0] for a in node.names
                               if a.name.startswith("innet"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in modules):
                out.append(f"{where}:{node.lineno} uses {node.value.id}.{node.attr}")
    return out


def test_no_function_is_longer_than_sixty_lines() -> None:
    assert long_functions() == []


def test_no_module_uses_another_modules_private_names() -> None:
    assert private_imports() == []


def test_the_checks_find_a_planted_long_function_and_private_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check finds a planted case, so an empty list above means something."""
    pkg = tmp_path / "innet"
    pkg.mkdir()
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    (pkg / "a.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    (pkg / "b.py").write_text("from innet.a import _hidden\nfrom innet import a\n\n"
                              "a._other()\n")
    monkeypatch.setitem(globals(), "PACKAGE", pkg)
    assert long_functions() == [f"a.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]
    assert private_imports() == ["b.py:1 imports _hidden from innet.a", "b.py:4 uses a._other"]
