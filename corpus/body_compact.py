"""The body of a minified module program's short repro (``corpus.scripts.render_compact``), as code.

The flags and the ``Model`` class, then ``main()``: eager and compiled each run their own
model (``module_runtime.ModuleSide``, pasted after the body with the runtime pieces), and
after each call ``compare`` judges the outputs, inputs, gradients and the models' parameters
and buffers; the first difference raises. The renderer pastes this module's source below
``BODY_FROM``, with the finding's values written in place of the ``SLOT_`` names
(``corpus.linker.module_body``), and main()'s eager call from ``eager_call`` or, for an
accepts-invalid finding, ``eager_call_accepting_invalid`` (``corpus.linker.function_body``).

Above ``BODY_FROM``: the imports that resolve the body's names here, a stand-in for each
placeholder, so that importing this module only binds names, and those two functions.
"""

# The eager call pasted into main() binds expected there; these functions bind what they do not use.
# ruff: noqa: F841

import torch

from symfuzz.fuzz.module_runtime import ModuleSide
from symfuzz.fuzz.script_runtime import compare, name_gradient, reference_call

# The placeholders, with stand-ins; in the script, the finding's values, as code.
SLOT_CONFIG = None  # lines that set the lane's Inductor config and the schedule's flags (compile_config_lines)
SLOT_PROGRAM = Model = None  # the program's source, which defines the Model class
SLOT_STEP_NOTE = None  # main()'s comment line on the calls: training steps or not
SLOT_STEP = None  # the training step's spec, or None
SLOT_COMPILE_ARGS = None  # torch.compile's keyword arguments: backend, dynamic, mode
SLOT_EAGER_CALL = expected = None  # the body of one of the functions below, which binds expected
SLOT_MARKS = None  # the calls' dynamism marks on args, each under `if call == <its index>:`
SLOT_REFERENCE = reference_call  # or float64_call, where every compared leaf is a float (no rounding to explain)
SLOT_CALLS = None  # each call's line: (training?, lambda: [its inputs, rebuilt from seeds]),


def eager_call(eager, eager_args):
    """main()'s eager side of a call."""
    expected = eager.call_tree(eager_args)


def eager_call_accepting_invalid(eager, eager_args, compiled, make_inputs, call):
    """main()'s eager side of a call for an accepts-invalid finding: where eager raises, compiled must too."""
    try:
        expected = eager.call_tree(eager_args)
    except Exception as exc:
        result = compiled(*make_inputs())
        raise AssertionError(f"accepts-invalid at call {call}: compiled returned, eager raised {exc!r}")

# ================================================================ the script's body: pasted from here on
SLOT_CONFIG

SLOT_PROGRAM


def main():
    # Eager and compiled each run their own Model, built alike; its parameters and buffers carry over
    SLOT_STEP_NOTE
    eager, side = ModuleSide(Model, None, SLOT_STEP), ModuleSide(Model, lambda model: torch.compile(model, SLOT_COMPILE_ARGS), SLOT_STEP)
    compiled = lambda *args: side.call_tree(args)  # outputs, inputs, gradients, then the model's state
    for call, (training, make_inputs) in enumerate(CALLS):
        for model_side in (eager, side):
            model_side.begin_call(call, {"training": training})  # train or eval mode
        eager_args = make_inputs()
        SLOT_EAGER_CALL
        args = make_inputs()
        SLOT_MARKS
        actual = compiled(*args)
        # Beyond tolerance, compared with a float64 run from the state eager started this call from.
        diff = name_gradient(compare(expected, actual, lambda: SLOT_REFERENCE(eager.replay(call), make_inputs()).get("out")))
        if diff is not None:
            raise AssertionError(f"{diff['symptom']} at call {call}: {diff['path']}: {diff['detail']}")
    print("compiled matches eager at every call")


CALLS = [  # each call's mode (train?) and inputs, rebuilt from seeds
    SLOT_CALLS
]
