"""Data-dependent ops: outputs whose shape, or sizes, come from tensor values.

``nonzero``, ``masked_select``, boolean-mask indexing and ``unique`` give
tensors whose length depends on the data; ``.item()`` and ``.tolist()``
turn values into Python numbers that then feed a scalar use or a size
(``new_zeros(n)``, ``narrow``/``split`` by ``n``). Under ``torch.compile``
these become *unbacked* symbols: Dynamo traces them only with
``capture_dynamic_output_shape_ops`` / ``capture_scalar_outputs`` (each spec
declares the flags it needs in ``dynamo_config``), and sizes read from
values need ``torch._check`` / ``torch._check_is_size`` hints, which the
templates put before the expression.

No spec here has a ``shape`` rule (``shape=None``): the output shape depends
on the values, so it cannot be derived from input shapes. The generator
validates these statements on each world's real seeded CPU inputs, the very
values the schedule's calls use, so the per-world shapes it records are the
ones eager sees.

Masks compare with constants (``x > 0``) rather than between computed
values, and ``unique`` is always ``sorted=True``: compiled code may round a
computed float differently than eager by an ulp, which only changes a mask
where a value sits exactly on the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import BOOL, FLOAT, INT, NUMERIC, OpSpec

F = "datadep"

SHAPES = {"capture_dynamic_output_shape_ops": True}
SCALARS = {"capture_scalar_outputs": True}

# A mask from the operand: a suffix making ``{0}{cmp}`` a bool tensor.
COMPARISONS = {
    FLOAT: [" > 0", " > 0", " < 0.5", " >= -0.25"],
    INT: [" > 0", " != 0", " % 2 == 0", " >= 2"],
    BOOL: ["", "", ".logical_not()"],
}


@dataclass(frozen=True)
class DataDepSpec(OpSpec):
    """A spec whose params may themselves be template text.

    Params here hold source with ``{0}`` (the operand) and ``{out}`` (the
    value's name, for helper variables such as ``{out}_n``), so rendering
    formats twice: params into the template, then operand and name into
    the result. Param text must therefore escape literal braces.
    """

    def render(self, args, params) -> str:
        return self.template.format(*args, **params).format(*args, **params)


def _cmp(ctx) -> str:
    return ctx.draw(st.sampled_from(COMPARISONS[ctx.operands[0].kind]))


def _mask_params(ctx):
    return {"cmp": _cmp(ctx)}


def _nonzero_params(ctx):
    form = ctx.draw(st.sampled_from(["torch.nonzero({m})", "({m}).nonzero()", "torch.argwhere({m})"]))
    return {"call": form.format(m="{0}" + _cmp(ctx))}


def _as_tuple_params(ctx):
    r = ctx.operands[0].rank
    return {"cmp": _cmp(ctx), "i": ctx.draw(st.integers(0, r - 1))}


def _rows_params(ctx):
    """A mask over all dims but the last: ``x[(x > 0).any(-1)]`` keeps whole rows."""
    return {"cmp": _cmp(ctx), "reduce": ctx.draw(st.sampled_from([".any(-1)", ".all(-1)"]))}


UNIQUE_FORMS = [
    ("", ""),
    ("", ""),
    (", return_counts=True", "[1]"),
    (", return_inverse=True", "[0]"),
    (", return_inverse=True", "[1]"),  # the inverse has the input's shape: data-dependent values, static shape
]


def _unique_params(ctx):
    kw, pick = ctx.draw(st.sampled_from(UNIQUE_FORMS))
    return {"kw": kw, "pick": pick}


def _unique_dim_params(ctx):
    r = ctx.operands[0].rank
    return {"dim": ctx.draw(st.integers(0, r - 1))}


ITEM_SCALAR_FORMS = [".amax()", ".amin()", ".sum()", "[..., :1].sum()", ".abs().amax()"]


def _item_scalar_params(ctx):
    return {"red": ctx.draw(st.sampled_from(ITEM_SCALAR_FORMS))}


# (``max(..., default=0)`` would be simpler, but Dynamo breaks the graph on ``default=``.)
TOLIST_FOLDS = ["sum({0}.flatten()[:{k}].tolist())", "max([0, *{0}.flatten()[:{k}].tolist()])"]


def _tolist_params(ctx):
    """A Python number from a few elements' ``.tolist()`` used as a scalar."""
    fold = ctx.draw(st.sampled_from(TOLIST_FOLDS))
    return {"fold": fold.replace("{k}", str(ctx.draw(st.integers(1, 3))))}


def _hint(ctx, n: str) -> str:
    """``torch._check_is_size(n)`` or its newer spelling ``torch._check(n >= 0)``."""
    return ctx.draw(st.sampled_from([f"torch._check_is_size({n})", f"torch._check({n} >= 0)"]))


ITEM_SIZE_USES = [
    "{0}.new_zeros({n})",
    "{0}.new_ones({n}, 2)",
    "torch.arange({n}, device={0}.device)",
    "{0}.new_zeros({n} * 2 + 1)",
    "torch.full(({n}, 1), 0.5, device={0}.device)",
]


def _item_size_params(ctx):
    """``n = (x > 0).sum().item()``, a size hint, then a tensor of size ``n``."""
    n = "{out}_n"
    use = ctx.draw(st.sampled_from(ITEM_SIZE_USES))
    return {"cmp": _cmp(ctx), "hint": _hint(ctx, n), "use": use.replace("{n}", n)}


def _count_along(ctx) -> tuple[int, str, str]:
    """A dim ``d`` and source counting a mask over ``x.size(d)`` leading elements:
    a data-dependent size known to lie in [0, x.size(d)]."""
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    count = f"({{0}}.flatten()[:{{0}}.size({d})]{_cmp(ctx)}).sum().item()"
    return d, count, ctx.draw(st.sampled_from(["lt", "lt", "none"]))


SPLIT_USES = {
    "split0": "torch.split({{0}}, [{n}, {{0}}.size({d}) - {n}], dim={d})[0]",
    "split1": "torch.split({{0}}, [{n}, {{0}}.size({d}) - {n}], dim={d})[1]",
    "narrow_head": "{{0}}.narrow({d}, 0, {n})",
    "narrow_tail": "{{0}}.narrow({d}, {{0}}.size({d}) - {n}, {n})",
    "slice": "{{0}}[{colons}:{n}]",
}


def _split_params(ctx):
    """Split or narrow ``x`` along ``d`` at a size read from its values.

    The size always gets a ``_check_is_size`` (or ``>= 0``) hint; the
    ``<= x.size(d)`` hint is added where a split needs it (the sections must
    sum to the size) and sometimes elsewhere, so that narrow and slicing are
    also compiled without it (torch then asserts the bound at run time).
    """
    d, count, upper = _count_along(ctx)
    n = "{out}_n"
    use = ctx.draw(st.sampled_from(sorted(SPLIT_USES)))
    lines = [f"{n} = {count}", _hint(ctx, n)]
    if upper == "lt" or use.startswith("split") or use == "narrow_tail":
        lines.append(f"torch._check({n} <= {{0}}.size({d}))")
    expr = SPLIT_USES[use].format(d=d, n=n, colons=":, " * d)
    return {"lines": "\n".join(lines), "expr": expr}


# Each spec is drawn a little more often than an average op: the family is
# small, and values sized by data are what this family exists to exercise.
WEIGHT = 1.5


def _sized(name, template, weight=WEIGHT, **kw) -> DataDepSpec:
    """A spec whose output sizes come from values (``value_sized``)."""
    return DataDepSpec(name, F, template, value_sized=True, weight=weight, **kw)


SPECS = [
    _sized("nonzero", "{call}", params=_nonzero_params, dynamo_config=SHAPES,
           notes="(k, rank) int64 indices of the true elements; k is data-dependent", backward="ties"),
    _sized("nonzero_as_tuple", "torch.nonzero({0}{cmp}, as_tuple=True)[{i}]", min_rank=1, params=_as_tuple_params,
           dynamo_config=SHAPES, weight=0.75, backward="ties"),
    _sized("masked_select", "torch.masked_select({0}, {0}{cmp})", params=_mask_params, dynamo_config=SHAPES, backward="ties"),
    _sized("bool_mask_index", "{0}[{0}{cmp}]", min_rank=1, params=_mask_params, dynamo_config=SHAPES,
           notes="x[x > 0]: a 1-D tensor of the selected elements", backward="ties"),
    _sized("bool_mask_rows", "{0}[({0}{cmp}){reduce}]", min_rank=2, params=_rows_params, dynamo_config=SHAPES,
           weight=1.0, backward="ties"),
    _sized("unique", "torch.unique({0}, sorted=True{kw}){pick}", params=_unique_params, dynamo_config=SHAPES, backward="undefined"),
    _sized("unique_dim", "torch.unique({0}, sorted=True, dim={dim})", min_rank=1, params=_unique_dim_params,
           dynamo_config=SHAPES, weight=0.5, backward="undefined"),
    DataDepSpec("item_scalar", F, "{0} * {0}{red}.item()", kinds=NUMERIC, params=_item_scalar_params,
                dynamo_config=SCALARS, weight=WEIGHT, notes=".item() of a reduction used as a Python scalar", backward="ties"),
    DataDepSpec("tolist_scalar", F, "{0} * {fold}", kinds=NUMERIC, params=_tolist_params, dynamo_config=SCALARS,
                weight=0.75, backward="ties"),
    _sized("item_size", "{out}_n = ({0}{cmp}).sum().item()\n{hint}\n{use}", params=_item_size_params,
           dynamo_config=SCALARS, notes=".item() of a count used as a size, with a _check_is_size hint", backward="ties"),
    _sized("split_by_item", "{lines}\n{expr}", min_rank=1, params=_split_params, dynamo_config=SCALARS,
           notes="split/narrow/slice at a size read from values, with _check hints", backward="ties"),
]
