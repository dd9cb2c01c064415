"""Drawing nn.Module programs: parameters and buffers, state updates, train and eval.

A module program (``ir.Program.params``) is drawn like any program, through the
``Builder`` (``fuzz/generate.py``), with a module's state as values beside the
inputs: each parameter or buffer is one tensor, the same in every world (a model is
built once), and every statement is still executed in every world and kept only
when valid in all of them. What makes a program a module:

* fixed sizes tied to the inputs: a module's state has fixed sizes, so inputs get a
  fixed feature dim (last, or the channel dim 1) while their batch dims stay size
  symbols, and weights take it: a Linear-like weight's in-features, a norm's
  channels, an embedding's width (``tie_dims``, ``draw_module_statement``); an op's
  partner whose shape is the same at every call becomes a parameter or a buffer
  (``state_partner``);
* in-place buffer updates in forward: running statistics
  (``r.mul_(0.9).add_(x.detach().reshape(-1, F).mean(0) * 0.1)``), counters,
  ``F.batch_norm(..., training=training)``, some only in training mode; in-place
  ops drawn on a buffer like on any value;
* train and eval: each call sets the model's mode (``Call.training``), and the
  body may read ``training`` (``self.training``), which Dynamo guards on.

After the calls are made, ``settle_module`` draws a training step (or keeps forward
calls) and ``force_parameter_static_shapes``, and keeps the parameters trainable
only where eager computes every call's gradients (and, with ops whose gradient
jumps at ties, the same gradients after a nudge); otherwise they are frozen and the
calls are plain forward calls. Eager running the calls also rules out what the
worlds cannot see, which hold no autograd graphs: an in-place write to a parameter
that requires grad, a buffer updated with a value that requires grad (it would carry
one call's graph into the next), a value saved for backward and then overwritten.

This module never imports the generator (which imports it): it works on the
``Builder`` it is given.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Optional

import hypothesis.strategies as st
import torch

from symfuzz.fuzz.choices import weighted
from symfuzz.fuzz.gradients import JUMP, NUDGE, backward_class, nudged_args
from symfuzz.fuzz.ir import PRELUDE, TRAINING, ExprNode, Param, Program, node_reads
from symfuzz.fuzz.module_runtime import ModuleSide
from symfuzz.fuzz.schedule import draw_module_config
from symfuzz.fuzz.script_runtime import make_args, make_input, reference_output
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT, Operand

# Fixed feature sizes a module ties its inputs and state to.
FEATURE_WEIGHTS = [(4, 6), (3, 5), (8, 4), (2, 3), (5, 3), (16, 1)]
# Widths a module's layers map features to.
WIDTHS = [4, 3, 2, 8, 5]
STATEMENT_WEIGHTS = [("linear", 6), ("running_stat", 6), ("batch_norm", 4), ("mode_branch", 3), ("layer_norm", 3),
                     ("scale_shift", 3), ("counter", 2), ("embedding", 2), ("conv1d", 2)]
MOMENTA = [0.9, 0.5, 0.99]
MAX_STATE_NUMEL = 4096
SEED_BASE = 1 << 20  # parameter seeds: apart from the inputs'
# Training steps: (optimizer spec, weight).
STEPS = [({"optimizer": "sgd", "lr": 0.05, "momentum": 0.9}, 4), ({"optimizer": "sgd", "lr": 0.1, "momentum": 0.0}, 2),
         ({"optimizer": "adam", "lr": 0.01}, 3)]
# A parameter's state (and an input) is nudged by this much, relative, in the stability check.
STATE_NUDGE_SEED = 130_363


class Reject(Exception):
    """A module statement was invalid in some world: it is undone."""


@dataclass
class ModuleBuild:
    """What the Builder knows while drawing a module program: each world's mode
    (True: train) and the fixed feature sizes its inputs and state share."""

    modes: tuple
    features: tuple


def start_module(b, rate: float) -> bool:
    """Whether this case is a module program (about ``rate`` of them; shrinks toward
    not); if so, draw each call's mode and the feature sizes, and set ``b.module``."""
    per_mille = int(round(rate * 1000))
    if per_mille <= 0 or b.draw(st.integers(0, 999)) < 1000 - per_mille:
        return False
    modes = tuple(True for _ in range(b.n_worlds))
    if b.draw(st.integers(0, 2)) == 2:  # train/eval switches: eval is the drawn "True", so shrinking trains
        modes = tuple(not b.draw(st.booleans()) for _ in range(b.n_worlds))
    features = tuple(sorted({weighted(b.draw, FEATURE_WEIGHTS) for _ in range(2)}))
    b.module = ModuleBuild(modes, features)
    for env, mode in zip(b.envs, modes):
        env[TRAINING] = mode
    return True


