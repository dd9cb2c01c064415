"""Captured op calls: recording them while a test suite runs, and the calls file.

Stage 1 of the pytest plugin records each call to an op in the chosen
namespaces (inputs copied *before* the call, since ops may mutate them) and
writes the distinct ones to a JSON-lines file. Stage 2 (``symfuzz opcheck
--from FILE``) rebuilds them and runs the checks, without the suite.

The file: a header line ``{"symfuzz_opcheck_calls": 1, "torch": ...}``, then
one call per line: ``{"op": "ns::name.overload", "test": nodeid, "args":
[...], "kwargs": {...}}``. Tensors are stored with dtype, shape, strides and
values (base64 of the raw bytes), so a call replays exactly; tensors larger
than ``MAX_STORED_ELEMENTS`` keep their value range only.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.fx._symbolic_trace import is_fx_symbolic_tracing
from torch.overrides import TorchFunctionMode

from symfuzz.corpus.atomic import write_text
from symfuzz.opcheck.inputs import copy_exactly

FORMAT_VERSION = 1
MAX_STORED_ELEMENTS = 1 << 20
MAX_CALLS_PER_OP = 4  # distinct input signatures kept per op; the sweep covers the rest


class CallsFileError(Exception):
    """A calls file that can't be read: printed without a traceback."""


@dataclass
class OpCall:
    op: str  # "ns::name.overload"
    args: tuple
    kwargs: dict
    test: str = ""  # where it was captured (a pytest node id)


# ------------------------------------------------------------------ encoding


def encode_value(value):
    if isinstance(value, torch.Tensor):
        return {"__tensor__": _encode_tensor(value)}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, complex):
        return {"__complex__": [repr(value.real), repr(value.imag)]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[k, encode_value(v)] for k, v in value.items()]}
    if isinstance(value, torch.dtype):
        return {"__dtype__": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"__device__": str(value)}
    if isinstance(value, (torch.memory_format, torch.layout)):
        return {"__torch_attr__": str(value).removeprefix("torch.")}
    raise TypeError(f"cannot record a {type(value).__name__} argument")


def _encode_tensor(t: torch.Tensor) -> dict:
    if t.layout != torch.strided or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
        raise TypeError(f"cannot record a {type(t).__name__} with layout {t.layout}: only plain dense tensors")
    requires_grad = bool(t.requires_grad)
    t = t.detach()
    out = {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "device": str(t.device),
        "requires_grad": requires_grad,
    }
    if t.numel() <= MAX_STORED_ELEMENTS:
        data = t.cpu().contiguous().reshape(-1)  # 1-D: a 0-dim tensor can't be viewed as bytes
        raw = data.view(torch.uint8) if data.numel() and data.dtype != torch.bool else data.to(torch.uint8)
        out["data"] = base64.b64encode(raw.numpy().tobytes()).decode("ascii")
    else:
        values = t.to(torch.float64) if not t.is_complex() else t.real.to(torch.float64)
        out["data"] = None
        out["range"] = [float(values.min()), float(values.max())]
    return out


def decode_value(value):
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tensor__" in value:
        return _decode_tensor(value["__tensor__"])
    if "__tuple__" in value:
        return tuple(decode_value(v) for v in value["__tuple__"])
    if "__dict__" in value:
        return {k: decode_value(v) for k, v in value["__dict__"]}
    if "__float__" in value:
        return float(value["__float__"])
    if "__complex__" in value:
        return complex(float(value["__complex__"][0]), float(value["__complex__"][1]))
    if "__dtype__" in value:
        return getattr(torch, value["__dtype__"])
    if "__device__" in value:
        return torch.device(value["__device__"])
    if "__torch_attr__" in value:
        return getattr(torch, value["__torch_attr__"])
    raise CallsFileError(f"unknown value {sorted(value)}")


