"""Factories whose sizes come from another tensor: arange, zeros/ones/full,
new_* and *_like, eye, linspace, masks and position grids.

Every factory consumes sizes read from its operand as size-level Python
(``torch.arange(v3.size(1), device=v3.device)``, ``x0.new_zeros(n4, 3)``,
``torch.full((x0.size(0) // 2, x0.size(1)), 1.5, ...)``): the point is that
dynamic-shape compilation has to carry those sizes into allocations. The
operand is operand 0 (arity 1) so the shape rule can read its shape. Sizes
are the view family's size descriptors. Factories pass ``device=`` from the
operand, so that their results combine with other values in the meta worlds
as in eager. No uninitialized memory (``empty``) and no randomness.
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import ANY_KIND, BOOL, DTYPE_KIND, FLOAT, INT, OpSpec, same_as_first
from symfuzz.fuzz.specs.view import int_input_desc, size_eval, size_src

F = "factory"

DTYPES = ["float32", "float32", "int64", "bool", "float64", "bfloat16", "int32"]


# --------------------------------------------------------------- descriptors


def _desc_candidates(x, consts=(1, 2, 3)):
    out = []
    for e in range(x.rank):
        out += [["d", 0, e]] * 3 + [["div", 0, e, 2]]
        if max(x.sizes(e)) <= 16:
            out.append(["mul", 0, e, 2])
    return out + [["c", k] for k in consts]


# An int input as a factory size: small enough that every world's tensor stays small.
MAX_INT_SIZE = 64


def _draw_descs(ctx, lo=1, hi=3):
    x = ctx.operands[0]
    k = ctx.draw(st.integers(lo, hi))
    cands = _desc_candidates(x)
    descs = [ctx.draw(st.sampled_from(cands)) for _ in range(k)]
    sized = int_input_desc(ctx, lambda vs: all(0 <= v <= MAX_INT_SIZE for v in vs))
    if sized:  # one size from an int input: torch.zeros(k, x.size(1))
        descs[ctx.draw(st.integers(0, k - 1))] = sized[0]
    return descs


def _sizes_shape(shapes, params):
    return tuple(size_eval(d, shapes, params) for d in params["descs"])


def _value(ctx, kind):
    pool = {FLOAT: [1.5, -2.0, 0.25], INT: [3, -1, 7], BOOL: [True, False]}[kind]
    value = ctx.draw(st.sampled_from(pool))
    scalar = ctx.scalar(({FLOAT: "float", INT: "int", BOOL: "bool"}[kind],), lambda vs: all(abs(v) <= 1000 for v in vs))
    return scalar.name if scalar is not None else value


# -------------------------------------------------------------------- params


ARANGE_FORMS = {
    "n": ("{n}", lambda n: n),
    "shift": ("1, {n} + 1", lambda n: n),
    "step2": ("0, {n} * 2, 2", lambda n: n),
    "float": ("{n}, dtype=torch.float32", lambda n: n),
    "half_step": ("0, {n}, 0.5", lambda n: 2 * n),
    "down": ("{n}, 0, -1", lambda n: n),
}


def _arange_params(ctx):
    desc = ctx.draw(st.sampled_from(_desc_candidates(ctx.operands[0])))
    form = ctx.draw(st.sampled_from(sorted(ARANGE_FORMS)))
    n = size_src(ctx, desc, atom=True)
    return {"args": ARANGE_FORMS[form][0].format(n=n), "form": form, "desc": desc}


def _arange_shape(shapes, params):
    return (ARANGE_FORMS[params["form"]][1](size_eval(params["desc"], shapes)),)


def _last_dim_params(ctx):
    x = ctx.operands[0]
    return {"n": ctx.size_ref(x, x.rank - 1)}


def _lt_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.sampled_from(_desc_candidates(x)))
    m = ctx.draw(st.sampled_from(_desc_candidates(x)))
    return {"n": size_src(ctx, d), "m": size_src(ctx, m), "desc": d}


def _lt_shape(shapes, params):
    return (size_eval(params["desc"], shapes),)


def _two_params(ctx):
    descs = _draw_descs(ctx, 2, 2)
    return {"n": size_src(ctx, descs[0]), "m": size_src(ctx, descs[1]), "descs": descs}


def _sizes_params(tuple_form=False, value=False, dtype=False):
    def params(ctx):
        descs = _draw_descs(ctx)
        srcs = [size_src(ctx, d) for d in descs]
        out = {"sizes": "(" + ", ".join(srcs) + ",)" if tuple_form or ctx.draw(st.booleans()) else ", ".join(srcs)}
        out["descs"] = descs
        if dtype:
            choice = ctx.draw(st.sampled_from(["default", "torch", "like"]))
            if choice == "default":  # full() infers the dtype from the value
                out["dtype"], kind = "", ctx.draw(st.sampled_from([FLOAT, INT, BOOL]))
            elif choice == "torch":
                dt = ctx.draw(st.sampled_from(DTYPES))
                out["dtype"], kind = f", dtype=torch.{dt}", DTYPE_KIND[dt]
            else:
                out["dtype"], kind = f", dtype={ctx.operands[0].name}.dtype", ctx.operands[0].kind
            out["v"] = _value(ctx, kind)
        if value and not dtype:
            out["v"] = _value(ctx, ctx.operands[0].kind)
        return out

    return params


def _full_sym_params(ctx):
    out = _sizes_params(tuple_form=True)(ctx)
    x = ctx.operands[0]
    fill = ctx.size_ref(x, ctx.draw(st.integers(0, x.rank - 1)))
    out["fill"] = ctx.draw(st.sampled_from([fill, f"{fill} * 0.5", f"-{fill}"]))
    return out


def _like_params(ctx):
    x = ctx.operands[0]
    dt = ctx.draw(st.sampled_from(["", ", dtype=torch.float32", ", dtype=torch.int64"]))
    kind = {"": x.kind, ", dtype=torch.float32": FLOAT, ", dtype=torch.int64": INT}[dt]
    return {"dtype": dt, "v": _value(ctx, kind)}


def _shape_params(ctx):
    return {"shape": ctx.draw(st.sampled_from(["shape", "size()"])), "fn": ctx.draw(st.sampled_from(["zeros", "ones"]))}


def _eye_params(ctx):
    descs = _draw_descs(ctx, 1, 2)
    return {"sizes": ", ".join(size_src(ctx, d) for d in descs), "descs": descs}


def _eye_shape(shapes, params):
    sizes = [size_eval(d, shapes, params) for d in params["descs"]]
    return (sizes[0], sizes[-1])


def _linspace_params(ctx):
    desc = ctx.draw(st.sampled_from(_desc_candidates(ctx.operands[0])))
    lo, hi = ctx.draw(st.sampled_from([(0, 1), (-1, 1), (0.5, 4.0), (2, -2)]))
    return {"lo": lo, "hi": hi, "n": size_src(ctx, desc), "desc": desc}


def _linspace_shape(shapes, params):
    return (size_eval(params["desc"], shapes),)


def _tril_params(ctx):
    out = _two_params(ctx)
    out["tri"] = ctx.draw(st.sampled_from(["tril", "triu"]))
    out["k"] = ctx.draw(st.sampled_from([0, 1, -1]))
    return out


def _two_shape(shapes, params):
    return tuple(size_eval(d, shapes, params) for d in params["descs"])


def _scalar_tensor_params(ctx):
    x = ctx.operands[0]
    return {"n": ctx.size_ref(x, ctx.draw(st.integers(0, x.rank - 1)))}


def _scalar_shape(shapes, params):
    return ()


def factory(name, template, shape, params, kinds=ANY_KIND, min_rank=1, **kw):
    kw.setdefault("weight", 0.7)
    return OpSpec(name, F, template, arity=1, kinds=kinds, min_rank=min_rank, params=params, shape=shape, **kw)


SPECS = [
    factory("arange", "torch.arange({args}, device={0}.device)", _arange_shape, _arange_params, weight=1.05),
    factory("arange_add", "{0} + torch.arange({n}, device={0}.device)", same_as_first, _last_dim_params),
    factory("arange_lt", "torch.arange({n}, device={0}.device) < {m}", _lt_shape, _lt_params, weight=0.52),
    factory("arange_expand", "torch.arange({n}, device={0}.device).unsqueeze(0).expand({m}, -1)",
            lambda shapes, p: tuple(size_eval(d, shapes, p) for d in reversed(p["descs"])), _two_params, weight=0.52),
    factory("relpos", "torch.arange({n}, device={0}.device)[:, None] - torch.arange({m}, device={0}.device)[None, :]",
            _two_shape, _two_params, weight=0.52),
    factory("zeros", "torch.zeros({sizes}{dtype}, device={0}.device)", _sizes_shape, _sizes_params(dtype=True)),
    factory("ones", "torch.ones({sizes}{dtype}, device={0}.device)", _sizes_shape, _sizes_params(dtype=True)),
    factory("full", "torch.full({sizes}, {v}{dtype}, device={0}.device)", _sizes_shape,
            _sizes_params(tuple_form=True, dtype=True)),
    factory("full_sym", "torch.full({sizes}, {fill}, device={0}.device)", _sizes_shape, _full_sym_params,
            weight=0.52),
    factory("new_zeros", "{0}.new_zeros({sizes})", _sizes_shape, _sizes_params()),
    factory("new_ones", "{0}.new_ones({sizes})", _sizes_shape, _sizes_params(), weight=0.52),
    factory("new_full", "{0}.new_full({sizes}, {v})", _sizes_shape, _sizes_params(tuple_form=True, value=True),
            weight=0.52),
    factory("zeros_like", "torch.zeros_like({0}{dtype})", same_as_first, _like_params, min_rank=0, weight=0.35),
    factory("ones_like", "torch.ones_like({0}{dtype})", same_as_first, _like_params, min_rank=0, weight=0.35),
    factory("full_like", "torch.full_like({0}, {v}{dtype})", same_as_first, _like_params, min_rank=0, weight=0.52),
    factory("zeros_shape", "torch.{fn}({0}.{shape}, dtype={0}.dtype, device={0}.device)", same_as_first,
            _shape_params, min_rank=0, weight=0.35),
    factory("eye", "torch.eye({sizes}, device={0}.device)", _eye_shape, _eye_params, weight=0.52),
    factory("linspace", "torch.linspace({lo}, {hi}, {n}, device={0}.device)", _linspace_shape, _linspace_params,
            weight=0.35),
    factory("tri_mask", "torch.ones({n}, {m}, dtype=torch.bool, device={0}.device).{tri}({k})", _two_shape,
            _tril_params, weight=0.52),
    factory("size_tensor", "torch.tensor({n}, device={0}.device)", _scalar_shape, _scalar_tensor_params, weight=0.35),
]
