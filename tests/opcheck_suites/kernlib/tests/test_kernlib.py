import pytest
import torch

import kernlib  # noqa: F401

ops = torch.ops.kernlib


def opcheck(op, args, kwargs=None, **options):
    torch.library.opcheck(op, args, kwargs, **options)


def quantized(shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8)


def blocks(n, blocksize):
    return -(-n // blocksize)


def reference_dequant(A, absmax, blocksize):
    scale = absmax.repeat_interleave(blocksize)[: A.numel()].view(A.shape)
    return (A.float() - 128) / 127 * scale


@pytest.mark.parametrize("blocksize", [64, 128, 256, 512, 1024, 2048, 4096])
def test_dequant_blocks(blocksize):
    A = quantized((32, 64))  # one shape; the block size varies
    absmax = torch.rand(blocks(A.numel(), blocksize)) + 0.5
    out = ops.dequant_blocks(A, absmax, blocksize)
    torch.testing.assert_close(out, reference_dequant(A, absmax, blocksize))
    opcheck(ops.dequant_blocks.default, (A, absmax, blocksize))


def test_dequant_blocks_out():
    A = quantized((16, 32))
    absmax = torch.rand(blocks(A.numel(), 64)) + 0.5
    out = torch.empty(A.shape)
    ops.dequant_blocks_out(A, absmax, 64, out)
    torch.testing.assert_close(out, reference_dequant(A, absmax, 64))
    opcheck(ops.dequant_blocks_out.default, (A, absmax, 64, out))


@pytest.mark.parametrize("compressed", [False, True])
def test_dequant_offset(compressed):
    A = quantized((8, 64))
    absmax = torch.rand(blocks(A.numel(), 32)) + 0.5
    extra = (torch.tensor([0.25]), torch.tensor([2.0])) if compressed else (None, None)
    out = ops.dequant_offset(A, absmax, 32, *extra)
    scale = absmax * 2.0 + 0.25 if compressed else absmax
    torch.testing.assert_close(out, reference_dequant(A, scale, 32))
    opcheck(ops.dequant_offset.default, (A, absmax, 32, *extra))


@pytest.mark.parametrize("rows", [2, 8])
def test_dequant_rows(rows):
    A = torch.randint(-127, 128, (rows, 16), dtype=torch.int8)
    row_stats = torch.rand(rows) * 4
    out = ops.dequant_rows(A, row_stats)
    torch.testing.assert_close(out, A.float() * row_stats[:, None] / 127)
    opcheck(ops.dequant_rows.default, (A, row_stats))


def int8(*shape):
    return torch.randint(-127, 128, shape, dtype=torch.int8)


def test_int8_linear_raw():
    A, B = int8(4, 32), int8(6, 32)
    out = ops.int8_linear(A, B)
    assert out.dtype == torch.int32
    torch.testing.assert_close(out, A.int() @ B.int().T)
    opcheck(ops.int8_linear.default, (A, B))


@pytest.mark.parametrize("with_bias", [False, True])
def test_int8_linear_dequantized(with_bias):
    A, B = int8(8, 16), int8(5, 16)
    row_stats, col_stats = torch.rand(8) + 0.5, torch.rand(5) + 0.5
    bias = torch.randn(5) if with_bias else None
    out = ops.int8_linear(A, B, row_stats, col_stats, bias)
    expected = (A.float() @ B.float().T) * row_stats[:, None] * col_stats[None, :] / 127**2
    torch.testing.assert_close(out, expected if bias is None else expected + bias)
    opcheck(ops.int8_linear.default, (A, B, row_stats, col_stats), {"bias": bias})


def test_gelu_scale_large():
    x = torch.randn(1024, 1024, dtype=torch.float16)  # a real layer's activations
    w = torch.rand(1024, dtype=torch.float16)
    out = ops.gelu_scale(x, w)
    torch.testing.assert_close(out, torch.nn.functional.gelu(x) * w)
    opcheck(ops.gelu_scale.default, (x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scale_f32(dtype):
    x = torch.randn(4, 8, dtype=dtype, requires_grad=True)
    scale = torch.tensor([0.5], requires_grad=True)
    out = ops.scale_f32(x, scale)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert x.grad.dtype == dtype
    opcheck(ops.scale_f32.default, (x, scale))


def test_fp8_dequant():
    x = torch.randn(4, 16).to(torch.float8_e4m3fn)
    scale = torch.tensor([2.0])
    out = ops.fp8_dequant(x, scale)
    torch.testing.assert_close(out, x.float() * 2)
    # torch's schema check compares float8 tensors with an op float8 lacks: left out
    opcheck(ops.fp8_dequant.default, (x, scale), test_utils=("test_faketensor", "test_aot_dispatch_dynamic"))


def test_rescale():
    x = torch.randn(3, 5)
    torch.testing.assert_close(ops.rescale(x, 3.0), x * 3)
    opcheck(ops.rescale.default, (x, 3.0))


def test_row_sums():
    x = torch.randn(4, 6)
    torch.testing.assert_close(ops.row_sums(x), x.sum(1))
    opcheck(ops.row_sums.default, (x,))


def test_center():
    x = torch.randn(5, 3)
    before = x.clone()
    torch.testing.assert_close(ops.center(x), x - x.mean())
    assert torch.equal(x, before)  # the values are left as they were
    opcheck(ops.center.default, (x,))


def test_soft_clip():
    x = torch.randn(7)
    torch.testing.assert_close(ops.soft_clip(x), torch.tanh(x))
    opcheck(ops.soft_clip.default, (x,))


# Accuracy at the sizes the library is used at: every block size, against a float64 reference,
# over many draws (these are most of the suite's time, as in real kernel libraries).


@pytest.mark.parametrize("blocksize", [64, 256, 1024, 4096])
@pytest.mark.parametrize("draw", range(8))
def test_dequant_blocks_accuracy_at_scale(blocksize, draw):
    A = quantized((4096, 1024))
    absmax = torch.rand(blocks(A.numel(), blocksize), dtype=torch.float64) * 8
    out = ops.dequant_blocks(A, absmax.float(), blocksize)
    expected = (A.double() - 128) / 127 * absmax.repeat_interleave(blocksize)[: A.numel()].view(A.shape)
    assert (out.double() - expected).abs().max() <= 8 * 2**-20


@pytest.mark.parametrize("shape", [(256, 1024, 512), (512, 2048, 256), (1024, 1024, 1024)])
def test_int8_linear_accuracy_at_scale(shape):
    m, k, n = shape
    A, B = int8(m, k), int8(n, k)
    row_stats, col_stats = torch.rand(m, dtype=torch.float64) + 0.5, torch.rand(n, dtype=torch.float64) + 0.5
    out = ops.int8_linear(A, B, row_stats.float(), col_stats.float())
    expected = (A.double() @ B.double().T) * row_stats[:, None] * col_stats[None, :] / 127**2
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("draw", range(6))
def test_gelu_scale_accuracy_at_scale(dtype, draw):
    x = torch.randn(2048, 4096, dtype=dtype)
    w = torch.rand(4096, dtype=dtype)
    expected = torch.nn.functional.gelu(x.double()) * w.double()
    tol = {torch.float16: 4e-3, torch.bfloat16: 3e-2, torch.float32: 1e-5}[dtype]
    torch.testing.assert_close(ops.gelu_scale(x, w).double(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("rows", [1024, 4096])
@pytest.mark.parametrize("draw", range(3))
def test_row_kernels_accuracy_at_scale(rows, draw):
    x = torch.randn(rows, 2048)
    torch.testing.assert_close(ops.row_sums(x).double(), x.double().sum(1), rtol=1e-4, atol=1e-2)
    A = torch.randint(-127, 128, (rows, 2048), dtype=torch.int8)
    stats = torch.rand(rows) * 4
    torch.testing.assert_close(ops.dequant_rows(A, stats), A.float() * stats[:, None] / 127)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("draw", range(3))
def test_elementwise_accuracy_at_scale(dtype, draw):
    x = torch.randn(2048, 2048, dtype=dtype)
    torch.testing.assert_close(ops.rescale(x, 0.5), x * 0.5)
    torch.testing.assert_close(ops.soft_clip(x), torch.tanh(x))
    torch.testing.assert_close(ops.center(x.clone()), x - x.mean(), atol=1e-2, rtol=1e-2)
    scale = torch.tensor([0.25])
    torch.testing.assert_close(ops.scale_f32(x, scale).double(), x.double() * 0.25, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("draw", range(6))
def test_fp8_and_offset_dequant_accuracy_at_scale(draw):
    x = torch.randn(2048, 2048).to(torch.float8_e4m3fn)
    torch.testing.assert_close(ops.fp8_dequant(x, torch.tensor([3.0])), x.float() * 3)
    A = quantized((2048, 1024))
    absmax = torch.rand(blocks(A.numel(), 256)) + 0.5
    offset, unit = torch.tensor([0.1]), torch.tensor([1.5])
    expected = reference_dequant(A, absmax * 1.5 + 0.1, 256)
    torch.testing.assert_close(ops.dequant_offset(A, absmax, 256, offset, unit), expected)
    out = torch.empty(A.shape)
    ops.dequant_blocks_out(A, absmax, 256, out)
    torch.testing.assert_close(out, reference_dequant(A, absmax, 256))
