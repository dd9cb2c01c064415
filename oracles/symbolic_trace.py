"""Symbolic fake-tensor tracing and the metadata comparison, torch-only.

The machinery of the symbolic-metadata oracle (``oracles.symbolic_meta``,
whose docstring explains the method): trace a program once under
``FakeTensorMode(shape_env=ShapeEnv())``, bind the trace's symbols to each
call's real input sizes, skip calls the trace's guards do not admit, and
compare the traced sizes, strides and dtypes with eager's.

This module imports only the standard library and torch (sympy and private torch APIs inside functions):
its source is inlined into ``repro.py`` scripts for ``fake-real-mismatch``
findings (see ``corpus.scripts``), after an inlined ``fuzz/script_runtime.py``
that defines the names imported from it below; the renderer drops that one
import. Do not import other project modules here, and keep
``from __future__`` imports out (the text is inlined mid-file).
"""

import builtins
import warnings

import torch

from symfuzz.fuzz.script_runtime import failure_key, flatten, make_args, set_compile_config, signature

SYMPTOM = "fake-real-mismatch"
SIGNATURE_LANE = "fake-tensor"  # the trace is lane-independent; see oracles.symbolic_meta

# fx (ShapeEnv) config flags the trace honours. Dynamo flags do not apply:
# nothing here goes through Dynamo.
FX_FLAGS = ("use_duck_shape",)

# How input dims are made symbolic: "DUCK" is what Dynamo does for a dynamic
# dim (equal hint sizes share one symbol).
DIM_DYNAMIC = "DUCK"


class TraceFailed(Exception):
    """The program could not be traced with symbolic sizes (not a finding)."""


class Trace:
    """One symbolic trace: fake inputs (before and after), outputs, ShapeEnv."""

    def __init__(self, shape_env, inputs, leaves):
        self.shape_env = shape_env
        # Per input, before the program ran: the fake tensor's TensorMeta; ("int", expr) for
        # an int argument (a symbol, as Dynamo makes an int it does not specialize); ("ints",
        # [expr]) for an int list; ("const", value) for a float or bool (constant in the trace).
        self.inputs = inputs
        # [(path, TensorMeta | ("int", expr) | None)], paths as script_runtime.flatten names them
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
    # private torch API and sympy, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
    import sympy

    if isinstance(value, torch.SymInt):
        return value.node.expr
    return sympy.Integer(int(value))


def _leaf_meta(value):
    """A TensorMeta, ("int", expr) for a SymInt/int leaf, or None (not compared)."""
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


def _load_for_tracing(source, prelude):
    namespace = _symbolic_builtins()
    exec(compile(prelude + source, "<symfuzz program>", "exec"), namespace)  # noqa: S102 - the program is ours, as in execute.load_function
    return namespace["fn"]


def _fake_argument(fake_mode, shape_env, name, value):
    """The traced stand-in for one argument, and its Trace.inputs entry."""
    # private torch API, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
    from torch._dynamo.source import GetItemSource, LocalSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    if isinstance(value, torch.Tensor):
        fake = fake_mode.from_tensor(
            value, source=LocalSource(name),
            symbolic_context=StatelessSymbolicContext(dynamic_sizes=[getattr(DimDynamic, DIM_DYNAMIC)] * value.dim()))
        return fake, TensorMeta(fake)

    def symint(number, source):
        return shape_env.create_unspecified_symint_and_symbol(number, source, DimDynamic.DYNAMIC)

    if type(value) is int:
        fake = symint(value, LocalSource(name))
        return fake, ("int", _expr(fake))
    if isinstance(value, list) and all(type(v) is int for v in value):
        fake = [symint(v, GetItemSource(LocalSource(name), j)) for j, v in enumerate(value)]
        return fake, ("ints", [_expr(v) for v in fake])
    return value, ("const", value)


def trace_symbolic(source, call, config=None, *, prelude):
    """Run the program once on symbolic fake inputs hinted by ``call``.

    ``prelude`` is the source the program's globals come from
    (``fuzz.ir.PRELUDE``: math, torch, F).
    """
    # private torch API and sympy, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fn = _load_for_tracing(source, prelude)
    names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    fx_flags = {k: v for k, v in ((config or {}).get("fx") or {}).items() if k in FX_FLAGS}
    restore = set_compile_config({"fx": fx_flags} if fx_flags else {})
    try:
        shape_env = ShapeEnv()
        fake_mode = FakeTensorMode(shape_env=shape_env)
        real = make_args(call)
        try:
            made = [_fake_argument(fake_mode, shape_env, name, value) for name, value in zip(names, real)]
            fakes = [fake for fake, _ in made]
            inputs = [meta for _, meta in made]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # Dynamo propagates fake tensors under the Python dispatcher too:
                # without it, C++ composite kernels see SymInts and refuse them.
                with enable_python_dispatcher(), fake_mode:
                    out = fn(*fakes)
            tree = (out, tuple(fakes))
            leaves = [(path, _leaf_meta(v)) for path, v in flatten(tree)]
        except Exception as exc:  # any tracing failure means "not comparable"
            raise TraceFailed(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]) from exc
    finally:
        restore()
    return Trace(shape_env, inputs, leaves)


# ---------------------------------------------------------------- evaluating


def evaluate(expr, bindings):
    """``expr`` (sympy int or boolean) at ``bindings``; None if it has an unbound symbol."""
    # private torch API and sympy, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
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


