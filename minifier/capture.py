"""Capture the Dynamo graphs of a user's script, and which of them failed.

The script runs in a fresh process (own session, timeout, its own Inductor
cache) under a small bootstrap (``BOOTSTRAP``) that loads this file by path
and calls ``install``. From then on every graph Dynamo hands to a backend
is written to the capture folder *as it happens*, so a segfault or a hang in
the middle of the script loses nothing:

- ``graph-NNN.json``: the graph as plain data (what ``GraphSubject`` needs to
  rebuild it as a torch-only function), its inputs (shapes with their
  symbols and hints, dtypes, layout, saved values), the backend, the
  ShapeEnv guards, and a ``status`` that moves through
  compiling -> compiled -> running -> ran, or stops at
  compile-failed / run-failed / mismatch. A status left at "compiling" or
  "running" means the process died (or hung) right there.
- ``graph-NNN-inK.pt``: real example values of small inputs.
- ``script.json``: how the script ended and how often it called torch.compile.

Two halves share this file. The child half (``install`` and below) runs
inside the user's process, loaded by path without symfuzz on ``sys.path``:
it imports only the standard library at module level (torch inside
functions). The parent half (``run_capture``, ``load_records``) runs in the
minifier.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import keyword
import math
import os
import re
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# The runtime (fuzz/script_runtime.py, pasted with its parts) that run_capture writes into the capture folder.
RUNTIME_FILE = "symfuzz_runtime.py"
# Inputs with more elements than this are regenerated from a seed instead of saved.
SAVE_VALUES_LIMIT = 1 << 20
# In accuracy mode, the first calls of each graph are compared with eager.
ACCURACY_CALLS = 3
# Statuses of a graph that failed in crash mode (the last two: the process died there).
CRASH_STATUSES = ("compile-failed", "run-failed", "compiling", "running")
ACCURACY_STATUSES = ("mismatch",)
# A graph's first recorded failure is final.
FINAL_STATUSES = ("compile-failed", "run-failed", "mismatch")
# Names the rendered repro itself uses; graph values are renamed away from them.
RESERVED_NAMES = {"torch", "operator", "math", "fn", "inputs", "main", "make_inputs", "make_input", "json", "sys",
                  "builtins"}

BOOTSTRAP = r"""
import importlib.util, os, runpy, sys
capture_py, folder, accuracy, script = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("_symfuzz_capture", capture_py)
capture = importlib.util.module_from_spec(spec)
sys.modules["_symfuzz_capture"] = capture
spec.loader.exec_module(capture)
capture.install(folder, accuracy == "1")
sys.argv = sys.argv[4:]
sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script.py` would
capture.run_script(script)
"""


# ======================================================================== parent side


@dataclass
class CaptureRun:
    """What one capture run left behind."""

    folder: Path
    records: list[dict]
    returncode: Optional[int]  # None: timed out
    output: str
    seconds: float
    script: dict = field(default_factory=dict)  # script.json: exit, error, compile_calls

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def failing(self, accuracy: bool) -> list[dict]:
        wanted = ACCURACY_STATUSES if accuracy else CRASH_STATUSES
        return [r for r in self.records if r.get("status") in wanted]


def run_capture(script: Path, folder: Path, *, accuracy: bool, timeout: float,
                env: Optional[dict] = None, args: tuple = ()) -> CaptureRun:
    """Run ``script`` (with ``args``) under the recording bootstrap, from the
    current directory as ``python script.py`` would be; the records it left."""
    from symfuzz.corpus.inductor_cache import fresh_cache  # parent side only: symfuzz is importable here
    from symfuzz.corpus.replay import ScriptRunner  # parent side only: symfuzz is importable here
    from symfuzz.corpus.scripts import RUNTIME, Helpers  # parent side only: symfuzz is importable here

    script = Path(script).resolve()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    # The runtime the child judges with (its compare), pasted as every script carries it: the child
    # loads it by path, without symfuzz.
    (folder / RUNTIME_FILE).write_text(Helpers().module(RUNTIME).text())
    extra = {"TORCHINDUCTOR_CACHE_DIR": fresh_cache(folder / "inductor-cache"), "PYTHONHASHSEED": "0"}
    extra.update(env or {})
    argv = [sys.executable, "-c", BOOTSTRAP, str(Path(__file__).resolve()), str(folder),
            "1" if accuracy else "0", str(script), *map(str, args)]
    code, out, seconds, _ = ScriptRunner().run_command(argv, Path.cwd(), extra, timeout)
    return CaptureRun(folder, load_records(folder), code, out, round(seconds, 2), _read_json(folder / "script.json"))


def load_records(folder: Path) -> list[dict]:
    records = [_read_json(path) for path in sorted(Path(folder).glob("graph-*.json"))]
    return [r for r in records if r]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _write_json(path: Path, data: dict) -> None:
    """Atomic: a reader, or a crash right after, never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)


# ======================================================================== child side


_STATE: dict = {}


def install(folder: str, accuracy: bool) -> None:
    """Hook Dynamo's backend call, and count torch.compile calls."""
    # torch waits for the user's script (module docstring)
    import torch
    import torch._dynamo
    from torch._dynamo import output_graph

    recorder = Recorder(Path(folder), accuracy)
    _STATE["recorder"] = recorder
    # Backends a fresh process knows by name: anything the script registers
    # itself would be unknown to the repro.
    recorder.builtin_backends = _known_backends()
    original = output_graph.OutputGraph.call_user_compiler

    @functools.wraps(original)
    def call_user_compiler(self, gm, example_inputs):
        return recorder.compile(original, self, gm, example_inputs)

    output_graph.OutputGraph.call_user_compiler = call_user_compiler
    torch.compile = _counting(torch.compile, recorder)
    torch._dynamo.optimize = _counting(torch._dynamo.optimize, recorder)


def _known_backends() -> set:
    # torch waits for the user's script (module docstring)
    import torch._dynamo

    try:
        names = set(torch._dynamo.list_backends(exclude_tags=()))
    except Exception:  # noqa: BLE001 - a replaced backend without tags; read the registry itself
        # torch waits for the user's script (module docstring)
        from torch._dynamo.backends import registry

        registry._lazy_import()
        names = set(registry._BACKENDS) | set(registry._COMPILER_FNS)
    return names | {"inductor"}


def _counting(original, recorder):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        # torch.compile calls torch._dynamo.optimize: count the outer call only.
        outer = not recorder.in_compile_call
        if outer:
            recorder.compile_calls += 1
            recorder.write_script_state("running")
        recorder.in_compile_call = True
        try:
            return original(*args, **kwargs)
        finally:
            recorder.in_compile_call = not outer

    return wrapper


def run_script(script: str) -> None:
    """Run the user's script as ``__main__``; record how it ended, then end the same way."""
    recorder = _STATE["recorder"]
    recorder.write_script_state("running")
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        recorder.write_script_state("exited", exit_code=code)
        raise
    except BaseException as exc:
        recorder.write_script_state("raised", error=_describe_error(exc))
        raise
    recorder.write_script_state("exited", exit_code=0)


def _describe_error(exc: BaseException) -> dict:
    return {
        "type": type(exc).__module__ + "." + type(exc).__qualname__,
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:],
    }


class Recorder:
    def __init__(self, folder: Path, accuracy: bool):
        self.folder = folder
        self.accuracy = accuracy
        self.count = 0
        self.compile_calls = 0
        self.in_compile_call = False
        self.builtin_backends: set = set()
        self.script_runtime = None  # the pasted runtime (its compare judges), loaded by path when comparing

    def write_script_state(self, state: str, **extra) -> None:
        _write_json(self.folder / "script.json", {"state": state, "compile_calls": self.compile_calls,
                                                  "graphs": self.count, **extra})

    def save(self, record: dict) -> None:
        _write_json(self.folder / f"graph-{record['index']:03d}.json", record)

    # -- the hook

    def compile(self, original, output_graph, gm, example_inputs):
        """Record the graph, call the real backend, record how it went."""
        # torch waits for the user's script (module docstring)
        from torch._dynamo.exc import RestartAnalysis, SkipFrame, Unsupported

        record = self.describe(output_graph, gm, example_inputs)
        reference = self._eager_copy(record, gm) if self.accuracy else None
        try:
            compiled = original(output_graph, gm, example_inputs)
        except (RestartAnalysis, SkipFrame, Unsupported):
            # Dynamo's control flow (restart, skip, graph break), not a backend failure.
            record["status"] = "abandoned"
            self.save(record)
            raise
        except Exception as exc:
            self._fail(record, "compile-failed", error=_describe_error(exc))
            raise
        record["status"] = "compiled"
        record["guards_after"] = _guards(output_graph)  # Inductor may add guards while compiling
        self.save(record)
        return self.watch(record, compiled, reference)

    def _eager_copy(self, record, gm):
        try:
            return _copy_graph_module(gm)
        except Exception as exc:  # noqa: BLE001 - no comparison for this graph, but the script goes on
            record["compare_error"] = repr(exc)
            return None

    def describe(self, output_graph, gm, example_inputs) -> dict:
        """The record of one graph, written before the backend sees it."""
        # torch waits for the user's script (module docstring)
        import torch

        index = self.count
        self.count += 1
        record = {"index": index, "status": "compiling", "nodes_total": len(gm.graph.nodes),
                  "frame": _frame(output_graph), "guards": _guards(output_graph),
                  "grad_enabled": torch.is_grad_enabled(), "script_compile_calls": self.compile_calls}
        try:
            backend = describe_backend(output_graph.compiler_fn, self.builtin_backends)
            graph = describe_graph(gm, example_inputs, self.folder / f"graph-{index:03d}")
            record.update(backend=backend, graph=graph)
        except Exception as exc:  # noqa: BLE001 - never break the user's script over a record
            record.update(graph=None, unsupported=[f"could not describe the graph: {exc!r}"])
        self.save(record)
        self.write_script_state("running")
        return record

    def watch(self, record, compiled, reference):
        """Wrap the compiled callable: note run-time failures (and mismatches)."""
        calls = [0]

        def run(*args):
            calls[0] += 1
            check = reference is not None and calls[0] <= ACCURACY_CALLS and record["status"] in ("compiled", "ran")
            clones = _clone_args(args) if check else None
            if calls[0] == 1:
                record["status"] = "running"
                self.save(record)
            try:
                out = compiled(*args)
            except Exception as exc:
                self._fail(record, "run-failed", error=_describe_error(exc))
                raise
            if record["status"] == "running":
                record["status"] = "ran"
                self.save(record)
            if check:
                try:
                    self._compare(record, reference, clones, out)
                except Exception as exc:  # noqa: BLE001 - a broken comparison must not break the script
                    record["compare_error"] = repr(exc)
                    self.save(record)
            return out

        return run

    def _compare(self, record, reference, clones, out) -> None:
        runtime = self._script_runtime()
        try:
            expected = reference(*clones)
        except Exception as exc:  # noqa: BLE001 - eager failing is not a compiler bug
            record["eager_error"] = _describe_error(exc)
            self.save(record)
            return
        diff = runtime.compare(runtime.snapshot(expected), runtime.snapshot(out),
                                  lambda: (runtime.reference_call(reference, _clone_args(clones)).get("out") or (None,))[0])
        if diff is not None:
            self._fail(record, "mismatch", symptom=diff["symptom"], detail=f"{diff['path']}: {diff['detail']}")

    def _script_runtime(self):
        if self.script_runtime is None:
            # By path, not by import: this half runs in the user's process, where symfuzz may not
            # be importable; run_capture pasted the runtime into the capture folder.
            path = self.folder / RUNTIME_FILE
            spec = importlib.util.spec_from_file_location("_symfuzz_script_runtime", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.script_runtime = module
        return self.script_runtime

    def _fail(self, record: dict, status: str, **facts) -> None:
        if record["status"] in FINAL_STATUSES:
            return  # keep the first failure of a graph
        record.update(status=status, **facts)
        self.save(record)


def _copy_graph_module(gm):
    """An eager copy of the Dynamo graph: Inductor's pre-grad passes edit ``gm`` in place."""
    # torch waits for the user's script (module docstring)
    import torch

    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return torch.fx.GraphModule(gm, graph)


def _clone_args(args):
    # torch waits for the user's script (module docstring)
    import torch

    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def _guards(output_graph) -> list[str]:
    try:
        return [str(g.expr) for g in output_graph.shape_env.guards]
    except Exception:  # noqa: BLE001 - a private attribute moved
        return []


def _frame(output_graph) -> str:
    try:
        code = output_graph.root_tx.f_code
        return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    except Exception:  # noqa: BLE001
        return "?"


# ------------------------------------------------------------------------ backend


def describe_backend(compiler_fn, builtin: set) -> dict:
    """Name and options of the backend, as ``torch.compile(backend=, options=)`` takes them.

    ``torch.compile`` wraps the backend (``_TorchCompileInductorWrapper``
    holds the Inductor config that mode= and options= expand to;
    ``_TorchCompileWrapper`` holds mode/options for other backends) and
    Dynamo wraps that again (``WrapBackendDebug``).
    """
    inner = getattr(compiler_fn, "_torchdynamo_orig_backend", compiler_fn)
    name = (getattr(inner, "compiler_name", None) or getattr(compiler_fn, "_compiler_name", None)
            or getattr(inner, "__name__", None) or repr(inner))
    options, mode = {}, None
    if type(inner).__name__ == "_TorchCompileInductorWrapper":
        options = dict(getattr(inner, "config", {}) or {})
    elif type(inner).__name__ == "_TorchCompileWrapper":
        mode = inner.kwargs.get("mode")
        options = dict(inner.kwargs.get("options") or {})
    kept = {k: v for k, v in options.items() if _json_plain(v)}
    return {"name": str(name), "options": kept, "mode": mode, "registered": name in builtin,
            "dropped_options": sorted(set(options) - set(kept))}


def _json_plain(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------ graph


def describe_graph(gm, example_inputs, stem: Path) -> dict:
    """The graph as data: inputs, nodes, output, symbols, and what cannot be rebuilt."""
    graph = _GraphDescriber(gm, example_inputs, stem)
    return graph.describe()


class _GraphDescriber:
    def __init__(self, gm, example_inputs, stem: Path):
        self.gm = gm
        self.examples = list(example_inputs)
        self.stem = stem
        self.symbols: dict[str, int] = {}
        self.inputs: list[dict] = []
        self.unsupported: list[str] = []
        self.names = {}  # fx name -> name in the repro

    def describe(self) -> dict:
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        self.names = readable_names([n.name for n in self.gm.graph.nodes],
                                    {n.name for n in placeholders})
        self._collect_symbols(placeholders)
        examples = self.examples + [None] * (len(placeholders) - len(self.examples))
        floats = _wrapped_floats(placeholders, examples)
        # Tensors first, so that a SymInt input (Dynamo puts it before its
        # tensor) can name the tensor dim it is the size of.
        placed = []
        for position, (node, real) in enumerate(zip(placeholders, examples)):
            if node.name in floats:
                placed.append((position, {"name": self.names[node.name], "kind": "scalar", "value": floats[node.name]}))
            elif not _is_size(node, real):
                placed.extend((position, entry) for entry in self._placeholder(node, real, position))
        for position, (node, real) in enumerate(zip(placeholders, examples)):
            if _is_size(node, real):
                placed.extend((position, entry) for entry in self._size_placeholder(node, real, position, placed))
        self.inputs = [entry for _, entry in sorted(placed, key=lambda pair: pair[0])]
        nodes, output = [], []
        for node in self.gm.graph.nodes:
            if node.op == "call_method" and node.target == "item" and node.args[0].name in floats:
                self.names[node.name] = self.names[node.args[0].name]  # the float itself
            elif node.op == "call_function" or node.op == "call_method":
                nodes.append(self._call(node))
            elif node.op == "get_attr":
                self._constant(node)
            elif node.op == "call_module":
                self.unsupported.append(f"node {node.name} calls a submodule ({node.target}); only flat graphs are rebuilt")
            elif node.op == "output":
                output = self.encode(node.args[0])
        return {"symbols": self.symbols, "inputs": self.inputs, "nodes": nodes, "output": output,
                "unsupported": self.unsupported}

    # -- inputs

    def _collect_symbols(self, placeholders) -> None:
        """Symbol values: the real size at each tensor dim whose fake size is a plain symbol."""
        # torch waits for the user's script (module docstring)
        import sympy
        import torch

        for node, real in zip(placeholders, self.examples):
            fake = node.meta.get("example_value")
            if not (isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor)):
                continue
            for size, actual in zip(fake.shape, real.shape):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                    self.symbols.setdefault(str(size.node.expr), int(actual))

    def _placeholder(self, node, real, position: int) -> list[dict]:
        # torch waits for the user's script (module docstring)
        import torch

        fake = node.meta.get("example_value")
        name = self.names[node.name]
        if isinstance(real, torch.Tensor):
            shape = fake.shape if isinstance(fake, torch.Tensor) else real.shape
            dims = [self.dim_expr(s) for s in shape]
            return [self._tensor_input(name, real, dims, position)]
        if isinstance(real, (bool, int, float)):
            return [{"name": name, "kind": "scalar", "value": real}]
        self.unsupported.append(f"input {name} is a {type(real).__name__}")
        return []

    def _size_placeholder(self, node, real, position: int, placed: list) -> list[dict]:
        """A SymInt input, derived in the repro as ``x.size(d)`` of a tensor input with that symbol."""
        # torch waits for the user's script (module docstring)
        import sympy
        import torch

        value = node.meta.get("example_value")
        value = value if isinstance(value, torch.SymInt) else real
        name = self.names[node.name]
        if not isinstance(value.node.expr, sympy.Symbol):
            self.unsupported.append(f"input {name} is the size expression {value.node.expr}, not a plain symbol")
            return []
        symbol = str(value.node.expr)
        self.symbols.setdefault(symbol, _hint(value))
        for _, other in placed:
            if other["kind"] == "tensor" and symbol in other["dims"]:
                return [{"name": name, "kind": "size", "of": [other["name"], other["dims"].index(symbol)]}]
        # The symbol is no tensor's size here (a dynamic int argument): a
        # one-dim carrier tensor keeps it symbolic (Dynamo cannot mark ints).
        carrier = {"name": name + "_carrier", "kind": "tensor", "dims": [symbol], "dynamic": [True],
                   "dtype": "float32", "dim_order": [0], "requires_grad": False, "device": "cpu", "values": None,
                   "seed": 1000 + position}
        return [carrier, {"name": name, "kind": "size", "of": [carrier["name"], 0]}]

    def _tensor_input(self, name: str, real, dims: list, index: int) -> dict:
        values = None
        if real.numel() <= SAVE_VALUES_LIMIT and real.device.type == "cpu":
            # torch waits for the user's script (module docstring)
            import torch

            path = Path(f"{self.stem}-in{index}.pt")
            torch.save(real.detach().contiguous().clone(), path)
            values = {"path": str(path), "shape": list(real.shape)}
        return {"name": name, "kind": "tensor", "dims": dims, "dynamic": [isinstance(d, str) for d in dims],
                "dtype": str(real.dtype).replace("torch.", ""), "dim_order": dim_order(real.stride()),
                "requires_grad": bool(real.requires_grad), "device": str(real.device), "values": values,
                "seed": index}

    def _constant(self, node) -> None:
        """A tensor attribute (get_attr) becomes one more input with its saved value."""
        # torch waits for the user's script (module docstring)
        import torch

        value = self.gm
        for part in node.target.split("."):
            value = getattr(value, part, None)
        if not isinstance(value, torch.Tensor):
            self.unsupported.append(f"node {node.name} reads the attribute {node.target} ({type(value).__name__})")
            return
        self.inputs.append(self._tensor_input(self.names[node.name], value, list(value.shape), 500 + len(self.inputs)))

    # -- nodes

    def _call(self, node) -> dict:
        if node.op == "call_function":
            target = qualified_name(node.target)
            if target is None:
                self.unsupported.append(f"node {node.name} calls {node.target!r}, which cannot be imported by name")
                target = repr(node.target)
        else:
            target = str(node.target)
        return {"name": self.names[node.name], "op": node.op, "target": target,
                "args": [self.encode(a) for a in node.args],
                "kwargs": {k: self.encode(v) for k, v in node.kwargs.items()},
                "value": self.describe_value(node.meta.get("example_value"))}

    def encode(self, value):
        """A node argument as JSON; node references as {"$node": name}."""
        # torch waits for the user's script (module docstring)
        import torch

        if isinstance(value, torch.fx.Node):  # a get_attr node is an input of the same name
            return {"$node": self.names[value.name]}
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, tuple):  # torch.Size too
            return {"$tuple": [self.encode(v) for v in value]}
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"$dict": [[k, self.encode(v)] for k, v in value.items()]}
        if isinstance(value, slice):
            return {"$slice": [self.encode(value.start), self.encode(value.stop), self.encode(value.step)]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
            return {"$torch": str(value)}
        if isinstance(value, torch.device):
            return {"$device": str(value)}
        self.unsupported.append(f"an argument of type {type(value).__name__}: {value!r:.80}")
        return {"$unsupported": repr(value)[:200]}

    def describe_value(self, value):
        """A node's example value: tensor metadata with symbolic dims as expressions."""
        # torch waits for the user's script (module docstring)
        import torch

        if isinstance(value, torch.Tensor):
            return {"tensor": {"dims": [self.dim_expr(s) for s in value.shape],
                               "dtype": str(value.dtype).replace("torch.", ""),
                               "dim_order": dim_order([_hint(s) for s in value.stride()]),
                               "requires_grad": bool(value.requires_grad), "device": str(value.device)}}
        if isinstance(value, torch.SymInt):
            return {"symint": self.dim_expr(value)}
        if isinstance(value, (bool, int)):
            return {"int": int(value)}
        if isinstance(value, (tuple, list)):
            return {"tuple": [self.describe_value(v) for v in value]}
        return {"other": type(value).__name__}

    def dim_expr(self, size):
        """An int, or a Python expression over the input symbols (e.g. "2*s0").

        Only integer polynomials in symbols the inputs define are kept
        symbolic; anything else (FloorDiv, unbacked symbols) becomes its hint.
        """
        # torch waits for the user's script (module docstring)
        import sympy
        import torch

        if not isinstance(size, torch.SymInt):
            return int(size)
        expr = size.node.expr
        free = sorted(expr.free_symbols, key=str)
        if free and all(str(s) in self.symbols for s in free):
            try:
                poly = sympy.Poly(expr, *free)
                if all(c.is_Integer for c in poly.coeffs()):
                    return str(expr)
            except sympy.PolynomialError:
                pass
        return _hint(size)


def readable_names(names: list[str], inputs: set[str]) -> dict[str, str]:
    """Names for the repro: Dynamo's input names shortened
    (``l_self_modules_blocks_modules_0_modules_up_parameters_weight_`` ->
    ``blocks_0_up_weight``, ``l_x_`` -> ``x``), unique, valid, and clear of
    the names the repro itself uses."""
    taken = set(names) | RESERVED_NAMES
    out = {}
    for name in names:
        short = name
        if name in inputs:
            short = re.sub(r"^l_(self_)?", "", name).rstrip("_")
            short = re.sub(r"(^|_)(modules|parameters|buffers)_", r"\1", short)
        if short != name and (not short.isidentifier() or keyword.iskeyword(short) or short in taken):
            short = name
        if short in RESERVED_NAMES:
            short = name + "_"
        taken.add(short)
        out[name] = short
    return out


def _wrapped_floats(placeholders, examples) -> dict:
    """{placeholder: value} of the Python floats Dynamo passed as 0-dim tensors read by ``.item()``
    (a module's ``eps`` or dropout ``p``): the repro passes the float, as the model's code did; a
    rebuilt ``.item()`` would break the graph in two."""
    # torch waits for the user's script (module docstring)
    import torch

    return {node.name: float(real.item()) for node, real in zip(placeholders, examples)
            if isinstance(real, torch.Tensor) and real.dim() == 0 and real.is_floating_point() and node.users
            and all(u.op == "call_method" and u.target == "item" for u in node.users)}


def _is_size(node, real) -> bool:
    # torch waits for the user's script (module docstring)
    import torch

    return isinstance(node.meta.get("example_value"), torch.SymInt) or isinstance(real, torch.SymInt)


def _hint(size) -> int:
    try:
        # torch waits for the user's script (module docstring)
        from torch.fx.experimental.symbolic_shapes import optimization_hint

        return int(optimization_hint(size, fallback=8))
    except Exception:  # noqa: BLE001 - no hint (unbacked): a plausible size
        return 8


def dim_order(strides) -> list[int]:
    """Dims from outermost (largest stride) to innermost; identity when contiguous."""
    strides = [int(s) for s in strides]
    return sorted(range(len(strides)), key=lambda d: (-strides[d], d))


def qualified_name(target) -> Optional[str]:
    """An importable dotted name for a call_function target, or None.

    FX's own naming is tried first (it knows torch's builtins and op
    overloads); the name is kept only if importing it gives the same object.
    """
    # torch waits for the user's script (module docstring)
    from torch.fx.node import _get_qualified_name

    try:
        name = _get_qualified_name(target)
    except Exception:  # noqa: BLE001
        return None
    try:
        resolved = resolve(name)
    except (ImportError, AttributeError):
        return None
    return name if resolved is target or resolved == target else None


def resolve(name: str):
    """The object a dotted name like ``torch._C._nn.linear`` or ``_operator.add`` names."""
    parts = name.split(".")
    value = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], 1):
        try:
            value = getattr(value, part)
        except AttributeError:
            value = importlib.import_module(".".join(parts[:index + 1]))
    return value

