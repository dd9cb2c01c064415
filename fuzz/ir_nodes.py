"""The Program IR's pieces: inputs, parameters and statement nodes.

A program (``ir.Program``) is a list of inputs, a body of nodes and its outputs.
This module holds what those are made of and how each node renders to lines of
Python (``render_node``), so that both the program (``ir.py``) and the check of a
program read from a file (``ir_check.py``) build on the same definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from symfuzz.fuzz.specs import get_spec

# What a parameter of ``fn`` may be besides a tensor, with the dtype its Input
# records (the dtype of the tensor torch would make of it).
SCALAR_KINDS = {"int": "int64", "float": "float64", "bool": "bool", "ints": "int64"}


@dataclass(frozen=True)
class Input:
    """A parameter of ``fn``: a tensor, or (IR v3) a Python number or int list.

    ``dims`` ties each dimension to a size symbol (a string such as ``"s0"``)
    or fixes it (an int). Calls in a Schedule assign values to the symbols,
    so dims sharing a symbol are always equal (duck sizing on purpose).
    ``kind`` is "tensor", or one of ``SCALAR_KINDS`` ("int", "float", "bool",
    "ints": a list of ints, e.g. a view's target); those have no dims, and
    each call's ``ArgSpec.value`` gives their value.
    """

    name: str
    dtype: str
    dims: tuple[Union[str, int], ...]
    kind: str = "tensor"

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def rank(self) -> int:
        return len(self.dims)


# What a module program's state holds, and how each tensor starts (IR v4).
PARAM_KINDS = ("parameter", "buffer")
PARAM_INITS = ("normal", "zeros", "ones")
# The name a module program's body reads for ``self.training`` (train or eval mode).
TRAINING = "training"


@dataclass(frozen=True)
class Param:
    """A parameter or buffer of a module program (IR v4): ``self.<name>``.

    Its dims are fixed ints (a module is built once, its state keeps its shape
    across calls); the generator ties them to input dims that are fixed too,
    e.g. a Linear-like weight's in-features to an input's last dim. ``init``
    says how it starts: "normal" is ``make_input(dims, dtype, seed)``, the
    same values the inputs get; "zeros" and "ones" are running statistics'
    starts. A parameter requires grad unless ``requires_grad`` is False (a
    frozen one); a buffer never does.
    """

    name: str
    dtype: str
    dims: tuple[int, ...]
    kind: str = "parameter"
    seed: int = 0
    init: str = "normal"
    requires_grad: bool = True

    @property
    def trainable(self) -> bool:
        return self.kind == "parameter" and self.requires_grad


@dataclass(frozen=True)
class OpNode:
    """``out = <spec rendered with args and params>``; the spec is found by name."""

    out: str
    op: str
    args: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class SizeNode:
    """``out = expr``: a Python int computed from sizes (read, arithmetic)."""

    out: str
    expr: str


@dataclass(frozen=True)
class BranchNode:
    """A Python ``if`` on sizes; both arms assign ``out`` a same-shaped tensor."""

    out: str
    cond: str
    then: str
    orelse: str


@dataclass(frozen=True)
class EffectNode:
    """A statement run for its side effect (in-place update), e.g. ``x0.mul_(2)``."""

    op: str
    args: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class CheckNode:
    """A statement that states a fact about sizes (IR v2).

    ``form`` is "assert" (``assert cond``), "check" (``torch._check(cond)``)
    or "check_is_size" (``torch._check_is_size(cond)``, ``cond`` an int).
    The generator only emits facts that hold at every call of the schedule.
    """

    form: str
    cond: str


CHECK_FORMS = {
    "assert": "assert {}",
    "check": "torch._check({})",
    "check_is_size": "torch._check_is_size({})",
}


@dataclass(frozen=True)
class GraphBreakNode:
    """``torch._dynamo.graph_break()`` (IR v2): splits the compiled graph;
    a no-op when not compiling."""


@dataclass(frozen=True)
class ExprNode:
    """``out = expr`` (IR v2): a tensor from an expression that mixes values
    with size-level Python, e.g. ``x0 / math.sqrt(x0.shape[-1])``."""

    out: str
    expr: str


@dataclass(frozen=True)
class CondNode:
    """``out = torch.cond(pred, true_fn, false_fn, operands)`` (IR v2).

    ``then``/``orelse`` are expressions of the branch parameters ``a0``,
    ``a1``... (bound to ``operands`` in order); both must give tensors of
    the same shape, dtype and strides. ``style`` "lambda" renders the
    branches inline, "def" as nested functions before the call.
    """

    out: str
    pred: str
    operands: tuple[str, ...]
    then: str
    orelse: str
    style: str = "lambda"


Node = Union[OpNode, SizeNode, BranchNode, EffectNode, CheckNode, GraphBreakNode, ExprNode, CondNode]
V1_NODES = (OpNode, SizeNode, BranchNode, EffectNode)


def node_reads(node: Node) -> set[str]:
    """Names (values, sizes) a node's source mentions, except its own output."""
    if isinstance(node, (OpNode, EffectNode)):
        text = " ".join(node.args) + " " + " ".join(str(v) for v in node.params.values())
    elif isinstance(node, SizeNode):
        text = node.expr
    elif isinstance(node, BranchNode):
        text = f"{node.cond} {node.then} {node.orelse}"
    elif isinstance(node, CheckNode):
        text = node.cond
    elif isinstance(node, ExprNode):
        text = node.expr
    elif isinstance(node, CondNode):
        text = f"{node.pred} {' '.join(node.operands)}"
    else:
        text = ""
    return set(re.findall(r"[A-Za-z_]\w*", text)) - {getattr(node, "out", None)}


# Statements whose effect is seen though nothing reads their value.
SIDE_EFFECTS = (EffectNode, CheckNode, GraphBreakNode)
# An expression that writes a tensor in place (a method ending in ``_``, as a buffer's
# running statistics are updated) or, in training mode, batch_norm's running statistics.
_WRITES = re.compile(r"\.[a-z]\w*_\(|batch_norm\(")


def writes_state(node) -> bool:
    """Does ``node`` (an expression) write a tensor in place? Its result may be unread,
    its write is still seen: a module's buffer keeps it for the next call."""
    return isinstance(node, ExprNode) and _WRITES.search(node.expr) is not None


def live_body(body, outputs) -> tuple[tuple, set]:
    """The statements of ``body`` whose value reaches one of ``outputs`` or whose effect is seen
    (in-place writes, checks, graph breaks), in order; and the names they and the outputs read."""
    live = set(outputs)
    kept = []
    for node in reversed(body):
        out = getattr(node, "out", None)
        if isinstance(node, SIDE_EFFECTS) or writes_state(node) or (out is not None and out in live):
            kept.append(node)
            live |= node_reads(node)
    return tuple(reversed(kept)), live


def render_node(node: Node) -> list[str]:
    if isinstance(node, OpNode):
        # A spec's template may put statements before the expression (one per
        # line, e.g. ``torch._check`` hints); ``{out}`` names its helpers.
        *before, expr = get_spec(node.op).render(node.args, {"out": node.out, **node.params}).split("\n")
        return before + [f"{node.out} = {expr}"]
    if isinstance(node, EffectNode):
        return [get_spec(node.op).render(node.args, node.params)]
    if isinstance(node, SizeNode):
        return [f"{node.out} = {node.expr}"]
    if isinstance(node, BranchNode):
        return [
            f"if {node.cond}:",
            f"    {node.out} = {node.then}",
            "else:",
            f"    {node.out} = {node.orelse}",
        ]
    if isinstance(node, CheckNode):
        return [CHECK_FORMS[node.form].format(node.cond)]
    if isinstance(node, GraphBreakNode):
        return ["torch._dynamo.graph_break()"]
    if isinstance(node, ExprNode):
        return [f"{node.out} = {node.expr}"]
    if isinstance(node, CondNode):
        params = ", ".join(f"a{i}" for i in range(len(node.operands)))
        operands = f"({node.operands[0]},)" if len(node.operands) == 1 else f"({', '.join(node.operands)})"
        if node.style == "def":
            return [
                f"def {node.out}_true({params}):",
                f"    return {node.then}",
                f"def {node.out}_false({params}):",
                f"    return {node.orelse}",
                f"{node.out} = torch.cond({node.pred}, {node.out}_true, {node.out}_false, {operands})",
            ]
        return [f"{node.out} = torch.cond({node.pred}, lambda {params}: {node.then}, lambda {params}: {node.orelse}, {operands})"]
    raise TypeError(f"not a program node: {node!r}")


_NODE_KINDS = {
    "op": OpNode,
    "size": SizeNode,
    "branch": BranchNode,
    "effect": EffectNode,
    "check": CheckNode,
    "graph_break": GraphBreakNode,
    "expr": ExprNode,
    "cond": CondNode,
}
_KIND_OF = {v: k for k, v in _NODE_KINDS.items()}
