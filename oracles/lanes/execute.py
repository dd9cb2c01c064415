"""Run one Case through one Lane, in this process: the Run that oracles judge.

Besides making the case's calls, ``execute`` watches the guards: it records
each compile's ShapeEnv (``oracles.lanes.guards``), asks the cached graphs'
guard managers before each call whether they would accept it, and, when
asked to, plans further calls from the guards with z3 and makes them on
the same compiled function. The planned calls become part of the case.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import torch

from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import ArgSpec, Call
from symfuzz.fuzz.ir import PRELUDE
from symfuzz.fuzz.module_runtime import ModuleSide
from symfuzz.fuzz.schedule import demands_specialization
from symfuzz.oracles.lanes.guards import (INT_LOW, MAX_SIZE, MODERATE, PlannedCall, build_model, model_shapes, over_guards,
                                          plan_calls,
                                          plan_reuse, recording_backend)
from symfuzz.oracles.lanes.lane import Lane, config_patch
from symfuzz.oracles.lanes.recompile_reasons import EXPLAINED, RecompileWatch, guard_verdicts
from symfuzz.oracles.lanes.export_runner import LaneRejectedCall
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
    gradient_ops: list = field(default_factory=list)  # Case.gradient_ops: a gradient mismatch's key
    # What the compiles produced, name-free (oracles.lanes.compile_features): family -> sorted
    # features, the union over the run's compiles; {} for lanes without the guard recorder.
    features: dict = field(default_factory=dict)

    @property
    def recompiles(self) -> int:
        """Graphs compiled after the first call (guards failed, or new frames)."""
        return sum(max(c.graphs, 0) for c in self.calls[1:])


def load_function(source: str) -> Callable:
    """The ``fn`` a program's source defines; for a module program's source, a
    ``ModuleSide`` of its ``Model`` (its own model, kept from call to call; forward
    calls), which ``script_runtime.run_call`` runs like a function."""
    namespace: dict = {"make_input": script_runtime.make_input}  # a module's __init__ makes its state with it
    exec(compile(PRELUDE + source, "<symfuzz program>", "exec"), namespace)
    return namespace["fn"] if "fn" in namespace else ModuleSide(namespace["Model"])


def load_program(case, device: str = "cpu"):
    """The eager side of ``case``'s calls: its function, or for a module program a
    ``ModuleSide`` on ``device`` whose calls are the schedule's (forward calls or
    training steps)."""
    fn = load_function(case.source)
    if isinstance(fn, ModuleSide):
        return ModuleSide(fn.model_class, None, case.schedule.step, device)
    return fn


def compile_program(fn, **kwargs) -> Callable:
    """``torch.compile(fn, **kwargs)``; for a module program's eager side, a second
    side whose own model (built alike) is compiled."""
    if isinstance(fn, ModuleSide):
        return ModuleSide(fn.model_class, lambda model: torch.compile(model, **kwargs), fn.step, fn.device)
    return torch.compile(fn, **kwargs)


def _refuse_module(*args):
    raise LaneRejectedCall("this lane does not export module programs")


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


# The most compiles whose guards get ``reuse_calls`` more calls each (the drawn calls'
# compile, then the newest): a case that recompiled many times has spent its time
# compiling already.
REUSE_MODELS = 4
REUSE_PURPOSE = "reuse-more"
# With ``reuse_calls`` N > 0, per call that compiled (a drawn or a guard-directed one, static
# compiles too; at most VALUE_REUSE_CALLS of them), min(N, VALUE_REUSE) more calls at that
# call's sizes and numbers with other tensor values (new seeds): the cached graphs take them
# without compiling, so each checks what the compiled code computes on other data at the cost
# of two small runs.
VALUE_REUSE_CALLS = 4
VALUE_REUSE = 2
VALUE_PURPOSE = "reuse-values"


def execute(case, lane: Lane, plan: bool = False, on_plan: Optional[Callable] = None, reuse_calls: int = 0) -> Run:
    """Compile ``case``'s program on ``lane`` and make every call of its schedule.

    With ``plan``, guard-directed calls (``oracles.lanes.guards.plan_calls``) are
    appended after the schedule's own calls; ``on_plan(extended_case)`` is
    told before they run, so a crash during them loses nothing.

    With ``plan`` and ``reuse_calls`` N > 0, after those, N more calls per symbolic
    compile of the program's frame (drawn or planned calls; at most
    ``REUSE_MODELS``), each at new sizes inside that compile's guards: a cached
    graph takes them without compiling, so they are cheap checks (``_plan_more_reuse``);
    and N more per call that compiled, at its sizes with new tensor values
    (``_plan_value_reuse``). They come last, so the calls before them, and their verdicts, are as without them.
    """
    fn = load_program(case, lane.device)
    torch._dynamo.reset()
    seconds = {"compile": 0.0, "run": 0.0, "eager": 0.0}
    context = judge_context(case)
    recorder = None
    observed: dict[int, Optional[bool]] = {}
    watch = RecompileWatch(fn)  # asks the guard managers before a call, explains a surprise compile after it

    def account(index, eager, compiled):
        seconds["eager"] += eager["seconds"]
        seconds["compile" if compiled.get("graphs", 0) > 0 or index == 0 else "run"] += compiled["seconds"]
        if recorder is not None:  # sets compiled["recompile"] on a compile the guard managers did not predict
            watch.after_call(index, compiled, [r.code_name for r in recorder.compiles if r.call_index == index])

    def before_call(index, args):
        if recorder is not None:
            recorder.call_index = index
            observed[index] = watch.before_call(index, args)

    restore = script_runtime.set_compile_config(case.schedule.config)
    guard_info: dict = {}
    planned = []
    try:
        with config_patch(lane):
            if lane.runner:
                compiled_fn = make_compiled(fn, case, lane)
            else:
                recorder = recording_backend(lane, case.schedule.dynamic)
                compiled_fn = compile_program(fn, backend=recorder, dynamic=case.schedule.dynamic)
            if isinstance(compiled_fn, ModuleSide):
                watch.fn = compiled_fn  # its guards are asked about the compiled model (the frame's self)
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
            if plan and reuse_calls > 0 and recorder is not None:
                more = _plan_more_reuse(recorder, case, fn, lane, model, reuse_calls)
                more += _plan_value_reuse(case, fn, lane, records, min(reuse_calls, VALUE_REUSE),
                                          len(case.schedule.calls) + len(more))
                if more:
                    planned += more
                    start = len(case.schedule.calls)
                    case = replace(case, schedule=replace(case.schedule, calls=case.schedule.calls + tuple(c for c, _ in more)))
                    if on_plan is not None:
                        on_plan(case)
                    records += script_runtime.run_schedule(fn, compiled_fn, [c.to_json() for c, _ in more], lane.device,
                                                           on_call=account, before_call=before_call, start=start)
            if model is not None:
                _cover(guard_info, model, case, records)
    finally:
        restore()
        torch._dynamo.reset()

    calls = [c.to_json() for c in case.schedule.calls]
    n_drawn = len(calls) - len(planned)
    results = []
    for index, (call, (eager, compiled)) in enumerate(zip(calls, records)):
        result = CallResult(eager, compiled, _memo(lambda call=call, index=index: script_runtime.reference_output(
            fn, call, lane.device, index)))
        result.predicted_reuse = observed.get(index)
        if index >= n_drawn:
            purpose_call = planned[index - n_drawn][1]
            result.purpose, result.expect_reuse = purpose_call.purpose, purpose_call.expect_reuse
        results.append(result)
    if recorder is not None:
        guard_info["compiles"] = len(recorder.compiles)
        guard_info["over_guards"] = over_guards(recorder.compiles)
        guard_info.update(_recompile_counts(results))
        recorder.features.add_all("recompile", sorted(guard_info["recompile_classes"]))
    run = Run(lane.name, results, case.output_ops(), seconds, context, case, guard_info, case.schedule.dynamic,
              case.gradient_ops(), recorder.features.features() if recorder is not None else {})
    _recheck_reused_failures(run, fn, case, lane)
    return run


def make_compiled(fn, case, lane: Lane) -> Callable:
    """The compiled side of a run: ``torch.compile``, or the lane's own runner
    (e.g. torch.export) for lanes that compile some other way."""
    if lane.runner and isinstance(fn, ModuleSide):  # every call refused: nothing to compare, no finding
        return ModuleSide(fn.model_class, lambda model: _refuse_module, fn.step, fn.device)
    if lane.runner:
        return build_runner(lane, fn, case)
    return compile_program(fn, **lane.compile_kwargs(case.schedule.dynamic))


# ---------------------------------------------------------------- guard bookkeeping


def _would_reuse(fn, program, args) -> Optional[bool]:
    """Ask every cached graph's guard manager whether it accepts ``args``
    (bound to ``fn``'s parameters, which are ``program``'s inputs)."""
    verdicts = guard_verdicts(fn, args)
    return None if verdicts is None else any(ok for _, ok in verdicts)


def _recompile_counts(results) -> dict:
    """Calls after the first that compiled although the guard managers said a
    cached graph would take them ("unpredicted_recompiles"), by class
    (``recompile_reasons.explain``): explained (another frame compiled: a resume
    function after a graph break, a nested function) or not ("unexplained_recompiles",
    the same number as "recompiles_unexplained")."""
    classes: dict = {}
    for index, r in enumerate(results):
        explanation = r.compiled.get("recompile")
        if index > 0 and r.predicted_reuse and (r.graphs > 0 or explanation):
            kind = explanation["class"] if explanation else "unknown"
            classes[kind] = classes.get(kind, 0) + 1
    explained = sum(n for kind, n in classes.items() if kind in EXPLAINED)
    unexplained = sum(classes.values()) - explained
    return {"unpredicted_recompiles": sum(classes.values()), "recompiles_explained": explained,
            "recompiles_unexplained": unexplained, "unexplained_recompiles": unexplained,
            "recompile_classes": classes}


def _latest_model(recorder, case, n_calls):
    """The guard model of the newest symbolic compile of the program's own frame."""
    shapes = [model_shapes(call) for call in case.schedule.calls]
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
            model.int_bounds = _int_bounds(case)
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
    previous = [model_shapes(call) for call in case.schedule.calls]
    template = case.schedule.calls[model.call_index]
    out = []
    for planned in plan_calls(model, previous):
        args = tuple(_planned_arg(spec, shape) for spec, shape in zip(template.args, planned.shapes))
        out.append((Call(args, {"planned": planned.purpose}, template.training), planned))
    return out


