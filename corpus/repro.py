"""Render a Finding as a standalone ``repro.py`` that needs only torch.

The script holds the program source, the calls in order (seeded inputs),
the compile call, and the same judging code the campaign used (inlined from
``oracles.standalone``). It exits 1 while the bug is present, 0 once fixed,
2 if it cannot run at all (e.g. eager rejects every call), and its last line
is ``SYMFUZZ-RESULT {json}`` for tools.

A ``fake-real-mismatch`` finding (the symbolic-metadata oracle) gets a script
that compiles nothing (``SYMBOLIC_TEMPLATE``): it inlines
``oracles.symbolic_trace`` and judges the calls against one symbolic trace,
as the oracle did.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

def _module_path(name: str) -> Path:
    """The source file of a project module, found without importing it."""
    return Path(importlib.util.find_spec(name).origin)


EXIT_FIXED, EXIT_REPRODUCED = 0, 1

TEMPLATE = '''#!/usr/bin/env python
"""symfuzz repro: {headline}

Lane: {lane_name} ({lane_desc}); {how}.
Found with torch {torch_version}. Run it with plain `python repro.py`:
exit 1 while the bug is present, 0 once it is fixed.
"""
import os

# Lane environment; must be set before torch is imported.
{env_lines}
import json
import sys

import math
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- the program
{source}
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(r"""
{calls}
""")
OUTPUT_OPS = {output_ops}
LANE = {lane_name!r}
EXPECTED_SIGNATURE = {signature!r}
# Dynamo / ShapeEnv flags the schedule sets around compile and calls.
COMPILE_CONFIG = {compile_config}
# constrained: the schedule marks dims or sets flags, so torch may refuse it;
# demands_specialization: the program itself compares sizes.
CONTEXT = {context}
# Calls that every guard of the cached graph admits: they must not recompile.
EXPECT_REUSE = {expect_reuse}


def configure():
{config_lines}


def main():
    print("torch", torch.__version__, "| triton", _installed_triton_version(), "| python", sys.version.split()[0])
    configure()
    skipped = set_compile_config(COMPILE_CONFIG).skipped
    if skipped:
        print("note: this torch lacks config flags", skipped)
    compiled = {make_compiled}
    records = run_schedule(fn, compiled, CALLS, {device!r})
    for index, (eager, result) in enumerate(records):
        failure, key = judge_schedule_call(fn, {fresh_compile}, CALLS, index, eager, result,
                                           {device!r}, CONTEXT, EXPECT_REUSE, OUTPUT_OPS)
        if failure is None:
            print(f"call {{index}}: ok (graphs compiled during call: {{result.get('graphs')}})")
            continue
        key = key if key is not None else failure_key(failure, OUTPUT_OPS)
        sig = signature(failure["symptom"], LANE, key)
        print(f"call {{index}}: {{failure['symptom']}} ({{failure.get('stage')}})")
        if "error" in failure:
            print(failure["error"]["traceback"])
        print(failure.get("detail", ""))
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "signature": sig, "call": index, "symptom": failure["symptom"]}}))
        return {exit_reproduced}
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
    return {exit_fixed}


def _installed_triton_version():
    try:
        import triton

        return triton.__version__
    except ImportError:
        return None


# ---------------------------------------------------------------- symfuzz helpers
# Inlined from symfuzz's oracles/standalone.py so that this script needs only torch.
{standalone}
{extra}

if __name__ == "__main__":
    sys.exit(main())
'''


# fake-real-mismatch findings (the symbolic-metadata oracle): nothing is compiled.
# The script traces the program once with symbolic fake tensors and judges every
# call against that trace, with oracles/symbolic_trace.py inlined.
SYMBOLIC_TEMPLATE = '''#!/usr/bin/env python
"""symfuzz repro: {headline}

