"""A Dynamo graph captured from a user's script, as a subject the driver can shrink.

The graph is plain data (see ``minifier.capture``):

- ``inputs``: tensors (``dims`` are ints or expressions over ``symbols``,
  e.g. "s0" or "2*s0"; ``dynamic`` says which symbolic dims the repro marks
  with ``torch._dynamo.mark_dynamic``), scalars, and SymInt inputs
  (``kind: "size"``, derived in the repro as ``x.size(d)`` so they stay
  symbolic);
- ``nodes``: FX call nodes (``call_function`` with an importable dotted
  target, ``call_method``), arguments as JSON with ``{"$node": name}``
  references, and each node's example value (shape with symbolic dims);
- ``output``: the output node's argument;
- ``symbols``: the current value of each size symbol. Every dim is computed
  from them, so dims that share a symbol stay equal while sizes shrink.

The repro is a torch-only script (``corpus.scripts.render_graph_repro``):
the graph as a Python function, seeded inputs (``make_input``) or the
script's saved values, narrowed to the current sizes, the ``mark_dynamic``
lines, ``torch.compile`` with the captured backend, and a judge that prints
``SYMFUZZ-RESULT {json}``. The same text serves as the query script, so the
repro users get is exactly what was checked.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_INVALID, EXIT_REPRODUCED, render_graph_repro

# Saved input values with at most this many elements are written into the script.
EMBED_LIMIT = 64

# operator.* functions that read better as Python operators.
BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
          "matmul": "@", "and_": "&", "or_": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "eq": "==",
          "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
UNARY = {"neg": "-", "pos": "+", "invert": "~"}


# ---------------------------------------------------------------- sizes


def dim_value(dim, symbols: dict) -> int:
    """A dim's current size: an int, or an expression over the symbols."""
    if isinstance(dim, int):
        return dim
    return int(eval(dim, {"__builtins__": {}}, dict(symbols)))  # integer polynomials only (capture.dim_expr)


def input_shape(entry: dict, symbols: dict) -> list[int]:
    return [dim_value(d, symbols) for d in entry["dims"]]


def symbols_of(dim) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", dim)) if isinstance(dim, str) else set()


def tensor_inputs(data: dict) -> list[dict]:
    return [i for i in data["inputs"] if i["kind"] == "tensor"]


def dynamic_dims(data: dict) -> list[tuple[str, int]]:
    """(input name, dim) of every dim the repro marks dynamic."""
    return [(i["name"], d) for i in tensor_inputs(data) for d, dim in enumerate(i["dims"])
            if isinstance(dim, str) and i["dynamic"][d]]


def references(value) -> Iterator[str]:
    """Names of the nodes and inputs an encoded argument refers to."""
    if isinstance(value, list):
        for v in value:
            yield from references(v)
    elif isinstance(value, dict):
        if "$node" in value:
            yield value["$node"]
        for key in ("$tuple", "$slice"):
            if key in value:
                yield from references(value[key])
        if "$dict" in value:
            for _, v in value["$dict"]:
                yield from references(v)


# ---------------------------------------------------------------- the subject


@dataclass(frozen=True)
class GraphSubject:
    data: dict
    kind: str = "graph"

    @classmethod
    def from_record(cls, record: dict, *, accuracy: bool, script: str = "") -> GraphSubject:
        """The subject for one captured graph (``capture`` record)."""
        graph = copy.deepcopy(record["graph"])
        for entry in tensor_inputs(graph):
            if entry.get("values"):
                entry["values"]["dtype"] = entry["dtype"]
        backend = record["backend"]
        data = {
            "backend": {"name": backend["name"], "options": backend.get("options") or {}, "mode": backend.get("mode")},
            "accuracy": accuracy,
            "grad_enabled": record.get("grad_enabled", True),
            "symbols": graph["symbols"],
            "inputs": graph["inputs"],
            "nodes": graph["nodes"],
            "output": graph["output"],
            "origin": {"script": script, "graph": record["index"], "nodes": record["nodes_total"],
                       "status": record["status"], "guards": record.get("guards_after") or record.get("guards") or []},
        }
        return cls(data)

    @classmethod
    def from_json(cls, data: dict) -> GraphSubject:
        return cls(copy.deepcopy(data))

    def to_json(self) -> dict:
        return self.data

    def replace(self, **changes) -> GraphSubject:
        """A copy with some top-level fields replaced (passes edit copies, never self)."""
        data = copy.deepcopy(self.data)
        data.update(changes)
        return GraphSubject(data)

    # -- size

    def measure(self) -> dict:
        data = self.data
        elements = sum(math.prod(input_shape(i, data["symbols"])) for i in tensor_inputs(data))
        return {"ops": len(data["nodes"]), "nodes": len(data["inputs"]) + len(data["nodes"]) + 1,
                "elements": elements, "calls": 1, "dynamic_dims": len(dynamic_dims(data))}

    def cost(self) -> tuple:
        """Fewer nodes first, then fewer outputs, smaller inputs, fewer dynamic
        marks, then simpler inputs (no saved values, float32, no grad)."""
        m = self.measure()
        inputs = tensor_inputs(self.data)
        return (m["nodes"], len(list(references(self.data["output"]))), m["elements"], m["dynamic_dims"],
                sum(1 for i in inputs if i.get("values")),
                sum(1 for i in inputs if i["dtype"] != "float32"),
                sum(1 for i in inputs if i["requires_grad"]),
                self.data["grad_enabled"])

    # -- scripts

    def query_script(self) -> str:
        return render_script(self.data)

    def repro_script(self) -> str:
        return render_script(self.data)