def tie_dims(b, dims: tuple) -> tuple:
    """A module program's input dims: mostly with a fixed feature dim (the last one,
    or dim 1, a channel dim, of a rank-3 input), the batch dims left as drawn."""
    if not dims or b.draw(st.integers(0, 2)) == 0:
        return dims
    d = 1 if len(dims) >= 3 and b.draw(st.integers(0, 2)) == 0 else len(dims) - 1
    out = list(dims)
    out[d] = b.draw(st.sampled_from(b.module.features))
    return tuple(out)


# ------------------------------------------------------------------ state


def add_param(b, kind: str, dims: tuple, dtype: str, init: str = "normal") -> Operand:
    """A parameter (trainable when floating) or buffer of ``dims``, in every world."""
    if kind == "parameter" and DTYPE_KIND[dtype] != FLOAT:
        kind = "buffer"  # an integer tensor cannot be a trainable parameter
    k = len(b.params)
    name = f"{'w' if kind == 'parameter' else 'b'}{k}"
    param = Param(name, dtype, tuple(dims), kind, SEED_BASE + k, init, kind == "parameter")
    b.params.append(param)
    for env in b.envs:
        env[name] = initial_value(param)
    operand = Operand(name, dtype, tuple(tuple(dims) for _ in range(b.n_worlds)))
    b.tensors.append(operand)
    return operand


def initial_value(param: Param) -> torch.Tensor:
    """``param``'s tensor as the rendered ``__init__`` makes it, without requires_grad: the
    worlds hold no autograd graphs (in-place statements copy them), and whether the
    parameters train is settled after the calls (``settle_module``)."""
    dtype = getattr(torch, param.dtype)
    if param.init == "normal":
        return make_input(param.dims, dtype, param.seed)
    return getattr(torch, param.init)(param.dims, dtype=dtype)


def state_partner(b, shapes: list, dtype: str) -> Optional[Operand]:
    """An op's partner as module state, sometimes, when its shape is the same at every call."""
    first = tuple(shapes[0])
    if not first or any(tuple(s) != first for s in shapes) or not 0 < math.prod(first) <= MAX_STATE_NUMEL:
        return None
    if b.draw(st.integers(0, 2)) != 0:
        return None
    kind = "buffer" if b.draw(st.integers(0, 3)) == 0 else "parameter"
    return add_param(b, kind, first, dtype)


# ------------------------------------------------------------------ statements


def _expr(b, text: str) -> Operand:
    name = b.fresh("v")
    if not b.try_statement(ExprNode(name, text), name) or b.tensors[-1].name != name:
        raise Reject(text)
    return b.tensors[-1]


def _fixed(t: Operand, dim: int) -> Optional[int]:
    """The size of ``t``'s ``dim`` when it is the same positive int in every world."""
    if t.rank == 0 or not -t.rank <= dim < t.rank:
        return None
    sizes = set(t.sizes(dim))
    return sizes.pop() if len(sizes) == 1 and min(t.sizes(dim)) > 0 else None


