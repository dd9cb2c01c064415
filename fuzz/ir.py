"""The Program IR: a small typed program of tensor ops and size-level Python.

A Program renders deterministically to the source of a plain Python function
named ``fn``. That source is what users read and what repro scripts contain,
and it is also what the generator evaluates (on meta tensors) to check
validity, so the rendered text is the single source of truth for semantics.

Everything here is JSON-serializable through ``to_json``/``from_json`` so a
finding written today replays with next year's version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

IR_VERSION = 1

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


Node = Union[OpNode, SizeNode, BranchNode, EffectNode]


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

    def to_json(self) -> dict:
        return {
            "ir_version": IR_VERSION,
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
    # Imported here: specs import this module for the node types.
    from .specs import get_spec

    if isinstance(node, OpNode):
        return [f"{node.out} = {get_spec(node.op).render(node.args, node.params)}"]
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
    raise TypeError(f"not a program node: {node!r}")


_NODE_KINDS = {"op": OpNode, "size": SizeNode, "branch": BranchNode, "effect": EffectNode}
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
    if "args" in data:
        data["args"] = tuple(data["args"])
    return cls(**data)
