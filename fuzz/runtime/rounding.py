"""Rounding: whether a discrete result (a bool, an index, a count), or a float that jumps (a
remainder, a floor), flipped only because float rounding moved a value across a threshold,
with the shadow interpreter that follows each value's decisions; and ``reference_call``, the
fp64 reference that carries the explainer.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import torch

from symfuzz.fuzz.runtime.comparing import Float64Everywhere, REF_ERROR_FACTOR, TOLERANCES, flatten
from symfuzz.fuzz.runtime.running import float64_call


def reference_call(fn, args):
    """Run ``fn`` in float64 everywhere; returns run_call's record.

    Its output leaves carry the way to a shadowed run of ``fn`` on ``args``
    (``attach_rounding``), which ``compare`` takes only when a result differs.
    """
    pristine = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    record = float64_call(fn, args)
    if "out" in record:
        attach_rounding(record["out"], fn, pristine)
    return record


_PRECISION = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2, torch.float64: 3}


# Ops whose output is exact when their input is: they move or widen values, never round them.
_EXACT = {
    "view", "reshape", "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "squeeze", "unsqueeze",
    "flatten", "unflatten", "__getitem__", "select", "narrow", "contiguous", "clone", "cat", "concat",
    "concatenate", "stack", "flip", "roll", "repeat", "movedim", "swapaxes", "diagonal", "tril", "triu", "split",
    "chunk", "unbind", "tensor_split", "view_as", "reshape_as", "detach", "index_select", "gather", "neg",
    "__neg__", "abs", "__abs__", "double", "float", "to", "type_as", "where", "masked_fill", "relu", "max",
    "min", "amax", "amin", "maximum", "minimum", "clamp", "clip", "sort", "topk", "__setitem__", "new_zeros",
    "new_ones", "zeros_like", "ones_like", "zeros", "ones", "full", "full_like", "arange", "__get__",
}


# Ops that move elements: the taint moves with them (the op is applied to it).
_STRUCTURAL = {
    "view", "reshape", "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "squeeze", "unsqueeze",
    "flatten", "unflatten", "__getitem__", "select", "narrow", "contiguous", "clone", "cat", "concat",
    "concatenate", "stack", "flip", "roll", "repeat", "movedim", "swapaxes", "diagonal", "tril", "triu", "split",
    "chunk", "unbind", "tensor_split", "view_as", "reshape_as", "detach", "index_select", "__get__",
}


# Elementwise ops: an output element is tainted where a (broadcast) input element is.
_POINTWISE = {
    "add", "sub", "mul", "div", "true_divide", "neg", "abs", "where", "logical_and", "logical_or", "logical_not",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "pow", "exp", "exp2", "expm1", "log",
    "log1p", "log2", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "silu", "elu", "selu", "softplus",
    "leaky_relu", "hardtanh", "clamp", "clip", "maximum", "minimum", "masked_fill", "float", "double", "half",
    "bfloat16", "to", "type_as", "sqrt", "rsqrt", "reciprocal", "square", "erf", "atan", "asin", "acos", "sinh",
    "cosh", "fmod", "remainder", "floor_divide", "lerp", "addcmul", "addcdiv", "nan_to_num", "mish", "hardswish",
    "hardsigmoid", "logit", "xlogy", "copysign", "hypot", "atan2", "positive", "clamp_min", "clamp_max", "int",
    "long", "bool", "short", "char", "byte", "floor", "ceil", "trunc", "round", "sign", "sgn",
    # Python's operators, as torch names them to a TorchFunctionMode (``2 / x`` is __rdiv__, ``x += y`` __iadd__).
    # One literal, no ``|=`` after it: scripts paste this assignment alone (corpus/scripts.py Helpers.pieces).
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__div__", "__rdiv__", "__idiv__", "__floordiv__",
    "__rfloordiv__", "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__iand__", "__or__", "__ror__", "__ior__",
    "__xor__", "__rxor__", "__ixor__", "__lshift__", "__rlshift__", "__ilshift__", "__rshift__", "__rrshift__",
    "__irshift__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
}


# Reductions over ``dim``: an output element depends on its slice.
_REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "nansum", "nanmean", "logsumexp", "norm", "std", "var",
               "count_nonzero", "max", "min", "argmax", "argmin", "all", "any", "median", "nanmedian", "mode",
               "kthvalue"}


# Ops along ``dim`` keeping the shape (topk: k of it): an element depends on its slice.
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "softmax", "log_softmax", "sort", "argsort", "logcumsumexp",
          "topk"}


# Reductions and scans that pick elements of their slice (or their indices) rather than mix them:
# what they give stays as near its input as the elements they pick.
_SELECTIONS = {"amax", "amin", "max", "min", "argmax", "argmin", "all", "any", "median", "nanmedian", "mode",
               "kthvalue", "cummax", "cummin", "sort", "argsort", "topk"}


# Reductions that count or add integers (a mask's count): a flip of one element moves them by its step.
_COUNTS = {"sum", "nansum", "count_nonzero", "cumsum"}


_INDEX_OUTPUTS = {"argmax", "argmin", "argsort"}  # their only output is indices; (values, indices) pairs: the second


_COMPARISONS = {"gt", "lt", "ge", "le", "eq", "ne", "greater", "less", "greater_equal", "less_equal", "not_equal",
                "__gt__", "__lt__", "__ge__", "__le__", "__eq__", "__ne__"}


_ROUNDINGS = {"int", "long", "short", "char", "byte", "bool", "to", "floor", "ceil", "trunc", "round", "sign", "sgn"}


# Ops that jump where the quotient of their operands crosses an integer: ``remainder(a, b)`` drops
# by |b| there (``a % b`` is its operator), ``floor_divide`` steps by 1. ``__r*__`` forms take
# their operands the other way round (``3 % x`` is ``x.__rmod__(3)``).
_QUOTIENT_JUMPS = {"remainder", "fmod", "__mod__", "__imod__", "__rmod__", "floor_divide", "__floordiv__",
                   "__ifloordiv__", "__rfloordiv__"}


_DIV_STEPS = {"div", "true_divide", "__truediv__", "__itruediv__", "__div__", "__idiv__"}


# Integer ops through which a flipped element's step is known: casts and signs keep it, sums add them.
_KEEP_STEP = {"to", "int", "long", "short", "char", "byte", "type_as", "neg", "__neg__", "abs", "__abs__",
              "positive", "__pos__"}


# Ops that hand a tensor's values to Python (a branch, a threshold): the shadow loses them there.
_TO_PYTHON = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__complex__", "numpy", "__array__",
              "__format__", "__repr__", "__str__", "equal", "allclose", "is_nonzero", "__iter__"}


_ADD_STEPS = {"add", "sub", "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__"}


_MUL_STEPS = {"mul", "__mul__", "__rmul__", "__imul__"}


class _Unfollowable(Exception):
    """An op the shadow cannot follow while one of its inputs is tainted: nothing is explained."""


def _op_name(func):
    name = getattr(func, "__name__", "") or ""
    if "." in name:  # an OpOverload: "gt.Tensor"
        name = name.split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _tensors(v)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _tensors(v)]
    return []


def _reduce(values, dim, keepdim, shape, how="any"):
    """``values`` reduced over ``dim`` (None: all dims) with any(), sum() or amax() (``how``),
    shaped as an output of ``shape``."""
    if values.numel() == 0:
        return torch.zeros(shape, dtype=values.dtype)
    if dim is None:
        return getattr(values, how)().expand(shape).clone()
    dims = sorted({d % max(values.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim)}, reverse=True)
    for d in dims:
        values = values.any(d, keepdim=True) if how == "any" else getattr(values, how)(d, keepdim=True)
    if not keepdim:
        for d in dims:
            values = values.squeeze(d)
    return values.reshape(shape).clone()


def _reduce_any(mask, dim, keepdim, shape):
    """``mask`` reduced with any() over ``dim`` (None: all dims), shaped as an output of ``shape``."""
    return _reduce(mask, dim, keepdim, shape, "any")


def _dim_args(name, args, kwargs, position=1):
    if name in ("topk", "kthvalue"):
        position = 2
    dim = kwargs.get("dim", args[position] if len(args) > position else None)
    keepdim = kwargs.get("keepdim", args[position + 1] if len(args) > position + 1 and name != "topk" else False)
    if name in ("sort", "argsort", "softmax", "log_softmax", "topk", "kthvalue", "mode") and dim is None:
        dim = -1
    if isinstance(dim, (torch.Tensor, bool)) or not (dim is None or isinstance(dim, (int, list, tuple))):
        raise TypeError(f"{name}: cannot read dim {dim!r}")
    return dim, bool(keepdim)


class _Entry:
    """One tensor of a shadowed run: itself, its float64 shadow, the elements an
    ambiguous decision could change (``taint``, or None), the elements that depend
    on one in a way the shadow cannot bound (``poison``, or None: never explained),
    how far an integer element may move where tainted (``step``; None: 1 for a
    bool, unbounded otherwise), why, and the lowest precision it was rounded in
    (None: its value is exact)."""

    __slots__ = ("tensor", "shadow", "taint", "poison", "step", "why", "chain", "margin", "tol", "label")

    def __init__(self, tensor, shadow, taint=None, why=None, chain=None):
        self.tensor, self.shadow, self.taint, self.why, self.chain = tensor, shadow, taint, why, chain
        self.poison = self.step = None
        self.margin = self.tol = self.label = None  # set by a decision: per element, and what it was

    def marked(self):
        return self.taint is not None or self.poison is not None

    def tolerance(self):
        """How far each element may lie from its exact value: the tolerance of the
        lowest precision it was rounded in, and a multiple of eager's own error."""
        t, s = self.tensor, self.shadow
        if self.chain is None or not t.dtype.is_floating_point or not s.dtype.is_floating_point:
            return torch.zeros(t.shape, dtype=torch.float64)
        rtol, atol = TOLERANCES[self.chain]
        noise = (t.detach().double() - s).abs()
        noise = torch.where(torch.isfinite(noise), noise, torch.zeros_like(noise))
        return atol + rtol * s.abs().nan_to_num(0.0) + REF_ERROR_FACTOR * noise


