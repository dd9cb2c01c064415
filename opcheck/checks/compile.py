"""Compiled vs eager: AOTAutograd with dynamic shapes, and Inductor end to end.

``aot_dispatch_dynamic`` calls PyTorch's own check (the one
``torch.library.opcheck`` runs), with the floating inputs requiring grad so
the backward is traced too, on the sample and on odd sizes (under --quick: on
the sample as given, its own requires_grad, as torch.library.opcheck does).

``inductor_dynamic`` compiles ``op`` with Inductor and ``dynamic=True`` once,
then runs it on the sample and on swept sizes and layouts, comparing outputs,
inputs the op mutates, and gradients with eager. It judges with the judging
function every symfuzz script uses (``fuzz.script_runtime.compare``:
dtype-aware tolerances, then an fp64 reference), and its repro snippet
(``opcheck.repro``) inlines ``run_collecting``, ``float64_inputs`` and
``compare``: the snippet runs and judges the failing input exactly as the
check did, so the two cannot disagree.
"""

from __future__ import annotations

import contextlib

import torch
import torch._dynamo
import torch._dynamo.exc
import torch.utils._pytree as pytree
from torch._dynamo.utils import counters

from symfuzz.fuzz.script_runtime import compare
from symfuzz.opcheck.checklist import AOT_DISPATCH_DYNAMIC
from symfuzz.opcheck.checks.autograd import weighted_sum
from symfuzz.opcheck.checks.common import Problem, differentiable_outputs, first_line, float_slots, run_real
from symfuzz.opcheck.inputs import Case, copy_exactly
from symfuzz.opcheck.variants import REJECTED, UNJUDGED


class AotDispatchDynamicCheck:
    def __init__(self, op, *, grads: set):
        self.op, self.grads = op, grads  # the tensor inputs that require grad (their backward is traced too)

    def __call__(self, case: Case):
        # private torch API, looked up at use: a torch that moved it fails this check only
        from torch.testing._internal.optests.generate_tests import (
            safe_aot_autograd_check,
        )

        if run_real(self.op, case) is REJECTED:
            return REJECTED
        args, kwargs = case.build(requires_grad=self.grads)
        try:
            safe_aot_autograd_check(self.op, args, kwargs, dynamic=True)
        except Exception as exc:  # noqa: BLE001 - the check reports by raising
            lines = [line for line in str(exc).splitlines() if line.strip()]
            return Problem("aot-dynamic-failed", f"{type(exc).__name__}: " + "\n".join(lines[:8]))
        return None


# Inductor compiles an op may make across all of its inputs: one, the dynamic graph (with its
# backward), shared by every input within its guards. A cold compile costs seconds, and a
# size-1, layout or dtype specialization would cost as much again: an input that would need
# another compile is not judged by this check (the other checks judge it).
INDUCTOR_COMPILES = 1


def _compiles(shared: dict) -> int:
    """Graphs Inductor compiled for this op so far (Dynamo's own count, since shared_compiled)."""
    return counters["stats"]["unique_graphs"] - shared.get("graphs_before", 0)


@contextlib.contextmanager
def _dynamo_config(no_more_compiles: bool = False):
    patches = {"recompile_limit": 64, "accumulated_recompile_limit": 4096}
    if no_more_compiles:
        patches["error_on_recompile"] = True  # raises RecompileError instead: that input is not judged
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        # Hitting the limit would fall back to eager and make the check pass vacuously.
        patches["fail_on_recompile_limit_hit"] = True
    patches = {k: v for k, v in patches.items() if hasattr(torch._dynamo.config, k)}
    with torch._dynamo.config.patch(**patches):
        yield


def shared_compiled(op, shared: dict):
    """The op compiled with Inductor and ``dynamic=True``, made once per op and kept in
    ``shared`` (the runner's, for every judge of the op: each sample, with and without
    gradients). Dynamo's guards decide per input whether a compiled graph is reused
    or a new one is compiled, so an input within the guards costs one call, not a compile."""
    if "inductor" not in shared:
        torch._dynamo.reset()  # another op's entries must not count against this one's limit
        shared["graphs_before"] = counters["stats"]["unique_graphs"]

        def call_op(*args, **kwargs):
            return op(*args, **kwargs)

        shared["inductor"] = torch.compile(call_op, backend="inductor", dynamic=True, fullgraph=True)
    return shared["inductor"]


