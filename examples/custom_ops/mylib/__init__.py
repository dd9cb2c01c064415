"""mylib: a tiny library of PyTorch custom ops (the symfuzz opcheck retrofit example).

Importing the package registers the ops: ``torch.ops.mylib.scaled_gelu``,
``torch.ops.mylib.pair_sum`` and ``torch.ops.mylib.downsample``.
"""

from mylib.ops import downsample, pair_sum, scaled_gelu

__all__ = ["downsample", "pair_sum", "scaled_gelu"]
