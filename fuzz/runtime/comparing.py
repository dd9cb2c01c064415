"""Comparing: the tolerance table and the one judging function, ``compare`` (compiled against
eager, dtype-aware, with an fp64 reference where rounding matters), and ``judge_call``, which
judges one call's records.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import torch


TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (3e-2, 3e-2)}  # (rtol, atol), compiled against eager: Inductor reorders and fuses


# When compiled and eager differ beyond TOLERANCES, compiled still passes if
# its error against the fp64 reference is within this factor of eager's own
# error (the criterion torch._dynamo.utils.same uses with fp64_ref).
REF_ERROR_FACTOR = 4.0


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
    eager against the fp64 reference (``within_reference``), or when every
    element that differs hangs on a decision (comparison, all/any, argmax,
    sort, a remainder's or a floor's jump ...) within rounding of its
    threshold, by a value that flip can give (discrete outputs: bools,
    indices, counts; floats only through a jump of known size) (``rounding_explains``, which never raises; ``reference_call``'s
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
