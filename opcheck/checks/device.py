"""Fake kernels on other devices: meta tensors, and FakeTensors on "cuda" (no GPU needed).

The faketensor check runs the fake kernel on fake CPU tensors, where a fake
kernel that allocates with ``torch.empty(shape)`` (the default device, the
CPU) looks right. Under torch.compile on a GPU it returns a CPU tensor for a
CUDA input, and on meta tensors (``op(x.to("meta"))``) it returns a real CPU
tensor. This check runs the real kernel on the CPU, then the fake kernel on
(a) meta tensors and (b) FakeTensors on device "cuda", each with the input's
sizes, strides and storage offset, and wants every output on the input's
device, with the real output's dtype, shape and strides.
"""

from __future__ import annotations

import re

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from symfuzz.opcheck.checks.common import Problem, first_line, run_real, tensor_leaves
from symfuzz.opcheck.checks.fake import classify_fake_error, compare_outputs
from symfuzz.opcheck.inputs import Case
from symfuzz.opcheck.variants import REJECTED

META, CUDA = "device meta", "device cuda (fake)"  # the axes this check varies (Problem.axis)

# A fake kernel with data-dependent output sizes (ctx.new_dynamic_size())
# needs a ShapeEnv, which plain meta tensors lack: not judgeable on meta.
# The repro snippet inlines this and ``strided_like``: keep them torch-only.
NEEDS_SHAPE_ENV = re.compile(r"data-dependent shape|new_dynamic_size|ShapeEnv|dynamic.?size|"
                              r"DynamicOutputShapeException|data-independent|meta_nonzero", re.IGNORECASE)
# A fake kernel may reach code that FakeTensorMode runs for real on a fake CUDA
# device (boolean indexing does): on a CPU-only build that says so, which tells
# nothing about the fake kernel. The meta run still judges that input.
NO_CUDA_HERE = re.compile(r"not linked with support for cuda|not compiled with CUDA|no CUDA GPUs|"
                          r"CUDA driver|Found no NVIDIA driver", re.IGNORECASE)
_DEVICES_MIX = re.compile(r"device", re.IGNORECASE)

_HINT = ("allocate outputs on the input's device: x.new_empty(...), torch.empty_like(x), "
         "torch.empty(..., device=x.device)")


def strided_like(t: torch.Tensor, device) -> torch.Tensor:
    """An uninitialized tensor on ``device`` with ``t``'s dtype, sizes, strides and storage offset
    (over a storage as large as ``t``'s). Under a FakeTensorMode it is a FakeTensor.

    ``t.to("meta")`` would not do: it keeps neither an offset nor the strides of a sliced view."""
    elements = t.untyped_storage().nbytes() // t.element_size()
    return torch.empty(elements, dtype=t.dtype, device=device).as_strided(t.shape, t.stride(), t.storage_offset())


class FakeDeviceCheck:
    not_applicable = "no tensor input: there is no input device to follow"

    def __init__(self, op, dependence):
        self.op, self.dependence = op, dependence

    @staticmethod
    def applies(template) -> bool:
        return bool(template.slots)

    def __call__(self, case: Case):
        real = run_real(self.op, case)
        if real is REJECTED:
            return REJECTED
        args, kwargs, real_out = real
        skip = set(self.dependence.dims(case, real_out))
        return (self._on_meta(args, kwargs, real_out, skip)
                or self._on_fake_cuda(args, kwargs, real_out, skip))

    def _on_meta(self, args, kwargs, real_out, skip):
        margs, mkwargs = pytree.tree_map_only(torch.Tensor, lambda t: strided_like(t, "meta"),
                                              (tuple(args), dict(kwargs)))
        try:
            with torch.no_grad():
                out = self.op(*margs, **mkwargs)
        except Exception as exc:  # noqa: BLE001 - the fake kernel failing where the real one works is the finding
            if NEEDS_SHAPE_ENV.search(f"{type(exc).__name__}: {exc}"):
                return None  # data-dependent sizes: judged on fake cuda tensors, which have a ShapeEnv
            return self._raised(exc, "meta", META)
        # The real outputs' metadata on meta, for compare_outputs (it compares device types too).
        expected = pytree.tree_map_only(torch.Tensor, lambda t: strided_like(t, "meta"), real_out)
        return self._judge(out, expected, "meta", META, skip)

    def _on_fake_cuda(self, args, kwargs, real_out, skip):
        mode = FakeTensorMode(shape_env=ShapeEnv())
        try:
            with torch.no_grad(), mode:
                fargs, fkwargs = pytree.tree_map_only(torch.Tensor, lambda t: strided_like(t, "cuda"),
                                                      (tuple(args), dict(kwargs)))
                out = self.op(*fargs, **fkwargs)
                # The real outputs' metadata on the fake device, as on meta.
                expected = pytree.tree_map_only(torch.Tensor, lambda t: strided_like(t, "cuda"), real_out)
        except Exception as exc:  # noqa: BLE001 - as on meta
            if NO_CUDA_HERE.search(str(exc)) and not torch.cuda.is_available():
                return None  # this build cannot run what the fake kernel asked of CUDA: not judged here
            return self._raised(exc, "fake cuda", CUDA)
        return self._judge(out, expected, "cuda", CUDA, skip, fake=True)

    def _judge(self, out, expected, device: str, axis: str, skip, *, fake=False):
        for path, leaf in tensor_leaves(out):
            if not isinstance(leaf, torch.Tensor):
                continue
            real_tensor = fake and not isinstance(leaf, FakeTensor)  # made outside the mode: not traceable
            if leaf.device.type != device or real_tensor:
                what = "a real tensor (not a FakeTensor)" if real_tensor else "a tensor"
                return Problem(
                    "wrong-device",
                    f"{path}: on {device} inputs the fake kernel returned {what} on device {leaf.device}; "
                    f"it must be on the inputs' device ({device}).\n{_HINT}",
                    axis=axis,
                )
        problem = compare_outputs(expected, out, skip_dims=skip)
        if problem is None:
            return None
        where = "meta tensors" if device == "meta" else "FakeTensors on cuda"
        return Problem(problem.kind, f"on {where}: {problem.message}", axis=axis)

    def _raised(self, exc: BaseException, where: str, axis: str):
        if classify_fake_error(exc).kind == "no-fake-kernel":
            return None  # no fake kernel at all: the faketensor check reports that
        hint = f"\n{_HINT}; do not mix in tensors made on another device" if _DEVICES_MIX.search(str(exc)) else ""
        return Problem("fake-device-raised", f"the fake kernel raised on {where} inputs where the real kernel succeeded "
                       f"on the CPU: {first_line(exc, 500)}{hint}", axis=axis)


def fake_device_judge(op, runner, template):
    """The fake_device check's judge (opcheck.checklist)."""
    return FakeDeviceCheck(op, runner.dependence)
