"""The Program IR: a small typed program of tensor ops and size-level Python.

A Program renders deterministically to the source of a plain Python function
named ``fn``. That source is what users read and what repro scripts contain,
and it is also what the generator evaluates (on each call's inputs) to check
validity, so the rendered text is the single source of truth for semantics.

Everything here is JSON-serializable through ``to_json``/``from_json`` so a
finding written today replays with next year's version.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from symfuzz.fuzz.ir_check import check_program
# The nodes a program is made of are defined in ir_nodes, below the check of programs
# read from files (ir_check); callers import them from here.
from symfuzz.fuzz.ir_nodes import (  # noqa: F401
    _KIND_OF,
    _NODE_KINDS,
    SCALAR_KINDS,
    SIDE_EFFECTS,
    TRAINING,
    V1_NODES,
    BranchNode,
    CheckNode,
    CondNode,
    EffectNode,
    ExprNode,
    GraphBreakNode,
    Input,
    Node,
    OpNode,
    Param,
    SizeNode,
    live_body,
    node_reads,
    render_node,
)

# v2 added CheckNode, GraphBreakNode, ExprNode and CondNode; v3 added Python
# number and int-list inputs (``Input.kind``); v4 added nn.Module programs
# (``Program.params``). A program is written with the oldest version that
# expresses it, so older readers replay what they can.
IR_VERSION = 4

# The names a rendered program may use besides its own values.
PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\n"


@dataclass(frozen=True)
class Program:
    """A program: ``def fn(<inputs>)``, or (IR v4, when it has ``params``) an
    ``nn.Module`` whose ``forward(self, <inputs>)`` runs the body on its
    parameters and buffers as well (``render``)."""

    inputs: tuple[Input, ...]
    body: tuple[Node, ...]
    outputs: tuple[str, ...]
    params: tuple[Param, ...] = ()

    def live(self) -> "Program":
        """The program without the statements nothing reads and whose effect is not seen
        (``live_body``): what a compiler keeps of it."""
        return dataclasses.replace(self, body=live_body(self.body, self.outputs)[0])

    def ops(self) -> list[str]:
        """Spec names used, in order (with repeats)."""
        return [n.op for n in self.body if isinstance(n, (OpNode, EffectNode))]

    def render(self) -> str:
        """The program as the source of ``def fn(...)``; deterministic. A module
        program renders as ``class Model(torch.nn.Module)`` instead: ``__init__``
        makes its parameters and buffers (``make_input``, from the runtime every
        script carries, for "normal" ones), and ``forward`` first binds each to
        a local of its name (and ``training`` to ``self.training`` when the body
        reads it), then runs the body."""
        if self.params:
            return self._render_module()
        return self._render_function()

    def _render_function(self) -> str:
        lines = [f"def fn({', '.join(i.name for i in self.inputs)}):"]
        lines += ["    " + line for line in self._body_lines()]
        return "\n".join(lines) + "\n"

    def _body_lines(self) -> list[str]:
        lines = []
        for node in self.body:
            lines.extend(render_node(node))
        outs = ", ".join(self.outputs)
        lines.append(f"return ({outs},)" if len(self.outputs) == 1 else f"return ({outs})")
        return lines

    def _render_module(self) -> str:
        lines = ["class Model(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
        lines += ["        " + _param_line(p) for p in self.params]
        lines += ["", f"    def forward({', '.join(['self'] + [i.name for i in self.inputs])}):"]
        lines += [f"        {p.name} = self.{p.name}" for p in self.params]
        if any(TRAINING in node_reads(node) for node in self.body):
            lines.append(f"        {TRAINING} = self.training")
        lines += ["        " + line for line in self._body_lines()]
        return "\n".join(lines) + "\n"

    def ir_version(self) -> int:
        """The oldest IR version that can express this program."""
        if self.params:
            return 4
        if any(not i.is_tensor for i in self.inputs):
            return 3
        return 1 if all(isinstance(n, V1_NODES) for n in self.body) else 2

    def to_json(self) -> dict:
        data = {
            "ir_version": self.ir_version(),
            "inputs": [_input_to_json(i) for i in self.inputs],
            "body": [_node_to_json(n) for n in self.body],
            "outputs": list(self.outputs),
        }
        if self.params:
            data["params"] = [_param_to_json(p) for p in self.params]
        return data

    @staticmethod
    def from_json(data: dict) -> "Program":
        """The program ``to_json`` wrote. It is checked (``check_program``): a program read
        from a file is rendered into scripts that run, so anything but what the generator
        writes raises ValueError naming the field."""
        version = data.get("ir_version", IR_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"program: ir_version must be a whole number, got {version!r:.40}")
        if version > IR_VERSION:
            raise ValueError(
                f"program was written by a newer symfuzz (IR v{data['ir_version']}, this one reads v{IR_VERSION}); upgrade symfuzz"
            )
        for name in ("inputs", "body", "outputs"):
            if not isinstance(data.get(name), list):
                raise ValueError(f"program: {name} must be a list, got {type(data.get(name)).__name__}")
        program = Program(
            inputs=tuple(_input_from_json(d, i) for i, d in enumerate(data["inputs"])),
            body=tuple(_node_from_json(n, i) for i, n in enumerate(data["body"])),
            outputs=tuple(data["outputs"]),
            params=_params_from_json(data.get("params", [])),
        )
        check_program(program)
        return program



def _node_to_json(node: Node) -> dict:
    data = {"kind": _KIND_OF[type(node)]}
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        data[name] = list(value) if isinstance(value, tuple) else value
    return data


def _input_to_json(inp: Input) -> dict:
    data = {"name": inp.name, "dtype": inp.dtype, "dims": list(inp.dims)}
    if not inp.is_tensor:
        data["kind"] = inp.kind
    return data


def _param_line(p: Param) -> str:
    """``__init__``'s line that makes ``p`` (its fields checked by ``check_program``)."""
    shape = repr(tuple(int(d) for d in p.dims))
    if p.init == "normal":
        value = f"make_input({shape}, torch.{p.dtype}, {int(p.seed)})"
    else:
        value = f"torch.{p.init}({shape}, dtype=torch.{p.dtype})"
    if p.kind == "buffer":
        return f"self.register_buffer({p.name!r}, {value})"
    frozen = "" if p.requires_grad else ", requires_grad=False"
    return f"self.{p.name} = torch.nn.Parameter({value}{frozen})"


