"""Why a call compiled a graph although the guard managers said a cached one would take it.

Before each call, the campaign asks every cache entry of the program's own
frame (``fn.__code__``) whether its guard manager accepts the call's
arguments (``guard_verdicts``): the prediction. A call that compiled anyway
is explained here, from what Dynamo itself recorded during the call: the
guard failures (``torch._dynamo.utils.guard_failures``, one list per code
object, the program's own frame and its resume functions alike) and the
program frame's cache entries. ``explain`` puts it in one class:

- ``resume-first-compile``: only a resume function after a graph break was
  compiled, for the first time (the graph break sent this call down a path
  no earlier call took). The program's own frame reused its graph.
- ``resume-recompile``: a resume function's guards failed; they guard the
  values live at the graph break, which the prediction never sees.
- ``nested-frame``: another function's frame was compiled, e.g.
  ``torch.cond`` compiling its branches when the program's frame runs it eagerly.
- ``new-frame``: a frame with no cache entry yet was compiled, and which
  one is unknown (a repro script has no recording backend to name it): one
  of the two classes above.
- ``admitted-then-recompiled``: the program's own frame recompiled although
  one of its guard managers accepted the very same arguments just before
  the call. At frame entry a guard rejected what its guard manager accepts,
  or something a guard reads changed between the check and the frame: a
  soundness problem of the guards (``UNSOUND``), reported by the recompiles
  oracle as ``unsound-recompile`` with Dynamo's reason for the entry that
  had accepted.

The first four are explained: the prediction only ever covers the
program's own frame. ``unknown`` (nothing recorded explains the graphs) is not.

This module imports only the standard library and torch (and the script
runtime, which every script carries): ``corpus.scripts`` inlines it into
the repro of an unsound-recompile finding, so that the repro asks the guard
managers and reads the reasons exactly as the campaign does. Keep it that way.
"""

from __future__ import annotations

import re

from symfuzz.fuzz.script_runtime import normalize_message

RESUME_PREFIX = "torch_dynamo_resume_in_"
UNSOUND = "admitted-then-recompiled"
EXPLAINED = ("resume-first-compile", "resume-recompile", "nested-frame", "new-frame")
CLASSES = EXPLAINED + (UNSOUND, "unknown")

# A guard failure starts with the compile id of the entry that failed, e.g. "0/3: ".
_COMPILE_ID = re.compile(r"^\[?(\d+/\d+)\]?:\s*")
# Dynamo's plea after a reason ("Please open an issue ..."): the same for every guard.
_PLEA = re.compile(r"\s*Please open an issue.*$", re.DOTALL)


def own_cache_entries(fn):
    """The cache entries of ``fn``'s own frame, newest first ([] if torch hides them)."""
    try:
        # private torch API, looked up at use: a torch that moved it loses the prediction, not the run
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return list(_debug_get_cache_entry_list(fn.__code__))
    except Exception:  # noqa: BLE001 - a private API moved in some torch version
        return []


def guard_verdicts(fn, args):
    """[(compile id, accepts)] for each cache entry of ``fn``'s own frame, asked
    with ``args`` bound to ``fn``'s parameters; None when the guard managers
    cannot be asked (a torch without them, or a check that raised)."""
    code = fn.__code__
    f_locals = dict(zip(code.co_varnames[:code.co_argcount], args))
    if hasattr(fn, "frame_locals"):  # a module program's side: the frame is its model's forward(self, ...)
        f_locals = fn.frame_locals(args)
    try:
        return [(str(entry.compile_id), bool(entry.guard_manager.check(f_locals))) for entry in own_cache_entries(fn)]
    except Exception:  # noqa: BLE001 - a private API moved, or a guard raised: no prediction
        return None


def recorded_failures():
    """{code object: number of guard failures Dynamo recorded for it} so far."""
    try:
        # private torch API, looked up at use: a torch that moved it loses the reasons, not the run
        from torch._dynamo.utils import guard_failures

        return {code: len(reasons) for code, reasons in guard_failures.items()}
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return {}


