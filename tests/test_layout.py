"""The package's layers (docs/design.md §2): which way imports run (in layer order, without cycles between
modules or loops between folders), where a function may import, that no compute function picks a device of its
own, module size, docstrings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "growcert"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_nodes(path: Path, local_only: bool = False) -> list[ast.AST]:
    """The import statements of `path`, at top level or inside functions (`local_only`: inside functions only)."""
    tree = ast.parse(path.read_text())
    nodes = (
        [
            node
            for function in ast.walk(tree)
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            for node in ast.walk(function)
        ]
        if local_only
        else ast.walk(tree)
    )
    return [node for node in nodes if isinstance(node, (ast.Import, ast.ImportFrom))]


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at top level or inside functions."""
    found = set()
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


NAMES = {module_name(path) for path in MODULES}


def package_imports(path: Path, local_only: bool = False) -> set[str]:
    """The package's modules `path` imports: `from X import name` counts as X.name where that is a module, as X
    otherwise (`local_only`: inside functions only)."""
    found = set()
    for node in import_nodes(path, local_only):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in NAMES}
        elif isinstance(node, ast.ImportFrom) and node.module in NAMES and node.level == 0:
            found |= {
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in NAMES else node.module
                for alias in node.names
            }
    return found


# The layers, lowest first: a module imports its own layer and the ones below, never one above.
LAYERS = [
    {"growcert", "errors", "files", "schema", "numerics", "pipeline.artifacts"},  # standard library (and yaml) only
    {"stats"},  # numerics on arrays
    {"config", "provenance", "runtime", "data"},  # settings, run set-up, datasets: no network
    {"models", "optim", "store", "training", "resume", "block_features"},  # networks, the store, the training step
    {"referee"},  # the claims registry and the referee's rule: verdict words, families, looks, bounds
    {"report"},  # tidy tables to figures, claim rows and the page
    {"experiments", "stages"},  # compute
    {"plan", "pipeline"},  # what a config plans (grids, targets, settings, resources), the rules' Snakemake marks
    {"reference_runs"},  # the committed reference runs: export and re-judge pipeline results
    {"cli", "commands"},  # the command line and its commands: wire stages to files
]


def layer_index(name: str) -> int:
    parts = name.split(".")[1:]
    for index, members in enumerate(LAYERS):
        if ".".join(parts[:2]) in members or ".".join(parts[:1]) in members or (not parts and "growcert" in members):
            return index
    raise AssertionError(f"{name} is in no layer of tests/test_layout.py")


# The package root re-exports its public API lazily (`growcert.open_store`, docs/stores.md): a facade above every
# layer, imported when first asked for, never at `import growcert`.
ROOT_FACADE = {"growcert.store"}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_imports_run_down_the_layers(path):
    name = module_name(path)
    allowed = ROOT_FACADE if name == "growcert" else set()
    upward = sorted(
        module for module in package_imports(path) if layer_index(module) > layer_index(name) and module not in allowed
    )
    assert upward == [], f"{name} (layer {layer_index(name)}) imports a higher layer"


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, anywhere in it."""
    return {module_name(path): package_imports(path) for path in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: its strongly connected components of more than one module, and modules that
    import themselves (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": set()}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# Where a function may import a module of the package: the command line (cli.py, commands/) and the modules
# `growcert --help` reads (the experiments registry and its task modules), to keep torch out of it; an experiment's
# report module where it draws (matplotlib through report.figures, which a claims-only call does not need); and the
# misalignment estimator's compiled loops (numba, only for the jobs that resample). cli.py's opening comment says so.
LOCAL_IMPORTS = {
    "growcert.cli": None,
    "growcert.commands": None,
    "growcert.commands.": None,
    "growcert.reference_runs.command": None,
    "growcert.experiments": None,
    "growcert.experiments.tasks.": None,
    "growcert.stats.resample": {"growcert.stats.subset_sums"},
    "growcert": ROOT_FACADE,
}
DRAWING = {"growcert.report.figures"}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_a_function_imports_a_module_of_the_package_only_where_that_keeps_a_heavy_import_lazy(path):
    name = module_name(path)
    local = package_imports(path, local_only=True) - DRAWING
    allowed = next(
        (
            modules
            for prefix, modules in LOCAL_IMPORTS.items()
            if name == prefix or (prefix.endswith(".") and name.startswith(prefix))
        ),
        set(),
    )
    assert allowed is None or local <= allowed, f"{name} imports {sorted(local - (allowed or set()))} in a function"


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_imports_follow_the_layers(path):
    name = module_name(path)
    used = {module for module in imports(path) if module.startswith("growcert.")}
    stages = {module for module in used if module.startswith("growcert.stages.")}
    if name == "growcert.stages.advise":  # the one stage made of stages (dump, estimate-alignment, estimate-depth)
        assert {module.split(".")[2] for module in stages} <= {"alignment", "depth", "dump"}
    elif name == "growcert.stages.advise_check":  # advise's decisions, then growth: made of the advise stage alone
        assert {module.split(".")[2] for module in stages} <= {"advise"}
    elif layer(name) == "stages":
        assert {module for module in stages if not module.startswith(name)} == set(), "stages do not import stages"
    elif name != "growcert.cli" and layer(name) not in {"commands", "reference_runs"}:  # the layers above stages
        assert stages == set(), "only the command line (and the reference runs' export it runs) wires stages"
    if layer(name) == "stats":
        assert all(layer(module) == "stats" for module in used), "stats/ is pure numerics"
        assert "torch" not in imports(path)
    if layer(name) == "referee":  # the floor under report/: a verdict is decided without presenting anything
        assert not any(layer(module) == "report" for module in used), "the referee imports no report module"
        assert not any(layer(module) in ("stages", "experiments", "models", "store") for module in used)
        assert "torch" not in imports(path) and "matplotlib" not in imports(path)
    if layer(name) == "report":
        assert not any(layer(module) in ("stages", "experiments", "models", "store") for module in used)
        assert "torch" not in imports(path), "report/ reads tidy tables, never networks"
    if layer(name) == "models":
        assert not any(
            layer(module) in ("stages", "experiments", "store", "stats", "referee", "report") for module in used
        )
    if layer(name) in ("store", "config"):
        assert not any(layer(module) == "models" for module in used), "the store and the config know no network"
    if layer(name) == "data":
        assert not any(
            layer(module) in ("stages", "experiments", "models", "store", "referee", "report") for module in used
        )


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_modules_are_small_and_say_what_they_implement(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), "a module docstring naming what it implements"
    # about 500 lines: a module holds one job; a tighter cap would move code to the wrong module to fit
    assert len(path.read_text().splitlines()) <= 500


FUNCTION_LINES = 80  # about a screen: a longer function does several jobs that want names of their own


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_functions_fit_on_a_screen(path):
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > FUNCTION_LINES
    ]
    assert long == [], f"functions over {FUNCTION_LINES} lines"


COMPUTE = [path for path in MODULES if layer(module_name(path)) in ("stages", "experiments")]


def device_defaults(path: Path) -> list[str]:
    """The functions of `path` whose `device` parameter has a default."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = node.args.posonlyargs + node.args.args
        defaulted = positional[len(positional) - len(node.args.defaults) :] if node.args.defaults else []
        defaulted += [arg for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults) if default is not None]
        found += [node.name for arg in defaulted if arg.arg == "device"]
    return found


