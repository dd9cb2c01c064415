"""The Program IR: a small typed program of tensor ops and size-level Python.

A Program renders deterministically to the source of a plain Python function
named ``fn``. That source is what users read and what repro scripts contain,
and it is also what the generator evaluates (on each call's inputs) to check
validity, so the rendered text is the single source of truth for semantics.

Everything here is JSON-serializable through ``to_json``/``from_json`` so a
finding written today replays with next year's version.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from symfuzz.fuzz.specs import get_spec
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT

# v2 added CheckNode, GraphBreakNode, ExprNode and CondNode; v3 added Python
# number and int-list inputs (``Input.kind``); v4 added nn.Module programs
# (``Program.params``). A program is written with the oldest version that
# expresses it, so older readers replay what they can.
IR_VERSION = 4

# What a parameter of ``fn`` may be besides a tensor, with the dtype its Input
# records (the dtype of the tensor torch would make of it).
SCALAR_KINDS = {"int": "int64", "float": "float64", "bool": "bool", "ints": "int64"}

# The names a rendered program may use besides its own values.
PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\n"


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


@dataclass(frozen=True)
class Program:
    """A program: ``def fn(<inputs>)``, or (IR v4, when it has ``params``) an
    ``nn.Module`` whose ``forward(self, <inputs>)`` runs the body on its
    parameters and buffers as well (``render``)."""

    inputs: tuple[Input, ...]
    body: tuple[Node, ...]
    outputs: tuple[str, ...]
    params: tuple[Param, ...] = ()

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


# ---------------------------------------------------------------- reading programs safely
#
# A program read from a file (a finding, a baseline entry, a stored corpus case) is
# rendered into the scripts symfuzz runs and executed by campaign workers, so it may
# say only what the generator says: values named like identifiers, expressions built
# from the program's own values, the modules ``PRELUDE`` imports, a few builtins and
# the attributes the specs and the generator write. ``check_program`` refuses anything
# else with a ValueError naming the node and the field.

# The names a program may read besides its own values.
MODULES = frozenset({"math", "torch", "F"})
BUILTINS = frozenset({"abs", "bool", "divmod", "float", "int", "len", "list", "max", "min", "range", "sorted", "sum"})

# Every attribute the generator (fuzz/generate.py) and the specs (fuzz/specs/) write:
# tensor methods, torch/F/math functions, dtypes. tests/test_no_injection.py checks
# that the attributes the generator's source mentions are all here, and that none of
# these reaches a module such as ``torch.os``: add a spec's new attribute here.
ATTRIBUTES = frozenset({
    '_check', '_check_is_size', '_dynamo', 'abs', 'abs_', 'adaptive_avg_pool1d', 'adaptive_avg_pool2d',
    'adaptive_max_pool2d', 'add', 'add_', 'addcmul', 'addcmul_', 'addmm', 'all', 'amax', 'amin', 'any', 'arange',
    'argmax', 'argmin', 'argwhere', 'atan2', 'avg_pool1d', 'avg_pool2d', 'baddbmm', 'batch_norm', 'bfloat16',
    'bitwise_not', 'bitwise_xor', 'bmm', 'bool', 'cat', 'ceil', 'chunk', 'clamp', 'clamp_', 'clone', 'cond',
    'contiguous', 'contiguous_format', 'conv1d', 'conv2d', 'conv_transpose1d', 'copy_', 'copysign', 'cos',
    'cosine_similarity', 'count_nonzero', 'cross_entropy', 'cummax', 'cumprod', 'cumsum', 'cumsum_', 'detach', 'device',
    'diagonal', 'dim', 'div', 'div_', 'dot', 'dropout', 'dtype', 'einsum', 'elu', 'embedding', 'eq', 'erf', 'exp',
    'exp_', 'expand', 'expm1', 'eye', 'fill_', 'flatten', 'flip', 'float16', 'float32', 'float64', 'floor',
    'floor_', 'floor_divide', 'frac', 'full', 'full_like', 'functional', 'gather', 'ge', 'gelu', 'glu',
    'graph_break', 'group_norm', 'index_add', 'index_add_', 'index_copy_', 'index_fill_', 'index_select', 'inf',
    'instance_norm', 'int32', 'int64', 'interpolate', 'isnan', 'item', 'kron', 'layer_norm', 'leaky_relu', 'lerp',
    'lerp_', 'linalg', 'linear', 'linspace', 'log', 'log1p', 'log2', 'log_softmax', 'logcumsumexp', 'logical_and',
    'logical_not', 'logical_or', 'logsumexp', 'long', 'lt', 'mT', 'masked_fill', 'masked_fill_', 'masked_select',
    'matmul', 'max', 'max_pool1d', 'max_pool2d', 'maximum', 'mean', 'min', 'minimum', 'mm', 'movedim', 'mse_loss',
    'mul', 'mul_', 'mv', 'nan_to_num', 'narrow', 'neg', 'neg_', 'new_full', 'new_ones', 'new_zeros', 'nn',
    'nonzero', 'norm', 'normalize', 'numel', 'one_hot', 'ones', 'ones_like', 'outer', 'pad', 'permute',
    'pixel_shuffle', 'pixel_unshuffle', 'pow',
    'pow_', 'preserve_format', 'prod', 'reciprocal', 'relu', 'relu_', 'remainder', 'repeat', 'repeat_interleave',
    'reshape', 'rms_norm', 'roll', 'round', 'rsqrt', 'scaled_dot_product_attention', 'scatter', 'scatter_add',
    'select', 'shape', 'sigmoid', 'sigmoid_', 'sign', 'silu', 'sin', 'sin_', 'size', 'smooth_l1_loss', 'softmax',
    'softmin', 'softplus', 'sort', 'split', 'sqrt', 'square', 'square_', 'squeeze', 'stack', 'std', 'sub', 'sub_',
    'sum', 'sym_float', 'sym_int', 'sym_max', 'sym_min', 't', 'tanh', 'tanh_', 'tensor', 'tensordot', 'tile', 'to',
    'tolist', 'topk', 'trace', 'transpose',
    'tril', 'triu', 'trunc', 'unbind', 'unflatten', 'unfold', 'unique', 'unsqueeze', 'values', 'var', 'vecdot',
    'vector_norm', 'view', 'where', 'zero_', 'zeros', 'zeros_like',
})

# Attributes only a module program's class scaffold writes (``Program.render``: ``__init__``
# and the first lines of ``forward``, made from checked params), never a body: not allowed there.
SCAFFOLD_ATTRIBUTES = frozenset({"Module", "Parameter", "__init__", "register_buffer", "training"})

# The syntax a rendered program uses. No imports, loops, comprehensions, dicts,
# classes, del, global, with, try, yield, await, walrus, f-strings.
_SYNTAX = (
    ast.Module, ast.Expression, ast.FunctionDef, ast.Return, ast.Assign, ast.AugAssign, ast.If, ast.Assert, ast.Expr,
    ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Compare, ast.Call, ast.keyword, ast.Constant,
    ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice, ast.arguments, ast.arg,
    ast.Load, ast.Store, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)
_CONSTANTS = (int, float, str, type(None), type(...))  # bool is an int
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELDS = re.compile(r"\{\{|\}\}|\{(?:[0-9]|out)\}")
_BRACES = re.compile(r"[{}]")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
# Names a program's own values may not take: they would shadow what it reads.
_RESERVED = frozenset(dir(builtins)) | MODULES | {"fn", "self", TRAINING}


def _problem(message: str) -> ValueError:
    return ValueError(f"program: {message}")


def _never(what: str) -> str:
    return f"{what}, which a generated program never does"


def _name_problem(value) -> Optional[str]:
    """Why ``value`` cannot name a value of a program (None: it can)."""
    if not isinstance(value, str):
        return f"must be a name (a string), got {type(value).__name__}"
    if not _IDENTIFIER.fullmatch(value) or keyword.iskeyword(value) or value.startswith("__") or value in _RESERVED:
        return (f"{value[:60]!r} is not a name a generated program uses (an identifier, not a keyword, "
                "a builtin, a module or a dunder)")
    return None


def _check_name(value, where: str) -> None:
    problem = _name_problem(value)
    if problem:
        raise _problem(f"{where}: {problem}")


def _where(node: Node, index: int) -> str:
    kind = _KIND_OF[type(node)]
    out = getattr(node, "out", None)
    return f"{kind} node {out}" if isinstance(out, str) and _name_problem(out) is None else f"{kind} node body[{index}]"


def _syntax_problem(tree: ast.AST, known: set) -> Optional[str]:
    """What in ``tree`` a generated program never writes (None: nothing), given the
    names ``known`` that the program binds. Of several, a dunder is told first, then
    syntax, then a name, then the rest; the first in the text among equals."""
    found = []
    for node in ast.walk(tree):
        problem = _node_problem(node, known)
        if problem:
            rank = 0 if "'__" in problem else 1 if problem.endswith("syntax") else 2 if problem.startswith("'") else 3
            found.append((rank, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), problem))
    return min(found)[3] if found else None


def _node_problem(node: ast.AST, known: set) -> Optional[str]:
    if not isinstance(node, _SYNTAX):
        return f"{type(node).__name__.lower()} syntax"
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Store):
            if _name_problem(node.id):
                return f"the name {node.id!r:.60} as a target"
        elif node.id not in known and node.id not in MODULES and node.id not in BUILTINS:
            return f"{node.id!r:.60}"
    elif isinstance(node, ast.Attribute) and node.attr not in ATTRIBUTES:
        return f"the attribute {node.attr!r:.60}"
    elif isinstance(node, ast.Constant) and not isinstance(node.value, _CONSTANTS):
        return f"a {type(node.value).__name__} constant"
    elif isinstance(node, ast.keyword) and (node.arg is None or node.arg.startswith("_")):
        return "keyword unpacking" if node.arg is None else f"the keyword {node.arg!r:.60}"
    elif isinstance(node, ast.arguments):
        plain = not (node.posonlyargs or node.vararg or node.kwonlyargs or node.kwarg or node.defaults
                     or node.kw_defaults)
        if not plain or any(a.annotation is not None or _name_problem(a.arg) for a in node.args):
            return "parameters other than plain names"
    elif isinstance(node, ast.FunctionDef):
        if (node.decorator_list or node.returns is not None or getattr(node, "type_params", None)
                or _name_problem(node.name)):
            return f"the function {node.name!r:.60}"
        if len(node.body) != 1 or not isinstance(node.body[0], ast.Return) or node.body[0].value is None:
            return f"a function {node.name!r:.60} that is not one return statement"
    elif isinstance(node, ast.Assign) and not all(isinstance(t, (ast.Name, ast.Subscript)) for t in node.targets):
        return "an assignment to something other than a name or an item"
    elif isinstance(node, ast.AugAssign) and not isinstance(node.target, (ast.Name, ast.Subscript)):
        return "an augmented assignment to something other than a name or an item"
    return None


def _bound(tree: ast.AST) -> set:
    """The names ``tree`` binds: assignment targets, functions, parameters."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def _parse(text: str, mode: str = "exec") -> Optional[ast.AST]:
    try:
        return ast.parse(text, mode=mode)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return None


