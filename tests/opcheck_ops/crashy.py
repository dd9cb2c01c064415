"""Custom ops whose real kernels crash or hang on some swept shapes.

They test the runner's isolation: the author's sample (4, 8) works; the sweep
reaches an odd width (segfault) or an empty input (hang, or an exit with
status 0 in the middle of the checks).
"""

import os
import signal
import time

import torch

NS = "symfuzz_crashy"


@torch.library.custom_op(f"{NS}::segv_on_odd", mutates_args=())
def segv_on_odd(x: torch.Tensor) -> torch.Tensor:
    if x.shape[-1] % 2:
        os.kill(os.getpid(), signal.SIGSEGV)  # what an out-of-bounds read in a C++ kernel does
    return x * 2


@segv_on_odd.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::segv_on_negative_k", mutates_args=())
def segv_on_negative_k(x: torch.Tensor, k: int) -> torch.Tensor:
    """The first k columns; k < 0 is an out-of-bounds read in the C++ original (the sample passes k=3)."""
    if k < 0:
        os.kill(os.getpid(), signal.SIGSEGV)
    return x[..., :k].clone(memory_format=torch.contiguous_format)


@segv_on_negative_k.register_fake
def _(x, k):
    return x.new_empty(*x.shape[:-1], torch.sym_min(k, x.shape[-1]))


@torch.library.custom_op(f"{NS}::hang_on_empty", mutates_args=())
def hang_on_empty(x: torch.Tensor) -> torch.Tensor:
    while x.numel() == 0:  # a kernel spinning on a zero-sized launch
        time.sleep(1)
    return x + 1


@hang_on_empty.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::slow_fake_on_empty", mutates_args=())
def slow_fake_on_empty(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@slow_fake_on_empty.register_fake
def _(x):
    while x.numel() == 0:  # the check hangs, in the fake; the op's own call returns at once
        time.sleep(1)
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::exit_on_empty", mutates_args=())
def exit_on_empty(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:
        os._exit(0)  # a kernel that ends the process "successfully"
    return x - 1


@exit_on_empty.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::oom_on_empty", mutates_args=())
def oom_on_empty(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:  # a kernel that sizes a workspace from garbage
        hoard = [torch.ones(1 << 28) for _ in range(8)]  # 1 GiB each, touched: 8 GiB
        time.sleep(60)
        return x + len(hoard)
    return x + 2


@oom_on_empty.register_fake
def _(x):
    return torch.empty_like(x)


SAMPLES = {
    "segv_on_odd": ((torch.ones(4, 8),), {}),
    "hang_on_empty": ((torch.ones(4, 8),), {}),
    "slow_fake_on_empty": ((torch.ones(4, 8),), {}),
    "exit_on_empty": ((torch.ones(4, 8),), {}),
    "oom_on_empty": ((torch.ones(4, 8),), {}),
}
OPS = {name: getattr(torch.ops.symfuzz_crashy, name).default for name in SAMPLES}
