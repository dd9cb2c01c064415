"""Compiled vs eager: AOTAutograd with dynamic shapes, and Inductor end to end.

``aot_dispatch_dynamic`` calls PyTorch's own check (the one
``torch.library.opcheck`` runs), with the floating inputs requiring grad so
the backward is traced too, on the sample and on odd sizes.

``inductor_dynamic`` compiles ``op`` with Inductor and ``dynamic=True`` once,
then runs it on the sample and on swept sizes and layouts, comparing outputs,
inputs the op mutates, and gradients with eager. Comparison uses symfuzz's
dtype-aware tolerances with an fp64 reference (``oracles.standalone.compare``).
"""

from __future__ import annotations

import contextlib

import torch
import torch.utils._pytree as pytree

from symfuzz.opcheck.checks.autograd import weighted_sum
from symfuzz.opcheck.checks.common import Problem, differentiable_outputs, first_line, float_slots, run_real
from symfuzz.opcheck.inputs import Case
from symfuzz.opcheck.variants import REJECTED


class AotDispatchDynamicCheck:
    def __init__(self, op, *, with_grad: bool):
        self.op, self.with_grad = op, with_grad

    def __call__(self, case: Case):
        from torch.testing._internal.optests.generate_tests import (
            safe_aot_autograd_check,
        )

        if run_real(self.op, case) is REJECTED:
            return REJECTED
        grads = float_slots(case.template) if self.with_grad else set()
        args, kwargs = case.build(requires_grad=grads)
        try:
            safe_aot_autograd_check(self.op, args, kwargs, dynamic=True)
        except Exception as exc:  # noqa: BLE001 - the check reports by raising
            lines = [line for line in str(exc).splitlines() if line.strip()]
            return Problem("aot-dynamic-failed", f"{type(exc).__name__}: " + "\n".join(lines[:8]))
        return None


@contextlib.contextmanager
def _dynamo_config():
    import torch._dynamo

    patches = {"recompile_limit": 64, "accumulated_recompile_limit": 4096}
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        # Hitting the limit would fall back to eager and make the check pass vacuously.
        patches["fail_on_recompile_limit_hit"] = True
    patches = {k: v for k, v in patches.items() if hasattr(torch._dynamo.config, k)}
    with torch._dynamo.config.patch(**patches):
        yield


class InductorDynamicCheck:
    def __init__(self, op, *, with_grad: bool, mutable: set):
        self.op, self.with_grad, self.mutable = op, with_grad, mutable
        self._compiled = None

    def compiled(self):
        if self._compiled is None:
            import torch._dynamo

            torch._dynamo.reset()  # another op's entries must not count against this one's limit
            op = self.op

            def call_op(*args, **kwargs):
                return op(*args, **kwargs)

            self._compiled = torch.compile(call_op, backend="inductor", dynamic=True, fullgraph=True)
        return self._compiled

    def __call__(self, case: Case):
        from symfuzz.fuzz.script_runtime import compare

        if run_real(self.op, case) is REJECTED:
            return REJECTED
        grads = float_slots(case.template) if self.with_grad else set()
        eager = self.run(self.op, case, grads)
        if isinstance(eager, BaseException):
            return REJECTED
        with _dynamo_config():
            compiled = self.run(self.compiled(), case, grads)
        if isinstance(compiled, BaseException):
            return Problem("compile-error", "torch.compile(backend='inductor', dynamic=True) raised where eager "
                           "succeeded: " + first_line(compiled, 500))

        def reference():
            to64 = {d: "float64" for d in ("float32", "float16", "bfloat16")}
            if run_real(self.op, case, dtype_map=to64) is REJECTED:
                return None
            ref = self.run(self.op, case, grads, dtype_map=to64)
            return None if isinstance(ref, BaseException) else ref

        diff = compare(eager, compiled, reference)
        if diff is None:
            return None
        path = diff["path"].replace("out[0]", "outputs").replace("out[1]", "mutated inputs").replace("out[2]", "grads")
        kind = "grad-mismatch" if diff["path"].startswith("out[2]") else diff["symptom"]
        return Problem(kind, f"compiled vs eager at {path}: {diff['detail']}")

    def run(self, fn, case: Case, grads: set, dtype_map=None):
        """(outputs, mutated inputs, input grads), or the exception raised."""
        args, kwargs = case.build(requires_grad=grads, dtype_map=dtype_map)
        # The op is opaque to Inductor, so an op that draws random numbers draws the
        # same ones in eager, compiled and reference runs when each starts here.
        torch.manual_seed(0)
        try:
            out = fn(*args, **kwargs)
            tensors = [t for t in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(t, torch.Tensor)]
            mutated = [t.detach() for n, t in enumerate(tensors) if n in self.mutable]
            grad_out = ()
            diff = [o for o in differentiable_outputs(out) if o.requires_grad]
            inputs = [t for t in tensors if t.requires_grad]
            if diff and inputs:
                grad_out = torch.autograd.grad(weighted_sum(diff), inputs, allow_unused=True)
                grad_out = tuple(g if g is not None else torch.zeros_like(i) for g, i in zip(grad_out, inputs))
            out = pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), out)
            return (out, mutated, list(grad_out))
        except Exception as exc:  # noqa: BLE001 - judged by the caller: eager failing rejects, compiled failing is a finding
            return exc


def aot_dispatch_dynamic_judge(op, runner, template):
    """The aot_dispatch_dynamic check's judge (opcheck.checklist)."""
    return AotDispatchDynamicCheck(op, with_grad=runner.grad_ok)


def inductor_dynamic_judge(op, runner, template):
    """The inductor_dynamic check's judge (opcheck.checklist)."""
    return InductorDynamicCheck(op, with_grad=runner.grad_ok,
                                mutable={n for n, s in enumerate(template.slots) if s.mutable})