Oracle: symbolic-metadata (found on lane {lane_name}; the check does not depend on the lane).
Nothing is compiled: the program is traced once with FakeTensor + ShapeEnv symbolic
sizes (hinted by the first call), and the trace's sizes, strides and dtypes,
evaluated at each call's input sizes, are compared with what eager produced on
that call, as the compiler's fake-tensor propagation would promise them.
Found with torch {torch_version}. Run it with plain `python repro.py`:
exit 1 while the bug is present, 0 once it is fixed, 2 if nothing can be judged.
"""
import json
import sys

import math
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- the program
{source}
# The same program as the symbolic trace loads it: with `max`, `min` and
# `divmod` on sizes traced the way Dynamo traces them.
PROGRAM_SOURCE = {source_literal}
PROGRAM_PRELUDE = {prelude!r}
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(r"""
{calls}
""")
OUTPUT_OPS = {output_ops}
DEVICE = {device!r}
EXPECTED_SIGNATURE = {signature!r}
# The schedule's flags (of these, the trace honours fx.use_duck_shape only).
COMPILE_CONFIG = {compile_config}
# Leaves whose strides torch promises (views, fresh tensors, final input states):
# they must match eager's at every comparable call; other leaves only where
# they matched at their first comparison.
STRIDE_PATHS = {stride_paths}


def main():
    print("torch", torch.__version__, "| python", sys.version.split()[0])
    try:
        trace = trace_symbolic(PROGRAM_SOURCE, CALLS[0], COMPILE_CONFIG, prelude=PROGRAM_PRELUDE)
    except TraceFailed as exc:
        print("the program cannot be traced with symbolic sizes:", exc)
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": None, "reason": "symbolic trace failed"}}))
        return 2
    judgement = judge_calls(trace, fn, CALLS, lambda index, call: run_call(fn, make_args(call, DEVICE)),
                            STRIDE_PATHS, OUTPUT_OPS)
    last = judgement.index if judgement.index is not None else len(CALLS) - 1
    for index in range(last + 1):
        if index in judgement.skipped:
            print(f"call {{index}}: not comparable ({{judgement.skipped[index]}})")
        elif index != judgement.index:
            print(f"call {{index}}: ok")
    if judgement.mismatch is not None:
        evidence = judgement.evidence(CALLS)
        print(f"call {{judgement.index}}: fake-real-mismatch (dynamo)")
        print(evidence["detail"])
        print("bindings:", evidence["bindings"], "| hint sizes:", evidence["hint_sizes"],
              "| this call's sizes:", evidence["call_sizes"])
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "signature": judgement.signature, "call": judgement.index,
                                              "symptom": "fake-real-mismatch"}}))
        return {exit_reproduced}
    if not judgement.compared:
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": None, "reason": "no call is comparable with the trace"}}))
        return 2
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
    return {exit_fixed}


# ---------------------------------------------------------------- symfuzz helpers
# Inlined from symfuzz's oracles/standalone.py and oracles/symbolic_trace.py
# so that this script needs only torch.
{standalone}
{symbolic_trace}

if __name__ == "__main__":
    sys.exit(main())
'''


def _strip_module_docstring(text: str) -> str:
    if text.startswith('"""'):
        end = text.index('"""', 3)
        return text[end + 3 :].lstrip("\n")
    return text


def _judge_context(case) -> dict:
    from symfuzz.oracles.lanes.execute import judge_context

    return judge_context(case)


def _inline_symbolic_trace() -> str:
    """oracles/symbolic_trace.py without its docstring and its one import of
    standalone's names (the inlined standalone.py defines them)."""
    text = _strip_module_docstring(_module_path("symfuzz.oracles.symbolic_trace").read_text())
    text, n = re.subn(r"^from symfuzz\.fuzz\.script_runtime import [^\n]*\n", "", text, flags=re.MULTILINE)
    if n != 1 or re.search(r"^\s*(from\s+\.|(from|import)\s+symfuzz\b)", text, re.MULTILINE):
        raise RuntimeError("oracles/symbolic_trace.py must import only stdlib, torch, sympy and standalone's names")
    return text


def _render_symbolic_repro(finding, case) -> str:
    from symfuzz.oracles.lanes.execute import PROGRAM_GLOBALS_SOURCE
    from symfuzz.oracles.symbolic_meta import stride_paths

    verdict = finding.verdict
    lane = finding.lane
    return SYMBOLIC_TEMPLATE.format(
        headline=f"{verdict.symptom} ({verdict.stage}) [{verdict.signature}]",
        lane_name=lane["name"],
        torch_version=finding.environment.get("torch"),
        source=case.source,
        source_literal=repr(case.source),
        prelude=PROGRAM_GLOBALS_SOURCE,
        calls=json.dumps([c.to_json() for c in case.schedule.calls], indent=1),
        output_ops=json.dumps(case.output_ops()),
        device=lane.get("device", "cpu"),
        signature=verdict.signature,
        compile_config=repr(case.schedule.config),
        stride_paths=repr(sorted(stride_paths(case.program))),
        exit_reproduced=EXIT_REPRODUCED,
        exit_fixed=EXIT_FIXED,
        standalone=_strip_module_docstring(_module_path("symfuzz.fuzz.script_runtime").read_text()),
        symbolic_trace=_inline_symbolic_trace(),
    )