# ---------------------------------------------------------------- rendering


def render_script(data: dict) -> str:
    title, about = _docstring(data)
    return render_graph_repro(
        title=title,
        about=about,
        function=render_function(data),
        make_inputs=render_inputs(data),
        marks=render_marks(data),
        backend=data["backend"]["name"],
        compile_kwargs=_compile_kwargs(data["backend"]),
        grad_enabled=data["grad_enabled"],
        accuracy=data["accuracy"],
        imports=_imports(data),
    )


def _docstring(data: dict) -> tuple[str, str]:
    """The repro's docstring: (title, the rest)."""
    origin = data.get("origin", {})
    marks = ", ".join(f"{name} dim {d}" for name, d in dynamic_dims(data)) or "none"
    what = "a wrong result (compiled differs from eager)" if data["accuracy"] else "a crash"
    title = (f"symfuzz repro: {what} in torch.compile(backend={data['backend']['name']!r}) "
             "on a graph with dynamic shapes.")
    lines = [
        (f"Minified from graph {origin.get('graph', '?')} of {origin.get('script') or 'a script'} "
         f"({origin.get('nodes', '?')} FX nodes); dims marked dynamic: {marks}."),
        f"Run it with plain `python repro.py`: exit {EXIT_REPRODUCED} while the bug is present, {EXIT_FIXED} once it",
        f"is fixed, {EXIT_INVALID} if the program fails in eager too (nothing to judge).",
        "The last line is SYMFUZZ-RESULT {json} for tools.",
    ]
    guards = origin.get("guards") or []
    if guards:
        lines += ["", "Shape guards of the original compile:"] + [f"    {g}" for g in guards[:12]]
        if len(guards) > 12:
            lines.append(f"    ... and {len(guards) - 12} more")
    return title, "\n".join(lines)


def _compile_kwargs(backend: dict) -> str:
    text = ""
    if backend.get("mode"):
        text += f", mode={backend['mode']!r}"
    if backend.get("options"):
        text += f", options={backend['options']!r}"
    return text


def _imports(data: dict) -> list[str]:
    """Import lines for the modules the graph's call targets live in (besides torch)."""
    modules = set()
    for node in data["nodes"]:
        if node["op"] != "call_function":
            continue
        root = node["target"].split(".")[0]
        if root == "_operator":
            name = node["target"].split(".")[-1]
            if name not in BINARY and name not in UNARY and name != "getitem":
                modules.add("operator")
        elif root not in ("torch", "builtins"):
            modules.add(root)
    return [f"import {m}" for m in sorted(modules)]


def render_function(data: dict) -> str:
    params = [i["name"] for i in data["inputs"] if i["kind"] != "size"]
    lines = [f"def fn({', '.join(params)}):"]
    for entry in data["inputs"]:
        if entry["kind"] == "size":
            source, dim = entry["of"]
            lines.append(f"    {entry['name']} = {source}.size({dim})")
    for node in data["nodes"]:
        lines.append(f"    {node['name']} = {render_call(node)}")
    lines.append(f"    return {render_value(data['output'])}")
    return "\n".join(lines)


def render_call(node: dict) -> str:
    args, kwargs = node["args"], node["kwargs"]
    if node["op"] == "call_method":
        rest = [render_value(a) for a in args[1:]] + [f"{k}={render_value(v)}" for k, v in kwargs.items()]
        return f"{render_value(args[0])}.{node['target']}({', '.join(rest)})"
    target = node["target"]
    module, _, name = target.rpartition(".")
    if module == "_operator" and not kwargs:
        if name in BINARY and len(args) == 2:
            return f"{render_value(args[0])} {BINARY[name]} {render_value(args[1])}"
        if name in UNARY and len(args) == 1:
            return f"{UNARY[name]}{render_value(args[0])}"
        if name == "getitem" and len(args) == 2:
            return f"{render_value(args[0])}[{render_index(args[1])}]"
    if module == "_operator":
        target = "operator." + name
    elif module == "builtins":
        target = name
    rendered = [render_value(a) for a in args] + [f"{k}={render_value(v)}" for k, v in kwargs.items()]
    return f"{target}({', '.join(rendered)})"


