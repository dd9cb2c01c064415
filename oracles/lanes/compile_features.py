"""Cheap, name-free features of what the compiler did with a case, for coverage.

A ``FeatureCollector`` watches the compiles of one run and keeps, per family, a set of
short strings that say *what kind* of thing torch produced, with every name and every
number erased (0 and 1, and small buckets, are kept: 0/1 specialization matters):

- ``guard``: each shape guard's sympy structure, e.g. ``Eq(Mod(s,c),0)``; and the
  upper-bounded sizes (``range:s<=c``);
- ``assert``: the deferred runtime asserts (``torch._check`` on unbacked sizes), alike;
- ``specialize``: symbols replaced by a constant (0, 1 or another) or unified, duck
  sizing (one symbol for several dims), static dims of a dynamic compile, Python
  numbers Dynamo guarded on, a recompile that made a dim dynamic (automatic dynamic);
- ``index``: the sympy functions in the index expressions Inductor emitted, with
  whether their divisor, modulus or bound is symbolic or constant
  (``ModularIndexing[symbolic-divisor]``); from ``LoopBody`` and from the kernels'
  ``rename_indexing``, so both the C++ and the Triton backends;
- ``lowering``: aten ops Inductor lowered or fell back on, and ops decomposed at the
  top of AOTAutograd's trace;
- ``unbacked``: unbacked symbols created (by the op that made them), their ranges,
  ``torch._check`` kinds, guards on unbacked symbols;
- ``aot``: AOTAutograd's view-and-mutation metadata (input mutations, output aliasing,
  SymInts saved for backward) and which graphs Inductor compiled (a backward one
  compiled lazily, at the first backward call after the compile, is not seen);
- ``dynamo``: Dynamo's guard kinds and graph-break kinds;
- ``collector``: errors inside the collector itself (``error:<type>``), overflowing families.

The erasure itself is ``oracles.lanes.feature_erasure``. The hooks on torch internals exist only while a collector is active (around a backend
call: ``oracles.lanes.guards.GuardRecorder``); a hook whose target this torch lacks is
skipped, and an exception inside an observer is counted, never raised into the compile.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch._guards

from symfuzz.oracles.lanes.feature_erasure import (bucket, erase, graph_break_kind, index_forms, number_token, source_kind,
                                                   symbol_token)

CAP = 64  # features kept per family
SEEN_INDEX = 4096  # index expressions remembered per collector (each is walked once)
UNBACKED_RE = re.compile(r"\bu\b")  # an unbacked symbol in an erased guard


def _source_name(source) -> str:
    name = getattr(source, "name", "")
    return name() if callable(name) else str(name)


def _op_name(target) -> str:
    return getattr(target, "__name__", None) or str(target)



# ---------------------------------------------------------------- the collector


class FeatureCollector:
    """The features of the compiles of one run: ``with collector.active(): <compile>``,
    then ``collector.after_compile(gm, example_inputs, shape_env)``; ``features()``."""

    def __init__(self, cap: int = CAP):
        self.cap = cap
        self.families: dict[str, set[str]] = {}
        self._seen_index: set = set()
        self._dims: dict = {}  # (frame, source, dim) -> symbolic in the latest compile
        self._breaks = _graph_break_counts()

    def add(self, family: str, feature: str) -> None:
        kept = self.families.setdefault(family, set())
        if feature in kept:
            return
        if len(kept) >= self.cap:
            self.families.setdefault("collector", set()).add(f"overflow:{family}")
            return
        kept.add(feature)

    def add_all(self, family: str, features) -> None:
        for feature in features:
            self.add(family, str(feature))

    def guarded(self, observer: Callable, *args, **kwargs) -> None:
        """``observer(self, *args, **kwargs)``, an exception counted instead of raised."""
        try:
            observer(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the collector must never break a compile
            self.families.setdefault("collector", set()).add(f"error:{type(exc).__name__}")

    @contextlib.contextmanager
    def active(self):
        """Hooks on torch record into this collector while the block runs."""
        entered = False
        try:
            _activate(self)
            entered = True
        except Exception as exc:  # noqa: BLE001 - no features, the compile goes on
            self.families.setdefault("collector", set()).add(f"error:{type(exc).__name__}")
        try:
            yield self
        finally:
            if entered:
                self.guarded(_deactivate_observer)

    def index(self, expr) -> None:
        if expr in self._seen_index:
            return
        if len(self._seen_index) < SEEN_INDEX:
            self._seen_index.add(expr)
        self.add_all("index", sorted(index_forms(expr)))

    def after_compile(self, gm, example_inputs, shape_env, frame_id=None) -> None:
        """Read what one finished compile left: its ShapeEnv, Dynamo's graph and guards,
        AOTAutograd's metadata. Each part is guarded alone."""
        if shape_env is not None:
            self.guarded(_read_shape_env, shape_env)
        if gm is not None:
            self.guarded(_read_dynamo_graph, gm, shape_env, frame_id)
        self.guarded(_read_tracing_context)

    def features(self) -> dict[str, list[str]]:
        """Family -> sorted features, with the graph breaks since this collector began."""
        self.guarded(_read_graph_breaks)
        return {family: sorted(kept) for family, kept in sorted(self.families.items()) if kept}


