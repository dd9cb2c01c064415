"""The canary: a fixed, tiny case every campaign runs before any generated one.

If a worker cannot run this case (eager and compiled, with one dynamic
recompile) on the chosen lane, no generated case will tell us anything
about torch: the environment or symfuzz is broken, and the campaign stops
with the cause instead of reporting "0 findings" after testing nothing.

It is built from the same IR and Case types as generated cases and goes
through the same ``run_case``, so it exercises exactly their path. It uses
only mul, add and sum: no op that a planted test bug touches.
"""

from __future__ import annotations

from typing import Optional

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.health import exception_line
from symfuzz.messages import CaseResult


def canary_case() -> Case:
    """``(x * x + 2x).sum(1)``, called at 3x4 then 5x4: with ``dynamic=None``
    the first call compiles a static graph and the second a dynamic one."""
    program = Program(
        inputs=(Input("x0", "float32", ("s0", 4)),),
        body=(
            OpNode("v0", "mul", ("x0", "x0")),
            OpNode("v1", "add", ("v0", "x0"), {"alpha": 2}),
            OpNode("v2", "sum_dim", ("v1",), {"dim": 1, "keepdim": False}),
        ),
        outputs=("v2",),
    )
    calls = tuple(Call((ArgSpec((rows, 4), "float32", seed=rows),), {"s0": rows}) for rows in (3, 5))
    return Case(program, Schedule(dynamic=None, calls=calls), origin={"canary": True})


def canary_failure(result) -> Optional[str]:
    """What went wrong with the canary, from the worker's answer; None if it passed.

    ``result`` is a ``CaseResult`` (``symfuzz.messages``), or the ``run_case`` dict it is made from.
    """
    if isinstance(result, dict):
        result = CaseResult.from_json(result)
    if result.internal_error is not None:
        return f"internal error in the worker: {exception_line(result.internal_error)}"
    if not result.valid:
        return "the canary program is invalid in eager mode: " + _first_call_error(result, "eager")
    if not result.compiled:
        return "torch.compile failed on the canary program: " + _first_call_error(result, "compiled")
    if result.verdicts:
        verdict = result.verdicts[0]
        return f"the compiled canary program disagrees with eager: {verdict.get('symptom')} ({verdict.get('signature')})"
    if result.checked < len(canary_case().schedule.calls):
        return f"only {result.checked} of the canary's calls could be checked against eager"
    return None


def _first_call_error(result: CaseResult, side: str) -> str:
    return result.first_errors.get(side) or "(no error message recorded)"
