"""Symbolic-metadata oracle: sizes and strides promised by one symbolic trace
against the sizes and strides eager really produced, on every call.

The compiler never sees real tensors while it traces: Dynamo, AOTAutograd and
Inductor all propagate *fake* tensors whose sizes are sympy expressions over
the input sizes (``s0 * 2``, ``FloorDiv(s1, 3)``...), computed by each op's
meta/fake implementation. A compiled graph is then reused for every call whose
sizes pass its guards, so a size or stride expression that is right at the
first ("hint") sizes but wrong elsewhere is a soundness bug even when this
particular compiled run happened to agree with eager (e.g. because the kernel
recomputes the size at run time). This oracle checks those expressions
directly, without compiling anything.

How (torch 2.13):

1. Trace the program once under ``FakeTensorMode(shape_env=ShapeEnv())``,
   on fake inputs made from the FIRST call's real inputs by
   ``fake_mode.from_tensor(t, source=LocalSource(name),
   symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DUCK]
   * ndim))``. This is what Dynamo does for a dynamic input: the real sizes
   become the symbols' hints, equal sizes share a symbol (duck sizing, as
   Dynamo does; the case's ``fx.use_duck_shape`` flag is honoured), sizes 0
   and 1 are specialized, and a non-standard stride becomes its own symbol.
   ``make_fx(tracing_mode="symbolic")`` works too, but it builds an FX graph
   that is not needed here and gives less control over how inputs are made
   symbolic; running the program directly under the fake mode is closer to
   Dynamo's fake-tensor propagation and cheaper.
2. For every call, bind each symbol to that call's value: walk the fake
   inputs (and their ``_base`` where both sides are views) and read the real
   input's size, stride or storage offset in the same place. An input whose
   traced size is not a plain symbol (a specialized 0/1, or a second dim
   duck-sized onto the first one's symbol) must evaluate to the call's real
   size, or the trace does not describe the call and the call is skipped.
3. A call is comparable only if, at its bindings, every guard the trace
   installed holds: ``shape_env.guards``, the symbol ranges
   (``var_to_range``, which carry the 0/1 specialization and bounds learnt
   from branches), every ``replacements`` entry as an equation, and every
   deferred runtime assert whose symbols are all bound. A guard that is false
   or cannot be evaluated skips the call (the compiler would recompile).
4. For each output (``out[0][i]``) and final input state (``out[1][j]``),
   evaluate the fake tensor's dtype, sizes and strides at the bindings and
   compare with eager. Sizes and dtypes come from ``call.eager["out"]``.
   Strides do not: ``standalone.snapshot`` clones, which makes non-dense
   tensors contiguous. The true eager strides come from running ``fn``
   eagerly once more on ``standalone.make_args(call)`` (plain eager, no
   compiler). An expression with a symbol no input binds (an unbacked ``u0``
   from ``.item()``/``nonzero``) is data-dependent and is not compared.

Strides are compared the way torch compares fake and real tensors
(``torch._prims_common.check_significant_strides``, as ``CrossRefFakeMode``
uses it): non-empty tensors, dims of size > 1, and only on calls whose input
strides match the traced input strides (layouts change between calls; the
trace then says nothing about output strides). Torch does not promise eager
strides for CPU elementwise ops (``only_cuda=True``, pytorch issue 77553),
and generated programs hit real differences of that kind in torch 2.13
(``copysign`` with a broadcast operand, ``F.one_hot`` of a transposed
input: fake mode runs decompositions that lay the result out differently
from the CPU kernels, even with static shapes; see the tests). So:

- values made only by allow-listed ops (``STRIDE_OPS``: views; and
  ``FRESH_OPS``: factories and ``contiguous``, whatever their operands)
  must match eager's strides at every comparable call;
- any other value is held to its own first comparison
  (``StrideBaseline``): where fake and eager agreed on a stride at the
  first call that compared it, they must agree at every later call. A
  stride right at the hint sizes and wrong at others is a symbolic bug
  whatever op made it; a layout chosen differently from the start is not
  a finding, only listed in the pass evidence as ``layout_divergences``.

A program that cannot be traced symbolically (an unsupported op, a guard on
data, ...) is not a finding of this oracle: it passes and says why in the
verdict's evidence. Every pass carries a short summary (calls compared,
calls skipped and why) in its evidence.

The signature does not name the lane: the trace does not depend on it, so
one meta bug found on two lanes is one finding.
"""

