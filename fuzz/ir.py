"""The Program IR: a small typed program of tensor ops and size-level Python.

A Program renders deterministically to the source of a plain Python function
named ``fn``. That source is what users read and what repro scripts contain,
and it is also what the generator evaluates (on each call's inputs) to check
validity, so the rendered text is the single source of truth for semantics.

Everything here is JSON-serializable through ``to_json``/``from_json`` so a
finding written today replays with next year's version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from symfuzz.fuzz.specs import get_spec

# v2 added CheckNode, GraphBreakNode, ExprNode and CondNode. A program that
# uses none of them is still written as v1, so older readers replay it.
IR_VERSION = 2

# The names a rendered program may use besides its own values.
PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\n"


@dataclass(frozen=True)
class Input:
    """A tensor parameter of ``fn``.

    ``dims`` ties each dimension to a size symbol (a string such as ``"s0"``)
    or fixes it (an int). Calls in a Schedule assign values to the symbols,
    so dims sharing a symbol are always equal (duck sizing on purpose).
    """

    name: str
    dtype: str
    dims: tuple[Union[str, int], ...]

    @property
    def rank(self) -> int:
        return len(self.dims)


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


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    body: tuple[Node, ...]
    outputs: tuple[str, ...]

    def ops(self) -> list[str]:
        """Spec names used, in order (with repeats)."""
        return [n.op for n in self.body if isinstance(n, (OpNode, EffectNode))]

    def render(self) -> str:
        """The program as the source of ``def fn(...)``; deterministic."""
        lines = [f"def fn({', '.join(i.name for i in self.inputs)}):"]
        for node in self.body:
            lines.extend("    " + line for line in render_node(node))
        outs = ", ".join(self.outputs)
        lines.append(f"    return ({outs},)" if len(self.outputs) == 1 else f"    return ({outs})")
        return "\n".join(lines) + "\n"

    def ir_version(self) -> int:
        """The oldest IR version that can express this program."""
        return 1 if all(isinstance(n, V1_NODES) for n in self.body) else IR_VERSION

    def to_json(self) -> dict:
        return {
            "ir_version": self.ir_version(),
            "inputs": [{"name": i.name, "dtype": i.dtype, "dims": list(i.dims)} for i in self.inputs],
            "body": [_node_to_json(n) for n in self.body],
            "outputs": list(self.outputs),
        }

    @staticmethod
    def from_json(data: dict) -> "Program":
        if data.get("ir_version", IR_VERSION) > IR_VERSION:
            raise ValueError(
                f"program was written by a newer symfuzz (IR v{data['ir_version']}, this one reads v{IR_VERSION}); upgrade symfuzz"
            )
        return Program(
            inputs=tuple(Input(d["name"], d["dtype"], tuple(d["dims"])) for d in data["inputs"]),
            body=tuple(_node_from_json(n) for n in data["body"]),
            outputs=tuple(data["outputs"]),
        )


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


def _node_to_json(node: Node) -> dict:
    data = {"kind": _KIND_OF[type(node)]}
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        data[name] = list(value) if isinstance(value, tuple) else value
    return data


def _node_from_json(data: dict) -> Node:
    data = dict(data)
    cls = _NODE_KINDS[data.pop("kind")]
    for name in ("args", "operands"):
        if name in data:
            data[name] = tuple(data[name])
    return cls(**data)
