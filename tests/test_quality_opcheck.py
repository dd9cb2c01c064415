"""Quality: planted buggy custom ops are caught from ONE ordinary sample.

Each op in tests/opcheck_ops/buggy.py carries one realistic bug; its sample is
what an author writes (a float32 (4, 8) contiguous tensor). For most of them
``torch.library.opcheck`` on that sample passes (benchmarks/opcheck.py shows
it side by side). The correct ops in correct.py must give no failures.
"""


import pytest
import torch
from opcheck_ops import buggy, correct
from snippet_support import run_snippets

import symfuzz.opcheck as opcheck
from symfuzz.opcheck.repro import render

# (check, kind) each planted bug must be reported as.
EXPECTED = buggy.EXPECTED

# Bugs the author's sample itself cannot show: only a swept input does.
NEEDS_THE_SWEEP = {"half_cols", "scale2", "soft_gate"}

# A missing gradient formula is a failure only where the author requires autograd.
REQUIRES_AUTOGRAD = {"smooth"}


def _check(module, name, **kwargs):
    args, kw = module.SAMPLES[name]
    kwargs.setdefault("require_autograd", module is buggy and name in REQUIRES_AUTOGRAD)
    return opcheck.check(module.OPS[name], [(args, kw)], budget=60, **kwargs)


@pytest.fixture(scope="module")
def buggy_reports():
    assert set(EXPECTED) == set(buggy.SAMPLES), "every planted bug needs an expectation"
    return {name: _check(buggy, name) for name in buggy.SAMPLES}


@pytest.mark.quality
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_planted_bug_is_caught_from_one_ordinary_sample(buggy_reports, name):
    args, _ = buggy.SAMPLES[name]
    assert [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)] == [(4, 8)]
    assert all(a.dtype == torch.float32 and a.is_contiguous() for a in args if isinstance(a, torch.Tensor))
    report = buggy_reports[name]
    check, kind = EXPECTED[name]
    found = [(f.check, f.kind) for f in report.failures]
    assert (check, kind) in found, report.format(repro=False)
    failure = next(f for f in report.failures if (f.check, f.kind) == (check, kind))
    assert failure.message and failure.input and "op = lookup_op('symfuzz_buggy::" in failure.repro
    if name in NEEDS_THE_SWEEP:
        assert failure.case["inputs"] is not None, "a swept input, not the sample, shows this bug"
        assert failure.shrunk
        shape = failure.case["inputs"][0]["shape"]
        assert sum(shape) <= 4, f"shrunk to a small input, got {shape}"


@pytest.mark.quality
def test_a_missing_formula_is_a_note_unless_autograd_is_required():
    report = _check(buggy, "smooth", require_autograd=False, checks=["autograd_registration", "gradient"])
    assert report.ok, report.format(repro=False)
    assert report.results["autograd_registration"].status == "passed"
    assert report.results["gradient"].status == "skipped"
    assert "not differentiable" in report.results["gradient"].reason
    assert len(report.info) == 1 and report.info[0].startswith("not differentiable: ")
    assert "no autograd formula" in report.info[0]


@pytest.mark.quality
@pytest.mark.parametrize("name", sorted(NEEDS_THE_SWEEP))
def test_without_the_sweep_the_sample_alone_misses_it(name):
    report = _check(buggy, name, sweep=False, checks=["faketensor", "symbolic_fake"])
    assert report.ok, report.format(repro=False)


@pytest.mark.quality
def test_correct_ops_give_no_failures():
    # Among them: a torch._check contract on sizes (group_sum, width8: the guards
    # rule out only sizes the kernel refuses), a bfloat16-only kernel (no
    # gradcheck possible: skipped, not failed), a 0-dim tensor argument, data-dependent sizes.
    assert len(correct.SAMPLES) >= 3
    for name in correct.SAMPLES:
        report = _check(correct, name)
        assert not report.error, report.error
        assert report.ok, report.format(repro=False)
        ran = [c for c, r in report.results.items() if r.status == "passed"]
        assert len(ran) >= 6, f"{name}: too many checks skipped: {report.summary_line()}"
        fake = report.results["faketensor"]
        # The sweep ran (width8's kernel refuses every width but 8, so fewer count).
        assert fake.inputs_tried + fake.inputs_rejected >= 20 and fake.inputs_tried >= 5, fake


@pytest.mark.quality
def test_samples_that_differ_only_in_flags_are_judged_apart():
    # pick(x, True) has a data-dependent size, pick(x, False) a fixed one; the
    # same tensor specs must not share what was learned about one of them.
    x = correct.SAMPLES["pick"][0][0]
    report = opcheck.check(correct.OPS["pick"], [((x, True), {}), ((x, False), {})], budget=30,
                           checks=["faketensor", "symbolic_fake"])
    assert report.ok, report.format(repro=False)


# What each kind's repro raises when it shows the bug (default AssertionError).
_SNIPPET_RAISES = {
    "undeclared-mutation": ("RuntimeError", "AssertionError"),  # SchemaCheckMode raises; the mutation check asserts
    "undeclared-alias": ("RuntimeError",),
    "fake-reads-data": ("DataDependentOutputException", "GuardOnDataDependentSymNode"),
    "wrong-gradient": ("GradcheckError",),
    "missing-autograd": ("RuntimeError",),
}

@pytest.mark.quality
def test_every_failure_repro_snippet_fails_on_its_own(buggy_reports, tmp_path):
    snippets = {f"{name}__{f.check}": f.repro for name, r in buggy_reports.items() for f in r.failures}
    assert len(snippets) >= len(EXPECTED)
    kinds = {f"{name}__{f.check}": f.kind for name, r in buggy_reports.items() for f in r.failures}
    results = run_snippets(tmp_path, snippets)
    passed = {k: v for k, v in results.items() if v[0] != "raised"}
    assert not passed, f"these repros do not fail: {sorted(passed)}"
    # ... and fail by showing the bug, not by being broken.
    for key, (_, why) in results.items():
        expected = _SNIPPET_RAISES.get(kinds[key], ("AssertionError",))
        assert why.split(":")[0] in expected, f"{key} ({kinds[key]}) raised {why}"


@pytest.mark.quality
def test_repro_snippets_pass_on_a_correct_op(tmp_path):
    # The snippets must show the bug, not fail by themselves.
    from symfuzz.opcheck.checks.common import make_template
    from symfuzz.opcheck.store import CHECKS

    args, kwargs = correct.SAMPLES["scaled_add"]
    op = correct.OPS["scaled_add"]
    template = make_template(op, args, kwargs)
    from symfuzz.opcheck.variants import Sweep, Variant

    sweep = Sweep(template)
    case = sweep.case(Variant((3, 5), layouts=("transposed", ""), seed=1))
    snippets = {check: render(check, "any", op, case, grads={0, 1}) for check in CHECKS}
    snippets["faketensor_aliasing"] = render("faketensor", "wrong-aliasing", op, case)
    snippets["symbolic_specializes"] = render("symbolic_fake", "specializes", op, case)
    rows = correct.OPS["nonzero_rows"]
    rows_case = Sweep(make_template(rows, *correct.SAMPLES["nonzero_rows"])).case(Variant((4, 8), seed=1))
    snippets["symbolic_unbacked"] = render("symbolic_fake", "data-dependent-size-not-unbacked", rows, rows_case)
    results = run_snippets(tmp_path, snippets)
    assert {k: v for k, v in results.items() if v[0] != "passed"} == {}
