"""The package's structure: one installed name, layers that import only downward, no cycles.

docs/architecture.md describes the layers; this test keeps the code to it. It reads
imports from the source (ast), so it runs no project code; the last test imports the
package, to see where its names resolve.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import symfuzz.fuzz
from conftest import ROOT

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

# Layers, bottom first. A module belongs to the first layer with a matching prefix
# (most specific prefixes are listed first where layers share a package).
LAYERS = [
    ("case model", ["symfuzz.fuzz.ir", "symfuzz.fuzz.case", "symfuzz.fuzz.specs", "symfuzz.fuzz.script_runtime",
                    "symfuzz.fuzz.runtime", "symfuzz.fuzz.plain_runtime",
                    "symfuzz.fuzz.ir_nodes", "symfuzz.fuzz.ir_check",
                    "symfuzz.fuzz.module_runtime", "symfuzz.fuzz.choices", "symfuzz.fuzz.model_case",
                    "symfuzz.fuzz.model_runtime", "symfuzz.fuzz.model_judge"]),
    ("generation", ["symfuzz.fuzz.schedule", "symfuzz.fuzz.generate", "symfuzz.fuzz.drawing", "symfuzz.fuzz.gradients",
                    "symfuzz.fuzz.motifs", "symfuzz.fuzz.size_forms", "symfuzz.fuzz.scalars", "symfuzz.fuzz.modules",
                    "symfuzz.fuzz.worlds", "symfuzz.fuzz.op_statements", "symfuzz.fuzz.size_statements",
                    "symfuzz.fuzz.model_draw",
                    "symfuzz.fuzz"]),
    ("lanes and execution", ["symfuzz.oracles.lanes"]),
    ("oracles", ["symfuzz.oracles"]),
    ("findings", ["symfuzz.corpus"]),
    ("tools", ["symfuzz.minifier", "symfuzz.opcheck"]),
    ("app", ["symfuzz"]),
]
# Packages of one layer that must not import each other.
INDEPENDENT = [("symfuzz.minifier", "symfuzz.opcheck")]


def _package_dirs() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in config["package-dir"].items()}


def _modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    dirs = _package_dirs()
    found = {}
    for package in sorted(dirs, key=len):
        for path in sorted(dirs[package].rglob("*.py")):
            rel = path.relative_to(dirs[package]).with_suffix("")
            if any(p in dirs.values() for p in path.parents if p != dirs[package] and p.is_relative_to(dirs[package])):
                continue  # another mapped package nested below this one
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that ``module`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            # the longest known module the name refers to (a module, or a name inside one)
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _is_package_init(module: str, graph) -> bool:
    return any(other.startswith(module + ".") for other in graph)


def test_every_module_is_in_a_layer():
    for module in _graph():
        layer_of(module)


def test_no_import_runs_up_a_layer():
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if layer_of(target) > layer_of(module):
                # `from symfuzz.fuzz import script_runtime` names the package first: only the
                # submodule it names counts, and that is checked as its own edge.
                upward.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                              f"({LAYERS[layer_of(target)][0]})")
    assert not upward, "\n".join(sorted(upward))


def test_tool_packages_do_not_import_each_other():
    graph = _graph()
    crossing = [f"{m} imports {t}" for m, targets in graph.items() for t in targets
                for a, b in INDEPENDENT for x, y in ((a, b), (b, a))
                if (m == x or m.startswith(x + ".")) and (t == y or t.startswith(y + "."))]
    assert not crossing, "\n".join(crossing)


def test_no_import_cycles_between_files():
    graph = _graph()
    # A package's __init__ is not a file of its own here: importing a submodule
    # runs it, so only edges out of it that are real imports count; edges *to*
    # a package are edges to its __init__ and count as written.
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


def test_only_symfuzz_is_installed_at_the_top_level():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = config["tool"]["setuptools"]["packages"]
    assert {p.split(".")[0] for p in packages} == {"symfuzz"}
    scripts = config["project"]["scripts"]
    plugins = config["project"]["entry-points"]["pytest11"]
    assert all(target.startswith("symfuzz.") for target in [*scripts.values(), *plugins.values()])


def test_the_case_model_needs_only_torch_hypothesis_and_the_standard_library():
    import sys

    allowed = set(sys.stdlib_module_names) | {"torch", "hypothesis"}
    # The model source's runtime builds real architectures: transformers, imported where a model is built.
    also = {"symfuzz.fuzz.model_runtime": {"transformers"}}
    modules = _modules()
    foreign = []
    for module, path in modules.items():
        if layer_of(module) != 0:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in allowed | also.get(module, set()) and not (top == "symfuzz" and layer_of(name) == 0):
                    foreign.append(f"{module} imports {name}")
    assert not foreign, "\n".join(foreign)


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or on the line above it or above the run of
    import lines it belongs to (one comment may explain a group)."""
    index = lineno - 1
    if "#" in lines[index]:
        return True
    while index > 0:
        above = lines[index - 1].strip()
        if above.startswith("#"):
            return True
        if not above.startswith(("import ", "from ")) and not above.endswith((",", "(")) and above != ")":
            return False
        index -= 1
    return False


def _nested_imports_without_a_reason() -> list[str]:
    """Imports inside a function or class with no comment on their line or the line above."""
    found = []
    for module, path in _modules().items():
        lines = path.read_text().splitlines()

        def visit(node, nested):
            for child in ast.iter_child_nodes(node):
                if nested and isinstance(child, (ast.Import, ast.ImportFrom)) and not _explained(lines, child.lineno):
                    found.append(f"{path.relative_to(ROOT)}:{child.lineno}: {lines[child.lineno - 1].strip()}")
                visit(child, nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))

        visit(ast.parse("\n".join(lines)), False)
    return found


def test_imports_sit_at_the_top_unless_a_comment_says_why_not():
    found = _nested_imports_without_a_reason()
    assert not found, "move these to the top of the file, or say why they wait:\n" + "\n".join(found)


def test_each_subpackage_folder_is_linked_where_its_import_name_says():
    """symfuzz/<name> links to the folder pyproject.toml maps symfuzz.<name> to: the import names
    resolve by the ordinary rules from the checkout and in static tools (no __path__ change)."""
    for package, folder in _package_dirs().items():
        if package == "symfuzz":
            continue
        link = ROOT / "symfuzz" / package.split(".", 1)[1]
        assert link.is_symlink() and link.resolve() == folder.resolve(), (link, folder)
    source = (ROOT / "symfuzz" / "__init__.py").read_text()
    assert "__path__" not in ast.unparse(ast.parse(source)), "symfuzz/__init__.py changes its own __path__"


def test_the_package_does_not_import_itself_under_its_own_name():
    assert Path(symfuzz.fuzz.__file__).resolve().parent == (ROOT / "fuzz").resolve()
    try:
        importlib.import_module("symfuzz.symfuzz")
    except ImportError:
        pass
    else:
        raise AssertionError("symfuzz.symfuzz imports: a second copy of the package")
