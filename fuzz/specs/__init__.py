"""Op specs, one module per family, collected into one registry by name."""

from __future__ import annotations

import importlib

from symfuzz.fuzz.specs.base import OpSpec, Operand, ParamContext  # noqa: F401 - public surface

# datadep comes before factory so that the last spec, which Hypothesis draws more often
# (it favours the ends of integer ranges), stays the one it was before.
FAMILIES = ("pointwise", "reduction", "view", "indexing", "linalg", "nn", "inplace", "datadep", "factory")

_REGISTRY: dict[str, OpSpec] = {}


def _load() -> dict[str, OpSpec]:
    if not _REGISTRY:
        for family in FAMILIES:
            module = importlib.import_module(f"{__name__}.{family}")
            for spec in module.SPECS:
                if spec.name in _REGISTRY:
                    raise ValueError(f"two op specs are named {spec.name!r}")
                _REGISTRY[spec.name] = spec
    return _REGISTRY


def all_specs() -> list[OpSpec]:
    """Every spec, in a stable order (family order, then definition order)."""
    return list(_load().values())


def get_spec(name: str) -> OpSpec:
    specs = _load()
    if name not in specs:
        raise KeyError(f"no op spec named {name!r}; this finding may come from a newer symfuzz")
    return specs[name]


def required_dynamo_config(program) -> dict:
    """The ``torch._dynamo.config`` flags ``program``'s ops declare they need.

    The union of every used spec's ``dynamo_config`` (e.g. data-dependent ops
    want ``capture_scalar_outputs`` and ``capture_dynamic_output_shape_ops``
    so that Dynamo traces them instead of breaking the graph). Two specs
    wanting different values for one flag is a spec bug and raises.
    """
    flags: dict = {}
    wanted_by: dict = {}
    for name in program.ops():
        for flag, value in get_spec(name).dynamo_config.items():
            if flag in flags and flags[flag] != value:
                raise ValueError(f"op specs {wanted_by[flag]!r} and {name!r} want different values of "
                                 f"torch._dynamo.config.{flag} ({flags[flag]!r}, {value!r}); fix one of the specs")
            flags[flag] = value
            wanted_by.setdefault(flag, name)
    return flags
