"""The gradient check judges at the precision the op computes in, and stays cheap on large samples."""

import torch

from symfuzz import opcheck

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

NS = "symfuzz_gradprec"


def _float32_op(name: str, backward_factor: float):
    """Quantization-like: computes and returns float32 whatever dtype it is given; its
    registered backward is ``backward_factor`` times the true one (1.0: right)."""

    @torch.library.custom_op(f"{NS}::{name}", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return (x.float() * 3.0).tanh()

    op.register_fake(lambda x: x.new_empty(x.shape, dtype=torch.float32))

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        y = (x.float() * 3.0).tanh()
        return (grad * 3.0 * (1 - y * y) * backward_factor).to(x.dtype)

    op.register_autograd(backward, setup_context=setup)
    return op


_float32_op("scale_f32", 1.0)
_float32_op("scale_f32_wrong", 1.5)


def test_an_op_that_computes_in_float32_is_judged_at_float32_tolerances():
    """Fed float64, its finite differences are still rounded to float32: float64 tolerances
    would fail a right backward (numerical entries like 15616 for a step of 1e-6)."""
    right = opcheck.check(torch.ops.symfuzz_gradprec.scale_f32.default, (torch.randn(3, 5),), checks="gradient")
    assert right.results["gradient"].status == "passed", right.format()
    wrong = opcheck.check(torch.ops.symfuzz_gradprec.scale_f32_wrong.default, (torch.randn(3, 5),),
                          checks="gradient")
    [failure] = wrong.results["gradient"].failures[:1]
    assert failure.kind == "wrong-gradient" and "judged at float32 tolerances" in failure.message


def test_a_large_sample_is_gradient_checked_on_smaller_variants_of_it():
    """A million-element sample: finite differences on it take minutes (420 s on a real library, then
    reported as a hang). Such an input is not judged; the sweep's smaller ones are."""
    big = (torch.randn(1024, 1024),)
    alone = opcheck.check(torch.ops.symfuzz_gradprec.scale_f32_wrong.default, big, checks="gradient", sweep=False)
    assert alone.results["gradient"].status != "failed", alone.format()  # nothing small enough to judge
    right = opcheck.check(torch.ops.symfuzz_gradprec.scale_f32.default, big, checks="gradient")
    assert right.results["gradient"].status == "passed", right.format()
    wrong = opcheck.check(torch.ops.symfuzz_gradprec.scale_f32_wrong.default, big, checks="gradient")
    [failure] = wrong.results["gradient"].failures[:1]
    assert failure.kind == "wrong-gradient" and "1024" not in failure.input, failure.input
