"""Symbolic-metadata oracle: sizes and strides promised by one symbolic trace
against the sizes and strides eager really produced, on every call.

The compiler never sees real tensors while it traces: Dynamo, AOTAutograd and
Inductor all propagate *fake* tensors whose sizes are sympy expressions over
the input sizes (``s0 * 2``, ``FloorDiv(s1, 3)``...), computed by each op's
meta/fake implementation. A compiled graph is then reused for every call whose
sizes pass its guards, so a size or stride expression that is right at the
first ("hint") sizes but wrong elsewhere is a soundness bug even when this
particular compiled run happened to agree with eager (e.g. because the kernel
recomputes the size at run time). This oracle checks those expressions
directly, without compiling anything.

How (torch 2.13):

1. Trace the program once under ``FakeTensorMode(shape_env=ShapeEnv())``,
   on fake inputs made from the FIRST call's real inputs by
   ``fake_mode.from_tensor(t, source=LocalSource(name),
   symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DUCK]
   * ndim))``. This is what Dynamo does for a dynamic input: the real sizes
   become the symbols' hints, equal sizes share a symbol (duck sizing, as
   Dynamo does; the case's ``fx.use_duck_shape`` flag is honoured), sizes 0
   and 1 are specialized, and a non-standard stride becomes its own symbol.
   ``make_fx(tracing_mode="symbolic")`` works too, but it builds an FX graph
   that is not needed here and gives less control over how inputs are made
   symbolic; running the program directly under the fake mode is closer to
   Dynamo's fake-tensor propagation and cheaper.
2. For every call, bind each symbol to that call's value: walk the fake
   inputs (and their ``_base`` where both sides are views) and read the real
   input's size, stride or storage offset in the same place. An input whose
   traced size is not a plain symbol (a specialized 0/1, or a second dim
   duck-sized onto the first one's symbol) must evaluate to the call's real
   size, or the trace does not describe the call and the call is skipped.
3. A call is comparable only if, at its bindings, every guard the trace
   installed holds: ``shape_env.guards``, the symbol ranges
   (``var_to_range``, which carry the 0/1 specialization and bounds learnt
   from branches), every ``replacements`` entry as an equation, and every
   deferred runtime assert whose symbols are all bound. A guard that is false
   or cannot be evaluated skips the call (the compiler would recompile).
4. For each output (``out[0][i]``) and final input state (``out[1][j]``),
   evaluate the fake tensor's dtype, sizes and strides at the bindings and
   compare with eager. Sizes and dtypes come from ``call.eager["out"]``.
   Strides do not: ``script_runtime.snapshot`` clones, which makes non-dense
   tensors contiguous. The true eager strides come from running ``fn``
   eagerly once more on ``script_runtime.make_args(call)`` (plain eager, no
   compiler). An expression with a symbol no input binds (an unbacked ``u0``
   from ``.item()``/``nonzero``) is data-dependent and is not compared.

Strides are compared the way torch compares fake and real tensors
(``torch._prims_common.check_significant_strides``, as ``CrossRefFakeMode``
uses it): non-empty tensors, dims of size > 1, and only on calls whose input
strides match the traced input strides (layouts change between calls; the
trace then says nothing about output strides). Torch does not promise eager
strides for CPU elementwise ops (``only_cuda=True``, pytorch/pytorch#77553),
and generated programs hit real differences of that kind in torch 2.13
(``copysign`` with a broadcast operand, ``F.one_hot`` of a transposed
input: fake mode runs decompositions that lay the result out differently
from the CPU kernels, even with static shapes; see the tests). So:

- values made only by allow-listed ops (``STRIDE_OPS``: views; and
  ``FRESH_OPS``: factories and ``contiguous``, whatever their operands)
  must match eager's strides at every comparable call;
- any other value is held to its own first comparison
  (``StrideBaseline``): where fake and eager agreed on a stride at the
  first call that compared it, they must agree at every later call. A
  stride right at the hint sizes and wrong at others is a symbolic bug
  whatever op made it; a layout chosen differently from the start is not
  a finding, only listed in the pass evidence as ``layout_divergences``.

A program that cannot be traced symbolically (an unsupported op, a guard on
data, ...) is not a finding of this oracle: it passes and says why in the
verdict's evidence. Every pass carries a short summary (calls compared,
calls skipped and why) in its evidence.

The signature does not name the lane: the trace does not depend on it, so
one meta bug found on two lanes is one finding.

The tracing and comparison live in ``oracles.symbolic_trace`` (torch-only),
which a finding's ``repro.py`` inlines to judge the calls the same way; what
needs symfuzz's IR (``stride_checked``) is computed here and handed to it
(a repro gets ``stride_paths`` as a constant).
"""

