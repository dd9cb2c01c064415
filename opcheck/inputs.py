"""Inputs for an op: the user's sample, and variants rebuilt from specs.

A *template* remembers a sample's structure (pytree of args and kwargs) and,
for each tensor leaf, its shape, dtype, device and value range. A *case* is
one concrete input: either the sample itself, or a tuple of ``TensorInput``
specs (shape, dtype, layout, values drawn from the sample's range with a
seed) that ``build`` turns into fresh tensors. Specs are plain data, so a
failing case can be printed, stored as JSON and rebuilt by the repro snippet
with the same function, ``fuzz.script_runtime.make_input`` (the one every
symfuzz script inlines).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.utils._pytree as pytree

from symfuzz.fuzz.script_runtime import make_input

LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")
# Value classes (fuzz.script_runtime.value_class): what one random sample almost never holds.
VALUES = ("zeros", "ties", "negative", "large")

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int16", "uint8")


def make(shape, dtype, layout="contiguous", lo=-1.0, hi=1.0, seed=0, requires_grad=False, device="cpu"):
    """A tensor of ``shape`` with values in [lo, hi], laid out as asked (``make_input``)."""
    t = make_input(shape, dtype, seed, layout, low=lo, high=hi, device=device)
    return t.requires_grad_() if requires_grad else t


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def to_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


@dataclass(frozen=True)
class TensorInput:
    shape: tuple
    dtype: str
    layout: str = "contiguous"
    lo: float = -1.0
    hi: float = 1.0
    seed: int = 0
    requires_grad: bool = False
    values: str = ""  # a value class (VALUES), or "" for values drawn from [lo, hi]

    def build(self, device="cpu") -> torch.Tensor:
        t = make_input(tuple(self.shape), to_dtype(self.dtype), self.seed, self.layout, low=self.lo, high=self.hi,
                       device=device, values=self.values or None)
        if self.requires_grad:
            # detach() keeps the strides, so the leaf keeps the layout.
            t = t.detach().requires_grad_()
        return t

    def describe(self) -> str:
        text = f"{self.dtype}{list(self.shape)}"
        if self.layout != "contiguous":
            text += f" {self.layout}"
        if self.values:
            text += f" {self.values}"
        if self.requires_grad:
            text += " requires_grad"
        return text

    def code(self, device="cpu") -> str:
        """The ``make_input`` call that builds it, for the repro snippets."""
        dev = f", device={device!r}" if device != "cpu" else ""
        values = f", values={self.values!r}" if self.values else ""
        code = (f"make_input({tuple(self.shape)!r}, torch.{self.dtype}, {self.seed}, {self.layout!r}, "
                f"low={self.lo!r}, high={self.hi!r}{dev}{values})")
        return code + (".requires_grad_()" if self.requires_grad else "")


def copy_exactly(src: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A detached copy with the same sizes, strides and offset (and values),
    optionally retyped. Overlapping layouts (expanded: stride 0) can't be
    written element by element, so those copy the whole storage they view."""
    src = src.detach()
    dtype = dtype or src.dtype
    out = torch.empty_strided(src.size(), src.stride(), dtype=dtype, device=src.device)
    try:
        return out.copy_(src)
    except RuntimeError:
        elements = src.untyped_storage().nbytes() // src.element_size()
        flat = torch.empty(0, dtype=src.dtype, device=src.device).set_(src.untyped_storage(), 0, (elements,), (1,))
        storage = flat.to(dtype, copy=True).untyped_storage()
        return torch.empty(0, dtype=dtype, device=src.device).set_(
            storage, src.storage_offset(), src.size(), src.stride())


@dataclass(frozen=True)
class TensorSlot:
    """A tensor leaf of the sample: what variants keep and what they vary."""

    shape: tuple
    dtype: str
    device: str
    lo: float
    hi: float
    requires_grad: bool
    mutable: bool  # the schema says the op writes to it: never expanded, never requires grad


def value_range(t: torch.Tensor) -> tuple[float, float]:
    """The sample's value range, so variants stay in the op's domain
    (indices stay in bounds, logs stay positive)."""
    t = t.detach()
    if t.numel() == 0:
        return (-1.0, 1.0) if t.dtype.is_floating_point else (0.0, 1.0)
    if t.dtype == torch.bool:
        return (0.0, 1.0)
    if t.dtype.is_complex:
        t = t.real
    values = t.to(torch.float64)
    finite = values[torch.isfinite(values)]
    if finite.numel() == 0:
        return (-1.0, 1.0)
    lo, hi = float(finite.min()), float(finite.max())
    if not t.dtype.is_floating_point:
        return (float(math.floor(lo)), float(math.ceil(hi)))
    return (lo, hi)