def render_index(index) -> str:
    """A subscript: slices as a:b:c, tuples without parentheses."""
    if isinstance(index, dict) and "$slice" in index:
        start, stop, step = (("" if v is None else render_value(v)) for v in index["$slice"])
        return f"{start}:{stop}" + (f":{step}" if step else "")
    if isinstance(index, dict) and "$tuple" in index:
        items = [render_index(v) for v in index["$tuple"]]
        if not items:
            return "()"
        return ", ".join(items) + ("," if len(items) == 1 else "")
    return render_value(index)


def render_value(value) -> str:
    """Python source for an encoded argument."""
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if not isinstance(value, dict):
        return repr(value)
    if "$node" in value:
        return value["$node"]
    if "$tuple" in value:
        items = [render_value(v) for v in value["$tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if "$slice" in value:
        return "slice(" + ", ".join(render_value(v) for v in value["$slice"]) + ")"
    if "$dict" in value:
        return "{" + ", ".join(f"{k!r}: {render_value(v)}" for k, v in value["$dict"]) + "}"
    if "$float" in value:
        return f"float({value['$float']!r})"
    if "$ellipsis" in value:
        return "..."
    if "$torch" in value:
        return value["$torch"]
    if "$device" in value:
        return f"torch.device({value['$device']!r})"
    return f"None  # could not rebuild: {value.get('$unsupported', value)!r}"


def render_inputs(data: dict) -> str:
    params = [i for i in data["inputs"] if i["kind"] != "size"]
    lines = ['def make_inputs():',
             '    """Fresh inputs: seeded values, or the script\'s own values narrowed to these sizes."""']
    for entry in params:
        if entry["kind"] == "scalar":
            lines.append(f"    {entry['name']} = {entry['value']!r}")
        else:
            lines.append(f"    {entry['name']} = {tensor_expr(entry, data['symbols'])}")
    names = ", ".join(p["name"] for p in params)
    lines.append(f"    return [{names}]")
    return "\n".join(lines)


def tensor_expr(entry: dict, symbols: dict) -> str:
    shape = input_shape(entry, symbols)
    dtype = "torch." + entry["dtype"]
    values = entry.get("values")
    if values and _narrowable(values["shape"], shape):
        expr = _literal(values, shape) or f"torch.load({values['path']!r}, weights_only=True)" + _narrowing(values, shape)
        if values.get("dtype", entry["dtype"]) != entry["dtype"]:
            expr += f".to({dtype})"
    else:
        expr = seeded_expr(shape, entry["dtype"], entry["seed"])
    order = entry.get("dim_order") or list(range(len(shape)))
    if order != sorted(order):  # keep the captured memory layout (e.g. a transposed input)
        inverse = [order.index(d) for d in range(len(order))]
        expr += f".permute({', '.join(map(str, order))}).contiguous().permute({', '.join(map(str, inverse))})"
    if entry.get("device", "cpu") != "cpu":
        expr += f".to({entry['device']!r})"
    if entry["requires_grad"]:
        expr += ".requires_grad_()"
    return expr


def _narrowing(values: dict, shape: list) -> str:
    if list(values["shape"]) == shape:
        return ""
    return "[" + ", ".join(f":{n}" for n in shape) + "]"


def _literal(values: dict, shape: list) -> Optional[str]:
    """Small saved values written into the script (so that it needs no file), or None."""
    if math.prod(shape) > EMBED_LIMIT:
        return None
    # deferred: only embedding saved values needs torch, which the minifier's parent does not load otherwise
    import torch

    stored = torch.load(values["path"], weights_only=True)
    tensor = stored[tuple(slice(0, n) for n in shape)]
    if tensor.dtype.is_floating_point and not bool(torch.isfinite(tensor).all()):
        return None  # inf and nan have no literal
    return f"torch.tensor({tensor.tolist()!r}, dtype={stored.dtype})"


def _narrowable(stored: list, shape: list) -> bool:
    return len(stored) == len(shape) and all(n <= s for n, s in zip(shape, stored))


def seeded_expr(shape: list, dtype: str, seed: int) -> str:
    """``make_input`` for a seeded input: floats standard normal, ints in [0, 7]
    (valid as indices into most captured tensors), bools 0 or 1."""
    size = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
    integral = dtype != "bool" and not dtype.startswith(("float", "bfloat", "complex"))
    return f"make_input({size}, torch.{dtype}, {seed}" + (", low=0, high=7)" if integral else ")")


def render_marks(data: dict) -> str:
    position = {p["name"]: k for k, p in enumerate(i for i in data["inputs"] if i["kind"] != "size")}
    lines = []
    for name, dim in dynamic_dims(data):
        entry = next(i for i in data["inputs"] if i["name"] == name)
        expr = entry["dims"][dim]
        lines.append(f"    torch._dynamo.mark_dynamic(inputs[{position[name]}], {dim})  "
                     f"# {name} dim {dim}: {expr} = {dim_value(expr, data['symbols'])}")
    return "\n".join(lines) if lines else "    # no dims marked dynamic"
