"""The oracle registry: name -> function(case, run) -> Verdict.

Contract for every oracle: it reads the case and the run, never mutates
them, runs nothing through the compiler itself, and returns one Verdict
(the first failure it sees, or a pass).
"""

from __future__ import annotations

from typing import Callable

from symfuzz.oracles.verdict import Verdict

Oracle = Callable[..., Verdict]
ORACLES: dict[str, Oracle] = {}


def oracle(name: str):
    def register(fn: Oracle) -> Oracle:
        if name in ORACLES:
            raise ValueError(f"oracle {name!r} is registered twice")
        ORACLES[name] = fn
        fn.oracle_name = name
        return fn

    return register


def judge(case, run, names=None) -> list[Verdict]:
    """Every (or the named) oracle's verdict on one run."""
    from symfuzz.oracles import crash, differential, recompiles, reuse, symbolic_meta  # noqa: F401 - registers the built-in oracles

    chosen = names or list(ORACLES)
    return [ORACLES[name](case, run) for name in chosen]