def _decode_tensor(spec: dict) -> torch.Tensor:
    dtype = getattr(torch, spec["dtype"])
    shape, stride = spec["shape"], spec["stride"]
    if spec.get("data") is not None:
        raw = base64.b64decode(spec["data"])
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        values = flat.bool() if dtype == torch.bool else flat.view(dtype)
        values = values.reshape(shape)
    else:
        lo, hi = spec["range"]
        values = torch.empty(shape, dtype=torch.float64).uniform_(lo, hi, generator=torch.Generator().manual_seed(0)).to(dtype)
    overlapping = any(s == 0 and n > 1 for s, n in zip(stride, shape))
    out = values.clone() if overlapping else torch.empty_strided(shape, stride, dtype=dtype).copy_(values)
    if spec["device"] != "cpu":
        out = out.to(spec["device"])
    if spec.get("requires_grad") and (dtype.is_floating_point or dtype.is_complex):
        out.requires_grad_()
    return out


def encode_call(call: OpCall) -> dict:
    return {"op": call.op, "test": call.test, "args": [encode_value(a) for a in call.args],
            "kwargs": {k: encode_value(v) for k, v in call.kwargs.items()}}


def decode_call(data: dict) -> OpCall:
    return OpCall(op=data["op"], args=tuple(decode_value(a) for a in data["args"]),
                  kwargs={k: decode_value(v) for k, v in data.get("kwargs", {}).items()}, test=data.get("test", ""))


def stored_exactly(call: OpCall) -> bool:
    """Does the calls file hold this call's tensors value for value?"""
    leaves = pytree.tree_leaves((tuple(call.args), dict(call.kwargs)))
    return all(t.numel() <= MAX_STORED_ELEMENTS for t in leaves if isinstance(t, torch.Tensor))


# ------------------------------------------------------------------- dedupe


def signature(call: OpCall):
    """Calls with equal signatures check the same things: same op, same
    tensor dtypes/shapes/strides, same other arguments."""

    def sig(v):
        if isinstance(v, torch.Tensor):
            return ("T", str(v.dtype), tuple(v.shape), tuple(v.stride()), bool(v.requires_grad))
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, tuple(sig(x) for x in v))
        if isinstance(v, dict):
            return ("dict", tuple((k, sig(x)) for k, x in v.items()))
        return ("V", repr(v))

    return (call.op, sig(tuple(call.args)), sig(dict(call.kwargs)))


def dedupe(calls, per_op: int = MAX_CALLS_PER_OP) -> list[OpCall]:
    seen, counts, out = set(), {}, []
    for call in calls:
        key = signature(call)
        if key in seen or counts.get(call.op, 0) >= per_op:
            continue
        seen.add(key)
        counts[call.op] = counts.get(call.op, 0) + 1
        out.append(call)
    return out


# --------------------------------------------------------------------- file


def write_calls(path, calls, *, modules=(), paths=(), extra_modules=(), libraries=(), registrations=None) -> int:
    """Write calls (deduplicated) atomically; returns how many were written.

    The header says how to rebuild the ops in a fresh process
    (opcheck.provenance): ``modules`` register them, ``extra_modules`` are the
    rest of their packages, ``libraries`` were loaded with
    ``torch.ops.load_library``, ``paths`` are where they import from, and
    ``registrations`` what the session had registered per op. So
    ``symfuzz opcheck --from FILE`` needs nothing else."""
    calls = dedupe(calls)
    header = {"symfuzz_opcheck_calls": FORMAT_VERSION, "torch": torch.__version__,
              "modules": list(dict.fromkeys(modules)), "extra_modules": list(dict.fromkeys(extra_modules)),
              "libraries": list(dict.fromkeys(libraries)), "paths": list(dict.fromkeys(paths)),
              "registrations": dict(registrations or {})}
    lines = [json.dumps(header)] + [json.dumps(encode_call(call)) for call in calls]
    write_text(path, "\n".join(lines) + "\n")
    return len(calls)


def read_header(path) -> dict:
    """The calls file's first line: format, torch version, modules and paths."""
    try:
        with open(path) as f:
            header = json.loads(f.readline() or "{}")
    except (OSError, json.JSONDecodeError) as exc:
        raise CallsFileError(f"cannot read calls file {path}: {exc}") from None
    if header.get("symfuzz_opcheck_calls") != FORMAT_VERSION:
        raise CallsFileError(f"{path} is not a symfuzz opcheck calls file (version {FORMAT_VERSION})")
    return header


