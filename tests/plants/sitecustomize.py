"""Planted torch bugs for symfuzz's quality tests.

When SYMFUZZ_PLANT names a plant, this file (on PYTHONPATH, so Python runs
it at start-up in every process: campaign workers and fresh-process repro
runs alike) breaks torch in one specific, realistic way. Without the
variable it does nothing.
"""

import os

PLANT = os.environ.get("SYMFUZZ_PLANT", "")


def _is_symbolic(size) -> bool:
    import sympy

    return isinstance(size, sympy.Expr) and not size.is_number


def plant_abs_wrong_when_symbolic():
    """A miscompile: Inductor's abs lowering negates its result, but only when a
    dimension of its input is symbolic. Static-shape compiles stay correct, so
    a single call per program at one shape with dynamic=False cannot see it."""
    import torch
    import torch._inductor.lowering as lowering

    aten = torch.ops.aten
    original = lowering.lowerings[aten.abs.default]

    def abs_lowering(x):
        out = original(x)
        if any(_is_symbolic(s) for s in x.get_size()):
            return lowering.lowerings[aten.neg.default](out)
        return out

    lowering.lowerings[aten.abs.default] = abs_lowering


def plant_segfault_on_cos():
    """A crash that kills the process: the Dynamo-only "eager" backend
    dereferences NULL when a graph contains torch.cos."""
    import ctypes

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def crashing_backend(gm, example_inputs):
        if any(node.target in (torch.cos, torch.Tensor.cos) for node in gm.graph.nodes):
            ctypes.string_at(0)  # SIGSEGV
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = crashing_backend


def plant_hang_on_sin():
    """A hang: the "eager" backend never returns when a graph contains torch.sin."""
    import time

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def hanging_backend(gm, example_inputs):
        if any(node.target in (torch.sin, torch.Tensor.sin) for node in gm.graph.nodes):
            while True:
                time.sleep(1)
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = hanging_backend


def plant_memory_hog_on_sigmoid():
    """Runaway memory: the "eager" backend allocates without end when a graph
    contains torch.sigmoid (the campaign's resident-memory watchdog must stop it)."""
    import time

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def hogging_backend(gm, example_inputs):
        if any(node.target in (torch.sigmoid, torch.Tensor.sigmoid) for node in gm.graph.nodes):
            hoard = []
            for _ in range(400):  # up to ~20 GiB, touched so it is resident
                hoard.append(bytearray(50 * 1024 * 1024))
                time.sleep(0.02)
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = hogging_backend


PLANTS = {
    "abs-symbolic": plant_abs_wrong_when_symbolic,
    "segfault-cos": plant_segfault_on_cos,
    "hang-sin": plant_hang_on_sin,
    "oom-sigmoid": plant_memory_hog_on_sigmoid,
}

if PLANT:
    PLANTS[PLANT]()