from __future__ import annotations

import warnings

from . import standalone
from .registry import oracle
from .verdict import Verdict

NAME = "symbolic-metadata"
SIGNATURE_LANE = "fake-tensor"  # the trace is lane-independent; see the docstring

# fx (ShapeEnv) config flags the trace honours. Dynamo flags do not apply:
# nothing here goes through Dynamo.
FX_FLAGS = ("use_duck_shape",)

# How input dims are made symbolic: "DUCK" is what Dynamo does for a dynamic
# dim (equal hint sizes share one symbol).
DIM_DYNAMIC = "DUCK"


# Values made from the inputs by these ops (IR spec names) alone must match
# eager's strides at every call; other values only their own first
# comparison (see the module docstring, ``stride_checked`` and StrideBaseline).
STRIDE_OPS = frozenset({
    # view family: strides follow from the input's by the view rules
    "view", "reshape", "permute", "transpose", "t", "mT", "movedim", "expand", "squeeze", "unsqueeze",
    "flatten", "unflatten", "narrow", "slice", "select", "split", "chunk", "unbind", "diagonal",
})
# Ops whose result strides do not depend on their operands' strides at all
# (fresh contiguous tensors): checked whatever their operands are.
FRESH_OPS = frozenset({
    "contiguous", "arange", "arange_expand", "relpos", "zeros", "ones", "full", "full_sym", "new_zeros",
    "new_ones", "new_full", "zeros_shape", "eye", "linspace", "tri_mask",
})


def stride_checked(program, ops=None, fresh=None) -> set:
    """Names of the program's values whose strides torch promises on CPU.

    Torch holds fake tensors to eager's strides (``CrossRefFakeMode``,
    ``torch._prims_common.check_significant_strides``) except for CPU
    elementwise ops, whose strides "are incorrect in PyTorch" (pytorch
    issue 77553, the reason for its ``only_cuda=True`` default). A value's
    strides are only as good as every op on its way from the inputs, so a
    value is checked when it is an input, made by an op in ``fresh``
    (default ``FRESH_OPS``: a new contiguous tensor, whatever the operands),
    or made by an op in ``ops`` (default ``STRIDE_OPS``) from checked values
    only. A branch result is checked when both arms are plain names of
    checked values.
    """
    import re

    from fuzz.ir import BranchNode, OpNode, render_node

    allowed = STRIDE_OPS if ops is None else ops
    fresh = FRESH_OPS if fresh is None else fresh
    checked = {i.name for i in program.inputs}
    tensors = set(checked)

    def tensor_refs(text):
        # A size read (x.size(0), x.shape[1], x.dim(), ...) does not pass strides on.
        names = re.findall(r"\b([A-Za-z_]\w*)\b(?!\s*\.\s*(?:size|shape|dim|ndim|numel|device|dtype)\b)", text)
        return {n for n in names if n in tensors}

    for node in program.body:
        if isinstance(node, OpNode):
            try:
                deps = set(node.args) | tensor_refs("\n".join(render_node(node)))
            except Exception:  # noqa: BLE001 - cannot tell what it reads: not checked
                deps = None
            tensors.add(node.out)
            if node.op in fresh or (node.op in allowed and deps is not None and deps <= checked):
                checked.add(node.out)
        elif isinstance(node, BranchNode):
            tensors.add(node.out)
            if {node.then.strip(), node.orelse.strip()} <= checked:
                checked.add(node.out)
    return checked


def _stride_paths(program, checked) -> set:
    """Leaf path prefixes (standalone.flatten names) whose strides are compared."""
    paths = {f"out[0][{i}]" for i, name in enumerate(program.outputs) if name in checked}
    paths |= {f"out[1][{j}]" for j in range(len(program.inputs))}
    return paths