def _plan_more_reuse(recorder, case, fn, lane: Lane, latest, count: int) -> list:
    """``count`` more calls per symbolic compile of the program's own frame (at most
    ``REUSE_MODELS``: the one ``latest`` was read from, then the newest), each at new sizes inside that compile's guards, as (Call,
    PlannedCall) pairs. Derived from the case and its compiles alone (z3 under resource
    limits): no draws.

    A size eager rejects is dropped before it is called: these calls check what the
    compiled graph computes where it must be right, not validity (the planned
    "invalid" call does that). Each is checked against eager like any other call. Only
    the calls inside the guards of ``latest`` (the model the other planned calls came
    from, whose compiling call the excess-recompile oracle compares with) promise
    reuse; those of older graphs are judged by the other oracles (a cached graph's
    guard manager is asked before each call all the same).
    """
    own_frame = recorder.compiles[0].frame_id if recorder.compiles else None
    calls = case.schedule.calls
    records = [r for r in reversed(recorder.compiles)
               if r.symbolic and r.frame_id == own_frame and r.call_index < len(calls)]
    # The compile of the drawn calls first (its sizes are the program's own), then the newest.
    records.sort(key=lambda r: latest is None or r.call_index != latest.call_index)
    previous = [model_shapes(call) for call in calls]
    bounds = _int_bounds(case)
    out = []
    for record in records[:REUSE_MODELS]:
        template = calls[record.call_index]
        promises = latest is not None and record.call_index == latest.call_index
        if promises:
            model = latest  # read already (z3 is the cost here)
        else:
            try:
                model = build_model(record.shape_env, case.program.inputs, model_shapes(template))
            except Exception:  # noqa: BLE001 - guards we cannot read: no calls from them
                continue
            if model is None or not model.guards:
                continue
            model.call_index, model.int_bounds = record.call_index, bounds
        label = f"{REUSE_PURPOSE}: graph of call {record.call_index}"
        for planned in plan_reuse(model, previous, count, label):
            previous.append(planned.shapes)  # the next compile's calls differ from these too
            args = tuple(_planned_arg(spec, shape) for spec, shape in zip(template.args, planned.shapes))
            call = Call(args, {"planned": planned.purpose}, template.training)
            if not _eager_accepts(fn, call, lane.device, len(calls) + len(out)):
                continue
            out.append((call, replace(planned, expect_reuse=planned.expect_reuse and promises)))
    return out


