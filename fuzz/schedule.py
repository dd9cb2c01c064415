"""Drawing the dynamic-shape knobs of a Schedule.

A program is only half a dynamic-shape test: the other half is how its
compiled form is called. This module draws, through the same Hypothesis
``draw`` as the program (so schedules shrink with the rest of the case):

- the first "hint" sizes, on purpose unrepresentative: all symbols equal
  (duck sizing unifies them), some symbol 0 or 1 (specialized), or large
  first and small later;
- per-dim dynamism marks (``mark_dynamic`` with or without min/max,
  ``maybe_mark_dynamic``, ``mark_static``, ``mark_unbacked``, or none);
- Dynamo and ShapeEnv config flags (``Schedule.config``).

Each choice's first option is the plain default, so shrinking walks a
failing case back to "no marks, default config" unless the failure needs them.
"""

from __future__ import annotations

import re

import hypothesis.strategies as st

from symfuzz.fuzz.choices import Draw, weighted
from symfuzz.fuzz.ir import BranchNode, EffectNode, GraphBreakNode, OpNode, SizeNode, render_node

# First-call size patterns. "none" keeps the independently drawn sizes.
HINT_MODES = [("none", 12), ("duck", 4), ("zero-one", 3), ("large-first", 2)]

# (flag, values) per config group; the first value of each is torch's default
# and is what shrinking moves toward (a default is then left out of the config).
DYNAMO_FLAGS = {
    "automatic_dynamic_shapes": (True, False),
    "assume_static_by_default": (True, False),
    "automatic_dynamic_shapes_mark_as": ("dynamic", "unbacked"),
    "capture_scalar_outputs": (False, True),
    "capture_dynamic_output_shape_ops": (False, True),
    # Python int / float arguments: compiled as symbols (the default, once they
    # changed) or always as constants of the graph, guarded by value.
    "specialize_int": (False, True),
    "specialize_float": (False, True),
}
# Flags that only matter to a program with Python number inputs (fuzz/scalars.py).
SCALAR_FLAGS = ("specialize_int", "specialize_float")
# Not drawn: torch.fx.experimental._config.backed_size_oblivious. Under it,
# backed sizes are reasoned about as if never 0 or 1, so a later call with a
# 0 or 1 size is outside what the flag promises (in torch 2.13 it fails in
# Dynamo with ZeroDivisionError); every guard-directed schedule makes such
# calls, and they would be false alarms.
FX_FLAGS = {
    "use_duck_shape": (True, False),
}
# Flags that only matter to a module program (fuzz/modules.py): drawn for those
# alone. force_parameter_static_shapes=False lets parameters' sizes be symbolic
# too. Not drawn: inline_inbuilt_nn_modules, which torch 2.13 deprecates and
# ignores (always True).
MODULE_DYNAMO_FLAGS = {
    "force_parameter_static_shapes": (True, False),
}
# How often a flag leaves its default: 1 in N draws.
FLAG_RARITY = {"automatic_dynamic_shapes_mark_as": 12, "force_parameter_static_shapes": 3}
DEFAULT_RARITY = 6

MARK_WEIGHTS = [("auto", 6), ("dynamic", 4), ("maybe_dynamic", 2), ("static", 2), ("unbacked", 1)]


def apply_hint_mode(draw: Draw, symbols: dict[str, tuple[int, ...]]) -> str:
    """Rewrite the first calls' sizes to an unrepresentative pattern; returns the mode.

    Calls 0 and 1 both get the pattern: with ``dynamic=None`` the first call
    compiles static and the second one makes the dynamic graph, whose hints
    are the ones that matter.
    """
    mode = weighted(draw, HINT_MODES)
    n_calls = len(next(iter(symbols.values())))
    if mode == "none" or n_calls < 3:
        return "none"
    names = sorted(symbols)
    values = {name: list(symbols[name]) for name in names}
    if mode == "duck":
        # Every symbol equal in the early calls, different values per call.
        first = draw(st.sampled_from([2, 3, 4, 5, 8]))
        for name in names:
            values[name][0], values[name][1] = first, first + 1
    elif mode == "zero-one":
        name = draw(st.sampled_from(names))
        values[name][0] = values[name][1] = draw(st.sampled_from([1, 0]))
    elif mode == "large-first":
        name = draw(st.sampled_from(names))
        values[name][0], values[name][1] = 33, 40
    for name in names:
        symbols[name] = tuple(values[name])
    return mode