def render_repro(finding) -> str:
    from symfuzz.fuzz.case import Case

    case = Case.from_json(finding.case)
    if finding.verdict.symptom == "fake-real-mismatch":
        return _render_symbolic_repro(finding, case)
    lane = finding.lane
    verdict = finding.verdict
    env_lines = "\n".join(f"os.environ[{k!r}] = {v!r}" for k, v in sorted((lane.get("env") or {}).items())) or "pass"
    config_lines = []
    extra = ""
    if lane.get("setup") == "triton-interpreter":
        extra = _strip_module_docstring(_module_path("symfuzz.oracles.lanes.triton_cpu").read_text())
        config_lines.append("    enable_triton_interpreter()")
    if lane.get("config"):
        config_lines.append("    import torch._inductor.config as inductor_config")
        for key, value in sorted(lane["config"].items()):
            config_lines.append(f"    if hasattr(inductor_config, {key!r}):")
            config_lines.append(f"        inductor_config.{key} = {value!r}")
    if not config_lines:
        config_lines.append("    pass")
    compile_args = f"backend={lane['backend']!r}, dynamic={case.schedule.dynamic!r}"
    if lane.get("mode"):
        compile_args += f", mode={lane['mode']!r}"
    make_compiled = f"torch.compile(fn, {compile_args})"
    # The fresh recheck of a failing reused call compiles with dynamic=True: the
    # reused graph was symbolic, and a static fresh compile would hide a
    # dynamic-shape kernel bug behind an "unsound guard" (oracles/execute.py).
    fresh_args = f"backend={lane['backend']!r}, dynamic=True" + (f", mode={lane['mode']!r}" if lane.get("mode") else "")
    fresh_compile = f"lambda: torch.compile(fn, {fresh_args})"
    how = f"torch.compile(dynamic={case.schedule.dynamic!r})"
    if lane.get("runner"):
        # torch.export lanes: the runner (oracles/export_runner.py, inlined) exports at the
        # first call and runs the exported artifact on every call, as the campaign did.
        from symfuzz.oracles.lanes.runners import ARTIFACTS, runner_spec

        extra = _strip_module_docstring(_module_path("symfuzz.oracles.lanes.export_runner").read_text())
        artifact = ARTIFACTS[lane["runner"]]
        make_compiled = (f"build_exported_runner(fn, {runner_spec(case)!r}, CALLS, make_args, "
                         f"{lane.get('device', 'cpu')!r}, artifact={artifact!r})")
        fresh_compile = "no_fresh_compile"
        how = f"torch.export.export, then {'AOTInductor' if artifact == 'aoti' else 'ExportedProgram.module()'}"
    calls = json.dumps([c.to_json() for c in case.schedule.calls], indent=1)
    return TEMPLATE.format(
        headline=f"{verdict.symptom} ({verdict.stage}) [{verdict.signature}]",
        lane_name=lane["name"],
        lane_desc=lane.get("backend"),
        torch_version=finding.environment.get("torch"),
        env_lines=env_lines,
        source=case.source,
        calls=calls,
        output_ops=json.dumps(case.output_ops()),
        compile_config=repr(case.schedule.config),
        context=repr(_judge_context(case)),
        expect_reuse=repr([verdict.call_index] if verdict.symptom == "excess-recompiles" else []),
        signature=verdict.signature,
        config_lines="\n".join(config_lines),
        make_compiled=make_compiled,
        fresh_compile=fresh_compile,
        how=how,
        device=lane.get("device", "cpu"),
        exit_reproduced=EXIT_REPRODUCED,
        exit_fixed=EXIT_FIXED,
        standalone=_strip_module_docstring(_module_path("symfuzz.fuzz.script_runtime").read_text()),
        extra=extra,
    )
