"""Matrix products and friends: mm, bmm, matmul (batch broadcasting), mv,
dot, outer, linear, addmm/baddbmm, einsum forms, tensordot, kron, vecdot,
trace.

Partners are shaped from the first operand's dims (``(s[1], k)`` for ``mm``)
where ``k`` is one of the first operand's size vectors or a small constant, so
the generator can tie a new input's dims to the same size symbols.

Eager CPU insists that both matrices of a product have the same dtype where
meta execution does not check it, so a partner of another dtype is cast to the
first operand's dtype in the rendered source (``{1}.to(torch.float32)``).
Biases are derived from the partner (``{1}.sum(0)``) because one spec has one
partner rule for all its extra operands.
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import FLOATING, NUMERIC, OpSpec, broadcast, cast_suffix

F = "linalg"


# ------------------------------------------------------------------ partners


def size_vec(draw, first, dims=None, consts=(2, 3, 5)):
    """A per-world size vector: one of ``first``'s dims, or a constant."""
    dims = range(first.rank) if dims is None else dims
    options = [("c", c) for c in consts] + [("d", d) for d in dims]
    kind, v = draw(st.sampled_from(options))
    return (v,) * len(first.shapes) if kind == "c" else first.sizes(v)


def _mm_partner(draw, first):
    k = size_vec(draw, first)
    return [(s[1], kk) for s, kk in zip(first.shapes, k)]


def _bmm_partner(draw, first):
    k = size_vec(draw, first)
    return [(s[0], s[2], kk) for s, kk in zip(first.shapes, k)]


def _mv_partner(draw, first):
    return [(s[-1],) for s in first.shapes]


def _vec_partner(draw, first):
    k = size_vec(draw, first)
    return [(kk,) for kk in k]


def _matmul_partner(draw, first):
    r = first.rank
    k = size_vec(draw, first)
    n = len(first.shapes)
    if r == 1:
        form = draw(st.sampled_from(["vec", "mat", "batched"]))
        if form == "vec":
            return [(s[0],) for s in first.shapes]
        if form == "mat":
            return [(s[0], kk) for s, kk in zip(first.shapes, k)]
        b = size_vec(draw, first, consts=(1, 2, 3))
        return [(bb, s[0], kk) for s, bb, kk in zip(first.shapes, b, k)]
    form = draw(st.sampled_from(["vec", "mat", "mat", "extra"] if r == 2 else ["vec", "mat", "mat"]))
    if form == "vec":
        return [(s[-1],) for s in first.shapes]
    batch_rank = r - 2
    drop = draw(st.integers(0, batch_rank))
    ones = [draw(st.integers(0, 3)) == 0 for _ in range(batch_rank)]
    out = []
    for w, s in enumerate(first.shapes):
        batch = [1 if ones[i] else s[i] for i in range(batch_rank)][drop:]
        out.append(tuple(batch) + (s[-1], k[w]))
    if form == "extra":  # the partner brings a batch dim the first lacks
        b = size_vec(draw, first, consts=(2, 3))
        out = [(b[w],) + out[w] for w in range(n)]
    return out


def _linear_partner(draw, first):
    o = size_vec(draw, first)
    return [(oo, s[-1]) for s, oo in zip(first.shapes, o)]


def _tensordot_partner(draw, first):
    k = size_vec(draw, first)
    return [(s[-1], kk) for s, kk in zip(first.shapes, k)]


def _kron_partner(draw, first):
    dims = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(draw(st.integers(1, first.rank))))
    return [dims] * len(first.shapes)


# ------------------------------------------------------------------- params


def cast(ctx, i=1):
    """Source that casts operand ``i`` to operand 0's dtype where they differ."""
    if len(ctx.operands) <= i:
        return ""
    return cast_suffix(ctx.operands[i].dtype, ctx.operands[0].dtype)


def _cast_params(ctx):
    return {"c1": cast(ctx)}


def _addmm_params(ctx):
    if ctx.operands[0].kind == "float":
        beta = ctx.draw(st.sampled_from([1, 0.5, 2]))
        alpha = ctx.draw(st.sampled_from([1, 0.5, -1]))
    else:
        beta = ctx.draw(st.sampled_from([1, 2]))
        alpha = ctx.draw(st.sampled_from([1, -1, 3]))
    return {"c1": cast(ctx), "dt": ctx.operands[0].dtype, "beta": beta, "alpha": alpha}


# -------------------------------------------------------------- shape rules


def _mm_shape(shapes, params):
    return (shapes[0][0], shapes[1][1])


def _bmm_shape(shapes, params):
    return (shapes[0][0], shapes[0][1], shapes[1][2])


