"""View and shape-changing ops: view/reshape, permutes, squeezes, slicing,
splitting, diagonal.

Parameters are size-level Python wherever it makes sense: a reshape target is
``v3.size(0) * v3.size(1)``, a narrow length ``v3.size(1) // 2``, a slice
``v3[..., 1:v3.size(-1) // 2:2]``. That source is what dynamic-shape
compilation has to trace and guard, which is the point of the family.

Each params function stores, next to the rendered source, plain data that the
shape rule evaluates: a *size descriptor* is a small JSON list,

    ["c", k]            the constant k
    ["d", i, e]         operand i's size at dim e
    ["div", i, e, k]    operand i's size at dim e, floor-divided by k
    ["sub", i, e, k]    operand i's size at dim e, minus k
    ["mul", i, e, k]    operand i's size at dim e, times k
    ["max1", i, e]      max(size, 1)
    ["prod", [[i, e], ...]]  the product of several sizes
    ["rest"]            -1 in a view/reshape target
    ["v", name]         the program's int input ``name`` (``base.ScalarInput``)

rendered by ``size_src`` (through ``ctx.size_ref``) and evaluated by
``size_eval`` (a shape rule passes ``params``, where a "v" descriptor finds
the world's value of its input). The indexing family reuses these helpers.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import OpSpec, same_as_first, scalar_value, wrap_dim

F = "view"


# ----------------------------------------------------------- size descriptors


def size_eval(desc, shapes, params=None) -> int:
    """Value of a size descriptor in one world (``shapes``: operand shapes;
    ``params``: the shape rule's, for the value of an int input)."""
    op = desc[0]
    if op == "c":
        return desc[1]
    if op == "v":
        return scalar_value(params, desc[1])
    if op == "prod":
        return math.prod(shapes[i][e] for i, e in desc[1])
    n = shapes[desc[1]][desc[2]]
    if op == "d":
        return n
    if op == "div":
        return n // desc[3]
    if op == "sub":
        return n - desc[3]
    if op == "mul":
        return n * desc[3]
    if op == "max1":
        return max(n, 1)
    raise ValueError(f"unknown size descriptor {desc!r}")


def size_worlds(desc, operands, scalars=()) -> tuple[int, ...]:
    """Value of a size descriptor in every world (``scalars``: the ScalarInputs
    a "v" descriptor may name)."""
    if desc[0] == "v":
        return next(tuple(s.values) for s in scalars if s.name == desc[1])
    n_worlds = len(operands[0].shapes)
    return tuple(size_eval(desc, [o.shapes[w] for o in operands]) for w in range(n_worlds))


def int_input_desc(ctx, accept) -> list:
    """``[["v", name]]`` for an int input whose values (per world) ``accept``
    takes (drawn, see ``ParamContext.scalar``), else []: a size candidate."""
    scalar = ctx.scalar(("int",), accept)
    return [["v", scalar.name]] if scalar is not None else []


def size_src(ctx, desc, atom: bool = False) -> str:
    """Python source for a size descriptor; ``atom`` parenthesizes compound forms."""
    op = desc[0]
    if op == "c":
        out = str(desc[1])
        return f"({out})" if atom and desc[1] < 0 else out
    if op == "rest":
        return "-1"
    if op == "v":
        return desc[1]
    if op == "prod":
        out = " * ".join(ctx.size_ref(ctx.operands[i], e) for i, e in desc[1])
        return f"({out})" if atom and len(desc[1]) > 1 else out
    ref = ctx.size_ref(ctx.operands[desc[1]], desc[2])
    if op == "d":
        return ref
    if op == "max1":
        return f"max({ref}, 1)"
    sym = {"div": "//", "sub": "-", "mul": "*"}[op]
    out = f"{ref} {sym} {desc[3]}"
    return f"({out})" if atom else out


def neg_dim(ctx, dim: int, rank: int) -> int:
    """``dim`` or its negative spelling, drawn."""
    if rank and ctx.draw(st.integers(0, 2)) == 0:
        return dim - rank
    return dim


# Statements that must be discarded (no valid choice in some world) render a
# dim that is out of range, so meta execution rejects them in every world.
BAD_DIM = 99


# ----------------------------------------------------------------- view/reshape


def _numel_ok_for_rest(descs, operand) -> bool:
    """-1 is only inferable where the product of the other sizes is nonzero."""
    others = [d for d in descs if d[0] != "rest"]
    return all(math.prod(size_eval(d, [shape]) for d in others) != 0 for shape in operand.shapes)


def _view_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    descs = [["d", 0, e] for e in range(r)]
    kinds = ["flat", "unit"]
    if r >= 2:
        kinds += ["merge", "merge", "shuffle"]
    split_dims = [(e, k) for e in range(r) for k in (2, 3) if all(s % k == 0 for s in x.sizes(e))]
    if split_dims:
        kinds += ["split", "split"]
    if r >= 1:
        kinds += ["rest"]
    kind = ctx.draw(st.sampled_from(kinds))
    if kind == "flat":
        descs = [["rest"]]
    elif kind == "unit":
        descs.insert(ctx.draw(st.integers(0, r)), ["c", 1])
    elif kind == "merge":
        d = ctx.draw(st.integers(0, r - 2))
        descs[d : d + 2] = [["prod", [[0, d], [0, d + 1]]]]
    elif kind == "shuffle":
        perm = ctx.draw(st.permutations(list(range(r))))
        descs = [descs[p] for p in perm]
    elif kind == "split":
        e, k = ctx.draw(st.sampled_from(split_dims))
        pieces = [["div", 0, e, k], ["c", k]]
        if ctx.draw(st.booleans()):
            pieces.reverse()
        descs[e : e + 1] = pieces
    elif kind == "rest":
        # (n0, -1) and friends: keep a prefix of sizes, infer the rest.
        keep = ctx.draw(st.integers(1, r))
        trial = descs[:keep] + [["rest"]] if keep < r else list(descs)
        if keep == r:
            trial[ctx.draw(st.integers(0, r - 1))] = ["rest"]
        if _numel_ok_for_rest(trial, x):
            descs = trial
    if kind not in ("flat", "rest") and descs and ctx.draw(st.integers(0, 3)) == 0:
        i = ctx.draw(st.integers(0, len(descs) - 1))
        trial = list(descs)
        trial[i] = ["rest"]
        if _numel_ok_for_rest(trial, x):
            descs = trial
    return {"shape": ", ".join(size_src(ctx, d) for d in descs), "descs": descs}


def _view_shape(shapes, params):
    shape = shapes[0]
    numel = math.prod(shape)
    out = [None if d[0] == "rest" else size_eval(d, [shape]) for d in params["descs"]]
    if None in out:
        known = math.prod(v for v in out if v is not None)
        out[out.index(None)] = numel // known
    return tuple(out)


# -------------------------------------------------------------------- permutes


def _permute_params(ctx):
    r = ctx.operands[0].rank
    perm = ctx.draw(st.permutations(list(range(r))))
    spelled = [neg_dim(ctx, p, r) for p in perm]
    return {"perm": ", ".join(map(str, spelled)), "order": list(perm)}


def _permute_shape(shapes, params):
    return tuple(shapes[0][p] for p in params["order"])


def _transpose_params(ctx):
    r = ctx.operands[0].rank
    a = ctx.draw(st.integers(0, r - 1))
    b = ctx.draw(st.integers(0, r - 1))
    return {"a": neg_dim(ctx, a, r), "b": neg_dim(ctx, b, r)}


def _transpose_shape(shapes, params):
    s = list(shapes[0])
    a, b = wrap_dim(params["a"], len(s)), wrap_dim(params["b"], len(s))
    s[a], s[b] = s[b], s[a]
    return tuple(s)


def _movedim_params(ctx):
    r = ctx.operands[0].rank
    k = ctx.draw(st.integers(1, min(r, 3)))
    src = ctx.draw(st.permutations(list(range(r))))[:k]
    dst = ctx.draw(st.permutations(list(range(r))))[:k]
    if k == 1 and ctx.draw(st.booleans()):
        s, d = str(neg_dim(ctx, src[0], r)), str(neg_dim(ctx, dst[0], r))
    else:
        s = "(" + ", ".join(str(neg_dim(ctx, v, r)) for v in src) + ",)"
        d = "(" + ", ".join(str(neg_dim(ctx, v, r)) for v in dst) + ",)"
    return {"src": s, "dst": d, "from": list(src), "to": list(dst)}


def _movedim_shape(shapes, params):
    shape = shapes[0]
    r = len(shape)
    out = [None] * r
    for s, d in zip(params["from"], params["to"]):
        out[d] = s
    rest = iter(i for i in range(r) if i not in params["from"])
    order = [o if o is not None else next(rest) for o in out]
    return tuple(shape[i] for i in order)


# -------------------------------------------------------- expand and (un)squeeze


def _expand_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    descs = []
    for _ in range(ctx.draw(st.integers(0 if r else 1, 2))):  # new leading dims
        descs.append(ctx.draw(st.sampled_from([["c", 2], ["c", 3], ["c", 1]] + [["d", 0, e] for e in range(r)])))
    for e in range(r):
        if all(s == 1 for s in x.sizes(e)):
            choices = [["keep"], ["c", 2], ["c", 3], ["c", 1]] + [["d", 0, f] for f in range(r)]
        else:
            choices = [["keep"], ["keep"], ["d", 0, e]]
        descs.append(ctx.draw(st.sampled_from(choices)))
    src = ", ".join("-1" if d[0] == "keep" else size_src(ctx, d) for d in descs)
    return {"sizes": src, "descs": descs}


def _expand_shape(shapes, params):
    shape = shapes[0]
    descs = params["descs"]
    lead = len(descs) - len(shape)
    return tuple(
        shape[i - lead] if d[0] == "keep" else size_eval(d, [shape]) for i, d in enumerate(descs)
    )


def _squeeze_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    ones = [e for e in range(r) if all(s == 1 for s in x.sizes(e))]
    form = ctx.draw(st.sampled_from(["all", "dim", "dim", "dims"] if r else ["all", "dim"]))
    if form == "all":
        return {"args": "", "dims": None}
    pool = ones if ones and ctx.draw(st.integers(0, 3)) else list(range(max(r, 1)))
    if form == "dim" or len(pool) < 2:
        d = ctx.draw(st.sampled_from(pool))
        return {"args": str(neg_dim(ctx, d, r)), "dims": [d]}
    dims = sorted(ctx.draw(st.permutations(pool))[:2])
    return {"args": "(" + ", ".join(str(neg_dim(ctx, d, r)) for d in dims) + ")", "dims": dims}


def _squeeze_shape(shapes, params):
    shape = shapes[0]
    dims = range(len(shape)) if params["dims"] is None else params["dims"]
    return tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))


