"""The short repro of a minified finding: a script to paste into a bug report.

It holds the program, the calls' inputs (rebuilt from their seeds exactly as
``oracles.standalone.make_arg`` builds them), the marks and flags, one
``torch.compile``, and a comparison with eager that raises on the first
difference. It needs only torch and is tens of lines, not the several
hundred of the judged repro (which inlines symfuzz's whole judging code).

Not every finding fits this shape: runner lanes (torch.export), the Triton
interpreter lane and symptoms judged from the compile's bookkeeping
(recompiles, specialization, fake tensors) keep the judged repro.
"""

from __future__ import annotations

import re
from typing import Optional

COMPACT_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "crash", "accepts-invalid", "unsound-guard",
                    "process-death", "timeout")

HELPERS = '''
def make_input(shape, dtype, seed):
    """Seeded CPU values: floats standard normal, ints in [-8, 8]."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-8, 9, shape, generator=g, dtype=dtype)


def leaves(value):
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_same(call, expected, actual):
    """Compiled must match eager: shapes and dtypes exactly, values within a dtype's tolerance."""
    for e, a in zip(leaves(expected), leaves(actual), strict=True):
        if not isinstance(e, torch.Tensor):
            assert e == a, f"value-mismatch at call {call}: compiled {a!r}, eager {e!r}"
            continue
        assert (e.shape, e.dtype) == (a.shape, a.dtype), (
            f"metadata-mismatch at call {call}: compiled {a.dtype}{list(a.shape)}, eager {e.dtype}{list(e.shape)}")
        if e.dtype.is_floating_point:
            rtol, atol = TOLERANCES[e.dtype]
            close = torch.allclose(a.double(), e.double(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = torch.equal(a, e)
        assert close, f"value-mismatch at call {call}: compiled\\n{a}\\neager\\n{e}"
'''

TOLERANCES = '''TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5),
              torch.float16: (1e-2, 1e-2), torch.bfloat16: (3e-2, 3e-2)}'''


def _arg_expr(arg) -> str:
    from symfuzz.fuzz.script_runtime import base_shape

    layout = arg.layout or {"kind": "contiguous"}
    kind = layout.get("kind", "contiguous")
    base = tuple(base_shape(arg.shape, layout))
    expr = f"make_input({base!r}, torch.{arg.dtype}, {arg.seed})"
    if kind == "transposed":
        a, b = layout["dims"]
        expr += f".transpose({a}, {b})"
    elif kind == "strided":
        index = ", ".join(["::" + str(layout["step"]) if d == layout["dim"] else ":" for d in range(len(arg.shape))])
        expr += f"[{index}]"
    elif kind == "expanded":
        expr += f".expand({tuple(arg.shape)!r})"
    return expr


def _mark_lines(call) -> list[str]:
    lines = []
    for a, arg in enumerate(call.args):
        for d, mark in sorted(arg.marks.items()):
            kind = mark.get("mark", "auto")
            bounds = "".join(f", {k}={mark[k]}" for k in ("min", "max") if mark.get(k) is not None)
            fn = {"dynamic": "torch._dynamo.mark_dynamic", "maybe_dynamic": "torch._dynamo.maybe_mark_dynamic",
                  "static": "torch._dynamo.mark_static", "unbacked": "torch._dynamo.decorators.mark_unbacked"}.get(kind)
            if fn is not None:
                lines.append(f"{fn}(args[{a}], {d}{bounds if kind in ('dynamic', 'unbacked') else ''})")
    return lines


