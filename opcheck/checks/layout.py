"""Layout consistency, a metamorphic check: op(x) must equal op(x.contiguous()).

A kernel that reads an input's memory as if it were contiguous (a raw data
pointer walked row-major, ``x.view(-1)`` replaced by pointer arithmetic, the
storage offset forgotten) gives wrong values on a transposed, sliced (storage
offset and stride) or expanded (stride 0) input, yet every other check passes
on contiguous samples. On each input with at least one such tensor, this
check runs the real kernel on it and on the same values made contiguous, and
compares the outputs and the inputs the op mutates with the one judging
function (``fuzz.script_runtime.compare``: dtype-aware tolerances, then an
fp64 reference), so a difference in rounding alone is no finding.

Its repro snippet (``opcheck.repro``) inlines ``run_laid_out`` and
``compare``: it runs and judges the failing input as the check did.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from symfuzz.fuzz.script_runtime import compare
from symfuzz.opcheck.checks.common import Problem
from symfuzz.opcheck.checks.compile import float64_inputs
from symfuzz.opcheck.checks.mutation import input_labels
from symfuzz.opcheck.contracts import Contracts
from symfuzz.opcheck.inputs import Case, Template
from symfuzz.opcheck.variants import REJECTED, UNJUDGED


class LayoutConsistencyCheck:
    not_applicable = "no tensor input the sweep may lay out non-contiguously"

    def __init__(self, op, template: Template):
        self.op = op
        self.mutable = sorted(n for n, s in enumerate(template.slots) if s.mutable)
        self.labels = input_labels(template)

    @staticmethod
    def applies(template: Template) -> bool:
        """Can the sweep lay some tensor out non-contiguously? (a free tensor of rank >= 1: sliced at least)"""
        fixed = (getattr(template, "contracts", None) or Contracts()).fixed
        return any(len(slot.shape) >= 1 and n not in fixed for n, slot in enumerate(template.slots))

    def __call__(self, case: Case):
        strided = self._strided(case)
        if not strided:
            return UNJUDGED  # contiguous already: nothing to compare with, and no pass either
        try:
            actual = run_laid_out(self.op, *case.build(), self.mutable)
            expected = run_laid_out(self.op, *case.build(), self.mutable, contiguous=True)
        except Exception:  # noqa: BLE001 - the real kernel refusing an input is not a finding
            return REJECTED

        def reference():
            try:
                return run_laid_out(self.op, *case.build(), self.mutable, contiguous=True, float64=True)
            except Exception:  # noqa: BLE001 - no fp64 kernel: judged with the tolerances alone
                return None

        diff = compare(expected, actual, reference)
        if diff is None:
            return None
        path = diff["path"].replace("out[0]", "outputs").replace("out[1]", "mutated inputs")
        detail = diff["detail"].replace("compiled", "laid out").replace("eager", "contiguous")
        return Problem(
            "layout-dependent",
            f"op(x) differs from op(x.contiguous()) for {', '.join(strided)}: at {path}: {detail}.\n"
            "Does the kernel read memory as if the input were contiguous (raw data pointer, strides or storage "
            "offset ignored)? Index with the tensor's strides and storage offset, or call .contiguous() on the "
            "input first",
        )

    def _strided(self, case: Case) -> list[str]:
        """The non-contiguous inputs of ``case``, described ("x0 transposed")."""
        if case.is_original:
            leaves = [case.template.leaves[i] for i in case.template.tensor_positions]
            return [f"{label} strides {list(t.stride())}" for label, t in zip(self.labels, leaves)
                    if not t.is_contiguous()]
        return [f"{label} {spec.layout}" for label, spec in zip(self.labels, case.tensor_inputs())
                if spec.layout != "contiguous"]


# The check's repro snippet inlines the function below (and what it uses): keep it torch-only.


def run_laid_out(op, args, kwargs, mutable, *, contiguous=False, float64=False):
    """(outputs, mutated inputs) of one call of ``op``; raises what ``op`` raises.

    ``contiguous``: on contiguous copies of the tensor inputs (same values);
    ``float64``: on fp64 copies of the floating ones (the reference's inputs).
    ``mutable``: positions, among the tensor inputs, of those the schema lets the op write to.
    """
    if contiguous:
        args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.contiguous(), (tuple(args), dict(kwargs)))
    if float64:
        args, kwargs = float64_inputs(args, kwargs)
    torch.manual_seed(0)  # an op that draws random numbers draws the same ones in every run
    with torch.no_grad():
        out = op(*args, **kwargs)
    tensors = [t for t in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(t, torch.Tensor)]
    return (out, [tensors[n] for n in mutable])


def layout_consistency_judge(op, runner, template):
    """The layout_consistency check's judge (opcheck.checklist)."""
    return LayoutConsistencyCheck(op, template)