from __future__ import annotations

import re

from symfuzz.fuzz.ir import PRELUDE, BranchNode, OpNode, render_node
from symfuzz.oracles.lanes.execute import load_function
from symfuzz.oracles.symbolic_trace import (  # noqa: F401 - the tracing and comparison, torch-only (inlined into repros)
    DIM_DYNAMIC,
    FX_FLAGS,
    SIGNATURE_LANE,
    SYMPTOM,
    StrideBaseline,
    TensorMeta,
    Trace,
    TraceFailed,
    bind,
    compare_call,
    evaluate,
    judge_calls,
    real_strides,
    violated_guard,
)
from symfuzz.oracles.symbolic_trace import trace_symbolic as _trace_symbolic
from symfuzz.oracles.verdict import FakeRealMismatch, SymbolicCoverage, SymbolicSkipped, Verdict, passed

NAME = "symbolic-metadata"

# Values made from the inputs by these ops (IR spec names) alone must match
# eager's strides at every call; other values only their own first
# comparison (see the module docstring, ``stride_checked`` and StrideBaseline).
STRIDE_OPS = frozenset({
    # view family: strides follow from the input's by the view rules
    "view", "reshape", "permute", "transpose", "t", "mT", "movedim", "expand", "squeeze", "unsqueeze",
    "flatten", "unflatten", "narrow", "slice", "select", "split", "chunk", "unbind", "diagonal",
})
# Ops whose result strides do not depend on their operands' strides at all
# (fresh contiguous tensors): checked whatever their operands are.
FRESH_OPS = frozenset({
    "contiguous", "arange", "arange_expand", "relpos", "zeros", "ones", "full", "full_sym", "new_zeros",
    "new_ones", "new_full", "zeros_shape", "eye", "linspace", "tri_mask",
})


def stride_checked(program, ops=None, fresh=None) -> set:
    """Names of the program's values whose strides torch promises on CPU.

    Torch holds fake tensors to eager's strides (``CrossRefFakeMode``,
    ``torch._prims_common.check_significant_strides``) except for CPU
    elementwise ops, whose strides "are incorrect in PyTorch" (pytorch
    pytorch/pytorch#77553, the reason for its ``only_cuda=True`` default). A value's
    strides are only as good as every op on its way from the inputs, so a
    value is checked when it is an input, made by an op in ``fresh``
    (default ``FRESH_OPS``: a new contiguous tensor, whatever the operands),
    or made by an op in ``ops`` (default ``STRIDE_OPS``) from checked values
    only. A branch result is checked when both arms are plain names of
    checked values.
    """
    allowed = STRIDE_OPS if ops is None else ops
    fresh = FRESH_OPS if fresh is None else fresh
    checked = {i.name for i in program.inputs}
    tensors = set(checked)

    def tensor_refs(text):
        # A size read (x.size(0), x.shape[1], x.dim(), ...) does not pass strides on.
        names = re.findall(r"\b([A-Za-z_]\w*)\b(?!\s*\.\s*(?:size|shape|dim|ndim|numel|device|dtype)\b)", text)
        return {n for n in names if n in tensors}

    for node in program.body:
        if isinstance(node, OpNode):
            try:
                deps = set(node.args) | tensor_refs("\n".join(render_node(node)))
            except Exception:  # noqa: BLE001 - cannot tell what it reads: not checked
                deps = None
            tensors.add(node.out)
            if node.op in fresh or (node.op in allowed and deps is not None and deps <= checked):
                checked.add(node.out)
        elif isinstance(node, BranchNode):
            tensors.add(node.out)
            if {node.then.strip(), node.orelse.strip()} <= checked:
                checked.add(node.out)
    return checked