def read_calls(path) -> list[OpCall]:
    try:
        with open(path) as f:
            lines = [line for line in f if line.strip()]
    except OSError as exc:
        raise CallsFileError(f"cannot read calls file {path}: {exc.strerror}") from None
    if not lines:
        raise CallsFileError(f"{path} is empty: no calls were recorded")
    try:
        header = json.loads(lines[0])
        if header.get("symfuzz_opcheck_calls") != FORMAT_VERSION:
            raise CallsFileError(f"{path} is not a symfuzz opcheck calls file (version {FORMAT_VERSION})")
        return [decode_call(json.loads(line)) for line in lines[1:]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise CallsFileError(f"{path}: malformed calls file ({type(exc).__name__}: {exc})") from None


# ------------------------------------------------------------------ capture


def _overload_name(func, args, kwargs) -> str | None:
    if isinstance(func, torch._ops.OpOverload):
        return func._schema.name + ("" if func._overloadname == "default" else f".{func._overloadname}")
    try:  # a packet: which overload do these arguments pick?
        overload = torch._C._jit_resolve_packet(func._qualified_op_name, *args, **kwargs)
    except Exception:  # noqa: BLE001 - no way to tell; the call is simply not recorded
        return None
    return func._qualified_op_name + ("" if overload in ("", "default") else f".{overload}")


def _copy(value):
    if isinstance(value, torch.Tensor):
        out = copy_exactly(value)
        return out.requires_grad_() if value.requires_grad else out
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _namespace(func) -> str | None:
    if isinstance(func, torch._ops.OpOverload):
        return func.namespace
    if isinstance(func, torch._ops.OpOverloadPacket):
        return func._qualified_op_name.split("::")[0]
    return None


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
# The files between a caller and our __torch_function__ when an op is called
# (an OpOverload or packet, or a torch.library.custom_op function).
_OP_CALL_PLUMBING = {os.path.join(_TORCH_DIR, *parts) for parts in
                     [("_ops.py",), ("overrides.py",), ("_library", "custom_ops.py")]}


def is_real_call(args, kwargs, caller_depth: int = 2) -> bool:
    """The one rule for what the recorder records: a call the test itself made on real data.

    A call is real when (1) no tracing or dispatch machinery is active (no
    dispatch mode at all: fake, proxy, functional, schema-check modes all sit on
    that stack; no Dynamo or FX tracing), (2) every tensor argument is a plain
    tensor holding data (not a subclass such as FakeTensor, not meta, not a
    functional wrapper) and no argument is symbolic, and (3) the code that made
    the call is not torch's own: ``torch.library.opcheck``, ``make_fx`` or
    ``torch.export`` call ops on real tensors too, to compare against, and
    those calls are theirs, not the test's.
    """
    if torch._C._len_torch_dispatch_stack() or torch.compiler.is_compiling():
        return False

    if is_fx_symbolic_tracing():
        return False

    for leaf in pytree.tree_leaves((tuple(args), dict(kwargs))):
        if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return False
        if isinstance(leaf, torch.Tensor) and not _holds_data(leaf):
            return False
    return not _called_from_torch(caller_depth + 1)


def _holds_data(t: torch.Tensor) -> bool:
    if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
        return False
    if t.is_meta or torch._is_functional_tensor(t):
        return False
    return True


def _called_from_torch(depth: int) -> bool:
    """Is the nearest caller, past the op-call plumbing, a file of the torch package?"""
    frame = sys._getframe(depth)
    while frame is not None and os.path.abspath(frame.f_code.co_filename) in _OP_CALL_PLUMBING:
        frame = frame.f_back
    return frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_TORCH_DIR)


