"""Python numbers and int lists as program inputs: their values per call, and their first uses.

A program may take Python ints, floats, bools and int lists next to its
tensors (``ir.Input.kind``, ``case.ArgSpec.of_scalar``). Each such input gets
one value per call, drawn here as a *pattern* across calls, because what
Dynamo does with a number depends on how it changes:

- equal at every call: it stays a constant of the graph (an ``EQUALS_MATCH``
  guard), never recompiles;
- changing: automatic dynamic compiles it as a constant first, then, once
  it changed, as a symbol (``specialize_int``/``specialize_float`` and
  ``dynamic=True`` change that; ``schedule.DYNAMO_FLAGS`` draws them);
- 0 or 1 first (ints 0 and 1 are often special), negative where the use
  takes it, large (a slice bound past the end, a factory size of 64, a
  factor of 1000).

Values come first, uses second: like every statement, a use is executed in
every world (``generate.Builder.try_statement``) and kept only if it is
valid with each world's value, so each use below says which values it takes
and the drawn sequence keeps every world valid. An int input "tied" to a
size symbol (equal to ``x.size(0)`` at every call, or half of it) feeds
sizes like a size does: ``x.view(k, -1)``, ``x.narrow(0, 0, k)``,
``torch.zeros(k, n)``; the builder also lists int inputs among its int
variables, so specs and size-level Python may use them in place of a size
read. An int list is drawn for its use, from each world's shapes: a view
target, a permutation, repeat counts, reduced dims, pads.

Op specs use the inputs wherever torch takes a number or a size, through
``specs.base.ParamContext.scalar``; ``number_partner`` gives binary ops a
number input as their second operand. ``draw_int_dynamism`` draws the one
"mark" torch 2.13 has for an int argument: ``torch.compiler.config``'s
``dynamic_sources`` / ``unbacked_sources`` (the int compiled as a symbol,
backed or unbacked, from its first call on).
"""

from __future__ import annotations

import math
from typing import Optional

import hypothesis.strategies as st

from symfuzz.fuzz.choices import weighted
from symfuzz.fuzz.ir import BranchNode, ExprNode
from symfuzz.fuzz.specs.base import BOOL, FLOAT, ScalarInput

KIND_WEIGHTS = [("int", 6), ("float", 3), ("bool", 2), ("ints", 3)]
MAX_INPUTS_DRAW = 5  # n in [0, 5]; n - 2 inputs (none below 3: most programs take none)

# Value patterns across calls; the first is what shrinking moves toward.
INT_PATTERNS = [("equal", 4), ("vary", 5), ("tied", 5), ("zero-one", 2), ("negative", 2), ("large", 2)]
FLOAT_PATTERNS = [("equal", 4), ("vary", 5), ("zero", 2), ("one", 1), ("negative", 2), ("large", 1)]
SMALL_INTS = [(2, 10), (3, 10), (4, 8), (1, 5), (5, 5), (0, 3), (8, 3), (7, 3), (6, 2)]
NEGATIVE_INTS = [-1, -2, -3, -7]
LARGE_INTS = [33, 64, 100, 1000]
FLOATS = [0.5, 1.5, -2.0, 0.25, 3.0, 1.0, 0.0, -0.5]
LARGE_FLOATS = [1000.0, -1000.0, 256.5]
ATTEMPTS_PER_USE = 4
MAX_MAGNITUDE = 1000  # numbers as operands: big, but no overflow in any dtype we make (float16 included)


# ---------------------------------------------------------------- inputs


def draw_scalar_inputs(b, max_inputs: int) -> None:
    """Add up to ``max_inputs`` Python number / int-list inputs to builder ``b``,
    each with one or two uses drawn at once (an input no use kept is dropped)."""
    if max_inputs <= 0:
        return
    count = min(max(b.draw(st.integers(0, MAX_INPUTS_DRAW)) - 2, 0), max_inputs)
    for _ in range(count):
        kind = weighted(b.draw, KIND_WEIGHTS)
        saved = b.save()
        if not DRAWERS[kind](b):
            b.restore(saved)


def _draw_int_input(b) -> bool:
    values = draw_int_values(b)
    name = b.add_scalar_input("int", values, "k")
    return _uses(b, lambda: _int_use(b, name, values))


def _draw_float_input(b) -> bool:
    values = draw_float_values(b)
    name = b.add_scalar_input("float", values, "f")
    return _uses(b, lambda: _float_use(b, name, values))


