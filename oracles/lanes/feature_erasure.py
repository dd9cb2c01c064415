"""Erasing names and numbers from what torch produced: the pure half of compile features.

Each helper turns one thing a compile left (a sympy guard, an Inductor index expression,
a graph-break message, a ShapeEnv source name, a count) into a short string that keeps its
kind and structure and drops every name and every number but 0, 1 and -1
(``oracles.lanes.compile_features`` collects them). The sympy walks are remembered across
calls: torch repeats its expressions, within a compile and across cases.
"""

from __future__ import annotations

import functools
import math
import re

import sympy

MAX_CHARS = 160  # an erased expression longer than this is cut
MAX_DEPTH = 6  # deeper subexpressions erase to "_"
MAX_NODES = 400  # nodes of one index expression walked
CACHED = 8192  # erased expressions and index forms remembered across collectors (torch reuses them)
INFINITIES = {"Infinity": "oo", "IntInfinity": "oo", "ComplexInfinity": "oo", "NegativeInfinity": "-oo",
              "NegativeIntInfinity": "-oo"}

# Symbol name prefixes (torch.utils._sympy.symbol): sizes, unbacked ints, floats,
# precomputed sizes; and temporaries of indirect indexing. Everything else in an index
# expression is a loop index variable.
SIZE_PREFIXES = ("s", "u", "ps", "zf", "zuf")
INDIRECT_PREFIXES = ("tmp", "indirect")
COMMUTATIVE = {"Min", "Max", "And", "Or", "Eq", "Ne"}
RENAMED = {"Equality": "Eq", "Unequality": "Ne"}
# Order relations, written with the smaller side first: (operator, whether to swap the sides).
RELATIONS = {"StrictLessThan": ("<", False), "LessThan": ("<=", False), "StrictGreaterThan": ("<", True),
             "GreaterThan": ("<=", True)}
# Which argument of an index function is its divisor, modulus or bound.
ROLES = {
    "ModularIndexing": ((1, "divisor"), (2, "modulus")),
    "FloorDiv": ((1, "divisor"),),
    "CleanDiv": ((1, "divisor"),),
    "CeilDiv": ((1, "divisor"),),
    "IntTrueDiv": ((1, "divisor"),),
    "FloatTrueDiv": ((1, "divisor"),),
    "Mod": ((1, "modulus"),),
    "PythonMod": ((1, "modulus"),),
}
# Graph-break kinds and guards: one line, names and numbers erased.
QUOTED_RE = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"")
TORCH_NAME_RE = re.compile(r"^[`'\"](torch|aten|prims)\.[\w.]*(\(\))?[`'\"]$")  # a torch API's name, not the user's
DIGITS_RE = re.compile(r"\d+")
SOURCE_PROPERTY_RE = re.compile(r"\.(size|stride)\(\)\[\d+\]$|\.storage_offset\(\)$")


def number_token(value) -> str:
    """0, 1 and -1 as themselves, infinities as ``oo``/``-oo``, every other number ``c``."""
    name = type(value).__name__
    if name in INFINITIES:
        return INFINITIES[name]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "c"
    if number in (math.inf, -math.inf):
        return "oo" if number > 0 else "-oo"
    return {0.0: "0", 1.0: "1", -1.0: "-1"}.get(number, "c")


def symbol_token(symbol) -> str:
    """``u`` for an unbacked int, ``f`` for a float symbol, ``s`` for any other."""
    name = (symbol.name if isinstance(symbol, sympy.Symbol) else str(symbol)).lower()
    if name.startswith(("zf", "zuf")):
        return "f"
    return "u" if name.startswith("u") else "s"


def erase(expr) -> str:
    """``expr``'s structure with symbols and numbers erased: ``Eq(Mod(s0, 4), 0)`` is
    ``Eq(Mod(s,c),0)``. Commutative operands are sorted, so the text is canonical."""
    return _cached(_erase_top, expr)


def _cached(function, expr):
    """``function(expr)``, remembered across collectors (Inductor and the ShapeEnv repeat
    their expressions, within a compile and across cases)."""
    try:
        return _CACHES[function](expr)
    except TypeError:  # unhashable: computed each time
        return function(expr)


