"""Pointwise ops: unary, binary (broadcasting, type promotion), ternary, casts.

Renderings keep inputs inside each op's domain (``log(|x| + 1)``) so that
values stay finite: a NaN born from a domain error tells us nothing about
the compiler.
"""

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import (ANY_KIND, BOOL, FLOATING, INT, NUMERIC, OpSpec, broadcast, cast_suffix, same_as_first)

F = "pointwise"


def unary(name, template, kinds=FLOATING, **kw):
    return OpSpec(name, F, template, arity=1, kinds=kinds, shape=same_as_first, **kw)


def binary(name, template, kinds=NUMERIC, partner="scalar-ok", **kw):
    return OpSpec(name, F, template, arity=2, kinds=kinds, partner=partner, shape=broadcast, **kw)


def ternary(name, template, kinds=FLOATING, **kw):
    return OpSpec(name, F, template, arity=3, kinds=kinds, partner="broadcast", shape=broadcast, **kw)


def _number(ctx, default, kinds=("int", "float"), limit=None):
    """``default``, or the name of a number input (whose magnitude stays
    within ``limit`` at every call): torch takes either."""
    scalar = ctx.scalar(kinds, lambda vs: limit is None or all(abs(v) <= limit for v in vs))
    return scalar.name if scalar is not None else default


def _clamp_bounds(ctx):
    lo = ctx.draw(st.sampled_from([-1.0, -0.5, 0.0]))
    gap = ctx.draw(st.sampled_from([0.5, 1.0, 2.0]))
    bound = _number(ctx, None)
    if bound is not None:  # bounds that move with a number input, still lo <= hi
        return {"lo": bound, "hi": f"{bound} + {gap}"}
    return {"lo": lo, "hi": lo + gap}


def _leaky(ctx):
    return {"slope": _number(ctx, ctx.draw(st.sampled_from([0.01, 0.2, 1.5])), ("float",))}


def _cast(ctx):
    dtype = ctx.draw(st.sampled_from(["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]))
    # Always a real cast in the source, even to the same dtype (a no-op `.to`).
    return {"dtype": dtype, "cast": cast_suffix(ctx.operands[0].dtype, dtype) or f".to(torch.{dtype})"}


def _pow_exp(ctx):
    return {"e": _number(ctx, ctx.draw(st.sampled_from([2, 3, 0.5, 1.5, -1.0])), limit=3)}


def _lerp_w(ctx):
    return {"w": _number(ctx, ctx.draw(st.sampled_from([0.0, 0.25, 0.5, 1.0])), ("float",), limit=2)}


def _alpha(ctx):
    return {"alpha": _number(ctx, ctx.draw(st.sampled_from([1, 2, -1])), ("int",), limit=1000)}


SPECS = [
    # unary, floating
    unary("abs", "torch.abs({0})", kinds=NUMERIC, backward="ties"),
    unary("neg", "torch.neg({0})", kinds=NUMERIC),
    unary("relu", "torch.relu({0})", kinds=NUMERIC, backward="ties"),
    unary("sigmoid", "torch.sigmoid({0})"),
    unary("tanh", "torch.tanh({0})"),
    unary("exp", "torch.exp({0}.clamp(-20, 20))"),
    unary("expm1", "torch.expm1({0}.clamp(-20, 20))"),
    unary("log", "torch.log({0}.abs() + 1)", backward="ties"),
    unary("log1p", "torch.log1p({0}.abs())", backward="ties"),
    unary("sqrt", "torch.sqrt({0}.abs())", backward="ties"),
    unary("rsqrt", "torch.rsqrt({0}.abs() + 1)", backward="ties"),
    unary("reciprocal", "torch.reciprocal({0}.abs() + 1)", backward="ties"),
    unary("sin", "torch.sin({0})"),
    unary("cos", "torch.cos({0})"),
    unary("erf", "torch.erf({0})"),
    unary("floor", "torch.floor({0})", backward="ties"),
    unary("ceil", "torch.ceil({0})", backward="ties"),
    unary("round", "torch.round({0})", backward="ties"),
    unary("trunc", "torch.trunc({0})", backward="ties"),
    unary("frac", "torch.frac({0})", backward="ties"),
    unary("sign", "torch.sign({0})", kinds=NUMERIC, backward="ties"),
    unary("square", "torch.square({0})", kinds=NUMERIC),
    unary("gelu", "F.gelu({0})"),
    unary("silu", "F.silu({0})"),
    unary("softplus", "F.softplus({0})"),
    unary("elu", "F.elu({0})"),
    unary("leaky_relu", "F.leaky_relu({0}, {slope})", params=_leaky, backward="ties"),
    unary("clamp", "torch.clamp({0}, {lo}, {hi})", kinds=NUMERIC, params=_clamp_bounds, backward="ties"),
    unary("pow", "torch.pow({0}.abs() + 0.5, {e})", params=_pow_exp, backward="ties"),
    unary("logical_not", "torch.logical_not({0})", kinds=ANY_KIND),
    unary("bitwise_not", "torch.bitwise_not({0})", kinds=frozenset({INT, BOOL})),
    unary("isnan", "torch.isnan({0})"),
    unary("to", "{0}{cast}", kinds=ANY_KIND, params=_cast, weight=1.5, backward="ties"),
    # binary, with broadcasting and type promotion
    binary("add", "torch.add({0}, {1}, alpha={alpha})", params=_alpha, weight=2.0),
    binary("sub", "torch.sub({0}, {1})", weight=1.5),
    binary("mul", "torch.mul({0}, {1})", weight=2.0),
    binary("div", "torch.div({0}, {1}.abs() + 1)", kinds=FLOATING, partner="broadcast", backward="ties"),
    binary("div_scalar", "torch.div({0}, {1})", kinds=FLOATING, partner="scalar"),
    binary("maximum", "torch.maximum({0}, {1})", partner="broadcast", backward="ties"),
    binary("minimum", "torch.minimum({0}, {1})", partner="broadcast", backward="ties"),
    binary("atan2", "torch.atan2({0}, {1})", kinds=FLOATING, partner="broadcast"),
    binary("remainder", "torch.remainder({0}, {1})", kinds=NUMERIC, partner="scalar", backward="ties"),
    binary("floor_divide", "torch.floor_divide({0}, {1})", kinds=NUMERIC, partner="scalar", backward="ties"),
    binary("eq", "torch.eq({0}, {1})", kinds=ANY_KIND, backward="ties"),
    binary("lt", "torch.lt({0}, {1})", backward="ties"),
    binary("ge", "torch.ge({0}, {1})", backward="ties"),
    binary("logical_and", "torch.logical_and({0}, {1})", kinds=ANY_KIND, partner="broadcast"),
    binary("logical_or", "torch.logical_or({0}, {1})", kinds=ANY_KIND, partner="broadcast"),
    binary("bitwise_xor", "torch.bitwise_xor({0}, {1})", kinds=frozenset({INT, BOOL}), partner="broadcast"),
    binary("copysign", "torch.copysign({0}, {1})", kinds=FLOATING, partner="broadcast", backward="ties"),
    # ternary
    ternary("addcmul", "torch.addcmul({0}, {1}, {2}, value=0.5)"),
    ternary("lerp", "torch.lerp({0}, {1}, {2}.sigmoid())"),
    OpSpec("lerp_scalar", F, "torch.lerp({0}, {1}, {w})", arity=2, kinds=FLOATING, partner="same",
           shape=same_as_first, params=_lerp_w),
]
