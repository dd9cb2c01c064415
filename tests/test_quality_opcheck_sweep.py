"""Quality: the sweep's axes catch what one ordinary float32 sample never shows.

tests/opcheck_ops/sweep_bugs.py plants one bug per op, each in a class one
float32 sample hides: dtype classes (int, complex, half), value classes
(zeros, large), argument kinds (an index as a bool mask, an optional argument
given, a scalar at 0), devices (meta, fake CUDA), layouts (a kernel reading
memory as row-major, ignoring the storage offset), broadcasting (a wrong
backward, a wrong fake shape) and an undeclared write that leaves the values
as they were. Each op gets its one sample; the report must name the check
meant for the bug, its kind, and the axis that revealed it.
tests/opcheck_ops/sweep_ok.py holds the correct twins and forward-only ops
(no gradient formula on purpose): none may be flagged, and a forward-only op
is reported as not differentiable, never as failing.
"""

import copy

import pytest
import torch
from opcheck_ops import sweep_bugs, sweep_ok

import symfuzz.opcheck as opcheck

BUDGET = 60  # seconds per op: the checks stop early when their variants run out

# Every class the issue names has at least one planted op here.
CLASSES = {"dtype": {"mean_div", "magnitude", "half_accum"}, "value": {"nonzeros", "clip_inplace"},
           "argument kind": {"select_rows", "pad_to", "take_last"}, "device": {"cpu_only_fake"},
           "layout": {"row_major", "no_offset"}, "broadcast": {"mul_rows", "add_bias"}, "mutation": {"sanitize"}}


def _one_float32_sample(args, kwargs):
    floats = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    assert floats and all(a.dtype == torch.float32 and a.is_contiguous() and tuple(a.shape) == (4, 8) for a in floats)


def test_every_class_has_a_planted_bug_and_every_planted_bug_an_expectation():
    assert set(sweep_bugs.EXPECTED) == set(sweep_bugs.SAMPLES) == set().union(*CLASSES.values())
    assert len(sweep_bugs.SAMPLES) >= 12


@pytest.mark.quality
@pytest.mark.parametrize("name", sorted(sweep_bugs.SAMPLES))
def test_planted_bug_is_caught_by_its_check_from_one_float32_sample(name):
    args, kwargs = sweep_bugs.SAMPLES[name]
    _one_float32_sample(args, kwargs)
    op = sweep_bugs.OPS[name]
    check, kind, axis = sweep_bugs.EXPECTED[name]
    report = opcheck.check(op, [(args, kwargs)], budget=BUDGET)
    found = {(f.check, f.kind): f for f in report.failures}
    assert (check, kind) in found, report.format(repro=False)
    failure = found[check, kind]
    assert failure.axis.startswith(axis), f"{name}: revealed by {failure.axis!r}, expected {axis!r}"
    assert f"op = lookup_op('symfuzz_sweep::{name}." in failure.repro
    # The bug is in a class the sample hides: torch.library.opcheck on that sample passes.
    sample_args, sample_kwargs = copy.deepcopy((args, kwargs))
    outcomes = torch.library.opcheck(op, sample_args, sample_kwargs, raise_exception=False)
    assert all(v == "SUCCESS" for v in outcomes.values()), outcomes


@pytest.mark.quality
@pytest.mark.parametrize("name", sorted(sweep_ok.SAMPLES))
def test_correct_twins_and_forward_only_ops_are_not_flagged(name):
    args, kwargs = sweep_ok.SAMPLES[name]
    report = opcheck.check(sweep_ok.OPS[name], [(args, kwargs)], budget=BUDGET)
    assert not report.error, report.error
    assert report.ok, report.format(repro=False)
    skipped = {c: r.reason for c, r in report.results.items() if r.status == "skipped"}
    if name in sweep_ok.FORWARD_ONLY:
        with torch.no_grad():
            out = sweep_ok.OPS[name](*args, **kwargs)
        if out.is_floating_point():  # an integer output is not differentiable anyway: nothing to say
            assert report.info and report.info[0].startswith("not differentiable"), report.format(repro=False)
            assert set(skipped) == {"gradient"}, skipped
        # Nothing refused for want of a backward: the compile checks ran on inputs.
        for check in ("aot_dispatch_dynamic", "inductor_dynamic"):
            assert report.results[check].inputs_tried >= 1, report.results[check]
    else:
        assert not any("differentiable" in line for line in report.info), report.info
