"""How a script gets symfuzz's code: real modules, read as source and pasted.

- ``Helpers``: definitions pasted whole from a module (``module``) or by name with
  everything they use (``pieces``): the runtime a script carries (fuzz/script_runtime.py
  and the modules it gathers, module_runtime, the lanes' torch-only parts) and the
  helpers file of opcheck's snippets.
- ``module_body``: a script's own body, kept as a module of its own (corpus/body_repro.py,
  body_symbolic.py, body_graph.py): its source below the line ``BODY_FROM``,
  with the finding's values written in place of the placeholders (``fill``).
- ``function_body``: the body of a function, for code a script runs inside a function of
  its own (opcheck/snippet_bodies.py: what each check's snippet does in its main()).

Placeholders are Python names, so that a module holding a body imports and lints like any
other: names starting with ``SLOT_`` (the module binds each to a stand-in above its body),
and the project's constants the module imports (``EXIT_FIXED``...), written as their
values. A placeholder alone on its line stands for lines (the program, a function's
statements), indented as it is; anywhere else it stands for an expression.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import io
import sys
import threading
import tokenize
from pathlib import Path
from typing import Iterable, Optional

# Top-level imports an inlined module may make: the standard library and torch.
_ALLOWED_IMPORTS = set(sys.stdlib_module_names) | {"torch"}
PROJECT = "symfuzz"
# The line of a body module below which its source is the script's body.
BODY_FROM = "# ================================================================ the script's body: pasted from here on"
SLOT = "SLOT_"  # how a placeholder's name starts, unless it is an imported constant



def _module_source(module) -> tuple[str, str]:
    """(dotted name, source text) of a project module, given by name or as a module."""
    if not isinstance(module, str):
        return module.__name__, inspect.getsource(module)
    loaded = sys.modules.get(module)
    if loaded is not None:
        return module, inspect.getsource(loaded)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"no module {module} to inline into a script")
    return module, Path(spec.origin).read_text()


def _binds(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


# The names each statement uses, by the statement (the parsed trees are cached and only read, so a
# statement's names never change; the renderers ask for them once per script otherwise).
_USES: dict[int, tuple[ast.stmt, frozenset]] = {}


def _uses(node: ast.stmt) -> frozenset:
    known = _USES.get(id(node))
    if known is None or known[0] is not node:
        known = _USES[id(node)] = (node, frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))
    return known[1]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_project_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == PROJECT
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == PROJECT for a in node.names)


def _segment(lines: list[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` from the module's lines, already split: that function
    splits the whole text again on every call (the repro renderer asks once per import)."""
    part = [line.encode() for line in lines[node.lineno - 1:node.end_lineno]]  # offsets count UTF-8 bytes
    part[-1] = part[-1][:node.end_col_offset]
    part[0] = part[0][node.col_offset:]
    return "\n".join(line.decode() for line in part)