def _unsqueeze_params(ctx):
    r = ctx.operands[0].rank
    d = ctx.draw(st.integers(0, r))
    return {"dim": neg_dim(ctx, d, r + 1), "at": d}


def _unsqueeze_shape(shapes, params):
    s = list(shapes[0])
    s.insert(params["at"], 1)
    return tuple(s)


def _flatten_params(ctx):
    r = ctx.operands[0].rank
    form = ctx.draw(st.integers(0, 2))
    if form == 0 or r == 0:
        return {"args": "", "start": 0, "end": -1}
    a = ctx.draw(st.integers(0, r - 1))
    b = ctx.draw(st.integers(a, r - 1))
    if form == 1:
        return {"args": str(neg_dim(ctx, a, r)), "start": a, "end": -1}
    return {"args": f"{neg_dim(ctx, a, r)}, {neg_dim(ctx, b, r)}", "start": a, "end": b}


def _flatten_shape(shapes, params):
    s = shapes[0]
    if not s:
        return (1,)
    a, b = wrap_dim(params["start"], len(s)), wrap_dim(params["end"], len(s))
    return tuple(s[:a]) + (math.prod(s[a : b + 1]),) + tuple(s[b + 1 :])


def _unflatten_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    forms = [[["d", 0, d], ["c", 1]], [["c", 1], ["d", 0, d]]]
    for k in (2, 3, 4):
        if all(s % k == 0 for s in x.sizes(d)):
            forms += [[["c", k], ["div", 0, d, k]], [["div", 0, d, k], ["c", k]]] * 2
    descs = ctx.draw(st.sampled_from(forms))
    # -1 stands in for the derived size (the other size is a nonzero constant).
    if ctx.draw(st.booleans()):
        descs = [["rest"] if dd[0] != "c" else dd for dd in descs]
    return {"dim": neg_dim(ctx, d, r), "at": d, "sizes": ", ".join(size_src(ctx, dd) for dd in descs), "descs": descs}


