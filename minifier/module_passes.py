"""Passes over a module program's Case (``ir.Program.params``): plainer calls, less state.

Top-level functions ``pass(subject) -> Iterator[CaseSubject]`` like those of
``case_passes``, no-ops for a program without parameters or buffers:

- ``simplify_module_calls``: a training step becomes forward calls; then the
  parameters stop requiring grad (no backward to compile); then every call trains
  (no train/eval switch);
- ``drop_state``: one parameter or buffer at a time leaves the module and becomes an
  input of the same shape, dtype and values (``make_input`` of its seed), or, for
  one that starts at zeros or ones, a constant made at the top of ``forward``. With
  none left the program is a plain function;
- ``shrink_state_sizes``: a fixed size of the state smaller, with the input dims of
  that size (the state's sizes are tied to them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from symfuzz.fuzz.case import ArgSpec, Case
from symfuzz.fuzz.ir import ExprNode, Input, Param
from symfuzz.minifier.case_passes import dead_code_eliminated, set_constant
from symfuzz.minifier.case_subject import CaseSubject


def simplify_module_calls(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Forward calls instead of training steps; frozen parameters; train mode throughout."""
    case = subject.case
    if not case.program.params:
        return
    schedule = case.schedule
    if schedule.step is not None:
        yield subject.with_case(replace(case, schedule=replace(schedule, step=None)))
    if any(p.trainable for p in case.program.params):
        frozen = tuple(replace(p, requires_grad=False) for p in case.program.params)
        yield subject.with_case(replace(case, program=replace(case.program, params=frozen),
                                        schedule=replace(schedule, step=None)))
    if any(c.training is False for c in schedule.calls):
        calls = tuple(replace(c, training=True) for c in schedule.calls)
        yield subject.with_case(replace(case, schedule=replace(schedule, calls=calls)))


def drop_state(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Each parameter or buffer (the last first) as an input, then as a constant."""
    case = subject.case
    for param in reversed(case.program.params):
        yield subject.with_case(dead_code_eliminated(state_as_input(case, param)))
        if param.init in ("zeros", "ones"):
            yield subject.with_case(dead_code_eliminated(state_as_constant(case, param)))


def _without(case: Case, param: Param) -> Case:
    """``case`` without ``param`` in its module; a plain program when it was the last."""
    params = tuple(p for p in case.program.params if p is not param)
    case = replace(case, program=replace(case.program, params=params))
    if not params:
        calls = tuple(replace(c, training=None) for c in case.schedule.calls)
        case = replace(case, schedule=replace(case.schedule, step=None, calls=calls))
    return case


def state_as_input(case: Case, param: Param) -> Case:
    """``param`` as a new input of the same name, fixed shape, dtype and values."""
    case = _without(case, param)
    # a "normal" one keeps its values; zeros and ones get seeded ones (the constant is the other candidate)
    arg = ArgSpec(tuple(param.dims), param.dtype, param.seed)
    calls = [replace(call, args=call.args + (arg,)) for call in case.schedule.calls]
    program = replace(case.program, inputs=case.program.inputs + (Input(param.name, param.dtype, tuple(param.dims)),))
    return replace(case, program=program, schedule=replace(case.schedule, calls=tuple(calls)))


def state_as_constant(case: Case, param: Param) -> Case:
    """``param`` (zeros or ones) made by the first statement of the body instead."""
    case = _without(case, param)
    shape = repr(tuple(int(d) for d in param.dims))
    node = ExprNode(param.name, f"torch.{param.init}({shape}, dtype=torch.{param.dtype})")
    return replace(case, program=replace(case.program, body=(node,) + case.program.body))


def shrink_state_sizes(subject: CaseSubject) -> Iterator[CaseSubject]:
    """A fixed size of the module's state made smaller (1, 2, half) in every parameter
    and buffer and in every input dim of that size: they are tied (a weight's in-features
    are an input's last dim), so they shrink together."""
    case = subject.case
    for size in sorted({d for p in case.program.params for d in p.dims if d > 1}, reverse=True):
        for smaller in sorted({1, 2, size // 2}):
            if smaller < size:
                yield subject.with_case(resized(case, size, smaller))


def resized(case: Case, size: int, new: int) -> Case:
    """Every fixed dim of ``size`` (parameters, buffers, inputs; the calls' shapes follow) set to ``new``."""
    params = tuple(replace(p, dims=tuple(new if d == size else d for d in p.dims)) for p in case.program.params)
    out = replace(case, program=replace(case.program, params=params))
    for a, inp in enumerate(case.program.inputs):
        for d, dim in enumerate(inp.dims if inp.is_tensor else ()):
            if dim == size:
                out = set_constant(out, a, d, new)
    return out


def with_module_passes(passes: list) -> list:
    """``passes`` with the module passes: plainer calls first (every query after them is
    cheaper), fewer and smaller parameters and buffers last."""
    return [simplify_module_calls, *passes, drop_state, shrink_state_sizes]
