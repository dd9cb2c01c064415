"""Reductions and scans: sum/mean/amax/argmax/var/std/prod/norm/any/all,
softmax and log_softmax, logsumexp, cumulative ops, sort and topk.

Where a reduction has no identity (amax, argmax, max(dim), logsumexp, ...) or
would divide by zero (mean, var, std), the reduced dim is drawn among the dims
that are nonzero in *every* world; full reductions of that kind need a nonempty
operand. Eager CPU raises for a few of these where meta does not (``max(x, 0)``
over a size-0 dim), so the spec guarantees validity by construction instead of
relying on the meta check. ``var``/``std`` use ``correction=1`` only where the
reduced size is at least 2 in every world (else the result is NaN).
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import ANY_KIND, FLOATING, NUMERIC, OpSpec, same_as_first, scalar_value, wrap_dim
from symfuzz.fuzz.specs.view import BAD_DIM, neg_dim

F = "reduction"


# ----------------------------------------------------------------- helpers


def _reduced(shape, dims, keepdim):
    rank = len(shape)
    if rank == 0:
        return ()
    ds = {wrap_dim(d, rank) for d in dims}
    return tuple(1 if i in ds else s for i, s in enumerate(shape) if keepdim or i not in ds)


def _dims_with(x, lo=0, hi=None):
    """Dims whose size is in [lo, hi] in every world (rank 0: the one pseudo-dim)."""
    if x.rank == 0:
        return [0] if lo <= 1 and (hi is None or hi >= 1) else []
    return [d for d in range(x.rank) if x.min_size(d) >= lo and (hi is None or max(x.sizes(d)) <= hi)]


def _pick_dim(ctx, lo=0, hi=None):
    """A dim (maybe negatively spelled) whose size lies in [lo, hi] in all worlds, or BAD_DIM."""
    x = ctx.operands[0]
    dims = _dims_with(x, lo, hi)
    if not dims:
        return BAD_DIM
    d = ctx.draw(st.sampled_from(dims))
    return neg_dim(ctx, d, max(x.rank, 1))


def _flag(ctx, constant=False):
    """A bool input's name for a flag argument, or None. ``constant``: only one
    that is the same at every call (``keepdim`` changes the result's rank,
    which must be the same in every world)."""
    flag = ctx.scalar(("bool",), lambda vs: not constant or len(set(vs)) == 1)
    return flag.name if flag is not None else None


def _dim_params(lo=0, hi=None, keepdim=True):
    def params(ctx):
        out = {"dim": _pick_dim(ctx, lo, hi)}
        out["keepdim"] = ctx.draw(st.booleans()) if keepdim else False
        if keepdim:
            out["keepdim"] = _flag(ctx, constant=True) or out["keepdim"]
        return out

    return params


def _keepdim(params) -> bool:
    keepdim = params.get("keepdim", False)
    return scalar_value(params, keepdim) if isinstance(keepdim, str) else keepdim


def _dim_shape(shapes, params):
    return _reduced(shapes[0], [params["dim"]], _keepdim(params))


def _full_shape(shapes, params):
    return ()


def _dims_params(ctx):
    x = ctx.operands[0]
    k = ctx.draw(st.integers(2, x.rank))
    dims = sorted(ctx.draw(st.permutations(list(range(x.rank))))[:k])
    dims = [neg_dim(ctx, d, x.rank) for d in dims]
    return {"dims": dims, "keepdim": ctx.draw(st.booleans())}


def _dims_shape(shapes, params):
    return _reduced(shapes[0], params["dims"], _keepdim(params))


def _var_params(ctx):
    x = ctx.operands[0]
    dims2 = _dims_with(x, 2)
    correction = ctx.draw(st.sampled_from([0, 1])) if dims2 else 0
    dim = _pick_dim(ctx, correction + 1)
    return {"dim": dim, "correction": correction, "keepdim": ctx.draw(st.booleans())}


def _var_all_params(ctx):
    ok2 = min(ctx.operands[0].numels()) >= 2
    return {"correction": ctx.draw(st.sampled_from([0, 1])) if ok2 else 0}


def _norm_params(ctx):
    ord_ = ctx.draw(st.sampled_from(["2", "1", "math.inf", "3"]))
    lo = 1 if ord_ == "math.inf" else 0
    return {"ord": ord_, "dim": _pick_dim(ctx, lo), "keepdim": ctx.draw(st.booleans())}


def _softmax_params(ctx):
    dtype = ""
    if ctx.operands[0].dtype in ("float16", "bfloat16") and ctx.draw(st.booleans()):
        dtype = ", dtype=torch.float32"
    return {"dim": _pick_dim(ctx), "dtype": dtype}


def _scan_params(lo=0, hi=None):
    def params(ctx):
        return {"dim": _pick_dim(ctx, lo, hi)}

    return params


def _sort_params(ctx):
    out = {"dim": _pick_dim(ctx), "descending": ctx.draw(st.booleans())}
    out["descending"] = _flag(ctx) or out["descending"]
    return out


TOPK_FORMS = {
    "half": (lambda n: n // 2, "{n} // 2"),
    "all": (lambda n: n, "{n}"),
    "min2": (lambda n: min(n, 2), "min({n}, 2)"),
}


def _topk_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    form = ctx.draw(st.sampled_from(sorted(TOPK_FORMS)))
    k = TOPK_FORMS[form][1].format(n=ctx.size_ref(x, d))
    out = {"k": k, "form": form, "dim": neg_dim(ctx, d, x.rank), "at": d, "largest": ctx.draw(st.booleans())}
    scalar = ctx.scalar(("int",), lambda vs: all(0 <= v <= n for v, n in zip(vs, x.sizes(d))))
    if scalar is not None:  # k from an int input
        out.update(k=scalar.name, form="int:" + scalar.name)
    out["largest"] = _flag(ctx) or out["largest"]
    return out


def _topk_shape(shapes, params):
    s = list(shapes[0])
    d = params["at"]
    form = params["form"]
    s[d] = scalar_value(params, form[4:]) if form.startswith("int:") else TOPK_FORMS[form][0](s[d])
    return tuple(s)


# Many reduction specs apply to almost any operand; per-spec weights stay low so
# the family does not crowd out the others.
def red(name, template, kinds=FLOATING, params=None, shape=_dim_shape, **kw):
    kw.setdefault("weight", 0.6)
    return OpSpec(name, F, template, arity=1, kinds=kinds, params=params or _dim_params(), shape=shape, **kw)


def full(name, template, kinds=FLOATING, **kw):
    kw.setdefault("weight", 0.6)
    return OpSpec(name, F, template, arity=1, kinds=kinds, shape=_full_shape, **kw)


SPECS = [
    # sums and means
    full("sum", "torch.sum({0})", kinds=ANY_KIND, weight=0.45),
    red("sum_dim", "torch.sum({0}, dim={dim}, keepdim={keepdim})", kinds=ANY_KIND),
    OpSpec("sum_dims", F, "{0}.sum(dim={dims}, keepdim={keepdim})", kinds=ANY_KIND, min_rank=2,
           params=_dims_params, shape=_dims_shape, weight=0.45),
    full("mean", "torch.mean({0})", nonempty=True, weight=0.3),
    red("mean_dim", "{0}.mean({dim}, keepdim={keepdim})", params=_dim_params(lo=1)),
    OpSpec("mean_dims", F, "torch.mean({0}, dim={dims}, keepdim={keepdim})", kinds=FLOATING, min_rank=2,
           nonempty=True, params=_dims_params, shape=_dims_shape, weight=0.3),
    red("prod_dim", "torch.prod({0}, {dim}, keepdim={keepdim})", params=_dim_params(hi=8), weight=0.3),
    # extrema (no identity: nonzero reduced dims only)
    red("amax", "torch.amax({0}, dim={dim}, keepdim={keepdim})", kinds=NUMERIC, params=_dim_params(lo=1), backward="ties"),
    red("amin", "torch.amin({0}, {dim}, {keepdim})", kinds=NUMERIC, params=_dim_params(lo=1), weight=0.45, backward="ties"),
    full("max_all", "torch.max({0})", kinds=NUMERIC, nonempty=True, weight=0.3, backward="ties"),
    red("max_dim", "torch.max({0}, {dim}, keepdim={keepdim})[0]", kinds=NUMERIC, params=_dim_params(lo=1), backward="ties"),
    red("min_dim", "torch.min({0}, dim={dim}, keepdim={keepdim}).values", kinds=NUMERIC,
        params=_dim_params(lo=1), weight=0.45, backward="ties"),
    red("argmax", "torch.argmax({0}, dim={dim}, keepdim={keepdim})", kinds=NUMERIC, params=_dim_params(lo=1), backward="ties"),
    red("argmin", "{0}.argmin({dim}, {keepdim})", kinds=NUMERIC, params=_dim_params(lo=1), weight=0.45, backward="ties"),
    full("argmax_all", "{0}.argmax()", kinds=NUMERIC, nonempty=True, weight=0.3, backward="ties"),
    # moments and norms
    red("var", "torch.var({0}, dim={dim}, correction={correction}, keepdim={keepdim})", params=_var_params),
    red("std", "{0}.std({dim}, correction={correction}, keepdim={keepdim})", params=_var_params),
    full("var_all", "torch.var({0}, correction={correction})", nonempty=True, params=_var_all_params, weight=0.3),
    red("vector_norm", "torch.linalg.vector_norm({0}, ord={ord}, dim={dim}, keepdim={keepdim})", params=_norm_params, backward="ties"),
    full("norm_all", "{0}.norm()", weight=0.3),
    red("logsumexp", "torch.logsumexp({0}, {dim}, keepdim={keepdim})", params=_dim_params(lo=1)),
    # boolean reductions
    red("any_dim", "torch.any({0}, dim={dim}, keepdim={keepdim})", kinds=ANY_KIND),
    red("all_dim", "{0}.all({dim}, keepdim={keepdim})", kinds=ANY_KIND),
    full("any", "{0}.any()", kinds=ANY_KIND, weight=0.3),
    full("all", "torch.all({0})", kinds=ANY_KIND, weight=0.3),
    red("count_nonzero", "torch.count_nonzero({0}, dim={dim})", kinds=ANY_KIND, params=_dim_params(keepdim=False),
        weight=0.3),
    # normalizations along a dim
    OpSpec("softmax", F, "F.softmax({0}, dim={dim}{dtype})", kinds=FLOATING, params=_softmax_params,
           shape=same_as_first, weight=0.75),
    OpSpec("log_softmax", F, "torch.log_softmax({0}, {dim}{dtype})", kinds=FLOATING, params=_softmax_params,
           shape=same_as_first, weight=0.6),
    # scans
    OpSpec("cumsum", F, "torch.cumsum({0}, dim={dim})", kinds=ANY_KIND, params=_scan_params(), shape=same_as_first,
           weight=0.6),
    OpSpec("cumprod", F, "{0}.cumprod({dim})", kinds=FLOATING, params=_scan_params(hi=8), shape=same_as_first,
           weight=0.3),
    OpSpec("logcumsumexp", F, "torch.logcumsumexp({0}, {dim})", kinds=FLOATING, params=_scan_params(),
           shape=same_as_first, weight=0.3),
    OpSpec("cummax", F, "torch.cummax({0}, {dim}).values", kinds=NUMERIC, params=_scan_params(),
           shape=same_as_first, weight=0.3, backward="ties"),
    # order statistics (values only: indices of ties are unspecified)
    OpSpec("sort", F, "torch.sort({0}, dim={dim}, descending={descending}).values", kinds=NUMERIC,
           params=_sort_params, shape=same_as_first, weight=0.45, backward="ties"),
    OpSpec("topk", F, "torch.topk({0}, {k}, dim={dim}, largest={largest}).values", kinds=NUMERIC, min_rank=1,
           params=_topk_params, shape=_topk_shape, weight=0.45, backward="ties"),
]
