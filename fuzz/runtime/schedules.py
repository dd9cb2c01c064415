"""Schedules: a case's calls run in order through eager and compiled, a failing reused call
rechecked on a fresh compile, and each call judged as the campaign judges it.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import torch

from symfuzz.fuzz.runtime.comparing import judge_call
from symfuzz.fuzz.runtime.inputs import make_args, make_compiled_args
from symfuzz.fuzz.runtime.rounding import reference_call
from symfuzz.fuzz.runtime.running import run_call
from symfuzz.fuzz.runtime.signatures import failure_key, normalize_message


def frame_count():
    """Frames Dynamo has tried to compile in this process (-1 if unknown)."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def cache_entries(fn):
    """How many compiled entries Dynamo holds for ``fn``'s own frame (-1 if unknown).

    Graphs compiled for resume functions after a graph break are other
    frames; only this count says whether ``fn`` itself recompiled.
    """
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return len(_debug_get_cache_entry_list(fn.__code__))
    except Exception:  # noqa: BLE001 - a private API moved in some torch version
        return -1


def graph_count():
    """Graphs Dynamo has compiled in this process so far (-1 if unknown)."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def run_schedule(fn, compiled, calls, device="cpu", on_call=None, before_call=None, start=0):
    """Call eager ``fn`` and ``compiled`` once per call, in order, on fresh inputs.

    Returns [(eager_record, compiled_record)]; a compiled record also says how
    many graphs were compiled during that call (0 means a cached graph was
    reused). ``before_call(index, compiled_args)`` is told before each
    compiled call, ``on_call(index, eager, compiled)`` after it; ``start``
    numbers the calls when a schedule is continued.
    """
    records = []
    for index, call in enumerate(calls, start):
        for side in (fn, compiled):
            if hasattr(side, "begin_call"):  # a module program's side: the call's mode, the state it starts from
                side.begin_call(index, call)
        eager = run_call(fn, make_args(call, device))
        args = make_compiled_args(call, device)
        if before_call is not None:
            before_call(index, args)
        before, frames_before, entries_before = graph_count(), frame_count(), cache_entries(fn)
        result = run_call(compiled, args)
        result["new_entries"] = cache_entries(fn) - entries_before if entries_before >= 0 else -1
        result["graphs"] = graph_count() - before if before >= 0 else -1
        # A compile that failed adds a frame but no graph: not a reuse.
        result["frames"] = frame_count() - frames_before if frames_before >= 0 else -1
        if index > 0 and result["graphs"] > 0:
            result["recompile_reason"] = recompile_reason(fn)
        records.append((eager, result))
        if ("error" in eager or "error" in result) and hasattr(compiled, "sync_from"):
            # A module program's call that raised left the two models' states apart (one side
            # stopped midway): compiled goes on from eager's, so later calls compare like with like.
            compiled.sync_from(fn)
        if on_call is not None:
            on_call(index, eager, result)
    return records


def recompile_reason(fn):
    """The newest guard failure Dynamo recorded for ``fn`` (normalized), or ""."""
    try:
        # private torch API, looked up at use: a torch that moved it fails this one step, not the script
        from torch._dynamo.utils import guard_failures

        reasons = guard_failures.get(fn.__code__) or []
        return normalize_message(reasons[-1]) if reasons else ""
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return ""


def fresh_recheck(fn, compile_fn, call, device="cpu", context=None, index=None):
    """Re-run one call on a freshly compiled function; its failure or None.

    When a call that reused a cached graph fails but a fresh compile at the
    same shapes is right, the cached graph was wrong for these shapes and
    its guards let it through: an unsound guard, not a miscompile. For a
    module program's side, both runs start from the state eager had before
    call ``index``, and ``compile_fn(model)`` compiles a new model.
    """
    torch._dynamo.reset()
    if index is not None and hasattr(fn, "replay"):
        eager_fn, compiled_fn = fn.replay(index), fn.replay(index, compile_fn)
    else:
        eager_fn, compiled_fn = fn, compile_fn()
    eager = run_call(eager_fn, make_args(call, device))
    result = run_call(compiled_fn, make_compiled_args(call, device))
    if "error" in result:
        # The fresh compile must actually return to vouch for the shapes;
        # a refusal (e.g. of a mark) is not "right".
        return {"symptom": "crash", "stage": result["error"]["stage"], "error": result["error"]}
    return judge_call(eager, result, lambda: reference_output(fn, call, device, index), context)


REUSE_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "crash")


def reused(result, index):
    """Did this call run a cached graph (no compile, not even a failed one)?"""
    return index > 0 and result.get("graphs", -1) == 0 and result.get("frames", -1) == 0


def judge_schedule_call(fn, compile_fn, calls, index, eager, result, device="cpu", context=None, expect_reuse=(),
                        output_ops=(), gradient_ops=()):
    """The repro scripts' judge of one call, in the oracles' order.

    Mirrors the campaign: a failing call that reused a cached graph is
    re-run on a fresh compile (unsound guard when that passes); a call a
    guard manager accepted just before it must not recompile the program's
    frame (``result["recompile"]``, set by the repro's watch); a call the
    guards say must reuse the graph must not recompile under dynamic=True.
    Returns (failure, key) or (None, None).
    """
    call = calls[index]
    failure = judge_call(eager, result, lambda: reference_output(fn, call, device, index), context)
    if failure is not None:
        key = None
        if reused(result, index) and failure["symptom"] in REUSE_SYMPTOMS:
            if fresh_recheck(fn, compile_fn, call, device, context, index) is None:
                key = "reuse|" + failure_key(failure, output_ops, gradient_ops)
                failure = {**failure, "symptom": "unsound-guard", "stage": "guard",
                           "detail": "a reused graph was wrong; a fresh compile at these shapes is right. " + str(failure.get("detail", ""))}
        return failure, key
    recompile = result.get("recompile") or {}
    if recompile.get("unsound"):  # set by a watch that asked the guard managers before the call
        return {"symptom": "unsound-recompile", "stage": "guard", "detail": recompile["detail"]}, recompile["key"]
    if index in expect_reuse and result.get("new_entries", 0) > 0:
        reason = result.get("recompile_reason", "")
        return {"symptom": "excess-recompiles", "stage": "guard",
                "detail": "recompiled although every guard of the cached graph holds: " + reason}, reason
    return None, None


def reference_output(fn, call, device="cpu", index=None):
    """The fp64 reference for one call: floating inputs upcast, run eagerly. A module
    program's side runs from its state before call ``index`` (None without one)."""
    if hasattr(fn, "replay"):
        if index is None:
            return None  # which state the call started from is not known: no reference
        fn = fn.replay(index)
    return reference_call(fn, make_args(call, device)).get("out")
