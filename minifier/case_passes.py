"""Passes over a finding's Case: each yields smaller candidates, most ambitious first.

Passes are top-level functions ``pass(subject) -> Iterator[CaseSubject]``.
They never compile anything; the driver checks every candidate in a fresh
process. To learn the shapes of intermediate values (to replace an op's
output by a fresh input of the same shape) they may run the program eagerly
in-process on the calls' small seeded inputs, as the generator does.

The program and the schedule change together: an input's dims tie it to size
symbols, and every call's argument shapes follow those dims, so a pass that
edits one edits both (``_set_symbol``, ``_drop_inputs``...).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Iterator, Optional

from symfuzz.fuzz.case import ArgSpec, Call, Case
from symfuzz.fuzz.ir import (
    BranchNode,
    CondNode,
    ExprNode,
    Input,
    OpNode,
    SIDE_EFFECTS,
    SizeNode,
    live_body,
)
from symfuzz.fuzz.ir import TRAINING
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT
from symfuzz.minifier.case_eager import values_at
from symfuzz.minifier.case_subject import CaseSubject
from symfuzz.oracles.verdict import FakeRealMismatch, OutputMismatch, UnsoundGuard

FRESH_SEED = 7_000


# ---------------------------------------------------------------- eager facts


def _failing_output(subject: CaseSubject) -> Optional[int]:
    """The program output the failure names (``out[0][i]``: i), if it names one."""
    evidence = subject.verdict.evidence
    path = evidence.path if isinstance(evidence, (OutputMismatch, UnsoundGuard, FakeRealMismatch)) else None
    m = re.match(r"out\[0\]\[(\d+)\]", path or "")
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- program surgery


def _symbol_value(case: Case, call: Call, symbol: str) -> Optional[int]:
    for a, inp in enumerate(case.program.inputs):
        for d, sym in enumerate(inp.dims):
            if sym == symbol:
                return call.args[a].shape[d]
    return None


def _rename(node, old: str, new: str):
    pattern = re.compile(rf"\b{re.escape(old)}\b")

    def sub(value):
        if isinstance(value, str):
            return pattern.sub(new, value)
        if isinstance(value, tuple):
            return tuple(sub(v) for v in value)
        return value

    changes = {}
    for name in node.__dataclass_fields__:
        if name == "out":
            continue
        value = getattr(node, name)
        if name == "params":
            changes[name] = {k: sub(v) for k, v in value.items()}
        elif isinstance(value, (str, tuple)):
            changes[name] = sub(value)
    return replace(node, **changes)


def dead_code_eliminated(case: Case) -> Case:
    """Drop statements nothing reads, then inputs (and a module's parameters and
    buffers) nothing reads."""
    body, live = live_body(case.program.body, case.program.outputs)
    program = replace(case.program, body=body)
    unused = [i for i, inp in enumerate(program.inputs) if inp.name not in live]
    return without_unread_state(_drop_inputs(replace(case, program=program), unused), live)


def without_unread_state(case: Case, live: set) -> Case:
    """A module program without the parameters and buffers nothing in ``live`` reads;
    with none left, a plain program (no training step, no modes), unless the body still
    reads the mode."""
    params = case.program.params
    kept = tuple(p for p in params if p.name in live)
    if len(kept) == len(params) or (not kept and TRAINING in live):
        return case
    case = replace(case, program=replace(case.program, params=kept))
    if not kept:
        calls = tuple(replace(c, training=None) for c in case.schedule.calls)
        case = replace(case, schedule=replace(case.schedule, step=None, calls=calls))
    return case


def _drop_inputs(case: Case, indices) -> Case:
    drop = set(indices)
    if not drop:
        return case
    program = replace(case.program, inputs=tuple(inp for i, inp in enumerate(case.program.inputs) if i not in drop))
    calls = tuple(replace(c, args=tuple(a for i, a in enumerate(c.args) if i not in drop)) for c in case.schedule.calls)
    return replace(case, program=program, schedule=replace(case.schedule, calls=calls))


def _fresh_dims(case: Case, shapes: list[tuple]) -> tuple:
    """Dims for a new input with the given per-call shapes: a dim takes an
    existing symbol when it equals that symbol at every call (keeping it
    tied, so dynamic), a constant when it never changes, else a new symbol."""
    symbols = []
    for inp in case.program.inputs:
        symbols += [s for s in inp.dims if isinstance(s, str) and s not in symbols]
    dims = []
    taken = set(symbols)
    for d in range(len(shapes[0])):
        sizes = [shape[d] for shape in shapes]
        match = next((s for s in symbols
                      if all(_symbol_value(case, c, s) == size for c, size in zip(case.schedule.calls, sizes))), None)
        if match is not None and sizes[0] >= 2:
            dims.append(match)
        elif len(set(sizes)) == 1:
            dims.append(sizes[0])
        else:
            name = next(f"s{k}" for k in range(100, 10_000) if f"s{k}" not in taken)
            taken.add(name)
            dims.append(name)
    return tuple(dims)


def _marks_for(case: Case, call: Call, dims: tuple) -> dict:
    """A new input's marks at one call: those of an existing dim with the same symbol."""
    marks = {}
    for d, sym in enumerate(dims):
        if not isinstance(sym, str):
            continue
        for a, inp in enumerate(case.program.inputs):
            if sym in inp.dims:
                mark = call.args[a].marks.get(inp.dims.index(sym))
                if mark:
                    marks[d] = mark
                break
    return marks


