"""Torch's own checking machinery failing on an input is not the op failing."""

import torch

from symfuzz import opcheck

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

NS = "symfuzz_machinery"


@torch.library.custom_op(f"{NS}::dequant_f8", mutates_args=())
def dequant_f8(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.float() * scale


@dequant_f8.register_fake
def _(x, scale):
    return x.new_empty(x.shape, dtype=torch.float32)


@torch.library.custom_op(f"{NS}::dequant_f8_writes", mutates_args=())
def dequant_f8_writes(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    scale.mul_(1.0)  # an undeclared write: the version counter moves, the values stay
    return x.float() * scale


@dequant_f8_writes.register_fake
def _(x, scale):
    return x.new_empty(x.shape, dtype=torch.float32)


def test_schema_check_mode_failing_on_float8_is_an_info_line_not_a_failure():
    """SchemaCheckMode compares inputs before and after with kernels float8 lacks
    ("mul_cpu_reduced_float" not implemented for 'Float8_e4m3fn'); the op runs fine."""
    x = torch.randn(4, 4).to(torch.float8_e4m3fn)
    report = opcheck.check(torch.ops.symfuzz_machinery.dequant_f8.default, (x, 2.0), checks="schema")
    result = report.results["schema"]
    assert result.status != "failed", report.format()
    assert any("torch's SchemaCheckMode itself failed" in n and "the op runs fine" in n for n in result.notes), \
        result.notes


def test_an_undeclared_write_beside_float8_inputs_is_still_found():
    """SchemaCheckMode cannot judge this op (its float8 input), the version-counter check can."""
    x = torch.randn(4, 4).to(torch.float8_e4m3fn)
    report = opcheck.check(torch.ops.symfuzz_machinery.dequant_f8_writes.default, (x, torch.ones(1)),
                           checks="schema,mutation")
    assert report.results["schema"].status != "failed", report.format()
    assert report.results["mutation"].status == "failed", report.format()


@torch.library.custom_op(f"{NS}::smooth_scale", mutates_args=())
def smooth_scale(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2


@smooth_scale.register_fake
def _(x):
    return torch.empty_like(x)


smooth_scale.register_autograd(lambda ctx, grad: grad * 2 * (1 - torch.tanh(ctx.x) ** 2),
                               setup_context=lambda ctx, inputs, output: setattr(ctx, "x", inputs[0]))


def _torch_function(module, source: str, name: str):
    """A function whose code says it lives in ``module``'s file: a stand-in for a failure raised
    inside torch's own code (what a torch without some kernel raises), planted where torch calls it."""
    namespace: dict = {}
    exec(compile(source, module.__file__, "exec"), namespace)
    return namespace[name]


def test_fake_tensor_mode_failing_before_the_op_runs_is_not_the_ops_failure(monkeypatch):
    """FakeTensorMode itself raising while it converts the inputs (before the op's fake kernel
    runs: a dtype or layout it can't hold) leaves those inputs unjudged, says so, and fails nothing."""
    import torch._subclasses.fake_tensor as fake_tensor

    monkeypatch.setattr(fake_tensor.FakeTensorMode, "from_tensor", _torch_function(
        fake_tensor, "def from_tensor(self, t, **kwargs):\n"
        "    raise NotImplementedError(\"'empty_strided' not implemented for 'Float8_e4m3fn'\")\n", "from_tensor"))
    report = opcheck.check(torch.ops.symfuzz_machinery.smooth_scale.default, (torch.randn(3, 4),),
                           checks="faketensor,symbolic_fake", budget=20)
    for name in ("faketensor", "symbolic_fake"):
        result = report.results[name]
        assert result.status != "failed", report.format()
        assert any("torch's FakeTensorMode, converting the inputs, failed on them" in n
                   and "not implemented for 'Float8_e4m3fn'" in n for n in result.notes), (name, result.notes)


def test_a_fake_kernel_raising_is_still_the_ops_failure(monkeypatch):
    """The same error raised while the op's own fake kernel runs (its frame in the traceback) is a finding."""
    @torch.library.custom_op(f"{NS}::fake_raises", mutates_args=())
    def fake_raises(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @fake_raises.register_fake
    def _(x):
        raise NotImplementedError("'tanh' not implemented for 'Float8_e4m3fn'")

    report = opcheck.check(fake_raises._opoverload, (torch.randn(3, 4),), checks="faketensor", budget=20)
    failure = report.results["faketensor"].failures[0]
    assert failure.kind == "fake-raised", report.format()


def test_gradcheck_failing_in_its_own_code_is_not_the_ops_failure(monkeypatch):
    """gradcheck raising from its own code (a limit of its own, not the op's backward) leaves the
    input unjudged and says so; the backward raising is still the op's (test_opcheck_core)."""
    import sys

    gradcheck_module = sys.modules["torch.autograd.gradcheck"]  # the attribute is the function of that name
    refuse = _torch_function(gradcheck_module, "def gradcheck(*args, **kwargs):\n"
                             "    raise RuntimeError('gradcheck: this output kind is not supported')\n", "gradcheck")
    monkeypatch.setattr(torch.autograd, "gradcheck", refuse)
    report = opcheck.check(torch.ops.symfuzz_machinery.smooth_scale.default, (torch.randn(3, 4),),
                           checks="gradient", budget=20)
    result = report.results["gradient"]
    assert result.status != "failed", report.format()
    assert any("torch's gradcheck failed on them" in n and "not supported" in n for n in result.notes), result.notes
