"""The body of a fake-real-mismatch finding's repro (``corpus.scripts.render_repro``), as code.

The symbolic-metadata oracle's findings compile nothing: the script traces the program once
with symbolic fake tensors (oracles/symbolic_trace.py, pasted after this body with the
runtime) and judges every call against that trace. The renderer pastes this module's source
below ``BODY_FROM``, with the finding's values written in place of the ``SLOT_`` names and
the imported constants (the exit codes, the program's prelude) as their values
(``corpus.linker.module_body``).

Above ``BODY_FROM``: the imports that resolve the body's names here, and a stand-in for each
placeholder, so that importing this module only binds names.
"""

import json
import sys

import torch

from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_INVALID, EXIT_REPRODUCED
from symfuzz.fuzz.ir import PRELUDE
from symfuzz.fuzz.script_runtime import make_args, run_call
from symfuzz.oracles.symbolic_trace import TraceFailed, judge_calls, trace_symbolic

# The placeholders, with stand-ins; in the script, the finding's values, as code.
SLOT_PROGRAM = fn = None  # the program's source (lines), which defines fn
SLOT_PROGRAM_SOURCE = ""  # the same source, as a string literal
SLOT_CALLS = "[]"  # the calls as JSON, in a raw string
SLOT_OUTPUT_OPS = []  # the op that made each output
SLOT_DEVICE = SLOT_SIGNATURE = ""  # the lane's device, the finding's signature
SLOT_COMPILE_CONFIG = {}  # the schedule's config flags
SLOT_STRIDE_PATHS = []  # oracles.symbolic_meta.stride_paths(program)

# ================================================================ the script's body: pasted from here on
# ---------------------------------------------------------------- the program
SLOT_PROGRAM
# The same program as the symbolic trace loads it: with `max`, `min` and
# `divmod` on sizes traced the way Dynamo traces them.
PROGRAM_SOURCE = SLOT_PROGRAM_SOURCE
PROGRAM_PRELUDE = PRELUDE
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(SLOT_CALLS)
OUTPUT_OPS = SLOT_OUTPUT_OPS
DEVICE = SLOT_DEVICE
EXPECTED_SIGNATURE = SLOT_SIGNATURE
# The schedule's flags (of these, the trace honours fx.use_duck_shape only).
COMPILE_CONFIG = SLOT_COMPILE_CONFIG
# Leaves whose strides torch promises (views, fresh tensors, final input states):
# they must match eager's at every comparable call; other leaves only where
# they matched at their first comparison.
STRIDE_PATHS = SLOT_STRIDE_PATHS


def main():
    print("torch", torch.__version__, "| python", sys.version.split()[0])
    try:
        trace = trace_symbolic(PROGRAM_SOURCE, CALLS[0], COMPILE_CONFIG, prelude=PROGRAM_PRELUDE)
    except TraceFailed as exc:
        print("the program cannot be traced with symbolic sizes:", exc)
        print("SYMFUZZ-RESULT " + json.dumps({"ok": None, "reason": "symbolic trace failed"}))
        return EXIT_INVALID
    judgement = judge_calls(trace, fn, CALLS, lambda index, call: run_call(fn, make_args(call, DEVICE)),
                            STRIDE_PATHS, OUTPUT_OPS)
    last = judgement.index if judgement.index is not None else len(CALLS) - 1
    for index in range(last + 1):
        if index in judgement.skipped:
            print(f"call {index}: not comparable ({judgement.skipped[index]})")
        elif index != judgement.index:
            print(f"call {index}: ok")
    if judgement.mismatch is not None:
        evidence = judgement.evidence(CALLS)
        print(f"call {judgement.index}: fake-real-mismatch (dynamo)")
        print(evidence["detail"])
        print("bindings:", evidence["bindings"], "| hint sizes:", evidence["hint_sizes"],
              "| this call's sizes:", evidence["call_sizes"])
        print("SYMFUZZ-RESULT " + json.dumps({"ok": False, "signature": judgement.signature, "call": judgement.index,
                                              "symptom": "fake-real-mismatch"}))
        return EXIT_REPRODUCED
    if not judgement.compared:
        print("SYMFUZZ-RESULT " + json.dumps({"ok": None, "reason": "no call is comparable with the trace"}))
        return EXIT_INVALID
    print("SYMFUZZ-RESULT " + json.dumps({"ok": True}))
    return EXIT_FIXED
