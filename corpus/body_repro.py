"""The body of a fuzz finding's judged repro (``corpus.scripts.render_repro``), as code.

The renderer pastes this module's source below ``BODY_FROM`` into the script, after its
head, with the finding's values written in place of the ``SLOT_`` names and the exit codes
as their numbers (``corpus.linker.module_body``); the runtime the body calls
(fuzz/script_runtime.py, and what the lane needs) is pasted after it. The script makes the
finding's calls on eager and compiled as the campaign did (``run_schedule``), judges each
(``judge_schedule_call``) and exits ``EXIT_REPRODUCED`` with the signature while the bug is
present, ``EXIT_FIXED`` once it is fixed, ``EXIT_INVALID`` on a torch that lacks what the
repro needs.

Above ``BODY_FROM``: the imports that resolve the body's names here, and a stand-in for each
placeholder, so that importing this module only binds names.
"""

import json
import sys

import torch

from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_INVALID, EXIT_REPRODUCED
from symfuzz.fuzz.script_runtime import failure_key, judge_schedule_call, run_schedule, set_compile_config, signature

# The placeholders, with stand-ins; in the script, the finding's values, as code.
SLOT_PROGRAM = fn = None  # the program's source (lines), which defines fn (a module program's, the Model class)
SLOT_CALLS = "[]"  # the calls as JSON, in a raw string
SLOT_OUTPUT_OPS = SLOT_GRADIENT_OPS = []  # the op that made each output; the ops fed by each input with a grad
SLOT_LANE = SLOT_SIGNATURE = SLOT_DEVICE = ""  # the lane's name, the finding's signature, the lane's device
SLOT_COMPILE_CONFIG = SLOT_CONTEXT = {}  # the schedule's config flags; judge_context(case)
SLOT_EXPECT_REUSE = []  # the calls that must not recompile (an excess-recompiles finding's)
SLOT_CONFIGURE = None  # configure()'s lines: the lane's setup and Inductor config, a module program's eager fn
SLOT_COMPILED = None  # the compiled side: torch.compile(fn, ...), a ModuleSide or an exported runner
SLOT_WATCH = None  # an unsound-recompile finding's RecompileWatch, else None
SLOT_FRESH_COMPILE = None  # how a failing reused call is compiled afresh, to tell an unsound guard

# ================================================================ the script's body: pasted from here on
# ---------------------------------------------------------------- the program
SLOT_PROGRAM
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(SLOT_CALLS)
OUTPUT_OPS = SLOT_OUTPUT_OPS
GRADIENT_OPS = SLOT_GRADIENT_OPS
LANE = SLOT_LANE
EXPECTED_SIGNATURE = SLOT_SIGNATURE
# Dynamo / ShapeEnv flags the schedule sets around compile and calls.
COMPILE_CONFIG = SLOT_COMPILE_CONFIG
# constrained: the schedule marks dims or sets flags, so torch may refuse it;
# demands_specialization: the program itself compares sizes.
CONTEXT = SLOT_CONTEXT
# Calls that every guard of the cached graph admits: they must not recompile.
EXPECT_REUSE = SLOT_EXPECT_REUSE


def configure():
    SLOT_CONFIGURE


# What each dynamism mark needs from torch: an older torch (a reference environment,
# say) may lack some, and is told so instead of crashing.
MARK_APIS = {"dynamic": "_dynamo.mark_dynamic", "maybe_dynamic": "_dynamo.maybe_mark_dynamic",
             "static": "_dynamo.mark_static", "unbacked": "_dynamo.decorators.mark_unbacked"}


def missing_torch_features():
    needed = ["compile", "_dynamo"] + sorted({MARK_APIS[m.get("mark")] for call in CALLS for arg in call["args"]
                                              for m in (arg.get("marks") or {}).values() if m.get("mark") in MARK_APIS})
    missing = []
    for path in needed:
        head, _, rest = path.partition(".")
        try:
            if head.startswith("_"):  # a submodule: imported here, whether or not torch imports it eagerly
                __import__("torch." + head)
            obj = getattr(torch, head, None)
        except ImportError:
            obj = None
        for part in filter(None, rest.split(".")):
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append("torch." + path)
    return missing


def main():
    print("torch", torch.__version__, "| triton", _installed_triton_version(), "| python", sys.version.split()[0])
    missing = missing_torch_features()
    if missing:
        print(f"this torch ({torch.__version__}) lacks what this repro needs: {', '.join(missing)}")
        print("SYMFUZZ-RESULT " + json.dumps({"ok": None, "unsupported": missing}))
        return EXIT_INVALID
    configure()
    skipped = set_compile_config(COMPILE_CONFIG).skipped
    if skipped:
        print("note: this torch lacks config flags", skipped)
    compiled = SLOT_COMPILED
    if __import__("os").environ.get("SYMFUZZ_EAGER_ONLY"):  # how long eager alone takes (hang or slow?)
        compiled = fn
    # An unsound-recompile repro asks the guard managers before each call, as the campaign did.
    watch = SLOT_WATCH
    records = run_schedule(fn, compiled, CALLS, SLOT_DEVICE, before_call=watch and watch.before_call,
                           on_call=watch and (lambda index, eager, result: watch.after_call(index, result)))
    for index, (eager, result) in enumerate(records):
        failure, key = judge_schedule_call(fn, SLOT_FRESH_COMPILE, CALLS, index, eager, result,
                                           SLOT_DEVICE, CONTEXT, EXPECT_REUSE, OUTPUT_OPS, GRADIENT_OPS)
        if failure is not None and failure["symptom"] == "accepts-invalid" and index in CONTEXT.get("dead_code_calls", ()):
            print(f"call {index}: eager raised only in code nobody reads, which compiled may drop: passed over")
            continue
        if failure is None:
            print(f"call {index}: ok (graphs compiled during call: {result.get('graphs')})")
            continue
        key = key if key is not None else failure_key(failure, OUTPUT_OPS, GRADIENT_OPS)
        sig = signature(failure["symptom"], LANE, key)
        print(f"call {index}: {failure['symptom']} ({failure.get('stage')})")
        if "error" in failure:
            print(failure["error"]["traceback"])
        print(failure.get("detail", ""))
        print("SYMFUZZ-RESULT " + json.dumps({"ok": False, "signature": sig, "call": index, "symptom": failure["symptom"]}))
        return EXIT_REPRODUCED
    print("SYMFUZZ-RESULT " + json.dumps({"ok": True}))
    return EXIT_FIXED


def _installed_triton_version():
    try:
        import triton  # optional: the repro runs without it

        return triton.__version__
    except ImportError:
        return None
