"""Which inputs of a drawn program require grad: the gradient oracle's part of generation.

A program that takes some floating inputs with ``requires_grad`` is judged
on its backward pass too: every call's record then holds the gradients of a
seeded loss with respect to those inputs (``script_runtime.run_call``), and
compiled (AOTAutograd's backward graph) must match eager there as it must on
the outputs. The choice is the same in every call and is drawn last, after
the program and its calls (``draw_gradients``); it shrinks toward "no
gradients".

A gradient check is kept only where it can only fail for a bug:

* no op of the program has a backward that is ``undefined`` or
  ``nondeterministic`` (``OpSpec.backward``);
* an input the program writes in place is never chosen (autograd forbids
  writing a leaf that requires grad);
* in every call, eager computes the gradients without raising (in forward
  or backward) and all are finite, and so does the fp64 reference that
  judges rounding; in some call, some gradient is not all zeros (the loss
  reaches an input through something differentiable);
* where the program has an op whose gradient jumps at ties or kinks
  (``backward="ties"``: max, sort, pooling, relu, abs, clamp, floor ...),
  or free-form size-level expressions, the gradients must not jump when the
  floating inputs are nudged (``NUDGE``, far above the rounding differences
  between eager and compiled code): then no value sits close enough to a tie
  or kink for compiled rounding to send the gradient elsewhere. Exact ties
  (duplicated values) survive the nudge; eager and Inductor break those the
  same way.

Otherwise the calls keep no gradients at all.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Callable, Optional

import hypothesis.strategies as st
import torch

from symfuzz.fuzz.case import Call
from symfuzz.fuzz.choices import Draw
from symfuzz.fuzz.ir import PRELUDE, BranchNode, CondNode, ExprNode, Program
from symfuzz.fuzz.script_runtime import (DTYPES, apply_layout, base_shape, make_args, make_input, reference_output,
                                         run_call)
from symfuzz.fuzz.specs import get_spec
from symfuzz.fuzz.specs.base import BACKWARD_CLASSES, DTYPE_KIND, FLOAT

# Share of programs with a floating input that get gradients (before validity drops some).
GRADIENT_SHARE = 0.4
# Backward classes that rule gradients out for the whole program.
EXCLUDED = ("undefined", "nondeterministic")

# The stability check. Floating inputs are scaled by (1 + NUDGE * n), n standard normal
# (seeded), per dtype: far above the rounding by which compiled code differs from eager
# in float32/float64, and a couple of ulps in float16/bfloat16. A gradient element jumps
# when it moves by more than JUMP times (its size + the tensor's root mean square).
NUDGE = {"float64": 1e-4, "float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}
JUMP = {"float64": 0.05, "float32": 0.05, "float16": 0.1, "bfloat16": 0.25}
NUDGE_SEED = 104_729


def backward_class(program: Program) -> str:
    """The worst ``OpSpec.backward`` among the program's ops ("ok" when none is
    worse); free-form expressions (``x.abs()``, ``torch.maximum`` in a branch
    arm) count as "ties"."""
    worst = 0
    for name in program.ops():
        worst = max(worst, BACKWARD_CLASSES.index(get_spec(name).backward))
    if any(isinstance(node, (ExprNode, CondNode, BranchNode)) for node in program.body):
        worst = max(worst, BACKWARD_CLASSES.index("ties"))
    return BACKWARD_CLASSES[worst]


def floating_inputs(program: Program) -> list[int]:
    """Indices of the program's floating tensor inputs: those that may require grad."""
    return [i for i, inp in enumerate(program.inputs) if inp.is_tensor and DTYPE_KIND.get(inp.dtype) == FLOAT]


def draw_gradients(draw: Draw, program: Program, calls: tuple[Call, ...], share: float = GRADIENT_SHARE) -> tuple[Call, ...]:
    """``calls`` with some floating inputs requiring grad (the same in every
    call), or ``calls`` unchanged: for about ``share`` of the programs that can
    have gradients, when the chosen gradients are valid (see the module)."""
    candidates = floating_inputs(program)
    if share <= 0 or not candidates or not calls or backward_class(program) in EXCLUDED:
        return calls
    # Low tickets mean no gradients, so shrinking removes them.
    if draw(st.integers(0, 99)) < 100 - round(share * 100):
        return calls
    chosen = [i for i in candidates if draw(st.booleans())] or [candidates[-1]]
    fn = load(program)
    written = written_inputs(fn, calls)
    chosen = [i for i in chosen if i not in written]
    if not chosen:
        return calls
    with_grads = requiring_grad(calls, chosen)
    return with_grads if gradients_hold(fn, program, with_grads) else calls