class RoundingShadow(torch.overrides.TorchFunctionMode):
    """Run a program as eager does, with a float64 shadow of every tensor.

    Each op runs twice, on the tensors and on their shadows; a decision
    (comparison, all/any, argmax/argmin, max/min indices, sort/topk indices,
    rounding to integers) whose float64 operands lie within rounding of its
    threshold taints the elements it decides. Later ops carry the taint only
    where they keep it local: elementwise and structural ops, selections
    (max, sort, all ...), and counts of integers (with how far a count may
    move). An op that mixes a tainted float into others (a sum, a softmax)
    poisons what it gives: a flip there is never explained. An op it cannot
    follow while an input is tainted (matmul, linear ...) sets ``broken``:
    then nothing is explained.
    """

    def __init__(self):
        super().__init__()
        self.entries = {}  # id(tensor) -> _Entry (the entry holds the tensor, so ids stay unique)
        self.broken = None

    def entry(self, tensor):
        e = self.entries.get(id(tensor))
        if e is None or e.tensor is not tensor:
            t = tensor.detach()
            shadow = t.to(torch.float64) if t.dtype.is_floating_point else t.clone()
            e = self.entries[id(tensor)] = _Entry(tensor, shadow)
        return e

    def _shadow(self, value):
        if isinstance(value, torch.Tensor):
            return self.entry(value).shadow
        if isinstance(value, torch.dtype):
            return torch.float64 if value.is_floating_point else value
        if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
            return [self._shadow(v) for v in value] if isinstance(value, list) else tuple(self._shadow(v) for v in value)
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        if self.broken is not None:
            return func(*args, **kwargs)
        inputs = [self.entry(t) for t in _tensors((args, kwargs))]
        try:
            s_args = tuple(self._shadow(a) for a in args)
            s_kwargs = {k: self._shadow(v) for k, v in kwargs.items()}
        except Exception as exc:  # noqa: BLE001 - an argument the shadow cannot follow
            self.broken = f"{name}: {exc}"
            return func(*args, **kwargs)
        raw = getattr(func, "__name__", "") or ""
        writes = name == "__setitem__" or raw.startswith("__i") or (raw.endswith("_") and not raw.endswith("__"))
        if "out" in kwargs or (writes and args and isinstance(args[0], torch.Tensor) and self._aliased(args[0])):
            # the marks and shadows of its other views would go stale: follow no further
            self.broken = f"{name}: writes a tensor that shares its storage with another"
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        outs = _tensors(out) if isinstance(out, (torch.Tensor, list, tuple)) else []
        if name == "__setitem__":
            outs = [args[0]]
        if not outs:
            if name in _TO_PYTHON and any(e.marked() for e in inputs):
                self.broken = f"{name}: a tainted value leaves for Python"  # where it goes, the shadow cannot follow
            return out
        try:
            previous = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                if func in Float64Everywhere._DOWNCASTS:
                    s_out = torch.Tensor.double(s_args[0])
                else:
                    s_out = func(*s_args, **s_kwargs)
            finally:
                torch.set_default_dtype(previous)
            s_outs = [s_args[0]] if name == "__setitem__" else _tensors(s_out)
            if len(s_outs) != len(outs) or any(a.shape != b.shape for a, b in zip(outs, s_outs)):
                raise RuntimeError("the float64 run gave other outputs")
            self._record(func, name, args, kwargs, inputs, outs, s_outs)
        except Exception as exc:  # noqa: BLE001 - an op the shadow cannot follow: explain nothing
            self.broken = f"{name}: {type(exc).__name__}: {exc}"
        return out

    # -------------------------------------------------------- one op

    def _record(self, func, name, args, kwargs, inputs, outs, s_outs):
        floating_in = [e.tensor.dtype for e in inputs if e.tensor.dtype.is_floating_point]
        chains = [e.chain for e in inputs if e.chain is not None]
        narrows = any(_PRECISION.get(t.dtype, 3) < _PRECISION.get(d, 3)
                      for t in outs if t.dtype.is_floating_point for d in floating_in)
        if name not in _EXACT or narrows:
            chains += floating_in + [t.dtype for t in outs if t.dtype.is_floating_point]
        chain = min(chains, key=lambda d: _PRECISION.get(d, 3)) if chains else None
        marked = [e for e in inputs if e.marked()]
        why = next((e.why for e in marked if e.why), None)
        if not marked:
            marks = [(None, None, None)] * len(outs)
        elif name in _STRUCTURAL or name in _POINTWISE or name in _COMPARISONS or name in _REDUCTIONS \
                or name in _SCANS or name == "__setitem__":
            marks = self._propagate(func, name, args, kwargs, inputs, outs)
        else:
            raise _Unfollowable(f"{name} of a tainted tensor")
        decided = self._decide(name, args, kwargs, inputs, outs)
        for i, (t, s) in enumerate(zip(outs, s_outs)):
            e = _Entry(t, s, marks[i][0], why, chain)
            e.poison, e.step = marks[i][1], marks[i][2]
            d = decided[i] if decided else None
            if d is not None:
                amb, margin, tol, label = d[:4]
                if name in ("all", "any"):
                    # the decision says exactly what the slice's taint can change, and where poison may
                    e.taint, e.why, e.poison = None, None, d[4] if len(d) > 4 else e.poison
                if e.poison is not None:
                    amb = amb & ~e.poison  # a poisoned operand's tolerance says nothing
                jump = d[4] if name in _QUOTIENT_JUMPS else self._rounding_jump(name, t)
                if bool(amb.any()) and jump is not None:
                    before = e.taint if e.taint is not None else torch.zeros(t.shape, dtype=torch.bool)
                    e.step = torch.where(amb & ~before, jump, self._steps_of(e))
                if bool(amb.any()) and margin is None:
                    e.why = label
                    e.taint = amb if e.taint is None else (e.taint | amb)
                elif bool(amb.any()):
                    flat = int(amb.reshape(-1).int().argmax())
                    m, tl = float(margin.reshape(-1)[flat]), float(tol.reshape(-1)[flat])
                    e.margin, e.tol, e.label = margin, tol, label
                    e.why = f"{label} at its element {flat} (flat), margin {m:.3g} <= tol {tl:.3g}" + (
                        f"; upstream, {e.why}" if e.why else "")
                    e.taint = amb if e.taint is None else (e.taint | amb)
            if e.taint is not None and not bool(e.taint.any()):
                e.taint = None
            if e.poison is not None and not bool(e.poison.any()):
                e.poison = None
            self.entries[id(t)] = e

    def _propagate(self, func, name, args, kwargs, inputs, outs):
        """Per output: (taint, poison, step) from its inputs' (each None when clear).
        Raises _Unfollowable for a form these rules do not know."""
        try:
            return self._propagate_known(func, name, args, kwargs, inputs, outs)
        except _Unfollowable:
            raise
        except Exception as exc:  # noqa: BLE001 - a form the rules below do not know
            raise _Unfollowable(f"{name}: {type(exc).__name__}: {exc}") from exc

    def _propagate_known(self, func, name, args, kwargs, inputs, outs):
        getters = (self._taint_of, self._poison_of, self._steps_of)
        if name == "__setitem__":
            target, index, value = args[0], args[1], args[2]
            if any(self.entry(t).marked() for t in _tensors(index)):
                raise _Unfollowable("__setitem__ at a tainted index")
            result = []
            for get, clear in zip(getters, (False, False, 0.0)):
                mark = get(target).clone()
                mark[index] = get(value) if isinstance(value, torch.Tensor) else clear
                result.append(mark)
            return [tuple(result)]
        if name in _STRUCTURAL:
            data = args[0] if args else None
            if data is None or any(self.entry(t).marked() for t in _tensors((args[1:], kwargs))):
                raise _Unfollowable(f"{name} with a tainted argument")
            result = []
            for get in getters:
                marks = [get(t) for t in data] if isinstance(data, (list, tuple)) else get(data)
                moved = _tensors(func(marks, *args[1:], **kwargs))
                if len(moved) != len(outs) or any(a.shape != b.shape for a, b in zip(moved, outs)):
                    raise _Unfollowable(f"{name} moved the marks elsewhere")
                result.append([m.clone() for m in moved])
            return list(zip(*result))
        binary = name in ("max", "min") and len(args) > 1 and isinstance(args[1], torch.Tensor)  # as maximum
        if (name in _SELECTIONS or name in _COUNTS) and not binary:
            return self._propagate_reduction(name, args, kwargs, outs)
        if (name in _REDUCTIONS or name in _SCANS) and not binary:  # a tainted element mixed into others: poison all
            return [(torch.zeros(t.shape, dtype=torch.bool), torch.ones(t.shape, dtype=torch.bool), None) for t in outs]
        # Elementwise (comparisons included): each output element from the (broadcast) input elements.
        result = []
        for t in outs:
            taint = torch.zeros(t.shape, dtype=torch.bool)
            poison = torch.zeros(t.shape, dtype=torch.bool)
            for e in inputs:
                if not e.marked():
                    continue
                shape = torch.broadcast_shapes(e.tensor.shape, t.shape)
                mark = self._taint_of(e.tensor)
                if name in _COMPARISONS:  # an operand that moves by a known step: the decision's tolerance holds it
                    mark = mark & torch.isinf(self._steps_of(e.tensor))
                taint = taint | mark.expand(shape)
                poison = poison | self._poison_of(e.tensor).expand(shape)
            result.append((taint.clone(), poison.clone(), self._pointwise_step(name, args, kwargs, t)))
        return result

    def _propagate_reduction(self, name, args, kwargs, outs):
        data = args[0] if args else kwargs.get("input")
        if not isinstance(data, torch.Tensor):
            raise _Unfollowable(f"{name} of no tensor")
        if any(self.entry(t).marked() for t in _tensors((args[1:], kwargs))):
            raise _Unfollowable(f"{name} with a tainted argument")
        dim, keepdim = _dim_args(name, args, kwargs)
        taint, poison, step = self._taint_of(data), self._poison_of(data), self._steps_of(data)
        moved = torch.where(taint, step, torch.zeros_like(step))

        def over(values, t, how="any"):
            if name in _SCANS:
                d = -1 if dim is None else dim
                whole = values.any(d, keepdim=True) if how == "any" else getattr(values, how)(d, keepdim=True)
                return whole.expand(t.shape).clone() if whole.dim() == t.dim() else _reduce(values, None, False,
                                                                                              t.shape, how)
            return _reduce(values, dim, keepdim, t.shape, how)

        result = []
        for i, t in enumerate(outs):
            reach, p = over(taint, t), over(poison, t)
            is_index = name in _INDEX_OUTPUTS or (name in _SELECTIONS and len(outs) == 2 and i == 1)
            if name in _SELECTIONS:
                # a picked element, or its index: as local as the elements it picks from
                result.append((reach, p, None if is_index or t.dtype == torch.bool else over(moved, t, "amax")))
            elif not data.dtype.is_floating_point and not t.dtype.is_floating_point and not data.dtype.is_complex:
                total = over(moved, t, "sum")  # a count: each flipped element moves it by its step at most
                result.append((reach, p | (reach & torch.isinf(total)), total))
            else:  # floats added up: how far a flip moves them is not known
                result.append((torch.zeros(t.shape, dtype=torch.bool), p | reach, None))
        return result

    def _pointwise_step(self, name, args, kwargs, out):
        """How far each element of an integer or float elementwise result may move (None:
        unbounded, or a bool)."""
        if out.dtype == torch.bool or out.dtype.is_complex:
            return None

        def step(value):
            if isinstance(value, torch.Tensor):
                e = self.entry(value)
                return torch.where(self._taint_of(value), self._steps_of(value), 0.0) if e.marked() else 0.0
            return 0.0

        operands = [a for a in args if isinstance(a, (torch.Tensor, int, float, bool))]
        if name in _KEEP_STEP and operands:
            # a float cast to an integer truncates: a move of s may become ceil(s), so one more
            truncates = isinstance(args[0], torch.Tensor) and args[0].dtype.is_floating_point \
                and not out.dtype.is_floating_point
            return (step(args[0]) + float(truncates) + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name in _ADD_STEPS and len(operands) == 2 and "alpha" not in kwargs:
            return (step(operands[0]) + step(operands[1]) + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name in _MUL_STEPS and len(operands) == 2:
            moving = [v for v in operands if isinstance(v, torch.Tensor) and self.entry(v).marked()]
            if len(moving) == 1:
                other = operands[1] if moving[0] is operands[0] else operands[0]
                factor = other.detach().double().abs() if isinstance(other, torch.Tensor) else abs(float(other))
                return (step(moving[0]) * factor + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name in _DIV_STEPS and len(operands) == 2 and isinstance(args[0], torch.Tensor) and "rounding_mode" not in kwargs:
            other = operands[1]
            if not (isinstance(other, torch.Tensor) and self.entry(other).marked()):
                factor = other.detach().double().abs() if isinstance(other, torch.Tensor) else abs(float(other))
                return (step(args[0]) / factor + torch.zeros(out.shape, dtype=torch.float64)).clone()
        if name == "where" and len(args) == 3:
            cond, a, b = args
            flip = self._taint_of(cond) if isinstance(cond, torch.Tensor) else torch.zeros((), dtype=torch.bool)
            value = [v.detach().double() if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)
                     for v in (a, b)]
            picked = torch.where(cond, step(a) + torch.zeros(out.shape, dtype=torch.float64), step(b))
            return torch.where(flip, (value[0] - value[1]).abs() + step(a) + step(b), picked).expand(out.shape).clone()
        return None

    def _aliased(self, tensor):
        if tensor.numel() == 0:
            return False
        try:
            ptr = tensor.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - a tensor without plain storage: assume the worst
            return True
        return tensor._base is not None or any(
            e.tensor is not tensor and e.tensor.untyped_storage().data_ptr() == ptr for e in self.entries.values())

    def _taint_of(self, tensor):
        e = self.entry(tensor)
        return e.taint if e.taint is not None else torch.zeros(tensor.shape, dtype=torch.bool)

    def _poison_of(self, tensor):
        e = self.entry(tensor)
        return e.poison if e.poison is not None else torch.zeros(tensor.shape, dtype=torch.bool)

    def _steps_of(self, tensor_or_entry):
        """How far each element may move where tainted: 1 for a bool, unbounded (inf) when not known."""
        e = tensor_or_entry if isinstance(tensor_or_entry, _Entry) else self.entry(tensor_or_entry)
        if e.step is not None:
            return e.step
        return torch.full(e.tensor.shape, 1.0 if e.tensor.dtype == torch.bool else float("inf"), dtype=torch.float64)

    def _operand(self, value):
        """(float64 value, tolerance) of an operand: a tensor's shadow, or an exact number. A
        value that a flip or jump upstream may move by a known step has that step in its
        tolerance, twice: the shadow's own decisions may have moved it as well."""
        if isinstance(value, torch.Tensor):
            e = self.entry(value)
            tol = e.tolerance()
            if e.taint is not None:
                steps = self._steps_of(e)
                tol = tol + torch.where(e.taint & torch.isfinite(steps), 2 * steps, 0.0)
            return e.shadow.double(), tol
        return torch.tensor(float(value), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)

    def _decide(self, name, args, kwargs, inputs, outs):
        """Per output: (ambiguous mask, margin, tol, label) for a decision op, else None."""
        if name in _COMPARISONS and len(args) >= 1:
            other = args[1] if len(args) > 1 else kwargs.get("other")
            if other is None or not isinstance(outs[0], torch.Tensor) or outs[0].dtype != torch.bool:
                return None
            (a, ta), (b, tb) = self._operand(args[0]), self._operand(other)
            margin = (a - b).abs()
            tol = (ta + tb).expand(margin.shape)
            amb = (margin <= tol) & (tol > 0) & ~torch.isnan(margin)
            return [(amb.reshape(outs[0].shape), margin.reshape(outs[0].shape), tol.reshape(outs[0].shape),
                     f"comparison {name}")]
        if name in _QUOTIENT_JUMPS:
            return self._decide_quotient(name, args, kwargs, outs)
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
            return self._decide_bool_reduction(name, args, kwargs, outs) if name in ("all", "any") else None
        s, tol = self._operand(x)
        if name in ("argmax", "argmin") or (name in ("max", "min") and len(outs) == 2):
            dim, keepdim = _dim_args(name, args, kwargs)
            largest = name in ("argmax", "max")
            amb, margin, t = self._near_best(s if largest else -s, tol, dim, keepdim)
            index_out = outs[-1]
            found = (amb.reshape(index_out.shape), margin.reshape(index_out.shape), t.reshape(index_out.shape),
                     f"{name} (a near tie)")
            return [None, found] if len(outs) == 2 else [found]
        if name in ("sort", "argsort", "topk"):
            return self._decide_order(name, args, kwargs, x, s, tol, outs)
        if name in ("all", "any"):
            return self._decide_bool_reduction(name, args, kwargs, outs, (s, tol))
        if name in _ROUNDINGS and len(outs) == 1:
            out = outs[0]
            if name == "to" and out.dtype.is_floating_point:
                return None
            if out.dtype == torch.bool or name in ("sign", "sgn"):
                margin = s.abs()
            elif name == "round":
                margin = ((s.abs() - s.abs().floor()) - 0.5).abs()
            else:
                margin = (s - s.round()).abs()
            amb = (margin <= tol) & (tol > 0) & ~torch.isnan(margin)
            return [(amb.reshape(out.shape), margin.reshape(out.shape), tol.reshape(out.shape), f"rounding {name}")]
        return None

    def _rounding_jump(self, name, out):
        """How far a rounding decision's output moves where it is ambiguous: a step of 1 for an
        integer or a rounded float (floor, ceil, trunc, round), 2 for a float's sign (-1 to 1);
        None for a bool (its own step) or a float cast (no decision)."""
        if name not in _ROUNDINGS or out.dtype == torch.bool:
            return None
        if out.dtype.is_floating_point:
            return {"floor": 1.0, "ceil": 1.0, "trunc": 1.0, "round": 1.0, "sign": 2.0, "sgn": 2.0}.get(name)
        return torch.ones((), dtype=torch.float64)

    def _decide_quotient(self, name, args, kwargs, outs):
        """``remainder(a, b)`` and ``floor_divide(a, b)`` jump where ``a / b`` is an integer:
        ambiguous where ``a`` lies within rounding of a multiple of ``b``. The fifth field is
        how far the output may jump there: |b| for a remainder, 1 for a quotient."""
        if len(outs) != 1 or len(args) + len(kwargs) < 2:
            return None
        a, b = (args[0], args[1] if len(args) > 1 else kwargs.get("other"))
        if name.startswith("__r"):
            a, b = b, a
        if not any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in (a, b)):
            return None  # integers are exact
        (sa, ta), (sb, tb) = self._operand(a), self._operand(b)
        q = (sa / sb).round()
        margin = (sa - sb * q).abs()
        tol = ta + q.abs() * tb
        out = outs[0]
        amb = ((margin <= tol) & (tol > 0) & ~torch.isnan(margin)).expand(out.shape)
        jump = torch.ones((), dtype=torch.float64) if "floordiv" in name or name == "floor_divide" else sb.abs()
        return [(amb.clone(), margin.expand(out.shape).clone(), tol.expand(out.shape).clone(),
                 f"{name} (operand within rounding of a multiple of its divisor)",
                 jump.expand(out.shape).clone())]

    def _near_best(self, v, tol, dim, keepdim):
        if dim is None:
            v, tol, dim = v.reshape(-1), tol.reshape(-1), 0
        best, at = v.max(dim, keepdim=True)
        t_best = tol.gather(dim, at)
        near = (v + tol >= best - t_best) & ~torch.isnan(v)
        others = v.scatter(dim, at, float("-inf"))
        second, at2 = others.max(dim, keepdim=True)
        margin, t = best - second, t_best + tol.gather(dim, at2)
        if not keepdim:
            margin, t = margin.squeeze(dim), t.squeeze(dim)
        # An exact tie of exact values is no rounding: the first maximum wins on both sides.
        amb = (near.sum(dim, keepdim=keepdim) > 1) & (t > 0)
        return amb, margin.nan_to_num(float("inf")), t

    def _decide_order(self, name, args, kwargs, x, s, tol, outs):
        dim = kwargs.get("dim", None)
        if name == "topk":
            dim = dim if dim is not None else (args[2] if len(args) > 2 else -1)
            largest = kwargs.get("largest", args[3] if len(args) > 3 else True)
            k = kwargs.get("k", args[1] if len(args) > 1 else None)
        else:
            dim = dim if dim is not None else (args[1] if len(args) > 1 else -1)
            largest = kwargs.get("descending", args[2] if len(args) > 2 else False)
            k = x.shape[dim] if x.dim() else 1
        if x.dim() == 0:
            return None
        order = torch.sort(x.detach(), dim=dim, descending=bool(largest), stable=True).indices
        sv, st = s.gather(dim, order), tol.gather(dim, order)
        n = sv.shape[dim]
        amb_sorted = torch.zeros(sv.shape, dtype=torch.bool)
        margin = torch.full(sv.shape, float("inf"), dtype=torch.float64)
        tols = torch.zeros(sv.shape, dtype=torch.float64)
        if n > 1:
            gap = (sv.narrow(dim, 1, n - 1) - sv.narrow(dim, 0, n - 1)).abs()
            gap_tol = st.narrow(dim, 1, n - 1) + st.narrow(dim, 0, n - 1)
            tie = (gap <= gap_tol) & ~torch.isnan(gap)
            for start in (0, 1):  # a tie makes both of its positions ambiguous
                amb_sorted.narrow(dim, start, n - 1).logical_or_(tie)
                margin.narrow(dim, start, n - 1).copy_(torch.minimum(margin.narrow(dim, start, n - 1), gap))
                tols.narrow(dim, start, n - 1).copy_(torch.maximum(tols.narrow(dim, start, n - 1), gap_tol))
        k = int(k)
        amb_k, margin_k, tol_k = amb_sorted.narrow(dim, 0, k), margin.narrow(dim, 0, k), tols.narrow(dim, 0, k)
        found = []
        for t in outs:
            if t.dtype.is_floating_point or t.shape != amb_k.shape:
                found.append(None)
            else:
                found.append((amb_k.clone(), margin_k.clone(), tol_k.clone(), f"{name} (a near tie)"))
        return found

    def _decide_bool_reduction(self, name, args, kwargs, outs, floats=None):
        x = args[0] if args else kwargs.get("input")
        if not isinstance(x, torch.Tensor):
            return None
        dim, keepdim = _dim_args(name, args, kwargs)
        poisoned = self._poison_of(x)
        unsure = self._taint_of(x) | poisoned
        value = self.entry(x).shadow != 0
        margin = tol = None
        if floats is not None:
            s, t = floats
            near = (s.abs() <= t) & (t > 0) & ~torch.isnan(s)
            unsure = unsure | near
            margin, tol = s.abs(), t
        out = outs[0]
        if name == "all":
            decided = _reduce_any(~unsure & ~value, dim, keepdim, out.shape)
        else:
            decided = _reduce_any(~unsure & value, dim, keepdim, out.shape)
        amb = ~decided & _reduce_any(unsure, dim, keepdim, out.shape)
        poison = ~decided & _reduce_any(poisoned, dim, keepdim, out.shape)  # undecided, and a poisoned element may decide
        if margin is None:  # bool operands: the taint came from upstream
            return [(amb, None, None, f"{name}() of a mask that hangs on {self.entry(x).why}", poison)]
        return [(amb, torch.full(out.shape, float(margin.min()) if margin.numel() else 0.0, dtype=torch.float64),
                 torch.full(out.shape, float(tol.max()) if tol.numel() else 0.0, dtype=torch.float64),
                 f"{name} (nonzero test)", poison)]


def explain_rounding(fn, args):
    """Per leaf of ``run_call``'s tree (outputs, then final inputs), as ``flatten``
    orders them: an _Entry (its ``taint``: the elements a decision within
    rounding of its threshold could change) or None; None when the shadowed
    run could not follow the program."""
    # On the CPU: the masks the shadow keeps live there.
    args = [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
    mode = RoundingShadow()
    try:
        with mode:
            out = fn(*args)
    except Exception:  # noqa: BLE001 - eager raising here is not ours to judge
        return None
    if mode.broken is not None:
        return None
    leaves = flatten((out, tuple(args)))
    return [mode.entries.get(id(v)) if isinstance(v, torch.Tensor) else None for _, v in leaves]


def attach_rounding(tree, fn, args):
    """Give each tensor leaf of a reference ``tree`` a way to its entry of
    ``explain_rounding(fn, args)``, run once, when ``rounding_explains`` first asks."""
    memo = []

    def entries():
        if not memo:
            memo.append(explain_rounding(fn, args))
        return memo[0]

    for index, (_, leaf) in enumerate(flatten(tree)):
        if isinstance(leaf, torch.Tensor):
            leaf._symfuzz_rounding = (entries, index)
            leaf._symfuzz_explain = rounding_explains
    return tree


def rounding_explains(e, c, r):
    """Why rounding explains how compiled ``c`` differs from eager ``e`` (a reason), or None.

    A discrete output is explained (a bool, or integers: indices, counts,
    rounded values) when every element that differs depends on a decision (a
    comparison, all/any, argmax, sort ...) whose exact float64 operands lie
    within rounding of its threshold, only through ops that keep that local
    (never a sum of floats or an op the shadow does not know), and, for a
    count or other integer whose step is known, compiled lies within that
    step of eager: there, code that rounds differently may give it without a
    bug. A float output is explained the same way only where it jumps by a
    known step: a float ``floor``/``round`` (1), a ``remainder`` (its
    divisor) at an operand within rounding of a multiple of the divisor,
    carried through ops that scale or shift the step by a known amount;
    every element outside tolerance must lie within that step of eager.
    ``r`` is the reference leaf, from ``reference_call``; without its
    shadowed run, nothing is explained. It never raises: whatever goes
    wrong, nothing is explained.
    """
    try:
        return _rounding_reason(e, c, r)
    except Exception:  # noqa: BLE001 - no explanation is the safe answer
        return None


def _rounding_reason(e, c, r):
    hook = getattr(r, "_symfuzz_rounding", None)
    if hook is None or e.shape != c.shape or e.dtype != c.dtype or e.numel() == 0:
        return None
    if e.dtype.is_complex:
        return None
    entries, index = hook
    found = entries()
    entry = found[index] if found is not None and index < len(found) else None
    if entry is None or entry.taint is None or entry.taint.shape != e.shape:
        return None
    # The shadow ran on CPU copies: judge there, whatever device the lane used.
    e, c = e.detach().cpu(), c.detach().cpu()
    floating = e.dtype.is_floating_point
    moved_by = (c.double() - e.double()).abs()
    if floating:  # a float differs where it is outside its tolerance; it may move by a jump and that tolerance
        rtol, atol = TOLERANCES[e.dtype]
        slack = atol + rtol * e.double().abs()
        differ = (moved_by > slack) & ~(e.isnan() & c.isnan())
    else:
        differ, slack = e != c, 0.0
    explained = entry.taint.cpu()
    if entry.poison is not None:
        explained = explained & ~entry.poison.cpu()
    if e.dtype != torch.bool:
        steps = entry.step.cpu() if entry.step is not None else torch.full(e.shape, float("inf"), dtype=torch.float64)
        explained = explained & (moved_by <= steps + slack + (rtol * steps if floating else 0.0))
        if floating:  # a float that moved by an unknown amount is never explained: it could be anything
            explained = explained & torch.isfinite(steps)
    if not bool(differ.any()) or bool((differ & ~explained).any()):
        return None
    flat = int(differ.reshape(-1).int().argmax())
    at = [int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)] if e.dim() else []
    moved = ""
    if e.dtype != torch.bool and entry.step is not None and bool(torch.isfinite(entry.step.reshape(-1)[flat])):
        moved = f" (moved {float(moved_by.reshape(-1)[flat]):g} <= step {float(entry.step.reshape(-1)[flat]):g})"
    what = "jump" if floating else "discrete flip"
    if entry.margin is not None and entry.margin.shape == e.shape and bool(entry.margin.reshape(-1)[flat] <= entry.tol.reshape(-1)[flat]):
        m, t = float(entry.margin.reshape(-1)[flat]), float(entry.tol.reshape(-1)[flat])
        return f"{what} explained by rounding: {entry.label} at element {at}, margin {m:.3g} <= tol {t:.3g}{moved}"
    return f"{what} explained by rounding: element {at} hangs on {entry.why or 'a decision near its threshold'}{moved}"
