"""Real-model motifs: short statement sequences lifted from how models are written.

Random ops rarely line up into what compiled models actually do with shapes:
split a hidden dim into attention heads and merge it back, flatten after a
transpose, cut an image into patches, rotate half of a vector (RoPE), append
to a KV cache and keep a window of it, mask padding from sequence lengths,
reshape a stepped or sliced view, cut a position table or a preallocated
cache to the current length at a start position that changes between calls.
The last two are there for the rare paths they reach (index arithmetic by
symbolic sizes; a Python int feeding shapes): ``benchmarks/idioms.py`` counts
how often a campaign reaches those paths with and without them.
Each motif here appends a few statements through the ``Builder``
(``fuzz/generate.py``), so each statement is executed in every world and the
motif is kept only when all of them are valid everywhere; the random ops
drawn before and after it compose with its values. Sizes are read from the
values (``B = x.size(0)``, ``L = x.size(1)``), never baked in, so they stay
symbolic when compiled; only what models fix by design (the number of heads,
a patch size, a window) is a constant.

A motif works on a live value when one fits, and otherwise adds an input of
the shape it needs (symbol dims for batch and length; for patches, a size
symbol whose every value is a multiple of the patch size). The names of the
motifs a case used are recorded, in order, in ``Builder.motifs``, which
``build_case`` copies to ``case.origin["motifs"]`` (per-motif stats).

This module never imports the generator (which imports it): it works on the
``Builder`` it is given.
"""

from __future__ import annotations

from typing import Callable, Optional

import hypothesis.strategies as st

from symfuzz.fuzz.choices import weighted
from symfuzz.fuzz.ir import ExprNode, SizeNode
from symfuzz.fuzz.specs.base import FLOAT, Operand

# Dtypes of the inputs a motif adds: mostly float32, as models run.
FLOAT_WEIGHTS = [("float32", 10), ("float64", 1), ("float16", 2), ("bfloat16", 2)]
# Multiples of a patch size for a size symbol a motif adds (k * P, k drawn here).
MULTIPLE_WEIGHTS = [(2, 6), (1, 4), (3, 4), (4, 3), (0, 1), (6, 2), (8, 1)]


class Reject(Exception):
    """A motif's statement was invalid in some world: the whole motif is undone."""


# ------------------------------------------------------------------ building blocks


def expr(b, text: str) -> Operand:
    """Append ``v = text`` (a tensor); Reject unless valid in every world."""
    name = b.fresh("v")
    if not b.try_statement(ExprNode(name, text), name) or b.tensors[-1].name != name:
        raise Reject(text)
    return b.tensors[-1]


def size(b, text: str) -> str:
    """Append ``n = text`` (a Python int); Reject unless valid in every world."""
    name = b.fresh("n")
    if not b.try_statement(SizeNode(name, text), name) or name not in b.ints:
        raise Reject(text)
    return name


def size_of(b, x: Operand, dim: int) -> str:
    """Source for a size of ``x``, often a named int read first (``B = x.size(0)``)."""
    if b.draw(st.integers(0, 2)):
        form = b.draw(st.sampled_from(["{v}.size({d})", "{v}.shape[{d}]"]))
        return size(b, form.format(v=x.name, d=dim))
    return b.size_ref(x, dim)


def pick(b, accept: Callable[[Operand], bool]) -> Optional[Operand]:
    """A live value with sizes from plain inputs that ``accept`` takes, or None.

    Sometimes None although one fits, so motifs also run on fresh inputs.
    """
    fits = [t for t in b.backed_sized() if accept(t)]
    if not fits or b.draw(st.integers(0, 3)) == 0:
        return None
    return fits[-1 - b.draw(st.integers(0, len(fits) - 1))]  # newest first: composes with the ops just drawn


def new_input(b, dims: tuple, dtype: Optional[str] = None) -> Operand:
    """Add an input of ``dims`` (symbol names or ints); Reject when too many or too big."""
    if len(b.inputs) >= b.config.max_inputs + 2:
        raise Reject("too many inputs")
    operand = b.add_input(tuple(dims), dtype or weighted(b.draw, FLOAT_WEIGHTS))
    if operand is None:
        raise Reject("input too big")
    return operand


