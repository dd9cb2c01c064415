"""Running: one call of a function, its outputs and final input states snapshotted, the
gradients of a seeded loss, exceptions described and placed in a stage.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import time
import traceback

import torch

from symfuzz.fuzz.runtime.comparing import Float64Everywhere, flatten, to_reference_args
from symfuzz.fuzz.runtime.inputs import make_input


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


COTANGENT_SEED = 7919  # cotangent i: standard normal, of its output's shape and dtype, seeded COTANGENT_SEED + i


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
    if "\nfrom user code:\n" in text:  # Dynamo's note on an error raised while it traced the code
        return "dynamo"
    if "guard" in head.lower()[:300]:
        return "guard"
    return "runtime"


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
