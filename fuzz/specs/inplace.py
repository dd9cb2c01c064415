"""In-place updates, rendered as bare statements (``effect=True``).

They mutate operand 0, which is often a program input (input mutation is a
feature the compiler must get right) or a view of one: ``x0[0].mul_(2)``,
``x0.transpose(0, 1).add_(v3.transpose(0, 1))``, ``x0[x1 > 0] = 1.5``,
``x0[1:] = x0[:-1].clone()``. Indices are built in the source (a reversed
``arange`` is a permutation, so ``index_add_`` never accumulates twice into
one element).

Validity that meta execution does not check is ensured here:

* eager CPU raises when the written tensor has internally overlapping memory
  (an expanded input, stride 0) or partially overlaps a source operand; meta
  tensors carry the strides but the check is skipped, so the spec inspects the
  per-world meta tensors of the builder and, where a write would overlap,
  renders a statement that raises (``x.size(99); ...``) so it is discarded;
* in-place results must be castable to the written dtype (``int.mul_(0.5)``
  raises on CPU, not on meta): scalars are drawn by the operand's kind, and
  a tensor source of a higher category is cast to the written dtype.
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import ANY_KIND, BOOL, FLOAT, FLOATING, INT, NUMERIC, OpSpec, cast_suffix, no_params
from symfuzz.fuzz.specs.view import BAD_DIM, neg_dim

F = "inplace"


# ------------------------------------------------------------- write checks


def _world_tensors(ctx, name):
    """The meta tensor of ``name`` in every world."""
    return ctx.world_values(name)


def _layout(t):
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset())


def writable(ctx, no_alias=False) -> bool:
    """Can operand 0 be written in every world without overlap errors?

    TensorIterator ops accept a source that is exactly the written tensor but
    not a partial overlap; index ops (``no_alias``) reject any shared memory.
    """
    # deferred: generation needs torch, reading a finding (which looks specs up) does not
    import torch

    target = _world_tensors(ctx, ctx.operands[0].name)
    for t in target:
        if torch._debug_has_internal_overlap(t) == 1:
            return False
    for other in ctx.operands[1:]:
        for t, u in zip(target, _world_tensors(ctx, other.name)):
            same_storage = t.untyped_storage()._cdata == u.untyped_storage()._cdata
            if same_storage and (no_alias or _layout(t) != _layout(u)):
                return False
    return True


def checked(params_fn, no_alias=False):
    """Wrap a params function: add ``reject`` ("" or a raising prefix)."""

    def params(ctx):
        out = params_fn(ctx)
        out["reject"] = "" if writable(ctx, no_alias) else f"{ctx.operands[0].name}.size({BAD_DIM}); "
        return out

    return params


def cast_to_first(ctx, i=1, exact=False):
    """Source casting operand ``i`` to operand 0's dtype where in-place promotion would fail."""
    if len(ctx.operands) <= i:
        return ""
    # deferred: generation needs torch, reading a finding (which looks specs up) does not
    import torch
    # deferred: the runtime imports torch too (see above)
    from symfuzz.fuzz.script_runtime import DTYPES

    a, b = DTYPES[ctx.operands[0].dtype], DTYPES[ctx.operands[i].dtype]
    if a == b or (not exact and torch.can_cast(torch.promote_types(a, b), a)):
        return ""
    return cast_suffix(ctx.operands[i].dtype, ctx.operands[0].dtype)


def scalar(ctx, floats=(2, 0.5, -1.5, 3), ints=(2, -1, 3), bools=(True, False)):
    kind = ctx.operands[0].kind
    pool = {FLOAT: floats, INT: ints, BOOL: bools}[kind]
    return ctx.draw(st.sampled_from(list(pool)))


# ------------------------------------------------------------------- params


def _binary_params(ctx):
    out = {"c1": cast_to_first(ctx)}
    out["alpha"] = scalar(ctx, floats=(1, 2, -0.5), ints=(1, 2, -1))
    return out


def _scalar_params(ctx):
    return {"v": scalar(ctx)}


def _clamp_params(ctx):
    if ctx.operands[0].kind == FLOAT:
        lo = ctx.draw(st.sampled_from([-1.0, -0.5, 0.0]))
        hi = lo + ctx.draw(st.sampled_from([0.5, 1.0, 2.0]))
    else:
        lo = ctx.draw(st.sampled_from([-3, 0, 1]))
        hi = lo + ctx.draw(st.sampled_from([1, 4]))
    form = ctx.draw(st.sampled_from(["both", "min", "max"]))
    args = {"both": f"{lo}, {hi}", "min": f"min={lo}", "max": f"max={hi}"}[form]
    return {"args": args}


def _unary_params(ctx):
    forms = ["neg_()", "abs_()", "square_()"]
    if ctx.operands[0].kind == FLOAT:
        forms += ["sigmoid_()", "tanh_()", "sin_()", "floor_()", "pow_(2)", "clamp_(-5, 5).exp_()"]
    return {"call": ctx.draw(st.sampled_from(forms))}


