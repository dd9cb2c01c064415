"""Drawing model cases: an architecture, its config and a schedule of real use, through Hypothesis.

Like a program case, a model case is a pure function of its choice sequence (recorded in
``origin["choices"]``), so it replays from its JSON alone and a seed reproduces a campaign.
The config is drawn from a handful of knobs (head size, heads and KV heads, layers, vocabulary,
feed-forward width, rope scaling, attention implementation, dtype), written in each config
class's own keyword arguments (``CONFIGS``). The schedule is what model users run: batch sizes
and sequence lengths that change between calls (1, small, a large first size, equal sizes
that duck-size together), padding masks from lengths, position ids, decode loops over a
growing KV cache (dynamic, or static where the architecture has one), training steps at
several lengths, ``mark_dynamic`` with and without bounds, ``dynamic=True`` or automatic.
"""

from __future__ import annotations

from random import Random

from hypothesis import strategies as st

from symfuzz.fuzz.drawing import PROVIDER
from symfuzz.fuzz.model_case import ARCHS, KIND, check_model_case

DROPOUT_ZERO = 0.0  # every dropout off: compiled and eager would draw different masks


def _decoder(k, **extra):
    return {"hidden_size": k["hidden"], "num_attention_heads": k["heads"], "num_key_value_heads": k["kv_heads"],
            "num_hidden_layers": k["layers"], "intermediate_size": k["ffn"], "vocab_size": k["vocab"],
            "max_position_embeddings": k["positions"], "head_dim": k["head_dim"], "pad_token_id": 0,
            "attention_dropout": DROPOUT_ZERO, **_rope(k), **extra}


def _rope(k):
    if k["rope"] == "default":
        return {}
    factor = 2.0
    params = {"rope_type": k["rope"], "factor": factor, "rope_theta": 10000.0}
    return {"rope_parameters": params}


def _encoder(k):
    return {"hidden_size": k["hidden"], "num_attention_heads": k["heads"], "num_hidden_layers": k["layers"],
            "intermediate_size": k["ffn"], "vocab_size": k["vocab"], "max_position_embeddings": k["positions"] + 2,
            "hidden_dropout_prob": DROPOUT_ZERO, "attention_probs_dropout_prob": DROPOUT_ZERO, "pad_token_id": 0}


