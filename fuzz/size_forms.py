"""Wider size-level Python: conversions of sizes, facts relating the sizes of
different inputs, and size arithmetic fed into op arguments.

Each ``draw_*`` function appends statements through the ``Builder``
(``fuzz/generate.py``), which keeps a statement only when it runs in every
world; none of them imports the generator. What they add to the generator's
size-level Python:

- conversions: ``float(n)``, ``int(n / 2)``, ``bool(n)``, a comparison used as
  a number (``(n > 3) + 1``), ``math.floor``/``math.ceil``/``math.sqrt``,
  ``torch.sym_max``/``sym_min``/``sym_float``/``sym_int``, as ints that feed
  later sizes or as scales of tensors;
- ``torch._check``/``assert`` of equalities and inequalities between sizes of
  different values that hold at every call, also between a size read from
  values (``.item()``, an unbacked symbol when compiled) and a plain one, each
  followed by a use that needs the fact (``y.narrow(e, 0, n)``);
- size arithmetic as op arguments: ``repeat_interleave`` repeats, ``roll``
  shifts, ``flip`` dims, ``narrow`` starts and lengths, ``split`` sizes.
"""

from __future__ import annotations

import re

import hypothesis.strategies as st

from symfuzz.fuzz.ir import CheckNode, ExprNode, SizeNode
from symfuzz.fuzz.specs.base import FLOAT

# Ints computed from sizes through conversions; {n} a size, {m} another, {k} a
# threshold between the worlds' values of {n} (calls take different sides).
CONVERSION_SIZES = [
    "int({n} / 2)",
    "int(float({n}) * 1.5)",
    "math.floor({n} / 3)",
    "math.ceil({n} / 2)",
    "math.floor(math.sqrt({n}))",
    "math.ceil(math.sqrt({n} + 1))",
    "torch.sym_max({n}, {m})",
    "torch.sym_min({n}, {m})",
    "torch.sym_max({n}, 2)",
    "torch.sym_min({n}, 3)",
    "int(bool({n})) + {n}",
    "({n} > {k}) + 1",
    "({n} >= {m}) * {n}",
    "torch.sym_int(torch.sym_float({n}) / 2)",
    "int(torch.sym_float({n}) * 0.5 + 0.5)",
]
# Tensors scaled by a converted size.
CONVERSION_SCALES = [
    "{x} * float({n})",
    "{x} * torch.sym_float({n})",
    "{x} / (float({n}) + 1.0)",
    "{x} * (({n} > {k}) + 1)",
    "{x} * bool({n})",
    "{x} * int({n} / 2)",
    "{x} / math.ceil(math.sqrt({n} + 1))",
    "{x} * torch.sym_max({n}, 1)",
    "{x} * float({n}) ** 0.5",
    "{x} * ({n} >= {m})",
    "{x} / torch.sym_float(torch.sym_max({n}, {m}) + 1)",
]
# Size arithmetic as op arguments; {n} is the size of dim {d} of {x}, {m} another size.
SIZE_ARGUMENTS = [
    "{x}.repeat_interleave({n} % 3 + 1, dim={d})",
    "torch.repeat_interleave({x}, {m} // 2 + 1, dim={d})",
    "{x}.roll({n} // 2, {d})",
    "torch.roll({x}, shifts=({n} + 1) // 3, dims={d})",
    "{x}.roll(-{m}, {d})",
    "{x}.flip({x}.dim() - 1)",
    "{x}.flip({d}).roll({m} - 1, {d})",
    "{x}.narrow({d}, {n} // 3, {n} - {n} // 3)",
    "{x}.narrow({d}, {n} // 2, ({n} + 1) // 2)",
    "{x}.narrow({d}, 1, {n} - 2)",
    "{x}.narrow({d}, {n} - {n} // 2, {n} // 2)",
    "torch.split({x}, [{n} // 2, {n} - {n} // 2], dim={d})[1]",
    "{x}.split(({n} + 1) // 2, dim={d})[0]",
    "{x}.split([1, {n} - 1], {d})[1]",
]
# A count read from values: an unbacked int when compiled, within [0, x.size(d)].
COUNTS = [
    "({x}.flatten()[:{x}.size({d})] > 0).sum().item()",
    "({x}.flatten()[:{x}.size({d})] != 0).sum().item()",
    "int(({x}.flatten()[:{x}.size({d})] < 0).sum().item())",
]
# Uses of such a count ``{u}`` checked against ``{y}.size({e})``.
COUNT_USES = [
    "{y}.narrow({e}, 0, {u})",
    "{y}.narrow({e}, {y}.size({e}) - {u}, {u})",
    "torch.split({y}, [{u}, {y}.size({e}) - {u}], dim={e})[0]",
    "{y}.new_zeros({u})",
]