class TraceFailed(Exception):
    """The program could not be traced with symbolic sizes (not a finding)."""


class Trace:
    """One symbolic trace: fake inputs (before and after), outputs, ShapeEnv."""

    def __init__(self, shape_env, inputs, leaves):
        self.shape_env = shape_env
        self.inputs = inputs  # [TensorMeta] of the fake inputs, before the program ran
        # [(path, TensorMeta | ("int", expr) | None)], paths as standalone.flatten names them
        self.leaves = leaves


class TensorMeta:
    """Sympy sizes, strides and storage offset of one fake tensor."""

    def __init__(self, t):
        self.dtype = t.dtype
        self.sizes = [_expr(s) for s in t.shape]
        self.strides = [_expr(s) for s in t.stride()]
        self.offset = _expr(t.storage_offset())
        base = getattr(t, "_base", None)
        self.base = TensorMeta(base) if base is not None else None


def _expr(value):
    import sympy
    import torch

    if isinstance(value, torch.SymInt):
        return value.node.expr
    return sympy.Integer(int(value))


def _leaf_meta(value):
    """A TensorMeta, ("int", expr) for a SymInt/int leaf, or None (not compared)."""
    import torch

    if isinstance(value, torch.Tensor):
        meta = TensorMeta(value)
        meta.base = None  # outputs are compared on their own metadata only
        return meta
    if isinstance(value, (torch.SymInt, int)) and not isinstance(value, bool):
        return ("int", _expr(value))
    return None


