"""Did eager raise only in code a compiler may drop?

An accepts-invalid verdict says that compiled skipped a check eager made. That is
false when the statement that raised in eager is dead: nothing reads its value and
its effect is not seen. Dynamo drops such statements even on the eager backend, so
compiled returning there skipped no check. Two kinds of statement are dead:

* a statement whose value nothing live reads (``Program.live``, a rule on names);
* an in-place write to a tensor that, at this call, shares memory with no input and
  with nothing read after the write or returned (``v2[mask] = 3`` on a temporary
  that is never read again). Whether a written tensor aliases something is a fact
  of the call, not of the names (``x0[..., :k]`` is a view, ``x0 + 1`` is not), so
  it is read from eager's own tensors: the storages they share.

The scripts cannot apply this rule (they carry no program IR), so a finding at a later
call carries the calls passed over (``crash.dead_code_calls``, in its triage), and its
judge.py and repro.py pass over them too.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.ir import EffectNode, node_reads
from symfuzz.oracles.lanes.execute import load_function
from symfuzz.oracles.lanes.lane import get_lane


def raised_only_in_dead_code(case, index: int, lane: str) -> bool:
    """Eager raised at call ``index``: does the program's live part (without the
    statements nothing reads, and without the in-place writes nobody sees) run that
    call in eager without raising? (A module program is left as it is: its state
    makes the call's meaning depend on the calls before it.)"""
    program = case.program
    if program.params:
        return False
    device = get_lane(lane).device
    call = case.schedule.calls[index].to_json()
    live = without_unseen_writes(case, program.live(), call, device)
    if live.body == program.body:
        return False
    fn = load_function(replace(case, program=live).source)
    return "error" not in script_runtime.run_call(fn, script_runtime.make_args(call, device))


def without_unseen_writes(case, program, call: dict, device: str):
    """``program`` without its in-place writes that nobody sees at ``call``.

    A write (an ``EffectNode``, which writes its first operand) is unseen when the
    written tensor shares storage with no input, no output, and no value that a
    statement after the write reads. The storages come from one eager run of the
    program without those writes, each value returned (a write changes values,
    never which storage a value lives in). A write found seen reads its operands,
    which may make another seen, so the test repeats until nothing changes. Where
    that run raises, every write is kept."""
    body = program.body
    inputs = {i.name for i in program.inputs}
    unseen = {i for i, node in enumerate(body) if isinstance(node, EffectNode) and node.args[0] not in inputs}
    if not unseen:
        return program
    storages = _storages(case, program, unseen, call, device)
    if storages is None:
        return program
    always_seen = set().union(*(storages.get(name, set()) for name in (*inputs, *program.outputs)))
    changed = True
    while changed:
        changed = False
        for i in sorted(unseen):
            later = set().union(*(node_reads(node) for j, node in enumerate(body[i + 1:], i + 1) if j not in unseen))
            seen = always_seen.union(*(storages.get(name, set()) for name in later))
            written = storages.get(body[i].args[0])
            if not written or written & seen:  # unknown, or seen: kept
                unseen.discard(i)
                changed = True
    return replace(program, body=tuple(node for i, node in enumerate(body) if i not in unseen))


def _storages(case, program, dropped: set, call: dict, device: str):
    """Run ``program`` without the statements at ``dropped`` in eager at ``call``,
    and return each value's storages by name (a tuple value has several), or None
    where the run raises."""
    body = tuple(node for i, node in enumerate(program.body) if i not in dropped)
    names = [i.name for i in program.inputs if i.is_tensor]
    names += [node.out for node in body if getattr(node, "out", None) and node.out not in names]
    probe = replace(program, body=body, outputs=tuple(names))
    try:
        fn = load_function(replace(case, program=probe).source)
        values = fn(*script_runtime.make_args(call, device))
    except Exception:  # noqa: BLE001 - any failure means: keep every write
        return None
    return {name: {leaf.untyped_storage()._cdata for leaf in torch.utils._pytree.tree_leaves(value)
                   if isinstance(leaf, torch.Tensor)}
            for name, value in zip(names, values)}
