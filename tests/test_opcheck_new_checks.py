"""The mutation, fake_device and layout_consistency judges, one input at a time.

Each judge meets tiny custom ops defined here (namespace ``symfuzz_newchecks``):
one with the bug it is for, which it must report with the right kind, and a
correct twin, which it must pass. No torch.compile: these are cheap. The repro
snippet of each failing input must fail (an exception) in a fresh process, and
the same snippet on a correct op must pass.
"""

from types import SimpleNamespace

import pytest
import torch
from snippet_support import run_snippets

from symfuzz.opcheck.checklist import FAKE_DEVICE, LAYOUT_CONSISTENCY, MUTATION
from symfuzz.opcheck.checks.common import Problem, make_template
from symfuzz.opcheck.checks.device import fake_device_judge
from symfuzz.opcheck.checks.fake import DataDependence
from symfuzz.opcheck.checks.layout import layout_consistency_judge
from symfuzz.opcheck.checks.mutation import mutation_judge
from symfuzz.opcheck.contracts import Contracts
from symfuzz.opcheck.repro import render
from symfuzz.opcheck.variants import REJECTED, UNJUDGED, Sweep, Variant

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

NS = "symfuzz_newchecks"


def _flat(x: torch.Tensor) -> torch.Tensor:
    """The bug these ops share: x's memory read as if x were contiguous from offset 0."""
    return torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (x.numel(),), (1,))


# ------------------------------------------------------------------ mutation


@torch.library.custom_op(f"{NS}::touch", mutates_args=())
def touch(x: torch.Tensor) -> torch.Tensor:
    """Bug: an in-place op on an input the schema calls read-only (values unchanged)."""
    x.add_(0)
    return x * 2


@torch.library.custom_op(f"{NS}::sneak", mutates_args=())
def sneak(x: torch.Tensor) -> torch.Tensor:
    """Bug: writes through .data: the values change, the version counter does not."""
    x.data.mul_(1.5)
    return x * 2


@torch.library.custom_op(f"{NS}::scale_flat_", mutates_args=("x",))
def scale_flat_(x: torch.Tensor) -> None:
    """Bug: a declared write, but through memory taken as contiguous from offset 0."""
    _flat(x).mul_(2)


