"""Autograd checks: is autograd registered where it must be, and are gradients right?

``autograd_registration`` makes the floating inputs require grad (an
author's sample usually doesn't, and then ``torch.library.opcheck`` skips the
check), runs PyTorch's registration check, then runs a backward: a custom op
without ``register_autograd`` gives outputs that require grad and a backward
that raises.

``gradient`` compares the registered backward with numerical gradients
(``torch.autograd.gradcheck``), in float64 where the op accepts it, on small
inputs of the swept shapes.
"""

from __future__ import annotations

import traceback
import warnings

import torch
import torch.utils._pytree as pytree
from torch.autograd.gradcheck import GradcheckError
from torch.testing._internal.optests.autograd_registration import (
    autograd_registration_check,
)

from symfuzz.opcheck.checks.common import (
    Problem,
    differentiable_outputs,
    first_line,
    float_slots,
    not_checked,
    run_real,
)
from symfuzz.opcheck.inputs import Case
from symfuzz.opcheck.variants import REJECTED, UNJUDGED

# What backward says when an op has no gradient formula at all (not "not implemented
# for bfloat16": that is a backward that exists and fails, which the checks report).
_MISSING = ("no autograd formula", "autograd kernel was not registered", "does not have an autograd",
            "Autograd has not been implemented", "derivative for")


def weighted_sum(outputs, seed=0):
    """A scalar that weighs every output element differently, so a gradient
    that is wrong by a permutation or a constant factor shows."""
    g = torch.Generator().manual_seed(seed)
    total = 0
    for out in outputs:
        w = (torch.rand(out.shape, generator=g, dtype=torch.float64) + 0.5).to(device=out.device, dtype=out.dtype)
        total = total + (out * w).sum()
    return total


def _is_missing_formula(exc: BaseException) -> bool:
    return any(m.lower() in str(exc).lower() for m in _MISSING)


def missing_autograd(op, templates) -> str:
    """Why ``op`` is not differentiable, or "": its outputs require grad on a sample
    whose floating inputs do, and backward raises for want of a formula (a custom op
    without register_autograd). An op with no floating input or output, or whose
    backward works or raises something else, is not called non-differentiable here:
    the checks judge it."""
    for template in templates:
        grads = float_slots(template)
        if not grads:
            continue
        real = run_real(op, template.original(), requires_grad=grads)
        if real is REJECTED:
            continue
        args, kwargs, out = real
        outs = [o for o in differentiable_outputs(out) if o.requires_grad]
        inputs = [a for a in _tensors(args, kwargs) if a.requires_grad]
        if not outs or not inputs:
            continue
        try:
            with warnings.catch_warnings(record=True) as said:
                # An op with no formula at the Autograd key gets torch's fallback, which (in its
                # default "warn" mode) makes outputs require grad and warns on backward, giving
                # no gradient: not differentiable, as much as one whose backward raises.
                warnings.simplefilter("always")
                torch.autograd.grad(weighted_sum(outs), inputs, allow_unused=True)
        except RuntimeError as exc:
            return first_line(exc) if _is_missing_formula(exc) else ""
        missing = [str(w.message) for w in said if _is_missing_formula(w.message)]
        return first_line(missing[0]) if missing else ""
    return ""


class _OnFloatInputs:
    """A judge for ops with floating inputs to differentiate."""

    def __init__(self, op):
        self.op = op

    def applies(self, template) -> bool:
        return bool(float_slots(template))


class AutogradRegistrationCheck(_OnFloatInputs):
    """PyTorch's registration check, then a backward. An op without a gradient
    formula passes unless ``require`` (the author opted in): it is *not
    differentiable*, which the report says once (opcheck.api)."""

    def __init__(self, op, *, require: bool = False, differentiable: bool = True):
        super().__init__(op)
        self.require = require
        self.differentiable = differentiable  # what the runner asked of the samples (missing_autograd)

    def __call__(self, case: Case):
        grads = float_slots(case.template)
        real = run_real(self.op, case, requires_grad=grads)
        if real is REJECTED:
            return REJECTED
        args, kwargs, out = real
        try:
            autograd_registration_check(self.op, args, kwargs)
        except AssertionError as exc:
            return Problem("autograd-not-at-autograd-key", first_line(exc, 600))
        except (RuntimeError, NotImplementedError):
            pass  # no input requires grad, or an unsupported device: nothing to check here
        outs = [o for o in differentiable_outputs(out) if o.requires_grad]
        if not outs:
            return None  # not differentiable (integer outputs, or detached on purpose)
        inputs = [a for a in _tensors(args, kwargs) if a.requires_grad]
        try:
            torch.autograd.grad(weighted_sum(outs), inputs, allow_unused=True)
        except RuntimeError as exc:
            if not _is_missing_formula(exc):
                return Problem("backward-raised", "backward raised: " + first_line(exc))
            if not self.require and not self.differentiable:
                return None  # not differentiable, and that was not required: the report's info says so
            if not self.require:  # a backward on the samples, missing on this input: that is a bug
                return Problem("backward-raised", "backward raised on this input, though it works on the "
                               "samples: " + first_line(exc))
            return Problem("missing-autograd", "autograd is required, but outputs require grad and backward fails: "
                           + first_line(exc) + "\nregister a backward with torch.library.register_autograd "
                           "(or stop requiring autograd for this op)")
        return None


