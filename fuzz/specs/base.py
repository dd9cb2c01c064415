"""What an op spec is.

A spec is declarative: which operands it accepts (dtype kinds, ranks, how
later operands relate to the first), how to draw its parameters, how it
renders to source, and how its output shape follows from its inputs. The
generator checks every drawn statement by evaluating its rendered source on
the tensors of every "world" (one per call of the schedule: the call's own
seeded CPU inputs), so a spec never needs to be exact about validity;
``shape`` is cross-checked against those results by the unit tests. Ops
whose output shape depends on values (the data-dependent family) declare no
``shape`` rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import hypothesis.strategies as st

FLOAT = "float"
INT = "int"
BOOL = "bool"
ANY_KIND = frozenset({FLOAT, INT, BOOL})
NUMERIC = frozenset({FLOAT, INT})
FLOATING = frozenset({FLOAT})

DTYPE_KIND = {
    "float32": FLOAT,
    "float64": FLOAT,
    "float16": FLOAT,
    "bfloat16": FLOAT,
    "int32": INT,
    "int64": INT,
    "bool": BOOL,
}

Shape = tuple[int, ...]

# OpSpec.backward: how an op's gradient behaves (see OpSpec), mildest first.
BACKWARD_CLASSES = ("ok", "ties", "undefined", "nondeterministic")


@dataclass(frozen=True)
class Operand:
    """A live tensor value as the generator sees it: one shape per world."""

    name: str
    dtype: str
    shapes: tuple[Shape, ...]

    @property
    def rank(self) -> int:
        return len(self.shapes[0])

    @property
    def kind(self) -> str:
        return DTYPE_KIND[self.dtype]

    def sizes(self, dim: int) -> tuple[int, ...]:
        """This dim's size in every world."""
        return tuple(s[dim] for s in self.shapes)

    def min_size(self, dim: int) -> int:
        return min(self.sizes(dim))

    def numels(self) -> tuple[int, ...]:
        out = []
        for shape in self.shapes:
            n = 1
            for s in shape:
                n *= s
            out.append(n)
        return tuple(out)


@dataclass(frozen=True)
class ScalarInput:
    """A Python number or int-list input of the program, as the generator sees
    it: its kind (``ir.SCALAR_KINDS``: "int", "float", "bool", "ints") and its
    value in every world (the call's argument)."""

    name: str
    kind: str
    values: tuple


# Shape rules of specs that use a scalar input find its value in the world
# they evaluate under this params key (the generator adds it; it is never
# stored in a program's params).
SCALAR_VALUES = "_scalars"


def scalar_value(params: dict, name: str):
    """The value of scalar input ``name`` in the world a shape rule evaluates."""
    return params[SCALAR_VALUES][name]


class ParamContext:
    """What a spec's ``params`` function may use.

    ``draw`` draws from a Hypothesis strategy. ``size_ref(operand, dim)``
    returns Python source for that size (hoisting ``n = x.size(d)`` into the
    program as size-level code when the generator chooses to), and
    ``size_vars`` maps existing int variables to their per-world values, and
    ``world_values(name)`` gives a value's tensor in every world (the
    seeded CPU values the calls will see; for checks a plain run would not
    make before mutating, such as overlapping writes).
    ``scalars`` are the program's Python number and int-list inputs
    (``ScalarInput``); ``scalar(kinds, accept)`` draws one whose values
    (one per world) ``accept`` takes, or None: a spec that uses one where
    torch takes a number or a size stays valid without any.
    """

    def __init__(self, draw, operands: Sequence[Operand], size_ref, size_vars, world_values=lambda name: [],
                 scalars: Sequence[ScalarInput] = ()):
        self.draw = draw
        self.operands = operands
        self.size_ref = size_ref
        self.size_vars = size_vars  # name -> per-world values
        self.world_values = world_values
        self.scalars = tuple(scalars)

    def scalar(self, kinds=("int",), accept=lambda values: True) -> Optional[ScalarInput]:
        """A scalar input of one of ``kinds`` whose values (one per world, a
        tuple) ``accept`` takes, drawn; None when there is none, and most of
        the time anyway (the draw shrinks toward None, the spec's own choice)."""
        fits = [s for s in self.scalars if s.kind in kinds and accept(tuple(s.values))]
        if not fits or self.draw(st.integers(0, 2)) != 2:
            return None
        return self.draw(st.sampled_from(fits))


def no_params(ctx: ParamContext) -> dict:
    return {}