def _expression_fields(node: Node) -> list[tuple[str, str]]:
    """(field, text) of the fields of ``node`` that hold one Python expression."""
    if isinstance(node, (SizeNode, ExprNode)):
        return [("expr", node.expr)]
    if isinstance(node, BranchNode):
        return [("cond", node.cond), ("then", node.then), ("orelse", node.orelse)]
    if isinstance(node, CheckNode):
        return [("cond", node.cond)]
    if isinstance(node, CondNode):
        return [("pred", node.pred), ("then", node.then), ("orelse", node.orelse)]
    return []


def _check_fields(node: Node, where: str) -> None:
    """Each field of ``node`` has the type and form the generator gives it."""
    if hasattr(node, "out"):
        _check_name(node.out, f"{where}: out")
    for name, text in _expression_fields(node):
        if not isinstance(text, str) or not text.strip() or not text.isprintable():
            raise _problem(f"{where}: {name} must be one line of Python, got {text!r:.80}")
    if isinstance(node, CheckNode) and node.form not in CHECK_FORMS:
        raise _problem(f"{where}: form {node.form!r:.40} is not one of {', '.join(CHECK_FORMS)}")
    if isinstance(node, CondNode):
        if node.style not in ("lambda", "def"):
            raise _problem(f"{where}: style {node.style!r:.40} is not 'lambda' or 'def'")
        if not node.operands:
            raise _problem(f"{where}: operands is empty")
        for i, operand in enumerate(node.operands):
            _check_name(operand, f"{where}: operands[{i}]")
    if isinstance(node, (OpNode, EffectNode)):
        if not isinstance(node.op, str):
            raise _problem(f"{where}: op must be a string, got {type(node.op).__name__}")
        try:
            get_spec(node.op)
        except KeyError:
            raise _problem(f"{where}: no op spec named {node.op!r:.60}; this finding may come from a newer "
                           "symfuzz") from None
        for i, arg in enumerate(node.args):
            if not (isinstance(arg, str) and (_NUMBER.fullmatch(arg) or _name_problem(arg) is None)):
                raise _problem(f"{where}: args[{i}]: {arg!r:.60} is neither a value's name nor a number")
        if not isinstance(node.params, dict):
            raise _problem(f"{where}: params must be an object, got {type(node.params).__name__}")
        for key, value in node.params.items():
            if not _IDENTIFIER.fullmatch(key) or key.startswith("__"):
                raise _problem(f"{where}: param name {key!r:.40} is not an identifier")
            if not _plain_param(value):
                raise _problem(f"{where}: param {key!r}: {value!r:.60} is not a number, a string, true/false, "
                               "null or a list of them")
            if isinstance(value, str) and _BRACES.search(_FIELDS.sub("", value)):
                # data-dependent specs format their params' text again: only ``{0}``-style operands and ``{out}``
                raise _problem(f"{where}: param {key!r}: {value!r:.60} holds a format field other than {{0}} or {{out}}")