def bind(trace, real_args):
    """Bindings symbol -> this call's value, read off the real inputs.

    Returns (bindings or None if the call's input sizes are not described by
    the trace, whether input strides/offsets match the trace too, reason).
    """
    # private torch API and sympy, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
    import sympy

    pairs = []  # (fake TensorMeta, real tensor)
    numbers = []  # (expr, this call's int)
    for meta, t in zip(trace.inputs, real_args):
        if isinstance(meta, tuple):  # a Python number or int list
            kind, traced = meta
            if kind == "int":
                numbers.append((traced, t))
            elif kind == "ints":
                if not isinstance(t, list) or len(t) != len(traced):
                    return None, False, "an int list input has another length than in the traced call"
                numbers += list(zip(traced, t))
            elif t != traced or type(t) is not type(traced):
                return None, False, f"a number input is {t!r} where the trace has the constant {traced!r}"
            continue
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
    entries += [("number", e, v) for e, v in numbers]
    entries.sort(key=lambda entry: entry[0] == "stride")  # stable: every size and number first
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
        if kind == "number":
            return None, False, f"an int input is {v} where the trace has {e}"
        strides_match = False
    return bindings, strides_match, ""


def violated_guard(shape_env, bindings):
    """The first constraint of the trace the call breaks (or cannot be checked against), else None."""
    # private torch API and sympy, looked up at use: scripts inline this module, whose top level imports only the standard library and torch
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


def real_strides(fn, call):
    """Eager outputs with their true strides (``call.eager`` holds clones)."""
    try:
        args = make_args(call)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
        return dict(flatten((out, tuple(args))))
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


def compare_call(trace, bindings, eager_out, strides_of, compare_strides, stride_paths=None,
                 baseline=None):
    """The first mismatch of one call: dict(path, what, dim, symbolic, expected, actual), or None.

    ``strides_of`` is a thunk giving {path: tensor with eager's true strides}.
    Strides of leaves under ``stride_paths`` (None: every leaf) must match
    eager; other leaves are judged by ``baseline`` (a StrideBaseline; None:
    their strides are not compared).
    """
    # Outputs and final inputs: the trace has no gradients part (run_call's third, when inputs require grad).
    eager_leaves = flatten(tuple(eager_out)[:2])
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


# ---------------------------------------------------------------- judging a run


class Judgement:
    """What judging a run's calls against one trace found: the first mismatch
    (``index``, ``mismatch``, ``bindings``, ``key``, ``signature``; all None
    when there is none), the calls compared and skipped (with why), and the
    layouts fake and eager chose differently from the start (not findings)."""

    def __init__(self):
        self.index = self.mismatch = self.bindings = self.key = self.signature = None
        self.compared = []
        self.skipped = {}
        self.divergent = []

    def evidence(self, calls):
        """The verdict's evidence for the mismatch (``calls``: the run's calls, as JSON)."""
        mismatch = self.mismatch
        evidence = dict(mismatch)
        evidence["bindings"] = {str(s): v for s, v in sorted(self.bindings.items(), key=lambda kv: str(kv[0]))}
        evidence["hint_sizes"] = [list(a.get("shape", ())) for a in calls[0]["args"]]
        evidence["call_sizes"] = [list(a.get("shape", ())) for a in calls[self.index]["args"]]
        evidence["detail"] = (
            f"{mismatch['path']}: fake {mismatch['what']}"
            + (f"[{mismatch['dim']}]" if mismatch["dim"] is not None else "")
            + f" = {mismatch['symbolic']} = {mismatch['expected']} at this call's sizes, eager gave {mismatch['actual']}"
        )
        return evidence


def mismatch_key(mismatch, output_ops):
    """The signature key of a mismatch: the op that made the leaf, and what differs."""
    return f"{failure_key({'symptom': SYMPTOM, 'path': mismatch['path']}, output_ops)}|{mismatch['what']}"


def judge_calls(trace, fn, calls, eager_of, stride_paths, output_ops):
    """Judge every call, in order, against ``trace``; stop at the first mismatch.

    ``fn`` is the plain eager program (for eager's true strides);
    ``eager_of(index, call)`` gives that call's eager record (``run_call``'s
    {"out": ...} or {"error": ...}); ``stride_paths``: the leaves whose
    strides must match eager (the others are held to a StrideBaseline).
    """
    judgement = Judgement()
    baseline = StrideBaseline()
    for index, call in enumerate(calls):
        eager = eager_of(index, call)
        if "error" in eager:
            judgement.skipped[index] = "eager raised"
            continue
        bindings, strides_match, why = bind(trace, make_args(call))
        if bindings is None:
            judgement.skipped[index] = why
            continue
        guard = violated_guard(trace.shape_env, bindings)
        if guard is not None:
            judgement.skipped[index] = guard
            continue
        mismatch = compare_call(trace, bindings, eager["out"], lambda call=call: real_strides(fn, call), strides_match,
                                stride_paths, baseline)
        judgement.compared.append(index)
        if mismatch is None:
            continue
        judgement.index, judgement.mismatch, judgement.bindings = index, mismatch, bindings
        judgement.key = mismatch_key(mismatch, output_ops)
        judgement.signature = signature(SYMPTOM, SIGNATURE_LANE, judgement.key)
        break
    judgement.divergent = baseline.divergent
    return judgement
