"""stats.json's counted sections, declared once.

The campaign writes them (``stats.Stats.to_json``), ``symfuzz merge`` adds them up
across output folders, and the reports check their types: all three read their keys
from here, so a count added here is written, merged and checked alike. What each key
means is in docs/output.md.

Each key of a section is one of:
- ``COUNT``: a number the campaign counts (under the counter named beside it) and merge adds up;
- ``COUNTS``: an object of counts (by op, by purpose ...), added up key by key;
- ``RATIO``: computed from the section's counts, by the campaign and again by merge.
"""

from __future__ import annotations

COUNT, COUNTS, RATIO = "count", "counts", "ratio"

# section -> key -> (kind, the campaign's counter for a COUNT; None otherwise), in stats.json's order.
SECTIONS = {
    "programs": {
        "generated": (COUNT, "programs_generated"),
        "valid": (COUNT, "programs_valid"),
        "compiled": (COUNT, "programs_compiled"),
        "called": (COUNT, "programs_called"),
        "validity_rate": (RATIO, None),
        "internal_errors": (COUNT, "internal_errors"),
        "with_gradients": (COUNT, "programs_with_gradients"),
        "with_scalar_inputs": (COUNT, "programs_with_scalar_inputs"),
        "with_modules": (COUNT, "programs_with_modules"),
    },
    "calls": {
        "made": (COUNT, "calls"),
        "checked": (COUNT, "calls_checked"),
        "recompiles": (COUNT, "recompiles"),
        "graphs_compiled": (COUNT, "graphs_compiled"),
        "checked_per_compile": (RATIO, None),
        "rejected_by_marks": (COUNT, "rejected_calls"),
        "gradients_checked": (COUNT, "gradient_calls_checked"),
        "graphs_compiled_per_call": (COUNTS, None),
    },
    "guards": {
        "programs_with_guards": (COUNT, "programs_with_guards"),
        "regions": (COUNT, "guard_regions"),
        "regions_covered": (COUNT, "guard_regions_covered"),
        "coverage": (RATIO, None),
        "planned_calls": (COUNTS, None),
        "planned_reuse_calls_reused": (COUNT, "planned_reused"),
        "reuse_more_calls_reused": (COUNT, "reuse_more_reused"),
        "over_specializations": (COUNT, "over_specializations"),
        "over_guards": (COUNT, "over_guards"),
        "unexplained_recompiles": (COUNT, "unexplained_recompiles"),
        "recompiles_explained": (COUNT, "recompiles_explained"),
        "recompiles_unexplained": (COUNT, "recompiles_unexplained"),
        "recompile_classes": (COUNTS, None),
    },
    "guidance": {
        "mutants": (COUNT, "mutant_cases"),  # generated cases that mutated a case that reached something new
        "mutants_with_new_features": (COUNT, "mutants_with_new"),
        "steered": (COUNT, "steered_cases"),  # generated cases drawn steered toward the least-used ops
        "steered_with_new_features": (COUNT, "steered_with_new"),
        "fresh_with_new_features": (COUNT, "fresh_with_new"),  # fresh draws that reached something new
        # Per kind of generated case (fresh, steered, mutant): the features its cases reached first,
        # and the worker seconds they took: what each kind reaches per CPU-second (benchmarks/features.py).
        "new_features_by_kind": (COUNTS, None),
        "seconds_by_kind": (COUNTS, None),
    },
}


def keys_of(section: str, *kinds: str) -> tuple[str, ...]:
    """The keys of ``section`` of these kinds, in order."""
    return tuple(key for key, (kind, _) in SECTIONS[section].items() if kind in kinds)


def summed(section: str) -> tuple[str, ...]:
    """The keys merge adds up: the counts and the objects of counts."""
    return keys_of(section, COUNT, COUNTS)


def section(name: str, counters, computed: dict) -> dict:
    """The section ``name`` of stats.json: each COUNT read from ``counters`` (the campaign's
    Counter), each other key from ``computed``, which must give exactly those."""
    declared = SECTIONS[name]
    missing = set(keys_of(name, COUNTS, RATIO)) ^ set(computed)
    if missing:
        raise KeyError(f"stats.json {name}: {sorted(missing)} computed but not declared, or declared but not computed")
    return {key: counters[counter] if kind == COUNT else computed[key] for key, (kind, counter) in declared.items()}