def _read_shape_env(collector: FeatureCollector, shape_env) -> None:
    for guard in list(getattr(shape_env, "guards", ())):
        expr = getattr(guard, "expr", None)
        if expr is not None:
            text = erase(expr)
            collector.add("guard", text)
            if UNBACKED_RE.search(text):
                collector.add("unbacked", "guard-on-unbacked")
    asserts = getattr(shape_env, "deferred_runtime_asserts", {}) or {}
    for entries in list(asserts.values()):
        for entry in entries:
            collector.add("assert", erase(entry.expr))
    for symbol, value in list((getattr(shape_env, "replacements", {}) or {}).items()):
        if getattr(value, "is_Number", False):
            collector.add("specialize", f"replaced:const-{number_token(value)}")
        elif getattr(value, "is_Symbol", False):
            collector.add("specialize", f"replaced:{symbol_token(symbol)}={symbol_token(value)}")
        else:
            collector.add("specialize", f"replaced:{erase(value)}")
    for symbol, sources in list((getattr(shape_env, "var_to_sources", {}) or {}).items()):
        kinds = [source_kind(_source_name(s)) for s in sources]
        if any(kind == "value" for _, kind in kinds):
            collector.add("specialize", "dynamic-python-int")
        if len(kinds) > 1:
            across = "same-input" if len({base for base, _ in kinds}) == 1 else "cross-input"
            collector.add("specialize", f"duck:{'~'.join(sorted({k for _, k in kinds}))}:{across}")
    for symbol, bounds in list((getattr(shape_env, "var_to_range", {}) or {}).items()):
        token = symbol_token(symbol)
        lower, upper = number_token(bounds.lower), number_token(bounds.upper)
        if token == "u":
            collector.add("unbacked", f"range[{lower},{upper}]")
        elif upper != "oo":
            collector.add("guard", f"range:{token}<={upper}")


def _read_dynamo_graph(collector: FeatureCollector, gm, shape_env, frame_id) -> None:
    symbolic, static = 0, set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value, arg = node.meta.get("example_value"), node.meta.get("grapharg")
            shape = getattr(value, "shape", None) if isinstance(value, torch.Tensor) else None
            if shape is None:
                continue
            source = _source_name(getattr(arg, "source", None)) if arg is not None else node.name
            for dim, size in enumerate(shape):
                is_symbolic = isinstance(size, torch.SymInt)
                symbolic += is_symbolic
                if not is_symbolic:
                    static.add(number_token(size))
                key = (frame_id, source, dim)
                before = collector._dims.get(key)
                if before is not None and before != is_symbolic:
                    collector.add("specialize", "automatic-dynamic:" + ("static->dynamic" if is_symbolic else "dynamic->static"))
                collector._dims[key] = is_symbolic
        elif node.op in ("call_function", "call_method"):
            name = _op_name(node.target)
            if "unbacked_bindings" in node.meta:
                collector.add("unbacked", f"created:{name}")
            if "check" in name or "assert" in name:
                collector.add("unbacked", f"check:{name}")
    if symbolic or static:
        collector.add("specialize", "dims:" + ("mixed" if symbolic and static else "dynamic" if symbolic else "static"))
    if symbolic:  # static dims of a dynamic compile: 0/1 specialization, marks, duck ties to constants
        collector.add_all("specialize", [f"static-dim:{token}" for token in sorted(static)])
    context = torch._guards.TracingContext.try_get()
    guards = getattr(getattr(context, "guards_context", None), "dynamo_guards", ()) or ()
    for guard in list(guards):
        kind = guard.create_fn_name()
        collector.add("dynamo", f"guard:{kind}")
        if kind in ("EQUALS_MATCH", "CONSTANT_MATCH"):
            collector.add("specialize", f"python-number:{kind}:{type(guard.originating_source).__name__}")