def _plain_param(value, depth: int = 0) -> bool:
    if isinstance(value, list):
        return depth < 4 and all(_plain_param(v, depth + 1) for v in value)
    return value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and "\x00" not in value)


def _culprit_param(node, known: set, what: str) -> str:
    """Which param of an op node makes its source use ``what``, for messages."""
    quoted = re.search(r"'([^']+)'", what)
    if quoted:
        for key, value in node.params.items():
            if quoted.group(1) in str(value):
                return f"param {key!r}"
    for key, value in node.params.items():  # the param whose text, made harmless, makes it go away
        if isinstance(value, str):
            try:
                tree = _parse("\n".join(render_node(dataclasses.replace(node, params={**node.params, key: "0"}))))
            except (KeyError, IndexError, ValueError, AttributeError, TypeError):
                continue
            if tree is not None and _syntax_problem(tree, known) != what:
                return f"param {key!r}"
    return "params"


# A parameter's or buffer's name: letters then digits (w0, b3), never one of nn.Module's own
# attributes (``training``, ``forward``, ``_parameters``...).
_PARAM_NAME = re.compile(r"[a-z]{1,8}[0-9]{1,6}")


def _check_params(program: Program) -> None:
    """Each parameter and buffer of a module program has the fields the generator gives it."""
    seen = {inp.name for inp in program.inputs}
    for i, p in enumerate(program.params):
        if not isinstance(p.name, str) or not _PARAM_NAME.fullmatch(p.name) or _name_problem(p.name):
            raise _problem(f"param {i}: name {p.name!r:.40} is not a parameter's name (letters then digits, "
                           "like w0)")
        if p.name in seen:
            raise _problem(f"param {p.name}: its name is taken by an input or another param")
        seen.add(p.name)
        if p.kind not in PARAM_KINDS:
            raise _problem(f"param {p.name}: kind {p.kind!r:.40} is not one of {', '.join(PARAM_KINDS)}")
        if p.dtype not in DTYPE_KIND:
            raise _problem(f"param {p.name}: dtype {p.dtype!r:.40} is not one symfuzz generates "
                           f"({', '.join(DTYPE_KIND)})")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 1 << 16 for d in p.dims) \
                or len(p.dims) > 8:
            raise _problem(f"param {p.name}: dims {list(p.dims)!r:.60} are not sizes (a module's state has fixed "
                           "sizes)")
        if not (isinstance(p.seed, int) and not isinstance(p.seed, bool) and 0 <= p.seed < 1 << 63):
            raise _problem(f"param {p.name}: seed {p.seed!r:.40} is not a whole number")
        if p.init not in PARAM_INITS:
            raise _problem(f"param {p.name}: init {p.init!r:.40} is not one of {', '.join(PARAM_INITS)}")
        if not isinstance(p.requires_grad, bool) or (p.trainable and DTYPE_KIND[p.dtype] != FLOAT):
            raise _problem(f"param {p.name}: requires_grad {p.requires_grad!r:.40} must be true or false, and "
                           "true only for a floating dtype")