def _draw_bool_input(b) -> bool:
    if b.draw(st.booleans()):
        values = (b.draw(st.booleans()),) * b.n_worlds
    else:
        values = tuple(b.draw(st.booleans()) for _ in range(b.n_worlds))
    name = b.add_scalar_input("bool", values, "flag")
    return _uses(b, lambda: _bool_use(b, name, values))


def draw_late_scalar_uses(b) -> None:
    """After the program's other statements: sometimes one more use of each
    number input, on the newest values, so that the numbers reach outputs."""
    values = {s.name: s for s in b.scalar_inputs()}
    for name, scalar in values.items():
        if scalar.kind not in LATE_USES or b.draw(st.booleans()):
            continue
        for _ in range(ATTEMPTS_PER_USE):
            if LATE_USES[scalar.kind](b, name, scalar.values, recent=True):
                break


def _uses(b, use) -> bool:
    """One use, sometimes two; True when at least one was kept."""
    wanted = 1 + (b.draw(st.integers(0, 2)) == 2)
    made = 0
    for _ in range(wanted * ATTEMPTS_PER_USE):
        if made >= wanted:
            break
        made += bool(use())
    return made > 0


def _ops_only(b) -> bool:
    """Under ``--ops`` (GenConfig.ops) the free-form uses of a number, which bring ops of
    their own (pad, topk, repeat ...), give way to branches, the builder's size-level int
    uses and plain arithmetic; int lists, which exist only for such forms, are not drawn."""
    return b.config.ops is not None


# ---------------------------------------------------------------- values


def draw_int_values(b) -> tuple:
    """One int per world, following a pattern (``INT_PATTERNS``)."""
    n = b.n_worlds
    pattern = weighted(b.draw, INT_PATTERNS)
    small = lambda: weighted(b.draw, SMALL_INTS)  # noqa: E731
    if pattern == "equal":
        return (small(),) * n
    if pattern == "tied":  # follows a size symbol: x.view(k, -1), x.narrow(0, 0, k)
        base = b.symbols[b.draw(st.sampled_from(sorted(b.symbols)))]
        how = b.draw(st.sampled_from(["same", "same", "half", "plus1", "minus1"]))
        shift = {"same": lambda v: v, "half": lambda v: v // 2, "plus1": lambda v: v + 1,
                 "minus1": lambda v: max(v - 1, 0)}[how]
        return tuple(shift(v) for v in base)
    values = [small() for _ in range(n)]
    if pattern == "zero-one":
        values[0] = b.draw(st.sampled_from([0, 1]))
    elif pattern == "negative":
        for w in range(n):
            if w == 0 or b.draw(st.booleans()):
                values[w] = b.draw(st.sampled_from(NEGATIVE_INTS))
    elif pattern == "large":
        values[b.draw(st.integers(0, n - 1))] = b.draw(st.sampled_from(LARGE_INTS))
    if pattern == "vary" and n > 1 and len(set(values)) == 1:
        values[-1] += 1
    return tuple(values)


def draw_float_values(b) -> tuple:
    """One float per world, following a pattern (``FLOAT_PATTERNS``)."""
    n = b.n_worlds
    pattern = weighted(b.draw, FLOAT_PATTERNS)
    pick = lambda: b.draw(st.sampled_from(FLOATS))  # noqa: E731
    if pattern == "equal":
        return (pick(),) * n
    values = [pick() for _ in range(n)]
    if pattern == "zero":
        values[0] = 0.0
    elif pattern == "one":
        values[0] = 1.0
    elif pattern == "negative":
        values[0] = b.draw(st.sampled_from([-0.5, -1.5, -3.0]))
    elif pattern == "large":
        values[b.draw(st.integers(0, n - 1))] = b.draw(st.sampled_from(LARGE_FLOATS))
    if pattern == "vary" and n > 1 and len(set(values)) == 1:
        values[-1] += 0.5
    return tuple(float(v) for v in values)


# ---------------------------------------------------------------- uses


RECENT = 3  # a late use takes one of the newest values


def _tensor(b, kinds=None, min_rank=0, recent=False):
    """A live tensor (not sized by values) of one of ``kinds``, drawn (one of
    the newest with ``recent``); or None."""
    pool = [t for t in b.tensors if t.name not in b.unbacked and t.rank >= min_rank
            and (kinds is None or t.kind in kinds)]
    if recent:
        pool = pool[-RECENT:]
    return b.draw(st.sampled_from(pool)) if pool else None