def _relu_params(ctx):
    return {"form": ctx.draw(st.sampled_from(["{x}.relu_()", "torch.relu_({x})", "F.relu({x}, inplace=True)"]))}


def _index_params(exact=True, value=False):
    def params(ctx):
        x = ctx.operands[0]
        d = ctx.draw(st.integers(0, x.rank - 1))
        n = ctx.size_ref(x, d)
        out = {"dim": neg_dim(ctx, d, x.rank), "n": n, "c1": cast_to_first(ctx, exact=exact)}
        out["alpha"] = scalar(ctx, floats=(1, 2, -0.5), ints=(1, 2, -1), bools=(True,))
        if value:
            out["v"] = scalar(ctx)
        return out

    return params


def _mask_params(ctx):
    return {"v": scalar(ctx), "cmp": ctx.draw(st.sampled_from(["> 0", "< 0", "!= 0"]))}


SLICE_FORMS = ["1:", ":-1", "::2", "1::2", ":{n} // 2", "{n} // 2:", ":1", "-1:"]


def _setitem_slice_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    form = ctx.draw(st.sampled_from(SLICE_FORMS))
    if "{n}" in form:
        form = form.format(n=ctx.size_ref(x, d))
    if d == x.rank - 1 and d > 0 and ctx.draw(st.booleans()):
        index = f"..., {form}"
    else:
        index = ":, " * d + form
    return {"index": index, "v": scalar(ctx)}


def _shift_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    pre = ":, " * d
    return {"pre": pre, "k": ctx.draw(st.sampled_from([1, 2]))}


def _select_params(ctx):
    x = ctx.operands[0]
    dims = [d for d in range(x.rank) if x.min_size(d) >= 1]
    if not dims:
        return {"sel": f".select({BAD_DIM}, 0)", "v": scalar(ctx)}
    d = ctx.draw(st.sampled_from(dims))
    idx = ctx.draw(st.sampled_from(["0", "-1", "{n} // 2", "{n} - 1"]))
    if "{n}" in idx:
        idx = idx.format(n=ctx.size_ref(x, d))
    if d == 0 and ctx.draw(st.booleans()):
        sel = f"[{idx}]"
    else:
        sel = f".select({neg_dim(ctx, d, x.rank)}, {idx})"
    return {"sel": sel, "v": scalar(ctx)}


def _transpose_params(ctx):
    x = ctx.operands[0]
    a, b = ctx.draw(st.permutations(list(range(x.rank))))[:2]
    op = ctx.draw(st.sampled_from(["add_", "mul_", "sub_", "copy_"]))
    return {"a": neg_dim(ctx, a, x.rank), "b": neg_dim(ctx, b, x.rank), "op": op, "c1": cast_to_first(ctx)}


def _narrow_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    n = ctx.size_ref(x, d)
    start, length = ctx.draw(st.sampled_from([("0", "{n} // 2"), ("{n} // 2", "{n} - {n} // 2"), ("0", "{n}")]))
    return {"dim": neg_dim(ctx, d, x.rank), "start": start.format(n=n), "length": length.format(n=n)}


def _strided_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    step = ctx.draw(st.sampled_from([2, 3]))
    start = ctx.draw(st.sampled_from(["", "1"]))
    if d == x.rank - 1 and ctx.draw(st.booleans()):
        index = f"..., {start}::{step}"
    else:
        index = ":, " * d + f"{start}::{step}"
    return {"index": index, "v": scalar(ctx)}


def _diagonal_params(ctx):
    x = ctx.operands[0]
    a, b = ctx.draw(st.permutations(list(range(x.rank))))[:2]
    return {"a": a, "b": b, "offset": ctx.draw(st.sampled_from([0, 1, -1])), "v": scalar(ctx)}


def _cumsum_params(ctx):
    x = ctx.operands[0]
    r = max(x.rank, 1)
    return {"dim": neg_dim(ctx, ctx.draw(st.integers(0, r - 1)), r)}


def _ternary_params(ctx):
    return {"c1": cast_to_first(ctx, 1), "c2": cast_to_first(ctx, 2), "w": ctx.draw(st.sampled_from([0.25, 0.5, 1.0]))}


def _chain_params(ctx):
    out = {"c1": cast_to_first(ctx)}
    out["v"] = scalar(ctx)
    return out


def inplace(name, template, arity=1, kinds=NUMERIC, params=None, no_alias=False, **kw):
    kw.setdefault("weight", 1.0)
    return OpSpec(name, F, "{reject}" + template, arity=arity, kinds=kinds,
                  params=checked(params or no_params, no_alias), effect=True, **kw)


