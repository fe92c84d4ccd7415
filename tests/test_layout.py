"""The package's layers (docs/design.md §2): which way imports run, module size, docstrings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "growcert"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at top level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_imports_follow_the_layers(path):
    name = module_name(path)
    used = {module for module in imports(path) if module.startswith("growcert.")}
    stages = {module for module in used if module.startswith("growcert.stages.")}
    if layer(name) == "stages":
        assert {module for module in stages if not module.startswith(name)} == set(), "stages do not import stages"
    elif name != "growcert.cli":
        assert stages == set(), "only cli.py wires stages"
    if layer(name) == "stats":
        assert all(layer(module) == "stats" for module in used), "stats/ is pure numerics"
        assert "torch" not in imports(path)
    if layer(name) == "report":
        assert not any(layer(module) in ("stages", "experiments", "models", "store") for module in used)
        assert "torch" not in imports(path), "report/ reads tidy tables, never networks"
    if layer(name) == "models":
        assert not any(layer(module) in ("stages", "experiments", "store", "stats", "report") for module in used)
    if layer(name) == "data":
        assert not any(layer(module) in ("stages", "experiments", "models", "store", "report") for module in used)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_modules_are_small_and_say_what_they_implement(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), "a module docstring naming what it implements"
    # about 500 lines: a module holds one job; a tighter cap would move code to the wrong module to fit
    assert len(path.read_text().splitlines()) <= 500


FUNCTION_LINES = 80  # about a screen: a longer function does several jobs that want names of their own


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_functions_fit_on_a_screen(path):
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > FUNCTION_LINES]
    assert long == [], f"functions over {FUNCTION_LINES} lines"