def _param_to_json(p: Param) -> dict:
    data = {"name": p.name, "dtype": p.dtype, "dims": list(p.dims), "kind": p.kind, "seed": p.seed, "init": p.init}
    if p.kind == "parameter" and not p.requires_grad:
        data["requires_grad"] = False
    return data


_PARAM_FIELDS = {"name", "dtype", "dims", "kind", "seed", "init", "requires_grad"}


def _params_from_json(data) -> tuple:
    if not isinstance(data, list):
        raise ValueError(f"program: params must be a list, got {type(data).__name__}")
    out = []
    for index, item in enumerate(data):
        if not isinstance(item, dict) or not {"name", "dtype", "dims", "kind"} <= set(item) <= _PARAM_FIELDS:
            raise ValueError(f"program: param {index} must be an object with name, dtype, dims and kind (and maybe "
                             "seed, init, requires_grad)")
        if not isinstance(item["dims"], list):
            raise ValueError(f"program: param {index}: dims must be a list")
        requires_grad = item.get("requires_grad", True) if item["kind"] == "parameter" else False
        out.append(Param(item["name"], item["dtype"], tuple(item["dims"]), item["kind"], item.get("seed", 0),
                         item.get("init", "normal"), requires_grad))
    return tuple(out)


def _input_from_json(data, index: int) -> Input:
    if not isinstance(data, dict) or not {"name", "dtype", "dims"} <= set(data) <= {"name", "dtype", "dims", "kind"}:
        raise ValueError(f"program: input {index} must be an object with name, dtype and dims (and maybe kind)")
    if not isinstance(data["dims"], list):
        raise ValueError(f"program: input {index}: dims must be a list")
    kind = data.get("kind", "tensor")
    if kind != "tensor" and kind not in SCALAR_KINDS:
        raise ValueError(f"program: input {index}: kind {kind!r:.40} is not tensor or one of {', '.join(SCALAR_KINDS)}")
    if kind != "tensor" and (data["dims"] or data["dtype"] != SCALAR_KINDS[kind]):
        raise ValueError(f"program: input {index}: a {kind} input has no dims and dtype {SCALAR_KINDS[kind]}")
    return Input(data["name"], data["dtype"], tuple(data["dims"]), kind)


def _node_from_json(data, index: int) -> Node:
    if not isinstance(data, dict):
        raise ValueError(f"program: body[{index}] must be an object")
    data = dict(data)
    kind = data.pop("kind", None)
    cls = _NODE_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"program: body[{index}]: kind {kind!r:.40} is not a node kind this symfuzz knows "
                         f"({', '.join(_NODE_KINDS)}); it may come from a newer symfuzz")
    fields = cls.__dataclass_fields__
    required = {n for n, f in fields.items() if f.default is f.default_factory is dataclasses.MISSING}
    unknown, missing = sorted(set(data) - set(fields)), sorted(required - set(data))
    if unknown or missing:
        raise ValueError(f"program: body[{index}] ({kind} node): "
                         + (f"unknown field {unknown[0]!r:.40}" if unknown else f"field {missing[0]!r} is missing"))
    for name in ("args", "operands"):
        if name in data:
            if not isinstance(data[name], list):
                raise ValueError(f"program: body[{index}] ({kind} node): {name} must be a list")
            data[name] = tuple(data[name])
    return cls(**data)