def _symbolic_builtins() -> dict:
    """``max``, ``min`` and ``divmod`` that accept SymInts the way Dynamo does.

    Dynamo turns ``max(n, 1)`` on a SymInt into ``torch.sym_max`` (no guard)
    and traces ``divmod`` symbolically; plain Python would guard (impossible
    on an unbacked size) or raise. Plain ints behave as before.
    """
    import builtins

    import torch

    def symbolic(args, kwargs):
        return (len(args) == 2 and not kwargs and any(isinstance(a, torch.SymInt) for a in args)
                and all(isinstance(a, (int, torch.SymInt)) and not isinstance(a, bool) for a in args))

    def max_(*args, **kwargs):
        return torch.sym_max(*args) if symbolic(args, kwargs) else builtins.max(*args, **kwargs)

    def min_(*args, **kwargs):
        return torch.sym_min(*args) if symbolic(args, kwargs) else builtins.min(*args, **kwargs)

    def divmod_(a, b):
        return (a // b, a % b) if symbolic((a, b), {}) else builtins.divmod(a, b)

    return {"max": max_, "min": min_, "divmod": divmod_}


def _load_for_tracing(source: str):
    from .execute import PROGRAM_GLOBALS_SOURCE

    namespace = _symbolic_builtins()
    exec(compile(PROGRAM_GLOBALS_SOURCE + source, "<symfuzz program>", "exec"), namespace)  # noqa: S102 - the program is ours, as in execute.load_function
    return namespace["fn"]


def trace_symbolic(source: str, call: dict, config: dict | None = None) -> Trace:
    """Run the program once on symbolic fake inputs hinted by ``call``."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    fn = _load_for_tracing(source)
    names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    fx_flags = {k: v for k, v in ((config or {}).get("fx") or {}).items() if k in FX_FLAGS}
    restore = standalone.set_compile_config({"fx": fx_flags} if fx_flags else {})
    try:
        shape_env = ShapeEnv()
        fake_mode = FakeTensorMode(shape_env=shape_env)
        real = standalone.make_args(call)
        try:
            fakes = [
                fake_mode.from_tensor(
                    t,
                    source=LocalSource(name),
                    symbolic_context=StatelessSymbolicContext(dynamic_sizes=[getattr(DimDynamic, DIM_DYNAMIC)] * t.dim()),
                )
                for name, t in zip(names, real)
            ]
            inputs = [TensorMeta(f) for f in fakes]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # Dynamo propagates fake tensors under the Python dispatcher too:
                # without it, C++ composite kernels see SymInts and refuse them.
                with enable_python_dispatcher(), fake_mode:
                    out = fn(*fakes)
            tree = (out, tuple(fakes))
            leaves = [(path, _leaf_meta(v)) for path, v in standalone.flatten(tree)]
        except Exception as exc:  # any tracing failure means "not comparable"
            raise TraceFailed(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]) from exc
    finally:
        restore()
    return Trace(shape_env, inputs, leaves)


# ---------------------------------------------------------------- evaluating


def evaluate(expr, bindings):
    """``expr`` (sympy int or boolean) at ``bindings``; None if it has an unbound symbol."""
    import sympy

    free = expr.free_symbols
    if not free <= bindings.keys():
        return None
    value = expr.xreplace({s: sympy.Integer(bindings[s]) for s in free}) if free else expr
    if value is sympy.true:
        return True
    if value is sympy.false:
        return False
    if getattr(value, "is_Integer", False):
        return int(value)
    return None


def _evaluate_leaf_expr(expr, bindings, shape_env):
    value = evaluate(expr, bindings)
    if value is None and not expr.free_symbols <= bindings.keys():
        try:  # a replaced symbol (e.g. an unbacked one pinned to an input size)
            value = evaluate(shape_env.replace(expr), bindings)
        except Exception:  # noqa: BLE001 - replace() is best effort
            value = None
    return value


def bind(trace: Trace, real_args) -> tuple[dict | None, bool, str]:
    """Bindings symbol -> this call's value, read off the real inputs.

    Returns (bindings or None if the call's input sizes are not described by
    the trace, whether input strides/offsets match the trace too, reason).
    """
    import sympy

    pairs = []  # (fake TensorMeta, real tensor)
    for meta, t in zip(trace.inputs, real_args):
        if len(meta.sizes) != t.dim():
            return None, False, "input rank differs from the traced call"
        pairs.append((meta, t))
        if meta.base is not None and t._base is not None and len(meta.base.sizes) == t._base.dim():
            pairs.append((meta.base, t._base))

    bindings: dict = {}
    entries = []  # (kind, expr, actual)
    for meta, t in pairs:
        entries += [("size", e, v) for e, v in zip(meta.sizes, t.shape)]
        entries += [("stride", e, v) for e, v in zip(meta.strides, t.stride())]
        entries.append(("stride", meta.offset, t.storage_offset()))
    entries.sort(key=lambda entry: entry[0] != "size")  # stable: every size first
    for _, e, v in entries:  # a stride may be duck-sized onto a size's symbol
        if isinstance(e, sympy.Symbol) and e not in bindings:
            bindings[e] = int(v)
    strides_match = True
    for kind, e, v in entries:
        got = evaluate(e, bindings)
        if got == int(v):
            continue
        if kind == "size":
            return None, False, f"input size {v} where the trace has {e}"
        strides_match = False
    return bindings, strides_match, ""


def violated_guard(shape_env, bindings) -> str | None:
    """The first constraint of the trace the call breaks (or cannot be checked against), else None."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    for sym, value in bindings.items():
        r = shape_env.var_to_range.get(sym)
        if r is None:
            continue
        if (r.lower is not -int_oo and value < int(r.lower)) or (r.upper is not int_oo and value > int(r.upper)):
            return f"{sym} = {value} outside the traced range [{r.lower}, {r.upper}]"
    constraints = [g.expr for g in shape_env.guards]
    constraints += [sympy.Eq(sym, repl) for sym, repl in shape_env.replacements.items() if sym in bindings]
    for expr in constraints:
        ok = evaluate(expr, bindings)
        if ok is False:
            return f"guard {expr} is false"
        if ok is None:
            return f"guard {expr} cannot be evaluated from input sizes"
    for asserts in shape_env.deferred_runtime_asserts.values():
        for ra in asserts:
            if evaluate(ra.expr, bindings) is False:
                return f"runtime assert {ra.expr} is false"
    return None


def _real_strides(fn, call):
    """Eager outputs with their true strides (``call.eager`` holds clones)."""
    try:
        args = standalone.make_args(call)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
        return dict(standalone.flatten((out, tuple(args))))
    except Exception:  # noqa: BLE001 - then strides are simply not compared
        return None


class StrideBaseline:
    """Per leaf and dim: did fake and eager strides agree at the first call
    that compared them? (The oracle's own state across one run's calls.)

    For a value outside the stride allow-list, fake and eager may choose
    different layouts (torch excuses that for CPU elementwise ops), but a
    stride expression that agreed with eager at the first compared call and
    disagrees at another call's sizes is wrong symbolically, whatever op made
    it. Disagreements at the first compared call are only recorded.
    """

    def __init__(self):
        self.agreed: dict = {}  # path -> {dim}
        self.seen: set = set()  # paths whose first comparison is done
        self.divergent: list = []  # first-call disagreements, for the evidence

    def judge(self, path, dim, want, got) -> bool:
        """Should this stride disagreement be reported? Also learns agreements."""
        if path not in self.seen:
            if want == got:
                self.agreed.setdefault(path, set()).add(dim)
            elif len(self.divergent) < 5:
                self.divergent.append({"path": path, "dim": dim, "fake": want, "eager": got})
            return False
        return want != got and dim in self.agreed.get(path, ())


def _under(path, prefixes) -> bool:
    return any(path == p or path.startswith(p + "[") for p in prefixes)


def compare_call(trace: Trace, bindings, eager_out, strides_of, compare_strides: bool, stride_paths=None,
                 baseline=None):
    """The first mismatch of one call: dict(path, what, dim, symbolic, expected, actual), or None.

    ``strides_of`` is a thunk giving {path: tensor with eager's true strides}.
    Strides of leaves under ``stride_paths`` (None: every leaf) must match
    eager; other leaves are judged by ``baseline`` (a StrideBaseline; None:
    their strides are not compared).
    """
    import torch

    eager_leaves = standalone.flatten(eager_out)
    if len(eager_leaves) != len(trace.leaves):
        return {"path": "out", "what": "structure", "dim": None, "symbolic": f"{len(trace.leaves)} leaves",
                "expected": len(trace.leaves), "actual": len(eager_leaves)}
    env = trace.shape_env
    stride_leaves = None
    for (path, meta), (_, actual) in zip(trace.leaves, eager_leaves):
        if meta is None:
            continue
        if isinstance(meta, tuple):  # a SymInt/int output
            value = _evaluate_leaf_expr(meta[1], bindings, env)
            if value is not None and isinstance(actual, int) and value != actual:
                return {"path": path, "what": "value", "dim": None, "symbolic": str(meta[1]), "expected": value, "actual": actual}
            continue
        if not isinstance(actual, torch.Tensor):
            continue
        if meta.dtype != actual.dtype:
            return {"path": path, "what": "dtype", "dim": None, "symbolic": str(meta.dtype),
                    "expected": str(meta.dtype), "actual": str(actual.dtype)}
        if len(meta.sizes) != actual.dim():
            return {"path": path, "what": "rank", "dim": None, "symbolic": str(meta.sizes),
                    "expected": len(meta.sizes), "actual": actual.dim()}
        sizes = [_evaluate_leaf_expr(e, bindings, env) for e in meta.sizes]
        for d, (e, want, got) in enumerate(zip(meta.sizes, sizes, actual.shape)):
            if want is not None and want != got:
                return {"path": path, "what": "size", "dim": d, "symbolic": str(e), "expected": want, "actual": int(got)}
        # Strides as torch compares them (check_significant_strides): non-empty
        # tensors, dims of size > 1, and only where the sizes are known.
        if not compare_strides or None in sizes or actual.numel() == 0:
            continue
        promised = stride_paths is None or _under(path, stride_paths)
        if not promised and baseline is None:
            continue
        if stride_leaves is None:
            stride_leaves = strides_of() or {}
        real = stride_leaves.get(path)
        if not isinstance(real, torch.Tensor) or list(real.shape) != list(actual.shape):
            continue
        compared_dims = False
        for d, e in enumerate(meta.strides):
            if real.shape[d] <= 1:
                continue
            want = _evaluate_leaf_expr(e, bindings, env)
            if want is None:
                continue
            got = int(real.stride(d))
            compared_dims = True
            report = want != got if promised else baseline.judge(path, d, want, got)
            if report:
                return {"path": path, "what": "stride", "dim": d, "symbolic": str(e), "expected": want, "actual": got,
                        "sizes": list(real.shape), "strides": list(real.stride()),
                        "rule": "allow-listed" if promised else "agreed at the first compared call"}
        if compared_dims and not promised:
            baseline.seen.add(path)
    return None


# ---------------------------------------------------------------- the oracle


@oracle(NAME)
def symbolic_metadata_oracle(case, run) -> Verdict:
    """Fails when a fake tensor's symbolic size, stride or dtype, evaluated at a
    call's input sizes, differs from what eager produced on that call.

    One symbolic trace (hinted by the first call) is judged against every
    call whose sizes satisfy the trace's guards; see the module docstring.
    Passes, with the reason in ``evidence``, when the program cannot be traced
    symbolically.
    """
    from .execute import load_function

    # The run's own case, when it has one, also holds calls planned during the run.
    ran = getattr(run, "case", None) or case
    calls = [c.to_json() for c in ran.schedule.calls]
    if not calls:
        return Verdict(ok=True, oracle=NAME, evidence={"skipped": "no calls"})
    try:
        trace = trace_symbolic(ran.source, calls[0], ran.schedule.config)
    except TraceFailed as exc:
        return Verdict(ok=True, oracle=NAME, evidence={"skipped": "symbolic trace failed", "reason": str(exc)})

    fn = load_function(ran.source)
    stride_paths = _stride_paths(ran.program, stride_checked(ran.program))
    baseline = StrideBaseline()
    compared, skipped = [], {}
    for index, (call, result) in enumerate(zip(calls, run.calls)):
        if "error" in result.eager:
            skipped[index] = "eager raised"
            continue
        bindings, strides_match, why = bind(trace, standalone.make_args(call))
        if bindings is None:
            skipped[index] = why
            continue
        guard = violated_guard(trace.shape_env, bindings)
        if guard is not None:
            skipped[index] = guard
            continue
        mismatch = compare_call(trace, bindings, result.eager["out"], lambda call=call: _real_strides(fn, call), strides_match,
                                stride_paths, baseline)
        compared.append(index)
        if mismatch is None:
            continue
        key = f"{standalone.failure_key({'symptom': 'fake-real-mismatch', 'path': mismatch['path']}, run.output_ops)}|{mismatch['what']}"
        evidence = dict(mismatch)
        evidence["bindings"] = {str(s): v for s, v in sorted(bindings.items(), key=lambda kv: str(kv[0]))}
        evidence["hint_sizes"] = [list(a["shape"]) for a in calls[0]["args"]]
        evidence["call_sizes"] = [list(a["shape"]) for a in call["args"]]
        evidence["detail"] = (
            f"{mismatch['path']}: fake {mismatch['what']}"
            + (f"[{mismatch['dim']}]" if mismatch["dim"] is not None else "")
            + f" = {mismatch['symbolic']} = {mismatch['expected']} at this call's sizes, eager gave {mismatch['actual']}"
        )
        return Verdict(
            ok=False,
            oracle=NAME,
            symptom="fake-real-mismatch",
            stage="dynamo",
            signature=standalone.signature("fake-real-mismatch", SIGNATURE_LANE, key),
            call_index=index,
            evidence=evidence,
        )
    evidence = {"compared_calls": compared, "skipped_calls": {str(k): v for k, v in skipped.items()}}
    if baseline.divergent:
        evidence["layout_divergences"] = baseline.divergent  # not findings: see StrideBaseline
    return Verdict(ok=True, oracle=NAME, evidence=evidence)