# Each architecture's config, in its config class's own keyword arguments, from the drawn knobs.
CONFIGS = {
    "llama": lambda k: _decoder(k),
    "mistral": lambda k: _decoder(k, sliding_window=None),
    "qwen2": lambda k: _decoder(k),
    "qwen3": lambda k: _decoder(k),
    "gemma": lambda k: _decoder(k),
    "phi": lambda k: {**_decoder(k), "num_key_value_heads": k["heads"], "resid_pdrop": DROPOUT_ZERO,
                      "embd_pdrop": DROPOUT_ZERO, "partial_rotary_factor": 0.5},
    "gpt2": lambda k: {"n_embd": k["hidden"], "n_head": k["heads"], "n_layer": k["layers"], "n_inner": k["ffn"],
                       "vocab_size": k["vocab"], "n_positions": k["positions"], "resid_pdrop": DROPOUT_ZERO,
                       "embd_pdrop": DROPOUT_ZERO, "attn_pdrop": DROPOUT_ZERO, "bos_token_id": 0, "eos_token_id": 0},
    "gpt_neox": lambda k: {"hidden_size": k["hidden"], "num_attention_heads": k["heads"],
                           "num_hidden_layers": k["layers"], "intermediate_size": k["ffn"], "vocab_size": k["vocab"],
                           "max_position_embeddings": k["positions"], "rotary_pct": 0.5,
                           "attention_dropout": DROPOUT_ZERO, "hidden_dropout": DROPOUT_ZERO},
    "opt": lambda k: {"hidden_size": k["hidden"], "num_attention_heads": k["heads"], "num_hidden_layers": k["layers"],
                      "ffn_dim": k["ffn"], "vocab_size": k["vocab"], "max_position_embeddings": k["positions"],
                      "word_embed_proj_dim": k["hidden"], "dropout": DROPOUT_ZERO,
                      "attention_dropout": DROPOUT_ZERO, "pad_token_id": 1},
    "bert": _encoder,
    "roberta": lambda k: {**_encoder(k), "pad_token_id": 1},
    "distilbert": lambda k: {"dim": k["hidden"], "n_heads": k["heads"], "n_layers": k["layers"],
                             "hidden_dim": k["ffn"], "vocab_size": k["vocab"],
                             "max_position_embeddings": k["positions"], "dropout": DROPOUT_ZERO,
                             "attention_dropout": DROPOUT_ZERO, "pad_token_id": 0},
    "t5": lambda k: {"d_model": k["hidden"], "d_kv": k["head_dim"], "d_ff": k["ffn"], "num_layers": k["layers"],
                     "num_decoder_layers": k["layers"], "num_heads": k["heads"], "vocab_size": k["vocab"],
                     "relative_attention_num_buckets": 8, "dropout_rate": DROPOUT_ZERO, "decoder_start_token_id": 0},
    "bart": lambda k: {"d_model": k["hidden"], "encoder_layers": k["layers"], "decoder_layers": k["layers"],
                       "encoder_attention_heads": k["heads"], "decoder_attention_heads": k["heads"],
                       "encoder_ffn_dim": k["ffn"], "decoder_ffn_dim": k["ffn"], "vocab_size": k["vocab"],
                       "max_position_embeddings": k["positions"], "dropout": DROPOUT_ZERO,
                       "attention_dropout": DROPOUT_ZERO, "activation_dropout": DROPOUT_ZERO},
    "vit": lambda k: {"hidden_size": k["hidden"], "num_hidden_layers": k["layers"], "num_attention_heads": k["heads"],
                      "intermediate_size": k["ffn"], "image_size": 16, "patch_size": 4, "num_channels": 3,
                      "hidden_dropout_prob": DROPOUT_ZERO, "attention_probs_dropout_prob": DROPOUT_ZERO},
    "wav2vec2": lambda k: {"hidden_size": k["hidden"], "num_hidden_layers": k["layers"],
                           "num_attention_heads": k["heads"], "intermediate_size": k["ffn"],
                           "conv_dim": [8, 8], "conv_stride": [5, 2], "conv_kernel": [10, 3],
                           "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 2,
                           "vocab_size": k["vocab"], "hidden_dropout": DROPOUT_ZERO,
                           "attention_dropout": DROPOUT_ZERO, "activation_dropout": DROPOUT_ZERO,
                           "feat_proj_dropout": DROPOUT_ZERO, "layerdrop": DROPOUT_ZERO,
                           "mask_time_prob": DROPOUT_ZERO, "do_stable_layer_norm": True,
                           "feat_extract_norm": "layer"},
    "whisper_encoder": lambda k: {"d_model": k["hidden"], "encoder_layers": k["layers"],
                                  "decoder_layers": 1, "encoder_attention_heads": k["heads"],
                                  "decoder_attention_heads": k["heads"], "encoder_ffn_dim": k["ffn"],
                                  "decoder_ffn_dim": k["ffn"], "vocab_size": k["vocab"], "num_mel_bins": 8,
                                  "max_source_positions": 16, "max_target_positions": 32,
                                  "dropout": DROPOUT_ZERO, "attention_dropout": DROPOUT_ZERO,
                                  "activation_dropout": DROPOUT_ZERO, "num_labels": 3, "pad_token_id": 0,
                                  "bos_token_id": 0, "eos_token_id": 0, "decoder_start_token_id": 0},
}
assert set(CONFIGS) == set(ARCHS), "every architecture needs its config here"

# Architectures with a rope table whose scaling is drawn, and those with a static cache.
ROPE = ("llama", "mistral", "qwen2", "qwen3", "gemma")
STATIC_CACHE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "phi")
# The shortest input a kind takes: wav2vec2's feature extractor needs 10 + 5 samples per frame.
MIN_LENGTH = {"audio": 40, "image": 4}
# The shortest length a mark goes on: a size the model derives from it (ViT's patches per side, 4
# pixels each) must not be 1, which torch specializes like an input's size of 1 whatever the mark.
MARKED_LENGTH = {"image": 8}


