"""The layer rules of ARCHITECTURE.md, checked on the code: every import in kvplan/ (module-level, inside functions,
under ``if TYPE_CHECKING:``, and ``importlib.import_module`` / ``__import__`` of a literal or an f-string's literal
prefix) goes down the layer table or stays within its layer, and no modules import each other in a circle.

Read from the source with ``ast`` (nothing is imported), so a lazy import inside a function is an arrow like any
other: the rule is about the module graph, not about what happens to be loaded first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kvplan

# Bottom to top. A module may import its own layer and the layers below it, never one above. Where the code needs
# decided the order:
# - render (the output layer: ``Result`` tables, number formatting, plots) sits below present, which builds
#   ``Result``s and formats seconds with ``render.output.format_seconds``; above calc, so no calculator formats.
# - inputs sits below engines: the engines read no file; ``render.output`` reads ``inputs.units`` (the --units
#   names and byte formatting) from below.
# - options (user values -> a Scenario and each command's calculator options) sits above calc, whose option classes
#   it builds and whose log matching it uses, and below the commands, which only declare and call.
# - the package root, ``kvplan/__init__.py``, is the public API facade: it may import anything (lazily; its
#   ``if TYPE_CHECKING:`` block names every export for type checkers), and nothing imports it back.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("kvplan.errors",)),
    ("specs", ("kvplan.specs",)),
    ("inputs", ("kvplan.inputs",)),
    ("engines", ("kvplan.engines",)),
    ("scenario", ("kvplan.scenario",)),
    ("calc", ("kvplan.calc",)),
    ("options", ("kvplan.options",)),
    ("render", ("kvplan.render",)),
    ("present", ("kvplan.present",)),
    ("commands", ("kvplan.commands",)),
    ("cli", ("kvplan.cli", "kvplan.__main__")),
    ("api", ("kvplan",)),
)

# Constants of the package root every module may read: the root package is loaded before any of its modules, and
# these are plain assignments in it, not lazy exports (``kvplan.cli`` prints ``__version__``).
ROOT_CONSTANTS = frozenset({"__version__"})

PACKAGE = Path(kvplan.__file__).resolve().parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the longest prefix naming ``module``."""
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