class InductorDynamicCheck:
    def __init__(self, op, *, with_grad: bool, mutable: set, shared: dict | None = None):
        self.op, self.with_grad, self.mutable = op, with_grad, mutable
        # None: a compile of its own (the runner's legacy mode: the sweep before it stopped on information).
        self.shared = shared
        self._compiled = None
        self.notes: list[str] = []  # the runner adds them to the check's result

    def compiled(self):
        if self._compiled is None:
            self._compiled = shared_compiled(self.op, {} if self.shared is None else self.shared)
        return self._compiled

    def __call__(self, case: Case):
        if run_real(self.op, case) is REJECTED:
            return REJECTED
        grads = float_slots(case.template) if self.with_grad else set()
        eager = self.run(self.op, case, grads)
        if isinstance(eager, BaseException):
            return REJECTED
        fn = self.compiled()
        shared = {} if self.shared is None else self.shared
        with _dynamo_config(no_more_compiles=self.shared is not None and _compiles(shared) >= INDUCTOR_COMPILES):
            compiled = self.run(fn, case, grads)
        if isinstance(compiled, torch._dynamo.exc.RecompileError):
            note = ("inputs that would have needed another Inductor compile were not judged by this check (one "
                    "compile per op: each costs seconds; the other checks judge them)")
            if note not in self.notes:
                self.notes.append(note)
            return UNJUDGED
        if isinstance(compiled, BaseException):
            return Problem("compile-error", "torch.compile(backend='inductor', dynamic=True) raised where eager "
                           "succeeded: " + first_line(compiled, 500))

        def reference():
            ref = self.run(self.op, case, grads, float64=True)
            return None if isinstance(ref, BaseException) else ref

        diff = compare(eager, compiled, reference)
        if diff is None:
            return None
        path = diff["path"].replace("out[0]", "outputs").replace("out[1]", "mutated inputs").replace("out[2]", "grads")
        kind = "grad-mismatch" if diff["path"].startswith("out[2]") else diff["symptom"]
        return Problem(kind, f"compiled vs eager at {path}: {diff['detail']}")

    def run(self, fn, case: Case, grads: set, float64: bool = False):
        """``run_collecting`` on fresh inputs (``float64``: the reference's), or the exception raised."""
        args, kwargs = case.build(requires_grad=grads)
        try:
            if float64:
                args, kwargs = float64_inputs(args, kwargs)
            return run_collecting(fn, args, kwargs, self.mutable)
        except Exception as exc:  # noqa: BLE001 - judged by the caller: eager failing rejects, compiled failing is a finding
            return exc


# The check's repro snippet inlines the two functions below (and what they use):
# keep them torch-only.


def run_collecting(fn, args, kwargs, mutable):
    """(outputs, mutated inputs, input grads) of one call of ``fn``; raises what ``fn`` raises.

    ``mutable``: positions, among the tensor inputs, of those the schema lets
    the op write to. Grads are of a weighted sum of the outputs that require
    grad, for the inputs that do (zeros for an input the outputs do not use).
    """
    # The op is opaque to Inductor, so an op that draws random numbers draws the
    # same ones in eager, compiled and reference runs when each starts here.
    torch.manual_seed(0)
    out = fn(*args, **kwargs)
    tensors = [t for t in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(t, torch.Tensor)]
    mutated = [t.detach() for n, t in enumerate(tensors) if n in mutable]
    grad_out = ()
    diff = [o for o in differentiable_outputs(out) if o.requires_grad]
    inputs = [t for t in tensors if t.requires_grad]
    if diff and inputs:
        grad_out = torch.autograd.grad(weighted_sum(diff), inputs, allow_unused=True)
        grad_out = tuple(g if g is not None else torch.zeros_like(i) for g, i in zip(grad_out, inputs))
    out = pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), out)
    return (out, mutated, list(grad_out))


def float64_inputs(args, kwargs):
    """The fp64 reference's inputs: float32, float16 and bfloat16 tensors copied
    to float64 with the same sizes, strides and requires_grad; others as they are."""

    def widen(t):
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            return t
        wide = copy_exactly(t, torch.float64)
        return wide.requires_grad_() if t.requires_grad else wide

    return pytree.tree_map_only(torch.Tensor, widen, (args, kwargs))


def aot_dispatch_dynamic_judge(op, runner, template):
    """The aot_dispatch_dynamic check's judge (opcheck.checklist)."""
    return AotDispatchDynamicCheck(op, grads=runner.input_grads(AOT_DISPATCH_DYNAMIC, template))


def inductor_dynamic_judge(op, runner, template):
    """The inductor_dynamic check's judge (opcheck.checklist)."""
    return InductorDynamicCheck(op, with_grad=runner.grad_ok,
                                mutable={n for n, s in enumerate(template.slots) if s.mutable},
                                shared=None if runner.legacy else runner.shared)
