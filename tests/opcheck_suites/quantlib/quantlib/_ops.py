"""The op schemas. Kernels live in quantlib.backends, fake kernels in quantlib._fake,
autograd formulas in quantlib._autograd."""

import torch

# 8-bit blockwise quantization: every block of `blocksize` consecutive elements
# (in row-major order) is scaled by its absolute maximum and each element is
# replaced by the index of the nearest entry of `code`, a sorted 256-entry table
# in [-1, 1].
torch.library.define(
    "quantlib::quantize_blockwise",
    "(Tensor A, Tensor code, int blocksize) -> (Tensor, Tensor)",
)
torch.library.define(
    "quantlib::dequantize_blockwise",
    "(Tensor A, Tensor absmax, Tensor code, int blocksize) -> Tensor",
)

# Row-wise scaling: x[n, m] * scale[n, None]. Differentiable.
torch.library.define("quantlib::scale_rows", "(Tensor x, Tensor scale) -> Tensor")

# Per-row absolute maximum of a 2-D tensor (0 for an empty row), float32. Forward only.
torch.library.define("quantlib::row_absmax", "(Tensor x) -> Tensor")
