"""``check(op, samples)``: run every check on an op, sweeping shapes from its samples."""

from __future__ import annotations

import contextlib
import math
import re
import signal
import threading
import time
from dataclasses import replace

import torch
import torch.utils._pytree as pytree

from symfuzz.opcheck.checks.autograd import FULL_JACOBIAN_ELEMENTS
from symfuzz.opcheck.arguments import coupled_optionals, derived_samples, describe_coupled
from symfuzz.opcheck.checklist import (
    ALL_GRADS,
    AUTOGRAD_REGISTRATION,
    BY_NAME,
    GRADIENT,
    CHECKS,
    GRADS_IF_REGISTERED,
    CheckSpec,
    check_names,
)
from symfuzz.opcheck.checks.autograd import missing_autograd
from symfuzz.opcheck.checks.common import (
    OpCheckUsageError,
    Problem,
    first_line,
    float_slots,
    make_template,
    op_name,
    resolve_op,
)
from symfuzz.opcheck.checks.fake import DataDependence
from symfuzz.opcheck.contracts import assign as assign_contracts
from symfuzz.opcheck.inputs import Template
from symfuzz.opcheck.report import CheckResult, Failure, Report, internal_error
from symfuzz.opcheck.repro import render
from symfuzz.opcheck.variants import REJECTED, UNJUDGED, Novelty, Sweep, Variant, axis_of, search, shrink

DEFAULT_BUDGET = 120.0  # seconds per op, shared by its checks (each takes its weight's share: opcheck.checklist)
# Random variants in a row that bring no new information (variants.Novelty) before a
# check stops drawing them. Small: the edge variants already cover each axis alone.
PATIENCE = 3


