"""Seeded, replayable drawing: (seed, index) -> Case, and choices -> Case.

Cases are drawn through Hypothesis's ConjectureData, so each one is a pure
function of its choice sequence (recorded in ``case.origin["choices"]``).

One adaptation: Hypothesis mixes literal constants from *locally imported
modules* (``__main__``, test files, whatever is loaded) into its draws. That
would make the program for a seed depend on how symfuzz was started, so the
provider below keeps only Hypothesis's built-in global constants.
"""

from __future__ import annotations

import warnings
from random import Random

try:  # internal API: degrade to plain drawing if a Hypothesis release moves it
    from hypothesis.internal.conjecture.choice import choice_constraints_key, choice_permitted
    from hypothesis.internal.conjecture.data import ConjectureData
    from hypothesis.internal.conjecture.providers import GLOBAL_CONSTANTS, HypothesisProvider
except ImportError:  # pragma: no cover - depends on the installed Hypothesis
    from hypothesis.internal.conjecture.data import ConjectureData

    HypothesisProvider = None


if HypothesisProvider is not None:

    class GlobalConstantsProvider(HypothesisProvider):
        """Hypothesis's provider, minus constants harvested from local modules."""

        _pools: dict = {}

        def _maybe_draw_constant(self, choice_type, constraints, *, p=0.05):
            if self._random.random() > p:
                return None
            key = (choice_type, choice_constraints_key(choice_type, constraints))
            pool = self._pools.get(key)
            if pool is None:
                pool = tuple(c for c in GLOBAL_CONSTANTS.set_for_type(choice_type) if choice_permitted(c, constraints))
                self._pools[key] = pool
            return self._random.choice(pool) if pool else None

    PROVIDER = GlobalConstantsProvider
else:  # pragma: no cover
    PROVIDER = None
    warnings.warn("this Hypothesis has moved its provider API; the programs a seed gives may depend on how "
                  "symfuzz is started", RuntimeWarning)


def generate(seed: int, index: int, config):
    """The case for (seed, index): a pure function of both and the versions."""
    # Deferred: the generator imports torch, and this module must stay importable
    # in a worker before its lane has set torch's environment.
    from symfuzz.fuzz.generate import draw_case

    kwargs = {"provider": PROVIDER} if PROVIDER is not None else {}
    data = ConjectureData(random=Random(f"symfuzz:{seed}:{index}"), **kwargs)
    case = draw_case(data.draw, config)
    data.freeze()
    origin = {**case.origin, "seed": seed, "index": index, "choices": list(data.choices)}
    return type(case)(case.program, case.schedule, origin)


def case_from_choices(choices, config):
    """Replay a case from its recorded Hypothesis choice sequence."""
    from symfuzz.fuzz.generate import draw_case  # deferred: imports torch (see generate above)

    return draw_case(ConjectureData.for_choices(choices).draw, config)