def _threshold(values) -> int:
    distinct = sorted(set(values))
    return distinct[len(distinct) // 2]


def _other_size(b, sized) -> str:
    u = b.draw(st.sampled_from(sized))
    return b.size_ref(u, b.draw(st.integers(0, u.rank - 1)))


def draw_conversion(b) -> bool:
    """``n = math.ceil(x.size(0) / 2)``, ``v = x * float(n)``, ``(n > 3) + 1``...:
    sizes converted to floats, bools and back, as later sizes or as scales."""
    sized = b.backed_sized()
    if not sized:
        return False
    saved = b.save()
    t = b.draw(st.sampled_from(sized))
    d = b.draw(st.integers(0, t.rank - 1))
    n = b.size_ref(t, d)
    k = _threshold(t.sizes(d))
    floats = [x for x in b.tensors if x.kind == FLOAT and x.name not in b.unbacked]
    if floats and b.draw(st.booleans()):
        x = b.draw(st.sampled_from(floats))
        form = b.draw(st.sampled_from(CONVERSION_SCALES))
        m = _other_size(b, sized) if "{m}" in form else ""
        name = b.fresh("v")
        node = ExprNode(name, form.format(x=x.name, n=n, m=m, k=k))
        if not b.try_statement(node, name) or b.tensors[-1].name != name or b.tensors[-1].dtype != x.dtype:
            b.restore(saved)
            return False
        return True
    form = b.draw(st.sampled_from(CONVERSION_SIZES))
    m = _other_size(b, sized) if "{m}" in form else ""
    name = b.fresh("n")
    if not b.try_statement(SizeNode(name, form.format(n=n, m=m, k=k)), name) or name not in b.ints:
        b.restore(saved)
        return False
    if b.draw(st.integers(0, 2)):
        b.draw_int_use(name)
    return True


def _facts(a: str, c: str, va, vc) -> list[str]:
    """Facts about sizes ``a`` and ``c`` (sources) that hold in every world (values ``va``, ``vc``)."""
    pairs = list(zip(va, vc))
    facts = [f"{a} + {c} >= {c}", f"max({a}, {c}) >= {a}"]  # true of any sizes: torch must know it statically
    if va == vc:
        facts += [f"{a} == {c}"] * 3
    if all(x <= y for x, y in pairs):
        facts += [f"{a} <= {c}", f"{c} >= {a}"]
    if all(x < y for x, y in pairs):
        facts.append(f"{a} < {c}")
    if all(x >= y for x, y in pairs):
        facts += [f"{a} >= {c}", f"{c} <= {a}"]
    if all(x != y for x, y in pairs):
        facts.append(f"{a} != {c}")
    if all(2 * x >= y for x, y in pairs):
        facts.append(f"{a} * 2 >= {c}")
    if all(x + 1 >= y for x, y in pairs):
        facts.append(f"{a} + 1 >= {c}")
    return facts


def draw_cross_check(b) -> bool:
    """``torch._check(x0.size(0) <= x1.size(1))`` or ``assert``: a fact relating
    sizes of two different values that holds at every call; then, where the
    fact makes it valid, ``x0.narrow(0, 0, x1.size(1))``. Sometimes the first
    size is read from values instead (``draw_unbacked_check``)."""
    if b.draw(st.integers(0, 2)) == 0:
        return draw_unbacked_check(b)
    sized = b.backed_sized()
    atoms = [(t, d) for t in sized for d in range(t.rank)]
    if len({t.name for t, _ in atoms}) < 2:
        return False
    saved = b.save()
    t, d = b.draw(st.sampled_from(atoms))
    others = [(u, e) for u, e in atoms if u.name != t.name]
    u, e = b.draw(st.sampled_from(others))
    a, c = b.size_ref(t, d), b.size_ref(u, e)
    cond = b.draw(st.sampled_from(_facts(a, c, t.sizes(d), u.sizes(e))))
    form = b.draw(st.sampled_from(["check", "check", "assert"]))
    if not b.try_statement(CheckNode(form, cond), None):
        b.restore(saved)
        return False
    if all(x >= y for x, y in zip(t.sizes(d), u.sizes(e))) and b.draw(st.booleans()):
        # x.size(d) >= u.size(e) everywhere: take u's length of x (compiled, the fact says it fits)
        use = b.draw(st.sampled_from(["{x}.narrow({d}, 0, {c})", "{x}.narrow({d}, {a} - {c}, {c})"]))
        name = b.fresh("v")
        b.try_statement(ExprNode(name, use.format(x=t.name, d=d, a=a, c=c)), name)
    return True


def draw_unbacked_check(b) -> bool:
    """``u = (x.flatten()[:x.size(d)] > 0).sum().item()`` (unbacked when compiled),
    ``torch._check(u >= 0)``, ``torch._check(u <= y.size(e))`` for a plain size
    of another value ``y`` at least ``x.size(d)`` at every call, then a use of
    ``u`` as a size of ``y`` (``y.narrow(e, 0, u)``, a split...)."""
    sized = b.backed_sized()
    if not sized:
        return False
    saved = b.save()
    x = b.draw(st.sampled_from(sized))
    d = b.draw(st.integers(0, x.rank - 1))
    bound = x.sizes(d)
    partners = [(y, e) for y in sized for e in range(y.rank)
                if y.name != x.name and all(s >= v for s, v in zip(y.sizes(e), bound))]
    if not partners:
        partners = [(x, d)]
    y, e = b.draw(st.sampled_from(partners))
    u = b.fresh("n")
    if not b.try_statement(SizeNode(u, b.draw(st.sampled_from(COUNTS)).format(x=x.name, d=d)), u) or u not in b.ints:
        b.restore(saved)
        return False
    b.unbacked.add(u)
    hint = ("check", f"{u} >= 0")  # (torch deprecates _check_is_size)
    ref = b.draw(st.sampled_from([f"{y.name}.size({e})", f"{y.name}.shape[{e}]"]))
    if not (b.try_statement(CheckNode(*hint), None) and b.try_statement(CheckNode("check", f"{u} <= {ref}"), None)):
        b.restore(saved)
        return False
    use = b.draw(st.sampled_from(COUNT_USES)).format(y=y.name, e=e, u=u)
    name = b.fresh("v")
    if not b.try_statement(ExprNode(name, use), name):
        b.restore(saved)
        return False
    return True


def draw_size_arguments(b) -> bool:
    """Size arithmetic as an op's argument: ``x.repeat_interleave(n % 3 + 1, dim=d)``,
    ``x.roll(n // 2, d)``, ``x.narrow(d, n // 3, n - n // 3)``, ``split`` sizes..."""
    sized = b.backed_sized()
    if not sized:
        return False
    saved = b.save()
    x = b.draw(st.sampled_from(sized))
    d = b.draw(st.integers(0, x.rank - 1))
    form = b.draw(st.sampled_from(SIZE_ARGUMENTS))
    n = b.size_ref(x, d) if "{n}" in form else ""
    m = _other_size(b, sized) if "{m}" in form else ""
    name = b.fresh("v")
    if not b.try_statement(ExprNode(name, form.format(x=x.name, d=d, n=n, m=m)), name) or b.tensors[-1].name != name:
        b.restore(saved)
        return False
    return True


# Text in a statement that reads a Python number from a tensor's values.
_SCALAR_READS = re.compile(r"\.(item|tolist)\(\)")


def required_config(program) -> dict:
    """The Dynamo flags the program's size-level statements need: ``.item()`` in a
    size, check or expression statement is traced (not a graph break) only with
    ``capture_scalar_outputs`` (ops declare theirs in their specs)."""
    for node in program.body:
        text = " ".join(str(getattr(node, f, "")) for f in ("expr", "cond"))
        if isinstance(node, (SizeNode, ExprNode, CheckNode)) and _SCALAR_READS.search(text):
            return {"capture_scalar_outputs": True}
    return {}