def symbol(b) -> str:
    return b.draw(st.sampled_from(sorted(b.symbols)))


def multiple_symbol(b, k: int) -> str:
    """A size symbol whose value in every world is a multiple of ``k``; adds one if none is."""
    fits = [s for s in sorted(b.symbols) if all(v % k == 0 for v in b.symbols[s])]
    if fits and b.draw(st.booleans()):
        return b.draw(st.sampled_from(fits))
    name = next(f"s{i}" for i in range(len(b.symbols), len(b.symbols) + 100) if f"s{i}" not in b.symbols)
    b.symbols[name] = tuple(k * weighted(b.draw, MULTIPLE_WEIGHTS) for _ in range(b.n_worlds))
    return name


def contiguous(b, x: Operand) -> bool:
    return all(env[x.name].is_contiguous() for env in b.envs)


def view_or_reshape(b, x: Operand) -> str:
    """``view`` needs a viewable layout in every world; ``reshape`` always works."""
    return b.draw(st.sampled_from(["view", "reshape"])) if contiguous(b, x) else "reshape"


def floats(t: Operand) -> bool:
    return t.kind == FLOAT


# ------------------------------------------------------------------ the motifs


def heads(b) -> None:
    """Attention heads: ``x.view(B, L, H, D).transpose(1, 2)``, maybe folded to
    ``(B * H, L, D)`` and attended over, then merged back to ``(B, L, H * D)``."""
    h = b.draw(st.sampled_from([2, 4, 3, 1]))
    x = pick(b, lambda t: floats(t) and t.rank == 3 and all(v > 0 and v % h == 0 for v in t.sizes(2)))
    if x is None:
        x = new_input(b, (symbol(b), symbol(b), h * b.draw(st.sampled_from([2, 4, 8, 3]))))
    B, L = size_of(b, x, 0), size_of(b, x, 1)
    widths = set(x.sizes(2))
    if len(widths) == 1 and b.draw(st.booleans()):
        D = str(widths.pop() // h)  # a model's head_dim: a constant
    else:
        D = size(b, b.draw(st.sampled_from(["{x}.size(-1) // {h}", "{x}.shape[-1] // {h}", "{x}.shape[2] // {h}"]))
                 .format(x=x.name, h=h))
    split = b.draw(st.sampled_from([
        "{x}.{view}({B}, {L}, {H}, {D}).transpose(1, 2)",
        "{x}.{view}({B}, {L}, {H}, -1).permute(0, 2, 1, 3)",
        "{x}.unflatten(-1, ({H}, {D})).transpose(1, 2)",
    ]))
    q = expr(b, split.format(x=x.name, view=view_or_reshape(b, x), B=B, L=L, H=h, D=D))  # (B, H, L, D)
    if b.draw(st.booleans()):  # fold heads into the batch: (B * H, L, D)
        folded = expr(b, f"{q.name}.reshape({B} * {h}, {L}, {D})")
        mid = b.draw(st.sampled_from([
            "torch.bmm(torch.softmax(torch.bmm({q}, {q}.transpose(1, 2)) / math.sqrt({D}), dim=-1), {q})",
            "{q} * 2",
            "torch.relu({q})",
            "{q}",
        ])).format(q=folded.name, D=D)
        attended = expr(b, mid) if mid != folded.name else folded
        q = expr(b, f"{attended.name}.view({B}, {h}, {L}, {D})")
    else:
        mid = b.draw(st.sampled_from([
            "F.scaled_dot_product_attention({q}, {q}, {q})",
            "F.scaled_dot_product_attention({q}, {q}, {q}, is_causal=True)",
            "torch.softmax({q} @ {q}.transpose(-2, -1) / math.sqrt({D}), dim=-1) @ {q}",
            "{q}",
        ])).format(q=q.name, D=D)
        if mid != q.name:
            q = expr(b, mid)
    merge = b.draw(st.sampled_from([
        "{o}.transpose(1, 2).reshape({B}, {L}, {H} * {D})",
        "{o}.transpose(1, 2).contiguous().view({B}, {L}, -1)",
        "{o}.transpose(1, 2).flatten(2)",
        "{o}.permute(0, 2, 1, 3).reshape({B}, {L}, {H} * {D})",
    ]))
    expr(b, merge.format(o=q.name, B=B, L=L, H=h, D=D))


def flatten(b) -> None:
    """A transpose or permute, then a flatten (``.contiguous().view``, ``reshape``,
    ``flatten``) with target sizes read from the input; sometimes unflattened
    and permuted back."""
    x = pick(b, lambda t: 2 <= t.rank <= 5)
    if x is None:
        x = new_input(b, tuple(symbol(b) for _ in range(b.draw(st.integers(2, 4)))))
    r = x.rank
    order = list(range(r))
    if b.draw(st.booleans()):
        a = b.draw(st.integers(0, r - 2))
        c = b.draw(st.integers(a + 1, r - 1))
        order[a], order[c] = order[c], order[a]
        moved = f"{x.name}.transpose({a}, {c})"
    else:
        for i in range(r - 1, 0, -1):  # Fisher-Yates: shrinks toward the identity
            j = i - b.draw(st.integers(0, i))
            order[i], order[j] = order[j], order[i]
        moved = f"{x.name}.permute({', '.join(map(str, order))})"
    refs = [size_of(b, x, d) for d in order]  # the sizes of the moved value, read from x
    if b.draw(st.booleans()):
        moved = expr(b, moved).name
    start = b.draw(st.integers(0, r - 2))
    end = b.draw(st.integers(start + 1, r - 1))
    target = refs[:start] + [" * ".join(refs[start:end + 1])] + refs[end + 1:]
    if b.draw(st.integers(0, 2)) == 0:
        target[b.draw(st.integers(0, len(target) - 1))] = "-1"
    shape = ", ".join(target)
    form = b.draw(st.sampled_from(["{m}.contiguous().view({s})", "{m}.reshape({s})", "{m}.flatten({a}, {e})"]))
    flat = expr(b, form.format(m=moved, s=shape, a=start, e=end))
    if b.draw(st.booleans()):
        return
    back = b.draw(st.sampled_from(["{f}.{view}({s})", "{f}.unflatten({a}, ({g}))"]))
    unflat = expr(b, back.format(f=flat.name, view=view_or_reshape(b, flat), s=", ".join(refs), a=start,
                                 g=", ".join(refs[start:end + 1])))
    if b.draw(st.booleans()):
        inverse = [order.index(d) for d in range(r)]
        expr(b, f"{unflat.name}.permute({', '.join(map(str, inverse))})")


def patches(b) -> None:
    """Patches of an image ``(N, C, H, W)``: the view-permute-reshape patchify and
    its inverse, ``unfold`` twice, ``pixel_unshuffle``/``pixel_shuffle`` (or their
    view-permute form); or sliding windows ``x.unfold(-1, K, S)`` of any value."""
    kind = b.draw(st.sampled_from(["view", "unfold", "pixel", "window"]))
    if kind == "window":
        k = b.draw(st.sampled_from([2, 3, 4]))
        step = b.draw(st.integers(1, k))
        x = pick(b, lambda t: t.rank >= 1 and min(t.sizes(t.rank - 1)) >= k)
        if x is None:
            x = new_input(b, (symbol(b), 2 * k + b.draw(st.integers(0, 5))) if b.draw(st.booleans())
                          else (symbol(b), multiple_symbol(b, k)))
        windows = expr(b, f"{x.name}.unfold(-1, {k}, {step})")
        reduce = b.draw(st.sampled_from(["{w}.flatten(-2)", "{w}.sum(-1)", "{w}.amax(-1)", "{w}"]))
        if reduce != "{w}":
            expr(b, reduce.format(w=windows.name))
        return
    p = b.draw(st.sampled_from([2, 2, 3, 4]))
    x = pick(b, lambda t: floats(t) and t.rank == 4 and all(v % p == 0 for d in (2, 3) for v in t.sizes(d)))
    if x is None:
        x = new_input(b, (symbol(b), b.draw(st.sampled_from([1, 3, 2])), multiple_symbol(b, p), multiple_symbol(b, p)))
    N, C, H, W = (size_of(b, x, d) for d in range(4))
    if kind == "pixel":
        packed = expr(b, f"F.pixel_unshuffle({x.name}, {p})")  # (N, C * p * p, H / p, W / p)
        packed = middle(b, packed, f"{C} * {p * p}", dim=1)
        back = b.draw(st.sampled_from([
            "F.pixel_shuffle({u}, {p})",
            "{u}.reshape({N}, {C}, {p}, {p}, {H} // {p}, {W} // {p}).permute(0, 1, 4, 2, 5, 3).reshape({N}, {C}, {H}, {W})",
        ]))
        expr(b, back.format(u=packed.name, p=p, N=N, C=C, H=H, W=W))
        return
    if kind == "view":
        form = ("{x}.{view}({N}, {C}, {H} // {p}, {p}, {W} // {p}, {p}).permute(0, 2, 4, 1, 3, 5)"
                ".reshape({N}, ({H} // {p}) * ({W} // {p}), {C} * {p} * {p})")
    else:
        form = ("{x}.unfold(2, {p}, {p}).unfold(3, {p}, {p}).permute(0, 2, 3, 1, 4, 5)"
                ".reshape({N}, ({H} // {p}) * ({W} // {p}), {C} * {p} * {p})")
    tokens = expr(b, form.format(x=x.name, view=view_or_reshape(b, x), N=N, C=C, H=H, W=W, p=p))  # (N, patches, C p p)
    tokens = middle(b, tokens, f"{C} * {p * p}", dim=-1)
    if b.draw(st.booleans()):
        expr(b, (f"{tokens.name}.reshape({N}, {H} // {p}, {W} // {p}, {C}, {p}, {p}).permute(0, 3, 1, 4, 2, 5)"
                 f".reshape({N}, {C}, {H}, {W})"))


def middle(b, x: Operand, width: str, dim: int) -> Operand:
    """What a model does between patchify and unpatchify (often nothing)."""
    form = b.draw(st.sampled_from([
        "{x}",
        "{x} * 2",
        "F.layer_norm({x}, ({w},))" if dim == -1 else "{x}.softmax({d})",
        "{x} - {x}.mean({d}, keepdim=True)",
    ]))
    return x if form == "{x}" else expr(b, form.format(x=x.name, w=width, d=dim))


def rope(b) -> None:
    """Rotary embedding: ``x1, x2 = x[..., :d // 2], x[..., d // 2:]``,
    ``torch.cat((-x2, x1), dim=-1)``, times sin, plus ``x`` times cos; the
    angles from positions ``torch.arange(L)`` (in float32, as models do)."""
    x = pick(b, lambda t: floats(t) and t.rank >= 2 and all(v > 0 and v % 2 == 0 for v in t.sizes(t.rank - 1)))
    if x is None:
        x = new_input(b, (symbol(b), symbol(b), b.draw(st.sampled_from([4, 8, 2, 16]))))
    d = size_of(b, x, x.rank - 1)
    L = size_of(b, x, x.rank - 2)
    if b.draw(st.booleans()):
        x1 = expr(b, f"{x.name}[..., : {d} // 2]")
        x2 = expr(b, f"{x.name}[..., {d} // 2 :]")
    else:
        x1 = expr(b, f"{x.name}.chunk(2, dim=-1)[0]")
        x2 = expr(b, f"{x.name}.chunk(2, dim=-1)[1]")
    rotated = expr(b, f"torch.cat((-{x2.name}, {x1.name}), dim=-1)")
    inv = expr(b, f"1.0 / (10000 ** (torch.arange(0, {d}, 2, device={x.name}.device, dtype=torch.float32) / {d}))")
    pos = f"torch.arange({L}, device={x.name}.device, dtype=torch.float32)"
    freqs = expr(b, b.draw(st.sampled_from([f"torch.outer({pos}, {inv.name})", f"{pos}[:, None] * {inv.name}[None, :]"])))
    emb = expr(b, f"torch.cat(({freqs.name}, {freqs.name}), dim=-1)")
    expr(b, f"{x.name} * {emb.name}.cos().to({x.name}.dtype) + {rotated.name} * {emb.name}.sin().to({x.name}.dtype)")


def kv_cache(b) -> None:
    """A decode step: ``cache = torch.cat([past, new], dim=1)``, then a window of it
    (``cache.narrow(1, cache.size(1) - W, W)``, ``cache[:, -W:]``...), maybe attended
    over by ``new``."""
    new = pick(b, lambda t: floats(t) and t.rank == 3)
    if new is None:
        new = new_input(b, (symbol(b), symbol(b), b.draw(st.sampled_from([4, 8, 3]))))
    dims = b.dims_for(list(new.shapes))
    if dims is None:
        raise Reject("no input dims reproduce the new value's shape")
    past = new_input(b, (dims[0], symbol(b), dims[2]), new.dtype)
    if b.draw(st.integers(0, 2)) == 0:  # a rolling cache drops its oldest entry
        cache = expr(b, f"torch.cat([{past.name}[:, 1:], {new.name}], dim=1)")
    else:
        cache = expr(b, b.draw(st.sampled_from(["torch.cat([{p}, {n}], dim=1)", "torch.cat(({p}, {n}), 1)"]))
                     .format(p=past.name, n=new.name))
    n = size_of(b, cache, 1)
    t = size_of(b, new, 1)
    smallest = min(cache.sizes(1))
    w = b.draw(st.integers(1, max(1, smallest)))
    form = b.draw(st.sampled_from([
        "{c}.narrow(1, {n} - {t}, {t})",
        "{c}.narrow(1, {n} - {w}, {w})",
        "{c}[:, -{w}:]",
        "{c}[:, {n} - {t}:]",
        "{c}.narrow(1, max({n} - {w}, 0), min({n}, {w}))",
    ]))
    window = expr(b, form.format(c=cache.name, n=n, t=t, w=w))
    if b.draw(st.booleans()):
        e = size_of(b, new, 2)
        expr(b, (f"torch.softmax({new.name} @ {window.name}.transpose(1, 2) / math.sqrt({e}), dim=-1) "
                 f"@ {window.name}"))
    elif b.draw(st.booleans()):  # positions of the new entries, offset by the cache's length
        expr(b, f"{new.name} + torch.arange({n} - {t}, {n}, device={new.name}.device).to({new.name}.dtype)[None, :, None]")


def pad_mask(b) -> None:
    """A padding mask from lengths: ``torch.arange(L)[None, :] < lengths[:, None]``,
    then ``masked_fill``, a masked mean, or an attention bias. Lengths come from an
    int input, from token ids, or from the batch index."""
    x = pick(b, lambda t: floats(t) and t.rank in (2, 3))
    if x is None:
        x = new_input(b, (symbol(b), symbol(b)) + ((b.draw(st.sampled_from([4, 3, 8])),) if b.draw(st.booleans()) else ()))
    B, L = size_of(b, x, 0), size_of(b, x, 1)
    source = b.draw(st.sampled_from(["input", "arange", "tokens"]))
    dims = b.dims_for(list(x.shapes))
    if dims is None:
        source = "arange"
    if source == "input":
        raw = new_input(b, (dims[0],), b.draw(st.sampled_from(["int64", "int32"])))
        lengths = expr(b, b.draw(st.sampled_from(["{r}.abs() % ({L} + 1)", "{r}.clamp(0, {L})"])).format(r=raw.name, L=L))
    elif source == "tokens":
        tokens = new_input(b, (dims[0], dims[1]), "int64")
        lengths = expr(b, f"({tokens.name} != 0).sum(1)")
    else:
        lengths = expr(b, b.draw(st.sampled_from([
            "({L} - torch.arange({B}, device={x}.device)).clamp(min=0)",
            "torch.arange({B}, device={x}.device) % ({L} + 1)",
        ])).format(B=B, L=L, x=x.name))
    mask = expr(b, b.draw(st.sampled_from([
        "torch.arange({L}, device={x}.device)[None, :] < {n}[:, None]",
        "torch.arange({L}, device={x}.device).expand({B}, {L}) < {n}.unsqueeze(1)",
    ])).format(L=L, B=B, x=x.name, n=lengths.name))  # (B, L) bool
    m = f"{mask.name}[:, :, None]" if x.rank == 3 else mask.name
    uses = [
        f"{x.name}.masked_fill(~{m}, 0.0)",
        f"{x.name} * {m}.to({x.name}.dtype)",
        f"torch.where({m}, {x.name}, torch.zeros_like({x.name}))",
    ]
    if x.rank == 3:
        uses.append(f"({x.name} * {m}.to({x.name}.dtype)).sum(1) / {lengths.name}.clamp(min=1)[:, None].to({x.name}.dtype)")
        uses.append(f"torch.softmax(({x.name} @ {x.name}.transpose(1, 2)).masked_fill(~{mask.name}[:, None, :], -1e4), dim=-1)")
    expr(b, b.draw(st.sampled_from(uses)))


def strided_reshape(b) -> None:
    """A reshape of a non-contiguous view: a stepped slice (``x[:, ::2]``), a slice to a size
    read at run time (``x[..., :n - 1]``), a transpose or an expand, then ``reshape``/``flatten``
    merging its dims (sometimes split again by a size of it), and an elementwise use. The copy
    Inductor makes of it indexes the view with divisions and moduli by its symbolic sizes
    (``FloorDiv(i, s)``, ``ModularIndexing(i, s, c)``), a path other statements rarely reach."""
    x = pick(b, lambda t: 2 <= t.rank <= 4)
    if x is None:
        x = new_input(b, tuple(symbol(b) for _ in range(b.draw(st.integers(2, 3)))))
    r = x.rank
    kind = b.draw(st.sampled_from(["step", "slice", "transpose", "expand"]))
    if kind == "step":
        d = b.draw(st.integers(0, r - 1))
        index = [":"] * d + [b.draw(st.sampled_from(["::2", "1::2", "::3"]))]
        view = expr(b, f"{x.name}[{', '.join(index)}]")
    elif kind == "slice":  # a length known at run time, of the last dim (so the view is not contiguous)
        n = size_of(b, x, r - 1)
        bound = b.draw(st.sampled_from(["{n} - 1", "{n} // 2", "max({n} - 2, 1)"])).format(n=n)
        view = expr(b, f"{x.name}[..., :{bound}]")
    elif kind == "transpose":
        a = b.draw(st.integers(0, r - 2))
        view = expr(b, f"{x.name}.transpose({a}, {b.draw(st.integers(a + 1, r - 1))})")
    else:  # a new dim of a size read from the value, expanded (stride 0)
        k = size_of(b, x, b.draw(st.integers(0, r - 1)))
        view = expr(b, f"{x.name}.unsqueeze(1).expand(-1, {k}, {', '.join(['-1'] * (r - 1))})")
    start = b.draw(st.integers(0, view.rank - 2))
    end = b.draw(st.integers(start + 1, view.rank - 1))
    merge = b.draw(st.sampled_from(["{v}.flatten({a}, {e})", "{v}.reshape({s})", "{v}.reshape(-1)"]))
    target = ""
    if "{s}" in merge:
        refs = [size_of(b, view, d) if not start <= d <= end else "-1" for d in range(view.rank)]
        target = ", ".join(refs[:start + 1] + refs[end + 1:])
    flat = expr(b, merge.format(v=view.name, a=start, e=end, s=target))
    if b.draw(st.booleans()):  # split again by a size of the view: (n * m) -> (n, m)
        at = 0 if merge.endswith("(-1)") else start
        flat = expr(b, f"{flat.name}.unflatten({at}, (-1, {size_of(b, view, end)}))")
    use = b.draw(st.sampled_from(["{f} * 2", "{f} + {f}.sum()", "{f}.sin()" if floats(flat) else "{f} * 2",
                                  "torch.cat([{f}, {f}], dim=0)"]))
    expr(b, use.format(f=flat.name))


# A buffer's length where a model fixes one (max_seq_len), and the window a call takes of it.
BUFFER_LENGTHS = [64, 32, 16]


def buffer_slice(b) -> None:
    """A window of a longer buffer, as models take one: a position table cut to the sequence
    length (``pe[:L]``), a preallocated cache read and written at a start position that changes
    between calls (``cache[:, start:start + L] = x``, then ``cache[:, :start + L]``: a Python
    int that feeds shapes), added to a value of that length."""
    x = pick(b, lambda t: floats(t) and t.rank in (2, 3))
    if x is None:
        x = new_input(b, (symbol(b), symbol(b)) + ((b.draw(st.sampled_from([4, 8])),) if b.draw(st.booleans()) else ()))
    dims = b.dims_for(list(x.shapes))
    if dims is None:
        raise Reject("no input dims reproduce the value's shape")
    d = x.rank - 2  # (L, D) or (B, L, D): the length dim
    lengths = x.sizes(d)
    limit = b.draw(st.sampled_from([m for m in BUFFER_LENGTHS if m >= max(lengths)] or [max(lengths)]))
    L = size_of(b, x, d)
    table = new_input(b, tuple(dims[:d]) + (limit, dims[-1]), x.dtype)
    lead = ":, " * d
    if b.draw(st.booleans()):
        expr(b, b.draw(st.sampled_from(["{x} + {t}[{lead}:{L}]", "{x} + {t}.narrow({d}, 0, {L})",
                                        "{x} * {t}[{lead}:{L}].sigmoid()"]))
             .format(x=x.name, t=table.name, lead=lead, L=L, d=d))
        return
    # a start position per call, so that start + L stays within the buffer
    starts = tuple(b.draw(st.integers(0, limit - n)) for n in lengths)
    if len(set(starts)) == 1 and len(starts) > 1:
        starts = starts[:-1] + (max(0, starts[-1] - 1) if starts[-1] else min(1, limit - lengths[-1]),)
    start = b.add_scalar_input("int", starts, "k")
    window = f"{table.name}[{lead}{start}:{start} + {L}]"
    if b.draw(st.booleans()):  # written, as a decode step writes its keys into the cache
        expr(b, f"{window}.copy_({x.name})")
        expr(b, f"{table.name}[{lead}:{start} + {L}]" + b.draw(st.sampled_from(["", ".sum({d})", " * 2"])).format(d=d))
    else:
        expr(b, f"{x.name} + {window}")


# (name, builder, weight). The first is what shrinking moves toward.
MOTIFS: list[tuple[str, Callable, int]] = [
    ("flatten", flatten, 3),
    ("heads", heads, 3),
    ("pad_mask", pad_mask, 2),
    ("kv_cache", kv_cache, 2),
    ("rope", rope, 2),
    ("patches", patches, 2),
    ("strided_reshape", strided_reshape, 3),
    ("buffer_slice", buffer_slice, 3),
]
MOTIF_NAMES = [name for name, _, _ in MOTIFS]


def draw_motif(b, only: Optional[str] = None) -> bool:
    """Append one motif (drawn by weight, or the one named ``only``) to ``b``'s program.

    All of it or nothing: a statement invalid in some world undoes the motif
    (its statements, inputs and any size symbol it added). On success its name
    is appended to ``b.motifs``.
    """
    weights = (b.config.motif_weights or {}) if only is None else {}
    table = [((n, f), weights.get(n, w)) for n, f, w in MOTIFS if only in (None, n)]
    table = [(motif, w) for motif, w in table if w > 0]
    if not table:
        return False
    name, build = weighted(b.draw, table)
    saved, symbols = b.save(), dict(b.symbols)
    try:
        build(b)
    except Reject:
        b.restore(saved)
        b.symbols.clear()
        b.symbols.update(symbols)
        return False
    b.motifs.append(name)
    return True
