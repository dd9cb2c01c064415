"""Run one Case through one Lane, in this process: the Run that oracles judge.

Besides making the case's calls, ``execute`` watches the guards: it records
each compile's ShapeEnv (``oracles.lanes.guards``), asks the cached graphs'
guard managers before each call whether they would accept it, and, when
asked to, plans further calls from the guards with z3 and makes them on
the same compiled function. The planned calls become part of the case.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import torch

from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import Call
from symfuzz.fuzz.ir import PRELUDE
from symfuzz.fuzz.schedule import demands_specialization
from symfuzz.oracles.lanes.guards import build_model, over_guards, plan_calls, recording_backend
from symfuzz.oracles.lanes.lane import Lane, config_patch
from symfuzz.oracles.lanes.runners import build_runner


@dataclass
class CallResult:
    eager: dict
    compiled: dict
    reference: Callable[[], Any]  # fp64 reference tree, computed on demand
    # Guard bookkeeping (None when not observed): would a cached graph accept
    # this call (Dynamo's own guard managers, asked before the call); does our
    # model of the guards say it must be reused; why this call was planned.
    predicted_reuse: Optional[bool] = None
    expect_reuse: Optional[bool] = None
    purpose: str = "drawn"
    fresh: Optional[dict] = None  # {"failure": ...} of a fresh compile, for a failing reused call

    @property
    def graphs(self) -> int:
        return self.compiled.get("graphs", 0)


@dataclass
class Run:
    lane: str
    calls: list[CallResult]
    output_ops: list[str]
    seconds: dict = field(default_factory=dict)  # compile / run / eager
    context: dict = field(default_factory=dict)  # see script_runtime.rejection
    case: Any = None  # the case as run: planned calls appended
    guards: dict = field(default_factory=dict)  # regions, over-guards, ... (stats)
    dynamic: Optional[bool] = None

    @property
    def recompiles(self) -> int:
        """Graphs compiled after the first call (guards failed, or new frames)."""
        return sum(max(c.graphs, 0) for c in self.calls[1:])


def load_function(source: str) -> Callable:
    namespace: dict = {}
    exec(compile(PRELUDE + source, "<symfuzz program>", "exec"), namespace)
    return namespace["fn"]


def judge_context(case) -> dict:
    """What the judges must know about the schedule (script_runtime.rejection)."""
    marked = any(arg.marks for call in case.schedule.calls for arg in call.args)
    return {
        "constrained": bool(marked or case.schedule.config),
        # Specialization is demanded by the program's own size comparisons, and
        # also by marks that leave a tied dim (same program symbol) unmarked:
        # it is then static, and the marked dim must equal it.
        "demands_specialization": demands_specialization(case.program) or not _marks_cover_tied_dims(case),
        "translation_validation": bool(case.schedule.config.get("fx", {}).get("translation_validation")),
    }


def _marks_cover_tied_dims(case) -> bool:
    """Is every dim tied to a dim marked dynamic also marked dynamic?"""
    by_symbol: dict = {}
    for a, inp in enumerate(case.program.inputs):
        for d, sym in enumerate(inp.dims):
            if not isinstance(sym, int):
                by_symbol.setdefault(sym, []).append((a, d))
    for call in case.schedule.calls:
        for members in by_symbol.values():
            kinds = {call.args[a].marks.get(d, {}).get("mark", "auto") for a, d in members if a < len(call.args)}
            if "dynamic" in kinds and kinds != {"dynamic"}:
                return False
    return True


def execute(case, lane: Lane, plan: bool = False, on_plan: Optional[Callable] = None) -> Run:
    """Compile ``case``'s program on ``lane`` and make every call of its schedule.

    With ``plan``, guard-directed calls (``oracles.lanes.guards.plan_calls``) are
    appended after the schedule's own calls; ``on_plan(extended_case)`` is
    told before they run, so a crash during them loses nothing.
    """
    fn = load_function(case.source)
    torch._dynamo.reset()
    seconds = {"compile": 0.0, "run": 0.0, "eager": 0.0}
    context = judge_context(case)
    recorder = None
    observed: dict[int, Optional[bool]] = {}

    def account(index, eager, compiled):
        seconds["eager"] += eager["seconds"]
        seconds["compile" if compiled.get("graphs", 0) > 0 or index == 0 else "run"] += compiled["seconds"]

    def before_call(index, args):
        if recorder is not None:
            recorder.call_index = index
            observed[index] = _would_reuse(fn, case.program, args)

    restore = script_runtime.set_compile_config(case.schedule.config)
    guard_info: dict = {}
    planned = []
    try:
        with config_patch(lane):
            if lane.runner:
                compiled_fn = make_compiled(fn, case, lane)
            else:
                recorder = recording_backend(lane, case.schedule.dynamic)
                compiled_fn = torch.compile(fn, backend=recorder, dynamic=case.schedule.dynamic)
            calls = [c.to_json() for c in case.schedule.calls]
            records = script_runtime.run_schedule(fn, compiled_fn, calls, lane.device, on_call=account, before_call=before_call)
            model = _latest_model(recorder, case, len(calls)) if recorder is not None else None
            if model is not None:
                guard_info = _describe_model(model)
                guard_info["model_call"] = model.call_index
            if plan and model is not None:
                planned = _plan(model, case)
                if planned:
                    case = replace(case, schedule=replace(case.schedule, calls=case.schedule.calls + tuple(c for c, _ in planned)))
                    if on_plan is not None:
                        on_plan(case)
                    more = [c.to_json() for c, _ in planned]
                    records += script_runtime.run_schedule(fn, compiled_fn, more, lane.device, on_call=account,
                                                       before_call=before_call, start=len(calls))
            if model is not None:
                _cover(guard_info, model, case, records)
    finally:
        restore()
        torch._dynamo.reset()

    calls = [c.to_json() for c in case.schedule.calls]
    n_drawn = len(calls) - len(planned)
    results = []
    for index, (call, (eager, compiled)) in enumerate(zip(calls, records)):
        result = CallResult(eager, compiled, _memo(lambda call=call: script_runtime.reference_output(fn, call, lane.device)))
        result.predicted_reuse = observed.get(index)
        if index >= n_drawn:
            purpose_call = planned[index - n_drawn][1]
            result.purpose, result.expect_reuse = purpose_call.purpose, purpose_call.expect_reuse
        results.append(result)
    if recorder is not None:
        guard_info["compiles"] = len(recorder.compiles)
        guard_info["over_guards"] = over_guards(recorder.compiles)
        guard_info["unexplained_recompiles"] = sum(
            1 for i, r in enumerate(results) if i > 0 and r.predicted_reuse and r.graphs > 0
        )
    run = Run(lane.name, results, case.output_ops(), seconds, context, case, guard_info, case.schedule.dynamic)
    _recheck_reused_failures(run, fn, case, lane)
    return run


def make_compiled(fn, case, lane: Lane) -> Callable:
    """The compiled side of a run: ``torch.compile``, or the lane's own runner
    (e.g. torch.export) for lanes that compile some other way."""
    if lane.runner:
        return build_runner(lane, fn, case)
    return torch.compile(fn, **lane.compile_kwargs(case.schedule.dynamic))


# ---------------------------------------------------------------- guard bookkeeping


def _would_reuse(fn, program, args) -> Optional[bool]:
    """Ask every cached graph's guard manager whether it accepts ``args``."""
    try:
        # Private API, read at use: a torch without it loses this prediction, not the run.
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        entries = _debug_get_cache_entry_list(fn.__code__)
        f_locals = {inp.name: arg for inp, arg in zip(program.inputs, args)}
        return any(entry.guard_manager.check(f_locals) for entry in entries)
    except Exception:  # noqa: BLE001 - a private API moved: just don't predict
        return None


