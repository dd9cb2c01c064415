"""The runtime every standalone script carries, shared with the campaign and opcheck.

This module imports only the standard library and torch: ``corpus.scripts``
inlines its source (all of it, or the pieces a script needs) into every
script symfuzz writes, so a script judges a run exactly the way the campaign
did. Keep it that way.

It holds the one definition of each piece the scripts share:

- ``make_input``: the one way an input tensor is built from a seed (fuzz
  cases, the minifier's repros, opcheck's sweeps and snippets);
- ``TOLERANCES``: the per-dtype tolerances;
- ``compare``: the one judging function (compiled vs eager, dtype-aware
  tolerances, an fp64 reference where rounding matters), which the oracles,
  the minifier's capture and opcheck's Inductor check call in process too.

Besides: running a schedule of calls through a function, classifying
exceptions into stages, and building stable failure signatures.
"""

import hashlib
import re
import time
import traceback

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

TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (3e-2, 3e-2)}  # (rtol, atol), compiled against eager: Inductor reorders and fuses

# When compiled and eager differ beyond TOLERANCES, compiled still passes if
# its error against the fp64 reference is within this factor of eager's own
# error (the criterion torch._dynamo.utils.same uses with fp64_ref).
REF_ERROR_FACTOR = 4.0


# ---------------------------------------------------------------- inputs

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


# ---------------------------------------------------------------- running


