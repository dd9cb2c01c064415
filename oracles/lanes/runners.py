"""Runners: the compiled side of lanes that do not go through torch.compile.

A lane with ``runner="export"`` or ``runner="aoti"`` is run by
``oracles.lanes.execute.make_compiled`` through ``build_runner``, which returns a
callable that ``script_runtime.run_schedule`` calls once per call with that
call's inputs. The torch-only logic lives in ``oracles/lanes/export_runner.py``
(inlined into repro scripts); this module only turns a Case into what that
logic needs: ``runner_spec``.
"""

from __future__ import annotations

from typing import Callable

from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.schedule import demands_specialization
from symfuzz.oracles.lanes.export_runner import ExportedRunner


def runner_spec(case) -> dict:
    """JSON for ``ExportedRunner``: each input dim's size symbol (None when fixed) and
    whether the program compares sizes. Repro scripts hold it as a literal."""
    dims = [[d if isinstance(d, str) else None for d in inp.dims] for inp in case.program.inputs]
    return {"dims": dims, "size_comparisons": demands_specialization(case.program)}


def build_export_runner(lane, fn, case) -> Callable:
    """torch.export.export at the first call, then ExportedProgram.module() on every call."""
    return ExportedRunner(fn, runner_spec(case), [c.to_json() for c in case.schedule.calls], script_runtime.make_args,
                          lane.device, artifact="module")


def build_aoti_runner(lane, fn, case) -> Callable:
    """torch.export.export at the first call, AOTInductor-compiled and loaded, then run on every call."""
    return ExportedRunner(fn, runner_spec(case), [c.to_json() for c in case.schedule.calls], script_runtime.make_args,
                          lane.device, artifact="aoti")


RUNNERS: dict[str, Callable] = {"export": build_export_runner, "aoti": build_aoti_runner}

# How a repro script builds the same runner (the names exist in the inlined
# export_runner source); the artifact each runner name uses.
ARTIFACTS = {"export": "module", "aoti": "aoti"}


def build_runner(lane, fn, case) -> Callable:
    """The callable that stands for ``torch.compile(fn)`` on ``lane``."""
    try:
        builder = RUNNERS[lane.runner]
    except KeyError:
        raise ValueError(
            f"lane {lane.name!r} names runner {lane.runner!r}, which symfuzz does not know; "
            f"known runners: {', '.join(sorted(RUNNERS))} (oracles/lanes/runners.py)") from None
    return builder(lane, fn, case)