def _feature_value(b, dim: int = -1, min_rank: int = 1, nonempty: bool = True) -> Optional[Operand]:
    """A floating value whose ``dim`` has a fixed size (newest first), or a new input with one."""
    def fits(t):
        return (t.kind == FLOAT and t.rank >= min_rank and _fixed(t, dim) is not None
                and (not nonempty or 0 not in t.numels()) and t.name not in b.unbacked)
    found = [t for t in b.tensors if fits(t) and t.name not in {p.name for p in b.params}]
    if found and b.draw(st.integers(0, 3)) != 0:
        return found[-1 - b.draw(st.integers(0, min(len(found), 3) - 1))]
    batch = [s for s in sorted(b.symbols) if min(b.symbols[s]) >= 2]
    if not batch:
        return None
    rank = max(min_rank, b.draw(st.sampled_from([2, 2, 3])))
    dims = [b.draw(st.sampled_from(batch)) for _ in range(rank)]
    dims[dim if dim >= 0 else rank + dim] = b.draw(st.sampled_from(b.module.features))
    x = b.add_input(tuple(dims), "float32")
    return x if x is not None and fits(x) else None


def draw_module_statement(b) -> bool:
    """One module statement (``STATEMENT_WEIGHTS``): a layer with parameters, a buffer
    update, a mode-dependent value. Undone, returning False, when invalid somewhere."""
    saved = b.save()
    n_params = len(b.params)
    kind = weighted(b.draw, STATEMENT_WEIGHTS)
    try:
        _STATEMENTS[kind](b)
        return True
    except Reject:
        b.restore(saved)
        del b.params[n_params:]
        return False


def _linear(b) -> None:
    x = _feature_value(b, nonempty=False)
    if x is None:
        raise Reject("no value with a fixed last dim")
    features, width = _fixed(x, -1), b.draw(st.sampled_from(WIDTHS))
    w = add_param(b, "parameter", (width, features), x.dtype)
    if b.draw(st.booleans()):
        bias = add_param(b, "parameter", (width,), x.dtype, b.draw(st.sampled_from(["normal", "zeros"])))
        form = b.draw(st.sampled_from(["F.linear({x}, {w}, {b})", "{x} @ {w}.t() + {b}"]))
        _expr(b, form.format(x=x.name, w=w.name, b=bias.name))
    else:
        _expr(b, f"F.linear({x.name}, {w.name})")


def _layer_norm(b) -> None:
    x = _feature_value(b, nonempty=False)
    if x is None:
        raise Reject("no value with a fixed last dim")
    features = _fixed(x, -1)
    w = add_param(b, "parameter", (features,), x.dtype, "ones")
    bias = add_param(b, "parameter", (features,), x.dtype, "zeros")
    _expr(b, f"F.layer_norm({x.name}, ({features},), {w.name}, {bias.name}, eps=1e-05)")


def _scale_shift(b) -> None:
    x = _feature_value(b, nonempty=False)
    if x is None:
        raise Reject("no value with a fixed last dim")
    features = _fixed(x, -1)
    w = add_param(b, "parameter", (features,), x.dtype)
    bias = add_param(b, "parameter", (features,), x.dtype, "zeros")
    _expr(b, f"{x.name} * {w.name} + {bias.name}")


def _running_stat(b) -> None:
    x = _feature_value(b)
    if x is None:
        raise Reject("no nonempty value with a fixed last dim")
    features = _fixed(x, -1)
    r = add_param(b, "buffer", (features,), x.dtype, b.draw(st.sampled_from(["zeros", "ones"])))
    m = b.draw(st.sampled_from(MOMENTA))
    stat = f"{x.name}.detach().reshape(-1, {features})"
    form = b.draw(st.sampled_from([
        "{r}.mul_({m}).add_({s}.mean(0) * {k})",
        "{r}.lerp_({s}.mean(0), {k})",
        "{r}.copy_({s}.amax(0))",
        "{r}.mul_({m}).add_({s}.var(0, unbiased=False) * {k})",
    ]))
    update = form.format(r=r.name, m=m, k=round(1 - m, 6), s=stat)
    if b.draw(st.booleans()):  # BatchNorm-like: statistics only while training
        update = f"{update} if {TRAINING} else {r.name}"
    _expr(b, update)


def _counter(b) -> None:
    c = add_param(b, "buffer", b.draw(st.sampled_from([(), (1,)])), "int64", "zeros")
    update = f"{c.name}.add_(1)"
    if b.draw(st.booleans()):
        update = f"{update} if {TRAINING} else {c.name}"
    _expr(b, update)