def _plan_value_reuse(case, fn, lane: Lane, records, count: int, start: int) -> list:
    """``count`` more calls per call that compiled and ran on both sides (``records``: the
    calls made so far; at most ``VALUE_REUSE_CALLS`` of them), each at that call's sizes and
    numbers with new tensor values, as (Call, PlannedCall) pairs; ``start``: the index the
    first of them gets. Derived from the case alone: the new seeds follow from the old ones."""
    calls = case.schedule.calls
    compiled = [i for i, (eager, comp) in enumerate(records)
                if comp.get("graphs", 0) > 0 and "error" not in eager and "error" not in comp]
    out = []
    for index in compiled[:VALUE_REUSE_CALLS]:
        template = calls[index]
        label = f"{VALUE_PURPOSE}: sizes of call {index}"
        for k in range(1, count + 1):
            args = tuple(a if a.scalar else replace(a, seed=(a.seed * 1_000_003 + 7_919 * k) % 2**31)
                         for a in template.args)
            call = Call(args, {"planned": label}, template.training)
            if _eager_accepts(fn, call, lane.device, start + len(out)):
                out.append((call, PlannedCall(model_shapes(template), label, False, ())))
    return out


def _eager_accepts(fn, call, device: str, index: int) -> bool:
    """Does eager run ``call`` without raising? A module program's eager side is asked
    through a copy in its current state, so that its own state does not move."""
    record = call.to_json()
    side = fn
    if isinstance(fn, ModuleSide):
        side = ModuleSide(fn.model_class, None, fn.step, fn.device, fn.state())
        side.begin_call(index, record)
    return "error" not in script_runtime.run_call(side, script_runtime.make_args(record, device))


