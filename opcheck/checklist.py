"""The checks of symfuzz opcheck, each declared once, as a record: the one table.

The runner (``opcheck.api``), the xfail store, the CLI, the pytest plugin and
the repro snippets all read the checks from here: a check's name is written
nowhere else. Refer to one check through its record (``FAKETENSOR.name``), to
all of them through ``SPECS`` or ``CHECKS``, never by spelling a name out.

No torch here (the standard library only): the store and the pytest plugin,
which every pytest run loads, read this table. So a record names its judge by
module and attribute (``Lazy``), imported on first call.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Lazy:
    """A function named by module and attribute, imported on its first call.

    The judges import torch, and this table must not (see the module docstring),
    so it holds them by name; ``importlib`` resolves the name when the runner calls it.
    """

    module: str
    attribute: str

    def resolve(self):
        return getattr(importlib.import_module(self.module), self.attribute)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)


@dataclass(frozen=True)
class Edge:
    """Edge variants a check tries before (or instead of) Hypothesis, as data.

    ``sizes`` names how the variant's sizes follow from the sample's
    (``opcheck.api`` computes them): "sample", "odd" (even sizes + 1),
    "at most 3", "small" (2, 3, 4, ... per symbol), "ones", "2v+1", "leading 1"
    (the first symbol 1; none when there are no sizes).
    ``transposed``: one variant per tensor, that tensor laid out transposed
    (``layouts``: one per tensor and per layout named there instead).
    """

    sizes: str
    seed: int
    transposed: bool = False
    layouts: tuple[str, ...] = ("transposed",)


# Which floating inputs a check makes require grad (and its repro with them).
NO_GRADS = "none"  # it runs no backward
ALL_GRADS = "always"  # it is about gradients: every floating input requires grad
GRADS_IF_REGISTERED = "if registered"  # unless autograd_registration failed: a missing backward would fail it too


@dataclass(frozen=True)
class CheckSpec:
    name: str  # --checks and --opcheck-checks take it; the xfail store keys it "test_<name>"
    judge: Lazy  # judge(op, runner, template) -> a judge of that template's inputs: Case -> None | REJECTED | Problem
    weight: float  # its share of an op's time budget, relative to the other checks run
    description: str  # one line: what it checks (the CLI's help)
    prerequisites: tuple[str, ...] = ()  # skipped when one of these failed: it would fail for the same reason
    edges: tuple[Edge, ...] | None = None  # edge variants to try first; None: all of the sweep's
    examples: int = 0  # Hypothesis examples after the edge variants (0: edges only)
    max_size: int | None = None  # the largest size Hypothesis draws (None: the sweep's own bound)
    broadcast: bool = False  # its edges include the broadcast patterns (size-1 dims, missing leading dims)
    grads: str = NO_GRADS  # NO_GRADS, ALL_GRADS or GRADS_IF_REGISTERED
    repro_dtype: str | None = None  # the floating dtype its repro snippet uses (None: the failing input's)
    needs_gradients: bool = False  # it is about gradients: skipped, with the reason, for an op that is not differentiable
    axes: bool = False  # it also sweeps argument kinds: samples with other scalars, optional arguments given or None
    quick: str = "edges"  # under --quick: "edges" (its edge variants, no random ones), "sample" or "skip"
    quick_edges: tuple[Edge, ...] | None = None  # under --quick, these edges instead of ``edges`` (None: the same)
    # The kinds of input feature that are new information to it (opcheck.variants.info_key;
    # None: all): the sweep skips an input that brings none of these.
    learns: tuple[str, ...] | None = None


# In the order the checks run: a check's prerequisites come before it, and the cheap
# checks (one real or fake call per input) come before those that compile, so that a
# fake kernel already found wrong skips the compiles that would trace through it.
SCHEMA = CheckSpec(
    name="schema",
    judge=Lazy("symfuzz.opcheck.checks.schema", "schema_judge"),
    weight=1,
    description="the op mutates and aliases only what its schema declares (SchemaCheckMode)",
    examples=15,
    axes=True,
)
MUTATION = CheckSpec(
    name="mutation",
    judge=Lazy("symfuzz.opcheck.checks.mutation", "mutation_judge"),
    weight=0.5,
    description="no undeclared write to any input, even one that leaves its values as they were "
                "(version counter, storage bytes inside and outside the view)",
    examples=10,
    axes=True,
)
AUTOGRAD_REGISTRATION = CheckSpec(
    name="autograd_registration",
    judge=Lazy("symfuzz.opcheck.checks.autograd", "autograd_registration_judge"),
    weight=0.5,
    description="autograd is registered where it must be: outputs that require grad have a backward",
    edges=(Edge("sample", seed=1),),
    grads=ALL_GRADS,
)
FAKETENSOR = CheckSpec(
    name="faketensor",
    judge=Lazy("symfuzz.opcheck.checks.fake", "faketensor_judge"),
    weight=2,
    description="the fake kernel agrees with the real one: dtype, shape, strides, aliasing; it reads no data",
    examples=40,
    axes=True,
    # Not value classes: a fake kernel sees no values, and sizes that move with the
    # values are found on every input anyway (fake.DataDependence redraws them).
    learns=("dtype", "layout", "layout sizes", "device", "rank", "size", "relations"),
)
SYMBOLIC_FAKE = CheckSpec(
    name="symbolic_fake",
    judge=Lazy("symfuzz.opcheck.checks.fake", "symbolic_fake_judge"),
    weight=2,
    description="the fake kernel traces with symbolic sizes: no guard pins a size, data-dependent sizes are unbacked",
    examples=25,
    axes=True,
    # Sizes, their relations and the guards they install; dtypes and layouts are
    # faketensor's (at concrete sizes), values DataDependence's (on every input).
    learns=("rank", "size", "relations", "guard"),
    # Under --quick: the size classes that change a trace's guards (0/1 specialization,
    # odd and distinct sizes), not every dim's every edge: each input is a symbolic trace.
    quick_edges=(Edge("sample", seed=1), Edge("odd", seed=1), Edge("ones", seed=1), Edge("small", seed=1)),
)
GRADIENT = CheckSpec(
    name="gradient",
    judge=Lazy("symfuzz.opcheck.checks.autograd", "gradient_judge"),
    weight=1,
    description="the registered backward agrees with numerical gradients (gradcheck)",
    prerequisites=(AUTOGRAD_REGISTRATION.name, SCHEMA.name),  # a hidden mutation breaks finite differences
    edges=(Edge("at most 3", seed=1), Edge("small", seed=1), Edge("ones", seed=1),
           Edge("small", seed=2, transposed=True)),
    # Under --quick: small sizes, plain and transposed. Each input is a gradcheck, the dearest
    # judgement of the quick checks; a wrong formula shows at any size, a layout bug transposed.
    quick_edges=(Edge("small", seed=1), Edge("small", seed=2, transposed=True)),
    max_size=6,  # gradcheck's cost grows with every element
    grads=ALL_GRADS,
    repro_dtype="float64",
    needs_gradients=True,
    broadcast=True,
)
FAKE_DEVICE = CheckSpec(
    name="fake_device",
    judge=Lazy("symfuzz.opcheck.checks.device", "fake_device_judge"),
    weight=0.5,
    description="the fake kernel on meta tensors and on fake CUDA tensors: outputs on the input's device, "
                "sizes and dtypes as the real kernel's (no GPU needed)",
    prerequisites=(FAKETENSOR.name,),  # a fake kernel already wrong on the CPU is that check's finding
    edges=(Edge("sample", seed=1), Edge("odd", seed=1), Edge("odd", seed=2, transposed=True)),
)
LAYOUT_CONSISTENCY = CheckSpec(
    name="layout_consistency",
    judge=Lazy("symfuzz.opcheck.checks.layout", "layout_consistency_judge"),
    weight=1,
    description="metamorphic: op(x) equals op(x.contiguous()) for transposed, sliced (offset) and expanded "
                "inputs; a kernel reading raw memory as row-major fails it",
    edges=(Edge("sample", seed=1, transposed=True, layouts=("transposed", "sliced", "expanded")),
           Edge("odd", seed=2, transposed=True, layouts=("transposed", "sliced", "expanded"))),
    examples=10,
)
# AOT and Inductor trace through the fake kernel.
AOT_DISPATCH_DYNAMIC = CheckSpec(
    name="aot_dispatch_dynamic",
    judge=Lazy("symfuzz.opcheck.checks.compile", "aot_dispatch_dynamic_judge"),
    weight=1.5,
    description="AOTAutograd with dynamic shapes agrees with eager (the check torch.library.opcheck runs)",
    prerequisites=(FAKETENSOR.name, SYMBOLIC_FAKE.name, SCHEMA.name),
    edges=(Edge("odd", seed=1),),
    grads=GRADS_IF_REGISTERED,
    # Each input is an AOT trace: under --quick, torch.library.opcheck's one (the sample,
    # with its own requires_grad: opcheck.api._Runner.input_grads).
    quick="sample",
)
INDUCTOR_DYNAMIC = CheckSpec(
    name="inductor_dynamic",
    judge=Lazy("symfuzz.opcheck.checks.compile", "inductor_dynamic_judge"),
    weight=4,  # it compiles
    quick="skip",  # a compile alone costs many times torch.library.opcheck's whole run
    description="torch.compile (Inductor, dynamic shapes) agrees with eager: outputs, mutated inputs, gradients",
    prerequisites=(FAKETENSOR.name, SYMBOLIC_FAKE.name, SCHEMA.name),
    edges=(Edge("odd", seed=1), Edge("2v+1", seed=2), Edge("odd", seed=3, transposed=True),
           Edge("leading 1", seed=4)),
    grads=GRADS_IF_REGISTERED,
)

SPECS = (SCHEMA, MUTATION, AUTOGRAD_REGISTRATION, FAKETENSOR, SYMBOLIC_FAKE, FAKE_DEVICE, LAYOUT_CONSISTENCY, GRADIENT,
         AOT_DISPATCH_DYNAMIC, INDUCTOR_DYNAMIC)
CHECKS = tuple(spec.name for spec in SPECS)  # the names, in order
BY_NAME = {spec.name: spec for spec in SPECS}


def check_names(checks) -> list[str]:
    """The names a user gave (an iterable; the store's ``test_<name>`` too), in the table's order.

    ValueError names the unknown ones and the choices.
    """
    names = [c.strip().removeprefix("test_") for c in checks]
    unknown = [c for c in names if c not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    return [c for c in CHECKS if c in names]


__all__ = ["BY_NAME", "CHECKS", "SPECS", "CheckSpec", "Edge", "Lazy", "check_names"]