def check(op, samples, *, checks=None, sweep: bool = True, budget: float | None = None, seed: int = 0,
          progress=None, on_input=None, fixed=None, require_autograd: bool = False, quick: bool = False,
          _legacy: bool = False) -> Report:
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
    ``require_autograd``: an op with no gradient formula fails
    autograd_registration. By default it is *not differentiable*: an ``info``
    line of the report, the checks about gradients skip themselves with that
    reason, and the others run with nothing requiring grad.
    ``quick``: each check on its edge variants only (no random ones), AOT
    dispatch on the samples only, and no Inductor compile (``CheckSpec.quick``):
    nearer torch.library.opcheck's time, catching what the edges show.
    ``_legacy``: the sweep as it was before it stopped on information (no early
    stop, no compile shared between the inputs of several samples); kept so that
    benchmarks/opcheck.py measures the old method in the same run. Not for users.
    """
    start = time.monotonic()
    op = resolve_op(op)
    specs = [BY_NAME[name] for name in _check_names(checks)]
    pairs = _normalize_samples(samples)
    report = Report(op=op_name(op), samples=len(pairs))
    templates, report.error, report.contracts = sample_templates(op, pairs, fixed)
    if not templates:
        report.seconds = time.monotonic() - start
        return report

    left_out = sum(not t.worth_checking for t in templates)
    templates = [t for t in templates if t.worth_checking]
    if left_out:
        report.info.append(f"{left_out} recorded call(s) over {LARGE_SAMPLE:,} elements were not checked at their "
                           "own size: a smaller recorded call of the same arguments is, and is swept (all of them "
                           "counted for the contracts)")
    total = DEFAULT_BUDGET if budget is None else float(budget)
    weight = sum(spec.weight for spec in specs)
    runner = _Runner(op, templates, sweep=sweep, seed=seed, on_input=on_input, require_autograd=require_autograd,
                     derived=derived_templates(op, templates, fixed) if sweep else [], quick=quick and not _legacy,
                     legacy=_legacy)
    if not runner.differentiable and not require_autograd:
        report.info.append("not differentiable: it has no autograd formula (no register_autograd), so "
                           "gradients are not checked: the gradient check skips, the others run with nothing "
                           "requiring grad. If it is meant to be trained through, make that a failure: "
                           "require_autograd=True, --require-autograd (pytest: --opcheck-require-autograd) or "
                           "the store's require_autograd setting")
    op_deadline = start + total
    left_weight = weight
    with _hard_limit(op_deadline - time.monotonic()) as limit:
        for spec in specs:
            name = spec.name
            # Each check gets its weight's share of what is left: time a quick check did not use goes to the rest.
            share = max(op_deadline - time.monotonic(), 0.0) * spec.weight / left_weight
            left_weight -= spec.weight
            if limit.rang:
                break
            result = _run_check(spec, runner, report, share, total, require_autograd)
            report.results[name] = result
            if progress is not None:
                progress(name, result)
    for spec in specs:  # the budget ran out between checks: the rest did not run
        if spec.name not in report.results:
            report.results[spec.name] = result = CheckResult(
                spec.name, "skipped", reason=f"the op's time budget ({total:g}s) ran out before this check; "
                "raise --budget to run it")
            if progress is not None:
                progress(spec.name, result)
    report.seconds = time.monotonic() - start
    return report


def _run_check(spec, runner, report, share, total, require_autograd) -> CheckResult:
    """One check's result; a check the op's budget cut short keeps what it judged, and says so."""
    name = spec.name
    # A check is skipped when one it builds on failed: it would fail for the same reason.
    failed = [p for p in spec.prerequisites if p in report.results and report.results[p].status == "failed"]
    if failed:
        return CheckResult(name, "skipped", reason=f"{', '.join(failed)} failed; this check would fail for the same reason")
    if runner.quick and spec.quick == "skip":
        return CheckResult(name, "skipped", reason="--quick leaves out the checks that compile with Inductor; "
                           "run without --quick for them")
    if spec.needs_gradients and not runner.differentiable and not require_autograd:
        return CheckResult(name, "skipped", reason="the op is not differentiable, so there are no gradients to "
                           f"check (backward raises: {runner.not_differentiable})")
    try:
        return runner.run(spec, deadline=time.monotonic() + share)
    except BudgetExhausted:
        result = runner.result if runner.result is not None else CheckResult(name, "passed")
        judged = max(result.inputs_tried, runner.inputs_given - 1)  # the last one was cut short
        if result.status != "failed" and not judged:
            return CheckResult(name, "skipped", reason=f"the op's time budget ({total:g}s) ran out before this "
                               "check judged an input; raise --budget to run it")
        result.notes.append(f"the op's time budget ({total:g}s) ran out in this check, after {judged} input(s); "
                            "raise --budget to check further")
        return result
    except Exception as exc:  # noqa: BLE001 - a checker bug must not lose the other checks, nor blame the op
        why = internal_error(exc)
        return CheckResult(name, "skipped", reason=f"symfuzz's own error: {why}", internal=why)


class BudgetExhausted(BaseException):
    """The op's whole time budget ran out in the middle of a check (check()'s hard limit).
    A BaseException: the judges' and the sweep's ``except Exception`` must not swallow it."""


class _Limit:
    rang = False


@contextlib.contextmanager
def _hard_limit(seconds: float):
    """Raise BudgetExhausted in this thread once ``seconds`` have passed, so that no single
    input (a gradient check, a compile) runs an op past its budget. Only where a timer signal
    can do it and nobody else uses one: the main thread of a Unix process with no interval
    timer set (pytest-timeout's, say). Elsewhere the deadlines between inputs still bound
    the search, and the runner's time limit kills a child that overruns."""
    limit = _Limit()
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
    if not usable:
        yield limit
        return

    def ring(signum, frame):
        limit.rang = True
        raise BudgetExhausted()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield limit
    except BudgetExhausted:  # rang between two checks: the rest are skipped (limit.rang)
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sample_templates(op, pairs, fixed=None):
    """(templates of the samples the real kernel accepts, why one was refused or "",
    contract lines): the inputs every check and the crash probes sweep from.

    Each template knows its sample's index, the sizes of the kernel's outputs on
    it (a tie the contracts read) and its contracts (``opcheck.contracts``).
    """
    templates, error = [], ""
    made = [make_template(op, args, kwargs) for args, kwargs in pairs]
    checked, _ = _worth_checking(made)
    for n, template in enumerate(made):
        template.index = n  # which sample a judged input comes from (the runner reports it)
        template.worth_checking = any(template is t for t in checked)
        if not template.worth_checking:
            # Left out of the checks (_worth_checking): it counts for the contracts, and
            # running its kernel at production size here would cost as much as a check.
            template.output_sizes = set()
            templates.append(template)
            continue
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
    return templates, "", lines + describe_coupled(coupled_optionals(op, templates))


# A recorded call with more tensor elements than this is checked only when no smaller call of the
# same arguments was recorded (_worth_checking).
LARGE_SAMPLE = 2**20


def _worth_checking(templates):
    """(the templates to check, how many were left out): a call recorded at production sizes
    (a suite's accuracy tests) costs every check seconds per input, and shows nothing a smaller
    call of the same arguments (the same structure) does not, once the sweep varies that one's
    sizes, dtypes and layouts. Left out only where such a smaller call exists."""
    smallest: dict = {}
    for t in templates:
        key = t.structure
        if key not in smallest or _elements(t) < _elements(smallest[key]):
            smallest[key] = t
    kept = [t for t in templates if _elements(t) <= LARGE_SAMPLE or smallest[t.structure] is t]
    return kept, len(templates) - len(kept)


def _elements(template) -> int:
    """The tensor elements of a sample, all its tensors together."""
    return sum(math.prod(slot.shape) for slot in template.slots)


def derived_templates(op, templates, fixed=None) -> list[Template]:
    """The samples derived from each template by changing one non-tensor argument
    (``opcheck.arguments``), each with its contracts. The kernel is not called here:
    a value it refuses is refused by each check's first call, and one it crashes on
    crashes inside a check, which names the input (and the crash probes rebuild it)."""
    out, seen = [], set()
    coupled = coupled_optionals(op, templates)  # the recorded calls give them together or not at all
    # The smallest sample first: the same change to a larger sample of the same arguments
    # ("blocksize=0", "bias given" at the same rank) shows nothing new and costs more.
    for template in sorted(templates, key=_elements):
        for derived in derived_samples(op, template, lambda a, k: make_template(op, a, k), coupled):
            change = (template.structure, re.sub(r"\[[^\]]*\]", _rank_of_shape, derived.axis))
            if change in seen:
                continue
            seen.add(change)
            if len(derived.slots) == len(template.slots):
                derived = _within_rules(op, derived, template.contracts)
                if derived is None:
                    continue
            derived.index = template.index
            derived.schema = op._schema
            derived.output_sizes = getattr(template, "output_sizes", set())  # the sample's outputs: ties to read
            if len(derived.slots) == len(template.slots):
                derived.contracts = template.contracts
            else:
                try:
                    assign_contracts([derived], fixed, schema=op._schema)
                except ValueError:
                    continue
            out.append(derived)
    return out


def _rank_of_shape(match) -> str:
    """"[4, 32]" -> "[rank 2]", "[]" -> "[rank 0]": a derived sample's change, whatever the sample's sizes."""
    inner = match.group(0)[1:-1].strip()
    return f"[rank {inner.count(',') + 1 if inner else 0}]"


def _within_rules(op, derived: Template, contracts) -> Template | None:
    """``derived`` with each tensor whose size follows an argument resized to what the rule
    gives for the derived sample's arguments (absmax, ``ceil(A.numel() / blocksize)``, for a
    new blocksize; its values repeat cyclically); None where that can't be done. The sample's
    tensors with another int argument are an input no caller makes."""
    if contracts is None or not contracts.follows:
        return derived
    shapes = [tuple(slot.shape) for slot in derived.slots]
    leaves = list(derived.leaves)
    for (s, d), rule in contracts.follows.items():
        try:
            want = rule.size(shapes, derived.leaves)
        except (TypeError, ValueError, IndexError):  # the divisor argument is now None, or not an int
            return None
        if want == shapes[s][d]:
            continue
        tensor = leaves[derived.tensor_positions[s]]
        if want < 0 or tensor.shape[d] == 0:
            return None
        index = torch.arange(want, device=tensor.device) % tensor.shape[d]
        leaves[derived.tensor_positions[s]] = tensor.index_select(d, index).contiguous()
    args, kwargs = pytree.tree_unflatten(leaves, derived.spec)
    rebuilt = make_template(op, args, kwargs)
    rebuilt.axis = derived.axis
    return rebuilt


def _check_names(checks):
    """check()'s ``checks`` (None: all; a list, or one comma-separated string) as names in the table's order."""
    if checks is None:
        return list(CHECKS)
    if isinstance(checks, str):
        checks = [c for c in checks.split(",") if c.strip()]
    try:
        return check_names(checks)
    except ValueError as exc:
        raise OpCheckUsageError(str(exc)) from None


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
    """Runs one check after another on an op's templates; what the checks share lives here
    (the judges are made by each check's ``judge(op, runner, template)``, opcheck.checklist)."""

    def __init__(self, op, templates: list[Template], *, sweep: bool, seed: int, on_input=None,
                 require_autograd: bool = False, derived=(), quick: bool = False, legacy: bool = False):
        self.op, self.templates, self.sweep, self.seed = op, templates, sweep, seed
        self.quick, self.legacy = quick, legacy
        # What the checks of this op build once and share (the Inductor-compiled op:
        # checks.compile.shared_compiled), so that no judge compiles it again.
        self.shared: dict = {}
        self.result = None  # the result of the check running now
        self.inputs_given = 0  # the inputs it was given so far
        self.novelty: dict = {}
        self.derived = list(derived)  # samples with another argument value (opcheck.arguments)
        self.on_input = on_input
        self.require_autograd = require_autograd
        self.dependence = DataDependence(op)
        self.failed: set[str] = set()  # the checks that failed so far
        # Why the op is not differentiable ("" if it is, or nobody can tell): asked once, of the samples.
        self.not_differentiable = missing_autograd(op, templates)

    @property
    def differentiable(self) -> bool:
        return not self.not_differentiable

    @property
    def grad_ok(self) -> bool:
        """May checks make inputs require grad? Not for an op that is not differentiable,
        nor once autograd_registration failed: a missing backward would fail them too."""
        return self.differentiable and AUTOGRAD_REGISTRATION.name not in self.failed

    def input_grads(self, spec: CheckSpec, template: Template) -> set[int]:
        """The tensor inputs that require grad when ``spec`` judges ``template``'s inputs (and in its repro)."""
        if spec.grads == ALL_GRADS:
            return float_slots(template)
        if spec.grads != GRADS_IF_REGISTERED or not self.grad_ok:
            return set()
        if self.quick and spec.quick == "sample":
            # As torch.library.opcheck runs it: the sample's own requires_grad. Tracing a
            # backward the sample does not ask for costs more than the rest of --quick's check.
            return {n for n, slot in enumerate(template.slots) if slot.requires_grad}
        return float_slots(template)

    def run(self, spec: CheckSpec, *, deadline) -> CheckResult:
        name = spec.name
        start = time.monotonic()
        self.result = result = CheckResult(name, "passed")  # what a check cut short by the op's budget keeps
        self.inputs_given = 0
        self.novelty = {}  # structure -> Novelty, for this check (_search)
        applicable, not_applicable = False, "no floating-point input to differentiate"
        derived = self.derived if spec.axes else []
        for template in self.templates + derived:
            judge = spec.judge(self.op, self, template)
            if hasattr(judge, "applies") and not judge.applies(template):
                not_applicable = getattr(judge, "not_applicable", not_applicable)
                continue
            judge = _Announced(judge, name, self.on_input, self)
            applicable = True
            if time.monotonic() > deadline and template.axis:
                result.notes.append("the time budget ran out before every argument kind was tried; "
                                    "raise --budget to sweep further")
                break
            found = self._search(spec, judge, template, result, deadline, derived=bool(template.axis))
            result.notes.extend(n for n in getattr(judge, "notes", ()) if n not in result.notes)
            if found is not None:
                case, problem, shrunk = found
                grads = self.input_grads(spec, template)
                result.status = "failed"
                result.failures.append(Failure(
                    check=name, kind=problem.kind, message=problem.message, input=case.describe(),
                    repro=render(name, problem.kind, self.op, case, grads=grads), shrunk=shrunk,
                    case=case.to_json(), axis=problem.axis or axis_of(case),
                ))
                break
        if not applicable:
            result.status, result.reason = "skipped", not_applicable
        elif result.status == "passed" and result.inputs_tried == 0:
            # Not a pass: nothing was judged (every input refused, or none judgeable).
            result.status = "skipped"
            result.reason = (f"no input could be judged ({result.inputs_rejected} refused by the kernel or too "
                             "costly for this check: the gradient check takes at most "
                             f"{FULL_JACOBIAN_ELEMENTS} differentiable elements)" if name == GRADIENT.name else
                             f"no input could be judged ({result.inputs_rejected} refused)")
        if result.status == "failed":
            self.failed.add(name)
        result.seconds = time.monotonic() - start
        return result

    def _search(self, spec: CheckSpec, judge, template, result, deadline, derived=False):
        sw = Sweep(template, seed=self.seed)
        # One per check and argument structure: an edge of a second sample (another blocksize,
        # another size) that shows this check nothing the first one's did is not judged again.
        novelty = self.novelty.setdefault(template.structure, Novelty(None if self.legacy else PATIENCE, spec.learns))
        outcome = judge(template.original())
        if outcome is REJECTED:
            result.inputs_rejected += 1
        elif outcome is not UNJUDGED:
            result.inputs_tried += 1
            novelty.add(template.original(), judge)  # the sweep looks for what the sample did not show
        if isinstance(outcome, Problem):
            # The sample itself (or its argument value) showed it, whatever input the shrink ends on.
            outcome.axis = outcome.axis or template.axis or "the sample"
            # Prefer a generated input (rebuildable, shrinkable) that fails the same way.
            base = Variant(sw.original_sizes(), seed=1)
            again = judge(sw.case(base))
            if isinstance(again, Problem) and again.kind == outcome.kind:
                case, shrunk_problem, shrunk = shrink(judge, sw, base, again, deadline=deadline)
                shrunk_problem.axis = shrunk_problem.axis or outcome.axis
                return case, shrunk_problem, shrunk
            return template.original(), outcome, False
        if not self.sweep or (self.quick and spec.quick == "sample"):
            return None
        # A derived sample (another argument value) gets its sizes made odd, not the whole sweep.
        variants = ([Variant(tuple(_odd_sizes(sw.swept_sizes())), seed=1)] if derived
                    else _edge_variants(spec, sw, quick=self.quick))
        examples = 0 if derived or self.quick else spec.examples
        found = search(judge, sw, deadline=deadline, variants=variants, examples=examples, max_size=spec.max_size,
                       novelty=novelty, quick=self.quick)
        result.inputs_tried += found.tried
        result.inputs_rejected += found.rejected
        result.inputs_skipped += found.skipped
        if found.out_of_time and found.failure is None:
            result.notes.append(f"the time budget ran out after {found.tried + found.rejected} input(s); "
                                "raise --budget to sweep further")
        if found.failure is None:
            return None
        return found.case, found.failure, found.shrunk


def _edge_variants(spec: CheckSpec, sw: Sweep, quick: bool = False):
    """The check's edge variants (its ``edges``, or ``quick_edges`` under --quick:
    opcheck.checklist.Edge), or None for all of the sweep's."""
    edges = spec.quick_edges if quick and spec.quick_edges is not None else spec.edges
    if edges is None:
        return None
    base = sw.swept_sizes()  # a large sample's variants at smaller stand-in sizes (Sweep.swept_sizes)
    slots = len(sw.template.slots)
    transposed = [tuple(i == n for i in range(slots)) for n in range(slots)]  # one tensor laid out, per tensor
    out = []
    for edge in edges:
        sizes = _EDGE_SIZES[edge.sizes](sw.original_sizes() if edge.sizes == "sample" else base)
        if sizes is None:
            continue
        if edge.transposed:
            for layout in edge.layouts:
                out += [Variant(sizes, layouts=tuple(layout if x else "" for x in t), seed=edge.seed)
                        for t in transposed]
        else:
            out.append(Variant(sizes, seed=edge.seed))
        if spec.broadcast:
            out += [replace(v, sizes=sizes, seed=edge.seed) for v in sw.broadcasts(sizes)]
    return out


def _sample_sizes(base):
    return base


def _odd_sizes(base):
    return tuple(v + 1 if v % 2 == 0 else v for v in base)


def _at_most_3(base):
    return tuple(min(v, 3) for v in base)


def _small_sizes(base):
    return tuple(2 + i for i in range(len(base)))


def _ones(base):
    return tuple(1 for _ in base)


def _twice_plus_one(base):
    return tuple(2 * v + 1 for v in base)


def _leading_one(base):
    return (1,) + base[1:] if base else None  # no sizes: no such variant


# Edge.sizes -> the variant's sizes from the sample's (None: no such variant).
_EDGE_SIZES = {"sample": _sample_sizes, "odd": _odd_sizes, "at most 3": _at_most_3, "small": _small_sizes,
               "ones": _ones, "2v+1": _twice_plus_one, "leading 1": _leading_one}


class _Announced:
    """A judge that reports each input before judging it (when there is ``on_input``),
    and counts them on the runner (what a check cut short by the budget says it judged)."""

    def __init__(self, judge, name, on_input, runner):
        self.judge, self.name, self.on_input, self.runner = judge, name, on_input, runner
        self.notes = getattr(judge, "notes", [])

    @property
    def last_info(self):
        return getattr(self.judge, "last_info", ())

    def __call__(self, case):
        if self.on_input is not None:
            self.on_input(self.name, case)
        self.runner.inputs_given += 1
        return self.judge(case)


__all__ = ["CHECKS", "DEFAULT_BUDGET", "Report", "check"]
