"""Reading programs safely: ``check_program`` and what a program may say.

A program read from a file (a finding, a baseline entry, a stored corpus case) is
rendered into the scripts symfuzz runs and executed by campaign workers, so it may
say only what the generator says: values named like identifiers, expressions built
from the program's own values, the modules ``PRELUDE`` imports, a few builtins and
the attributes the specs and the generator write. ``check_program`` refuses anything
else with a ValueError naming the node and the field.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import re
from typing import Optional

from symfuzz.fuzz.ir_nodes import (
    _KIND_OF,
    CHECK_FORMS,
    PARAM_INITS,
    PARAM_KINDS,
    TRAINING,
    BranchNode,
    CheckNode,
    CondNode,
    EffectNode,
    ExprNode,
    Node,
    OpNode,
    SizeNode,
    render_node,
)
from symfuzz.fuzz.specs import get_spec
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT

# The names a program may read besides its own values.
MODULES = frozenset({"math", "torch", "F"})
BUILTINS = frozenset({"abs", "bool", "divmod", "float", "int", "len", "list", "max", "min", "range", "sorted", "sum"})

# Every attribute the generator (fuzz/generate.py and the modules it draws through) and
# the specs (fuzz/specs/) write: tensor methods, torch/F/math functions, dtypes.
# tests/test_no_injection.py checks that the attributes the generator's source mentions
# are all here, and that none of these reaches a module such as ``torch.os``: add a
# spec's new attribute here.
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


def _check_params(program) -> None:
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


def check_program(program) -> None:
    """ValueError, naming the node and the field, unless ``program`` (an ``ir.Program``) is
    made only of what the generator writes (see ``ATTRIBUTES``, ``BUILTINS``, ``MODULES``)."""
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
