"""The shape sweep: variants of one sample, and the search for a failing one.

Sizes are tied the way the sample ties them: every dim of size ``v >= 1``
gets the symbol of ``v``, so ``(4, 8) @ (8, 3)`` keeps its inner dims equal
while they vary. Empty dims stay empty.
A variant then picks a value per symbol (0, 1, odd, larger), may untie one
dim (non-square and mixed sizes, or size 1: broadcasting), may drop a
tensor's leading dims (broadcasting again), may lay a tensor out transposed,
sliced or expanded, may retype a dtype group (to another float, or across
classes: integer, bool, complex), and may recast a tensor's values into a
class one random sample never holds (zeros, ties, negative, large).

``search`` runs a check over the deterministic edge variants first, then
over variants drawn by Hypothesis (``find``, which also shrinks), and
greedily shrinks a failure found among the edges. Variants the real kernel
rejects do not count.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, Phase, configuration, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from symfuzz.opcheck.contracts import Contracts
from symfuzz.opcheck.inputs import FLOAT_DTYPES, INT_DTYPES, LAYOUTS, VALUES, Case, Template, TensorInput

REJECTED = "rejected"  # a check's answer when the real kernel refused the input
UNJUDGED = "unjudged"  # a check's answer for an input it has nothing to say about (neither tried nor refused)


def is_failure(outcome) -> bool:
    """Is a judge's answer a failure (not None, REJECTED or UNJUDGED)?"""
    return outcome is not None and not isinstance(outcome, str)


@dataclass(frozen=True)
class Variant:
    sizes: tuple  # value per symbol, in symbol order
    untie: tuple = ()  # ((tensor, dim, size), ...): dims given their own size
    layouts: tuple = ()  # layout per tensor ("" = contiguous)
    dtypes: tuple = ()  # ((from dtype, to dtype), ...)
    seed: int = 0
    values: tuple = ()  # value class per tensor ("" = drawn from the sample's range)
    drop: tuple = ()  # ((tensor, k), ...): that tensor loses its first k dims (it broadcasts against the others)

    def to_json(self) -> dict:
        return {"sizes": list(self.sizes), "untie": [list(u) for u in self.untie], "layouts": list(self.layouts),
                "dtypes": [list(d) for d in self.dtypes], "seed": self.seed, "values": list(self.values),
                "drop": [list(d) for d in self.drop]}

    @classmethod
    def from_json(cls, data: dict) -> Variant:
        return cls(tuple(data["sizes"]), tuple(tuple(u) for u in data.get("untie", ())),
                   tuple(data.get("layouts", ())), tuple(tuple(d) for d in data.get("dtypes", ())),
                   data.get("seed", 0), tuple(data.get("values", ())), tuple(tuple(d) for d in data.get("drop", ())))


# Sizes above this are swept at smaller stand-ins (Sweep.swept_sizes).
LARGE_SIZE = 64


