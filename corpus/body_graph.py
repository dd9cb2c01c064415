"""The body of the repro of a graph captured from a user's script (``corpus.scripts.render_graph_repro``), as code.

The minifier's graph subjects and their checkpoints: the graph as ``fn``, its inputs rebuilt
by ``make_inputs``, compiled with the captured backend. A crash, or with accuracy judged a
difference from eager (``accuracy_check``), prints ``SYMFUZZ-RESULT`` with a signature and
exits ``EXIT_REPRODUCED``; eager failing exits ``EXIT_INVALID``. The renderer pastes this
module's source below ``BODY_FROM``, with the graph's values written in place of the
``SLOT_`` names and the exit codes as their numbers (``corpus.linker.module_body``); the runtime
pieces it calls are pasted after it.

Above ``BODY_FROM``: the imports that resolve the body's names here, a stand-in for each
placeholder, so that importing this module only binds names, and ``accuracy_check``.
"""

# main() assigns expected and actual for the check pasted in place of SLOT_ACCURACY_CHECK, when there is one.
# ruff: noqa: F841

import json
import traceback

import torch

from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_INVALID, EXIT_REPRODUCED
from symfuzz.fuzz.script_runtime import compare, normalize_message, reference_call, signature, snapshot

# The placeholders, with stand-ins; in the script, the graph's values, as code.
SLOT_BACKEND = ""  # the backend's name
SLOT_FUNCTION = fn = None  # the graph, as `def fn(...)`
SLOT_MAKE_INPUTS = make_inputs = None  # `def make_inputs()`, which builds fresh inputs
SLOT_GRAD_ENABLED = True
SLOT_MARKS = None  # the mark_dynamic lines on `inputs`
SLOT_COMPILED = None  # torch.compile(fn, backend=BACKEND, and the graph's compile options)
SLOT_ACCURACY_CHECK = None  # accuracy_check's body when the repro judges accuracy, else nothing


def accuracy_check(expected, actual):
    """main()'s check of compiled against eager, pasted as SLOT_ACCURACY_CHECK (``corpus.linker.function_body``)."""
    # Outputs that differ from eager only by rounding are judged against a float64 run.
    reference = lambda: (reference_call(fn, make_inputs()).get("out") or (None,))[0]
    diff = compare(snapshot(expected), snapshot(actual), reference)
    if diff is not None:
        print(f"compiled differs from eager at {diff['path']}: {diff['detail']}")
        return fail(diff["symptom"], key=diff["symptom"], detail=f"{diff['path']}: {diff['detail']}")

# ================================================================ the script's body: pasted from here on
BACKEND = SLOT_BACKEND


SLOT_FUNCTION


SLOT_MAKE_INPUTS


def main():
    torch.set_grad_enabled(SLOT_GRAD_ENABLED)
    try:
        expected = fn(*make_inputs())
    except Exception as exc:  # the program itself is invalid: nothing to judge
        traceback.print_exc()
        return finish({"ok": None, "invalid": "eager fails", "error": describe(exc)}, EXIT_INVALID)
    inputs = make_inputs()
    SLOT_MARKS
    compiled = SLOT_COMPILED
    try:
        actual = compiled(*inputs)
    except Exception as exc:
        traceback.print_exc()
        return fail("crash", describe(exc), key=f"{type(exc).__module__}.{type(exc).__qualname__}|"
                                                f"{normalize_message(str(exc))}")
    SLOT_ACCURACY_CHECK
    print("compiled ran without failing")
    return finish({"ok": True}, EXIT_FIXED)


def describe(exc):
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc)[:2000]}


def fail(symptom, error=None, key="", detail=""):
    result = {"ok": False, "symptom": symptom, "signature": signature(symptom, BACKEND, key)}
    if error is not None:
        result["error"] = error
    if detail:
        result["detail"] = detail
    return finish(result, EXIT_REPRODUCED)


def finish(result, code):
    print("SYMFUZZ-RESULT " + json.dumps(result))
    return code