def _batch_norm(b) -> None:
    x = _feature_value(b, dim=1, min_rank=2)
    if x is None:
        raise Reject("no nonempty value with a fixed dim 1")
    channels = _fixed(x, 1)
    mean = add_param(b, "buffer", (channels,), x.dtype, "zeros")
    var = add_param(b, "buffer", (channels,), x.dtype, "ones")
    affine = ""
    if b.draw(st.booleans()):
        w = add_param(b, "parameter", (channels,), x.dtype, "ones")
        bias = add_param(b, "parameter", (channels,), x.dtype, "zeros")
        affine = f", {w.name}, {bias.name}"
    momentum = b.draw(st.sampled_from([0.1, 0.5]))
    _expr(b, f"F.batch_norm({x.name}, {mean.name}, {var.name}{affine}, training={TRAINING}, "
             f"momentum={momentum}, eps=1e-05)")


def _mode_branch(b) -> None:
    floats = [t for t in b.tensors if t.kind == FLOAT and t.name not in {p.name for p in b.params}]
    if not floats:
        raise Reject("no floating value")
    x = floats[-1 - b.draw(st.integers(0, min(len(floats), 3) - 1))]
    form = b.draw(st.sampled_from(["{x} * 0.5 if {t} else {x}", "{x}.relu() if {t} else {x}.sigmoid()",
                                   "{x} - {x}.mean() if {t} else {x} * 2"]))
    _expr(b, form.format(x=x.name, t=TRAINING))


def _embedding(b) -> None:
    ints = [t for t in b.tensors if t.kind == "int" and t.rank >= 1 and t.name not in b.unbacked
            and t.name not in {p.name for p in b.params}]
    if not ints:
        raise Reject("no integer value")
    idx = ints[-1 - b.draw(st.integers(0, min(len(ints), 3) - 1))]
    rows, width = b.draw(st.sampled_from([5, 8, 3])), b.draw(st.sampled_from(b.module.features))
    w = add_param(b, "parameter", (rows, width), "float32")
    _expr(b, f"F.embedding({idx.name}.abs() % {rows}, {w.name})")


def _conv1d(b) -> None:
    x = _feature_value(b, dim=1, min_rank=3)
    if x is None or x.rank != 3:
        raise Reject("no rank-3 value with a fixed dim 1")
    channels, width, k = _fixed(x, 1), b.draw(st.sampled_from(WIDTHS)), b.draw(st.sampled_from([1, 2, 3]))
    w = add_param(b, "parameter", (width, channels, k), x.dtype)
    bias = add_param(b, "parameter", (width,), x.dtype, "zeros")
    _expr(b, f"F.conv1d({x.name}, {w.name}, {bias.name}, padding={k // 2})")


_STATEMENTS = {"linear": _linear, "layer_norm": _layer_norm, "scale_shift": _scale_shift,
               "running_stat": _running_stat, "counter": _counter, "batch_norm": _batch_norm,
               "mode_branch": _mode_branch, "embedding": _embedding, "conv1d": _conv1d}


def finish_module(b, attempts: int = 4) -> None:
    """Keep the state the body reads; a module program without any gets a module
    statement (a counter, when its body reads the mode), or becomes a plain program
    (``b.module`` None) when none fits."""
    for _ in range(attempts):
        if _read_params(b):
            break
        draw_module_statement(b)
    if not _read_params(b) and any(TRAINING in node_reads(node) for node in b.body):
        _counter(b)  # the body switches on the mode: it stays a module, with a counter at least
    read = _read_params(b)
    b.params[:] = [p for p in b.params if p.name in read]
    if not b.params:
        b.module = None


def _read_params(b) -> set:
    names = {p.name for p in b.params}
    return set().union(*(node_reads(node) & names for node in b.body)) if b.body else set()


# ------------------------------------------------------------------ after the calls