def render_compact(subject) -> Optional[str]:
    """The short script for a CaseSubject, or None when its finding needs the judged repro."""
    lane, verdict, case = subject.lane, subject.verdict, subject.case
    symptom = verdict.get("symptom")
    if symptom not in COMPACT_SYMPTOMS or lane.get("runner") or lane.get("setup") or lane.get("device", "cpu") != "cpu":
        return None  # the judged repro handles devices, runners and the interpreter
    schedule = case.schedule
    compile_args = f"backend={lane['backend']!r}, dynamic={schedule.dynamic!r}"
    if lane.get("mode"):
        compile_args += f", mode={lane['mode']!r}"
    out = ["#!/usr/bin/env python",
           f'"""{symptom} under torch.compile({compile_args}) on {lane.get("device", "cpu")}.',
           "",
           f"Minified by symfuzz from finding {verdict.get('signature')} (lane {lane['name']}),",
           f"found with torch {subject.environment.get('torch')}. `python repro.py` raises while the bug is present.",
           '"""']
    if lane.get("env"):
        out.append("import os")
        out += [f"os.environ[{k!r}] = {v!r}" for k, v in sorted(lane["env"].items())]
    out += ["import math", "", "import torch", "import torch.nn.functional as F", ""]
    for key, value in sorted((lane.get("config") or {}).items()):
        out.append(f"torch._inductor.config.{key} = {value!r}")
    for key, value in sorted(schedule.config.get("dynamo", {}).items()):
        out.append(f"torch._dynamo.config.{key} = {value!r}")
    if schedule.config.get("fx"):
        out.append("import torch.fx.experimental._config")
        for key, value in sorted(schedule.config["fx"].items()):
            out.append(f"torch.fx.experimental._config.{key} = {value!r}")
    out += ["", TOLERANCES, HELPERS, "", case.source.rstrip(), "", ""]
    out.append(f"compiled = torch.compile(fn, {compile_args})")
    out.append("CALLS = [  # each call's inputs, rebuilt from seeds")
    for call in schedule.calls:
        out.append(f"    lambda: [{', '.join(_arg_expr(a) for a in call.args)}],")
    out.append("]")
    out.append("for call, make_inputs in enumerate(CALLS):")
    eager_rejects = symptom == "accepts-invalid"
    if eager_rejects:
        out += ["    eager_args = make_inputs()",
                "    try:",
                "        expected = fn(*eager_args)",
                "    except Exception as exc:",
                "        result = compiled(*make_inputs())",
                "        raise AssertionError(f\"accepts-invalid at call {call}: compiled returned, eager raised {exc!r}\")"]
    else:
        out += ["    eager_args = make_inputs()", "    expected = fn(*eager_args)"]
    out.append("    args = make_inputs()")
    marks = [_mark_lines(c) for c in schedule.calls]
    if any(marks):
        for i, lines in enumerate(marks):
            if lines:
                out.append(f"    if call == {i}:")
                out += [f"        {line}" for line in lines]
    out.append("    actual = compiled(*args)")
    out.append("    assert_same(call, (expected, eager_args), (actual, args))  # outputs, then inputs (mutation)")
    if symptom == "unsound-guard":
        out.append("# A failing call above ran a cached graph; a fresh compile at its shapes is right,")
        out.append("# so the cached graph's guards admitted shapes it is wrong for.")
    out.append('print("compiled matches eager at every call")')
    return "\n".join(out) + "\n"


def compact_matches(subject, outcome) -> bool:
    """Does a run of the short repro show the subject's failure?

    It prints no signature, so this checks what it can see: a mismatch of
    the same kind, the same exception type for a crash, the same signal or
    a timeout for a dead process.
    """
    symptom = subject.verdict.get("symptom")
    text = outcome.output[-20000:]
    if symptom == "timeout":
        return outcome.timed_out
    if symptom == "process-death":
        cause = (subject.verdict.get("evidence") or {}).get("cause")
        if cause == "out-of-memory":
            return outcome.memory_exceeded
        return outcome.signal_name == cause
    if outcome.returncode in (0, None):
        return False
    if symptom in ("value-mismatch", "metadata-mismatch", "accepts-invalid"):
        return f"AssertionError: {symptom} at call" in text
    if symptom == "unsound-guard":
        return re.search(r"AssertionError: (value|metadata)-mismatch at call", text) is not None
    if symptom == "crash":
        error = (subject.verdict.get("evidence") or {}).get("error") or {}
        name = (error.get("type") or "").rsplit(".", 1)[-1]
        last = [line for line in text.splitlines() if line.strip()][-1:]
        # The exception must come out of the compiled call, not out of eager.
        from_compiled = "actual = compiled(*args)" in text
        return bool(name) and bool(last) and from_compiled and name in last[0] and "AssertionError: " not in last[0]
    return False
