"""The per-op budget is a hard limit over all of an op's checks, and a
sample recorded at production sizes is swept at small stand-in sizes."""

import re
import time

import torch

from symfuzz.opcheck.api import check
from symfuzz.opcheck.checks.common import make_template
from symfuzz.opcheck.variants import LARGE_SIZE, Sweep

NS = "symfuzz_budget"


@torch.library.custom_op(f"{NS}::slow_scale", mutates_args=())
def slow_scale(x: torch.Tensor) -> torch.Tensor:
    """Correct, and slow: every call takes 0.4 s (a kernel far costlier than its input)."""
    time.sleep(0.4)
    return x * 2


@slow_scale.register_fake
def _(x):
    return torch.empty_like(x)


slow_scale.register_autograd(lambda ctx, grad: grad * 2, setup_context=lambda ctx, inputs, output: None)


def test_the_budget_bounds_all_checks_together_and_says_where_it_ran_out():
    start = time.monotonic()
    report = check(slow_scale._opoverload, (torch.randn(3, 4),), budget=3)
    took = time.monotonic() - start
    # One kernel call past the budget at most (the limit interrupts a check between its bytecodes).
    assert took < 3 + 1.5, (took, report.format())
    assert report.ok, report.format()
    reasons = [r.reason for r in report.results.values() if r.status == "skipped"]
    notes = [n for r in report.results.values() for n in r.notes]
    assert any("the op's time budget (3s) ran out before this check" in r for r in reasons), report.format()
    assert any(re.search(r"the op's time budget \(3s\) ran out in this check, after \d+ input", n) for n in notes) or \
        any("ran out before this check judged an input" in r for r in reasons), report.format()
    # Never reported as a hang or a failure of the op.
    assert not any(f.kind == "hang" for r in report.results.values() for f in r.failures)


def test_a_large_sample_is_judged_as_is_and_swept_at_small_sizes():
    x = torch.randn(2048, 96)
    sweep = Sweep(make_template(slow_scale._opoverload, (x,), {}))
    assert sweep.original_sizes() == (96, 2048)
    small = sweep.swept_sizes()
    assert all(v <= 2 * LARGE_SIZE for v in small) and small[0] % 2 == 0 and small[0] < small[1], small
    edges = sweep.edges()
    assert edges[0].sizes == (96, 2048)  # the sample's own sizes, once
    assert all(max(v.sizes) <= 4 * LARGE_SIZE + 3 for v in edges[1:]), [v.sizes for v in edges]


