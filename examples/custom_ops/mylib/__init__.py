"""mylib: a tiny library of PyTorch custom ops (the symfuzz opcheck retrofit example).

Importing the package registers the ops: ``torch.ops.mylib.scaled_gelu``,
``torch.ops.mylib.pair_sum``, ``torch.ops.mylib.downsample`` and
``torch.ops.mylib.snap`` (forward-only: no gradient formula, on purpose).
"""

from mylib.ops import downsample, pair_sum, scaled_gelu, snap

__all__ = ["downsample", "pair_sum", "scaled_gelu", "snap"]