@dataclass(frozen=True)
class OpSpec:
    """One torch op (or one calling form of it).

    name: the op's id, also the key counted in stats.
    template: ``str.format`` text; ``{0}``, ``{1}``... are operands, other
        fields come from ``params``.
    arity: tensor operands. Operands after the first follow ``partner``.
    kinds / min_rank / max_rank: what the first operand must be.
    partner: how operands 2..arity relate to the first: "broadcast" (a
        broadcastable shape), "same" (the same shape), "scalar-ok" (broadcast,
        or a Python number), or a callable giving the required per-world shape.
    shape: output shape from operand shapes (one world) and params; None for
        statements that only mutate, and for ops whose output shape depends
        on values (nonzero, unique...), which no shape rule can predict.
    effect: True for in-place statements (rendered without assignment).
    needs_nonempty: operand dims that must be nonzero in every world.
    value_sized: True when the output's sizes come from the operand's
        *values* (nonzero, unique, a size read with ``.item()``): compiled,
        they are unbacked symbols, which size-level Python must not branch on.
    dynamo_config: ``torch._dynamo.config`` flags a program using this op
        needs to be compiled without a graph break, e.g.
        ``{"capture_scalar_outputs": True}`` for ``.item()``; a schedule sets
        the union over its program's ops (``specs.required_dynamo_config``).
    backward: how the op's gradient behaves, for the gradient oracle
        (``fuzz/gradients.py``; ``BACKWARD_CLASSES``): "ok" (smooth where
        data lands, or no gradient flows through its output); "ties" (it
        jumps where values tie or cross a kink or step: max, sort, pooling
        pick one of equal values, relu/abs/clamp/maximum switch sides,
        floor/round step; eager and Inductor agree at exact ties, but a tie
        that compiled rounding breaks sends the gradient elsewhere, so such
        programs keep gradients only when nudging their inputs leaves the
        gradients unchanged); "undefined" (no usable derivative: autograd
        raises, or the formula is meaningless) and "nondeterministic" (the
        backward's result depends on the order of a race, e.g. duplicate
        indices written by a scatter): programs using those never get
        gradients.
    """

    name: str
    family: str
    template: str
    arity: int = 1
    kinds: frozenset = ANY_KIND
    min_rank: int = 0
    max_rank: int = 5
    partner: Any = "broadcast"
    partner_kinds: Optional[frozenset] = None
    params: Callable[[ParamContext], dict] = no_params
    shape: Optional[Callable[[Sequence[Shape], dict], Shape]] = None
    effect: bool = False
    weight: float = 1.0
    nonempty: bool = False
    value_sized: bool = False
    dynamo_config: dict = field(default_factory=dict, compare=False)
    notes: str = field(default="", compare=False)
    backward: str = "ok"

    def __post_init__(self):
        if self.backward not in BACKWARD_CLASSES:
            raise ValueError(f"op spec {self.name!r}: backward {self.backward!r} is not one of {BACKWARD_CLASSES}")

    def accepts(self, operand: Operand) -> bool:
        if operand.kind not in self.kinds:
            return False
        if not (self.min_rank <= operand.rank <= self.max_rank):
            return False
        if self.nonempty and 0 in operand.numels():
            return False
        return True

    def render(self, args: Sequence[str], params: dict) -> str:
        return self.template.format(*args, **params)


# ----------------------------------------------------------- casting

SATURATE = 1 << 20  # well inside every integer dtype we generate


def cast_suffix(src_dtype: str, dst_dtype: str) -> str:
    """Source to append to a value of ``src_dtype`` to cast it to ``dst_dtype``.

    Converting NaN, inf or an out-of-range float to an integer is undefined
    behaviour in C++: eager and compiled code may legitimately disagree, and
    such a "finding" would be false. Float-to-integer casts saturate first.
    """
    if src_dtype == dst_dtype:
        return ""
    if DTYPE_KIND[src_dtype] == FLOAT and DTYPE_KIND[dst_dtype] == INT:
        return f".nan_to_num(0.0).clamp({-SATURATE}, {SATURATE}).to(torch.{dst_dtype})"
    return f".to(torch.{dst_dtype})"


# ----------------------------------------------------------- shape helpers


def broadcast(shapes: Sequence[Shape], params: dict | None = None) -> Shape:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        non_one = [x for x in sizes if x != 1]
        out.append(non_one[0] if non_one else 1)
    return tuple(out)


def same_as_first(shapes: Sequence[Shape], params: dict | None = None) -> Shape:
    return tuple(shapes[0])


def wrap_dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def draw_dim(ctx: ParamContext, operand: int = 0, allow_negative: bool = True) -> int:
    """A valid dim of an operand, sometimes negative."""
    rank = max(ctx.operands[operand].rank, 1)
    lo = -rank if allow_negative else 0
    return ctx.draw(st.integers(lo, rank - 1))