class Sweep:
    """Variants of one template."""

    def __init__(self, template: Template, *, seed: int = 0, layouts=True, dtypes=True, values=True):
        self.template = template
        self.seed = seed
        # Arguments held fixed, and dims that follow other arguments, are not the
        # sweep's to choose (opcheck.contracts).
        self.contracts = getattr(template, "contracts", None) or Contracts()
        # Size-1 dims vary too (a batch-1 sample must not hide a fake kernel that
        # hard-codes the 1); where they broadcast, the real kernel refuses the variant.
        values = sorted({d for n, s in enumerate(template.slots) for i, d in enumerate(s.shape)
                         if d >= 1 and self.contracts.is_free(n, i)})
        self.symbols = values  # symbol i stands for the sample size values[i]
        self.dtype_groups = sorted({s.dtype for n, s in enumerate(template.slots) if n not in self.contracts.fixed})
        self.allow_layouts = layouts
        self.allow_dtypes = dtypes
        self.allow_values = values
        self._cases: dict = {}  # Variant -> Case (case())
        self._free: dict = {}  # tensor -> _all_free's answer (the contracts never change)

    # ------------------------------------------------------------ building

    def original_sizes(self) -> tuple:
        return tuple(self.symbols)

    def swept_sizes(self) -> tuple:
        """The sizes the sweep's variants start from: the sample's, with every size above
        ``LARGE_SIZE`` replaced by a smaller one of the same parity, in the same order and
        distinct from the rest. A sample recorded at production sizes (a 4096 x 4096 weight)
        is judged as it is, but every variant of it at sizes its bugs show at as well: fake
        kernels go wrong at 0, 1, odd, equal and mixed sizes, not at 4096, and a variant at
        twice 4096 would cost each check seconds of kernel time per input."""
        small = [v for v in self.symbols if v <= LARGE_SIZE]
        used, out = set(small), {}
        floor = max([LARGE_SIZE // 2, *small]) + 1
        for v in sorted(v for v in self.symbols if v > LARGE_SIZE):
            c = floor + (floor % 2 != v % 2)
            while c in used:
                c += 2
            out[v] = c
            used.add(c)
            floor = c + 1
        return tuple(out.get(v, v) for v in self.symbols)

    def case(self, v: Variant) -> Case:
        """The input ``v`` builds (the same Case for the same variant: the sweep asks twice,
        once for what it would show, once to judge it)."""
        built = self._cases.get(v)
        if built is None:
            built = self._cases[v] = self._build(v)
        return built

    def _build(self, v: Variant) -> Case:
        size_of = dict(zip(self.symbols, v.sizes))
        untie = {(t, d): size for t, d, size in v.untie}
        retype = dict(v.dtypes)
        dropped = dict(v.drop)
        shapes = [tuple(untie.get((n, d), size_of.get(size, size)) for d, size in enumerate(slot.shape))
                  for n, slot in enumerate(self.template.slots)]
        # Broadcasting drops a tensor's leading dims before the rules read its numel or dims.
        shapes = [shape[dropped.get(n, 0) if self._all_free(n) else 0:] for n, shape in enumerate(shapes)]
        for (n, d), rule in self.contracts.follows.items():
            shape = list(shapes[n])
            shape[d] = rule.size(shapes, self.template.leaves)
            shapes[n] = tuple(shape)
        inputs = []
        for n, slot in enumerate(self.template.slots):
            seed = (self.seed * 1_000_003 + v.seed * 101 + n) % 2**31
            if n in self.contracts.fixed:  # as recorded: shape, dtype, contiguous; values from its range
                inputs.append(TensorInput(shape=slot.shape, dtype=slot.dtype, lo=slot.lo, hi=slot.hi, seed=seed))
                continue
            shape = shapes[n]
            layout = (v.layouts[n] if n < len(v.layouts) else "") or "contiguous"
            if layout == "expanded" and (slot.mutable or not shape or shape[0] <= 1):
                layout = "contiguous"  # writing through stride 0 is an error, and size 1 expands to itself
            if layout == "transposed" and len(shape) < 2:
                layout = "contiguous"
            if layout == "sliced" and not shape:
                layout = "contiguous"
            dtype = retype.get(slot.dtype, slot.dtype)
            lo, hi = _range_in(dtype, slot.lo, slot.hi)
            values = (v.values[n] if n < len(v.values) else "") or ""
            if values not in value_classes(slot, dtype):
                values = ""
            inputs.append(TensorInput(
                shape=shape, dtype=dtype, layout=layout, lo=lo, hi=hi, seed=seed,
                requires_grad=False, values=values,
            ))
        return self.template.case(inputs, v)

    def _all_free(self, n: int) -> bool:
        """Does the sweep choose every dim of tensor ``n``, none tied by a contract (so it may drop some)?"""
        if n not in self._free:
            self._free[n] = not any(rule.slot == n and rule.dim is not None for rule in self.contracts.follows.values()) \
                and all(self.contracts.is_free(n, d) and not self.contracts.is_tied(n, d)
                        for d in range(len(self.template.slots[n].shape)))  # a rule reads no dim of it by position
        return self._free[n]

    def _untieable(self, n: int, d: int) -> bool:
        """May the sweep give this dim a size of its own? Not where a contract sets it, and not
        on a tensor the op writes to (an ``out=`` argument, an in-place input): its shape is
        the one the op gives its result, and a lax kernel writing into another shape, which
        the fake rightly refuses, is outside the op's contract."""
        return self.contracts.is_free(n, d) and not self.template.slots[n].mutable and not self.contracts.is_tied(n, d)

    def _shared(self, size: int) -> bool:
        """Is ``size`` tied across more than one free dim?"""
        return sum(size == d and self.contracts.is_free(n, i)
                   for n, sl in enumerate(self.template.slots) for i, d in enumerate(sl.shape)) > 1

    def other_dtypes(self, dtype: str) -> list[str]:
        """The dtypes a group of ``dtype`` tensors is retyped to: the other dtypes of its
        class, then other classes (a schema's ``Tensor`` takes any dtype; a kernel that
        refuses one says so, and that input is not counted)."""
        if dtype in FLOAT_DTYPES:
            return [d for d in FLOAT_DTYPES if d != dtype] + list(_ACROSS["float"])
        if dtype in INT_DTYPES:
            return [d for d in INT_DTYPES if d != dtype] + list(_ACROSS["int"])
        return list(_ACROSS.get(dtype, ()))

    def broadcasts(self, base) -> list[Variant]:
        """Broadcast patterns for ops of several tensors: one dim shared with another
        tensor made 1, and a tensor without its leading dims."""
        free = [n for n in range(len(self.template.slots)) if n not in self.contracts.fixed]
        if len(free) < 2:
            return []
        out = []
        for n in free:
            slot = self.template.slots[n]
            for d, size in enumerate(slot.shape):
                if size >= 2 and self._untieable(n, d) and self._shared(size):
                    out.append(Variant(base, untie=((n, d, 1),), seed=9))
            others = max(len(self.template.slots[m].shape) for m in free if m != n)
            # Down to one dim at least: a 0-dim tensor is a scalar, another argument kind.
            if 2 <= len(slot.shape) <= others and not slot.mutable and self._all_free(n):
                out.append(Variant(base, drop=((n, 1),), seed=9))
        return out

    # ---------------------------------------------------- deterministic edges

    def edges(self, quick: bool = False) -> list[Variant]:
        """The sizes and layouts fake kernels most often get wrong, simplest first.

        ``quick`` (--quick) leaves out the variants that mostly repeat another:
        a larger size beside the odd one, and each layout at the sample's sizes
        beside the same layout at odd sizes (strides and slicing bugs show at both)."""
        out = [Variant(self.original_sizes(), seed=1)]
        base = self.swept_sizes()
        if base != self.original_sizes():
            out.append(Variant(base, seed=1))
        for i, v in enumerate(base):
            for new in (1, 0, v + 1 if v % 2 == 0 else v + 2) + (() if quick else (2 * v + 3,)):
                sizes = list(base)
                sizes[i] = new
                out.append(Variant(tuple(sizes), seed=2))
        if len(base) >= 1:
            out.append(Variant(tuple(3 + 2 * i for i in range(len(base))), seed=3))  # all odd, all distinct
            if not quick:
                out.append(Variant(tuple(2 * v + 1 for v in base), seed=4))  # all larger
        for n, slot in enumerate(self.template.slots):  # untie one dim: non-square, mixed
            for d, size in enumerate(slot.shape):
                if size >= 2 and self._untieable(n, d) and self._shared(size):
                    out.append(Variant(base, untie=((n, d, size + 1),), seed=5))
        if self.allow_layouts:
            for n in range(len(self.template.slots)):
                if n in self.contracts.fixed:
                    continue
                for layout in LAYOUTS[1:]:
                    layouts = [""] * len(self.template.slots)
                    layouts[n] = layout
                    if not quick:
                        out.append(Variant(base, layouts=tuple(layouts), seed=6))
                    # odd sizes too: strides and slicing bugs often need both
                    out.append(Variant(tuple(v + 1 if v % 2 == 0 else v for v in base), layouts=tuple(layouts), seed=7))
        if self.allow_dtypes:
            for group in self.dtype_groups:
                for other in self.other_dtypes(group):
                    out.append(Variant(base, dtypes=((group, other),), seed=8))
        if self.allow_values:
            for n, slot in enumerate(self.template.slots):
                if n in self.contracts.fixed:
                    continue
                for values in value_classes(slot, slot.dtype):
                    picked = [""] * len(self.template.slots)
                    picked[n] = values
                    out.append(Variant(base, values=tuple(picked), seed=10))
        out += self.broadcasts(base)
        unique, seen = [], set()
        for v in out:
            key = self.case(v).key()
            if key not in seen:
                seen.add(key)
                unique.append(v)
        return unique

    # ------------------------------------------------------------ hypothesis

    def strategy(self, max_size: int | None = None):
        top = max_size or max([2 * v + 3 for v in self.swept_sizes()] + [9])
        # Hypothesis shrinks integers toward 0; this shrinks sizes toward 1
        # instead and still reaches 0 (at the top of the range).
        size = st.integers(0, top).map(lambda k: (k + 1) % (top + 1))
        n_tensors = len(self.template.slots)
        untie_slots = [(n, d) for n, slot in enumerate(self.template.slots) for d, s in enumerate(slot.shape)
                       if s >= 2 and self._untieable(n, d)]
        droppable = sorted({n for v in self.broadcasts(self.swept_sizes()) for n, _ in v.drop})

        @st.composite
        def variants(draw):
            sizes = tuple(draw(size) for _ in self.symbols)
            untie = ()
            if untie_slots and draw(st.booleans()):
                n, d = draw(st.sampled_from(untie_slots))
                untie = ((n, d, draw(size)),)
            layouts = ()
            if self.allow_layouts and n_tensors:
                layouts = tuple(draw(st.sampled_from(("",) + LAYOUTS[1:])) for _ in range(n_tensors))
            dtypes = ()
            if self.allow_dtypes:
                picked = []
                for group in self.dtype_groups:
                    choice = draw(st.sampled_from([group] + self.other_dtypes(group)))
                    if choice != group:
                        picked.append((group, choice))
                dtypes = tuple(picked)
            values = ()
            if self.allow_values and n_tensors:
                values = tuple(draw(st.sampled_from(("",) + VALUES)) for _ in range(n_tensors))
            drop = ()
            if droppable and draw(st.booleans()):
                drop = ((draw(st.sampled_from(droppable)), 1),)
            seed = draw(st.integers(0, 2**16))
            return Variant(sizes, untie, layouts, dtypes, seed, values, drop)

        return variants()

    # ------------------------------------------------------------- shrinking

    def simpler(self, v: Variant):
        """Candidates strictly simpler than ``v``, most ambitious first."""
        if v.dtypes:
            yield replace(v, dtypes=())
        if any(v.values):
            yield replace(v, values=())
            for n, values in enumerate(v.values):
                if values:
                    yield replace(v, values=tuple("" if m == n else x for m, x in enumerate(v.values)))
        if v.drop:
            yield replace(v, drop=())
        if any(v.layouts):
            yield replace(v, layouts=())
            for n, layout in enumerate(v.layouts):
                if layout:
                    layouts = list(v.layouts)
                    layouts[n] = ""
                    yield replace(v, layouts=tuple(layouts))
        if v.untie:
            yield replace(v, untie=())
            (t, d, size), = v.untie
            for smaller in _smaller(size):
                yield replace(v, untie=((t, d, smaller),))
        for i, size in enumerate(v.sizes):
            for smaller in _smaller(size):
                sizes = list(v.sizes)
                sizes[i] = smaller
                yield replace(v, sizes=tuple(sizes))


# Dtypes across classes that a group is also retyped to (Sweep.other_dtypes).
_ACROSS = {"float": ("int64", "int32", "bool", "complex64"), "int": ("bool", "float32"),
           "bool": ("int64", "float32"), "complex64": ("complex128", "float32"), "complex128": ("complex64",)}


# What an integer retyping keeps to: a float sample's range (a -3.4e38 attention mask,
# an uninitialized out= buffer) can exceed any integer's, and make_input would refuse it.
_INT_RANGES = {"int64": (-2**31, 2**31 - 2), "int32": (-2**31, 2**31 - 2), "int16": (-2**15, 2**15 - 1),
               "int8": (-128, 127), "uint8": (0, 255), "bool": (0, 1)}


def _range_in(dtype: str, lo: float, hi: float) -> tuple[float, float]:
    """The sample's range [lo, hi] kept within what ``dtype`` holds (unchanged for floats)."""
    if dtype not in _INT_RANGES:
        return lo, hi
    low, high = _INT_RANGES[dtype]
    lo, hi = min(max(lo, low), high), min(max(hi, low), high)
    return float(lo), float(max(lo, hi))


def value_classes(slot, dtype: str) -> tuple:
    """The value classes that keep a tensor in its argument's domain. Integers are
    often indices, bounded by the sample's range: they keep to it (zeros when 0 is
    in it, ties, negatives when it has some), never "large"."""
    if dtype == "bool" or dtype.startswith("complex"):
        return ("zeros",)
    if dtype in FLOAT_DTYPES:
        return VALUES
    return tuple(v for v, ok in (("zeros", slot.lo <= 0 <= slot.hi), ("ties", True), ("negative", slot.lo < 0)) if ok)


def _smaller(size):
    # Never to 0: an empty tensor is a poor example of a bug that isn't about
    # empties (an edge variant with a 0 size keeps its 0 if that is the bug).
    for s in (1, 2, 3, size // 2, size - 2, size - 1):
        if 1 <= s < size:
            yield s


def _cost(case: Case):
    inputs = case.tensor_inputs()
    numel = sum(_prod(i.shape) for i in inputs)
    return (numel, sum(i.layout != "contiguous" for i in inputs), sum(i.dtype != s.dtype for i, s in zip(inputs, case.template.slots)),
            sum(bool(i.values) for i in inputs))


def _prod(shape):
    out = 1
    for d in shape:
        out *= d
    return out


# -------------------------------------------------------------------- search


# ------------------------------------------------------------- information


def _size_class(size: int) -> str:
    # 0 and 1 are specialized by the compiler; parity is what half-size and
    # tiling bugs hang on. A larger size of the same parity tells nothing new.
    return str(size) if size <= 1 else ("odd" if size % 2 else "even")


# Dtype classes: a kernel or fake kernel that handles one dtype of a class handles
# the others alike (int32 after int64, bfloat16 after float16 tell nothing new).
_DTYPE_CLASS = {"float16": "half", "bfloat16": "half", "int32": "narrow int", "int16": "narrow int",
                "int8": "narrow int", "complex64": "complex", "complex128": "complex"}


def info_key(case: Case) -> frozenset:
    """What ``case`` can show a check, as a set of ``(kind, ...)`` features: per
    tensor its dtype class, layout, value class, device, rank and the class of
    each size (0, 1, even, odd), a non-contiguous layout together with the parity
    of its sizes (stride bugs often need both), and how the sizes of all tensors
    relate (which dims are equal, which are 1: the relations a symbolic trace
    guards on).

    An input whose features were all seen before brings no new information to a
    check that already judged those (``Novelty``)."""
    specs = case.tensor_inputs()
    features = set()
    groups: dict = {}
    for n, (spec, slot) in enumerate(zip(specs, case.template.slots)):
        shape = tuple(spec.shape)
        features.update({("dtype", n, _DTYPE_CLASS.get(spec.dtype, spec.dtype)), ("layout", n, spec.layout), ("values", n, spec.values),
                         ("device", n, slot.device), ("rank", n, len(shape))})
        features.update(("size", n, d, _size_class(v)) for d, v in enumerate(shape))
        if spec.layout != "contiguous":
            features.add(("layout sizes", n, spec.layout, tuple(_size_class(v) for v in shape)))
        for d, v in enumerate(shape):
            groups.setdefault(v if v > 1 else ("size", v), []).append((n, d))
    # The relation between sizes, not the sizes: e.g. {x0 dim 1 == x1 dim 0}, {x1 dim 0 is 1}.
    features.add(("relations", frozenset(tuple(g) for key, g in groups.items() if len(g) > 1 or isinstance(key, tuple))))
    return frozenset(features)


class Novelty:
    """The information a check's inputs brought so far (``info_key``, plus what
    the judge learned running one: ``judge.last_info``, e.g. the guards a symbolic
    trace installed), and how many inputs in a row brought none.

    The sweep skips a deterministic edge variant that brings no new feature, and
    stops drawing random variants after ``patience`` judged ones in a row brought
    none: the check has seen every dtype, layout, value and size class and every
    size relation and guard those inputs exercise, so more of the same would only
    cost time. ``patience=None`` never stops (the sweep before it stopped on information).
    ``learns``: the kinds of feature that are information to this check (None:
    all; ``CheckSpec.learns``)."""

    def __init__(self, patience: int | None, learns=None):
        self.patience = patience
        self.learns = None if learns is None else frozenset(learns)
        self.seen: set = set()
        self.stale = 0  # judged inputs in a row that brought nothing new
        self.skipped = 0  # edge variants not judged: nothing new in them

    @property
    def active(self) -> bool:
        return self.patience is not None

    def _features(self, case: Case, judge=None) -> set:
        key = getattr(case, "info", None)
        if key is None:  # asked twice per input (is_new, then add): computed once
            key = case.info = info_key(case)
        features = key | set(getattr(judge, "last_info", ()) or ())
        return features if self.learns is None else {f for f in features if f[0] in self.learns}

    def is_new(self, case: Case) -> bool:
        return not self.active or not self._features(case) <= self.seen

    def add(self, case: Case, judge=None) -> bool:
        """Record a judged input; True if it brought a new feature."""
        features = self._features(case, judge)
        new = not features <= self.seen
        self.seen |= features
        self.stale = 0 if new else self.stale + 1
        return new

    @property
    def exhausted(self) -> bool:
        return self.active and self.stale >= self.patience


@dataclass
class SearchResult:
    failure: object = None  # the check's failure value for ``case``
    case: Case | None = None
    shrunk: bool = False
    tried: int = 0
    rejected: int = 0
    out_of_time: bool = False  # the deadline came before the planned variants ran out
    skipped: int = 0  # edge variants not judged: they brought no new information (Novelty)
    stopped: bool = False  # the random variants stopped: inputs stopped bringing new information


def search(judge, sweep: Sweep, *, deadline: float, examples: int = 40, variants=None,
           hypothesis: bool = True, shrink: bool = True, max_size: int | None = None,
           novelty: Novelty | None = None, quick: bool = False) -> SearchResult:
    """Find an input on which ``judge(case)`` returns a failure.

    ``judge`` returns None (passed), ``REJECTED`` (the real kernel refused the
    input) or a failure object with a ``kind`` attribute. Stops at the first
    failure found, at ``deadline`` (time.monotonic()), or when the variants run
    out. ``variants`` replaces the edge list (None: ``sweep.edges(quick)``);
    ``max_size`` bounds the sizes Hypothesis draws. ``novelty`` (with the
    features of the inputs judged before, e.g. the sample) skips edges that
    bring no new information and stops the random variants once they bring none.
    """
    result = SearchResult()
    memo: dict = {}
    novelty = novelty or Novelty(None)

    def run(v: Variant):
        case = sweep.case(v)
        key = case.key()
        if key not in memo:
            outcome = judge(case)
            memo[key] = outcome
            if outcome is REJECTED:
                result.rejected += 1
            elif outcome is not UNJUDGED:
                result.tried += 1
                novelty.add(case, judge)  # a refused input showed nothing: its features stay unseen
        return case, memo[key]

    found = None
    for v in sweep.edges(quick) if variants is None else variants:
        if time.monotonic() > deadline:
            result.out_of_time = True
            return result
        if not novelty.is_new(sweep.case(v)):
            result.skipped += 1
            continue
        case, outcome = run(v)
        if is_failure(outcome):
            found = (v, case, outcome)
            break
    if found is None and hypothesis and examples > 0 and sweep.template.slots:
        first_kind = []

        novelty.stale = 0  # the edges' streak is not the random variants'

        def fails(v):
            if time.monotonic() > deadline:
                result.out_of_time = True
                return False
            # Hypothesis draws on, but nothing more is judged; once a failure was
            # found, its shrink candidates are judged whatever they bring.
            if novelty.exhausted and not first_kind:
                result.stopped = True
                return False
            _, outcome = run(v)
            if not is_failure(outcome):
                return False
            if not first_kind:
                first_kind.append(outcome.kind)
            return outcome.kind == first_kind[0]

        try:
            with _hypothesis_home():
                v = find(sweep.strategy(max_size), fails, settings=settings(
                    max_examples=examples, database=None, derandomize=True, deadline=None,
                    suppress_health_check=list(HealthCheck), phases=(Phase.generate, Phase.shrink),
                ))
        except (NoSuchExample, Unsatisfiable):
            v = None
        if v is not None:
            case, outcome = run(v)
            result.failure, result.case, result.shrunk = outcome, case, True
            return result
        return result
    if found is None:
        return result
    v, case, outcome = found
    result.failure, result.case = outcome, case
    if shrink:
        v, case, outcome, shrunk = _greedy_shrink(run, sweep, v, case, outcome, deadline)
        result.failure, result.case, result.shrunk = outcome, case, shrunk
    return result


@contextlib.contextmanager
def _hypothesis_home():
    """Hypothesis caches what it learns about source files under ./.hypothesis;
    an opcheck run must not leave that in the user's working directory. A home
    the user configured is left alone."""
    # Hypothesis fills in its default (./.hypothesis) on first use, so "not
    # configured" is either unset or that default.
    current = getattr(configuration, "__hypothesis_home_directory", None)
    default = getattr(configuration, "__hypothesis_home_directory_default", None)
    if (current is not None and current != default) or os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "symfuzz", "hypothesis")
    configuration.set_hypothesis_home_dir(cache)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(current)


def _greedy_shrink(run, sweep, v, case, outcome, deadline):
    shrunk = False
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in sweep.simpler(v):
            if time.monotonic() > deadline:
                break
            c_case = sweep.case(candidate)
            if _cost(c_case) > _cost(case):
                continue
            c_case, c_outcome = run(candidate)
            if is_failure(c_outcome) and c_outcome.kind == outcome.kind:
                v, case, outcome, shrunk, progress = candidate, c_case, c_outcome, True, True
                break
    return v, case, outcome, shrunk


def shrink(judge, sweep: Sweep, v: Variant, outcome, *, deadline: float):
    """Greedily shrink a failing variant, keeping the failure's kind.
    Returns (case, outcome, shrunk)."""
    memo: dict = {}

    def run(candidate):
        case = sweep.case(candidate)
        if case.key() not in memo:
            memo[case.key()] = judge(case)
        return case, memo[case.key()]

    _, case, outcome, shrunk = _greedy_shrink(run, sweep, v, sweep.case(v), outcome, deadline)
    return case, outcome, shrunk


def axis_of(case: Case) -> str:
    """What about ``case`` differs from its sample, as the report names the axis that
    revealed a failure: "dtype int32", "value zeros", "layout transposed (x1)",
    "broadcast x1[1, 8]", "argument k=0", "shape x0[1, 3]" or "the sample"."""
    parts = [case.template.axis] if case.template.axis else []
    if case.inputs is None:
        return ", ".join(parts) or "the sample"
    slots, names = case.template.slots, case.template.names()
    untied_to_one = {t for t, _, size in (case.variant.untie if case.variant else ()) if size == 1}
    dtypes = dict.fromkeys(f"{i.dtype}" + (" (a mask)" if i.dtype == "bool" and s.dtype in INT_DTYPES else "")
                           for i, s in zip(case.inputs, slots) if i.dtype != s.dtype)
    if dtypes:
        parts.append("dtype " + ", ".join(dtypes))
    parts += [f"value {i.values} ({name})" for name, i in zip(names, case.inputs) if i.values]
    parts += [f"layout {i.layout} ({name})" for name, i in zip(names, case.inputs) if i.layout != "contiguous"]
    parts += [f"broadcast {name}{list(i.shape)}" for n, (name, i, s) in enumerate(zip(names, case.inputs, slots))
              if len(i.shape) < len(s.shape) or n in untied_to_one]
    if not parts:
        changed = [f"{name}{list(i.shape)}" for name, i, s in zip(names, case.inputs, slots) if tuple(i.shape) != s.shape]
        parts.append("shape " + ", ".join(changed) if changed else "the sample's shapes")
    return ", ".join(parts)