@torch.library.custom_op(f"{NS}::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor) -> None:
    x.mul_(2)


@torch.library.custom_op(f"{NS}::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x):
    return torch.empty_like(x)


# ------------------------------------------------------------------ fake_device


@torch.library.custom_op(f"{NS}::on_cpu", mutates_args=())
def on_cpu(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@on_cpu.register_fake
def _(x):
    # Bug: the default device; right for the CPU fake tensors faketensor uses.
    return torch.empty(x.shape, dtype=x.dtype)


@torch.library.custom_op(f"{NS}::add_positions", mutates_args=())
def add_positions(x: torch.Tensor) -> torch.Tensor:
    return x + torch.arange(x.shape[-1], dtype=x.dtype)


@add_positions.register_fake
def _(x):
    # Bug: arange on the CPU, mixed with an input on another device.
    return x + torch.arange(x.shape[-1], dtype=x.dtype)


@torch.library.custom_op(f"{NS}::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


@positives.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


@torch.library.custom_op(f"{NS}::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x * 2


# ------------------------------------------------------------------ layout_consistency


@torch.library.custom_op(f"{NS}::rowmajor", mutates_args=())
def rowmajor(x: torch.Tensor) -> torch.Tensor:
    """Bug: reads the memory row-major from offset 0, whatever x's strides and offset."""
    return (_flat(x) * 2 + 1).reshape(x.shape)


@torch.library.custom_op(f"{NS}::affine", mutates_args=())
def affine(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def _judge(judge_of, op, sample, layouts=(), sizes=None):
    """(judge, case) for ``op`` on a (4, 6) float32 sample laid out as ``layouts`` say."""
    template = make_template(op, (sample,), {})
    template.schema = op._schema
    runner = SimpleNamespace(dependence=DataDependence(op), failed=set(), grad_ok=True, differentiable=True)
    sweep = Sweep(template)
    case = sweep.case(Variant(sizes or sweep.original_sizes(), layouts=tuple(layouts), seed=1))
    return judge_of(op, runner, template), case


def _sample():
    return torch.randn(4, 6)


def _op(custom):
    return custom._opoverload


# (name, judge, op, layouts, expected kind, what the message must say); the twins pass.
FAILING = {
    "touch": (mutation_judge, touch, (), "undeclared-mutation", "version counter moved"),
    "sneak": (mutation_judge, sneak, (), "undeclared-mutation", "without its version counter moving"),
    "scale_flat_": (mutation_judge, scale_flat_, ("sliced",), "write-outside-view", "outside the view"),
    "on_cpu": (fake_device_judge, on_cpu, (), "wrong-device", "device cpu"),
    "add_positions": (fake_device_judge, add_positions, (), "fake-device-raised", "device"),
    "rowmajor_transposed": (layout_consistency_judge, rowmajor, ("transposed",), "layout-dependent", "x0"),
    "rowmajor_sliced": (layout_consistency_judge, rowmajor, ("sliced",), "layout-dependent", "sliced"),
}
PASSING = {
    "scale_": (mutation_judge, scale_, ("sliced",)),
    "double_mutation": (mutation_judge, double, ("transposed",)),
    "double_device": (fake_device_judge, double, ("sliced",)),
    "double_device_transposed": (fake_device_judge, double, ("transposed",)),
    "positives": (fake_device_judge, positives, ()),
    "no_fake": (fake_device_judge, no_fake, ()),  # the faketensor check reports a missing fake kernel
    "affine_transposed": (layout_consistency_judge, affine, ("transposed",)),
    "affine_expanded": (layout_consistency_judge, affine, ("expanded",)),
    "scale_sliced": (layout_consistency_judge, scale_, ("sliced",)),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_judge_reports_its_bug(name):
    judge_of, op, layouts, kind, says = FAILING[name]
    judge, case = _judge(judge_of, _op(op), _sample(), layouts)
    problem = judge(case)
    assert isinstance(problem, Problem), problem
    assert problem.kind == kind, problem
    assert says in problem.message, problem.message


@pytest.mark.parametrize("name", sorted(PASSING))
def test_judge_passes_a_correct_op(name):
    judge_of, op, layouts = PASSING[name]
    judge, case = _judge(judge_of, _op(op), _sample(), layouts)
    assert judge(case) is None


def test_layout_consistency_leaves_a_contiguous_input_unjudged():
    # Nothing to compare it with: neither a pass (which would count as judged) nor a refusal.
    judge, case = _judge(layout_consistency_judge, _op(rowmajor), _sample(), ())
    assert judge(case) is UNJUDGED


def test_mutation_names_the_schema_argument_and_the_schema():
    judge, case = _judge(mutation_judge, _op(touch), _sample())
    message = judge(case).message
    assert "`x` (x0)" in message and "schema: symfuzz_newchecks::touch(Tensor x) -> Tensor" in message
    assert "mutates_args" in message


def test_mutation_on_the_sample_itself_and_a_raising_kernel():
    judge, _ = _judge(mutation_judge, _op(touch), _sample())
    template = make_template(_op(touch), (_sample().t(),), {})
    assert judge(template.original()).kind == "undeclared-mutation"
    judge, case = _judge(mutation_judge, _op(scale_), _sample())
    refused = make_template(_op(scale_), (torch.randn(3).expand(2, 3),), {}).original()
    assert judge(refused) is REJECTED  # an in-place write to an expanded input raises in the real kernel


# Two ops on inputs that may share a storage (custom_op refuses aliased inputs: the low-level API).
_lib = torch.library.Library(NS, "FRAGMENT")
_lib.define("scale_first_(Tensor(a!) x, Tensor y) -> ()")
_lib.define("scale_both_(Tensor(a!) x, Tensor y) -> ()")


def _scale_first_(x, y):
    x.mul_(2)


def _scale_both_(x, y):
    x.mul_(2)
    y.data.mul_(2)  # bug: y is read-only


_lib.impl("scale_first_", _scale_first_, "CompositeExplicitAutograd")
_lib.impl("scale_both_", _scale_both_, "CompositeExplicitAutograd")


def _shared_case(template, *tensors):
    """The template's sample as given, storages shared (Case.build() would copy each tensor)."""
    return SimpleNamespace(template=template, build=lambda **_: (tuple(tensors), {}))


def test_mutation_judges_inputs_that_share_a_storage_together():
    base = torch.randn(2, 8)
    x, y = base[0], base[1]
    # The declared write to x moves the version counter y shares: no finding.
    op = torch.ops.symfuzz_newchecks.scale_first_.default
    template = make_template(op, (x, y), {})
    assert mutation_judge(op, None, template)(_shared_case(template, x, y)) is None
    # A write into the bytes of the read-only y is y's undeclared mutation, not a write outside x.
    op = torch.ops.symfuzz_newchecks.scale_both_.default
    template = make_template(op, (x, y), {})
    problem = mutation_judge(op, None, template)(_shared_case(template, x, y))
    assert problem is not None and problem.kind == "undeclared-mutation" and "x1" in problem.message, problem


def test_fake_device_names_the_axis():
    judge, case = _judge(fake_device_judge, _op(on_cpu), _sample())
    assert judge(case).axis == "device meta"
    problem = judge(case)
    assert "x.new_empty" in problem.message


def test_fake_device_on_fake_cuda_only():
    @torch.library.custom_op(f"{NS}::meta_only", mutates_args=())
    def meta_only(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @meta_only.register_fake
    def _(x):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")  # bug: the device hard-coded

    judge, case = _judge(fake_device_judge, _op(meta_only), _sample())
    problem = judge(case)
    assert problem.kind == "wrong-device" and problem.axis == "device cuda (fake)", problem


def test_fake_device_compares_shapes_too():
    @torch.library.custom_op(f"{NS}::first_row", mutates_args=())
    def first_row(x: torch.Tensor) -> torch.Tensor:
        return x[0].clone()

    @first_row.register_fake
    def _(x):
        return x.new_empty(x.shape[1] - 1)  # bug: one short

    judge, case = _judge(fake_device_judge, _op(first_row), _sample())
    problem = judge(case)
    assert problem.kind == "wrong-shape" and problem.message.startswith("on meta tensors"), problem


def test_layout_applies_only_where_a_tensor_can_be_laid_out_otherwise():
    op = _op(affine)
    check = layout_consistency_judge(op, None, make_template(op, (_sample(),), {}))
    assert check.applies(make_template(op, (_sample(),), {}))
    assert not check.applies(make_template(op, (torch.tensor(2.0),), {}))  # 0-dim: always contiguous
    held = make_template(op, (_sample(),), {})
    held.contracts = Contracts(fixed={0: "a lookup table"})
    assert not check.applies(held)


def test_layout_judges_a_non_contiguous_sample_itself():
    op = _op(rowmajor)
    template = make_template(op, (_sample().t(),), {})
    problem = layout_consistency_judge(op, None, template)(template.original())
    assert problem.kind == "layout-dependent" and "x0 strides [1, 6]" in problem.message, problem


def test_layout_rejects_what_the_kernel_refuses():
    @torch.library.custom_op(f"{NS}::needs_contiguous", mutates_args=())
    def needs_contiguous(x: torch.Tensor) -> torch.Tensor:
        return x.view(-1) * 2

    judge, case = _judge(layout_consistency_judge, _op(needs_contiguous), _sample(), ("transposed",))
    assert judge(case) is REJECTED


# ------------------------------------------------------------------ repro snippets

# What each kind's snippet raises when it shows the bug.
_RAISES = {"fake-device-raised": "RuntimeError"}  # meta tensors come first: "not on the expected device meta"


@pytest.mark.integration
def test_repro_snippets_fail_on_the_bug_and_pass_on_a_correct_op(tmp_path):
    snippets, kinds = {}, {}
    for name, (judge_of, op, layouts, kind, _) in FAILING.items():
        judge, case = _judge(judge_of, _op(op), _sample(), layouts)
        check = {mutation_judge: MUTATION, fake_device_judge: FAKE_DEVICE,
                 layout_consistency_judge: LAYOUT_CONSISTENCY}[judge_of].name
        snippets[f"bug_{name}"] = render(check, judge(case).kind, _op(op), case)
        kinds[f"bug_{name}"] = kind
    for name in ("scale_", "double_device", "affine_transposed", "affine_expanded", "scale_sliced", "positives"):
        judge_of, op, layouts = PASSING[name]
        _, case = _judge(judge_of, _op(op), _sample(), layouts)
        check = {mutation_judge: MUTATION, fake_device_judge: FAKE_DEVICE,
                 layout_consistency_judge: LAYOUT_CONSISTENCY}[judge_of].name
        snippets[f"ok_{name}"] = render(check, "any", _op(op), case)
    results = run_snippets(tmp_path, snippets)
    for key, (status, why) in results.items():
        if key.startswith("ok_"):
            assert status == "passed", f"{key}: {status} {why}\n{snippets[key]}"
        else:
            expected = _RAISES.get(kinds[key], "AssertionError")
            assert status == "raised" and why.startswith(expected), f"{key}: {status} {why}"