# The most differentiable input elements the gradient check takes (two op calls each).
FULL_JACOBIAN_ELEMENTS = 512


def _tensors(args, kwargs):
    return [x for x in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(x, torch.Tensor)]


def _raised_in_gradcheck(exc: BaseException) -> bool:
    """Was ``exc`` raised by gradcheck's own code (not by the op, forward or backward, it called)?"""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.replace("\\", "/").endswith("/torch/autograd/gradcheck.py")


class GradientCheck(_OnFloatInputs):
    def __init__(self, op):
        super().__init__(op)
        self.notes: list[str] = []

    def __call__(self, case: Case):
        grads = float_slots(case.template)
        if run_real(self.op, case) is REJECTED:
            return REJECTED
        # float64 where the op takes it; else float32; never half precision, whose
        # finite differences are noise at any step size.
        to64 = {d: "float64" for d in ("float32", "float16", "bfloat16")}
        to32 = {d: "float32" for d in ("float16", "bfloat16")}
        precise = run_real(self.op, case, dtype_map=to64) is not REJECTED
        dtype_map = to64 if precise else to32
        if not precise and run_real(self.op, case, dtype_map=to32) is REJECTED:
            return REJECTED
        args, kwargs = case.build(requires_grad=grads, dtype_map=dtype_map)
        if any(t.dtype in (torch.float16, torch.bfloat16) for t in _tensors(args, kwargs) if t.requires_grad):
            return REJECTED
        flat = _tensors(args, kwargs)
        diff_inputs = [t for t in flat if t.requires_grad]
        if not diff_inputs:
            return None
        if sum(t.numel() for t in diff_inputs) > FULL_JACOBIAN_ELEMENTS:
            # gradcheck evaluates the op twice per input element: a recorded 1024x1024 sample ran
            # 420 s and was reported as a hang. Too large for finite differences: the sweep's
            # smaller variants of it are judged instead. (gradcheck's fast mode, one random
            # projection of the Jacobian, passed a backward 1.5 times too large here.)
            return REJECTED

        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor) and leaf.requires_grad]

        def fn(*tensors):
            new = list(leaves)
            for i, t in zip(slots, tensors):
                new[i] = t
            a, k = pytree.tree_unflatten(new, spec)
            return tuple(differentiable_outputs(self.op(*a, **k)))

        with torch.no_grad():
            outputs = fn(*diff_inputs)
        if not outputs:
            return None
        # Judged at the precision the op computes in, read from its outputs: an op that returns
        # float32 whatever it is given (quantization parameters, a dequantization's default
        # dtype) rounds its finite differences in float32, however precise its inputs.
        computed = min((t.dtype for t in outputs), key=lambda d: torch.finfo(d).bits)
        if computed in (torch.float16, torch.bfloat16):
            return REJECTED  # finite differences of a half-precision result are noise: nothing to judge
        precise = precise and computed == torch.float64
        tol = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3} if precise else {"eps": 1e-2, "atol": 5e-2, "rtol": 5e-2}
        try:
            torch.autograd.gradcheck(fn, tuple(diff_inputs), check_undefined_grad=False, check_batched_grad=False,
                                     nondet_tol=1e-12, **tol)
        except GradcheckError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            return Problem("wrong-gradient", "the registered backward disagrees with numerical gradients"
                           + ("" if precise else " (judged at float32 tolerances: the op computes in float32)")
                           + ":\n"
                           + "\n".join(lines[:12]))
        except RuntimeError as exc:
            if _raised_in_gradcheck(exc):  # gradcheck's own limits (an unsupported output, say): not the op
                not_checked(self.notes, case, f"torch's gradcheck failed on them ({first_line(exc, 200)})")
                return UNJUDGED
            # (An op with no formula at all never gets here: this check skips for it.)
            return Problem("backward-raised", "backward raised: " + first_line(exc))
        return None


def autograd_registration_judge(op, runner, template):
    """The autograd_registration check's judge (opcheck.checklist)."""
    return AutogradRegistrationCheck(op, require=runner.require_autograd, differentiable=runner.differentiable)


def gradient_judge(op, runner, template):
    """The gradient check's judge (opcheck.checklist)."""
    return GradientCheck(op)
