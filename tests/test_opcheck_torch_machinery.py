"""Torch's own checking machinery failing on an input is not the op failing (issue 30, item 7)."""

import torch

from symfuzz import opcheck

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
