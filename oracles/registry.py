"""The oracle registry: every oracle, by name, in the order a run is judged.

Contract for every oracle: a function (case, run) -> Verdict. It reads the case
and the run, never mutates them, runs nothing through the compiler itself, and
returns one Verdict (the first failure it sees, or a pass).

The oracles are declared here, in one table, rather than registering
themselves on import: each oracle module then imports only what lies below
it, and this module is the one place that lists them all.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from symfuzz.oracles import crash, differential, recompiles, reuse, symbolic_meta
from symfuzz.oracles.verdict import Verdict

Oracle = Callable[..., Verdict]

# Order matters: verdicts are reported, and ties between failures at one call
# broken, in this order.
ORACLES: dict[str, Oracle] = {
    "crash": crash.crash_oracle,
    "differential": differential.differential_oracle,
    "recompiles": recompiles.recompiles_oracle,
    "reuse-soundness": reuse.reuse_oracle,
    symbolic_meta.NAME: symbolic_meta.symbolic_metadata_oracle,
}

# One more oracle name is not a function over a run: verdict.ISOLATION, under
# which the campaign reports a case whose worker died or hung.


def judge(case, run, names=None, seconds: Optional[dict] = None) -> list[Verdict]:
    """Every (or the named) oracle's verdict on one run; ``seconds`` (a dict) adds up each
    oracle's time under its name (the fp64 references and rounding explanations an oracle
    asks for are its time)."""
    chosen = names or list(ORACLES)
    verdicts = []
    for name in chosen:
        start = time.perf_counter()
        verdicts.append(ORACLES[name](case, run))
        if seconds is not None:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
    return verdicts
