"""The op schemas. Fake kernels live in kernlib._fake, real kernels in kernlib.backends,
autograd formulas in kernlib._autograd.

Contracts the schemas do not state (every test keeps to them):
- dequant_blocks*: absmax has ceil(A.numel() / blocksize) entries;
- dequant_rows: row_stats has A.size(0) entries;
- dequant_blocks_out: `out` has A's shape, float32;
- dequant_offset: `offset` and `offset_scale` are given together or not at all;
- int8_linear: row_stats has A.size(0) entries and col_stats B.size(0), given together.
"""

import torch

# 8-bit blockwise dequantization: element i is (A[i] - 128) / 127 * absmax[i // blocksize].
torch.library.define("kernlib::dequant_blocks", "(Tensor A, Tensor absmax, int blocksize) -> Tensor")
torch.library.define("kernlib::dequant_blocks_out", "(Tensor A, Tensor absmax, int blocksize, Tensor(a!) out) -> ()")
# absmax stored compressed: each scale is offset[0] + offset_scale[0] * absmax[b].
torch.library.define("kernlib::dequant_offset",
                     "(Tensor A, Tensor absmax, int blocksize, Tensor? offset=None, Tensor? offset_scale=None) -> Tensor")
# Row-wise dequantization of an int8 matrix: A[r, c] * row_stats[r] / 127, float32.
torch.library.define("kernlib::dequant_rows", "(Tensor A, Tensor row_stats) -> Tensor")
# int8 x int8 -> int32 (A @ B.T); with statistics, dequantized to float32 and biased.
torch.library.define("kernlib::int8_linear",
                     "(Tensor A, Tensor B, Tensor? row_stats=None, Tensor? col_stats=None, Tensor? bias=None) -> Tensor")
# gelu(x) * w, composite: differentiable through the ops it calls.
torch.library.define("kernlib::gelu_scale", "(Tensor x, Tensor w) -> Tensor")
# x * scale computed in float32, whatever x's dtype (quantization parameters are float32). Differentiable.
torch.library.define("kernlib::scale_f32", "(Tensor x, Tensor scale) -> Tensor")
# float8 (e4m3) values times a float32 scale, as float32. Forward only.
torch.library.define("kernlib::fp8_dequant", "(Tensor x, Tensor scale) -> Tensor")

# The ops with a planted bug (see their kernels).
torch.library.define("kernlib::rescale", "(Tensor x, float factor) -> Tensor")
torch.library.define("kernlib::row_sums", "(Tensor x) -> Tensor")
torch.library.define("kernlib::center", "(Tensor x) -> Tensor")
torch.library.define("kernlib::soft_clip", "(Tensor x) -> Tensor")
