"""Inputs: the one ``make_input`` (seeded tensors, layouts, value classes), a call's arguments
from their specs, the dynamism marks, and the compile config a schedule sets.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import torch


DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


# A layout's kind alone ("transposed") stands for its usual dims.
_LAYOUT_DEFAULTS = {"transposed": {"dims": [-2, -1]}, "sliced": {"dim": -1}, "expanded": {"dim": 0}}


def normal_layout(layout, rank):
    """A layout as a dict, for a tensor of ``rank`` dims.

    The kinds: {"kind": "contiguous"}; {"kind": "transposed", "dims": [a, b]};
    {"kind": "strided", "dim": d, "step": k} (every k-th element, from the
    first); {"kind": "sliced", "dim": d} (every other element of 2n + 1, from
    the second: a nonzero storage offset); {"kind": "expanded", "dim": d}
    (stride 0). None is contiguous, and a kind's name alone stands for its
    usual dims (the last two, the last, the first), or for contiguous when
    the tensor has too few dims for it.
    """
    if layout is None:
        return {"kind": "contiguous"}
    if isinstance(layout, str):
        needs = 2 if layout == "transposed" else 1
        if layout not in _LAYOUT_DEFAULTS or rank < needs:
            return {"kind": "contiguous"}
        return {"kind": layout, **_LAYOUT_DEFAULTS[layout]}
    return layout


def base_shape(shape, layout):
    """The shape of the storage tensor from which ``layout`` makes ``shape``."""
    shape = list(shape)
    layout = normal_layout(layout, len(shape))
    kind = layout.get("kind", "contiguous")
    if kind == "transposed":
        a, b = layout["dims"]
        shape[a], shape[b] = shape[b], shape[a]
    elif kind == "strided":
        d, step = layout["dim"], layout["step"]
        shape[d] = 0 if shape[d] == 0 else (shape[d] - 1) * step + 1
    elif kind == "sliced":
        shape[layout["dim"]] = 2 * shape[layout["dim"]] + 1
    elif kind == "expanded":
        shape[layout["dim"]] = 1
    return shape


def apply_layout(base, shape, layout):
    layout = normal_layout(layout, len(shape))
    kind = layout.get("kind", "contiguous")
    if kind == "transposed":
        a, b = layout["dims"]
        return base.transpose(a, b)
    if kind in ("strided", "sliced"):
        start, step = (0, layout["step"]) if kind == "strided" else (1, 2)
        index = [slice(None)] * base.dim()
        index[layout["dim"]] = slice(start, None, step)
        return base[tuple(index)]
    if kind == "expanded":
        return base.expand(*shape)
    return base


def make_input(shape, dtype, seed=0, layout=None, *, low=None, high=None, device="cpu", values=None):
    """A tensor of ``shape`` and ``dtype`` (a torch.dtype), laid out as ``layout`` says (``normal_layout``).

    Values are drawn from a generator seeded with ``seed`` on the CPU, so the
    same arguments give the same tensor in any process and on any device.
    Without a range, floats and complex numbers are standard normal (no
    overflow or NaN traps) and ints lie in [-8, 8]; with ``low`` and
    ``high``, floats are uniform in [low, high] (drawn in float64) and ints
    lie in [int(low), int(high)]. Bools are 0 or 1 either way.
    ``values`` then reshapes them into a value class (``value_class``):
    "zeros", "ties", "negative" or "large".
    """
    shape = list(shape)
    base = base_shape(shape, layout)
    if device == "meta":
        storage = torch.empty(base, dtype=dtype, device="meta")
    else:
        gen = torch.Generator().manual_seed(int(seed))
        ranged = low is not None and high is not None
        if dtype == torch.bool:
            storage = torch.randint(0, 2, base, generator=gen).bool()
        elif dtype.is_floating_point and ranged:
            storage = torch.empty(base, dtype=torch.float64).uniform_(low, high, generator=gen).to(dtype)
        elif dtype.is_floating_point:
            storage = torch.randn(base, generator=gen, dtype=torch.float32).to(dtype)
        elif ranged:
            storage = torch.randint(int(low), int(high) + 1, base, generator=gen).to(dtype)
        elif dtype.is_complex:
            storage = torch.randn(base, generator=gen, dtype=dtype)
        else:
            storage = torch.randint(-8, 9, base, generator=gen, dtype=dtype)
        if values:
            storage = value_class(storage, values, low, high)
        storage = storage.to(device)
    return apply_layout(storage, shape, layout)


def value_class(t, values, low=None, high=None):
    """``t``'s values recast into a class that one random sample almost never
    holds: "zeros"; "ties" (three levels: low, the middle, high, so equal
    values abound); "negative" (minus their magnitude); "large" (floats times
    10^4, 10^3 in float16: past a clamp, still finite)."""
    if values == "zeros":
        return torch.zeros_like(t)
    if t.dtype == torch.bool or t.dtype.is_complex:
        return t  # only zeros means something for these
    if values == "negative":
        return -t.abs()
    if values == "large":
        return t * (1e3 if t.dtype == torch.float16 else 1e4) if t.dtype.is_floating_point else t
    if values == "ties":
        f = t.to(torch.float64)
        lo = float(f.min()) if low is None and f.numel() else float(low or 0)
        hi = float(f.max()) if high is None and f.numel() else float(high or 0)
        step = (hi - lo) / 2
        level = ((f - lo) / step).round().clamp(0, 2) if step > 0 else torch.zeros_like(f)
        out = lo + level * step
        return (out if t.dtype.is_floating_point else out.floor()).to(t.dtype)
    raise ValueError(f"unknown value class {values!r}")


def make_arg(spec, device="cpu"):
    """An argument from its spec: a tensor from {"shape", "dtype", "layout", "seed"} (``make_input``),
    requiring grad when "requires_grad" says so; or a Python number or int list,
    {"scalar": kind, "value": value}, passed as it is (a list as a new list)."""
    if "scalar" in spec:
        value = spec["value"]
        return list(value) if isinstance(value, list) else value
    tensor = make_input(spec["shape"], DTYPES[spec["dtype"]], spec["seed"], spec.get("layout"), device=device)
    if spec.get("requires_grad"):
        tensor.requires_grad_(True)
    return tensor


def make_args(call, device="cpu"):
    return [make_arg(spec, device) for spec in call["args"]]


def apply_marks(tensor, marks):
    """Apply a call's dynamism marks to one compiled-side input.

    ``marks`` maps a dim (int or str) to {"mark": "dynamic" | "maybe_dynamic"
    | "static" | "unbacked" | "auto", "min": int, "max": int}. "auto" (or no
    entry) leaves the dim to automatic dynamic shapes.
    """
    for dim, mark in sorted((int(d), m) for d, m in (marks or {}).items()):
        kind = mark.get("mark", "auto")
        bounds = {k: mark[k] for k in ("min", "max") if mark.get(k) is not None}
        if kind == "dynamic":
            torch._dynamo.mark_dynamic(tensor, dim, **bounds)
        elif kind == "maybe_dynamic":
            torch._dynamo.maybe_mark_dynamic(tensor, dim)
        elif kind == "static":
            torch._dynamo.mark_static(tensor, dim)
        elif kind == "unbacked":
            torch._dynamo.decorators.mark_unbacked(tensor, dim, **bounds)
    return tensor


def make_compiled_args(call, device="cpu"):
    """Inputs for the compiled side of a call: as ``make_args``, plus the marks."""
    return [make_arg(spec, device) if "scalar" in spec else apply_marks(make_arg(spec, device), spec.get("marks"))
            for spec in call["args"]]


def _config_modules():
    # private torch API, looked up at use: a torch that moved it fails this one step, not the script
    import torch._dynamo.config as dynamo_config
    import torch.compiler.config as compiler_config
    import torch.fx.experimental._config as fx_config

    return {"dynamo": dynamo_config, "fx": fx_config, "compiler": compiler_config}


def set_compile_config(config):
    """Set the schedule's config flags; returns a function that restores them.

    ``config`` is {"dynamo": {flag: value}, "fx": {flag: value}, "compiler":
    {flag: value}} (torch.compiler.config, e.g. dynamic_sources). A flag this
    torch does not have is skipped and named in the returned ``.skipped``
    list, so an old finding still replays on a newer torch.
    """
    modules = _config_modules()
    saved, skipped = [], []
    for group, flags in sorted((config or {}).items()):
        module = modules.get(group)
        for name, value in sorted(flags.items()):
            if module is None or not hasattr(module, name):
                skipped.append(f"{group}.{name}")
                continue
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)

    def restore():
        for module, name, value in reversed(saved):
            setattr(module, name, value)

    restore.skipped = skipped
    return restore