class Template:
    """The structure of one sample (args, kwargs) and its tensor slots."""

    def __init__(self, args, kwargs, mutable_positions=()):
        self.args, self.kwargs = tuple(args), dict(kwargs or {})
        self.contracts = None  # opcheck.contracts.Contracts, given by check() from all the samples
        self.schema = None  # the op's schema, for argument names
        self.index = 0  # position among the op's samples
        self.worth_checking = True  # False: a recorded call too large to check beside a smaller one (opcheck.api)
        self.axis = ""  # for a sample derived from another (opcheck.arguments): what was changed
        leaves, self.spec = pytree.tree_flatten((self.args, self.kwargs))
        self.leaves = leaves
        self.tensor_positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self.slots = []
        for n, i in enumerate(self.tensor_positions):
            t = leaves[i]
            lo, hi = value_range(t)
            self.slots.append(TensorSlot(
                shape=tuple(t.shape), dtype=dtype_name(t.dtype), device=str(t.device),
                lo=lo, hi=hi, requires_grad=bool(t.requires_grad), mutable=n in mutable_positions,
            ))

    @property
    def structure(self) -> str:
        """Samples of one structure can be compared call by call: the same arguments given,
        the same leaves tensors (a ``None`` is a leaf too, so the spec alone can't tell an
        optional tensor given from one left ``None``). Ranks may differ."""
        return f"{self.spec}; tensors at {self.tensor_positions}"

    def original(self) -> Case:
        return Case(self, None)

    def case(self, inputs, variant=None) -> Case:
        return Case(self, tuple(inputs), variant)

    def names(self) -> list[str]:
        return [f"x{n}" for n in range(len(self.slots))]


class Case:
    """One concrete input. ``inputs is None`` means the sample itself."""

    def __init__(self, template: Template, inputs, variant=None):
        self.template = template
        self.inputs = inputs
        self.variant = variant  # the sweep's opcheck.variants.Variant that built it, if any
        self.info = None  # what it can show a check (variants.info_key), once asked

    @property
    def is_original(self) -> bool:
        return self.inputs is None

    def key(self):
        return ("original",) if self.inputs is None else self.inputs

    def tensor_inputs(self) -> tuple:
        """Specs for every tensor; for the sample, specs describing it."""
        if self.inputs is not None:
            return self.inputs
        return tuple(
            TensorInput(s.shape, s.dtype, "contiguous", s.lo, s.hi, 0, s.requires_grad)
            for s in self.template.slots
        )

    def build(self, *, requires_grad=None, dtype_map=None):
        """Fresh (args, kwargs). ``requires_grad``: None keeps each input's own
        flag, else a set of tensor indices that require grad. ``dtype_map``
        retypes tensors ({old dtype name: new}) keeping shape and layout."""
        leaves = list(self.template.leaves)
        for n, i in enumerate(self.template.tensor_positions):
            if self.inputs is None:
                t = copy_exactly(leaves[i])
                want_grad = self.template.slots[n].requires_grad
            else:
                t = replace(self.inputs[n], requires_grad=False).build(self.template.slots[n].device)
                want_grad = self.inputs[n].requires_grad
            if dtype_map and dtype_name(t.dtype) in dtype_map:
                t = copy_exactly(t, to_dtype(dtype_map[dtype_name(t.dtype)]))
            if requires_grad is not None:
                want_grad = n in requires_grad
            if want_grad and (t.dtype.is_floating_point or t.dtype.is_complex):
                t = t.detach().requires_grad_()
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, self.template.spec)
        return args, kwargs

    def describe(self) -> str:
        text = self._describe_tensors()
        return f"{text}; {self.template.axis}" if self.template.axis else text

    def _describe_tensors(self) -> str:
        if self.inputs is None:
            parts = []
            for name, position in zip(self.template.names(), self.template.tensor_positions):
                t = self.template.leaves[position]
                text = f"{dtype_name(t.dtype)}{list(t.shape)}"
                if not t.is_contiguous():
                    text += f" strides {list(t.stride())}"
                parts.append(f"{name}: {text}")
            return "the sample: " + (", ".join(parts) or "no tensors")
        return ", ".join(f"{name}: {spec.describe()}" for name, spec in zip(self.template.names(), self.inputs))

    def to_json(self) -> dict:
        return {"inputs": None if self.inputs is None else [asdict(i) for i in self.inputs]}
