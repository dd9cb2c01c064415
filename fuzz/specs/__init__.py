"""Op specs, one module per family, collected into one registry by name."""

from __future__ import annotations

import importlib

from .base import OpSpec, Operand, ParamContext  # noqa: F401 - public surface

FAMILIES = ("pointwise", "reduction", "view", "indexing", "linalg", "nn", "inplace", "factory")

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