def _read_tracing_context(collector: FeatureCollector) -> None:
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None:
        return
    flags = ("mutates_data", "mutates_metadata", "mutates_storage_metadata", "mutations_hidden_from_autograd",
             "mutations_under_no_grad_or_inference_mode", "keep_input_mutations")
    for info in getattr(meta, "input_info", ()):
        if getattr(info, "requires_grad", False):
            collector.add("aot", "input:requires-grad")
        if getattr(info, "mutates_data", False) or getattr(info, "mutates_metadata", False):  # the rest qualify a mutation
            collector.add_all("aot", [f"input:{flag.replace('_', '-')}" for flag in flags if getattr(info, flag, False)])
    for info in getattr(meta, "output_info", ()):
        kind = getattr(getattr(info, "output_type", None), "name", None)
        if kind is not None:
            collector.add("aot", f"output:{kind}")
    saved = getattr(meta, "num_symints_saved_for_bw", None)
    if saved is not None:
        collector.add("aot", f"symints-saved:{bucket(saved)}")
    if getattr(meta, "num_intermediate_bases", 0):
        collector.add("aot", f"intermediate-bases:{bucket(meta.num_intermediate_bases)}")
    if getattr(meta, "tokens", None):
        collector.add("aot", "effect-tokens")


def _read_graph_breaks(collector: FeatureCollector) -> None:
    now = _graph_break_counts()
    for key, count in now.items():
        if count > collector._breaks.get(key, 0):
            collector.add("dynamo", f"break:{graph_break_kind(key)}")
    collector._breaks = now


def _graph_break_counts() -> dict:
    try:
        # private torch API, looked up at use: a torch that moved it loses this family, not the compile
        from torch._dynamo.utils import counters

        return dict(counters.get("graph_break", {}))
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return {}


# ---------------------------------------------------------------- hooks on torch


def _observe_loop_body(collector, out, body, *args, **kwargs) -> None:
    for expr in body.indexing_exprs.values():
        collector.index(expr)


def _observe_rename_indexing(collector, out, kernel, index, *args, **kwargs) -> None:
    for expr in index if isinstance(index, (list, tuple)) else (index,):
        collector.index(expr)


def _observe_call_function(collector, out, graph, target, *args, **kwargs) -> None:
    if not isinstance(target, torch._ops.OpOverload):
        return
    # private torch API, looked up at use (imported already: this runs inside a lowering)
    from torch._inductor.lowering import fallbacks

    collector.add("lowering", f"{'fallback' if target in fallbacks else 'lowered'}:{target}")


def _observe_graph_run(collector, out, graph, *args, **kwargs) -> None:
    kind = "backward" if graph.is_backward else "inference" if getattr(graph, "is_inference", False) else "forward"
    collector.add("aot", f"graph:{kind}")


def _observe_decomposition(collector, out, proxy_mode, op, *args, top=True, **kwargs) -> None:
    if top and out is not NotImplemented:
        collector.add("lowering", f"decomposed:{op}")


def _after(observer: Callable) -> Callable:
    """A hook: call the original, then ``observer(collector, result, *args)``."""
    def wrap(original):
        @functools.wraps(original)
        def hooked(*args, **kwargs):
            out = original(*args, **kwargs)
            _notify(observer, out, *args, **kwargs)
            return out
        return hooked
    return wrap


