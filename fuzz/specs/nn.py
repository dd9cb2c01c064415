"""torch.nn.functional ops: convolutions, pooling, interpolation,
normalizations, embedding and one_hot, attention, losses, dropout (eval).

Weights come from a partner whose dims are small constants or the first
operand's size vectors, e.g. a conv1d weight ``(out, C, k)`` whose ``C`` is
tied to the input's channel symbol. Normalization shapes and running stats
are size-level Python: ``F.layer_norm(x, (x.size(-1),))``,
``x.new_zeros(x.size(1))``.

Values that must be in range (embedding indices, one_hot classes, cross
entropy targets) are built in the rendered source (``idx.long() % n``,
``torch.arange(n) % C``), never assumed of the data. Eager CPU checks several
things that meta execution does not (partner dtype, nonempty spatial dims of
adaptive pooling); those are made valid by construction here. Statements that
cannot be made valid render an out-of-range dim (``BAD_DIM``) so the meta
check discards them.
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.specs.base import BOOL, FLOATING, INT, NUMERIC, OpSpec, broadcast, same_as_first
from symfuzz.fuzz.specs.linalg import cast, size_vec
from symfuzz.fuzz.specs.view import BAD_DIM, neg_dim

F = "nn"
INDEX_KINDS = frozenset({INT, BOOL})


# ---------------------------------------------------------------- size refs


def _size_choice(ctx, consts=(1, 2, 3), lo=1, scale=True):
    """A size descriptor: ["c", k] or ["d", dim] / ["d2", dim] (twice a dim of operand 0), with source."""
    x = ctx.operands[0]
    opts = [["c", c] for c in consts] + [["d", d] for d in range(x.rank) if x.min_size(d) >= lo]
    if scale:
        opts += [["d2", d] for d in range(x.rank) if x.min_size(d) >= lo and max(x.sizes(d)) <= 16]
    desc = ctx.draw(st.sampled_from(opts))
    if desc[0] == "c":
        return desc, str(desc[1])
    ref = ctx.size_ref(x, desc[1])
    return desc, ref if desc[0] == "d" else f"{ref} * 2"


def _size_eval(desc, shape):
    if desc[0] == "c":
        return desc[1]
    return shape[desc[1]] * (2 if desc[0] == "d2" else 1)


# ------------------------------------------------------------ convolutions


def _conv_partner(spatial):
    def partner(draw, first):
        c = first.rank - spatial - 1  # channel dim: 1 batched, 0 unbatched
        o = size_vec(draw, first, dims=[c], consts=(1, 2, 3, 4))
        ks = [draw(st.sampled_from([1, 2, 3])) for _ in range(spatial)]
        return [(oo, s[c]) + tuple(ks) for s, oo in zip(first.shapes, o)]

    return partner


def _convt_partner(draw, first):
    o = size_vec(draw, first, dims=[1], consts=(1, 2, 3))
    k = draw(st.sampled_from([1, 2, 3]))
    return [(s[1], oo, k) for s, oo in zip(first.shapes, o)]


def _conv_ok(x, spatial):
    """Eager CPU rejects empty channel or spatial dims unless the batch is empty; meta does not."""
    return all(x.min_size(d) >= 1 for d in range(x.rank - spatial - 1, x.rank))


def _conv_params(ctx):
    x, w = ctx.operands[0], ctx.operands[1]
    padding = ctx.draw(st.sampled_from(["'same'", "'same'", "0", "1"]))
    if not _conv_ok(x, w.rank - 2):
        padding = f"{x.name}.size({BAD_DIM})"
    stride = 1 if padding == "'same'" else ctx.draw(st.sampled_from([1, 1, 2]))
    dilation = ctx.draw(st.sampled_from([1, 1, 2]))
    c1 = cast(ctx)
    bias = f", {w.name}{c1}.sum(({', '.join(str(i) for i in range(1, w.rank))}))" if ctx.draw(st.booleans()) else ""
    return {"c1": c1, "bias": bias, "padding": padding, "stride": stride, "dilation": dilation}


def _conv_shape(shapes, params):
    x, w = shapes[0], shapes[1]
    spatial = len(w) - 2
    batch = tuple(x[: len(x) - spatial - 1])
    out = [w[0]]
    for i in range(spatial):
        n, k = x[len(x) - spatial + i], w[2 + i]
        if params["padding"] == "'same'":
            out.append(n)
        else:
            p = int(params["padding"])
            out.append((n + 2 * p - params["dilation"] * (k - 1) - 1) // params["stride"] + 1)
    return batch + tuple(out)


def _convt_params(ctx):
    x = ctx.operands[0]
    padding = ctx.draw(st.sampled_from([0, 1])) if _conv_ok(x, 1) else f"{x.name}.size({BAD_DIM})"
    return {"c1": cast(ctx), "stride": ctx.draw(st.sampled_from([1, 2])), "padding": padding}


def _convt_shape(shapes, params):
    x, w = shapes[0], shapes[1]
    n = (x[2] - 1) * params["stride"] - 2 * params["padding"] + w[2]
    return (x[0], w[1], n)


# ------------------------------------------------------------------ pooling


def _pool_params(spatial, avg=False):
    def params(ctx):
        ks = [ctx.draw(st.sampled_from([1, 2, 3])) for _ in range(spatial)]
        stride = ctx.draw(st.sampled_from([None, 1, 2]))
        pad = ctx.draw(st.integers(0, min(ks) // 2))
        out = {
            "k": ks[0] if spatial == 1 else f"({ks[0]}, {ks[1]})",
            "ks": ks,
            "stride": "None" if stride is None else stride,
            "s": stride,
            "padding": pad,
            "ceil_mode": ctx.draw(st.booleans()),
        }
        if avg:
            out["extra"] = ", count_include_pad=False" if ctx.draw(st.booleans()) else ""
        return out

    return params


def _pool_len(n, k, s, p, ceil):
    num = n + 2 * p - (k - 1) - 1
    if ceil:
        out = -(-num // s) + 1
        if (out - 1) * s >= n + p:
            out -= 1
        return out
    return num // s + 1


def _pool_shape(shapes, params):
    x = shapes[0]
    ks = params["ks"]
    spatial = len(ks)
    out = list(x[: len(x) - spatial])
    for i, k in enumerate(ks):
        s = k if params["s"] is None else params["s"]
        out.append(_pool_len(x[len(x) - spatial + i], k, s, params["padding"], params["ceil_mode"]))
    return tuple(out)


def _adaptive_params(spatial):
    def params(ctx):
        pairs = [_size_choice(ctx) for _ in range(spatial)]
        src = pairs[0][1] if spatial == 1 else "(" + ", ".join(p[1] for p in pairs) + ")"
        return {"out": src, "descs": [p[0] for p in pairs]}

    return params


def _adaptive_shape(shapes, params):
    x = shapes[0]
    descs = params["descs"]
    return tuple(x[: len(x) - len(descs)]) + tuple(_size_eval(d, x) for d in descs)


# ------------------------------------------------------------ interpolation


def _interp_scale_params(ctx):
    x = ctx.operands[0]
    spatial = x.rank - 2
    modes = ["nearest", "nearest-exact"] + {1: ["linear"], 2: ["bilinear", "bicubic"], 3: ["trilinear"]}[spatial]
    mode = ctx.draw(st.sampled_from(modes))
    extra = ""
    if mode not in ("nearest", "nearest-exact") and ctx.draw(st.booleans()):
        extra = ", align_corners=True"
    return {"sf": ctx.draw(st.sampled_from([2, 3])), "mode": mode, "extra": extra}


def _interp_scale_shape(shapes, params):
    x = shapes[0]
    return tuple(x[:2]) + tuple(n * params["sf"] for n in x[2:])


def _interp_size_params(ctx):
    x = ctx.operands[0]
    spatial = x.rank - 2
    modes = ["nearest", "nearest-exact"] + {1: ["linear"], 2: ["bilinear"], 3: ["trilinear"]}[spatial]
    mode = ctx.draw(st.sampled_from(modes))
    extra = ""
    if mode not in ("nearest", "nearest-exact") and ctx.draw(st.booleans()):
        extra = ", align_corners=True"
    pairs = [_size_choice(ctx) for _ in range(spatial)]
    src = pairs[0][1] if spatial == 1 and ctx.draw(st.booleans()) else "(" + ", ".join(p[1] for p in pairs) + ",)"
    return {"size": src, "descs": [p[0] for p in pairs], "mode": mode, "extra": extra}


def _interp_size_shape(shapes, params):
    x = shapes[0]
    return tuple(x[:2]) + tuple(_size_eval(d, x) for d in params["descs"])


# ----------------------------------------------------------- normalizations


def _layer_norm_params(ctx):
    x = ctx.operands[0]
    k = ctx.draw(st.integers(1, min(2, x.rank)))
    refs = [ctx.size_ref(x, d) for d in range(x.rank - k, x.rank)]
    return {"shape": ", ".join(refs) + ",", "eps": ctx.draw(st.sampled_from([1e-5, 1e-3]))}


def _layer_norm_w_params(ctx):
    x = ctx.operands[0]
    c1 = cast(ctx)
    bias = f", {ctx.operands[1].name}{c1} * 0.5" if ctx.draw(st.booleans()) else ""
    return {"n": ctx.size_ref(x, x.rank - 1), "c1": c1, "bias": bias}


def _last_partner(draw, first):
    return [(s[-1],) for s in first.shapes]


def _channel_partner(draw, first):
    return [(s[1],) for s in first.shapes]


def _group_norm_params(ctx):
    x = ctx.operands[0]
    c = x.sizes(1)
    choices = ["1"]
    if min(c) >= 1:
        choices.append(ctx.size_ref(x, 1))
    if all(n % 2 == 0 for n in c):
        choices.append("2")
    if all(n % 3 == 0 for n in c):
        choices.append("3")
    g = ctx.draw(st.sampled_from(choices))
    return {"g": g}


def _batch_norm_params(ctx):
    x = ctx.operands[0]
    return {
        "c": ctx.size_ref(x, 1),
        "m": ctx.draw(st.sampled_from(["", " + 0.5"])),
        "v": ctx.draw(st.sampled_from(["", " * 2"])),
    }


def _batch_norm_w_params(ctx):
    out = _batch_norm_params(ctx)
    out["c1"] = cast(ctx)
    return out


def _normalize_params(ctx):
    x = ctx.operands[0]
    d = ctx.draw(st.integers(0, x.rank - 1))
    return {"p": ctx.draw(st.sampled_from([2, 1])), "dim": neg_dim(ctx, d, x.rank)}


# ---------------------------------------------------------------- embedding


def _emb_partner(draw, first):
    n = len(first.shapes)
    rows = draw(st.sampled_from([2, 3, 5]))  # nonzero in every world: indices are taken modulo it
    d = size_vec(draw, first, consts=(1, 2, 3, 4))
    return [(rows, d[w]) for w in range(n)]


def _emb_shape(shapes, params):
    return tuple(shapes[0]) + (shapes[1][1],)


def _emb_arange_params(ctx):
    x = ctx.operands[0]
    desc, src = _size_choice(ctx, consts=(1, 2, 3, 5), lo=0)
    return {
        "n": src,
        "desc": desc,
        "mul": ctx.draw(st.sampled_from([1, 3, 7])),
        "wd": 0 if x.min_size(0) >= 1 else BAD_DIM,  # indices are taken modulo the row count
    }


def _emb_arange_shape(shapes, params):
    return (_size_eval(params["desc"], shapes[0]), shapes[0][1])


def _one_hot_params(ctx):
    x = ctx.operands[0]
    opts = [["c", c] for c in (2, 3, 5)]
    opts += [["d", d] for d in range(x.rank) if x.min_size(d) >= 1 and max(x.sizes(d)) <= 16]
    desc = ctx.draw(st.sampled_from(opts))
    c = str(desc[1]) if desc[0] == "c" else ctx.size_ref(x, desc[1])
    return {"c": c, "desc": desc}


def _one_hot_shape(shapes, params):
    return tuple(shapes[0]) + (_size_eval(params["desc"], shapes[0]),)


# ---------------------------------------------------------------- attention


def _kv_partner(draw, first):
    s = size_vec(draw, first, consts=(1, 2, 3))
    return [tuple(sh[:-2]) + (ss, sh[-1]) for sh, ss in zip(first.shapes, s)]


def _sdpa_params(ctx):
    c2 = "" if len(ctx.operands) < 3 else cast(ctx, 2)
    kv = ctx.operands[-1]
    extra = ""
    form = ctx.draw(st.integers(0, 3))
    if form == 1 and kv.min_size(kv.rank - 2) >= 1:
        extra = ", is_causal=True"  # every row keeps column 0
    elif form == 2:
        extra = ", scale=0.5"
    return {"c1": cast(ctx), "c2": c2, "extra": extra}


def _sdpa_mask_params(ctx):
    q, kv = ctx.operands[0], ctx.operands[1]
    if kv.min_size(kv.rank - 2) < 1:  # an all-masked row is NaN: discard
        return {"c1": "", "l": f"{q.name}.size({BAD_DIM})", "s": "0", "diag": 0}
    return {
        "c1": cast(ctx),
        "l": ctx.size_ref(q, q.rank - 2),
        "s": ctx.size_ref(kv, kv.rank - 2),
        "diag": ctx.draw(st.sampled_from([0, 1])),
    }


def _sdpa_shape(shapes, params):
    return tuple(shapes[0][:-1]) + (shapes[-1][-1],)


# ------------------------------------------------------------------- losses


def _cross_entropy_params(ctx):
    x = ctx.operands[0]
    reductions = ["none", "sum"] + (["mean"] if x.min_size(0) >= 1 else [])
    return {
        "n": ctx.size_ref(x, 0),
        "cd": 1 if x.min_size(1) >= 1 else BAD_DIM,  # targets are taken modulo C
        "mul": ctx.draw(st.sampled_from([1, 3])),
        "reduction": ctx.draw(st.sampled_from(reductions)),
        "extra": ctx.draw(st.sampled_from(["", ", label_smoothing=0.1"])),
    }


def _cross_entropy_shape(shapes, params):
    return (shapes[0][0],) if params["reduction"] == "none" else ()


def _loss_params(ctx):
    reductions = ["none", "sum"] + (["mean"] if min(ctx.operands[0].numels()) >= 1 else [])
    return {"c1": cast(ctx), "reduction": ctx.draw(st.sampled_from(reductions))}


def _loss_shape(shapes, params):
    return tuple(shapes[0]) if params["reduction"] == "none" else ()


def _cos_shape(shapes, params):
    return broadcast(shapes)[:-1]


def _glu_params(ctx):
    x = ctx.operands[0]
    dims = [d for d in range(x.rank) if all(n % 2 == 0 for n in x.sizes(d))]
    if not dims:
        return {"dim": BAD_DIM, "at": 0}
    d = ctx.draw(st.sampled_from(dims))
    return {"dim": neg_dim(ctx, d, x.rank), "at": d}


def _glu_shape(shapes, params):
    s = list(shapes[0])
    s[params["at"]] //= 2
    return tuple(s)


def _dropout_params(ctx):
    return {"p": ctx.draw(st.sampled_from([0.0, 0.1, 0.5]))}


def _softmin_params(ctx):
    x = ctx.operands[0]
    return {"dim": neg_dim(ctx, ctx.draw(st.integers(0, max(x.rank, 1) - 1)), max(x.rank, 1))}


def nn(name, template, arity=1, kinds=FLOATING, **kw):
    return OpSpec(name, F, template, arity=arity, kinds=kinds, **kw)


SPECS = [
    # convolutions
    nn("conv1d", "F.conv1d({0}, {1}{c1}{bias}, stride={stride}, padding={padding}, dilation={dilation})", arity=2,
       min_rank=2, max_rank=3, partner=_conv_partner(1), params=_conv_params, shape=_conv_shape, weight=1.5),
    nn("conv2d", "F.conv2d({0}, {1}{c1}{bias}, stride={stride}, padding={padding}, dilation={dilation})", arity=2,
       min_rank=3, max_rank=4, partner=_conv_partner(2), params=_conv_params, shape=_conv_shape, weight=1.5),
    nn("conv_transpose1d", "F.conv_transpose1d({0}, {1}{c1}, stride={stride}, padding={padding})", arity=2,
       min_rank=3, max_rank=3, partner=_convt_partner, params=_convt_params, shape=_convt_shape, weight=0.5),
    # pooling
    nn("max_pool1d", "F.max_pool1d({0}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil_mode})",
       min_rank=2, max_rank=3, params=_pool_params(1), shape=_pool_shape, weight=0.75, backward="ties"),
    nn("max_pool2d", "F.max_pool2d({0}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil_mode})",
       min_rank=3, max_rank=4, params=_pool_params(2), shape=_pool_shape, backward="ties"),
    nn("avg_pool1d", "F.avg_pool1d({0}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil_mode}{extra})",
       min_rank=2, max_rank=3, params=_pool_params(1, avg=True), shape=_pool_shape, weight=0.5),
    nn("avg_pool2d", "F.avg_pool2d({0}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil_mode}{extra})",
       min_rank=3, max_rank=4, params=_pool_params(2, avg=True), shape=_pool_shape, weight=0.75),
    # eager CPU rejects empty non-batch dims of adaptive pools (meta does not): nonempty operands only
    nn("adaptive_avg_pool1d", "F.adaptive_avg_pool1d({0}, {out})", min_rank=2, max_rank=3, nonempty=True,
       params=_adaptive_params(1), shape=_adaptive_shape, weight=0.5),
    nn("adaptive_avg_pool2d", "F.adaptive_avg_pool2d({0}, {out})", min_rank=3, max_rank=4, nonempty=True,
       params=_adaptive_params(2), shape=_adaptive_shape, weight=0.75),
    nn("adaptive_max_pool2d", "F.adaptive_max_pool2d({0}, {out})", min_rank=3, max_rank=4, nonempty=True,
       params=_adaptive_params(2), shape=_adaptive_shape, weight=0.5, backward="ties"),
    # interpolation
    nn("interpolate_scale", 'F.interpolate({0}, scale_factor={sf}, mode="{mode}"{extra})', min_rank=3, max_rank=5,
       nonempty=True, params=_interp_scale_params, shape=_interp_scale_shape),
    nn("interpolate_size", 'F.interpolate({0}, size={size}, mode="{mode}"{extra})', min_rank=3, max_rank=5,
       nonempty=True, params=_interp_size_params, shape=_interp_size_shape),
    # normalizations
    nn("layer_norm", "F.layer_norm({0}, ({shape}), eps={eps})", min_rank=1, params=_layer_norm_params,
       shape=same_as_first),
    nn("layer_norm_weight", "F.layer_norm({0}, ({n},), {1}{c1}{bias})", arity=2, min_rank=1, partner=_last_partner,
       params=_layer_norm_w_params, shape=same_as_first, weight=0.75),
    nn("rms_norm", "F.rms_norm({0}, ({shape}), eps={eps})", min_rank=1, params=_layer_norm_params,
       shape=same_as_first, weight=0.5),
    nn("group_norm", "F.group_norm({0}, {g})", min_rank=2, params=_group_norm_params, shape=same_as_first,
       weight=0.75),
    nn("batch_norm_eval", "F.batch_norm({0}, {0}.new_zeros({c}){m}, {0}.new_ones({c}){v}, training=False)",
       min_rank=2, params=_batch_norm_params, shape=same_as_first),
    nn("batch_norm_eval_affine",
       "F.batch_norm({0}, {0}.new_zeros({c}){m}, {0}.new_ones({c}){v}, {1}{c1}, {1}{c1} - 1, training=False)",
       arity=2, min_rank=2, partner=_channel_partner, params=_batch_norm_w_params, shape=same_as_first, weight=0.5),
    nn("batch_norm_train", "F.batch_norm({0}, None, None, training=True)", min_rank=2, shape=same_as_first,
       weight=0.5),
    nn("instance_norm", "F.instance_norm({0})", min_rank=3, max_rank=4, shape=same_as_first, weight=0.5),
    nn("normalize", "F.normalize({0}, p={p}, dim={dim})", min_rank=1, params=_normalize_params, shape=same_as_first,
       weight=0.5, backward="ties"),
    # embedding and one_hot (indices in range by construction)
    nn("embedding", "F.embedding({0}.long() % {1}.size(0), {1})", arity=2, kinds=INDEX_KINDS, max_rank=3,
       partner=_emb_partner, partner_kinds=NUMERIC, shape=_emb_shape),
    nn("embedding_arange", "F.embedding((torch.arange({n}, device={0}.device) * {mul}) % {0}.size({wd}), {0})",
       kinds=NUMERIC, min_rank=2, max_rank=2, params=_emb_arange_params, shape=_emb_arange_shape, weight=0.75),
    nn("one_hot", "F.one_hot({0}.long() % {c}, {c})", kinds=INDEX_KINDS, max_rank=3, params=_one_hot_params,
       shape=_one_hot_shape, weight=0.75),
    # attention
    nn("sdpa", "F.scaled_dot_product_attention({0}, {1}{c1}, {2}{c2}{extra})", arity=3, min_rank=3, max_rank=4,
       partner="same", params=_sdpa_params, shape=_sdpa_shape),
    nn("sdpa_kv", "F.scaled_dot_product_attention({0}, {1}{c1}, {1}{c1}{extra})", arity=2, min_rank=3, max_rank=4,
       partner=_kv_partner, params=_sdpa_params, shape=_sdpa_shape),
    nn("sdpa_mask",
       "F.scaled_dot_product_attention({0}, {1}{c1}, {1}{c1}, "
       "attn_mask=torch.ones({l}, {s}, dtype=torch.bool, device={0}.device).tril({diag}))",
       arity=2, min_rank=3, max_rank=4, partner=_kv_partner, params=_sdpa_mask_params, shape=_sdpa_shape,
       weight=0.75),
    # losses and similarities
    nn("cross_entropy",
       "F.cross_entropy({0}, (torch.arange({n}, device={0}.device) * {mul}) % {0}.size({cd}), "
       'reduction="{reduction}"{extra})',
       min_rank=2, max_rank=2, params=_cross_entropy_params, shape=_cross_entropy_shape, weight=0.75),
    nn("mse_loss", 'F.mse_loss({0}, {1}{c1}, reduction="{reduction}")', arity=2, partner="same",
       params=_loss_params, shape=_loss_shape, weight=0.5),
    nn("smooth_l1_loss", 'F.smooth_l1_loss({0}, {1}{c1}, reduction="{reduction}")', arity=2, partner="same",
       params=_loss_params, shape=_loss_shape, weight=0.5),
    nn("cosine_similarity", "F.cosine_similarity({0}, {1}{c1}, dim=-1)", arity=2, min_rank=1, partner="broadcast",
       params=lambda ctx: {"c1": cast(ctx)}, shape=_cos_shape, weight=0.5),
    # misc
    nn("glu", "F.glu({0}, {dim})", min_rank=1, params=_glu_params, shape=_glu_shape, weight=0.5),
    nn("softmin", "F.softmin({0}, dim={dim})", params=_softmin_params, shape=same_as_first, weight=0.5),
    nn("dropout_eval", "F.dropout({0}, p={p}, training=False)", kinds=NUMERIC, params=_dropout_params,
       shape=same_as_first, weight=0.5),
]
