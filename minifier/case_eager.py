"""What eager does with a candidate case, learned in-process and cached.

The case passes read it to learn the shapes of intermediate values, and a
CaseSubject reads it to drop a candidate before a fresh-process query when
eager no longer behaves at the failing call as it did in the finding.
"""

from __future__ import annotations

import functools
import json

from symfuzz.fuzz.case import Case
from symfuzz.fuzz.ir import PRELUDE, Program


@functools.lru_cache(maxsize=256)
def _values_at(program_json: str, call_json: str) -> dict:
    """{name: (shape, dtype) | int | None} for every value of the program at one
    call, or {} if eager raises: a tensor's shape and dtype, a size's value,
    None for anything else (tuples, lists)."""
    # Deferred: `symfuzz minify` reaches this module through the CLI, and its
    # parent process loads torch only once a pass asks for eager facts.
    import torch

    # Deferred with torch (both import it).
    from symfuzz.fuzz.script_runtime import make_args, make_input

    namespace: dict = {"make_input": make_input}  # a module's __init__ makes its state with it
    call = json.loads(call_json)
    try:
        # A candidate the IR refuses to read back (a pass wrote what no generated program holds)
        # could not be stored as a finding either: it is not plausible.
        program = Program.from_json(json.loads(program_json))
        # A module program's forward returns from one level deeper; it runs on a new model in the call's mode.
        ret = "\n        return" if program.params else "\n    return"
        source = program.render().rsplit(ret, 1)[0] + ret + " locals()\n"
        exec(compile(PRELUDE + source, "<symfuzz minify>", "exec"), namespace)
        fn = namespace["Model"]().train(call.get("training") is not False) if program.params else namespace["fn"]
        values = fn(*make_args(call))
    except Exception:  # noqa: BLE001 - an invalid candidate, not an error of ours
        return {}
    out = {}
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            out[name] = (tuple(value.shape), str(value.dtype).replace("torch.", ""))
        else:
            out[name] = value if type(value) is int else None
    return out


def values_at(case: Case, index: int) -> dict:
    return _values_at(json.dumps(case.program.to_json(), sort_keys=True),
                      json.dumps(case.schedule.calls[index].to_json(), sort_keys=True))


def eager_runs(case: Case, index: int) -> bool:
    return bool(values_at(case, index))


def plausible(subject) -> bool:
    """Cheap in-process filter before a fresh-process query: eager must behave
    at the failing call as it did in the finding (return, or raise for an
    accepts-invalid finding). Anything else cannot be the same bug."""
    calls = subject.case.schedule.calls
    index = subject.verdict.call_index
    if not calls:
        return False
    index = index if isinstance(index, int) and 0 <= index < len(calls) else 0
    try:
        subject.case.program.render()
    except Exception:  # noqa: BLE001
        return False
    runs = eager_runs(subject.case, index)
    return not runs if subject.verdict.symptom == "accepts-invalid" else runs
