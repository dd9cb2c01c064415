"""Argument kinds: samples derived from one by changing a non-tensor argument (opcheck.arguments)."""

from typing import Optional

import torch
from conftest import ROOT
from opcheck_ops import crashy

from symfuzz import opcheck
from symfuzz.opcheck.api import derived_templates, sample_templates
from symfuzz.opcheck.calls import CallRecorder, write_calls
from symfuzz.opcheck.runner import run_ops
from symfuzz.opcheck.task import Task

NS = "symfuzz_args"


@torch.library.custom_op(f"{NS}::knobs", mutates_args=())
def knobs(x: torch.Tensor, k: int, scale: float, flag: bool, n: Optional[int] = None,
          bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    out = x * scale if flag else x.clone()
    if bias is not None:
        out = out + bias
    return out[..., : max(k, 0)] if n is None else out


@knobs.register_fake
def _(x, k, scale, flag, n=None, bias=None):
    if n is not None:
        return torch.empty_like(x)
    width = torch.sym_max(k, 0)
    return x.new_empty(*x.shape[:-1], torch.sym_min(width, x.shape[-1]))


def _labels(op, args, kwargs=None):
    templates, error, _ = sample_templates(op, [(args, kwargs or {})])
    assert not error
    return [t.axis for t in derived_templates(op, templates)]


def test_each_scalar_goes_to_its_boundaries_and_optionals_are_given_or_dropped():
    x = torch.randn(4, 8)
    labels = _labels(torch.ops.symfuzz_args.knobs.default, (x, 3, 0.5, True))
    assert {"argument k=0", "argument k=1", "argument k=-1", "argument k=4"} <= set(labels)
    assert {"argument scale=0.0", "argument scale=-0.5", "argument scale=10000.0"} <= set(labels)
    assert "argument flag=False" in labels
    assert {"argument n=1", "argument n=4", "argument n=8", "argument n=16"} <= set(labels)
    assert {"argument bias given [4, 8]", "argument bias given [8]", "argument bias given []"} <= set(labels)
    given = _labels(torch.ops.symfuzz_args.knobs.default, (x, 3, 0.5, True), {"n": 2})
    assert "argument n=None" in given


def test_an_argument_value_the_kernel_refuses_is_not_a_finding():
    @torch.library.custom_op(f"{NS}::positive_k", mutates_args=())
    def positive_k(x: torch.Tensor, k: int) -> torch.Tensor:
        if k <= 0:
            raise ValueError("k must be positive")
        return x[..., :k].clone(memory_format=torch.contiguous_format)

    positive_k.register_fake(lambda x, k: x.new_empty(*x.shape[:-1], torch.sym_min(k, x.shape[-1])))
    op = torch.ops.symfuzz_args.positive_k.default
    assert _labels(op, (torch.randn(4, 8), 3)) == ["argument k=0", "argument k=1", "argument k=-1", "argument k=4"]
    report = opcheck.check(op, [((torch.randn(4, 8), 3), {})], checks=["faketensor"], budget=20)
    assert report.ok, report.format(repro=False)
    assert report.results["faketensor"].inputs_rejected >= 2  # k=0 and k=-1, as given


def test_a_kernel_crash_on_an_argument_value_names_it_and_its_repro_passes_it(tmp_path):
    op = "symfuzz_crashy::segv_on_negative_k"
    calls = tmp_path / "calls.jsonl"
    recorded = []
    with CallRecorder({"symfuzz_crashy"}, test="t.py::t", sink=recorded):
        crashy.segv_on_negative_k(torch.randn(4, 8), 3)
    write_calls(calls, recorded)
    task = Task(ops=[op], calls_file=str(calls), modules=["opcheck_ops.crashy"],
                sys_path=[str(ROOT / "tests"), str(ROOT)], checks=["schema"], budget=20)
    (report,) = run_ops(task)
    (failure,) = report.failures
    assert failure.kind == "kernel-crash" and failure.axis == "argument k=-1", report.format(repro=False)
    assert "probed in a fresh process" in failure.message
    assert "-1" in failure.repro.split("def inputs():")[1].split("\n\n")[0]


def test_a_bug_only_an_argument_value_shows_is_found_and_named():
    @torch.library.custom_op(f"{NS}::last_k", mutates_args=())
    def last_k(x: torch.Tensor, k: int) -> torch.Tensor:
        return x[..., -k:].clone(memory_format=torch.contiguous_format)  # k=0: Python's -0 takes everything

    last_k.register_fake(lambda x, k: x.new_empty(*x.shape[:-1], torch.sym_min(k, x.shape[-1])))
    op = torch.ops.symfuzz_args.last_k.default
    report = opcheck.check(op, [((torch.randn(4, 8), 3), {})], checks=["faketensor"], budget=20)
    (failure,) = report.failures
    assert failure.kind == "wrong-shape" and failure.axis.startswith("argument k=0"), report.format(repro=False)
    assert "3" not in failure.repro.split("args, kwargs = inputs()")[0].split("return")[-1]
    assert opcheck.check(op, [((torch.randn(4, 8), 3), {})], checks=["faketensor"], sweep=False).ok


@torch.library.custom_op(f"{NS}::dequant", mutates_args=())
def dequant(a: torch.Tensor, absmax: Optional[torch.Tensor] = None, code: Optional[torch.Tensor] = None,
            bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    out = a.float()
    if absmax is not None:  # a compressed statistic needs its code table: the kernel reads both
        out = out * code[absmax.long().clamp(0, 255)].sum()
    return out if bias is None else out + bias


@dequant.register_fake
def _(a, absmax=None, code=None, bias=None):
    return a.new_empty(a.shape, dtype=torch.float32)


def test_optional_tensors_given_together_in_every_call_are_dropped_together_and_never_given_alone():
    """absmax and code come together in every recorded call (a statistic and its code table):
    one without the other is outside the op's contract, however the kernel takes it."""
    op = torch.ops.symfuzz_args.dequant.default
    a = torch.randint(-8, 8, (4, 8), dtype=torch.int8)
    absmax, code = torch.rand(4), torch.linspace(-1, 1, 256)
    calls = [((a, absmax, code), {}), ((a,), {}), ((a, absmax, code, torch.rand(8)), {})]
    templates, error, lines = sample_templates(op, calls)
    assert not error
    assert "absmax, code: given together or None together, as in every recorded call" in lines
    derived = derived_templates(op, templates)
    for t in derived:
        given = {name: t.kwargs.get(name, t.args[i] if i < len(t.args) else None) is not None
                 for i, name in ((1, "absmax"), (2, "code"))}
        assert given["absmax"] == given["code"], t.axis
    assert "argument absmax=None, code=None" in {t.axis for t in derived}
    assert any(t.axis.startswith("argument bias") for t in derived)  # a lone optional is still varied