def replace_with_input(case: Case, name: str) -> Optional[Case]:
    """The statement defining ``name`` removed; ``name`` becomes a fresh input
    of the same shape and dtype at every call. None if that is impossible."""
    infos = [values_at(case, i).get(name) for i in range(len(case.schedule.calls))]
    if not infos or any(not isinstance(info, tuple) for info in infos) or len({info[1] for info in infos}) != 1:
        return None
    shapes = [info[0] for info in infos]
    if len({len(s) for s in shapes}) != 1:
        return None
    dtype = infos[0][1]
    dims = _fresh_dims(case, shapes)
    seed = FRESH_SEED + len(case.program.inputs)
    # In a case with a backward, a floating cut point requires grad: the gradient still flows from there.
    grad = DTYPE_KIND.get(dtype) == FLOAT and any(a.requires_grad for c in case.schedule.calls for a in c.args)
    calls = tuple(replace(c, args=c.args + (ArgSpec(tuple(shape), dtype, seed, {"kind": "contiguous"},
                                                    _marks_for(case, c, dims), grad),))
                  for c, shape in zip(case.schedule.calls, shapes))
    body = tuple(n for n in case.program.body if getattr(n, "out", None) != name)
    program = replace(case.program, inputs=case.program.inputs + (Input(name, dtype, dims),), body=body)
    return replace(case, program=program, schedule=replace(case.schedule, calls=calls))


def bypass(case: Case, node) -> Optional[Case]:
    """``node`` removed and its readers given its first tensor argument that has
    the same shape and dtype at every call (dropping a unary op, say)."""
    if not isinstance(node, OpNode):
        return None
    n_calls = len(case.schedule.calls)
    mine = [values_at(case, i).get(node.out) for i in range(n_calls)]
    for arg in node.args:
        if [values_at(case, i).get(arg) for i in range(n_calls)] == mine and isinstance(mine[0], tuple):
            body = tuple(_rename(n, node.out, arg) for n in case.program.body if n is not node)
            outputs = tuple(arg if o == node.out else o for o in case.program.outputs)
            return replace(case, program=replace(case.program, body=body, outputs=outputs))
    return None


def without_nodes(case: Case, indices: list[int]) -> Optional[Case]:
    """The statements at ``indices`` removed: side effects dropped, ops
    bypassed where possible, other values turned into fresh inputs."""
    nodes = [case.program.body[i] for i in indices]
    original = case
    for node in nodes:
        if isinstance(node, SIDE_EFFECTS):
            case = replace(case, program=replace(case.program, body=tuple(n for n in case.program.body if n is not node)))
            continue
        if isinstance(node, SizeNode):
            smaller = _size_as_constant(case, node)
        else:
            smaller = bypass(case, node) or replace_with_input(case, node.out)
        case = smaller or case  # a statement that cannot go stays; the rest of the chunk still goes
    case = dead_code_eliminated(case)
    return None if case == original else case