def _stride_paths(program, checked) -> set:
    """Leaf path prefixes (script_runtime.flatten names) whose strides are compared."""
    paths = {f"out[0][{i}]" for i, name in enumerate(program.outputs) if name in checked}
    paths |= {f"out[1][{j}]" for j in range(len(program.inputs))}
    return paths


def stride_paths(program) -> set:
    """The leaves (and what is under them) whose strides must match eager at every
    comparable call: ``stride_checked`` outputs and every final input state.
    Computed here, from the IR, and handed to ``symbolic_trace.judge_calls``
    (a repro gets it as a constant)."""
    return _stride_paths(program, stride_checked(program))


def trace_symbolic(source: str, call: dict, config: dict | None = None):
    """``symbolic_trace.trace_symbolic`` with the globals programs run with."""
    return _trace_symbolic(source, call, config, prelude=PRELUDE)


# ---------------------------------------------------------------- the oracle


def symbolic_metadata_oracle(case, run) -> Verdict:
    """Fails when a fake tensor's symbolic size, stride or dtype, evaluated at a
    call's input sizes, differs from what eager produced on that call.

    One symbolic trace (hinted by the first call) is judged against every
    call whose sizes satisfy the trace's guards; see the module docstring.
    Passes, with the reason in ``evidence``, when the program cannot be traced
    symbolically.
    """
    # The run's own case, when it has one, also holds calls planned during the run.
    ran = getattr(run, "case", None) or case
    calls = [c.to_json() for c in ran.schedule.calls]
    if not calls:
        return passed(NAME, SymbolicSkipped(skipped="no calls"))
    if ran.program.params:  # its values hang on state the trace does not carry from call to call
        return passed(NAME, SymbolicSkipped(skipped="module program"))
    try:
        trace = trace_symbolic(ran.source, calls[0], ran.schedule.config)
    except TraceFailed as exc:
        return passed(NAME, SymbolicSkipped(skipped="symbolic trace failed", reason=str(exc)))

    fn = load_function(ran.source)
    calls = calls[: len(run.calls)]
    judgement = judge_calls(trace, fn, calls, lambda index, call: run.calls[index].eager, stride_paths(ran.program),
                            run.output_ops)
    if judgement.mismatch is not None:
        facts = judgement.evidence(calls)  # a dict: the repro scripts share symbolic_trace, which needs torch only
        return Verdict(
            ok=False,
            oracle=NAME,
            symptom=SYMPTOM,
            stage="dynamo",
            signature=judgement.signature,
            call_index=judgement.index,
            evidence=FakeRealMismatch(
                path=facts["path"], what=facts["what"], dim=facts["dim"], symbolic=facts["symbolic"],
                expected=facts["expected"], actual=facts["actual"], sizes=facts.get("sizes"),
                strides=facts.get("strides"), rule=facts.get("rule"), bindings=facts["bindings"],
                hint_sizes=facts["hint_sizes"], call_sizes=facts["call_sizes"], detail=facts["detail"]),
        )
    return passed(NAME, SymbolicCoverage(
        compared_calls=judgement.compared,
        skipped_calls={str(k): v for k, v in judgement.skipped.items()},
        layout_divergences=judgement.divergent or None,  # not findings: see StrideBaseline
    ))