def _wrap_decomposition(original):
    """``maybe_handle_decomp``, noting ops decomposed at the top of the trace (not inside
    another decomposition)."""
    @functools.wraps(original)
    def hooked(proxy_mode, op, *args, **kwargs):
        top = getattr(proxy_mode, "decomp_layers", 0) == 0
        out = original(proxy_mode, op, *args, **kwargs)
        _notify(_observe_decomposition, out, proxy_mode, op, top=top)
        return out
    return hooked


@dataclass(frozen=True)
class Hook:
    """``module.owner.name`` replaced by ``wrap(original)`` while a collector is active."""

    module: str
    owner: str  # a class in the module, or "" for the module itself
    name: str
    wrap: Callable


HOOKS = (
    Hook("torch._inductor.loop_body", "LoopBody", "__init__", _after(_observe_loop_body)),
    Hook("torch._inductor.codegen.common", "Kernel", "rename_indexing", _after(_observe_rename_indexing)),
    Hook("torch._inductor.graph", "GraphLowering", "call_function", _after(_observe_call_function)),
    Hook("torch._inductor.graph", "GraphLowering", "run", _after(_observe_graph_run)),
    Hook("torch.fx.experimental.proxy_tensor", "", "maybe_handle_decomp", _wrap_decomposition),
)

_ACTIVE: list[FeatureCollector] = []
_INSTALLED: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original in owner's dict or None, hook)
_LOCK = threading.RLock()


def _notify(observer: Callable, *args, **kwargs) -> None:
    collector = _ACTIVE[-1] if _ACTIVE else None
    if collector is not None:
        collector.guarded(observer, *args, **kwargs)


def _activate(collector: FeatureCollector) -> None:
    with _LOCK:
        if not _ACTIVE:
            _install(collector)
        _ACTIVE.append(collector)


def _deactivate_observer(collector: FeatureCollector) -> None:
    with _LOCK:
        if collector in _ACTIVE:
            _ACTIVE.reverse()
            _ACTIVE.remove(collector)  # the innermost activation of this collector
            _ACTIVE.reverse()
        if not _ACTIVE:
            _uninstall()


def _install(collector: FeatureCollector) -> None:
    """Put every hook whose target exists in this torch in place."""
    for hook in HOOKS:
        try:
            owner, original = _target(hook)
        except (ImportError, AttributeError):
            continue  # not in this torch: the hook is skipped
        except Exception as exc:  # noqa: BLE001 - a module that fails to import: skipped, counted
            collector.families.setdefault("collector", set()).add(f"error:{type(exc).__name__}")
            continue
        try:
            wrapped = hook.wrap(original)
            own = vars(owner).get(hook.name)
            setattr(owner, hook.name, wrapped)
        except Exception as exc:  # noqa: BLE001 - a hook that cannot be set is skipped
            collector.families.setdefault("collector", set()).add(f"error:{type(exc).__name__}")
            continue
        _INSTALLED.append((owner, hook.name, own, wrapped))


def _uninstall() -> None:
    """Put the originals back (unless someone else replaced a hook meanwhile)."""
    while _INSTALLED:
        owner, name, own, wrapped = _INSTALLED.pop()
        if vars(owner).get(name) is not wrapped:
            continue
        if own is None:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


def _target(hook: Hook) -> tuple[Any, Any]:
    """(owner, the attribute a hook replaces); ImportError or AttributeError if this torch
    has no such thing."""
    # private torch APIs, looked up at use: a torch that moved one loses that hook, not the compile
    owner = importlib.import_module(hook.module)
    owner = getattr(owner, hook.owner) if hook.owner else owner
    return owner, getattr(owner, hook.name)


def hooks_available() -> list[str]:
    """The hooks this torch has a target for, as ``module.owner.name``."""
    out = []
    for hook in HOOKS:
        try:
            _target(hook)
        except (ImportError, AttributeError):
            continue
        out.append(".".join(p for p in (hook.module, hook.owner, hook.name) if p))
    return out