def snapshot(value):
    """A detached copy of an output tree (tensors, numbers, tuples)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return tuple(snapshot(v) for v in value)
    return value


def run_call(fn, args):
    """Call ``fn``; returns {"out": (outputs, final input states[, gradients])} or {"error": ...}.

    When some argument requires grad, the record's tree gains a third part:
    the gradients of a loss (``gradient_loss``) with respect to those
    arguments, in order (zeros where the loss does not depend on one), so the
    backward pass (compiled by AOTAutograd on the compiled side) is judged
    like any output. An error raised while computing them says ``"during":
    "backward"``. A module program's side (``module_runtime.ModuleSide``) makes
    its own tree: (outputs, final inputs, gradients, the module's state).
    """
    start = time.perf_counter()
    phase = "forward"
    try:
        if hasattr(fn, "call_tree"):
            tree = fn.call_tree(args)
        else:
            wanted = requiring_grad_args(args)
            out = fn(*args)
            tree = (snapshot(out), snapshot(tuple(args)))
            if wanted:
                phase = "backward"
                tree += (input_gradients(out, wanted),)
        result = {"out": tree}
    except Exception as exc:  # noqa: BLE001 - any failure is data here
        result = {"error": describe_exception(exc)}
        if getattr(fn, "phase", phase) == "backward":
            result["error"]["during"] = "backward"
    result["seconds"] = time.perf_counter() - start
    return result


def requiring_grad_args(args):
    """The arguments that require grad, read before the call: an input the program
    overwrites from one that requires grad (``x.copy_(y)``) requires grad afterwards,
    but its gradient then is of its new value, which the compiled function writes
    back after its graph ran (outside the loss's graph): no promise to compare."""
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


COTANGENT_SEED = 7919  # cotangent i is make_input(its output's shape, dtype, COTANGENT_SEED + i)


def gradient_loss(out):
    """sum_i (o_i * c_i).sum() over the floating outputs ``o_i`` that require grad,
    with seeded cotangents ``c_i``; None when no output requires grad.

    The cotangents are standard normal, drawn in float32 and cast (the fp64
    reference gets the same values), so no gradient is a plain sum that a
    wrong but symmetric formula would still get right. ``i`` is the output's
    place among all leaves of the output tree: an output that requires grad on
    one side only does not shift the other outputs' cotangents.
    """
    loss = None
    for i, (_, t) in enumerate(flatten(out)):
        if not (isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()):
            continue
        cotangent = make_input(tuple(t.shape), t.dtype, COTANGENT_SEED + i, device=t.device)
        term = (t * cotangent).sum()
        loss = term if loss is None else loss + term
    return loss


def input_gradients(out, wanted):
    """The gradients of ``gradient_loss(out)`` with respect to ``wanted``, detached
    copies: zeros for an argument the loss does not depend on. (Whether autograd's
    graph reaches such an argument, None or zeros, is no promise of the compiled
    function: AOTAutograd's one node takes every input, and hands zeros back.)"""
    loss = gradient_loss(out)
    if loss is None:
        return tuple(torch.zeros_like(w) for w in wanted)
    grads = torch.autograd.grad(loss, wanted, allow_unused=True, materialize_grads=True)
    return tuple(g.detach().clone() for g in grads)


def describe_exception(exc):
    return {
        "type": type(exc).__module__ + "." + type(exc).__qualname__,
        "message": str(exc)[:4000],
        "stage": exception_stage(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
    }


def exception_stage(exc):
    """Which compiler layer raised, from the exception's type and message."""
    name = type(exc).__name__
    text = str(exc)
    head = text[:600]
    module = type(exc).__module__
    if "CppCompileError" in head or "C++ compile error" in head or name in ("CppCompileError", "CompilationError"):
        return "codegen"
    if name in ("InductorError", "LoweringException") or module.startswith("torch._inductor"):
        return "inductor"
    if name == "BackendCompilerFailed" or "backend=" in head[:300]:
        if "aot_autograd" in head or "AOTAutograd" in head or "backend='aot_eager'" in head:
            return "aot"
        return "inductor"
    if module.startswith("torch._dynamo") or name in ("TorchRuntimeError", "InternalTorchDynamoError", "Unsupported", "UserError"):
        return "dynamo"
    if "guard" in head.lower()[:300]:
        return "guard"
    return "runtime"


# ---------------------------------------------------------------- comparing


def flatten(value, prefix="out"):
    """[(path, leaf)] for a nested output tree."""
    if isinstance(value, (tuple, list)):
        items = []
        for i, v in enumerate(value):
            items.extend(flatten(v, f"{prefix}[{i}]"))
        return items
    return [(prefix, value)]


def compare(eager, compiled, reference=None, explained=None):
    """None if ``compiled`` matches ``eager``; else {"symptom", "path", "kind", "detail"}.

    The one judging function: the oracles (through ``judge_call``), the
    minifier's capture, opcheck's Inductor check and every script symfuzz
    writes compare outputs with it, so a script cannot disagree with the
    finding it reproduces. Tensors match within ``TOLERANCES`` for their
    dtype; beyond that, compiled still matches when it is no worse than
    eager against the fp64 reference (``within_reference``), or when the
    output is discrete (bools, indices, counts; never floats) and every
    element that differs hangs on a decision (comparison, all/any, argmax,
    sort ...) within rounding of its threshold, by a value that flip can
    give (``rounding_explains``, which never raises; ``reference_call``'s
    leaves carry it): such
    a flip is no bug, and when ``explained`` is a list, each is appended to
    it as {"symptom", "path", "kind", "detail", "reason"}.
    ``reference`` is a zero-argument callable giving the fp64 reference tree
    (same structure), computed only when a direct comparison fails.
    ``detail`` is for people; ``kind`` says how the output differs, in
    words free of sizes and values, for the signature (``failure_key``).
    """
    e_leaves, c_leaves = flatten(eager), flatten(compiled)
    if len(e_leaves) != len(c_leaves):
        return {"symptom": "metadata-mismatch", "path": "out",
                "kind": "count:" + ("more" if len(c_leaves) > len(e_leaves) else "fewer"),
                "detail": f"{len(c_leaves)} outputs, eager has {len(e_leaves)}"}
    ref_leaves = None
    for index, ((path, e), (_, c)) in enumerate(zip(e_leaves, c_leaves)):
        if isinstance(e, torch.Tensor) != isinstance(c, torch.Tensor):
            return {"symptom": "metadata-mismatch", "path": path, "kind": f"type:{_type_name(e)}->{_type_name(c)}",
                    "detail": f"compiled gave {type(c).__name__}, eager {type(e).__name__}"}
        if not isinstance(e, torch.Tensor):
            if e != c and not (e != e and c != c):  # NaN == NaN here
                kind = f"scalar:{_type_name(e)}" + ("" if type(e) is type(c) else f"->{_type_name(c)}")
                return {"symptom": "value-mismatch", "path": path, "kind": kind, "detail": f"compiled {c!r}, eager {e!r}"}
            continue
        if e.shape != c.shape or e.dtype != c.dtype:
            return {
                "symptom": "metadata-mismatch",
                "path": path,
                "kind": metadata_kind(e, c),
                "detail": f"compiled {c.dtype}{list(c.shape)}, eager {e.dtype}{list(e.shape)}",
            }
        if tensors_close(e, c):
            continue
        if reference is not None:
            if ref_leaves is None:
                ref_tree = reference()
                ref_leaves = flatten(ref_tree) if ref_tree is not None else []
            r = ref_leaves[index][1] if index < len(ref_leaves) else None
            if isinstance(r, torch.Tensor) and r.shape == e.shape and within_reference(e, c, r):
                continue
            # Only a reference_call leaf carries the explainer: a script that compares floats alone
            # (float64_call) pastes none of the shadow interpreter.
            explain = getattr(r, "_symfuzz_explain", None) if isinstance(r, torch.Tensor) else None
            reason = explain(e, c, r) if explain is not None else None
            if reason is not None:
                if explained is not None:
                    explained.append({"symptom": "value-mismatch", "path": path, "kind": value_kind(e, c),
                                      "detail": mismatch_detail(e, c), "reason": reason})
                continue
        return {"symptom": "value-mismatch", "path": path, "kind": value_kind(e, c), "detail": mismatch_detail(e, c)}
    return None


def _type_name(value):
    return "Tensor" if isinstance(value, torch.Tensor) else type(value).__name__


def dtype_family(dtype):
    """"float", "complex", "int" or "bool": what a value bug's signature names of its output's dtype.

    A family, not the dtype: campaigns draw float32, float64, float16 and
    bfloat16 inputs at random and the minifier turns the others into
    float32, so one arithmetic bug shows in any of them; integer and boolean
    results come from other code (index math, comparisons) and other bugs.
    """
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "float" if dtype.is_floating_point else "int"


def metadata_kind(e, c):
    """How two tensors' metadata differ (eager -> compiled), in words free of sizes.

    "dtype:float32->float64" (a dtype is a promotion rule's whole point),
    "rank:+1" (dims compiled has more: the same bug at any rank, as the
    minifier lowers ranks), "shape" (same rank, other sizes), joined by ","
    when both dtype and shape differ.
    """
    parts = []
    if e.dtype != c.dtype:
        parts.append(f"dtype:{str(e.dtype).replace('torch.', '')}->{str(c.dtype).replace('torch.', '')}")
    if e.dim() != c.dim():
        parts.append(f"rank:{c.dim() - e.dim():+d}")
    elif e.shape != c.shape:
        parts.append("shape")
    return ",".join(parts)


def value_kind(e, c):
    """How two tensors of one dtype and shape differ in value, free of values and sizes.

    The dtype family (``dtype_family``) and, for floating and complex
    results, whether compiled has inf/NaN where eager is finite
    ("nonfinite"), is finite where eager has inf/NaN ("lost-nonfinite"), or
    neither ("finite": wrong finite values, or another inf/NaN).
    """
    family = dtype_family(e.dtype)
    if family not in ("float", "complex"):
        return family
    e_finite, c_finite = torch.isfinite(e), torch.isfinite(c)
    if bool((e_finite & ~c_finite).any()):
        return family + ":nonfinite"
    if bool((~e_finite & c_finite).any()):
        return family + ":lost-nonfinite"
    return family + ":finite"


def _both_parts(*tensors):
    """Complex tensors as real ones with a trailing (real, imaginary) dim, so that
    both parts are judged (``.double()`` would drop the imaginary part)."""
    return [torch.view_as_real(t.resolve_conj()) if t.dtype.is_complex else t for t in tensors]


def tensors_close(e, c):
    if e.dtype.is_complex and c.dtype.is_complex:
        e, c = _both_parts(e, c)
    if e.dtype.is_floating_point or e.dtype.is_complex:
        rtol, atol = TOLERANCES.get(e.dtype, (1e-4, 1e-5))
        return torch.allclose(c.double(), e.double(), rtol=rtol, atol=atol, equal_nan=True)
    return torch.equal(e, c)


def within_reference(e, c, r):
    """Is compiled no worse than eager, measured against the fp64 reference?"""
    if e.dtype.is_complex and c.dtype.is_complex and r.dtype.is_complex:
        e, c, r = _both_parts(e, c, r)
    if not e.dtype.is_floating_point:
        # Discrete results of float math (comparisons, argmax, casts). Where
        # compiled differs from eager, it is wrong only if eager matches the
        # exact result there and compiled does not.
        exact = r.to(e.dtype) if r.dtype != e.dtype else r
        wrong = (e != c) & (exact == e) & (exact != c)
        return not bool(wrong.any())
    e64, c64, r64 = e.double(), c.double(), r.double()
    finite = torch.isfinite(r64) & torch.isfinite(e64)
    if not torch.equal(torch.isfinite(c64) & finite, finite):
        return False
    if not finite.any():
        return True
    err_c = (c64[finite] - r64[finite]).pow(2).mean().sqrt()
    err_e = (e64[finite] - r64[finite]).pow(2).mean().sqrt()
    scale = r64[finite].pow(2).mean().sqrt()
    rtol, atol = TOLERANCES.get(e.dtype, (1e-4, 1e-5))
    return bool(err_c <= REF_ERROR_FACTOR * err_e + atol + rtol * scale)


def mismatch_detail(e, c):
    if e.numel() == 0:
        return "empty tensors differ"
    if e.dtype.is_floating_point:
        diff = (c.double() - e.double()).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        flat = int(diff.reshape(-1).argmax())
    else:
        flat = int((e != c).reshape(-1).int().argmax())
    where = list(torch.unravel_index(torch.tensor(flat), e.shape)) if e.dim() else []
    at = [int(i) for i in where]
    ev, cv = e.reshape(-1)[flat].item(), c.reshape(-1)[flat].item()
    count = int((e != c).sum()) if not e.dtype.is_floating_point else int((~torch.isclose(c.double(), e.double(), equal_nan=True)).sum())
    return f"{count}/{e.numel()} elements differ; at {at}: compiled {cv!r}, eager {ev!r}"


def to_reference_args(args):
    """fp64 copies of floating inputs (same layout), for the reference run."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point:
            out.append(a.detach().to(torch.float64).requires_grad_(a.requires_grad))
        else:
            out.append(a.detach().clone() if isinstance(a, torch.Tensor) else a)
    return out


def _as_float64(value):
    if isinstance(value, torch.dtype) and value.is_floating_point:
        return torch.float64
    if isinstance(value, (list, tuple)):
        return type(value)(_as_float64(v) for v in value)
    return value


class Float64Everywhere(torch.overrides.TorchFunctionMode):
    """Run a program with every floating dtype replaced by float64.

    Upcasting only the inputs is not enough: casts inside the program
    (``.to(torch.float16)``, ``dtype=`` of factories, ``.float()``) would
    round the reference like eager, or mix fp64 with fp32 operands and fail.
    """

    _DOWNCASTS = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("generator") is not None:
            # A seeded draw (``make_input``: the gradient loss's cotangents) keeps the dtype it
            # draws in, so the reference gets eager's values; drawn in float64, they would differ,
            # and a wrong compiled gradient could pass for "no worse than eager" against them.
            return func(*args, **kwargs)
        if func in self._DOWNCASTS:
            return torch.Tensor.double(args[0])
        args = tuple(_as_float64(a) for a in args)
        kwargs = {k: _as_float64(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def reference_call(fn, args):
    """Run ``fn`` in float64 everywhere; returns run_call's record.

    Its output leaves carry the way to a shadowed run of ``fn`` on ``args``
    (``attach_rounding``), which ``compare`` takes only when a result differs.
    """
    pristine = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    record = float64_call(fn, args)
    if "out" in record:
        attach_rounding(record["out"], fn, pristine)
    return record


def float64_call(fn, args):
    """Run ``fn`` in float64 everywhere; returns run_call's record, its leaves
    without a shadowed run: where every leaf compared is a float, rounding
    explains nothing (``rounding_explains``), and a short repro can use this."""
    # A module program's side runs its state's float64 copy.
    upcast = fn.in_float64() if hasattr(fn, "in_float64") else fn
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Everywhere():
            record = run_call(upcast, to_reference_args(args))
    finally:
        torch.set_default_dtype(previous)
    return record


# ---------------------------------------------------------------- discrete results and rounding
#
# A comparison, all/any, argmax or sort of computed floats is a decision: when
# the value it decides on lies within rounding of the threshold (or of a
# competitor), compiled code that rounds differently may decide the other way
# without any bug. ``explain_rounding`` runs the program as eager does, with a
# float64 shadow of every tensor, and marks each element that such a decision
# could change ("tainted"); ``rounding_explains`` accepts a mismatch whose every
# differing element is tainted, and says why.

_PRECISION = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2, torch.float64: 3}

# Ops whose output is exact when their input is: they move or widen values, never round them.
_EXACT = {
    "view", "reshape", "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "squeeze", "unsqueeze",
    "flatten", "unflatten", "__getitem__", "select", "narrow", "contiguous", "clone", "cat", "concat",
    "concatenate", "stack", "flip", "roll", "repeat", "movedim", "swapaxes", "diagonal", "tril", "triu", "split",
    "chunk", "unbind", "tensor_split", "view_as", "reshape_as", "detach", "index_select", "gather", "neg",
    "__neg__", "abs", "__abs__", "double", "float", "to", "type_as", "where", "masked_fill", "relu", "max",
    "min", "amax", "amin", "maximum", "minimum", "clamp", "clip", "sort", "topk", "__setitem__", "new_zeros",
    "new_ones", "zeros_like", "ones_like", "zeros", "ones", "full", "full_like", "arange", "__get__",
}
# Ops that move elements: the taint moves with them (the op is applied to it).
_STRUCTURAL = {
    "view", "reshape", "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "squeeze", "unsqueeze",
    "flatten", "unflatten", "__getitem__", "select", "narrow", "contiguous", "clone", "cat", "concat",
    "concatenate", "stack", "flip", "roll", "repeat", "movedim", "swapaxes", "diagonal", "tril", "triu", "split",
    "chunk", "unbind", "tensor_split", "view_as", "reshape_as", "detach", "index_select", "__get__",
}
# Elementwise ops: an output element is tainted where a (broadcast) input element is.
_POINTWISE = {
    "add", "sub", "mul", "div", "true_divide", "neg", "abs", "where", "logical_and", "logical_or", "logical_not",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "pow", "exp", "exp2", "expm1", "log",
    "log1p", "log2", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "silu", "elu", "selu", "softplus",
    "leaky_relu", "hardtanh", "clamp", "clip", "maximum", "minimum", "masked_fill", "float", "double", "half",
    "bfloat16", "to", "type_as", "sqrt", "rsqrt", "reciprocal", "square", "erf", "atan", "asin", "acos", "sinh",
    "cosh", "fmod", "remainder", "floor_divide", "lerp", "addcmul", "addcdiv", "nan_to_num", "mish", "hardswish",
    "hardsigmoid", "logit", "xlogy", "copysign", "hypot", "atan2", "positive", "clamp_min", "clamp_max", "int",
    "long", "bool", "short", "char", "byte", "floor", "ceil", "trunc", "round", "sign", "sgn",
    # Python's operators, as torch names them to a TorchFunctionMode (``2 / x`` is __rdiv__, ``x += y`` __iadd__).
    # One literal, no ``|=`` after it: scripts paste this assignment alone (corpus/scripts.py Helpers.pieces).
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__div__", "__rdiv__", "__idiv__", "__floordiv__",
    "__rfloordiv__", "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__iand__", "__or__", "__ror__", "__ior__",
    "__xor__", "__rxor__", "__ixor__", "__lshift__", "__rlshift__", "__ilshift__", "__rshift__", "__rrshift__",
    "__irshift__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
}
# Reductions over ``dim``: an output element depends on its slice.
_REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "nansum", "nanmean", "logsumexp", "norm", "std", "var",
               "count_nonzero", "max", "min", "argmax", "argmin", "all", "any", "median", "nanmedian", "mode",
               "kthvalue"}
# Ops along ``dim`` keeping the shape (topk: k of it): an element depends on its slice.
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "softmax", "log_softmax", "sort", "argsort", "logcumsumexp",
          "topk"}
# Reductions and scans that pick elements of their slice (or their indices) rather than mix them:
# what they give stays as near its input as the elements they pick.
_SELECTIONS = {"amax", "amin", "max", "min", "argmax", "argmin", "all", "any", "median", "nanmedian", "mode",
               "kthvalue", "cummax", "cummin", "sort", "argsort", "topk"}
# Reductions that count or add integers (a mask's count): a flip of one element moves them by its step.
_COUNTS = {"sum", "nansum", "count_nonzero", "cumsum"}
_INDEX_OUTPUTS = {"argmax", "argmin", "argsort"}  # their only output is indices; (values, indices) pairs: the second
_COMPARISONS = {"gt", "lt", "ge", "le", "eq", "ne", "greater", "less", "greater_equal", "less_equal", "not_equal",
                "__gt__", "__lt__", "__ge__", "__le__", "__eq__", "__ne__"}
_ROUNDINGS = {"int", "long", "short", "char", "byte", "bool", "to", "floor", "ceil", "trunc", "round", "sign", "sgn"}
# Integer ops through which a flipped element's step is known: casts and signs keep it, sums add them.
_KEEP_STEP = {"to", "int", "long", "short", "char", "byte", "type_as", "neg", "__neg__", "abs", "__abs__",
              "positive", "__pos__"}
# Ops that hand a tensor's values to Python (a branch, a threshold): the shadow loses them there.
_TO_PYTHON = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__complex__", "numpy", "__array__",
              "__format__", "__repr__", "__str__", "equal", "allclose", "is_nonzero", "__iter__"}
_ADD_STEPS = {"add", "sub", "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__"}
_MUL_STEPS = {"mul", "__mul__", "__rmul__", "__imul__"}


class _Unfollowable(Exception):
    """An op the shadow cannot follow while one of its inputs is tainted: nothing is explained."""


def _op_name(func):
    name = getattr(func, "__name__", "") or ""
    if "." in name:  # an OpOverload: "gt.Tensor"
        name = name.split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _tensors(v)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _tensors(v)]
    return []


def _reduce(values, dim, keepdim, shape, how="any"):
    """``values`` reduced over ``dim`` (None: all dims) with any(), sum() or amax() (``how``),
    shaped as an output of ``shape``."""
    if values.numel() == 0:
        return torch.zeros(shape, dtype=values.dtype)
    if dim is None:
        return getattr(values, how)().expand(shape).clone()
    dims = sorted({d % max(values.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim)}, reverse=True)
    for d in dims:
        values = values.any(d, keepdim=True) if how == "any" else getattr(values, how)(d, keepdim=True)
    if not keepdim:
        for d in dims:
            values = values.squeeze(d)
    return values.reshape(shape).clone()


def _reduce_any(mask, dim, keepdim, shape):
    """``mask`` reduced with any() over ``dim`` (None: all dims), shaped as an output of ``shape``."""
    return _reduce(mask, dim, keepdim, shape, "any")


def _dim_args(name, args, kwargs, position=1):
    if name in ("topk", "kthvalue"):
        position = 2
    dim = kwargs.get("dim", args[position] if len(args) > position else None)
    keepdim = kwargs.get("keepdim", args[position + 1] if len(args) > position + 1 and name != "topk" else False)
    if name in ("sort", "argsort", "softmax", "log_softmax", "topk", "kthvalue", "mode") and dim is None:
        dim = -1
    if isinstance(dim, (torch.Tensor, bool)) or not (dim is None or isinstance(dim, (int, list, tuple))):
        raise TypeError(f"{name}: cannot read dim {dim!r}")
    return dim, bool(keepdim)


class _Entry:
    """One tensor of a shadowed run: itself, its float64 shadow, the elements an
    ambiguous decision could change (``taint``, or None), the elements that depend
    on one in a way the shadow cannot bound (``poison``, or None: never explained),
    how far an integer element may move where tainted (``step``; None: 1 for a
    bool, unbounded otherwise), why, and the lowest precision it was rounded in
    (None: its value is exact)."""

    __slots__ = ("tensor", "shadow", "taint", "poison", "step", "why", "chain", "margin", "tol", "label")

    def __init__(self, tensor, shadow, taint=None, why=None, chain=None):
        self.tensor, self.shadow, self.taint, self.why, self.chain = tensor, shadow, taint, why, chain
        self.poison = self.step = None
        self.margin = self.tol = self.label = None  # set by a decision: per element, and what it was

    def marked(self):
        return self.taint is not None or self.poison is not None

    def tolerance(self):
        """How far each element may lie from its exact value: the tolerance of the
        lowest precision it was rounded in, and a multiple of eager's own error."""
        t, s = self.tensor, self.shadow
        if self.chain is None or not t.dtype.is_floating_point or not s.dtype.is_floating_point:
            return torch.zeros(t.shape, dtype=torch.float64)
        rtol, atol = TOLERANCES[self.chain]
        noise = (t.detach().double() - s).abs()
        noise = torch.where(torch.isfinite(noise), noise, torch.zeros_like(noise))
        return atol + rtol * s.abs().nan_to_num(0.0) + REF_ERROR_FACTOR * noise


class RoundingShadow(torch.overrides.TorchFunctionMode):
    """Run a program as eager does, with a float64 shadow of every tensor.

    Each op runs twice, on the tensors and on their shadows; a decision
    (comparison, all/any, argmax/argmin, max/min indices, sort/topk indices,
    rounding to integers) whose float64 operands lie within rounding of its
    threshold taints the elements it decides. Later ops carry the taint only
    where they keep it local: elementwise and structural ops, selections
    (max, sort, all ...), and counts of integers (with how far a count may
    move). An op that mixes a tainted float into others (a sum, a softmax)
    poisons what it gives: a flip there is never explained. An op it cannot
    follow while an input is tainted (matmul, linear ...) sets ``broken``:
    then nothing is explained.
    """

    def __init__(self):
        super().__init__()
        self.entries = {}  # id(tensor) -> _Entry (the entry holds the tensor, so ids stay unique)
        self.broken = None

    def entry(self, tensor):
        e = self.entries.get(id(tensor))
        if e is None or e.tensor is not tensor:
            t = tensor.detach()
            shadow = t.to(torch.float64) if t.dtype.is_floating_point else t.clone()
            e = self.entries[id(tensor)] = _Entry(tensor, shadow)
        return e

    def _shadow(self, value):
        if isinstance(value, torch.Tensor):
            return self.entry(value).shadow
        if isinstance(value, torch.dtype):
            return torch.float64 if value.is_floating_point else value
        if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
            return [self._shadow(v) for v in value] if isinstance(value, list) else tuple(self._shadow(v) for v in value)
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        if self.broken is not None:
            return func(*args, **kwargs)
        inputs = [self.entry(t) for t in _tensors((args, kwargs))]
        try:
            s_args = tuple(self._shadow(a) for a in args)
            s_kwargs = {k: self._shadow(v) for k, v in kwargs.items()}
        except Exception as exc:  # noqa: BLE001 - an argument the shadow cannot follow
            self.broken = f"{name}: {exc}"
            return func(*args, **kwargs)
        raw = getattr(func, "__name__", "") or ""
        writes = name == "__setitem__" or raw.startswith("__i") or (raw.endswith("_") and not raw.endswith("__"))
        if "out" in kwargs or (writes and args and isinstance(args[0], torch.Tensor) and self._aliased(args[0])):
            # the marks and shadows of its other views would go stale: follow no further
            self.broken = f"{name}: writes a tensor that shares its storage with another"
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        outs = _tensors(out) if isinstance(out, (torch.Tensor, list, tuple)) else []
        if name == "__setitem__":
            outs = [args[0]]
        if not outs:
            if name in _TO_PYTHON and any(e.marked() for e in inputs):
                self.broken = f"{name}: a tainted value leaves for Python"  # where it goes, the shadow cannot follow
            return out
        try:
            previous = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                if func in Float64Everywhere._DOWNCASTS:
                    s_out = torch.Tensor.double(s_args[0])
                else:
                    s_out = func(*s_args, **s_kwargs)
            finally:
                torch.set_default_dtype(previous)
            s_outs = [s_args[0]] if name == "__setitem__" else _tensors(s_out)
            if len(s_outs) != len(outs) or any(a.shape != b.shape for a, b in zip(outs, s_outs)):
                raise RuntimeError("the float64 run gave other outputs")
            self._record(func, name, args, kwargs, inputs, outs, s_outs)
        except Exception as exc:  # noqa: BLE001 - an op the shadow cannot follow: explain nothing
            self.broken = f"{name}: {type(exc).__name__}: {exc}"
        return out

    # -------------------------------------------------------- one op

    def _record(self, func, name, args, kwargs, inputs, outs, s_outs):
        floating_in = [e.tensor.dtype for e in inputs if e.tensor.dtype.is_floating_point]
        chains = [e.chain for e in inputs if e.chain is not None]
        narrows = any(_PRECISION.get(t.dtype, 3) < _PRECISION.get(d, 3)
                      for t in outs if t.dtype.is_floating_point for d in floating_in)
        if name not in _EXACT or narrows:
            chains += floating_in + [t.dtype for t in outs if t.dtype.is_floating_point]
        chain = min(chains, key=lambda d: _PRECISION.get(d, 3)) if chains else None
        marked = [e for e in inputs if e.marked()]
        why = next((e.why for e in marked if e.why), None)
        if not marked:
            marks = [(None, None, None)] * len(outs)
        elif name in _STRUCTURAL or name in _POINTWISE or name in _COMPARISONS or name in _REDUCTIONS \
                or name in _SCANS or name == "__setitem__":
            marks = self._propagate(func, name, args, kwargs, inputs, outs)
        else:
            raise _Unfollowable(f"{name} of a tainted tensor")
        decided = self._decide(name, args, kwargs, inputs, outs)
        for i, (t, s) in enumerate(zip(outs, s_outs)):
            e = _Entry(t, s, marks[i][0], why, chain)
            e.poison, e.step = marks[i][1], marks[i][2]
            d = decided[i] if decided else None
            if d is not None:
                amb, margin, tol, label = d[:4]
                if name in ("all", "any"):
                    # the decision says exactly what the slice's taint can change, and where poison may
                    e.taint, e.why, e.poison = None, None, d[4] if len(d) > 4 else e.poison
                if e.poison is not None:
                    amb = amb & ~e.poison  # a poisoned operand's tolerance says nothing
                if bool(amb.any()) and name in _ROUNDINGS and not t.dtype.is_floating_point and t.dtype != torch.bool:
                    before = e.taint if e.taint is not None else torch.zeros(t.shape, dtype=torch.bool)
                    e.step = torch.where(amb & ~before, torch.ones((), dtype=torch.float64), self._steps_of(e))
                if bool(amb.any()) and margin is None:
                    e.why = label
                    e.taint = amb if e.taint is None else (e.taint | amb)
                elif bool(amb.any()):
                    flat = int(amb.reshape(-1).int().argmax())
                    m, tl = float(margin.reshape(-1)[flat]), float(tol.reshape(-1)[flat])
                    e.margin, e.tol, e.label = margin, tol, label
                    e.why = f"{label} at its element {flat} (flat), margin {m:.3g} <= tol {tl:.3g}" + (
                        f"; upstream, {e.why}" if e.why else "")
                    e.taint = amb if e.taint is None else (e.taint | amb)
            if e.taint is not None and not bool(e.taint.any()):
                e.taint = None
            if e.poison is not None and not bool(e.poison.any()):
                e.poison = None
            self.entries[id(t)] = e

    def _propagate(self, func, name, args, kwargs, inputs, outs):
        """Per output: (taint, poison, step) from its inputs' (each None when clear).
        Raises _Unfollowable for a form these rules do not know."""
        try:
            return self._propagate_known(func, name, args, kwargs, inputs, outs)
        except _Unfollowable:
            raise
        except Exception as exc:  # noqa: BLE001 - a form the rules below do not know
            raise _Unfollowable(f"{name}: {type(exc).__name__}: {exc}") from exc

    def _propagate_known(self, func, name, args, kwargs, inputs, outs):
        getters = (self._taint_of, self._poison_of, self._steps_of)
        if name == "__setitem__":
            target, index, value = args[0], args[1], args[2]
            if any(self.entry(t).marked() for t in _tensors(index)):
                raise _Unfollowable("__setitem__ at a tainted index")
            result = []
            for get, clear in zip(getters, (False, False, 0.0)):
                mark = get(target).clone()
                mark[index] = get(value) if isinstance(value, torch.Tensor) else clear
                result.append(mark)
            return [tuple(result)]
        if name in _STRUCTURAL:
            data = args[0] if args else None
            if data is None or any(self.entry(t).marked() for t in _tensors((args[1:], kwargs))):
                raise _Unfollowable(f"{name} with a tainted argument")
            result = []
            for get in getters:
                marks = [get(t) for t in data] if isinstance(data, (list, tuple)) else get(data)
                moved = _tensors(func(marks, *args[1:], **kwargs))
                if len(moved) != len(outs) or any(a.shape != b.shape for a, b in zip(moved, outs)):
                    raise _Unfollowable(f"{name} moved the marks elsewhere")
                result.append([m.clone() for m in moved])
            return list(zip(*result))
        binary = name in ("max", "min") and len(args) > 1 and isinstance(args[1], torch.Tensor)  # as maximum
        if (name in _SELECTIONS or name in _COUNTS) and not binary:
            return self._propagate_reduction(name, args, kwargs, outs)
        if (name in _REDUCTIONS or name in _SCANS) and not binary:  # a tainted element mixed into others: poison all
            return [(torch.zeros(t.shape, dtype=torch.bool), torch.ones(t.shape, dtype=torch.bool), None) for t in outs]
        # Elementwise (comparisons included): each output element from the (broadcast) input elements.
        result = []
        for t in outs:
            taint = torch.zeros(t.shape, dtype=torch.bool)
            poison = torch.zeros(t.shape, dtype=torch.bool)
            for e in inputs:
                if not e.marked():
                    continue
                shape = torch.broadcast_shapes(e.tensor.shape, t.shape)
                mark = self._taint_of(e.tensor)
                if name in _COMPARISONS:  # an operand that moves by a known step: the decision's tolerance holds it
                    mark = mark & torch.isinf(self._steps_of(e.tensor))
                taint = taint | mark.expand(shape)
                poison = poison | self._poison_of(e.tensor).expand(shape)
            result.append((taint.clone(), poison.clone(), self._pointwise_step(name, args, kwargs, t)))
        return result

    def _propagate_reduction(self, name, args, kwargs, outs):
        data = args[0] if args else kwargs.get("input")
        if not isinstance(data, torch.Tensor):
            raise _Unfollowable(f"{name} of no tensor")
        if any(self.entry(t).marked() for t in _tensors((args[1:], kwargs))):
            raise _Unfollowable(f"{name} with a tainted argument")
        dim, keepdim = _dim_args(name, args, kwargs)
        taint, poison, step = self._taint_of(data), self._poison_of(data), self._steps_of(data)
        moved = torch.where(taint, step, torch.zeros_like(step))

        def over(values, t, how="any"):
            if name in _SCANS:
                d = -1 if dim is None else dim
                whole = values.any(d, keepdim=True) if how == "any" else getattr(values, how)(d, keepdim=True)
                return whole.expand(t.shape).clone() if whole.dim() == t.dim() else _reduce(values, None, False,
                                                                                              t.shape, how)
            return _reduce(values, dim, keepdim, t.shape, how)

        result = []
        for i, t in enumerate(outs):
            reach, p = over(taint, t), over(poison, t)
            is_index = name in _INDEX_OUTPUTS or (name in _SELECTIONS and len(outs) == 2 and i == 1)
            if name in _SELECTIONS:
                # a picked element, or its index: as local as the elements it picks from
                result.append((reach, p, None if is_index or t.dtype == torch.bool else over(moved, t, "amax")))
            elif not data.dtype.is_floating_point and not t.dtype.is_floating_point and not data.dtype.is_complex:
                total = over(moved, t, "sum")  # a count: each flipped element moves it by its step at most
                result.append((reach, p | (reach & torch.isinf(total)), total))
            else:  # floats added up: how far a flip moves them is not known
                result.append((torch.zeros(t.shape, dtype=torch.bool), p | reach, None))
        return result

    def _pointwise_step(self, name, args, kwargs, out):
        """How far each element of an integer elementwise result may move (None: unbounded or a bool)."""
        if out.dtype == torch.bool or out.dtype.is_floating_point or out.dtype.is_complex:
            return None

        def step(value):
            if isinstance(value, torch.Tensor):
                e = self.entry(value)
                return torch.where(self._taint_of(value), self._steps_of(value), 0.0) if e.marked() else 0.0
            return 0.0

        operands = [a for a in args if isinstance(a, (torch.Tensor, int, float, bool))]
        if name in _KEEP_STEP and operands:
            return (step(args[0]) + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name in _ADD_STEPS and len(operands) == 2 and "alpha" not in kwargs:
            return (step(operands[0]) + step(operands[1]) + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name in _MUL_STEPS and len(operands) == 2:
            moving = [v for v in operands if isinstance(v, torch.Tensor) and self.entry(v).marked()]
            if len(moving) == 1:
                other = operands[1] if moving[0] is operands[0] else operands[0]
                factor = other.detach().double().abs() if isinstance(other, torch.Tensor) else abs(float(other))
                return (step(moving[0]) * factor + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name == "where" and len(args) == 3:
            cond, a, b = args
            flip = self._taint_of(cond) if isinstance(cond, torch.Tensor) else torch.zeros((), dtype=torch.bool)
            value = [v.detach().double() if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)
                     for v in (a, b)]
            picked = torch.where(cond, step(a) + torch.zeros(out.shape, dtype=torch.float64), step(b))
            return torch.where(flip, (value[0] - value[1]).abs() + step(a) + step(b), picked).expand(out.shape).clone()
        return None

    def _aliased(self, tensor):
        if tensor.numel() == 0:
            return False
        try:
            ptr = tensor.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - a tensor without plain storage: assume the worst
            return True
        return tensor._base is not None or any(
            e.tensor is not tensor and e.tensor.untyped_storage().data_ptr() == ptr for e in self.entries.values())

    def _taint_of(self, tensor):
        e = self.entry(tensor)
        return e.taint if e.taint is not None else torch.zeros(tensor.shape, dtype=torch.bool)

    def _poison_of(self, tensor):
        e = self.entry(tensor)
        return e.poison if e.poison is not None else torch.zeros(tensor.shape, dtype=torch.bool)

    def _steps_of(self, tensor_or_entry):
        """How far each element may move where tainted: 1 for a bool, unbounded (inf) when not known."""
        e = tensor_or_entry if isinstance(tensor_or_entry, _Entry) else self.entry(tensor_or_entry)
        if e.step is not None:
            return e.step
        return torch.full(e.tensor.shape, 1.0 if e.tensor.dtype == torch.bool else float("inf"), dtype=torch.float64)

    def _operand(self, value):
        """(float64 value, tolerance) of an operand: a tensor's shadow, or an exact number. An
        integer that a flip upstream may move by a known step has that step in its tolerance,
        twice: the shadow's own decisions may have moved it as well."""
        if isinstance(value, torch.Tensor):
            e = self.entry(value)
            tol = e.tolerance()
            if e.taint is not None and not e.tensor.dtype.is_floating_point:
                steps = self._steps_of(e)
                tol = tol + torch.where(e.taint & torch.isfinite(steps), 2 * steps, 0.0)
            return e.shadow.double(), tol
        return torch.tensor(float(value), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)

    def _decide(self, name, args, kwargs, inputs, outs):
        """Per output: (ambiguous mask, margin, tol, label) for a decision op, else None."""
        if name in _COMPARISONS and len(args) >= 1:
            other = args[1] if len(args) > 1 else kwargs.get("other")
            if other is None or not isinstance(outs[0], torch.Tensor) or outs[0].dtype != torch.bool:
                return None
            (a, ta), (b, tb) = self._operand(args[0]), self._operand(other)
            margin = (a - b).abs()
            tol = (ta + tb).expand(margin.shape)
            amb = (margin <= tol) & (tol > 0) & ~torch.isnan(margin)
            return [(amb.reshape(outs[0].shape), margin.reshape(outs[0].shape), tol.reshape(outs[0].shape),
                     f"comparison {name}")]
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
            return self._decide_bool_reduction(name, args, kwargs, outs) if name in ("all", "any") else None
        s, tol = self._operand(x)
        if name in ("argmax", "argmin") or (name in ("max", "min") and len(outs) == 2):
            dim, keepdim = _dim_args(name, args, kwargs)
            largest = name in ("argmax", "max")
            amb, margin, t = self._near_best(s if largest else -s, tol, dim, keepdim)
            index_out = outs[-1]
            found = (amb.reshape(index_out.shape), margin.reshape(index_out.shape), t.reshape(index_out.shape),
                     f"{name} (a near tie)")
            return [None, found] if len(outs) == 2 else [found]
        if name in ("sort", "argsort", "topk"):
            return self._decide_order(name, args, kwargs, x, s, tol, outs)
        if name in ("all", "any"):
            return self._decide_bool_reduction(name, args, kwargs, outs, (s, tol))
        if name in _ROUNDINGS and len(outs) == 1:
            out = outs[0]
            if name == "to" and out.dtype.is_floating_point:
                return None
            if out.dtype == torch.bool or name in ("sign", "sgn"):
                margin = s.abs()
            elif name == "round":
                margin = ((s.abs() - s.abs().floor()) - 0.5).abs()
            else:
                margin = (s - s.round()).abs()
            amb = (margin <= tol) & (tol > 0) & ~torch.isnan(margin)
            return [(amb.reshape(out.shape), margin.reshape(out.shape), tol.reshape(out.shape), f"rounding {name}")]
        return None

    def _near_best(self, v, tol, dim, keepdim):
        if dim is None:
            v, tol, dim = v.reshape(-1), tol.reshape(-1), 0
        best, at = v.max(dim, keepdim=True)
        t_best = tol.gather(dim, at)
        near = (v + tol >= best - t_best) & ~torch.isnan(v)
        others = v.scatter(dim, at, float("-inf"))
        second, at2 = others.max(dim, keepdim=True)
        margin, t = best - second, t_best + tol.gather(dim, at2)
        if not keepdim:
            margin, t = margin.squeeze(dim), t.squeeze(dim)
        # An exact tie of exact values is no rounding: the first maximum wins on both sides.
        amb = (near.sum(dim, keepdim=keepdim) > 1) & (t > 0)
        return amb, margin.nan_to_num(float("inf")), t

    def _decide_order(self, name, args, kwargs, x, s, tol, outs):
        dim = kwargs.get("dim", None)
        if name == "topk":
            dim = dim if dim is not None else (args[2] if len(args) > 2 else -1)
            largest = kwargs.get("largest", args[3] if len(args) > 3 else True)
            k = kwargs.get("k", args[1] if len(args) > 1 else None)
        else:
            dim = dim if dim is not None else (args[1] if len(args) > 1 else -1)
            largest = kwargs.get("descending", args[2] if len(args) > 2 else False)
            k = x.shape[dim] if x.dim() else 1
        if x.dim() == 0:
            return None
        order = torch.sort(x.detach(), dim=dim, descending=bool(largest), stable=True).indices
        sv, st = s.gather(dim, order), tol.gather(dim, order)
        n = sv.shape[dim]
        amb_sorted = torch.zeros(sv.shape, dtype=torch.bool)
        margin = torch.full(sv.shape, float("inf"), dtype=torch.float64)
        tols = torch.zeros(sv.shape, dtype=torch.float64)
        if n > 1:
            gap = (sv.narrow(dim, 1, n - 1) - sv.narrow(dim, 0, n - 1)).abs()
            gap_tol = st.narrow(dim, 1, n - 1) + st.narrow(dim, 0, n - 1)
            tie = (gap <= gap_tol) & ~torch.isnan(gap)
            for start in (0, 1):  # a tie makes both of its positions ambiguous
                amb_sorted.narrow(dim, start, n - 1).logical_or_(tie)
                margin.narrow(dim, start, n - 1).copy_(torch.minimum(margin.narrow(dim, start, n - 1), gap))
                tols.narrow(dim, start, n - 1).copy_(torch.maximum(tols.narrow(dim, start, n - 1), gap_tol))
        k = int(k)
        amb_k, margin_k, tol_k = amb_sorted.narrow(dim, 0, k), margin.narrow(dim, 0, k), tols.narrow(dim, 0, k)
        found = []
        for t in outs:
            if t.dtype.is_floating_point or t.shape != amb_k.shape:
                found.append(None)
            else:
                found.append((amb_k.clone(), margin_k.clone(), tol_k.clone(), f"{name} (a near tie)"))
        return found

    def _decide_bool_reduction(self, name, args, kwargs, outs, floats=None):
        x = args[0] if args else kwargs.get("input")
        if not isinstance(x, torch.Tensor):
            return None
        dim, keepdim = _dim_args(name, args, kwargs)
        poisoned = self._poison_of(x)
        unsure = self._taint_of(x) | poisoned
        value = self.entry(x).shadow != 0
        margin = tol = None
        if floats is not None:
            s, t = floats
            near = (s.abs() <= t) & (t > 0) & ~torch.isnan(s)
            unsure = unsure | near
            margin, tol = s.abs(), t
        out = outs[0]
        if name == "all":
            decided = _reduce_any(~unsure & ~value, dim, keepdim, out.shape)
        else:
            decided = _reduce_any(~unsure & value, dim, keepdim, out.shape)
        amb = ~decided & _reduce_any(unsure, dim, keepdim, out.shape)
        poison = ~decided & _reduce_any(poisoned, dim, keepdim, out.shape)  # undecided, and a poisoned element may decide
        if margin is None:  # bool operands: the taint came from upstream
            return [(amb, None, None, f"{name}() of a mask that hangs on {self.entry(x).why}", poison)]
        return [(amb, torch.full(out.shape, float(margin.min()) if margin.numel() else 0.0, dtype=torch.float64),
                 torch.full(out.shape, float(tol.max()) if tol.numel() else 0.0, dtype=torch.float64),
                 f"{name} (nonzero test)", poison)]


def explain_rounding(fn, args):
    """Per leaf of ``run_call``'s tree (outputs, then final inputs), as ``flatten``
    orders them: an _Entry (its ``taint``: the elements a decision within
    rounding of its threshold could change) or None; None when the shadowed
    run could not follow the program."""
    # On the CPU: the masks the shadow keeps live there.
    args = [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
    mode = RoundingShadow()
    try:
        with mode:
            out = fn(*args)
    except Exception:  # noqa: BLE001 - eager raising here is not ours to judge
        return None
    if mode.broken is not None:
        return None
    leaves = flatten((out, tuple(args)))
    return [mode.entries.get(id(v)) if isinstance(v, torch.Tensor) else None for _, v in leaves]


def attach_rounding(tree, fn, args):
    """Give each tensor leaf of a reference ``tree`` a way to its entry of
    ``explain_rounding(fn, args)``, run once, when ``rounding_explains`` first asks."""
    memo = []

    def entries():
        if not memo:
            memo.append(explain_rounding(fn, args))
        return memo[0]

    for index, (_, leaf) in enumerate(flatten(tree)):
        if isinstance(leaf, torch.Tensor):
            leaf._symfuzz_rounding = (entries, index)
            leaf._symfuzz_explain = rounding_explains
    return tree


def rounding_explains(e, c, r):
    """Why rounding explains how compiled ``c`` differs from eager ``e`` (a reason), or None.

    Only a discrete output is ever explained: a bool, or integers (indices,
    counts, rounded values); never floats. It is when every element that
    differs depends on a decision (a comparison, all/any, argmax, sort ...)
    whose exact float64 operands lie within rounding of its threshold, only
    through ops that keep that local (never a sum of floats or an op the
    shadow does not know), and, for a count or other integer whose step is
    known, compiled lies within that step of eager: there, code that rounds
    differently may give it without a bug. ``r`` is the reference leaf, from
    ``reference_call``; without its shadowed run, nothing is explained. It
    never raises: whatever goes wrong, nothing is explained.
    """
    try:
        return _rounding_reason(e, c, r)
    except Exception:  # noqa: BLE001 - no explanation is the safe answer
        return None


def _rounding_reason(e, c, r):
    hook = getattr(r, "_symfuzz_rounding", None)
    if hook is None or e.shape != c.shape or e.dtype != c.dtype or e.numel() == 0:
        return None
    if e.dtype.is_floating_point or e.dtype.is_complex:
        return None
    entries, index = hook
    found = entries()
    entry = found[index] if found is not None and index < len(found) else None
    if entry is None or entry.taint is None or entry.taint.shape != e.shape:
        return None
    # The shadow ran on CPU copies: judge there, whatever device the lane used.
    e, c = e.detach().cpu(), c.detach().cpu()
    differ = e != c
    explained = entry.taint.cpu()
    if entry.poison is not None:
        explained = explained & ~entry.poison.cpu()
    if e.dtype != torch.bool:
        steps = entry.step.cpu() if entry.step is not None else torch.full(e.shape, float("inf"), dtype=torch.float64)
        explained = explained & ((c.double() - e.double()).abs() <= steps)
    if not bool(differ.any()) or bool((differ & ~explained).any()):
        return None
    flat = int(differ.reshape(-1).int().argmax())
    at = [int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)] if e.dim() else []
    moved = ""
    if e.dtype != torch.bool and entry.step is not None and bool(torch.isfinite(entry.step.reshape(-1)[flat])):
        moved = f" (moved {abs(int(c.reshape(-1)[flat]) - int(e.reshape(-1)[flat]))} <= step " \
                f"{float(entry.step.reshape(-1)[flat]):g})"
    if entry.margin is not None and entry.margin.shape == e.shape and bool(entry.margin.reshape(-1)[flat] <= entry.tol.reshape(-1)[flat]):
        m, t = float(entry.margin.reshape(-1)[flat]), float(entry.tol.reshape(-1)[flat])
        return f"discrete flip explained by rounding: {entry.label} at element {at}, margin {m:.3g} <= tol {t:.3g}{moved}"
    return f"discrete flip explained by rounding: element {at} hangs on {entry.why or 'a decision near its threshold'}{moved}"


# ---------------------------------------------------------------- signatures

# What differs between two reports of one bug, erased in this order (each
# pattern sees what the ones before left): Dynamo's source comments ("guard
# # the line it came from # file:line in fn (torch file:line in fn)": the
# line is the program's, rendered differently by a campaign and a repro);
# fake tensors' reprs ("FakeTensor(..., size=(s0, 4))": a value, like a number);
# addresses; absolute paths (temp
# folders, caches, sources; a file's line number goes with the numbers);
# long hashes (Inductor's cache keys); FX's numbered node names (add,
# add_1: the suffix only counts repeats); symbols of any kind (s0, u1, ks2, zf3);
# numbers, floats and negatives included, but not the bits of a dtype's
# name (float32, int64 tell bugs apart); lists and tuples of numbers and
# symbols (sizes, strides, values: their length is a rank or a size, and a
# dim is static or symbolic by the schedule's marks); quoted names (sources like
# L['x0'], kernel and backend names); runs of blanks.
_VOLATILE = [
    (re.compile(r"\s+#.*?(?:<[^>]*>|\S+\.py):\d+ in [\w<>]+(?: \([^)]*\))?"), " # <source>"),
    (re.compile(r"FakeTensor\([^()]*(?:\([^()]*\)[^()]*)*\)"), "0"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?<![\w)\]])(?:/[\w.+@~-]+){2,}/?|/[\w./-]+\.(py|cpp|so|h)\b"), "<path>"),
    (re.compile(r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{24,}\b"), "<hash>"),
    (re.compile(r"(?<=[A-Za-z])_\d+\b"), ""),
    (re.compile(r"\b(?:[suq]|ps|ks|zu?f)\d+\b"), "s?"),
    (re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"(?<!float)(?<!int)(?<!complex)(?<!\d)\d+"), "N"),
    (re.compile(r"\[[Ns?,.\s\[\]*+/-]*\]"), "[N...]"),
    (re.compile(r"(?<![\w\]])\((?=[^()]*,)[Ns?,.\s*+/-]*\)"), "(N...)"),
    (re.compile(r"'[^']*'"), "'?'"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message):
    """The line of an error that names the real problem, with numbers, paths, symbols erased.

    Compiler wrappers put a header first ("backend='inductor' raised:");
    the wrapped error on the following lines is what tells bugs apart.
    """
    lines = [l.strip() for l in str(message).splitlines() if l.strip()]
    lines = [l for l in lines if not l.endswith("raised:") and not l.startswith("Set TORCHDYNAMO_VERBOSE")]
    head = next((l for l in lines if "Error" in l or "Exception" in l), lines[0] if lines else "")
    for pattern, repl in _VOLATILE:
        head = pattern.sub(repl, head)
    return head.strip()[:200]


def signature(symptom, lane, key):
    """A short stable id: same symptom, lane and key give the same signature."""
    digest = hashlib.sha1(f"{symptom}|{lane}|{key}".encode()).hexdigest()[:10]
    return f"{symptom}-{digest}"


def gradient_of(path, gradient_ops):
    """For a path into the gradients ("out[2][i]..."), the ops that consume input ``i``
    (``gradient_ops``, from ``Case.gradient_ops``); None for any other path."""
    m = re.match(r"out\[2\]\[(\d+)\]", path or "")
    if m is None or int(m.group(1)) >= len(gradient_ops):
        return None
    return gradient_ops[int(m.group(1))]


def failure_key(failure, output_ops, gradient_ops=()):
    """The part of a failure that says which bug it is, for the signature.

    One function for the oracles and every repro script, so that a script
    prints the signature its finding was stored under. It names what the
    minifier keeps while shrinking and nothing it changes: for errors, the
    exception's type and its normalized message; for mismatches, the op that
    made the output that differs ("input-mutation" for a final input state;
    for a gradient, "grad:" and the ops that consume the input it is taken with
    respect to, ``gradient_ops``: ``Case.gradient_ops``) and how it differs
    (``compare``'s kind: never sizes or values).
    """
    if failure["symptom"] in ("crash", "accepts-invalid", "over-specialization"):
        error = failure.get("error") or {}
        return f"{error.get('type', '')}|{normalize_message(error.get('message', ''))}"
    path = failure.get("path", "out")
    m = re.match(r"out\[(\d+)\](?:\[(\d+)\])?", path)
    op = "?"
    if m and m.group(1) == "0" and m.group(2) is not None:
        i = int(m.group(2))
        op = output_ops[i] if i < len(output_ops) else "?"
    elif m and m.group(1) == "1":
        op = "input-mutation"
    elif m and m.group(1) == "2":
        consumers = gradient_of(path, gradient_ops)
        op = f"grad:{consumers}" if consumers else "grad"
    elif m and m.group(1) == "3":
        op = "module-state"
    kind = failure.get("kind")
    return f"{op}|{kind}" if kind else op


# Errors by which torch refuses a schedule's own constraints: a dim marked
# dynamic that the program specializes, a guard on a size marked unbacked.
# They are documented behaviour, not findings (but see over-specialization).
REJECTION_TYPES = ("ConstraintViolationError", "UserError", "GuardOnDataDependentSymNode")


def rejection(error, context):
    """None, "rejected" or "over-specialization" for a compiled-only error.

    ``context`` says whether the schedule constrained dynamism (marks or
    config flags) and whether the program itself compares sizes. A dim
    marked dynamic that gets specialized although the program never compares
    or branches on a size was specialized by torch, not by the program.
    """
    context = context or {}
    if not context.get("constrained"):
        return None
    name = error.get("type", "").rsplit(".", 1)[-1]
    message = error.get("message", "")
    if context.get("translation_validation") and ("Z3Exception" in message or name == "Z3Exception"):
        return "rejected"  # the validator itself gave up (a z3 limit), not a verdict on the guards
    if name not in REJECTION_TYPES and "data-dependent" not in message:
        return None
    if error.get("stage") not in ("dynamo", "runtime", "guard"):
        return None  # raised while AOTAutograd or Inductor compiled: a crash like any other
    if name == "ConstraintViolationError" and "specialized it to be a constant" in message:
        if not context.get("demands_specialization", True):
            return "over-specialization"
    return "rejected"


def judge_call(eager, compiled, reference=None, context=None):
    """Judge one call's records (from ``run_call``); None when they agree.

    ``context`` (see ``rejection``) lets a schedule's own constraints be
    refused without that counting as a crash.
    """
    if "error" in compiled and compiled["error"].get("type", "").endswith(".LaneRejectedCall"):
        return None  # the lane refuses this call by design (oracles/lanes/export_runner.py): nothing to compare
    if "error" in compiled and "error" not in eager:
        kind = rejection(compiled["error"], context)
        if kind == "rejected":
            return None
        if kind == "over-specialization":
            return {"symptom": "over-specialization", "stage": "dynamo", "error": compiled["error"],
                    "detail": "a dim marked dynamic was specialized, and the program never compares sizes"}
        return {"symptom": "crash", "stage": compiled["error"]["stage"], "error": compiled["error"]}
    if "error" in eager and "error" not in compiled:
        return {"symptom": "accepts-invalid", "stage": "runtime", "error": eager["error"],
                "detail": "compiled returned a result where eager raised"}
    if "error" in eager:
        return None
    diff = name_gradient(compare(eager["out"], compiled["out"], reference))
    if diff is None:
        return None
    diff["stage"] = "runtime"
    return diff


def name_gradient(diff):
    """``compare``'s difference, with symptom "gradient-mismatch" when it lies in the
    gradients (the third part of ``run_call``'s tree); None stays None."""
    if diff is not None and diff.get("path", "").startswith("out[2]"):
        diff = {**diff, "symptom": "gradient-mismatch",
                "detail": "gradient with respect to an input: " + str(diff.get("detail", ""))}
    return diff


# ---------------------------------------------------------------- schedules


def frame_count():
    """Frames Dynamo has tried to compile in this process (-1 if unknown)."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def cache_entries(fn):
    """How many compiled entries Dynamo holds for ``fn``'s own frame (-1 if unknown).

    Graphs compiled for resume functions after a graph break are other
    frames; only this count says whether ``fn`` itself recompiled.
    """
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return len(_debug_get_cache_entry_list(fn.__code__))
    except Exception:  # noqa: BLE001 - a private API moved in some torch version
        return -1


def graph_count():
    """Graphs Dynamo has compiled in this process so far (-1 if unknown)."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def run_schedule(fn, compiled, calls, device="cpu", on_call=None, before_call=None, start=0):
    """Call eager ``fn`` and ``compiled`` once per call, in order, on fresh inputs.

    Returns [(eager_record, compiled_record)]; a compiled record also says how
    many graphs were compiled during that call (0 means a cached graph was
    reused). ``before_call(index, compiled_args)`` is told before each
    compiled call, ``on_call(index, eager, compiled)`` after it; ``start``
    numbers the calls when a schedule is continued.
    """
    records = []
    for index, call in enumerate(calls, start):
        for side in (fn, compiled):
            if hasattr(side, "begin_call"):  # a module program's side: the call's mode, the state it starts from
                side.begin_call(index, call)
        eager = run_call(fn, make_args(call, device))
        args = make_compiled_args(call, device)
        if before_call is not None:
            before_call(index, args)
        before, frames_before, entries_before = graph_count(), frame_count(), cache_entries(fn)
        result = run_call(compiled, args)
        result["new_entries"] = cache_entries(fn) - entries_before if entries_before >= 0 else -1
        result["graphs"] = graph_count() - before if before >= 0 else -1
        # A compile that failed adds a frame but no graph: not a reuse.
        result["frames"] = frame_count() - frames_before if frames_before >= 0 else -1
        if index > 0 and result["graphs"] > 0:
            result["recompile_reason"] = recompile_reason(fn)
        records.append((eager, result))
        if ("error" in eager or "error" in result) and hasattr(compiled, "sync_from"):
            # A module program's call that raised left the two models' states apart (one side
            # stopped midway): compiled goes on from eager's, so later calls compare like with like.
            compiled.sync_from(fn)
        if on_call is not None:
            on_call(index, eager, result)
    return records


def recompile_reason(fn):
    """The newest guard failure Dynamo recorded for ``fn`` (normalized), or ""."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import guard_failures

        reasons = guard_failures.get(fn.__code__) or []
        return normalize_message(reasons[-1]) if reasons else ""
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return ""


def fresh_recheck(fn, compile_fn, call, device="cpu", context=None, index=None):
    """Re-run one call on a freshly compiled function; its failure or None.

    When a call that reused a cached graph fails but a fresh compile at the
    same shapes is right, the cached graph was wrong for these shapes and
    its guards let it through: an unsound guard, not a miscompile. For a
    module program's side, both runs start from the state eager had before
    call ``index``, and ``compile_fn(model)`` compiles a new model.
    """
    torch._dynamo.reset()
    if index is not None and hasattr(fn, "replay"):
        eager_fn, compiled_fn = fn.replay(index), fn.replay(index, compile_fn)
    else:
        eager_fn, compiled_fn = fn, compile_fn()
    eager = run_call(eager_fn, make_args(call, device))
    result = run_call(compiled_fn, make_compiled_args(call, device))
    if "error" in result:
        # The fresh compile must actually return to vouch for the shapes;
        # a refusal (e.g. of a mark) is not "right".
        return {"symptom": "crash", "stage": result["error"]["stage"], "error": result["error"]}
    return judge_call(eager, result, lambda: reference_output(fn, call, device, index), context)


REUSE_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "crash")


def reused(result, index):
    """Did this call run a cached graph (no compile, not even a failed one)?"""
    return index > 0 and result.get("graphs", -1) == 0 and result.get("frames", -1) == 0


def judge_schedule_call(fn, compile_fn, calls, index, eager, result, device="cpu", context=None, expect_reuse=(),
                        output_ops=(), gradient_ops=()):
    """The repro scripts' judge of one call, in the oracles' order.

    Mirrors the campaign: a failing call that reused a cached graph is
    re-run on a fresh compile (unsound guard when that passes); a call a
    guard manager accepted just before it must not recompile the program's
    frame (``result["recompile"]``, set by the repro's watch); a call the
    guards say must reuse the graph must not recompile under dynamic=True.
    Returns (failure, key) or (None, None).
    """
    call = calls[index]
    failure = judge_call(eager, result, lambda: reference_output(fn, call, device, index), context)
    if failure is not None:
        key = None
        if reused(result, index) and failure["symptom"] in REUSE_SYMPTOMS:
            if fresh_recheck(fn, compile_fn, call, device, context, index) is None:
                key = "reuse|" + failure_key(failure, output_ops, gradient_ops)
                failure = {**failure, "symptom": "unsound-guard", "stage": "guard",
                           "detail": "a reused graph was wrong; a fresh compile at these shapes is right. " + str(failure.get("detail", ""))}
        return failure, key
    recompile = result.get("recompile") or {}
    if recompile.get("unsound"):  # set by a watch that asked the guard managers before the call
        return {"symptom": "unsound-recompile", "stage": "guard", "detail": recompile["detail"]}, recompile["key"]
    if index in expect_reuse and result.get("new_entries", 0) > 0:
        reason = result.get("recompile_reason", "")
        return {"symptom": "excess-recompiles", "stage": "guard",
                "detail": "recompiled although every guard of the cached graph holds: " + reason}, reason
    return None, None


def reference_output(fn, call, device="cpu", index=None):
    """The fp64 reference for one call: floating inputs upcast, run eagerly. A module
    program's side runs from its state before call ``index`` (None without one)."""
    if hasattr(fn, "replay"):
        if index is None:
            return None  # which state the call started from is not known: no reference
        fn = fn.replay(index)
    return reference_call(fn, make_args(call, device)).get("out")