def check_program(program: Program) -> None:
    """ValueError, naming the node and the field, unless ``program`` is made only of
    what the generator writes (see ``ATTRIBUTES``, ``BUILTINS``, ``MODULES``)."""
    for i, inp in enumerate(program.inputs):
        _check_name(inp.name, f"input {i}: name")
        if inp.dtype not in DTYPE_KIND:
            raise _problem(f"input {inp.name}: dtype {inp.dtype!r:.40} is not one symfuzz generates "
                           f"({', '.join(DTYPE_KIND)})")
        for d, dim in enumerate(inp.dims):
            symbol = isinstance(dim, str) and _name_problem(dim) is None
            if not (symbol or (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0)):
                raise _problem(f"input {inp.name}: dims[{d}]: {dim!r:.40} is neither a size symbol nor a size")
    for i, out in enumerate(program.outputs):
        _check_name(out, f"outputs[{i}]")
    _check_params(program)
    wheres = [_where(node, i) for i, node in enumerate(program.body)]
    trees = []
    for node, where in zip(program.body, wheres):
        _check_fields(node, where)
        for name, text in _expression_fields(node):
            if _parse(text, "eval") is None:
                raise _problem(f"{where}: {name} {text!r:.80} is not a Python expression")
        try:
            lines = render_node(node)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            raise _problem(f"{where}: its args and params do not fill the template of op {node.op!r} "
                           f"({type(exc).__name__}: {str(exc)[:60]})") from None
        tree = _parse("\n".join(lines))
        if tree is None:
            raise _problem(f"{where}: " + ("its args and params do not render to Python" if isinstance(node, (OpNode, EffectNode))
                                          else "it does not render to Python"))
        trees.append(tree)
    known = {inp.name for inp in program.inputs}.union(*(_bound(t) for t in trees))
    if program.params:  # a module's forward binds its state and ``training`` first
        known |= {p.name for p in program.params} | {TRAINING}
    for node, where, tree in zip(program.body, wheres, trees):
        for name, text in _expression_fields(node):
            what = _syntax_problem(ast.parse(text, mode="eval"), known)
            if what:
                raise _problem(f"{where}: {name} {text!r:.80} uses {_never(what)}")
        what = _syntax_problem(tree, known)
        if what:
            part = f"{_culprit_param(node, known, what)} of op {node.op!r}" if isinstance(node, (OpNode, EffectNode)) else "it"
            raise _problem(f"{where}: {part} renders to code that uses {_never(what)}")
    # The whole source, as scripts hold it: one ``def fn`` of the inputs, the statements, a return.
    # (A module program's class is made from its checked params and this same body.)
    source = program._render_function()
    tree = _parse(source)
    fn = tree.body[0] if tree is not None and len(tree.body) == 1 else None
    if not (isinstance(fn, ast.FunctionDef) and fn.name == "fn" and not fn.decorator_list
            and [a.arg for a in fn.args.args] == [i.name for i in program.inputs]
            and isinstance(fn.body[-1], ast.Return)
            and not any(isinstance(s, ast.Return) for s in fn.body[:-1])):
        raise _problem("it does not render to one function of its inputs")
    what = _syntax_problem(ast.Module(body=fn.body, type_ignores=[]), known)
    if what:
        raise _problem(f"its source uses {_never(what)}")
