"""``check(op, samples)``: run every check on an op, sweeping shapes from its samples."""

from __future__ import annotations

import time

import torch

from symfuzz.opcheck.checks.autograd import AutogradRegistrationCheck, GradientCheck
from symfuzz.opcheck.checks.common import (OpCheckUsageError, Problem, first_line, float_slots, make_template, op_name, resolve_op)
from symfuzz.opcheck.checks.compile import AotDispatchDynamicCheck, InductorDynamicCheck
from symfuzz.opcheck.checks.fake import DataDependence, FakeTensorCheck, SymbolicFakeCheck
from symfuzz.opcheck.checks.schema import SchemaCheck
from symfuzz.opcheck.contracts import assign as assign_contracts
from symfuzz.opcheck.inputs import Template
from symfuzz.opcheck.report import CheckResult, Failure, Report
from symfuzz.opcheck.repro import render
from symfuzz.opcheck.store import CHECKS
from symfuzz.opcheck.variants import REJECTED, Sweep, Variant, search, shrink

DEFAULT_BUDGET = 120.0  # seconds per op, shared by its checks

# Share of the budget per check: Inductor compiles, the fake checks search widely.
_WEIGHTS = {"schema": 1, "autograd_registration": 0.5, "faketensor": 2, "symbolic_fake": 2,
            "gradient": 1, "aot_dispatch_dynamic": 1.5, "inductor_dynamic": 4}

# A check is skipped when one it builds on failed: it would fail for the same
# reason (AOT and Inductor trace through the fake kernel; gradients need a backward).
PREREQUISITES = {
    "gradient": ("autograd_registration", "schema"),  # a hidden mutation breaks finite differences
    "aot_dispatch_dynamic": ("faketensor", "symbolic_fake", "schema"),
    "inductor_dynamic": ("faketensor", "symbolic_fake", "schema"),
}

# Hypothesis examples per check after the edge variants (0: edges only).
_EXAMPLES = {"schema": 15, "faketensor": 40, "symbolic_fake": 25}


def check(op, samples, *, checks=None, sweep: bool = True, budget: float | None = None, seed: int = 0,
          progress=None, on_input=None, fixed=None) -> Report:
    """Check a custom op on its samples and on shapes swept from them.

    ``op``: an OpOverload, OpOverloadPacket, CustomOpDef or "ns::name[.overload]".
    ``samples``: one ``args`` tuple, one ``(args, kwargs)`` pair, or a list of
    either; the op must accept them. ``checks``: names from ``CHECKS`` (default
    all). ``sweep=False`` checks only the samples, like torch.library.opcheck.
    ``budget``: seconds for the whole op (default ``DEFAULT_BUDGET``).
    ``progress(check_name, result)`` is called as each check finishes;
    ``on_input(check_name, case)`` before each input is judged (the runner
    uses it to say which input a crashing kernel was given).
    ``fixed``: names of tensor arguments the sweep must not resize (a lookup
    table, a codebook); None infers them from the samples
    (``opcheck.contracts``), ``()`` holds nothing fixed.
    """
    start = time.monotonic()
    op = resolve_op(op)
    names = _check_names(checks)
    pairs = _normalize_samples(samples)
    report = Report(op=op_name(op), samples=len(pairs))
    templates, report.error, report.contracts = sample_templates(op, pairs, fixed)
    if not templates:
        report.seconds = time.monotonic() - start
        return report

    total = DEFAULT_BUDGET if budget is None else float(budget)
    weight = sum(_WEIGHTS[n] for n in names)
    runner = _Runner(op, templates, sweep=sweep, seed=seed, on_input=on_input)
    for name in names:
        share = total * _WEIGHTS[name] / weight
        failed = [p for p in PREREQUISITES.get(name, ()) if p in report.results and report.results[p].status == "failed"]
        if failed:
            result = CheckResult(name, "skipped", reason=f"{', '.join(failed)} failed; this check would fail for the same reason")
        else:
            try:
                result = runner.run(name, deadline=time.monotonic() + share)
            except Exception as exc:  # noqa: BLE001 - a checker bug must not lose the other checks, nor blame the op
                result = CheckResult(name, "skipped", reason=f"the checker itself raised {first_line(exc)}")
        report.results[name] = result
        if progress is not None:
            progress(name, result)
    report.seconds = time.monotonic() - start
    return report