def _int_bounds(case) -> dict:
    """Per int argument, the values planned calls may give it (``GuardModel.int_bounds``):
    negative ones only if a drawn call had one, up to the drawn magnitudes (at least
    ``MODERATE``, at most ``MAX_SIZE``)."""
    bounds = {}
    for a, inp in enumerate(case.program.inputs):
        drawn = [c.args[a].value for c in case.schedule.calls if "planned" not in c.symbols]
        if inp.kind == "int" and drawn:
            high = min(MAX_SIZE, max(MODERATE, max(abs(v) for v in drawn)))
            bounds[a] = (INT_LOW if min(drawn) < 0 else 0, high)
    return bounds


def _planned_arg(spec, shape):
    """The template call's argument with a planned shape (an int argument: value); other
    Python numbers as the template has them."""
    if spec.scalar == "int":
        return ArgSpec.of_scalar("int", int(shape[0]))
    if spec.scalar:
        return spec
    return replace(spec, shape=tuple(shape), marks=_marks_for(spec.marks, shape))


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
        shapes = model_shapes(call)
        if "error" in eager or not model.valid(shapes):
            continue
        covered.add(model.region_of(shapes))
    info["covered"] = len(covered)
    info["regions"] = len(regions | covered)


def _recheck_reused_failures(run: Run, fn, case, lane: Lane) -> None:
    """For the first failing call that reused a cached graph, compile afresh (its time is the
    oracles' share, ``run.seconds["recheck"]``: this is judging, not running the case)."""
    if lane.runner:
        return
    start = time.perf_counter()
    try:
        _recheck_first_reused_failure(run, fn, case, lane)
    finally:
        run.seconds["recheck"] = time.perf_counter() - start


def _recheck_first_reused_failure(run: Run, fn, case, lane: Lane) -> None:
    for index, call in enumerate(run.calls):
        failure = script_runtime.judge_call(call.eager, call.compiled, call.reference, run.context)
        if failure is None:
            continue
        if script_runtime.reused(call.compiled, index) and failure["symptom"] in script_runtime.REUSE_SYMPTOMS:
            with config_patch(lane):
                restore = script_runtime.set_compile_config(case.schedule.config)
                try:
                    kwargs = lane.compile_kwargs(True)
                    compile_fn = ((lambda model: torch.compile(model, **kwargs)) if isinstance(fn, ModuleSide)
                                  else (lambda: torch.compile(fn, **kwargs)))
                    fresh = script_runtime.fresh_recheck(
                        fn, compile_fn, case.schedule.calls[index].to_json(), lane.device, run.context, index)
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