def requiring_grad(calls: tuple[Call, ...], indices) -> tuple[Call, ...]:
    """``calls`` with exactly the arguments at ``indices`` requiring grad."""
    wanted = set(indices)
    return tuple(replace(c, args=tuple(replace(a, requires_grad=i in wanted) for i, a in enumerate(c.args)))
                 for c in calls)


def load(program: Program) -> Callable:
    namespace: dict = {}
    exec(compile(PRELUDE + program.render(), "<symfuzz program>", "exec"), namespace)
    return namespace["fn"]


def written_inputs(fn: Callable, calls: tuple[Call, ...]) -> set[int]:
    """Inputs the program writes in place (directly or through a view) in some call."""
    written: set[int] = set()
    for call in calls:
        args = make_args(call.to_json())
        before = [a._version if isinstance(a, torch.Tensor) else None for a in args]
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(*args)
        except Exception:  # noqa: BLE001 - the builder ran it; anything else: keep away from it
            return set(range(len(args)))
        written |= {i for i, (a, v) in enumerate(zip(args, before)) if v is not None and a._version != v}
    return written


def gradients_hold(fn: Callable, program: Program, calls: tuple[Call, ...]) -> bool:
    """Are the gradients of every call valid (computed by eager and by the fp64
    reference, all finite, some not all zeros) and, where the program has ops
    whose gradient jumps at ties or kinks, stable under a nudge of the inputs?"""
    check_stability = backward_class(program) != "ok"
    reached = False
    for call in calls:
        data = call.to_json()
        grads = _gradients(fn, make_args(data))
        if grads is None or not _finite(grads):
            return False
        reached = reached or any(g is not None and bool(g.ne(0).any()) for g in grads)
        reference = _quietly(lambda: reference_output(fn, data))
        if not reference or len(reference) < 3 or not _finite(reference[2]):
            return False
        if check_stability and not _stable(grads, _gradients(fn, nudged_args(data))):
            return False
    return reached


def _quietly(thunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return thunk()
        except Exception:  # noqa: BLE001 - a reference that cannot run is a reason to drop, not an error
            return None


def _gradients(fn: Callable, args) -> Optional[tuple]:
    """The gradients part of ``run_call``'s record; None when the call raised."""
    record = _quietly(lambda: run_call(fn, args))
    if not record or "out" not in record:
        return None
    return record["out"][2]


def _finite(grads) -> bool:
    return all(g is None or bool(torch.isfinite(g).all()) for g in grads)


def nudged_args(call: dict) -> list:
    """``make_args(call)`` with every floating tensor scaled by (1 + NUDGE * n),
    n seeded standard normal: the same shapes, layouts and requires_grad."""
    args = make_args(call)
    for i, (spec, arg) in enumerate(zip(call["args"], args)):
        if not isinstance(arg, torch.Tensor) or not arg.is_floating_point():
            continue
        dtype = DTYPES[spec["dtype"]]
        layout = spec.get("layout")
        storage = make_input(base_shape(list(spec["shape"]), layout), dtype, spec["seed"])
        noise = make_input(tuple(storage.shape), torch.float64, NUDGE_SEED + i)
        storage = (storage.double() * (1 + NUDGE[spec["dtype"]] * noise)).to(dtype)
        tensor = apply_layout(storage, list(spec["shape"]), layout)
        args[i] = tensor.requires_grad_(True) if spec.get("requires_grad") else tensor
    return args


def _stable(grads, nudged) -> bool:
    """Do the nudged gradients stay close (``JUMP``) to the original ones?"""
    if nudged is None or len(nudged) != len(grads):
        return False
    for g, h in zip(grads, nudged):
        if (g is None) != (h is None):
            return False
        if g is None:
            continue
        if g.shape != h.shape or not bool(torch.isfinite(h).all()):
            return False
        if g.numel() == 0:
            continue
        g64, h64 = g.double(), h.double()
        scale = math.sqrt(float(g64.pow(2).mean()))
        tolerance = JUMP[str(g.dtype).removeprefix("torch.")]
        if bool(((g64 - h64).abs() > tolerance * (g64.abs() + scale) + 1e-12).any()):
            return False
    return True