def draw_knobs(draw, arch: str) -> dict:
    kind = ARCHS[arch][2]
    head_dim = draw(st.sampled_from([4, 8, 16]))
    kv_heads = draw(st.sampled_from([1, 2]))
    heads = kv_heads * draw(st.sampled_from([1, 2]))
    if arch in ("gpt2", "gpt_neox", "opt", "bert", "roberta", "distilbert", "bart", "vit", "wav2vec2",
                "whisper_encoder", "phi"):
        kv_heads = heads  # no grouped-query attention in these
    hidden = heads * head_dim
    if arch == "wav2vec2" and hidden % 2:
        hidden += 1
    return {"head_dim": head_dim, "heads": heads, "kv_heads": kv_heads, "hidden": hidden,
            # One layer mostly: a compile costs about twice as much with two, and most shape logic is per layer.
            "layers": draw(st.sampled_from([1, 1, 1, 2])), "vocab": draw(st.sampled_from([32, 64, 97])),
            "ffn": hidden * draw(st.sampled_from([1, 2, 4])), "positions": draw(st.sampled_from([64, 128])),
            "rope": draw(st.sampled_from(["default", "linear", "dynamic"])) if arch in ROPE else "default",
            "kind": kind}


def draw_sizes(draw, kind: str, count: int, positions: int) -> list:
    """(batch, length) of each call: a pattern model users hit, with random sizes around it."""
    low = MIN_LENGTH.get(kind, 1)
    high = {"audio": 160, "image": 24}.get(kind, min(positions // 2, 24))
    pattern = draw(st.sampled_from(["changing", "large-first", "duck", "ones", "growing"]))
    sizes = []
    for i in range(count):
        batch = draw(st.integers(1, 4))
        length = draw(st.integers(max(low, 2), high))
        if pattern == "large-first" and i == 0:
            length = high
        elif pattern == "duck":
            length = batch = max(batch, 2) if kind != "audio" else batch
            if kind in ("image", "audio"):
                length = draw(st.integers(max(low, 2), high))
        elif pattern == "ones" and i == 1:
            batch = 1
            length = max(low, 1)
        elif pattern == "growing":
            length = min(high, max(low, 2) + 2 * i)
        if kind == "image":
            length = max(4, length - length % 4)  # whole patches
        sizes.append((batch, length))
    return sizes


def draw_mark(draw, length: bool, longest: int):
    """A mark of the batch or length dim; a bound is one the model takes (``longest``: its
    position table's length, for a length): past it, the model's own limit guards the dim."""
    how = draw(st.sampled_from(["none"] * 6 + ["dynamic"] * 4 + ["bounded"] * 4 + ["maybe_dynamic"] * 4
                               + ["upper-bound-only"]))
    if how == "none":
        return None
    if how == "bounded":
        return {"mark": "dynamic", "min": 2, "max": longest if length else 16}
    if how == "upper-bound-only":  # mark_dynamic(t, dim, max=N), the lower bound left to torch
        return {"mark": "dynamic", "max": longest if length else 16}
    return {"mark": how}


def draw_calls(draw, arch: str, knobs: dict) -> list:
    kind = knobs["kind"]
    count = draw(st.integers(2, 4))
    # What a user's batches carry is the same from call to call: a mask (padding) or none, position ids or none.
    masked = kind in ("decoder", "encoder", "seq2seq") and draw(st.booleans())
    positions = kind == "decoder" and draw(st.booleans())
    sizes = draw_sizes(draw, kind, count, knobs["positions"])
    # One kind of call besides forwards at most: each kind of call is a set of graphs to compile
    # (a decode step's cache, a training step's backward), and compiles are what a case pays for.
    other = draw(st.sampled_from(["none", "none", "decode", "train"]))
    decodes = kind == "decoder" and other == "decode"
    trains = other == "train"  # training steps in a quarter of the cases (forwards run without autograd)
    calls = []
    for i, (batch, length) in enumerate(sizes):
        call_kind = "forward"
        if decodes and draw(st.integers(0, 3)) == 0:
            call_kind = "decode"
        elif trains and draw(st.booleans()):
            call_kind = "train"
        call = draw_call(draw, call_kind, kind, batch, length, masked, positions, shortest_target=1)
        if call_kind == "decode":
            call["steps"] = draw(st.integers(2, 8))
            call["cache"] = "static" if arch in STATIC_CACHE and draw(st.integers(0, 3)) == 0 else "dynamic"
        marks = {}
        if i == 0:  # marks go on the first call's tensors, as a user marks before the first compile
            for what in ("batch", "length") if kind != "features" else ("batch",):
                if (batch if what == "batch" else length) < (2 if what == "batch" else MARKED_LENGTH.get(kind, 2)):
                    continue  # torch specializes a size of 1 whatever its mark says: marking it is the user's mistake
                # A text model's longest input is its position table's; the others take any length.
                longest = knobs["positions"] if kind in ("decoder", "encoder", "seq2seq") else 512
                mark = draw_mark(draw, what == "length", longest)
                if mark is not None and what == "length" and kind in MIN_LENGTH:
                    least = max(MIN_LENGTH[kind], MARKED_LENGTH.get(kind, 2))
                    mark = {**mark, "min": max(mark.get("min") or 0, least)} if "min" in mark else mark
                if mark is not None:
                    marks[what] = mark
        if marks:
            call["marks"] = marks
        calls.append(call)
    return calls + draw_reuse_calls(draw, kind, knobs, masked, positions)


def draw_reuse_calls(draw, kind: str, knobs: dict, masked: bool, positions: bool) -> list:
    """Forwards at new sizes that torch's own rules put in a guard region a drawn call compiled
    (sizes of 2 or more, batch and length unequal): each runs a cached graph, so it checks the
    graph's guards and values at a new size for the price of two small forwards, no compile."""
    low = max(MIN_LENGTH.get(kind, 1), 3)
    high = {"audio": 160, "image": 24}.get(kind, min(knobs["positions"] // 2, 24))
    calls = []
    for _ in range(draw(st.integers(20, 36))):
        batch, length = draw(st.integers(2, 4)), draw(st.integers(low, high))
        if kind == "image":
            length = max(8, length - length % 4)
        if length == batch:
            length += 4 if kind == "image" else 1
        calls.append(draw_call(draw, "forward", kind, batch, length, masked, positions, shortest_target=2))
    return calls


def draw_call(draw, call_kind: str, kind: str, batch: int, length: int, masked: bool, positions: bool,
              shortest_target: int) -> dict:
    """One call at (batch, length): its value seed, each row's length where the case pads, position
    ids where it passes them, a seq2seq model's decoder length."""
    call = {"kind": call_kind, "batch": batch, "seq": length, "seed": draw(st.integers(0, 2**16))}
    if masked:
        call["lengths"] = [draw(st.integers(max(1, length // 2), length)) for _ in range(batch)]
    if positions:
        call["positions"] = True
    if kind == "seq2seq":
        call["target"] = draw(st.integers(shortest_target, 8))
    return call


def draw_model_case(draw, archs) -> dict:
    """One model case of one of ``archs``."""
    arch = draw(st.sampled_from(sorted(archs)))
    knobs = draw_knobs(draw, arch)
    calls = draw_calls(draw, arch, knobs)
    dtype = "bfloat16" if draw(st.integers(0, 7)) == 0 else "float32"
    case = {"kind": KIND, "arch": arch, "config": CONFIGS[arch](knobs),
            "attn": draw(st.sampled_from(["eager", "sdpa"])), "dtype": dtype,
            "seed": draw(st.integers(0, 2**16)), "dynamic": draw(st.sampled_from([True, None])),
            "step": {"optimizer": "sgd", "lr": 0.05} if any(c["kind"] == "train" for c in calls) else None,
            "calls": calls}
    return check_model_case(case)


def arch_for(seed: int, index: int, archs) -> str:
    """The architecture of model case ``index``: the campaign goes round ``archs`` in an order
    drawn from the seed, so a short run covers as many architectures as it has cases (a free draw
    repeats some and misses others: 9 cases of 17 architectures cover about 7)."""
    order = sorted(archs)
    Random(f"symfuzz-model-order:{seed}").shuffle(order)
    return order[index % len(order)]


def generate_model(seed: int, index: int, archs) -> dict:
    """Model case ``index`` of campaign ``seed``: a pure function of both, the versions and
    ``archs``. Its architecture is ``arch_for``'s; the rest is drawn, and replays from the
    recorded choices with that one architecture (``origin["archs"]``)."""
    # Deferred, as in fuzz/drawing.py: ConjectureData is Hypothesis's internal API.
    from hypothesis.internal.conjecture.data import ConjectureData

    chosen = [arch_for(seed, index, archs)]
    kwargs = {"provider": PROVIDER} if PROVIDER is not None else {}
    data = ConjectureData(random=Random(f"symfuzz-model:{seed}:{index}"), **kwargs)
    case = draw_model_case(data.draw, chosen)
    data.freeze()
    case["origin"] = {"source": "models", "seed": seed, "index": index, "archs": chosen,
                      "choices": list(data.choices)}
    return case


def model_case_from_choices(choices, archs) -> dict:
    """Replay a model case from its recorded choice sequence."""
    from hypothesis.internal.conjecture.data import ConjectureData  # deferred: see generate_model

    return draw_model_case(ConjectureData.for_choices(choices).draw, archs)