def _unflatten_shape(shapes, params):
    s = shapes[0]
    d = params["at"]
    sub = [None if dd[0] == "rest" else size_eval(dd, [s]) for dd in params["descs"]]
    if None in sub:
        known = math.prod(v for v in sub if v is not None)
        sub[sub.index(None)] = s[d] // known
    return tuple(s[:d]) + tuple(sub) + tuple(s[d + 1 :])


# ------------------------------------------------------- narrow, slice, select

# (start, length) as functions of the dim size n, with the smallest n they need.
NARROW_FORMS = {
    "head_half": (lambda n: 0, lambda n: n // 2, 0, "0", "{n} // 2"),
    "tail_half": (lambda n: n // 2, lambda n: n - n // 2, 0, "{n} // 2", "{n} - {n} // 2"),
    "mid": (lambda n: n // 4, lambda n: n // 2, 0, "{n} // 4", "{n} // 2"),
    "inner": (lambda n: 1, lambda n: n - 2, 2, "1", "{n} - 2"),
    "all": (lambda n: 0, lambda n: n, 0, "0", "{n}"),
    "first": (lambda n: 0, lambda n: 1, 1, "0", "1"),
    "last": (lambda n: n - 1, lambda n: 1, 1, "{n} - 1", "1"),
    "neg_start": (lambda n: n - 1, lambda n: 1, 1, "-1", "1"),
    "two": (lambda n: 1, lambda n: 2, 3, "1", "2"),
}


def _narrow_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    lo = x.min_size(d)
    forms = [k for k, f in NARROW_FORMS.items() if lo >= f[2]]
    form = ctx.draw(st.sampled_from(forms))
    n = ctx.size_ref(x, d)
    _, _, _, start, length = NARROW_FORMS[form]
    out = {"dim": neg_dim(ctx, d, r), "at": d, "form": form, "start": start.format(n=n), "length": length.format(n=n)}
    k = ctx.scalar(("int",), lambda vs: all(0 <= v <= size for v, size in zip(vs, x.sizes(d))))
    if k is not None:  # an int input as the length (from 0), or as the start (to the end)
        if ctx.draw(st.booleans()):
            out.update(form="int_start", start=k.name, length=f"{n} - {k.name}", k=k.name)
        else:
            out.update(form="int_length", start="0", length=k.name, k=k.name)
    return out


def _narrow_shape(shapes, params):
    s = list(shapes[0])
    d = params["at"]
    if params["form"] in ("int_start", "int_length"):
        k = scalar_value(params, params["k"])
        s[d] = k if params["form"] == "int_length" else s[d] - k
        return tuple(s)
    s[d] = NARROW_FORMS[params["form"]][1](s[d])
    return tuple(s)


# Slice bounds: name -> (value as a function of the dim size n, source).
# Python slicing clamps, so constants are valid at every size.
BOUNDS = {
    "none": (lambda n: None, ""),
    "0": (lambda n: 0, "0"),
    "1": (lambda n: 1, "1"),
    "2": (lambda n: 2, "2"),
    "-1": (lambda n: -1, "-1"),
    "-2": (lambda n: -2, "-2"),
    "-3": (lambda n: -3, "-3"),
    "5": (lambda n: 5, "5"),
    "half": (lambda n: n // 2, "{n} // 2"),
    "-half": (lambda n: -(n // 2), "-({n} // 2)"),
    "n-1": (lambda n: n - 1, "{n} - 1"),
    "n+1": (lambda n: n + 1, "{n} + 1"),
}
STEPS = [None, None, 1, 2, 2, 3]


def _slice_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    k = ctx.draw(st.integers(1, min(r, 2)))
    dims = sorted(ctx.draw(st.permutations(list(range(r))))[:k])
    parts = {}
    plan = []
    for d in dims:
        start = ctx.draw(st.sampled_from(list(BOUNDS)))
        stop = ctx.draw(st.sampled_from(list(BOUNDS)))
        step = ctx.draw(st.sampled_from(STEPS))
        n = ctx.size_ref(x, d) if any("{n}" in BOUNDS[b][1] for b in (start, stop)) else ""
        first, last = BOUNDS[start][1].format(n=n), BOUNDS[stop][1].format(n=n)
        k = ctx.scalar(("int",))  # slicing clamps: any int input is a valid bound
        if k is not None:
            if ctx.draw(st.booleans()):
                first, start = k.name, "v:" + k.name
            else:
                last, stop = k.name, "v:" + k.name
        text = first + ":" + last
        if step is not None:
            text += f":{step}"
        parts[d] = text
        plan.append([d, start, stop, step])
    if ctx.draw(st.booleans()) and dims[0] > 0:  # spell from the back with an ellipsis
        items = ["..."] + [parts.get(d, ":") for d in range(dims[0], r)]
    else:
        items = [parts.get(d, ":") for d in range(dims[-1] + 1)]
    return {"index": ", ".join(items), "plan": plan}


def _slice_shape(shapes, params):
    s = list(shapes[0])

    def bound(name, n):  # "v:k" is the int input k
        return scalar_value(params, name[2:]) if name.startswith("v:") else BOUNDS[name][0](n)

    for d, start, stop, step in params["plan"]:
        n = s[d]
        s[d] = len(range(n)[slice(bound(start, n), bound(stop, n), step)])
    return tuple(s)


def _draw_nonempty_dim(ctx):
    """A dim of operand 0 that is non-empty in every world, or None if there is none."""
    x = ctx.operands[0]
    dims = [e for e in range(x.rank) if x.min_size(e) >= 1]
    return ctx.draw(st.sampled_from(dims)) if dims else None


def _select_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = _draw_nonempty_dim(ctx)
    if d is None:
        return {"suffix": f".select({BAD_DIM}, 0)", "at": 0}
    choices = ["0", "-1", "{n} // 2", "{n} - 1", "-{n}"]
    if x.min_size(d) >= 2:
        choices += ["1", "-2"]
    idx = ctx.draw(st.sampled_from(choices))
    if "{n}" in idx:
        idx = idx.format(n=ctx.size_ref(x, d))
    if ctx.draw(st.booleans()):
        suffix = f".select({neg_dim(ctx, d, r)}, {idx})"
    elif d == r - 1 and d > 0 and ctx.draw(st.booleans()):
        suffix = f"[..., {idx}]"
    else:
        suffix = "[" + ":, " * d + idx + "]"
    return {"suffix": suffix, "at": d}


def _drop_dim_shape(shapes, params):
    s = shapes[0]
    d = params["at"]
    return tuple(s[:d]) + tuple(s[d + 1 :])


# ----------------------------------------------------- split, chunk, unbind


def _split_sizes(n, size):
    if n == 0:
        return [0]
    return [min(size, n - i) for i in range(0, n, size)]


def _chunk_sizes(n, k):
    if n == 0:
        return [0] * k
    cs = -(-n // k)
    return [min(cs, n - i) for i in range(0, n, cs)]


def _pick_index(ctx, counts):
    """An index valid for every world's number of pieces."""
    lo = min(counts)
    choices = [0, -1] + [i for i in (1, 2) if lo > i] + ([-2] if lo >= 2 else [])
    return ctx.draw(st.sampled_from(choices))


def _split_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    dim = neg_dim(ctx, d, r)
    mode = ctx.draw(st.sampled_from(["c", "c", "half", "halves"]))
    if mode == "halves":  # a list of two symbolic sections
        n = ctx.size_ref(x, d)
        return {"arg": f"[{n} // 2, {n} - {n} // 2]", "dim": dim, "i": ctx.draw(st.sampled_from([0, 1, -1])),
                "at": d, "mode": mode, "k": 0}
    k = ctx.draw(st.integers(1, 3))
    arg = str(k) if mode == "c" else f"max({ctx.size_ref(x, d)} // 2, 1)"
    counts = [len(_split_pieces(n, mode, k)) for n in x.sizes(d)]
    return {"arg": arg, "dim": dim, "i": _pick_index(ctx, counts), "at": d, "mode": mode, "k": k}


def _split_pieces(n, mode, k):
    if mode == "halves":
        return [n // 2, n - n // 2]
    return _split_sizes(n, k if mode == "c" else max(n // 2, 1))


def _split_shape(shapes, params):
    s = list(shapes[0])
    d = params["at"]
    s[d] = _split_pieces(s[d], params["mode"], params["k"])[params["i"]]
    return tuple(s)


def _chunk_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = ctx.draw(st.integers(0, r - 1))
    k = ctx.draw(st.integers(1, 4))
    i = _pick_index(ctx, [len(_chunk_sizes(n, k)) for n in x.sizes(d)])
    return {"k": k, "dim": neg_dim(ctx, d, r), "i": i, "at": d}


def _chunk_shape(shapes, params):
    s = list(shapes[0])
    d = params["at"]
    s[d] = _chunk_sizes(s[d], params["k"])[params["i"]]
    return tuple(s)


def _unbind_params(ctx):
    x = ctx.operands[0]
    r = x.rank
    d = _draw_nonempty_dim(ctx)
    if d is None:
        return {"dim": BAD_DIM, "i": 0, "at": 0}
    return {"dim": neg_dim(ctx, d, r), "i": _pick_index(ctx, list(x.sizes(d))), "at": d}


# ------------------------------------------------------------------- diagonal


def _diagonal_params(ctx):
    r = ctx.operands[0].rank
    a, b = ctx.draw(st.permutations(list(range(r))))[:2]
    offset = ctx.draw(st.sampled_from([0, 0, 1, -1, 2, -3]))
    return {"offset": offset, "d1": neg_dim(ctx, a, r), "d2": neg_dim(ctx, b, r), "a": a, "b": b}


def _diagonal_shape(shapes, params):
    s = shapes[0]
    a, b, off = params["a"], params["b"], params["offset"]
    if off >= 0:
        length = max(0, min(s[a], s[b] - off))
    else:
        length = max(0, min(s[a] + off, s[b]))
    return tuple(v for i, v in enumerate(s) if i not in (a, b)) + (length,)


def _t_shape(shapes, params):
    return tuple(reversed(shapes[0]))


def _mT_shape(shapes, params):
    s = list(shapes[0])
    s[-1], s[-2] = s[-2], s[-1]
    return tuple(s)


def _contiguous_params(ctx):
    return {"call": ctx.draw(st.sampled_from([".contiguous()", ".contiguous(memory_format=torch.contiguous_format)"]))}


SPECS = [
    OpSpec("view", F, "{0}.view({shape})", params=_view_params, shape=_view_shape, weight=1.5),
    OpSpec("reshape", F, "{0}.reshape({shape})", params=_view_params, shape=_view_shape, weight=1.5),
    OpSpec("permute", F, "{0}.permute({perm})", min_rank=1, params=_permute_params, shape=_permute_shape),
    OpSpec("transpose", F, "{0}.transpose({a}, {b})", min_rank=1, params=_transpose_params, shape=_transpose_shape),
    OpSpec("t", F, "{0}.t()", max_rank=2, shape=_t_shape, weight=0.5),
    OpSpec("mT", F, "{0}.mT", min_rank=2, shape=_mT_shape, weight=0.5),
    OpSpec("movedim", F, "torch.movedim({0}, {src}, {dst})", min_rank=1, params=_movedim_params, shape=_movedim_shape),
    OpSpec("expand", F, "{0}.expand({sizes})", params=_expand_params, shape=_expand_shape),
    OpSpec("squeeze", F, "{0}.squeeze({args})", params=_squeeze_params, shape=_squeeze_shape),
    OpSpec("unsqueeze", F, "{0}.unsqueeze({dim})", params=_unsqueeze_params, shape=_unsqueeze_shape),
    OpSpec("flatten", F, "{0}.flatten({args})", params=_flatten_params, shape=_flatten_shape),
    OpSpec("unflatten", F, "{0}.unflatten({dim}, ({sizes}))", min_rank=1, params=_unflatten_params, shape=_unflatten_shape),
    OpSpec("narrow", F, "{0}.narrow({dim}, {start}, {length})", min_rank=1, params=_narrow_params, shape=_narrow_shape),
    OpSpec("slice", F, "{0}[{index}]", min_rank=1, params=_slice_params, shape=_slice_shape, weight=1.5),
    OpSpec("select", F, "{0}{suffix}", min_rank=1, params=_select_params, shape=_drop_dim_shape),
    OpSpec("split", F, "torch.split({0}, {arg}, dim={dim})[{i}]", min_rank=1, params=_split_params, shape=_split_shape),
    OpSpec("chunk", F, "{0}.chunk({k}, {dim})[{i}]", min_rank=1, params=_chunk_params, shape=_chunk_shape),
    OpSpec("unbind", F, "torch.unbind({0}, {dim})[{i}]", min_rank=1, params=_unbind_params, shape=_drop_dim_shape),
    OpSpec("diagonal", F, "torch.diagonal({0}, offset={offset}, dim1={d1}, dim2={d2})", min_rank=2,
           params=_diagonal_params, shape=_diagonal_shape),
    OpSpec("contiguous", F, "{0}{call}", params=_contiguous_params, shape=same_as_first, weight=0.5),
]