def _size_as_constant(case: Case, node: SizeNode) -> Optional[Case]:
    """A size statement whose value is the same at every call, inlined as that number."""
    values = {values_at(case, i).get(node.out) for i in range(len(case.schedule.calls))}
    if len(values) != 1 or not isinstance(next(iter(values)), int):
        return None
    literal = str(next(iter(values)))
    body = tuple(_rename(n, node.out, literal) for n in case.program.body if n is not node)
    return replace(case, program=replace(case.program, body=body))


def _chunks(n: int) -> Iterator[list[int]]:
    """ddmin-style index sets: halves, quarters, ... singles (largest first)."""
    size = max(n // 2, 1)
    seen = set()
    while True:
        for start in range(0, n, size):
            chunk = tuple(range(start, min(start + size, n)))
            if chunk not in seen:
                seen.add(chunk)
                yield list(chunk)
        if size == 1:
            return
        size = max(size // 2, 1)


# ---------------------------------------------------------------- the passes


def keep_one_output(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Return only one output (the failing one first), dead code dropped."""
    program = subject.case.program
    if len(program.outputs) <= 1:
        dce = dead_code_eliminated(subject.case)
        if dce != subject.case:
            yield subject.with_case(dce)
        return
    order = list(range(len(program.outputs)))
    failing = _failing_output(subject)
    if failing is not None and failing < len(order):
        order.remove(failing)
        order.insert(0, failing)
    for i in order:
        case = replace(subject.case, program=replace(program, outputs=(program.outputs[i],)))
        yield subject.with_case(dead_code_eliminated(case))


def drop_statements(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Delta debugging over the body: remove chunks of statements."""
    n = len(subject.case.program.body)
    for chunk in _chunks(n):
        case = without_nodes(subject.case, chunk)
        if case is not None:
            yield subject.with_case(case)


def cut_inputs(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Replace one op's output by a fresh input (cuts the program from above),
    latest statements first: the last op before the output is most often the culprit."""
    for node in reversed(subject.case.program.body):
        if not isinstance(node, (OpNode, ExprNode, BranchNode, CondNode)):
            continue
        case = replace_with_input(subject.case, node.out)
        if case is not None:
            yield subject.with_case(dead_code_eliminated(case))


def drop_calls(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Fewer calls: the failing call alone, then with each earlier call (a
    reuse bug needs the call that compiled the graph), then ddmin chunks."""
    calls = subject.case.schedule.calls
    index = subject.verdict.call_index
    failing = index if isinstance(index, int) and 0 <= index < len(calls) else len(calls) - 1
    keeps = [[failing]] + [[earlier, failing] for earlier in range(failing)]
    keeps += [[i for i in range(len(calls)) if i not in chunk] for chunk in _chunks(len(calls))]
    # A reuse symptom is about a later call running an earlier call's graph:
    # the failing call must stay, after at least one other.
    reuse = subject.verdict.symptom in ("unsound-guard", "excess-recompiles", "unsound-recompile")
    for keep in keeps:
        if not keep or len(keep) == len(calls):
            continue
        if reuse and (failing not in keep or keep[0] == failing):
            continue
        new_index = keep.index(failing) if failing in keep else 0
        kept = tuple(calls[i] for i in keep)
        case = replace(subject.case, schedule=replace(subject.case.schedule, calls=kept))
        yield subject.with_case(case, new_index)


def drop_marks(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Remove dynamism marks (each marked dim at every call, then one at a
    time) and config flags that the failure does not need."""
    case = subject.case
    marked = sorted({(a, d) for c in case.schedule.calls for a, arg in enumerate(c.args) for d in arg.marks})
    for a, d in marked:
        calls = tuple(_unmark(c, a, d) for c in case.schedule.calls)
        yield subject.with_case(replace(case, schedule=replace(case.schedule, calls=calls)))
    for i, call in enumerate(case.schedule.calls):
        for a, arg in enumerate(call.args):
            for d in sorted(arg.marks):
                calls = list(case.schedule.calls)
                calls[i] = _unmark(call, a, d)
                yield subject.with_case(replace(case, schedule=replace(case.schedule, calls=tuple(calls))))
    for group, flags in sorted(case.schedule.config.items()):
        for flag in sorted(flags):
            config = dict(case.schedule.config)
            config[group] = {k: v for k, v in flags.items() if k != flag}
            config = {k: v for k, v in config.items() if v}
            yield subject.with_case(replace(case, schedule=replace(case.schedule, config=config)))


def _unmark(call: Call, a: int, d: int) -> Call:
    args = list(call.args)
    args[a] = replace(args[a], marks={k: v for k, v in args[a].marks.items() if k != d})
    return replace(call, args=tuple(args))


def shrink_sizes(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Smaller sizes: each symbol's values compressed to 2, 3, ... (keeping
    their order and equalities across calls, and 0/1 as they are, so the
    calls still differ where the bug needs it), then halved call by call;
    constant dims to 1, then 2, then halved."""
    case = subject.case
    calls = case.schedule.calls
    symbols = []
    for inp in case.program.inputs:
        symbols += [s for s in inp.dims if isinstance(s, str) and s not in symbols]
    for sym in symbols:
        values = [_symbol_value(case, c, sym) for c in calls]
        big = sorted({v for v in values if v is not None and v >= 2})
        rank = {v: i + 2 for i, v in enumerate(big)}
        compressed = [rank.get(v, v) for v in values]
        if compressed != values:
            yield subject.with_case(_set_symbol(case, sym, compressed))
        for i, v in enumerate(values):
            for smaller in sorted({v // 2, v - 1}):
                if v is not None and 2 <= smaller < v and smaller not in values:
                    new = list(values)
                    new[i] = smaller
                    yield subject.with_case(_set_symbol(case, sym, new))
    # Constant dims of equal size usually have to stay equal (they broadcast or
    # concatenate together): all of them move at once first, then one at a time.
    constants: dict[int, list] = {}
    for a, inp in enumerate(case.program.inputs):
        for d, size in enumerate(inp.dims):
            if isinstance(size, int):
                constants.setdefault(size, []).append((a, d))
    for size, places in sorted(constants.items(), reverse=True):
        for smaller in sorted({1, 2, size // 2}):
            if smaller >= size:
                continue
            together = case
            for a, d in places:
                together = set_constant(together, a, d, smaller)
            yield subject.with_case(together)
            if len(places) > 1:
                for a, d in places:
                    yield subject.with_case(set_constant(case, a, d, smaller))


def _set_symbol(case: Case, sym: str, values: list) -> Case:
    calls = []
    for call, value in zip(case.schedule.calls, values):
        args = list(call.args)
        for a, inp in enumerate(case.program.inputs):
            for d, s in enumerate(inp.dims):
                if s == sym:
                    shape = list(args[a].shape)
                    shape[d] = value
                    args[a] = replace(args[a], shape=tuple(shape))
        symbols = dict(call.symbols)
        if sym in symbols:
            symbols[sym] = value
        calls.append(replace(call, args=tuple(args), symbols=symbols))
    return replace(case, schedule=replace(case.schedule, calls=tuple(calls)))


def set_constant(case: Case, a: int, d: int, value: int) -> Case:
    """``case`` with fixed dim ``d`` of input ``a`` set to ``value``, in the program and every call."""
    inputs = list(case.program.inputs)
    dims = list(inputs[a].dims)
    dims[d] = value
    inputs[a] = replace(inputs[a], dims=tuple(dims))
    calls = []
    for call in case.schedule.calls:
        args = list(call.args)
        shape = list(args[a].shape)
        shape[d] = value
        args[a] = replace(args[a], shape=tuple(shape))
        calls.append(replace(call, args=tuple(args)))
    return replace(case, program=replace(case.program, inputs=tuple(inputs)),
                   schedule=replace(case.schedule, calls=tuple(calls)))


def lower_ranks(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Drop one dim of an input (leading dims first); layouts that name dims reset."""
    case = subject.case
    for a, inp in enumerate(case.program.inputs):
        if inp.rank < 2:
            continue
        for d in range(inp.rank):
            inputs = list(case.program.inputs)
            inputs[a] = replace(inp, dims=inp.dims[:d] + inp.dims[d + 1:])
            calls = []
            for call in case.schedule.calls:
                args = list(call.args)
                arg = args[a]
                marks = {(k if k < d else k - 1): v for k, v in arg.marks.items() if k != d}
                args[a] = replace(arg, shape=arg.shape[:d] + arg.shape[d + 1:], layout={"kind": "contiguous"},
                                  marks=marks)
                calls.append(replace(call, args=tuple(args)))
            yield subject.with_case(replace(case, program=replace(case.program, inputs=tuple(inputs)),
                                            schedule=replace(case.schedule, calls=tuple(calls))))


def simplify_dtypes_and_layouts(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Floating inputs to float32; strided, transposed, expanded inputs to contiguous."""
    case = subject.case
    for a, inp in enumerate(case.program.inputs):
        if inp.is_tensor and inp.dtype in ("float64", "float16", "bfloat16"):
            inputs = list(case.program.inputs)
            inputs[a] = replace(inp, dtype="float32")
            calls = tuple(replace(c, args=tuple(replace(x, dtype="float32") if i == a else x
                                                for i, x in enumerate(c.args))) for c in case.schedule.calls)
            yield subject.with_case(replace(case, program=replace(case.program, inputs=tuple(inputs)),
                                            schedule=replace(case.schedule, calls=calls)))
    for a in range(len(case.program.inputs)):
        if any(c.args[a].layout.get("kind", "contiguous") != "contiguous" for c in case.schedule.calls):
            calls = tuple(replace(c, args=tuple(replace(x, layout={"kind": "contiguous"}) if i == a else x
                                                for i, x in enumerate(c.args))) for c in case.schedule.calls)
            yield subject.with_case(replace(case, schedule=replace(case.schedule, calls=calls)))


def drop_backward(subject: CaseSubject) -> Iterator[CaseSubject]:
    """No input requires grad at any call: the backward pass goes (a forward bug
    then shows without it, and every query compiles one graph less)."""
    if any(a.requires_grad for c in subject.case.schedule.calls for a in c.args):
        yield subject.with_case(_with_gradients(subject.case, lambda a: False))


def drop_gradient_inputs(subject: CaseSubject) -> Iterator[CaseSubject]:
    """One input at a time stops requiring grad (at every call), the last first."""
    case = subject.case
    wanted = sorted({a for c in case.schedule.calls for a, arg in enumerate(c.args) if arg.requires_grad})
    if len(wanted) < 2:
        return  # the last one goes with drop_backward
    for a in reversed(wanted):
        yield subject.with_case(_with_gradients(case, lambda i, a=a: i != a and i in wanted))


def _with_gradients(case: Case, wants) -> Case:
    """Every call's arguments requiring grad where ``wants(index)`` says so (floating tensors only)."""
    calls = tuple(replace(c, args=tuple(replace(x, requires_grad=bool(x.requires_grad and wants(i)))
                                        for i, x in enumerate(c.args))) for c in case.schedule.calls)
    return replace(case, schedule=replace(case.schedule, calls=calls))


# ---------------------------------------------------------------- Python number inputs


def _literal(value) -> str:
    """Source for a number input's value, safe in any expression position."""
    text = repr(value)
    return f"({text})" if not isinstance(value, (bool, list)) and value < 0 else text


def inline_scalar(case: Case, a: int, value) -> Case:
    """Number (or int-list) input ``a`` replaced by the constant ``value`` in the
    program, and dropped from the inputs and every call."""
    name = case.program.inputs[a].name
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    literal = _literal(value)

    def sub(text):
        return pattern.sub(literal, text) if isinstance(text, str) else text

    body = []
    for node in case.program.body:
        changes = {}
        for field in node.__dataclass_fields__:
            current = getattr(node, field)
            if field == "args":  # a binary op's number operand: a plain number, as ir.check_program wants
                changes[field] = tuple(repr(value) if arg == name else arg for arg in current)
            elif field == "params":
                changes[field] = {k: sub(v) for k, v in current.items()}
            elif field != "out" and isinstance(current, str):
                changes[field] = sub(current)
        body.append(replace(node, **changes))
    return _drop_inputs(replace(case, program=replace(case.program, body=tuple(body))), [a])


def _failing_call(subject: CaseSubject) -> int:
    index, calls = subject.verdict.call_index, subject.case.schedule.calls
    return index if isinstance(index, int) and 0 <= index < len(calls) else len(calls) - 1


def inline_scalar_inputs(subject: CaseSubject) -> Iterator[CaseSubject]:
    """A Python number input becomes a constant of the program (the input goes):
    its value at the failing call first, then its other values."""
    case = subject.case
    failing = _failing_call(subject)
    for a, inp in enumerate(case.program.inputs):
        if inp.is_tensor:
            continue
        values = [c.args[a].value for c in case.schedule.calls]
        tried = []
        for value in [values[failing]] + values:
            if value not in tried:
                tried.append(value)
                yield subject.with_case(inline_scalar(case, a, value))


def _set_scalar(case: Case, a: int, values: list) -> Case:
    kind = case.program.inputs[a].kind
    calls = tuple(replace(c, args=tuple(ArgSpec.of_scalar(kind, v) if i == a else x for i, x in enumerate(c.args)))
                  for c, v in zip(case.schedule.calls, values))
    return replace(case, schedule=replace(case.schedule, calls=calls))


def _compressed(values: list) -> list:
    """Distinct values mapped to small ones, keeping their order, their sign and
    0, 1, -1 (ints) or 0.0 (floats): [1000, 3, -7] -> [3, 2, -2]."""
    step, keep = (1, {0, 1, -1}) if all(isinstance(v, int) for v in values) else (0.5, {0.0})
    ups = sorted({v for v in values if v > 0 and v not in keep})
    downs = sorted({v for v in values if v < 0 and v not in keep}, reverse=True)
    first = 2 * step if step == 1 else step
    rank = {v: first + i * step for i, v in enumerate(ups)}
    rank.update({v: -(first + i * step) for i, v in enumerate(downs)})
    return [rank.get(v, v) for v in values]


def shrink_scalar_values(subject: CaseSubject) -> Iterator[CaseSubject]:
    """Simpler values of number inputs: every call takes the failing call's value
    (then the first call's), distinct values compressed toward small ones (keeping
    order and sign), then one value at a time moved toward 0."""
    case = subject.case
    failing = _failing_call(subject)
    for a, inp in enumerate(case.program.inputs):
        if inp.is_tensor:
            continue
        values = [c.args[a].value for c in case.schedule.calls]
        for target in (values[failing], values[0]):
            if any(v != target for v in values):
                yield subject.with_case(_set_scalar(case, a, [target] * len(values)))
        if inp.kind not in ("int", "float"):
            continue
        compressed = [type(v)(c) for v, c in zip(values, _compressed(values))]
        if compressed != values:
            yield subject.with_case(_set_scalar(case, a, compressed))
        for i, v in enumerate(values):
            for smaller in sorted({type(v)(int(v / 2)), type(v)(v - (v > 0) + (v < 0))}, key=abs):
                if abs(smaller) < abs(v) and smaller not in values:
                    yield subject.with_case(_set_scalar(case, a, values[:i] + [smaller] + values[i + 1:]))


def statements_key(subject: CaseSubject) -> str:
    """The program's statements and outputs, and the names of its inputs, parameters and buffers."""
    data = subject.case.program.to_json()
    names = {part: [item["name"] for item in data.get(part, ())] for part in ("inputs", "params")}
    return json.dumps({"body": data["body"], "outputs": data["outputs"], **names}, sort_keys=True, default=str)


# The passes over statements make their candidates from the statements, and one that found
# nothing droppable seldom finds something once only sizes, marks, calls, dtypes or layouts
# shrank: they wait for the statements to change (driver.Driver._rounds; --rerun-passes
# runs them every round). crash-cb6a6ae79e's 29 statements cost 37 queries a round.
for _pass in (keep_one_output, drop_statements, cut_inputs):
    _pass.watches = statements_key

# The order the driver runs them in. Calls go early: every query compiles and
# runs each call, so a one-call schedule makes the rest several times cheaper;
# so does the backward, when the bug does not need it (one graph less to compile).
# Then the big structural cuts, then sizes and cosmetics.
CASE_PASSES = [keep_one_output, drop_calls, drop_backward, drop_statements, cut_inputs, drop_gradient_inputs,
               inline_scalar_inputs, lower_ranks, shrink_sizes, shrink_scalar_values, drop_marks,
               simplify_dtypes_and_layouts]