def _expr(b, text: str, saved=None) -> bool:
    """``v = text``, kept if it gives a tensor in every world (else back to ``saved``,
    taken before any size read the text needed was hoisted)."""
    saved = saved or b.save()
    name = b.fresh("v")
    if b.try_statement(ExprNode(name, text), name):
        return True
    b.restore(saved)
    return False


def _branch(b, cond: str, recent=False, saved=None) -> bool:
    """``if cond:`` with arms that give a float value's shape either way."""
    x = _tensor(b, (FLOAT,), recent=recent)
    if x is None:
        if saved is not None:
            b.restore(saved)
        return False
    arms = ["{x} * 2", "{x} - 1", "torch.relu({x})", "{x}.sin()", "{x} + {x}.sum()", "{x}.abs()"]
    a, c = b.draw(st.sampled_from(arms)), b.draw(st.sampled_from(arms))
    saved = saved or b.save()
    name = b.fresh("v")
    if b.try_statement(BranchNode(name, cond, a.format(x=x.name), c.format(x=x.name)), name) \
            and b.tensors[-1].shapes == x.shapes:
        return True
    b.restore(saved)
    return False


def _threshold(b, values) -> str:
    """A number between the values (calls take both sides), or one of them."""
    distinct = sorted(set(values))
    mid = distinct[len(distinct) // 2]
    return repr(b.draw(st.sampled_from([mid, distinct[0], mid - 1 if isinstance(mid, int) else mid - 0.5])))


def _int_use(b, k: str, values: tuple, recent=False) -> bool:
    """A statement that takes int input ``k`` where torch takes a number or a size."""
    lo, hi = min(values), max(values)
    if b.draw(st.integers(0, 5)) == 0 or (_ops_only(b) and b.draw(st.booleans())):
        t = _threshold(b, values)
        cond = b.draw(st.sampled_from([f"{k} > {t}", f"{k} % 2 == 0", f"{k} == {t}", f"{k} <= {t}"]))
        return _branch(b, cond, recent)
    if not recent and (b.draw(st.integers(0, 5)) == 0 or _ops_only(b)):
        return bool(b.draw_int_use(k))
    if _ops_only(b):
        return False
    x = _tensor(b, recent=recent)
    if x is None:
        return False
    forms = []
    small = abs(lo) <= MAX_MAGNITUDE and abs(hi) <= MAX_MAGNITUDE
    if x.kind != BOOL and small:
        forms += ["{x} * {k}", "{x} + {k}", "torch.clamp({x}, min={k})", "torch.full_like({x}, {k})",
                  "torch.where({x} > {k}, {x}, {x} * 2)"]
    if x.rank >= 1:
        forms += ["torch.roll({x}, {k}, {d})", "{x}[..., :{k}]", "{x}[{k}:]"]
    if x.rank >= 2:
        forms += ["{x}.tril({k})"]
    if x.kind == FLOAT and max(abs(lo), abs(hi)) <= 3:
        forms += ["torch.round({x}, decimals={k})", "torch.pow({x}.abs() + 0.5, {k})"]
    if lo >= 0 and hi <= 64:
        forms += ["{x}.new_zeros({k})", "torch.zeros({k}, {n}, dtype={x}.dtype, device={x}.device)",
                  "torch.arange({k}, device={x}.device) * {x}.sum()"]
        if x.rank >= 1 and hi <= 8:
            forms += ["F.pad({x}, ({k}, {k}))", "F.pad({x}, (1, {k}))"]
        if hi <= 4:
            forms += ["{x}.repeat({reps})"]
    if not forms:
        return False
    form = b.draw(st.sampled_from(forms))
    d = b.draw(st.integers(0, x.rank - 1)) if x.rank else 0
    sizes = x.sizes(d) if x.rank else (1,) * b.n_worlds
    # Forms valid only where k fits a dim of x in every world.
    if x.rank >= 1 and all(0 <= v <= n for v, n in zip(values, sizes)) and b.draw(st.booleans()):
        fitted = ["{x}.narrow({d}, 0, {k})", "{x}.narrow({d}, {k}, {n} - {k})"]
        if x.kind != BOOL:
            fitted.append("torch.topk({x}, {k}, dim={d}).values")
        form = b.draw(st.sampled_from(fitted))
    elif x.rank >= 1 and all(v > 0 and n % v == 0 for v, n in zip(values, sizes)) and b.draw(st.booleans()):
        form = b.draw(st.sampled_from(["{x}.unflatten({d}, ({k}, -1))", "{x}.reshape({k}, -1)" if d == 0 else
                                       "{x}.unflatten({d}, (-1, {k}))"]))
    saved = b.save()
    n = b.size_ref(x, d) if "{n}" in form and x.rank else "2"
    reps = ", ".join([k] + ["1"] * max(x.rank - 1, 0))
    return _expr(b, form.format(x=x.name, k=k, d=d, n=n, reps=reps), saved)


def _float_use(b, f: str, values: tuple, recent=False) -> bool:
    """A statement that takes float input ``f`` where torch takes a number."""
    if b.draw(st.integers(0, 5)) == 0:
        cond = b.draw(st.sampled_from([f"{f} > {_threshold(b, values)}", f"{f} == 0.0", f"{f} < 1.0"]))
        return _branch(b, cond, recent)
    x = _tensor(b, (FLOAT,), recent=recent)
    if x is None:
        return False
    if _ops_only(b):
        return _expr(b, b.draw(st.sampled_from(["{x} * {f}", "{x} + {f}"])).format(x=x.name, f=f))
    forms = ["{x} * {f}", "{x} + {f}", "torch.clamp({x}, min={f})", "torch.clamp({x}, {f}, {f} + 1.0)",
             "torch.full_like({x}, {f})", "{x}.masked_fill({x} > {f}, 0.0)", "torch.where({x} > 0, {x}, {f})",
             "torch.lerp({x}, {x}.sin(), {f})", "F.leaky_relu({x}, {f})", "{x} * math.sqrt(abs({f}) + 1.0)"]
    if max(abs(v) for v in values) <= 3:
        forms += ["torch.pow({x}.abs() + 0.5, {f})"]
    return _expr(b, b.draw(st.sampled_from(forms)).format(x=x.name, f=f))


def _bool_use(b, flag: str, values: tuple, recent=False) -> bool:
    """A statement steered by bool input ``flag``: a branch, or a flag argument."""
    if b.draw(st.booleans()) or _ops_only(b):
        saved = b.save()  # the predicate may hoist size reads
        cond = b.draw(st.sampled_from([flag, flag, f"not {flag}"]))
        if b.draw(st.integers(0, 3)) == 0:
            pred = b.draw_size_predicate()
            if pred is not None and " or " not in pred and " and " not in pred:
                cond = f"{cond} {b.draw(st.sampled_from(['and', 'or']))} {pred}"
        return _branch(b, cond, recent, saved)
    x = _tensor(b, min_rank=1, recent=recent)
    if x is None:
        return False
    d = b.draw(st.integers(0, x.rank - 1))
    forms = []
    if x.kind != BOOL:
        forms += ["torch.sort({x}, dim={d}, descending={flag}).values", "{x} * {flag}"]
    if x.kind == FLOAT:
        forms += ["torch.cumsum({x}, dim={d}) if {flag} else {x}", "{x}.sin() if not {flag} else {x}"]
    if len(set(values)) == 1:  # the result's rank must not change between worlds
        forms += ["torch.sum({x}, dim={d}, keepdim={flag})", "torch.any({x}, {d}, keepdim={flag})"]
    if not forms:  # a bool tensor, and the flag changes between worlds: no use keeps the rank
        return False
    return _expr(b, b.draw(st.sampled_from(forms)).format(x=x.name, d=d, flag=flag))


# ---------------------------------------------------------------- int lists


def _draw_ints_input(b) -> bool:
    """An int-list input drawn for its use, from each world's shapes."""
    if _ops_only(b):
        return False
    use = b.draw(st.sampled_from(["view", "view", "permute", "repeat", "dims", "new", "pad"]))
    x = _tensor(b, min_rank=1)
    if x is None:
        return False
    values, prefix, form = DRAW_LIST[use](b, x)
    if values is None:
        return False
    name = b.add_scalar_input("ints", values, prefix)
    return _expr(b, form.format(x=x.name, l=name))


def _list_view(b, x):
    """A view target made from each world's own shape (so ``x.view(l)`` holds everywhere)."""
    if 0 in x.numels():
        return None, "", ""
    forms = ["flat", "unit", "lead_rest"] + (["merge", "reverse"] if x.rank >= 2 else [])
    how = b.draw(st.sampled_from(forms))
    out = []
    for shape in x.shapes:
        shape = list(shape)
        if how == "flat":
            out.append([math.prod(shape)])
        elif how == "unit":
            out.append(shape + [1])
        elif how == "lead_rest":
            out.append([shape[0], -1])
        elif how == "merge":
            out.append([shape[0] * shape[1]] + shape[2:])
        else:
            out.append(list(reversed(shape)))
    if len(out[0]) > 8:
        return None, "", ""
    contiguous = all(b.envs[w][x.name].is_contiguous() for w in range(b.n_worlds))
    op = b.draw(st.sampled_from(["view", "reshape"])) if contiguous else "reshape"
    return tuple(out), "shape", "{x}." + op + "({l})"


def _list_permute(b, x):
    r = x.rank
    if r < 2:
        return None, "", ""
    if b.draw(st.booleans()):
        order = list(b.draw(st.permutations(list(range(r)))))
        values = tuple(list(order) for _ in range(b.n_worlds))
    else:  # a new order at each call
        values = tuple(list(b.draw(st.permutations(list(range(r))))) for _ in range(b.n_worlds))
    return values, "order", "{x}.permute({l})"


def _list_repeat(b, x):
    count = x.rank + b.draw(st.integers(0, 1))
    same = b.draw(st.booleans())
    first = [b.draw(st.integers(1, 3)) for _ in range(count)]
    values = tuple(list(first) if same or w == 0 else [b.draw(st.integers(1, 3)) for _ in range(count)]
                   for w in range(b.n_worlds))
    return values, "reps", "{x}.repeat({l})"


def _list_dims(b, x):
    r = x.rank
    k = b.draw(st.integers(1, r))
    values = tuple(sorted(b.draw(st.permutations(list(range(r))))[:k]) for _ in range(b.n_worlds))
    form = b.draw(st.sampled_from(["torch.sum({x}, dim={l})", "{x}.sum({l}, keepdim=True)", "torch.flip({x}, {l})"]))
    return values, "dims", form


def _list_new(b, x):
    k = b.draw(st.integers(1, 3))
    values = tuple([weighted(b.draw, SMALL_INTS) for _ in range(k)] for _ in range(b.n_worlds))
    form = b.draw(st.sampled_from(["{x}.new_zeros({l})", "torch.ones({l}, dtype={x}.dtype, device={x}.device)",
                                   "torch.full({l}, 1.5, device={x}.device)"]))
    return values, "sizes", form


def _list_pad(b, x):
    k = b.draw(st.integers(1, min(x.rank, 3)))
    values = tuple([b.draw(st.integers(0, 3)) for _ in range(2 * k)] for _ in range(b.n_worlds))
    return values, "pads", "F.pad({x}, {l})"


DRAW_LIST = {"view": _list_view, "permute": _list_permute, "repeat": _list_repeat, "dims": _list_dims,
             "new": _list_new, "pad": _list_pad}
DRAWERS = {"int": _draw_int_input, "float": _draw_float_input, "bool": _draw_bool_input, "ints": _draw_ints_input}
LATE_USES = {"int": _int_use, "float": _float_use, "bool": _bool_use}


# ---------------------------------------------------------------- hooks the builder calls


def number_partner(b, divides: bool = False) -> Optional[str]:
    """The name of an int or float input for a binary op's second operand
    (``x * k``), drawn; None (most of the time) for a literal number.
    ``divides``: the op divides by it, so no world may have 0."""
    fits = [s for s in b.scalar_inputs() if s.kind in ("int", "float")
            and all(abs(v) <= MAX_MAGNITUDE and (not divides or v != 0) for v in s.values)]
    if not fits or b.draw(st.integers(0, 2)) != 2:
        return None
    return b.draw(st.sampled_from(fits)).name


# How often a program with int inputs compiles them as symbols from the first call on.
INT_DYNAMISM_RARITY = 5


def draw_int_dynamism(draw, scalars: list[ScalarInput], config: dict) -> None:
    """Sometimes mark int inputs dynamic from their first call on, the way
    torch 2.13 allows for an int argument: ``torch.compiler.config.
    dynamic_sources`` (or ``unbacked_sources``) naming its source, ``L['k1']``.
    (``torch._dynamo.mark_dynamic`` takes tensors only.) Adds to ``config``
    (a schedule's, group "compiler")."""
    ints = [s.name for s in scalars if s.kind == "int"]
    if not ints or draw(st.integers(0, INT_DYNAMISM_RARITY - 1)) != INT_DYNAMISM_RARITY - 1:
        return
    chosen = [name for name in ints if draw(st.booleans())] or ints[:1]
    flag = "unbacked_sources" if draw(st.integers(0, 3)) == 3 else "dynamic_sources"
    config.setdefault("compiler", {})[flag] = ",".join(f"L['{name}']" for name in chosen)