def failures_since(counts):
    """{code object: [reasons recorded since ``counts`` (``recorded_failures``)]}."""
    try:
        # private torch API, looked up at use (see recorded_failures)
        from torch._dynamo.utils import guard_failures

        return {code: [str(r) for r in reasons[counts.get(code, 0):]]
                for code, reasons in list(guard_failures.items()) if len(reasons) > counts.get(code, 0)}
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return {}


def reason_key(reason):
    """A guard failure without its compile id, normalized: what names the guard."""
    return normalize_message(_PLEA.sub("", _COMPILE_ID.sub("", str(reason).strip(), count=1)))


def explain(fn, verdicts, counts, result, frames=None):
    """Classify a call that compiled (``result``: its ``run_schedule`` record)
    although ``verdicts`` (``guard_verdicts`` before the call) had an entry
    accept it; ``counts``: ``recorded_failures()`` before the call; ``frames``:
    the names of the code objects compiled during the call, when a recording
    backend knows them. Returns {"class", "unsound", "reasons", "frames",
    "admitted_by", and for the unsound class "reason", "key" (the signature's) and "detail"}."""
    own = fn.__code__
    new = failures_since(counts)
    reasons = {code.co_name if code is not own else "<own frame>": [reason_key(r) for r in rs] for code, rs in new.items()}
    admitted_by = [cid for cid, ok in verdicts or () if ok]
    out = {"reasons": reasons, "frames": list(frames) if frames is not None else None, "admitted_by": admitted_by}
    if own in new or result.get("new_entries", 0) > 0:
        # Dynamo records one reason per cache entry it tried; the one that matters is the
        # reason of an entry that had accepted the call.
        mine = new.get(own, [])
        chosen = next((r for r in mine if _compile_id(r) in admitted_by), mine[0] if mine else "")
        key = reason_key(chosen) if chosen else "(no guard failure recorded)"
        detail = (f"the program's frame recompiled although the guard manager of its cached graph "
                  f"{' and '.join(admitted_by)} accepted these arguments just before the call; Dynamo's reason: {key}")
        return {**out, "class": UNSOUND, "unsound": True, "reason": str(chosen)[:2000], "key": key, "detail": detail}
    resumes = [code for code in new if code is not own and code.co_name.startswith(RESUME_PREFIX)]
    others = [code for code in new if code is not own and code not in resumes]
    if frames is not None:
        failed = {code.co_name for code in new}
        first = [name for name in frames if name not in failed and name != own.co_name]  # first compiles
        if others or any(not name.startswith(RESUME_PREFIX) for name in first):
            kind = "nested-frame"
        elif resumes:
            kind = "resume-recompile"
        elif first:
            kind = "resume-first-compile"
        else:
            kind = "unknown"
    elif others:
        kind = "nested-frame"
    elif resumes:
        kind = "resume-recompile"
    elif result.get("graphs", 0) > 0:
        kind = "new-frame"  # compiled without a guard failure: a frame's first compile
    else:
        kind = "unknown"
    return {**out, "class": kind, "unsound": False}


def _compile_id(reason):
    match = _COMPILE_ID.match(str(reason).strip())
    return match.group(1) if match else None


class RecompileWatch:
    """Asks the guard managers before each call and explains, after it, a call
    that compiled although they said a cached graph would take it.

    ``before_call(index, args)`` returns the prediction (True: some entry
    accepts; None: cannot tell); ``after_call(index, result, frames)`` sets
    ``result["recompile"]`` (``explain``) on such a call, from its second call on.
    The campaign (``oracles.lanes.execute``) and the repro scripts both use it.
    """

    def __init__(self, fn):
        self.fn = fn
        self.pending = None

    def before_call(self, index, args):
        verdicts = guard_verdicts(self.fn, args)
        self.pending = (index, verdicts, recorded_failures())
        return None if verdicts is None else any(ok for _, ok in verdicts)

    def after_call(self, index, result, frames=None):
        if self.pending is None or self.pending[0] != index:
            return None
        _, verdicts, counts = self.pending
        self.pending = None
        if index == 0 or not any(ok for _, ok in verdicts or ()):
            return None
        own_failed = self.fn.__code__ in failures_since(counts)
        if result.get("graphs", 0) <= 0 and result.get("new_entries", 0) <= 0 and not own_failed:
            return None
        result["recompile"] = explain(self.fn, verdicts, counts, result, frames)
        return result["recompile"]