@pytest.mark.parametrize("path", COMPUTE, ids=lambda path: module_name(path))
def test_no_stage_or_task_function_has_a_device_default_of_its_own(path):
    """The device comes from the settings or the command's --device (the schema's default): a function that ran
    on a device of its own choosing when not told would run a job somewhere the config did not say."""
    assert device_defaults(path) == []


def test_the_device_default_finder_finds_them(tmp_path):
    (tmp_path / "a.py").write_text(
        "def f(x, device='cpu'): ...\ndef g(x, *, device='auto'): ...\n"
        "def h(x, *, device): ...\ndef k(x, device, y=1): ...\n"
    )
    assert device_defaults(tmp_path / "a.py") == ["f", "g"]


def folder(name: str) -> str:
    """The folder of module `name` under growcert/ (a top-level module is a folder of its own)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """{folder: the other folders its modules import}; the package root's lazy facade aside (ROOT_FACADE)."""
    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if module == "growcert":
            continue
        folders.setdefault(folder(module), set()).update(
            folder(target) for target in imported if folder(target) != folder(module)
        )
    return folders


def test_no_loop_between_folders():
    """No folder imports one that imports it back through any chain (experiments -> report -> pipeline, so
    nothing in pipeline/ may read experiments)."""
    assert cycles(folder_graph(import_graph())) == []


def test_the_folder_loop_finder_finds_a_loop_through_modules_that_do_not_loop():
    graph = {
        "growcert.plan.a": {"growcert.experiments.b"},
        "growcert.experiments.b": {"growcert.report.c"},
        "growcert.report.c": {"growcert.plan.d"},
        "growcert.plan.d": set(),
    }
    assert cycles(graph) == []
    assert cycles(folder_graph(graph)) == [["experiments", "plan", "report"]]


def test_the_store_package_init_only_re_exports():
    """store/__init__.py names what the package exports and defines nothing: the format, the writer and the
    reader each have a module of their own (store/format.py, store/writer.py, store/reader.py)."""
    init = PACKAGE / "store" / "__init__.py"
    definitions = [
        node.name
        for node in ast.walk(ast.parse(init.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    assert definitions == [], f"store/__init__.py defines {definitions}"
    assert len(init.read_text().splitlines()) < 40


def methods_reached_through_self(path: Path) -> set[str]:
    """The names `self.<name>` that the functions of `path` read (calls, or bound methods handed on)."""
    return {
        node.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
    }


def methods_defined(path: Path) -> set[str]:
    """The methods of the classes of `path`."""
    return {
        item.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def calls_into_other_modules_through_self(folder: Path) -> dict[str, list[str]]:
    """{module: the methods of the folder's other modules it reaches through `self`}: a dependency between
    mixins of one class that no import shows (the layer and loop checks above cannot see it)."""
    modules = [path for path in sorted(folder.glob("*.py")) if path.name != "__init__.py"]
    found = {}
    for path in modules:
        own = methods_defined(path)
        others = set().union(*(methods_defined(other) for other in modules if other != path)) - own
        reached = sorted(methods_reached_through_self(path) & others)
        if reached:
            found[path.stem] = reached
    return found


def test_no_plan_module_calls_another_plan_modules_method_through_self():
    """plan/'s parts (targets, settings, resources) are joined by `Plan`; what one needs of another is an import
    of a function that takes the config, which the import graph shows."""
    assert calls_into_other_modules_through_self(PACKAGE / "plan") == {}


def test_the_self_call_finder_finds_a_mixin_calling_another(tmp_path):
    (tmp_path / "a.py").write_text(
        "class A:\n    def f(self):\n        return self.g() + self.h()\n    def h(self):\n        return 1\n"
    )
    (tmp_path / "b.py").write_text("class B:\n    def g(self):\n        return self.settings\n")
    assert calls_into_other_modules_through_self(tmp_path) == {"a": ["g"]}
