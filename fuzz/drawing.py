"""Seeded, replayable drawing: (seed, index) -> Case, choices -> Case, and the drawing of both.

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
    case, data = draw_with(Random(f"symfuzz:{seed}:{index}"), config)
    origin = {**case.origin, "seed": seed, "index": index, "choices": list(data.choices)}
    return type(case)(case.program, case.schedule, origin)


def draw_with(random: Random, config, prefix=None, provider=None, provider_kw=None):
    """Draw a case whose first choices are ``prefix`` and the rest come from ``provider``
    (a provider class, this module's ``PROVIDER`` by default, given ``provider_kw``),
    which draws from ``random``.

    Returns the case and its frozen ``ConjectureData``: ``data.choices`` is the case's full
    choice sequence (``case_from_choices`` replays it). Where a prefix value does not fit the
    draw it lands on, Hypothesis draws the simplest value there (``data.misaligned_at``).
    Past the prefix the provider draws, so the draw never runs out of choices; a StopTest
    still means it overran Hypothesis's size limit.
    """
    # Deferred: the generator imports torch, and this module must stay importable
    # in a worker before its lane has set torch's environment.
    from symfuzz.fuzz.generate import draw_case

    provider = provider or PROVIDER
    kwargs = {"provider": provider} if provider is not None else {}
    if provider_kw:
        kwargs["provider_kw"] = provider_kw
    data = ConjectureData(random=random, prefix=prefix, **kwargs)
    case = draw_case(data.draw, config)
    data.freeze()
    return case, data


def case_from_choices(choices, config):
    """Replay a case from its recorded Hypothesis choice sequence."""
    from symfuzz.fuzz.generate import draw_case  # deferred: imports torch (see draw_with above)

    return draw_case(ConjectureData.for_choices(choices).draw, config)