def settle_module(draw, program: Program, calls: tuple, modes: tuple, config: dict, step_rate: float):
    """(program, calls, step) of a module program: each call's mode set, a training step
    drawn (about ``step_rate`` of them), ``force_parameter_static_shapes`` drawn into
    ``config``, and the parameters trainable only where eager computes valid gradients at
    every call (see the module); otherwise frozen, with forward calls."""
    calls = tuple(replace(c, training=bool(mode)) for c, mode in zip(calls, modes))
    draw_module_config(draw, config)
    step = None
    ticket = draw(st.integers(0, 99))  # high tickets train, so shrinking makes forward calls
    if ticket >= 100 - round(step_rate * 100):
        step = dict(weighted(draw, STEPS))
    if not any(p.trainable for p in program.params):
        return program, calls, None
    if backward_class(program) not in ("undefined", "nondeterministic"):
        for tried in ((step, None) if step is not None else (None,)):
            if gradients_hold(program, calls, tried):
                return program, calls, tried
    frozen = tuple(replace(p, requires_grad=False) for p in program.params)
    return replace(program, params=frozen), calls, None


def load_model(program: Program):
    """The ``Model`` class a module program renders to."""
    namespace: dict = {"make_input": make_input}
    exec(compile(PRELUDE + program.render(), "<symfuzz module>", "exec"), namespace)
    return namespace["Model"]


def _quietly(thunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return thunk()
        except Exception:  # noqa: BLE001 - a call that cannot run is a reason to freeze, not an error
            return None


def _run(side, index, call, args=None):
    side.begin_call(index, call)
    return side.call_tree(make_args(call) if args is None else args)


def gradients_hold(program: Program, calls: tuple, step) -> bool:
    """Does eager, calling a model of ``program`` through ``calls`` (with ``step``), compute
    every call's gradients, finite, reaching some parameter in some call, and does the
    fp64 reference too? With ops whose gradient jumps at ties or kinks, a model whose
    floating state and inputs are nudged must give the same gradients (within ``JUMP``)."""
    model = load_model(program)
    side, nudged = ModuleSide(model, None, step), ModuleSide(model, None, step)
    _nudge(nudged.model)
    check_stability = backward_class(program) != "ok"
    reached = False
    for index, call in enumerate(calls):
        data = call.to_json()
        tree = _quietly(lambda: _run(side, index, data))
        if tree is None or not _finite(tree[2]) or any(t.requires_grad for t in side.model.buffers()):
            return False  # (a buffer that requires grad would carry this call's graph into the next)
        reached = reached or any(g is not None and bool((g != 0).any()) for g in tree[2])
        reference = _quietly(lambda: reference_output(side, data, "cpu", index))
        if not reference or len(reference) < 4 or not _finite(reference[2]):
            return False
        if check_stability:
            other = _quietly(lambda: _run(nudged, index, data, nudged_args(data)))
            if other is None or not _stable(tree[2], other[2]):
                return False
    return reached


def _finite(grads) -> bool:
    return all(g is None or bool(torch.isfinite(g).all()) for g in grads)


def _nudge(model) -> None:
    """Scale ``model``'s floating parameters and buffers by (1 + NUDGE * n), n seeded normal
    (as ``gradients.nudged_args`` does the inputs)."""
    with torch.no_grad():
        for i, t in enumerate(model.state_dict().values()):
            if t.is_floating_point() and t.numel():
                noise = make_input(tuple(t.shape), torch.float64, STATE_NUDGE_SEED + i)
                t.copy_((t.double() * (1 + NUDGE[str(t.dtype).removeprefix("torch.")] * noise)).to(t.dtype))


def _stable(grads, nudged) -> bool:
    """Do the nudged gradients stay close (``JUMP``) to the original ones?"""
    if len(nudged) != len(grads):
        return False
    for g, h in zip(grads, nudged):
        if (g is None) != (h is None) or (g is not None and (g.shape != h.shape or not bool(torch.isfinite(h).all()))):
            return False
        if g is None or g.numel() == 0:
            continue
        g64, h64 = g.double(), h.double()
        scale = math.sqrt(float(g64.pow(2).mean()))
        tolerance = JUMP[str(g.dtype).removeprefix("torch.")]
        if bool(((g64 - h64).abs() > tolerance * (g64.abs() + scale) + 1e-12).any()):
            return False
    return True