def _literal_prefix(node: ast.expr) -> tuple[str, bool] | None:
    """(text, whole) of a string literal, or of the literal start of an f-string (whole False)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, True
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value), False
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, imported kvplan module) for every import in the file. ``from P import m`` names the submodule P.m when
    there is one, else P; a dynamic import of an f-string ``"kvplan.pkg.{x}"`` names every module directly in pkg."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [alias.name for alias in node.names]
            if source == "kvplan" and set(names) <= ROOT_CONSTANTS:
                continue
            for name in names:
                sub = f"{source}.{name}"
                found.append((node.lineno, sub if sub in known else source))
        elif isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id == "__import__")):
            literal = _literal_prefix(node.args[0])
            if literal is None:
                continue
            text, whole = literal
            if whole:
                found.append((node.lineno, text))
            else:
                parent = text.rstrip(".")
                found += [(node.lineno, m) for m in known if m.rpartition(".")[0] == parent]
    return [(line, target) for line, target in found if target == "kvplan" or target.startswith("kvplan.")]


def graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """importer -> {imported module: first line}."""
    known = modules(root)
    edges: dict[str, dict[str, int]] = {m: {} for m in known}
    for module, path in known.items():
        for line, target in imports(module, path, known):
            if target != module:
                edges[module].setdefault(target, line)
    return edges


def upward_edges(edges: dict[str, dict[str, int]], root: Path = PACKAGE) -> list[str]:
    """One message per import from a lower layer into a higher one (no edge is exempt)."""
    known = modules(root)
    found = []
    for importer, targets in sorted(edges.items()):
        low = layer_of(importer)
        for target, line in sorted(targets.items()):
            high = layer_of(target)
            if high > low:
                where = known[importer].relative_to(root.parent)
                found.append(f"{where}:{line} imports {target}: layer {LAYERS[low][0]} may not import layer "
                             f"{LAYERS[high][0]} (above it in tests/test_layers_contract.py LAYERS)")
    return found


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                group.append(item)
                if item == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def circle_text(group: list[str], edges: dict[str, dict[str, int]]) -> str:
    inside = set(group)
    arrows = [f"{a} -> {b} (line {edges[a][b]})" for a in group for b in sorted(edges[a]) if b in inside]
    return "import circle: " + "; ".join(arrows)


# --- the tree ----------------------------------------------------------------------------------------------------

def test_every_module_has_a_layer():
    unplaced = [m for m in modules() if layer_of(m) < 0]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_no_import_goes_up_a_layer():
    problems = upward_edges(graph())
    assert not problems, "\n".join(problems)


def test_no_import_circles():
    edges = graph()
    found = circles(edges)
    assert not found, "\n".join(circle_text(g, edges) for g in found)


# --- the checker itself, on small made-up packages ---------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kvplan"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {p.parent for p in root.rglob("*.py")} | {root}:
        (folder / "__init__.py").touch()
    return root


def test_a_lazy_import_up_a_layer_is_refused_and_named(tmp_path):
    root = _tree(tmp_path, {"specs/model.py": "def f():\n    from kvplan.calc import size\n    return size\n",
                            "calc/size.py": "from kvplan.specs import model\n"})
    problems = upward_edges(graph(root), root)
    assert problems == ["kvplan/specs/model.py:2 imports kvplan.calc.size: layer specs may not import layer calc "
                        "(above it in tests/test_layers_contract.py LAYERS)"]


@pytest.mark.parametrize("code", ["import importlib\nimportlib.import_module('kvplan.present.size')\n",
                                  "__import__(f'kvplan.present.{name}')\n",
                                  "if TYPE_CHECKING:\n    from kvplan.present.size import present\n",
                                  "from ..present import size\n"])
def test_dynamic_type_checking_and_relative_imports_count(tmp_path, code):
    root = _tree(tmp_path, {"calc/plan.py": code, "present/size.py": ""})
    assert [p.split(":")[0] for p in upward_edges(graph(root), root)] == ["kvplan/calc/plan.py"]


def test_a_circle_within_one_layer_is_refused_and_named(tmp_path):
    root = _tree(tmp_path, {"inputs/a.py": "from kvplan.inputs import b\n",
                            "inputs/b.py": "def f():\n    import kvplan.inputs.c\n",
                            "inputs/c.py": "from kvplan.inputs.a import x\n"})
    edges = graph(root)
    assert not upward_edges(edges, root)
    assert circles(edges) == [["kvplan.inputs.a", "kvplan.inputs.b", "kvplan.inputs.c"]]
    assert circle_text(circles(edges)[0], edges) == (
        "import circle: kvplan.inputs.a -> kvplan.inputs.b (line 1); kvplan.inputs.b -> kvplan.inputs.c (line 2); "
        "kvplan.inputs.c -> kvplan.inputs.a (line 1)")


def test_down_and_sideways_imports_and_the_version_pass(tmp_path):
    root = _tree(tmp_path, {"present/size.py": "from kvplan.render.result import Result\nfrom kvplan import errors\n",
                            "render/result.py": "from kvplan.specs.values import Bytes\n",
                            "specs/values.py": "", "errors.py": "",
                            "cli.py": "from kvplan import __version__\nfrom kvplan.commands import size\n",
                            "commands/size.py": "from kvplan.present import size\n"})
    edges = graph(root)
    assert edges["kvplan.present.size"] == {"kvplan.render.result": 1, "kvplan.errors": 2}
    assert "kvplan" not in edges["kvplan.cli"]
    assert not upward_edges(edges, root) and not circles(edges)


def test_tests_import_their_helpers_as_ci_runs_them():
    # CI also runs the suite from outside the tree against the wheel, where no package `tests` exists: a test
    # module reaches conftest and other test modules by their own names (pytest puts tests/ on sys.path)
    here = Path(__file__).parent
    bad = [f"{p.name}:{n}" for p in sorted(here.glob("*.py")) for n, line in enumerate(p.read_text().splitlines(), 1)
           if line.lstrip().startswith(("from tests.", "import tests"))]
    assert not bad, f"imports through a package `tests` (use `from conftest import ...`): {bad}"