def _matmul_shape(shapes, params):
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if len(a) == 1 and len(b) == 1:
        return ()
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    out = broadcast([a2[:-2], b2[:-2]]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return tuple(out)


def _mv_shape(shapes, params):
    return (shapes[0][0],)


def _outer_shape(shapes, params):
    return (shapes[0][0], shapes[1][0])


def _scalar_shape(shapes, params):
    return ()


def _linear_shape(shapes, params):
    return tuple(shapes[0][:-1]) + (shapes[1][0],)


def _tensordot_shape(shapes, params):
    return tuple(shapes[0][:-1]) + (shapes[1][1],)


def _kron_shape(shapes, params):
    a, b = shapes[0], shapes[1]
    r = max(len(a), len(b))
    a = (1,) * (r - len(a)) + tuple(a)
    b = (1,) * (r - len(b)) + tuple(b)
    return tuple(x * y for x, y in zip(a, b))


def _vecdot_shape(shapes, params):
    return broadcast(shapes)[:-1]


def _t_shape(shapes, params):
    return tuple(reversed(shapes[0]))


def _diag_shape(shapes, params):
    return (shapes[0][0],)


def _rowsum_shape(shapes, params):
    return (shapes[0][0],)


def _bouter_shape(shapes, params):
    return (shapes[0][0], shapes[0][1], shapes[1][1])


def _bvec_partner(draw, first):
    k = size_vec(draw, first)
    return [(s[0], kk) for s, kk in zip(first.shapes, k)]


def prod(name, template, arity=2, kinds=NUMERIC, **kw):
    kw.setdefault("params", _cast_params)
    return OpSpec(name, F, template, arity=arity, kinds=kinds, **kw)


def einsum(name, equation, rank, partner=None, shape=None, weight=0.5):
    if partner is None:
        return OpSpec(name, F, f'torch.einsum("{equation}", {{0}})', arity=1, kinds=NUMERIC, min_rank=rank,
                      max_rank=rank, shape=shape, weight=weight)
    return prod(name, f'torch.einsum("{equation}", {{0}}, {{1}}{{c1}})', min_rank=rank, max_rank=rank,
                partner=partner, shape=shape, weight=weight)


SPECS = [
    prod("mm", "torch.mm({0}, {1}{c1})", min_rank=2, max_rank=2, partner=_mm_partner, shape=_mm_shape, weight=2.0),
    prod("bmm", "torch.bmm({0}, {1}{c1})", min_rank=3, max_rank=3, partner=_bmm_partner, shape=_bmm_shape, weight=1.5),
    prod("matmul", "torch.matmul({0}, {1}{c1})", min_rank=1, max_rank=4, partner=_matmul_partner,
         shape=_matmul_shape, weight=2.5),
    prod("matmul_op", "{0} @ {1}{c1}", min_rank=1, max_rank=4, partner=_matmul_partner, shape=_matmul_shape,
         weight=0.75),
    prod("mv", "torch.mv({0}, {1}{c1})", min_rank=2, max_rank=2, partner=_mv_partner, shape=_mv_shape, weight=0.5),
    prod("dot", "torch.dot({0}, {1}{c1})", min_rank=1, max_rank=1, partner="same", shape=_scalar_shape, weight=0.5),
    prod("outer", "torch.outer({0}, {1})", min_rank=1, max_rank=1, partner=_vec_partner, shape=_outer_shape,
         params=lambda ctx: {}, weight=0.5),
    prod("linear", "F.linear({0}, {1}{c1})", kinds=FLOATING, min_rank=1, partner=_linear_partner,
         shape=_linear_shape, weight=2.0),
    prod("linear_bias", "F.linear({0}, {1}{c1}, {1}{c1}.sum(1))", kinds=FLOATING, min_rank=1,
         partner=_linear_partner, shape=_linear_shape, weight=0.75),
    prod("addmm", "torch.addmm({1}.sum(0, dtype=torch.{dt}), {0}, {1}{c1}, beta={beta}, alpha={alpha})",
         min_rank=2, max_rank=2, partner=_mm_partner, shape=_mm_shape, params=_addmm_params, weight=0.75),
    prod("baddbmm",
         "torch.baddbmm({1}.sum(1, keepdim=True, dtype=torch.{dt}), {0}, {1}{c1}, beta={beta}, alpha={alpha})",
         min_rank=3, max_rank=3, partner=_bmm_partner, shape=_bmm_shape, params=_addmm_params, weight=0.5),
    prod("tensordot", "torch.tensordot({0}, {1}{c1}, dims=1)", min_rank=1, max_rank=3, partner=_tensordot_partner,
         shape=_tensordot_shape, weight=0.5),
    prod("kron", "torch.kron({0}, {1}{c1})", min_rank=1, max_rank=3, partner=_kron_partner, shape=_kron_shape,
         weight=0.4),
    prod("vecdot", "torch.linalg.vecdot({0}, {1}{c1})", kinds=FLOATING, min_rank=1, partner="broadcast",
         shape=_vecdot_shape, weight=0.5),
    einsum("einsum_mm", "ij,jk->ik", 2, _mm_partner, _mm_shape, weight=0.75),
    einsum("einsum_bmm", "bij,bjk->bik", 3, _bmm_partner, _bmm_shape, weight=0.75),
    einsum("einsum_diag", "ii->i", 2, shape=_diag_shape, weight=0.5),
    einsum("einsum_t", "ij->ji", 2, shape=_t_shape, weight=0.5),
    einsum("einsum_dot", "i,i->", 1, "same", _scalar_shape, weight=0.5),
    einsum("einsum_outer", "i,j->ij", 1, _vec_partner, _outer_shape, weight=0.5),
    einsum("einsum_rowdot", "ij,ij->i", 2, "same", _rowsum_shape, weight=0.5),
    einsum("einsum_bouter", "bi,bj->bij", 2, _bvec_partner, _bouter_shape, weight=0.5),
    OpSpec("trace", F, "torch.trace({0})", kinds=NUMERIC, min_rank=2, max_rank=2, shape=_scalar_shape, weight=0.4),
]
