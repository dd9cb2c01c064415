"""A custom op whose result is off by a chosen share of the tolerance, only when
Inductor's generated code calls it: for the test that an opcheck repro snippet
and the in-process check agree at the tolerance's edge.

Namespace ``symfuzz_plant``. ``twice(x, k)`` is ``2 * x``; called from a
compiled graph, it adds ``k * (atol + rtol * |2x|)`` with the tolerances
symfuzz uses for ``x.dtype``: below tolerance for ``k < 1``, above for ``k > 1``.
"""

import sys

import torch

from symfuzz.fuzz.script_runtime import TOLERANCES

NS = "symfuzz_plant"


def _called_from_inductor_code() -> bool:
    """Is a frame of a module Inductor generated (its cache dir) on the stack?"""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    root = cache_dir()
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(root):
            return True
        frame = frame.f_back
    return False


@torch.library.custom_op(f"{NS}::twice", mutates_args=())
def twice(x: torch.Tensor, k: float) -> torch.Tensor:
    out = x * 2
    if _called_from_inductor_code():
        rtol, atol = TOLERANCES[x.dtype]
        out = out + k * (atol + rtol * out.abs())
    return out


@twice.register_fake
def _(x, k):
    return torch.empty_like(x)