class CallRecorder(TorchFunctionMode):
    """Records calls to ops in ``namespaces`` (inputs copied before the call).

    Invisible to the test: only real calls are recorded (``is_real_call``),
    the op is called exactly once, as the test called it, and anything that
    goes wrong while recording becomes a line in ``skipped``, never an
    exception in the test.
    """

    def __init__(self, namespaces, *, test: str = "", sink=None, skipped=None):
        super().__init__()
        self.namespaces = set(namespaces)
        self.test = test
        self.calls = sink if sink is not None else []
        self.skipped = skipped if skipped is not None else []  # reasons calls were not recorded

    def __enter__(self):
        _ACTIVE.append(self)
        try:
            _wrap_torch_opcheck()
        except Exception as exc:  # noqa: BLE001 - a torch without those helpers: only its direct calls are recorded
            note = f"torch.library.opcheck's samples are not recorded here ({type(exc).__name__}: {exc})"
            if note not in self.skipped:
                self.skipped.append(note)
        return super().__enter__()

    def __exit__(self, *exc_info):
        _ACTIVE.remove(self)
        return super().__exit__(*exc_info)

    def record_sample(self, op, args, kwargs):
        """A sample handed to ``torch.library.opcheck``: the test's own input for
        the op, even though every call opcheck then makes is torch's. A suite that
        tests an op only through opcheck is retrofitted too."""
        try:
            if isinstance(op, torch._library.custom_ops.CustomOpDef):
                op = op._opoverload
            if _namespace(op) not in self.namespaces or torch._C._len_torch_dispatch_stack():
                return
            if not all(_holds_data(t) for t in pytree.tree_leaves((tuple(args), dict(kwargs)))
                       if isinstance(t, torch.Tensor)):
                return
            pending = self._pending(op, tuple(args), dict(kwargs))
        except Exception as exc:  # noqa: BLE001 - the recorder must never fail the user's test
            self.skipped.append(f"{op}: the recorder failed on an opcheck sample ({type(exc).__name__}: {exc})")
            return
        if pending is not None:
            self.calls.append(pending)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():
            # First, before anything Dynamo can't trace: Dynamo traces into this
            # method, and a graph break here would change the user's compile.
            return func(*args, **kwargs)
        try:
            pending = self._before(func, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - the recorder must never fail the user's test
            self.skipped.append(f"{func}: the recorder failed before the call ({type(exc).__name__}: {exc})")
            pending = None
        out = func(*args, **kwargs)  # a call that raises is the test's business, not a sample
        if pending is not None:
            self.calls.append(pending)
        return out

    def _before(self, func, args, kwargs):
        """The call to record (inputs copied now: the op may mutate them), or None."""
        if _namespace(func) not in self.namespaces or not is_real_call(args, kwargs, caller_depth=3):
            return None
        return self._pending(func, args, kwargs)

    def _pending(self, func, args, kwargs):
        name = _overload_name(func, args, kwargs)
        if name is None:
            self.skipped.append(f"{func}: could not tell which overload was called")
            return None
        # Decide before copying: a test calling an op in a loop on big inputs must
        # not keep a copy per call.
        live = OpCall(name, tuple(args), dict(kwargs), self.test)
        same_op = [c for c in self.calls if c.op == name]
        if len(same_op) >= MAX_CALLS_PER_OP or signature(live) in {signature(c) for c in same_op}:
            return None
        before = _copy((tuple(args), dict(kwargs)))
        return OpCall(name, before[0], before[1], self.test)


# The recorders in effect (innermost last): torch.library.opcheck's wrapper hands them its sample.
_ACTIVE: list[CallRecorder] = []


def _wrap_torch_opcheck() -> None:
    """Wrap the function ``torch.library.opcheck`` calls, once per process, so
    that its sample reaches the recorders in effect. That function is looked up
    at every call, so a test that imported ``opcheck`` early is covered too.
    Outside a recorder the wrapper only calls through."""
    import torch.testing._internal.optests as optests  # torch's test helpers: loaded only when recording

    original = optests.opcheck
    if getattr(original, "_symfuzz_records", False):
        return

    @functools.wraps(original)
    def opcheck(op, args, kwargs=None, *rest, **options):
        for recorder in _ACTIVE:
            recorder.record_sample(op, args, kwargs or {})
        return original(op, args, kwargs, *rest, **options)

    opcheck._symfuzz_records = True
    optests.opcheck = opcheck