def _latest_model(recorder, case, n_calls):
    """The guard model of the newest symbolic compile of the program's own frame."""
    shapes = [[a.shape for a in call.args] for call in case.schedule.calls]
    own_frame = recorder.compiles[0].frame_id if recorder.compiles else None
    for record in reversed(recorder.compiles):
        if not record.symbolic or record.call_index >= n_calls or record.frame_id != own_frame:
            continue  # resume functions after a graph break are other frames
        try:
            model = build_model(record.shape_env, case.program.inputs, shapes[record.call_index])
        except Exception:  # noqa: BLE001 - guards we cannot read: no planning
            continue
        if model is not None and model.guards:
            model.call_index = record.call_index
            return model
    return None


def _describe_model(model) -> dict:
    regions, complete = model.regions()
    return {
        "guards": [item.text for item in model.guards],
        "untranslated": len(model.untranslated),
        "regions": len(regions),
        "regions_complete": complete,
        "_regions": regions,
    }


def _plan(model, case):
    previous = [[a.shape for a in call.args] for call in case.schedule.calls]
    template = case.schedule.calls[model.call_index]
    out = []
    for planned in plan_calls(model, previous):
        args = tuple(replace(spec, shape=tuple(shape), marks=_marks_for(spec.marks, shape))
                     for spec, shape in zip(template.args, planned.shapes))
        out.append((Call(args, {"planned": planned.purpose}), planned))
    return out


def _marks_for(marks: dict, shape) -> dict:
    """Keep a mark only where the new size still honours it (range, >= 2)."""
    kept = {}
    for dim, mark in marks.items():
        size = shape[int(dim)]
        if size < 2 or (mark.get("min") is not None and size < mark["min"]) or (mark.get("max") is not None and size > mark["max"]):
            continue
        kept[dim] = mark
    return kept


def _cover(info: dict, model, case, records) -> None:
    """Regions the valid calls fell in; the total includes them when the
    enumeration was capped before reaching them."""
    regions = info.pop("_regions", set())
    covered = set()
    for call, (eager, _) in zip(case.schedule.calls, records):
        shapes = [a.shape for a in call.args]
        if "error" in eager or not model.valid(shapes):
            continue
        covered.add(model.region_of(shapes))
    info["covered"] = len(covered)
    info["regions"] = len(regions | covered)


def _recheck_reused_failures(run: Run, fn, case, lane: Lane) -> None:
    """For the first failing call that reused a cached graph, compile afresh."""
    if lane.runner:
        return
    for index, call in enumerate(run.calls):
        failure = script_runtime.judge_call(call.eager, call.compiled, call.reference, run.context)
        if failure is None:
            continue
        if script_runtime.reused(call.compiled, index) and failure["symptom"] in script_runtime.REUSE_SYMPTOMS:
            with config_patch(lane):
                restore = script_runtime.set_compile_config(case.schedule.config)
                try:
                    fresh = script_runtime.fresh_recheck(
                        fn, lambda: torch.compile(fn, **lane.compile_kwargs(True)),
                        case.schedule.calls[index].to_json(), lane.device, run.context)
                finally:
                    restore()
                    torch._dynamo.reset()
            call.fresh = {"failure": fresh}
        return


def _memo(thunk):
    cache = []

    def get():
        if not cache:
            cache.append(thunk())
        return cache[0]

    return get