def _erase_top(expr) -> str:
    text = _erase(expr, 0)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def _erase(expr, depth: int) -> str:
    if depth > MAX_DEPTH:
        return "_"
    if isinstance(expr, bool) or expr is sympy.true or expr is sympy.false:
        return str(bool(expr))
    if isinstance(expr, (int, float)):
        return number_token(expr)
    if not isinstance(expr, sympy.Basic):
        return type(expr).__name__
    if expr.is_Symbol:
        return symbol_token(expr)
    if expr.is_Number:
        return number_token(expr)
    args = [_erase(a, depth + 1) for a in expr.args]
    name = RENAMED.get(type(expr).__name__, type(expr).__name__)
    if expr.is_Add:
        return "+".join(sorted(args, key=_numbers_last))
    if expr.is_Mul:
        return "*".join(sorted((f"({a})" if "+" in a else a for a in args), key=_numbers_last))
    if expr.is_Pow:
        return "**".join(f"({a})" if ("+" in a or "*" in a) else a for a in args)
    if name in RELATIONS and len(args) == 2:
        operator, swap = RELATIONS[name]
        left, right = reversed(args) if swap else args
        return f"{left} {operator} {right}"
    if name in COMMUTATIVE:
        args = sorted(args, key=_numbers_last)
    return f"{name}({','.join(args)})"


def _numbers_last(text: str) -> tuple:
    return text in ("0", "1", "-1", "c", "oo", "-oo"), text


def index_forms(expr) -> frozenset:
    """The index forms in one Inductor index expression: each function with the kind of
    its divisor, modulus or bound (``FloorDiv[const-divisor]``, ``Max[symbolic-bound]``),
    ``affine[symbolic-stride]`` for a loop variable times a size, ``indirect`` for a load
    through a temporary."""
    return _cached(_index_forms, expr)


def _index_forms(expr) -> frozenset:
    found: set[str] = set()
    _visit_index(expr, found, [MAX_NODES])
    return frozenset(found)


def _visit_index(node, found: set, budget: list) -> tuple[bool, bool]:
    """Walk ``node`` once, adding its forms to ``found``; (holds a size symbol, holds a
    loop variable)."""
    if budget[0] <= 0 or not isinstance(node, sympy.Basic) or node.is_Number:
        return False, False
    budget[0] -= 1
    if node.is_Symbol:
        name = node.name.lower()
        if name.startswith(INDIRECT_PREFIXES):
            found.add("indirect")
        return (True, False) if name.startswith(SIZE_PREFIXES) else (False, True)
    kids = [_visit_index(a, found, budget) for a in node.args]
    name = type(node).__name__
    if name in ROLES:
        for position, role in ROLES[name]:
            if position < len(kids):
                found.add(f"{name}[{_operand_kind(node.args[position], kids[position])}-{role}]")
    elif name in ("Min", "Max"):
        found.update(f"{name}[{_operand_kind(a, k)}-bound]" for a, k in zip(node.args, kids))
    elif node.is_Mul:
        if any(index for _, index in kids):
            if any(size and not index for size, index in kids):
                found.add("affine[symbolic-stride]")
            if any(a.is_Number and a < 0 for a in node.args):
                found.add("affine[negative-stride]")
    elif getattr(node, "is_Function", False):
        found.add(name)
    return any(size for size, _ in kids), any(index for _, index in kids)


def _operand_kind(expr, symbols: tuple[bool, bool]) -> str:
    """What a divisor, modulus or bound is: zero, one, const, symbolic (holds a size
    symbol) or index (only loop variables)."""
    if getattr(expr, "is_Number", False):
        return {"0": "zero", "1": "one"}.get(number_token(expr), "const")
    size, index = symbols
    return "symbolic" if size else "index" if index else "const"


_CACHES = {function: functools.lru_cache(maxsize=CACHED, typed=True)(function) for function in (_erase_top, _index_forms)}


def graph_break_kind(key: str) -> str:
    """A graph break's first line, numbers and quoted names erased (but a torch API's:
    ``Call to `torch._dynamo.graph_break()` `` stays)."""
    line = str(key).strip().splitlines()[0] if str(key).strip() else ""
    line = QUOTED_RE.sub(lambda m: m.group(0) if TORCH_NAME_RE.match(m.group(0)) else "?", line)
    return DIGITS_RE.sub("#", line)[:80]


def bucket(count: int) -> str:
    """0, 1, 2-3, 4-7 or 8+."""
    if count <= 1:
        return str(max(count, 0))
    return "2-3" if count < 4 else "4-7" if count < 8 else "8+"


def source_kind(name: str) -> tuple[str, str]:
    """(base, kind) of a ShapeEnv source name: ``L['x'].size()[0]`` is (``L['x']``, size);
    a plain local (a Python int) is (its name, value)."""
    match = SOURCE_PROPERTY_RE.search(name)
    if match is None:
        return name, "value"
    kind = match.group(1) or "storage_offset"
    return name[: match.start()], kind