def draw_config(draw: Draw, translation_validation_rate: float = 0.0, scalar_inputs: bool = True) -> dict:
    """Dynamo and ShapeEnv flags for this schedule; defaults are left out.

    ``translation_validation_rate`` is the share of schedules compiled with
    ``torch.fx.experimental._config.translation_validation``: z3 then checks
    that the guards Dynamo emits imply what the traced graph assumes (a
    failure raises ValidationException, a crash finding). It makes compiles
    30-100x slower, so it is sampled. ``scalar_inputs``: whether the program
    takes Python numbers (else ``SCALAR_FLAGS`` are not drawn).
    """
    config: dict[str, dict] = {}
    if translation_validation_rate > 0:
        per_mille = int(round(translation_validation_rate * 1000))
        if draw(st.integers(0, 999)) >= 1000 - per_mille:  # shrinks toward "off"
            config.setdefault("fx", {})["translation_validation"] = True
    for group, flags in (("dynamo", DYNAMO_FLAGS), ("fx", FX_FLAGS)):
        for flag, choices in flags.items():
            if flag in SCALAR_FLAGS and not scalar_inputs:
                continue
            rarity = FLAG_RARITY.get(flag, DEFAULT_RARITY)
            if draw(st.integers(0, rarity - 1)) == rarity - 1:  # shrinks toward the default
                config.setdefault(group, {})[flag] = choices[1]
    return config


def draw_module_config(draw: Draw, config: dict) -> None:
    """Add a module program's flags (``MODULE_DYNAMO_FLAGS``) to ``config``; defaults are left out."""
    for flag, choices in MODULE_DYNAMO_FLAGS.items():
        rarity = FLAG_RARITY.get(flag, DEFAULT_RARITY)
        if draw(st.integers(0, rarity - 1)) == rarity - 1:  # shrinks toward the default
            config.setdefault("dynamo", {})[flag] = choices[1]


def draw_marks(draw: Draw, inputs, values: dict[str, tuple[int, ...]]) -> list[dict]:
    """One marks dict per input ({dim: {"mark": ..., "min":, "max":}}), the
    same for every call, as a user marks tensors before each call.

    Only dims tied to a size symbol are marked, and only when every call's
    size is at least 2: torch specializes 0 and 1 whatever the mark, which is
    documented behaviour, not a finding.
    """
    out: list[dict] = []
    if draw(st.integers(0, 2)) != 2:  # most schedules mark nothing (and shrink to none)
        return [{} for _ in inputs]
    for inp in inputs:
        marks = {}
        for dim, sym in enumerate(inp.dims):
            if isinstance(sym, int) or min(values[sym]) < 2:
                continue
            kind = weighted(draw, MARK_WEIGHTS)
            if kind == "auto":
                continue
            mark = {"mark": kind}
            if kind == "dynamic" and draw(st.integers(0, 2)) == 2:
                # A range that holds every call of the schedule.
                mark["min"] = max(2, min(values[sym]))
                mark["max"] = max(values[sym]) + draw(st.sampled_from([0, 8, 64]))
            marks[dim] = mark
        out.append(marks)
    return out


# Tokens that, in a statement that reads sizes, mean the program compares them.
SIZE_COMPARISONS = ("==", "!=", "<", ">", "min(", "max(", " if ", "assert", "_check", "cond(")


def demands_specialization(program) -> bool:
    """Whether the program's own Python compares or branches on sizes.

    Such a program may legitimately make torch specialize a size (an
    ``if x.size(0) == 8``, a ``min(n, 3)``), so a ``mark_dynamic`` refused by
    torch, or export refusing a call, is then no evidence of
    over-specialization. Conservative: a node kind this function does not
    know, or a size read next to a comparison in any statement, counts.
    Shared by the recompiles oracle and the export lane.
    """
    size_names: set[str] = set()  # ints computed from sizes by earlier SizeNodes
    for node in program.body:
        if isinstance(node, BranchNode):
            return True
        if isinstance(node, GraphBreakNode):
            continue
        if isinstance(node, SizeNode):
            if any(token in node.expr for token in SIZE_COMPARISONS):
                return True
            size_names.add(node.out)
            continue
        if not isinstance(node, (OpNode, EffectNode)):
            return True
        text = " ".join(render_node(node))
        words = set(re.findall(r"[A-Za-z_]\w*", text))
        reads_size = ".size(" in text or ".shape" in text or "numel(" in text or bool(words & size_names)
        if reads_size and any(token in text for token in SIZE_COMPARISONS):
            return True
    return False