SPECS = [
    # arithmetic with a tensor (broadcast into the written shape) or a scalar
    inplace("add_", "{0}.add_({1}{c1}, alpha={alpha})", arity=2, partner="broadcast", params=_binary_params),
    inplace("add_scalar_", "{0}.add_({v})", params=_scalar_params, weight=0.75),
    inplace("sub_", "{0}.sub_({1}{c1})", arity=2, partner="broadcast", params=_binary_params, weight=0.75),
    inplace("mul_", "{0}.mul_({1}{c1})", arity=2, partner="broadcast", params=_binary_params),
    inplace("mul_scalar_", "{0}.mul_({v})", params=_scalar_params, weight=0.75),
    inplace("div_", "{0}.div_({1}{c1}.abs() + 1)", arity=2, kinds=FLOATING, partner="broadcast",
            params=_binary_params, weight=0.5, backward="ties"),
    inplace("iadd", "{0} += {1}{c1}", arity=2, partner="broadcast", params=_binary_params, weight=0.75),
    inplace("imul_scalar", "{0} *= {v}", params=_scalar_params, weight=0.5),
    inplace("addcmul_", "{0}.addcmul_({1}{c1}, {2}{c2}, value={w})", arity=3, kinds=FLOATING, partner="broadcast",
            params=_ternary_params, weight=0.5),
    inplace("lerp_", "{0}.lerp_({1}{c1}, {w})", arity=2, kinds=FLOATING, partner="broadcast", params=_ternary_params,
            weight=0.5),
    inplace("chain_", "{0}.mul_({v}).add_({1}{c1})", arity=2, partner="broadcast", params=_chain_params, weight=0.5),
    # unary
    inplace("clamp_", "{0}.clamp_({args})", params=_clamp_params, weight=0.75, backward="ties"),
    inplace("relu_", "{form}", params=lambda ctx: {"form": _relu_params(ctx)["form"].format(x=ctx.operands[0].name)},
            weight=0.75, backward="ties"),
    inplace("unary_", "{0}.{call}", params=_unary_params, backward="ties"),
    inplace("cumsum_", "{0}.cumsum_({dim})", params=_cumsum_params, weight=0.5),
    # overwrite
    inplace("zero_", "{0}.zero_()", kinds=ANY_KIND, weight=0.5),
    inplace("fill_", "{0}.fill_({v})", kinds=ANY_KIND, params=_scalar_params, weight=0.5),
    inplace("copy_", "{0}.copy_({1})", arity=2, kinds=ANY_KIND, partner="broadcast", weight=0.75),
    inplace("masked_fill_", "{0}.masked_fill_({1} {cmp}, {v})", arity=2, kinds=ANY_KIND, partner="broadcast",
            partner_kinds=NUMERIC, params=_mask_params, backward="ties"),
    inplace("setitem_mask", "{0}[{1} {cmp}] = {v}", arity=2, kinds=ANY_KIND, partner="same", partner_kinds=NUMERIC,
            params=_mask_params, weight=0.75, backward="ties"),
    # indexed updates (indices built in the source; a reversed arange is a permutation)
    inplace("index_add_", "{0}.index_add_({dim}, torch.arange({n}, device={0}.device).flip(0), {1}{c1}, alpha={alpha})",
            arity=2, min_rank=1, partner="same", params=_index_params(), no_alias=True, weight=0.75),
    inplace("index_copy_", "{0}.index_copy_({dim}, torch.arange({n}, device={0}.device).flip(0), {1}{c1})", arity=2,
            kinds=ANY_KIND, min_rank=1, partner="same", params=_index_params(), no_alias=True, weight=0.5),
    inplace("index_fill_", "{0}.index_fill_({dim}, torch.arange(0, {n}, 2, device={0}.device), {v})", kinds=ANY_KIND,
            min_rank=1, params=_index_params(value=True), weight=0.5),
    # writes through views and slices
    inplace("setitem_slice", "{0}[{index}] = {v}", kinds=ANY_KIND, min_rank=1, params=_setitem_slice_params),
    inplace("setitem_shift", "{0}[{pre}{k}:] = {0}[{pre}:-{k}].clone()", kinds=ANY_KIND, min_rank=1,
            params=_shift_params, weight=0.5),
    inplace("select_mul_", "{0}{sel}.mul_({v})", min_rank=1, params=_select_params, weight=0.75),
    inplace("transpose_update_", "{0}.transpose({a}, {b}).{op}({1}{c1}.transpose({a}, {b}))", arity=2, min_rank=2,
            partner="same", params=_transpose_params, weight=0.75),
    inplace("narrow_zero_", "{0}.narrow({dim}, {start}, {length}).zero_()", kinds=ANY_KIND, min_rank=1,
            params=_narrow_params, weight=0.5),
    inplace("strided_fill_", "{0}[{index}].fill_({v})", kinds=ANY_KIND, min_rank=1, params=_strided_params,
            weight=0.5),
    inplace("diagonal_fill_", "{0}.diagonal({offset}, {a}, {b}).fill_({v})", kinds=ANY_KIND, min_rank=2,
            params=_diagonal_params, weight=0.5),
    inplace("view_add_", "{0}.view(-1).add_({v})", params=_scalar_params, weight=0.5),
]
