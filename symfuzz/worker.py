"""A warm worker process: generates, runs and judges cases on one lane.

It takes one argument, the campaign's settings record (``symfuzz.settings.RunSettings``,
as JSON), then speaks the protocol of ``symfuzz.messages``: one request a line on stdin
(a case to run, the canary, a warm-up), one event a line on its protocol stream (the
original stdout; anything torch prints goes to stderr instead). Because ``Started``
carries the whole case, a segfault, hang or OOM while the case runs loses nothing: the
campaign records the case as a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from dataclasses import replace

from symfuzz.canary import canary_case
from symfuzz.corpus.deaths import enable as enable_stack_dumps
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.model_case import ARCHS, is_model_case
from symfuzz.fuzz.drawing import generate
from symfuzz.fuzz.mutate import generate_mutant
from symfuzz.fuzz.steer import generate_steered
from symfuzz.messages import (
    CanaryDone,
    CaseResult,
    Judged,
    Planned,
    Ready,
    Result,
    RunCanary,
    Started,
    Warm,
    Warmup,
    decode_request,
    encode_event,
)
from symfuzz.oracles.lanes.lane import get_lane, prepare_process
from symfuzz.oracles.verdict import error_headline
from symfuzz.settings import RunSettings, source_of


def run_case(case, lane, oracle_names=None, on_judged=None, on_plan=None, plan=True, reuse_calls=0) -> dict:
    """Execute, judge and (on failure) triage one case; returns the result message body.

    With ``plan``, guard-directed calls are added after the drawn ones
    (``oracles.lanes.guards``), and ``reuse_calls`` more per symbolic compile inside
    its guards (``oracles.lanes.execute``); ``on_plan(case)`` hears the extended case
    before they run, and the result carries it as ``case``.
    """
    # deferred: these import torch, which waits until prepare_process has set the lane's environment
    from symfuzz.fuzz import script_runtime
    from symfuzz.oracles.lanes.execute import REUSE_PURPOSE, execute
    from symfuzz.oracles.crash import dead_code_calls
    from symfuzz.oracles.registry import judge
    from symfuzz.oracles.triage import triage

    t0 = time.perf_counter()
    run = execute(case, lane, plan=plan, on_plan=on_plan, reuse_calls=reuse_calls)
    case = run.case or case
    t1 = time.perf_counter()
    oracle_seconds: dict = {}
    verdicts = judge(case, run, oracle_names, seconds=oracle_seconds)
    # The earliest failing call decides, crash before mismatch: the order a
    # repro script judges in, so a repro prints the same signature. A discrete flip that
    # rounding explains (evidence.rounding) comes after every real failure: it is no bug.
    failures = sorted((v for v in verdicts if not v.ok),
                      key=lambda v: (getattr(v.evidence, "rounding", None) is not None,
                                     v.call_index if v.call_index is not None else -1))
    triaged = {}
    if failures and getattr(failures[0].evidence, "rounding", None) is not None:
        pass  # explained by rounding: nothing to triage (the campaign keeps it in suspect/)
    elif failures:
        if on_judged is not None:
            on_judged([v.to_json() for v in failures])  # kept even if triage kills the process
        t_triage = time.perf_counter()
        triaged = triage(case, lane, failures[0])
        oracle_seconds["triage"] = time.perf_counter() - t_triage  # cheaper lanes, each a compile
        if failures[0].call_index:
            dead = dead_code_calls(case, run, failures[0].call_index)
            if dead:  # the scripts pass over them as the oracle did (oracles/crash.py)
                triaged["dead_code_calls"] = dead
        failures[0] = replace(failures[0], stage=triaged["stage"])
    t2 = time.perf_counter()
    calls = run.calls
    return {
        # Validity is the generator's business: planned calls may be invalid on purpose.
        "valid": all("error" not in c.eager for c in calls if c.purpose == "drawn"),
        "compiled": not any("error" in c.compiled and "error" not in c.eager for c in calls),
        "calls": len(calls),
        "checked": sum(1 for c in calls if "error" not in c.eager and "error" not in c.compiled),
        "recompiles": run.recompiles,
        "graphs": [c.graphs for c in calls],
        "seconds": {
            "compile": run.seconds["compile"],
            "run": run.seconds["run"] + run.seconds["eager"],
            "oracle": t2 - t1 + run.seconds.get("recheck", 0.0),
            "execute_other": (t1 - t0) - sum(run.seconds.values()),
            # what the oracles' time went to: each oracle's own, triage's, and in execute the
            # fresh compiles that recheck a reused graph's failure (oracles/lanes/execute.py)
            **{f"oracle:{name}": s for name, s in oracle_seconds.items()},
            **({"oracle:fresh-recompile": run.seconds["recheck"]} if "recheck" in run.seconds else {}),
        },
        "verdicts": [v.to_json() for v in failures],
        "triage": triaged,
        "case": case.to_json(),
        "guards": {k: v for k, v in run.guards.items() if k != "guards"},
        "planned": [c.purpose.split(":")[0] for c in calls if c.purpose != "drawn"],
        "planned_reused": sum(1 for c in calls if c.expect_reuse and c.graphs == 0),
        # The extra calls inside a compile's guards (execute.REUSE_PURPOSE) that ran a cached graph.
        "reuse_more_reused": sum(1 for c in calls if c.purpose.startswith(REUSE_PURPOSE) and c.graphs == 0),
        "rejected": sum(1 for c in calls if "error" in c.compiled and "error" not in c.eager
                        and script_runtime.rejection(c.compiled["error"], run.context) == "rejected"),
        "first_errors": _first_errors(calls),
        "features": case_features(case, calls),
        "guard_shapes": guard_shapes(run.guards.get("guards") or []),
        "reached": getattr(run, "features", None) or {},  # what the compiler did with it (symfuzz.coverage)
    }


def case_features(case, calls) -> dict:
    """What the case exercised beyond tensor inputs and forward values, for stats.json:
    calls whose gradients were compared (both sides returned, some input requires grad),
    Python-number or int-list inputs, an nn.Module program (parameters or buffers), and
    the real-model motifs it was built from."""
    grads = [any(a.requires_grad for a in spec.args) for spec in case.schedule.calls]
    return {
        "gradient_calls": sum(1 for call, wanted in zip(calls, grads)
                              if wanted and "error" not in call.eager and "error" not in call.compiled),
        "scalar_inputs": any(not inp.is_tensor for inp in case.program.inputs),
        "module": bool(case.program.params),
        "motifs": [str(m) for m in case.origin.get("motifs") or []],
    }


def guard_shapes(guards: list[str], limit: int = 50) -> list[str]:
    """The guards' texts with input names and numbers erased: what makes a case's
    guards new to the corpus is their form, not the sizes it was drawn at."""
    shapes = {re.sub(r"\d+", "N", re.sub(r"L\['\w+'\]", "X", text)) for text in guards}
    return sorted(shapes)[:limit]


def _first_errors(calls) -> dict:
    """The first error of each side ("eager"; "compiled" where eager succeeded),
    as ``Type: message`` lines, for reports that need a cause (the canary)."""
    found = {}
    for c in calls:
        for side, error in (("eager", c.eager.get("error")),
                            ("compiled", c.compiled.get("error") if "error" not in c.eager else None)):
            if error and side not in found:
                found[side] = f"{error.get('type', '?')}: {error_headline(error.get('message'))}"[:500]
    return found


def run_canary(lane) -> CaseResult:
    """The canary case (``symfuzz.canary``) through ``run_case``, as generated cases
    go, without guard-directed calls: the canary is a fixed schedule, so it does
    not depend on which guards this torch installs."""
    t0 = time.perf_counter()
    try:
        result = run_case(canary_case(), lane, plan=False)
    except Exception:  # noqa: BLE001 - the campaign reports it and stops
        result = {"internal_error": traceback.format_exc()}
    result.pop("case", None)
    return CaseResult.from_json({**result, "total_seconds": time.perf_counter() - t0})


def run_generated(index, settings: RunSettings, config, lane, send, stored=None, guide=None) -> None:
    """Generate case ``index`` (or take the ``stored`` case JSON of a corpus replay, its
    guard-directed calls planned again; or draw case ``index`` as its ``guide`` says: a
    mutant of a stored case, ``{"parent": name, "choices": [...]}``, or a draw steered toward
    the ops the run used least, ``{"op_counts": {op: uses}}``), run it, and send its ``Started`` and ``Result`` events."""
    t0 = time.perf_counter()
    if (stored is not None and is_model_case(stored)) or \
            (stored is None and source_of(settings.source, settings.seed, index) == "models"):
        run_model(index, settings, lane, send, stored)
        return
    def draw():
        if stored is not None:
            return Case.from_json(stored).without_planned_calls()
        if guide is not None and "choices" in guide:
            return generate_mutant(settings.seed, index, guide["choices"], config, parent=guide.get("parent"))
        if guide is not None:
            return generate_steered(settings.seed, index, config, guide.get("op_counts") or {})
        return generate(settings.seed, index, config)

    case = _drawn(index, draw, send)
    if case is None:
        return
    generate_seconds = time.perf_counter() - t0
    send(Started(index, case.to_json()))
    try:
        result = run_case(case, lane, on_judged=lambda v: send(Judged(index, v)),
                          on_plan=lambda c: send(Planned(index, c.to_json())),
                          plan=settings.guard_planning, reuse_calls=settings.reuse_calls)
    except Exception:  # noqa: BLE001 - a symfuzz bug, not a torch bug
        send(Result(index, CaseResult(internal_error=traceback.format_exc())))
        return
    result["seconds"]["generate"] = generate_seconds
    result["ops"] = case.program.ops()
    result["total_seconds"] = time.perf_counter() - t0
    send(Result(index, CaseResult.from_json(result)))


def _drawn(index, draw, send):
    """``draw()``'s case, or None once a generator bug is sent as case ``index``'s internal error."""
    try:
        return draw()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - a generator bug (StopTest is a BaseException); keep going
        send(Result(index, CaseResult(internal_error=traceback.format_exc())))
        return None


def run_model(index, settings: RunSettings, lane, send, stored=None) -> None:
    """Draw model case ``index`` (or take the ``stored`` one), run it on the lane, and send its
    ``Started`` and ``Result`` events, as ``run_generated`` does for a program."""
    from symfuzz.fuzz.model_draw import generate_model  # deferred: imports hypothesis's internals
    from symfuzz.oracles.model_oracles import run_model_case  # deferred: imports torch (see run_case)

    t0 = time.perf_counter()
    archs = list(settings.models) or list(ARCHS)
    case = _drawn(index, lambda: dict(stored) if stored is not None else generate_model(settings.seed, index, archs),
                  send)
    if case is None:
        return
    generate_seconds = time.perf_counter() - t0
    send(Started(index, case))
    try:
        result = run_model_case(case, lane)
        if result["verdicts"]:
            send(Judged(index, result["verdicts"]))
    except Exception:  # noqa: BLE001 - a symfuzz bug, not a torch bug
        send(Result(index, CaseResult(internal_error=traceback.format_exc())))
        return
    result["seconds"]["generate"] = generate_seconds
    result["total_seconds"] = time.perf_counter() - t0
    send(Result(index, CaseResult.from_json(result)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symfuzz.worker")
    parser.add_argument("--settings", required=True, type=json.loads,
                        help="the campaign's settings record (symfuzz.settings.RunSettings), as JSON")
    args = parser.parse_args(argv)
    settings = RunSettings.from_json(args.settings)
    # A segfault prints the stack it died on, and so does a hang when the campaign asks
    # before it kills: the finding is signed by that place (corpus/deaths.py).
    enable_stack_dumps()

    # Keep the protocol stream clean: whatever torch prints goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def send(event) -> None:
        protocol.write(encode_event(event) + "\n")
        protocol.flush()

    lane = get_lane(settings.lane)
    prepare_process(lane)
    # after prepare_process: see run_case
    import torch

    # imports torch (see above)
    from symfuzz.fuzz.generate import GenConfig

    config = GenConfig(**settings.gen_config)
    send(Ready(os.getpid(), torch.__version__))

    for line in sys.stdin:
        if not line.strip():
            continue
        request = decode_request(line)
        if isinstance(request, RunCanary):
            send(CanaryDone(run_canary(lane)))
        elif isinstance(request, Warmup):  # the canary program again, its result unused (WorkerSlot.start_warmup)
            t0 = time.perf_counter()
            warm = run_canary(lane)
            send(Warm(warm.internal_error is None, time.perf_counter() - t0))
        else:
            run_generated(request.index, settings, config, lane, send, request.case, request.guide)
    return 0


if __name__ == "__main__":
    sys.exit(main())