def _first_line(node: ast.stmt, lines: list[str]) -> int:
    """The statement's first line, with its decorators and the comment lines right above it."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


# CPython's parser is not safe to enter from two threads at once (3.11 raises
# "SystemError: AST constructor recursion depth mismatch"), and the minifier
# renders scripts from a thread pool. The trees are only read, so one parse of
# each source serves every script.
_PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=32)
def _parse_locked(text: str) -> ast.Module:
    return ast.parse(text)


def _parse(text: str) -> ast.Module:
    with _PARSE_LOCK:
        return _parse_locked(text)




class Helpers:
    """Project source pasted into a script, each definition once.

    ``module`` pastes a whole module but its docstring; ``pieces`` pastes
    named top-level definitions with every top-level definition they use,
    and the imports those need. A project import in pasted code is replaced
    by the definitions it imports (pasted first) or dropped when the script
    has them already; other imports must be of the standard library or
    torch, so that the script needs only torch.
    """

    def __init__(self):
        self.blocks: list[str] = []
        self.imports: list[str] = []  # import lines the pieces need, in order
        self.provided: dict[str, str] = {}  # name -> the module whose definition the script holds
        self.sources: list[str] = []  # modules pasted from, in order

    def module(self, module) -> "Helpers":
        name, text = _module_source(module)
        if name in self.sources:
            raise RuntimeError(f"{name} is pasted already: paste a whole module before any pieces of it")
        lines = text.splitlines()
        dropped = set()
        tree = _parse(text)
        for index, node in enumerate(tree.body):
            span = range(node.lineno, node.end_lineno + 1)
            if index == 0 and _is_docstring(node):
                dropped.update(span)
            elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
                dropped.update(span)
            elif _is_project_import(node):
                self._resolve(name, node, {a.asname or a.name for a in node.names})
                dropped.update(span)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(name, node)
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                self._provide(name, _binds(node))
        self._source(name)
        self.blocks.append("\n".join(l for n, l in enumerate(lines, 1) if n not in dropped).strip("\n"))
        return self

    def pieces(self, module, names: Iterable[str]) -> "Helpers":
        names = list(names)
        name, text = _module_source(module)
        lines = text.splitlines()
        statements = [n for n in _parse(text).body if not _is_docstring(n)]
        defined: dict[str, ast.stmt] = {}
        for node in statements:
            for bound in _binds(node):
                defined.setdefault(bound, node)
        chosen: dict[int, ast.stmt] = {}
        queue = list(names)
        while queue:
            wanted = queue.pop()
            node = defined.get(wanted)
            if node is None:
                raise RuntimeError(f"{name} defines no top-level {wanted!r}, which a script inlines")
            if id(node) in chosen or (wanted in self.provided and self._has(name, wanted, node)):
                continue
            chosen[id(node)] = node
            queue += [u for u in _uses(node) if u in defined]
        ordered = sorted(chosen.values(), key=lambda n: n.lineno)
        code = []
        # The names a project import brings that are needed: used by the chosen code, or asked for
        # themselves (a module that gathers others' names, as script_runtime gathers fuzz/runtime/'s).
        needed = set().union(*(_uses(n) for n in ordered)) | set(names)
        for node in ordered:
            if _is_project_import(node):
                self._resolve(name, node, {a.asname or a.name for a in node.names} & needed)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(name, node)
                line = _segment(lines, node)
                if line not in self.imports:
                    self.imports.append(line)
            else:
                code.append(node)
        for node in code:
            self._provide(name, _binds(node))
        if code:
            self._source(name)
            self.blocks.append("\n\n\n".join("\n".join(lines[_first_line(n, lines) - 1:n.end_lineno]) for n in code))
        return self

    def text(self, have: str = "") -> str:
        """The pasted source; import lines already in ``have`` (the script's head) are left out."""
        present = set(have.splitlines())
        head = "\n".join(i for i in self.imports if i not in present)
        return (head + "\n\n\n" if head else "") + "\n\n\n".join(self.blocks) + "\n"

    def _has(self, module: str, wanted: str, node: ast.stmt) -> bool:
        """Does the script hold ``module``'s ``wanted`` (bound by ``node``) already?"""
        if self.provided[wanted] == module or _is_project_import(node):
            return True  # pasted from this module, or from the module it imports it from
        raise RuntimeError(f"{module} and {self.provided[wanted]} both define {wanted!r}; a script inlines both")

    def _resolve(self, name: str, node: ast.stmt, imported: set[str]) -> None:
        """Paste what a project import brings, unless the script has it."""
        if not isinstance(node, ast.ImportFrom) or node.level or any(a.asname and a.asname != a.name for a in node.names):
            raise RuntimeError(f"{name}: inlined code may import project names only as `from symfuzz.x import name`")
        missing = sorted(n for n in imported if n not in self.provided)
        if missing:
            self.pieces(node.module, missing)

    def _check_import(self, name: str, node: ast.stmt) -> None:
        roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [node.module.split(".")[0]]
        bad = [r for r in roots if r not in _ALLOWED_IMPORTS]
        if bad:
            raise RuntimeError(f"{name} imports {bad} at top level: scripts inline it, so it may import only "
                               "the standard library and torch (import others inside functions)")

    def _provide(self, module: str, names: set[str]) -> None:
        for bound in names:
            other = self.provided.get(bound)
            if other is not None and other != module:
                raise RuntimeError(f"{module} and {other} both define {bound!r}; a script inlines both")
            self.provided[bound] = module

    def _source(self, name: str) -> None:
        if name not in self.sources:
            self.sources.append(name)


# ---------------------------------------------------------------- bodies kept as modules


def module_body(module: str, values: dict[str, str]) -> str:
    """The script body ``module`` holds: its source below ``BODY_FROM``, with each placeholder
    written as its text in ``values`` (``fill``). Above that line the module keeps its docstring,
    the imports that resolve the body's names for a linter or an editor, and a stand-in for each
    ``SLOT_`` name, so that importing it runs nothing but a few assignments and definitions."""
    name, text = _module_source(module)
    _, found, below = text.partition("\n" + BODY_FROM + "\n")
    if not found:
        raise RuntimeError(f"{name} has no line {BODY_FROM!r} above the script body it holds")
    return fill(below, values, name)


def function_body(module: str, function: str, values: Optional[dict[str, str]] = None) -> str:
    """The statements of ``module``'s top-level ``function`` (with the comments above the first,
    not its docstring), dedented, with each placeholder written as its text in ``values``
    (``fill``): code that a script runs inside a function of its own. Its parameters name what the
    code uses from the code around it; the function is never called."""
    name, text = _module_source(module)
    node = next((n for n in _parse(text).body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None:
        raise RuntimeError(f"{name} defines no top-level function {function!r}, whose body a script pastes")
    statements = node.body[1:] if _is_docstring(node.body[0]) else node.body
    if not statements:
        raise RuntimeError(f"{name}.{function} has only a docstring: nothing to paste")
    lines = text.splitlines()
    indent = " " * statements[0].col_offset
    part = lines[_first_line(statements[0], lines) - 1:node.end_lineno]
    if any(line.strip() and not line.startswith(indent) for line in part):
        raise RuntimeError(f"{name}.{function}: a line of its body is indented less than its first statement")
    text = "\n".join(line[len(indent):] if line.strip() else "" for line in part)
    return fill(text, values or {}, f"{name}.{function}")


def fill(text: str, values: dict[str, str], where: str = "a script body") -> str:
    """``text`` with each placeholder (a name in ``values``) written as its value. A placeholder alone
    on its line stands for lines: the value's, indented as the placeholder is (an empty value, no
    line at all); anywhere else it stands for an expression. Names are read as Python tokens, so a
    string or a comment is left as it is. Every ``SLOT_`` name must have a value, and every value a place."""
    names = _names(text)
    unfilled = sorted({n for _, _, n in names if n.startswith(SLOT) and n not in values})
    unused = sorted(set(values) - {n for _, _, n in names})
    if unfilled or unused:
        raise RuntimeError(f"{where}: no value for the placeholders {unfilled}, no place for {unused}")
    lines = text.splitlines(keepends=True)
    for row, col, name in reversed(names):  # from the end, so that the places before stay where they are
        if name not in values:
            continue
        line, value = lines[row - 1], values[name]
        if line.strip() == name:
            indent = line[:col]
            lines[row - 1] = "".join((indent + v if v.strip() else v) + "\n" for v in value.split("\n") if value)
        else:
            lines[row - 1] = line[:col] + value + line[col + len(name):]
    return "".join(lines)


@functools.lru_cache(maxsize=32)
def _names_locked(text: str) -> tuple:
    return tuple((*t.start, t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                 if t.type == tokenize.NAME)


def _names(text: str) -> tuple:
    """(row, column, name) of every name token of ``text``, in order (one tokenization of each
    body serves every script; the lock as for ``_parse``)."""
    with _PARSE_LOCK:
        return _names_locked(text)