def sample_templates(op, pairs, fixed=None):
    """(templates of the samples the real kernel accepts, why one was refused or "",
    contract lines): the inputs every check and the crash probes sweep from.

    Each template knows its sample's index, the sizes of the kernel's outputs on
    it (a tie the contracts read) and its contracts (``opcheck.contracts``).
    """
    import torch.utils._pytree as pytree

    templates, error = [], ""
    for n, (args, kwargs) in enumerate(pairs):
        template = make_template(op, args, kwargs)
        template.index = n  # which sample a judged input comes from (the runner reports it)
        try:
            sample_args, sample_kwargs = template.original().build()
            with torch.no_grad():
                out = op(*sample_args, **sample_kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's own sample failing is their error, not a finding
            error = f"the real kernel raised on sample {n}: {first_line(exc)}"
            continue
        template.output_sizes = {d for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) for d in t.shape}
        templates.append(template)
    if not templates:
        return [], error, []
    try:
        lines = assign_contracts(templates, fixed, schema=op._schema)
    except ValueError as exc:
        raise OpCheckUsageError(f"{op_name(op)}: {exc}") from None
    return templates, "", lines


def _check_names(checks):
    if checks is None:
        return list(CHECKS)
    if isinstance(checks, str):
        checks = [c for c in checks.split(",") if c.strip()]
    names = [c.strip().removeprefix("test_") for c in checks]
    unknown = [c for c in names if c not in CHECKS]
    if unknown:
        raise OpCheckUsageError(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    return [c for c in CHECKS if c in names]


def _normalize_samples(samples):
    """[(args tuple, kwargs dict)] from the forms check() accepts."""
    if isinstance(samples, tuple) and len(samples) == 2 and isinstance(samples[1], dict) and isinstance(samples[0], (tuple, list)):
        return [(tuple(samples[0]), dict(samples[1]))]
    if isinstance(samples, tuple):
        return [(samples, {})]
    if isinstance(samples, list):
        out = []
        for s in samples:
            if hasattr(s, "args") and hasattr(s, "kwargs"):
                out.append((tuple(s.args), dict(s.kwargs)))
            else:
                out.extend(_normalize_samples(s))
        return out
    raise OpCheckUsageError("samples must be an args tuple, an (args, kwargs) pair, or a list of them")


class _Runner:
    def __init__(self, op, templates: list[Template], *, sweep: bool, seed: int, on_input=None):
        self.op, self.templates, self.sweep, self.seed = op, templates, sweep, seed
        self.on_input = on_input
        self.dependence = DataDependence(op)
        self.grad_ok = True  # set False when autograd_registration fails: later checks then skip gradients
        self.failed: set[str] = set()

    def judge_for(self, name, template):
        op = self.op
        if name == "schema":
            return SchemaCheck(op)
        if name == "autograd_registration":
            return AutogradRegistrationCheck(op)
        if name == "faketensor":
            return FakeTensorCheck(op, self.dependence)
        if name == "symbolic_fake":
            return SymbolicFakeCheck(op, self.dependence, compare_sizes="faketensor" not in self.failed)
        if name == "gradient":
            return GradientCheck(op)
        if name == "aot_dispatch_dynamic":
            return AotDispatchDynamicCheck(op, with_grad=self.grad_ok)
        if name == "inductor_dynamic":
            return InductorDynamicCheck(op, with_grad=self.grad_ok,
                                        mutable={n for n, s in enumerate(template.slots) if s.mutable})
        raise AssertionError(name)

    def run(self, name, *, deadline) -> CheckResult:
        start = time.monotonic()
        result = CheckResult(name, "passed")
        applicable = False
        for template in self.templates:
            judge = self.judge_for(name, template)
            if hasattr(judge, "applies") and not judge.applies(template):
                continue
            if self.on_input is not None:
                judge = _Announced(judge, name, self.on_input)
            applicable = True
            found = self._search(name, judge, template, result, deadline)
            result.notes.extend(n for n in getattr(judge, "notes", ()) if n not in result.notes)
            if found is not None:
                case, problem, shrunk = found
                grads = float_slots(template) if (name in ("autograd_registration", "gradient") or self.grad_ok) else set()
                result.status = "failed"
                result.failures.append(Failure(
                    check=name, kind=problem.kind, message=problem.message, input=case.describe(),
                    repro=render(name, problem.kind, self.op, case, grads=grads), shrunk=shrunk,
                    case=case.to_json(),
                ))
                break
        if not applicable:
            result.status, result.reason = "skipped", "no floating-point input to differentiate"
        elif result.status == "passed" and result.inputs_tried == 0:
            # Not a pass: nothing was judged (every input refused, or none judgeable).
            result.status = "skipped"
            result.reason = f"no input could be judged ({result.inputs_rejected} refused)"
        if result.status == "failed":
            self.failed.add(name)
            if name == "autograd_registration":
                self.grad_ok = False
        result.seconds = time.monotonic() - start
        return result

    def _search(self, name, judge, template, result, deadline):
        sw = Sweep(template, seed=self.seed)
        outcome = judge(template.original())
        if outcome is REJECTED:
            result.inputs_rejected += 1
        else:
            result.inputs_tried += 1
        if isinstance(outcome, Problem):
            # Prefer a generated input (rebuildable, shrinkable) that fails the same way.
            base = Variant(sw.original_sizes(), seed=1)
            again = judge(sw.case(base))
            if isinstance(again, Problem) and again.kind == outcome.kind:
                return shrink(judge, sw, base, again, deadline=deadline)
            return template.original(), outcome, False
        if not self.sweep:
            return None
        variants, examples = self._plan(name, sw)
        found = search(judge, sw, deadline=deadline, variants=variants, examples=examples,
                       max_size=6 if name == "gradient" else None)
        result.inputs_tried += found.tried
        result.inputs_rejected += found.rejected
        if found.out_of_time and found.failure is None:
            result.notes.append(f"the time budget ran out after {found.tried + found.rejected} input(s); "
                                "raise --budget to sweep further")
        if found.failure is None:
            return None
        return found.case, found.failure, found.shrunk

    def _plan(self, name, sw: Sweep):
        """(edge variants or None for all, Hypothesis examples) per check."""
        base = sw.original_sizes()
        odd = tuple(v + 1 if v % 2 == 0 else v for v in base)
        small = tuple(2 + i for i in range(len(base)))
        transposed = [tuple("transposed" if i == n else "" for i in range(len(sw.template.slots)))
                      for n in range(len(sw.template.slots))]
        if name in ("schema", "faketensor", "symbolic_fake"):
            return None, _EXAMPLES[name]
        if name == "autograd_registration":
            return [Variant(base, seed=1)], 0
        if name == "gradient":
            sizes = [tuple(min(v, 3) for v in base), small, tuple(1 for _ in base)]
            out = [Variant(s, seed=1) for s in sizes] + [Variant(small, layouts=t, seed=2) for t in transposed]
            return out, 0
        if name == "aot_dispatch_dynamic":
            return [Variant(odd, seed=1)], 0
        if name == "inductor_dynamic":
            out = [Variant(odd, seed=1), Variant(tuple(2 * v + 1 for v in base), seed=2)]
            out += [Variant(odd, layouts=t, seed=3) for t in transposed]
            if base:
                out.append(Variant((1,) + base[1:], seed=4))
            return out, 0
        raise AssertionError(name)


class _Announced:
    """A judge that reports each input before judging it."""

    def __init__(self, judge, name, on_input):
        self.judge, self.name, self.on_input = judge, name, on_input
        self.notes = getattr(judge, "notes", [])

    def __call__(self, case):
        self.on_input(self.name, case)
        return self.judge(case)


__all__ = ["CHECKS", "DEFAULT_BUDGET", "Report", "check"]
