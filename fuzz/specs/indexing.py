"""Indexing and data-movement ops: cat/stack, flip/roll, repeats, pad,
gather/scatter, index_select, advanced indexing, where/masked_fill, tril/triu,
index_add, clone.

Meta execution checks shapes, never index *values*, so every index tensor is
built inside the statement so that it is in range by construction in every
world: ``(torch.arange(L, device=x.device) * 3 + 1) % max(n, 1)`` where n is
the indexed dim's size, and L is a size that is 0 in every world where n is 0
(``n``, ``n // 2``, ``2 * n``), or a constant only when n is never 0.
Boolean-mask indexing is data-dependent and left out.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import BOOL, FLOAT, INT, NUMERIC, OpSpec, broadcast, cast_suffix, same_as_first
from symfuzz.fuzz.specs.view import BAD_DIM, int_input_desc, neg_dim, size_eval, size_src, size_worlds

F = "indexing"


# ----------------------------------------------------------------- index tensors


def _length_candidates(x, d, limit_to_size=False):
    """Index lengths L that are in range for dim d: 0 wherever the dim is 0.

    With ``limit_to_size`` also L <= size (scatter's index must fit in src).
    """
    cands = [["d", 0, d], ["div", 0, d, 2], ["sub", 0, d, 1]]
    if not limit_to_size:
        cands += [["mul", 0, d, 2]]
        cands += [["d", 0, e] for e in range(x.rank) if e != d]
    cands += [["c", k] for k in (1, 2, 3, 5)]
    good = []
    n = x.sizes(d)
    for c in cands:
        L = size_worlds(c, [x])
        if any(v < 0 for v in L):
            continue
        if any(nv == 0 and lv != 0 for nv, lv in zip(n, L)):
            continue
        if limit_to_size and any(lv > nv for nv, lv in zip(n, L)):
            continue
        good.append(c)
    return good


def _index_vector(ctx, d, length_desc, unique=False, negative=False):
    """Source of a 1-D int64 index of length L into dim d of operand 0."""
    x = ctx.operands[0]
    L = size_src(ctx, length_desc)
    n = ctx.size_ref(x, d)
    if unique:  # distinct values (L <= n): a rotation or a reversal
        form = ctx.draw(st.integers(0, 2))
        if form == 0:
            return f"torch.arange({L}, device={x.name}.device).flip(0)"
        c = ctx.draw(st.sampled_from([0, 1, 2]))
        term = f"torch.arange({L}, device={x.name}.device)" + (f" + {c}" if c else "")
        base = f"({term}) % max({n}, 1)" if c else f"{term} % max({n}, 1)"
    else:
        m = ctx.draw(st.sampled_from([1, 2, 3, 7]))
        c = ctx.draw(st.sampled_from([0, 1, 3]))
        term = f"torch.arange({L}, device={x.name}.device)" + (f" * {m}" if m != 1 else "")
        base = f"({term} + {c}) % max({n}, 1)" if c else f"{term} % max({n}, 1)"
    if negative:
        return f"({base} - {n})"
    return f"({base})"


# ------------------------------------------------------------------ cat, stack


def _cat_partner(draw, first):
    """Same shapes as ``first`` except at one dim: another dim's sizes or a constant."""
    r = first.rank
    d = draw(st.integers(0, r - 1))
    choices = [first.sizes(e) for e in range(r)] + [(k,) * len(first.shapes) for k in (1, 2, 3, 5)]
    new = draw(st.sampled_from(choices))
    return [tuple(s[:d]) + (new[w],) + tuple(s[d + 1 :]) for w, s in enumerate(first.shapes)]


def _cat_params(ctx):
    ops = ctx.operands
    r = ops[0].rank
    valid = []
    for d in range(r):
        if all(
            len(o.shapes[w]) == r and all(o.shapes[w][e] == ops[0].shapes[w][e] for e in range(r) if e != d)
            for o in ops
            for w in range(len(o.shapes))
        ):
            valid.append(d)
    if not valid:
        return {"dim": BAD_DIM, "at": 0}
    d = ctx.draw(st.sampled_from(valid))
    return {"dim": neg_dim(ctx, d, r), "at": d}


def _cat_shape_of(order):
    def rule(shapes, params):
        s = list(shapes[0])
        d = params["at"]
        s[d] = sum(shapes[i][d] for i in order)
        return tuple(s)

    return rule


def _stack_params(ctx):
    r = ctx.operands[0].rank
    d = ctx.draw(st.integers(0, r))
    return {"dim": neg_dim(ctx, d, r + 1), "at": d}


def _stack_shape_of(count):
    def rule(shapes, params):
        s = list(shapes[0])
        s.insert(params["at"], count)
        return tuple(s)

    return rule


# ------------------------------------------------------------ flip, roll, tril


def _flip_params(ctx):
    r = ctx.operands[0].rank
    k = ctx.draw(st.integers(1, r))
    dims = ctx.draw(st.permutations(list(range(r))))[:k]
    return {"dims": "[" + ", ".join(str(neg_dim(ctx, d, r)) for d in dims) + "]"}


def _roll_shift(ctx, d):
    x = ctx.operands[0]
    choice = ctx.draw(st.sampled_from(["1", "-1", "2", "-3", "7", "n//2", "-n", "n+1"]))
    shift = ctx.scalar(("int",))  # any int shifts: negative, past the size
    if shift is not None:
        return shift.name
    if "n" in choice:
        n = ctx.size_ref(x, d)
        return {"n//2": f"{n} // 2", "-n": f"-{n}", "n+1": f"{n} + 1"}[choice]
    return choice


def _roll_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    form = ctx.draw(st.integers(0, 3))
    if form == 0:  # no dims: roll the flattened tensor
        return {"args": ctx.draw(st.sampled_from(["1", "-2", "3"]))}
    k = 1 if form < 3 else ctx.draw(st.integers(1, r))
    dims = ctx.draw(st.permutations(list(range(r))))[:k]
    shifts = [_roll_shift(ctx, d) for d in dims]
    spelled = [str(neg_dim(ctx, d, r)) for d in dims]
    if form < 3:
        return {"args": f"{shifts[0]}, {spelled[0]}"}
    return {"args": f"({', '.join(shifts)},), ({', '.join(spelled)},)"}


def _tri_params(ctx):
    x = ctx.operands[0]
    choice = ctx.draw(st.sampled_from(["0", "1", "-1", "2", "n", "-n//2"]))
    if "n" in choice:
        n = ctx.size_ref(x, x.rank - 1)
        choice = n if choice == "n" else f"-({n} // 2)"
    return {"k": choice}


# ------------------------------------------------------------------- repeats


def _rep_candidates(x, cap=8):
    """Repeat counts: small constants, or a dim's size where it stays small."""
    out = [["c", 1], ["c", 2], ["c", 3], ["c", 1], ["c", 2]]
    out += [["d", 0, e] for e in range(x.rank) if max(x.sizes(e)) <= cap]
    return out


def _repeat_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    count = ctx.draw(st.integers(max(r, 1), r + 2))
    descs = [ctx.draw(st.sampled_from(_rep_candidates(x))) for _ in range(count)]
    counted = int_input_desc(ctx, lambda vs: all(0 <= v <= 4 for v in vs))
    if counted:  # one count from an int input
        descs[ctx.draw(st.integers(0, count - 1))] = counted[0]
    return {"reps": ", ".join(size_src(ctx, d) for d in descs), "descs": descs}


def _repeat_shape(shapes, params):
    s = shapes[0]
    reps = [size_eval(d, [s], params) for d in params["descs"]]
    s = (1,) * (len(reps) - len(s)) + tuple(s)
    return tuple(a * b for a, b in zip(s, reps))


def _tile_params(ctx):
    x = ctx.operands[0]
    count = ctx.draw(st.integers(1, x.rank + 1))
    descs = [ctx.draw(st.sampled_from(_rep_candidates(x))) for _ in range(count)]
    return {"reps": ", ".join(size_src(ctx, d) for d in descs) + ",", "descs": descs}


def _tile_shape(shapes, params):
    s = tuple(shapes[0])
    reps = [size_eval(d, [s]) for d in params["descs"]]
    if len(reps) < len(s):
        reps = [1] * (len(s) - len(reps)) + reps
    s = (1,) * (len(reps) - len(s)) + s
    return tuple(a * b for a, b in zip(s, reps))


def _repeat_interleave_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    desc = ctx.draw(st.sampled_from(_rep_candidates(x)))
    k = size_src(ctx, desc)
    if r == 0 or ctx.draw(st.integers(0, 3)) == 0:
        return {"args": k, "desc": desc, "at": None}
    d = ctx.draw(st.integers(0, r - 1))
    return {"args": f"{k}, dim={neg_dim(ctx, d, r)}", "desc": desc, "at": d}


def _repeat_interleave_shape(shapes, params):
    s = list(shapes[0])
    k = size_eval(params["desc"], [shapes[0]])
    if params["at"] is None:
        return (math.prod(s) * k,)
    s[params["at"]] *= k
    return tuple(s)


# ----------------------------------------------------------------------- pad


def _pad_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    modes = ["constant", "constant", "constant"]
    if x.kind == FLOAT and r >= 2:
        modes += ["reflect", "replicate", "circular"]
    mode = ctx.draw(st.sampled_from(modes))
    if mode == "constant":
        k = ctx.draw(st.integers(1, min(r, 3)))
    else:
        k = ctx.draw(st.integers(max(1, r - 2), min(3, r - 1)))
    pads = []
    for j in range(k):  # F.pad lists the last dim first
        d = r - 1 - j
        sizes = x.sizes(d)
        cands = [["c", 0], ["c", 1], ["c", 2], ["c", 3]]
        cands += [["div", 0, e, 2] for e in range(r)] + [["d", 0, e] for e in range(r)]
        if mode == "constant" and min(sizes) >= 2:
            cands += [["c", -1]]
        if mode == "constant":
            cands += int_input_desc(ctx, lambda vs: all(0 <= v <= 8 for v in vs))
        if mode == "reflect":  # pad < size
            cands = [c for c in cands if all(p < n for p, n in zip(size_worlds(c, [x]), sizes))]
        elif mode == "circular":  # pad <= size
            cands = [c for c in cands if all(p <= n for p, n in zip(size_worlds(c, [x]), sizes))]
        if not cands:  # an odd-length pad: rejected in every world
            return {"pad": "1,", "extra": "", "descs": []}
        pads += [ctx.draw(st.sampled_from(cands)), ctx.draw(st.sampled_from(cands))]
    src = ", ".join(size_src(ctx, p) for p in pads)
    extra = ""
    if mode != "constant":
        extra = f', mode="{mode}"'
    elif ctx.draw(st.booleans()):
        extra = ", value=" + {FLOAT: "-1.5", INT: "3", BOOL: "1"}[x.kind]
    return {"pad": src, "extra": extra, "descs": pads}


def _pad_shape(shapes, params):
    s = list(shapes[0])
    descs = params["descs"]
    for j in range(len(descs) // 2):
        d = len(s) - 1 - j
        s[d] += size_eval(descs[2 * j], [shapes[0]], params) + size_eval(descs[2 * j + 1], [shapes[0]], params)
    return tuple(s)


# -------------------------------------------------- gather, scatter, index_select


def _index_dims(ctx, limit_to_size):
    """A dim to index (or None) and a length for it."""
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    cands = _length_candidates(x, d, limit_to_size)
    if not cands:
        return d, None
    return d, ctx.draw(st.sampled_from(cands))


def _expanded_index(ctx, d, length, unique):
    """An index with operand 0's rank: a vector along d, expanded elsewhere."""
    x = ctx.operands[0]
    r = x.rank
    vec = _index_vector(ctx, d, length, unique=unique)
    descs = []
    for e in range(r):
        if e == d:
            descs.append(length)
            continue
        cands = [["d", 0, e], ["d", 0, e], ["div", 0, e, 2]]
        if x.min_size(e) >= 1:
            cands.append(["c", 1])
        descs.append(ctx.draw(st.sampled_from(cands)))
    if r == 1:
        return vec, descs
    view = ", ".join("-1" if e == d else "1" for e in range(r))
    expand = ", ".join("-1" if e == d else size_src(ctx, descs[e]) for e in range(r))
    return f"{vec}.view({view}).expand({expand})", descs


def _gather_params(ctx):
    x = ctx.operands[0]
    d, length = _index_dims(ctx, limit_to_size=False)
    if length is None:
        return {"dim": BAD_DIM, "index": "None", "descs": []}
    index, descs = _expanded_index(ctx, d, length, unique=False)
    return {"dim": neg_dim(ctx, d, x.rank), "index": index, "descs": descs}


def _index_shape(shapes, params):
    return tuple(size_eval(d, [shapes[0]]) for d in params["descs"])


def _scatter_params(ctx):
    x = ctx.operands[0]
    d, length = _index_dims(ctx, limit_to_size=True)
    if length is None:
        return {"dim": BAD_DIM, "index": "None", "src": "0"}
    index, _ = _expanded_index(ctx, d, length, unique=True)
    if ctx.draw(st.booleans()):
        src = {FLOAT: "-2.5", INT: "7", BOOL: "True"}[x.kind]
    else:
        src = ctx.draw(st.sampled_from([x.name, f"{x.name}.flip({neg_dim(ctx, d, x.rank)})", f"-{x.name}" if x.kind != BOOL else x.name]))
    return {"dim": neg_dim(ctx, d, x.rank), "index": index, "src": src}


def _scatter_add_params(ctx):
    x = ctx.operands[0]
    d, length = _index_dims(ctx, limit_to_size=True)
    if length is None:
        return {"dim": BAD_DIM, "index": "None"}
    index, _ = _expanded_index(ctx, d, length, unique=False)
    return {"dim": neg_dim(ctx, d, x.rank), "index": index}


def _index_select_params(ctx):
    x = ctx.operands[0]
    d, length = _index_dims(ctx, limit_to_size=False)
    if length is None:
        return {"dim": BAD_DIM, "index": "None", "at": 0, "length": ["c", 0]}
    vec = _index_vector(ctx, d, length, negative=False)
    return {"dim": neg_dim(ctx, d, x.rank), "index": vec, "at": d, "length": length}


def _index_select_shape(shapes, params):
    s = list(shapes[0])
    s[params["at"]] = size_eval(params["length"], [shapes[0]])
    return tuple(s)


def _advanced_index_params(ctx):
    """``x[idx]``, ``x[:, idx]``, ``x[..., idx]``, ``x[:, i, j]`` with int tensors."""
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    pair = d + 1 < r and ctx.draw(st.integers(0, 2)) == 0
    cands = _length_candidates(x, d)
    if pair:  # a length valid for both dims: one broadcast index pair
        cands = [c for c in cands if c in _length_candidates(x, d + 1)]
    if not cands:
        return {"index": f"{BAD_DIM}, {BAD_DIM}, {BAD_DIM}, {BAD_DIM}, {BAD_DIM}, {BAD_DIM}", "at": 0, "width": 1, "idx": []}
    length = ctx.draw(st.sampled_from(cands))
    first = _index_vector(ctx, d, length, negative=ctx.draw(st.integers(0, 3)) == 0)
    idx_shape = [length]
    if not pair and ctx.draw(st.integers(0, 3)) == 0:
        first = f"{first}.unsqueeze(-1)"
        idx_shape = [length, ["c", 1]]
    items = [first]
    if pair:
        # The second index is built against dim d + 1 of the same operand.
        second = _index_vector(ctx, d + 1, length)
        items.append(second)
    width = len(items)
    if d + width == r and d > 0 and ctx.draw(st.booleans()):
        index = ", ".join(["..."] + items)
    else:
        index = ", ".join([":"] * d + items)
    return {"index": index, "at": d, "width": width, "idx": idx_shape}


def _advanced_index_shape(shapes, params):
    s = tuple(shapes[0])
    d, w = params["at"], params["width"]
    mid = tuple(size_eval(c, [s]) for c in params["idx"])
    return s[:d] + mid + s[d + w :]


# ------------------------------------------------------------ where, masked_fill


def _where_params(ctx):
    return {"cmp": ctx.draw(st.sampled_from(["> 0", "< 0.5", "!= 0", ">= 1"]))}


def _masked_fill_params(ctx):
    x = ctx.operands[0]
    value = ctx.draw(st.sampled_from({FLOAT: ["-1.5", "0.0", "2"], INT: ["0", "-3", "5"], BOOL: ["True", "False"]}[x.kind]))
    return {"cmp": ctx.draw(st.sampled_from(["> 0", "< 0", "!= 0"])), "value": value}


# --------------------------------------------------------------------- index_add


def _index_add_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    half = ctx.draw(st.booleans())
    length = ["div", 0, d, 2] if half else ["d", 0, d]
    vec = _index_vector(ctx, d, length)
    dim = neg_dim(ctx, d, r)
    narrow = f".narrow({dim}, 0, {size_src(ctx, length)})" if half else ""
    alpha = ctx.draw(st.sampled_from([1, 2, -1]))
    return {"dim": dim, "index": vec, "narrow": narrow, "alpha": alpha,
            "cast": cast_suffix(ctx.operands[1].dtype, x.dtype) if len(ctx.operands) > 1 else ""}


def _clone_params(ctx):
    return {"args": ctx.draw(st.sampled_from(["", "", "memory_format=torch.contiguous_format", "memory_format=torch.preserve_format"]))}


SPECS = [
    OpSpec("cat", F, "torch.cat([{0}, {1}], dim={dim})", arity=2, min_rank=1, partner=_cat_partner,
           params=_cat_params, shape=_cat_shape_of((0, 1)), weight=1.5),
    OpSpec("cat3", F, "torch.cat(({1}, {0}, {1}), {dim})", arity=2, min_rank=1, partner=_cat_partner,
           params=_cat_params, shape=_cat_shape_of((1, 0, 1)), weight=0.5),
    OpSpec("stack", F, "torch.stack([{0}, {1}], dim={dim})", arity=2, partner="same",
           params=_stack_params, shape=_stack_shape_of(2), weight=1.0),
    OpSpec("stack3", F, "torch.stack(({0}, {1}, {0}), {dim})", arity=2, partner="same",
           params=_stack_params, shape=_stack_shape_of(3), weight=0.5),
    OpSpec("flip", F, "torch.flip({0}, {dims})", min_rank=1, params=_flip_params, shape=same_as_first),
    OpSpec("roll", F, "torch.roll({0}, {args})", min_rank=1, params=_roll_params, shape=same_as_first),
    OpSpec("repeat", F, "{0}.repeat({reps})", params=_repeat_params, shape=_repeat_shape),
    OpSpec("repeat_interleave", F, "torch.repeat_interleave({0}, {args})", params=_repeat_interleave_params,
           shape=_repeat_interleave_shape),
    OpSpec("tile", F, "torch.tile({0}, ({reps}))", params=_tile_params, shape=_tile_shape, weight=0.5),
    OpSpec("pad", F, "F.pad({0}, ({pad}){extra})", min_rank=1, params=_pad_params, shape=_pad_shape),
    OpSpec("gather", F, "torch.gather({0}, {dim}, {index})", min_rank=1, params=_gather_params, shape=_index_shape),
    OpSpec("scatter", F, "torch.scatter({0}, {dim}, {index}, {src})", min_rank=1, params=_scatter_params,
           shape=same_as_first),
    OpSpec("scatter_add", F, "torch.scatter_add({0}, {dim}, {index}, {0})", min_rank=1, kinds=NUMERIC,
           params=_scatter_add_params, shape=same_as_first, weight=0.5),
    OpSpec("index_select", F, "torch.index_select({0}, {dim}, {index})", min_rank=1, params=_index_select_params,
           shape=_index_select_shape),
    OpSpec("advanced_index", F, "{0}[{index}]", min_rank=1, params=_advanced_index_params,
           shape=_advanced_index_shape, weight=1.5),
    OpSpec("where", F, "torch.where({0} {cmp}, {0}, {1})", arity=2, kinds=NUMERIC, partner="scalar-ok",
           params=_where_params, shape=broadcast, backward="ties"),
    OpSpec("masked_fill", F, "{0}.masked_fill({1} {cmp}, {value})", arity=2, partner="broadcast",
           partner_kinds=NUMERIC, params=_masked_fill_params, shape=same_as_first, backward="ties"),
    OpSpec("tril", F, "torch.tril({0}, {k})", min_rank=2, params=_tri_params, shape=same_as_first),
    OpSpec("triu", F, "{0}.triu({k})", min_rank=2, params=_tri_params, shape=same_as_first),
    OpSpec("index_add", F, "torch.index_add({0}, {dim}, {index}, {1}{narrow}{cast}, alpha={alpha})", arity=2,
           min_rank=1, kinds=NUMERIC, partner="same", params=_index_add_params, shape=same_as_first),
    OpSpec("clone", F, "{0}.clone({args})", params=_clone_params, shape=same_as_first, weight=0.5),
]
