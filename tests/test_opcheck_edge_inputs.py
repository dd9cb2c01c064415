"""opcheck on inputs the new sweep axes make unusual: the checker must judge them, never raise,
and never flag a correct op for them."""

import json

import pytest
import torch

from symfuzz import opcheck
from symfuzz.opcheck.store import StoreError, XfailStore

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

NS = "symfuzz_edges"


@torch.library.custom_op(f"{NS}::masked_fill_min", mutates_args=())
def masked_fill_min(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """An attention-style mask: ``mask`` holds 0 and the float32 minimum."""
    return (x + mask).contiguous()


@masked_fill_min.register_fake
def _(x, mask):
    return torch.empty(torch.broadcast_shapes(x.shape, mask.shape), dtype=torch.result_type(x, mask), device=x.device)


def test_a_float_range_no_integer_holds_is_kept_to_the_integer_range():
    mask = torch.zeros(4, 8)
    mask[:, 4:] = torch.finfo(torch.float32).min
    report = opcheck.check(masked_fill_min, [((torch.randn(4, 8), mask), {})], budget=30,
                           checks=["schema", "mutation", "faketensor", "symbolic_fake"])
    assert all(r.status == "passed" for r in report.results.values()), report.format(repro=False)


@torch.library.custom_op(f"{NS}::positive", mutates_args=())
def positive(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


@positive.register_fake
def _(x):
    return x[x > 0]  # correct: torch's own data-dependent meta kernel (nonzero) sizes it


@torch.library.custom_op(f"{NS}::arange_n", mutates_args=())
def arange_n(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32)


@arange_n.register_fake
def _(n):
    return torch.empty(n, dtype=torch.float32)


def test_fake_device_judges_a_data_dependent_fake_and_skips_an_op_without_tensors():
    report = opcheck.check(positive, [((torch.randn(4, 8),), {})], checks=["fake_device"], budget=20)
    assert report.ok, report.format(repro=False)
    assert report.results["fake_device"].inputs_tried >= 1
    report = opcheck.check(arange_n, [((5,), {})], checks=["fake_device"], budget=20)
    assert report.results["fake_device"].status == "skipped"
    assert "no tensor input" in report.results["fake_device"].reason


@torch.library.custom_op(f"{NS}::double_into", mutates_args=("out",))
def double_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.resize_(x.shape)  # an out= argument that arrives empty and is resized
    torch.mul(x, 2, out=out)


@double_into.register_fake
def _(x, out):
    return None


def test_the_mutation_check_takes_a_resized_out_argument_as_its_declared_write():
    report = opcheck.check(double_into, [((torch.randn(4, 8), torch.empty(0)), {})], checks=["mutation"], budget=20)
    assert report.results["mutation"].status == "passed", report.format(repro=False)


@torch.library.custom_op(f"{NS}::bad_fake", mutates_args=())
def bad_fake(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0)


@bad_fake.register_fake
def _(x):
    return x.new_empty(x.shape[1] + 1)


def test_a_bug_the_sample_shows_is_revealed_by_the_sample_however_it_is_shrunk():
    report = opcheck.check(bad_fake, [((torch.randn(4, 8),), {})], checks=["faketensor"], budget=20)
    (failure,) = report.failures
    assert failure.axis == "the sample" and failure.shrunk, report.format(repro=False)


@torch.library.custom_op(f"{NS}::scaled", mutates_args=())
def scaled(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


@scaled.register_fake
def _(x, alpha):
    return torch.empty_like(x)


def test_scalar_arguments_of_an_aten_schema_get_their_boundaries():
    from symfuzz.opcheck.api import derived_templates, sample_templates

    templates, _, _ = sample_templates(torch.ops.aten.add.Tensor, [((torch.randn(2), torch.randn(2)), {"alpha": 2})])
    labels = [t.axis for t in derived_templates(torch.ops.aten.add.Tensor, templates)]
    assert {"argument alpha=0", "argument alpha=1", "argument alpha=-1"} <= set(labels)


def test_a_require_autograd_setting_under_the_default_overload_is_refused(tmp_path):
    path = tmp_path / "store.json"
    path.write_text(json.dumps({"_description": "", "_version": 1, "data": {
        "mylib::op.default": {"require_autograd": {"comment": "trained", "status": "required"}}}}))
    with pytest.raises(StoreError, match="write it as 'mylib::op'"):
        XfailStore.load(path)
