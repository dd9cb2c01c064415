"""Where eager's kernel and torch's own shape rule disagree: is an accepts-invalid eager's bug?

An accepts-invalid verdict says compiled returned where eager raised, which reads as the
compiler skipping a check. But the compiler does not run eager's kernels: it follows each
op's meta function (the shape rule fake tensors and Inductor use). Where an eager kernel
returns a tensor of another shape or dtype than its meta function promises, eager is the
side that left torch's rule, and the error eager raised later, on that wrong tensor, is
eager's bug, not a check the compiler skipped (campaign 3: eager's ``pixel_unshuffle``
returns its empty input unchanged, and ``pixel_shuffle`` then refuses it).

``eager_meta_disagreement`` replays the failing call in eager under a dispatch mode that
runs every aten op a second time on meta copies of its arguments, and names the first op
whose eager result differs from its meta result. An op whose meta run fails (no meta
kernel, data-dependent output, a value check meta functions leave to the kernel) says
nothing: a kernel that raises on values its meta function cannot see is what an
accepts-invalid usually is, and stays one. A metadata mismatch (compiled's shape or dtype
against eager's) gets the same words: there, too, compiled may be the side that is right.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from symfuzz.fuzz import script_runtime
from symfuzz.oracles.lanes.execute import load_function
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import eager_off_rule


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def _described(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}"


class MetaShadow(TorchDispatchMode):
    """Runs each aten op as asked, then on meta copies of its arguments. A result whose shape or
    dtype differs from the meta one is a suspect; ``first`` holds, in words, the first suspect
    that something used (a later op's argument, or a value the program returns: ``returned``),
    or None. An unused one says nothing: eager's batch norm in eval mode returns empty saved
    statistics where its meta function gives a channel's worth, and nobody reads them."""

    def __init__(self):
        super().__init__()
        self.first = None
        self.suspects: dict[int, tuple] = {}  # id(eager tensor) -> (the tensor, kept alive; its words)

    def _used(self, values) -> None:
        for leaf in tree_leaves(values):
            if self.first is None and isinstance(leaf, torch.Tensor) and id(leaf) in self.suspects:
                self.first = self.suspects[id(leaf)][1]

    def returned(self, values) -> None:
        self._used(values)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._used((args, kwargs))
        out = func(*args, **kwargs)
        if self.first is None:
            try:
                meta = func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))
            except Exception:  # noqa: BLE001 - no meta kernel, or one that needs the values: says nothing
                return out
            eager_leaves, meta_leaves = tree_leaves(out), tree_leaves(meta)
            for k, (e, m) in enumerate(zip(eager_leaves, meta_leaves)):
                if isinstance(e, torch.Tensor) and isinstance(m, torch.Tensor) and (
                        e.shape != m.shape or e.dtype != m.dtype):
                    which = f" (result {k})" if len(eager_leaves) > 1 else ""
                    self.suspects[id(e)] = (e, eager_off_rule(str(func), _described(e) + which, _described(m)))
        return out


def eager_meta_disagreement(case, index: int, lane: str) -> str:
    """The first op at call ``index`` whose eager result leaves its meta function's shape or
    dtype and is then used, in words for the finding's reader ("eager's aten.x returned ...
    where its meta function ... gives ..."); "" where none does (and for a module program,
    whose calls depend on the state earlier calls left)."""
    if case.program.params:
        return ""
    call = case.schedule.calls[index].to_json()
    shadow = MetaShadow()
    try:
        fn = load_function(case.source)
        args = script_runtime.make_args(call, get_lane(lane).device)
        with shadow:
            out = fn(*args)
        shadow.returned(out)
    except Exception:  # noqa: BLE001 - eager raising is the verdict; what ran before it is what counts
        pass
    return shadow.first or ""


def eager_side_note(case, index: int, lane: str) -> str:
    """``eager_meta_disagreement`` with its conclusion, the words a finding's detail carries
    (``verdict.eager_side`` reads them back); "" where no eager kernel left its rule."""
    why = eager_meta_disagreement(case, index, lane)
    return f"{why}: eager left torch's own rule, so the bug may be eager's" if why else ""
