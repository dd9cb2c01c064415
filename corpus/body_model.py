"""The body of a model finding's repro (``corpus.scripts.render_model_repro``), as code.

The renderer pastes this module's source below ``BODY_FROM`` into the script, after its head,
with the finding's values written in place of the ``SLOT_`` names; the model runtime the body
calls (fuzz/model_runtime.py) is pasted after it. The script builds the architecture from its
config class (transformers), makes the case's calls on eager and compiled as the campaign did
(``run_model_schedule``), judges the run with the campaign's own judging function
(``judge_model_run``) and exits ``EXIT_REPRODUCED`` with the signature while the bug is present,
``EXIT_FIXED`` once it is fixed, ``EXIT_INVALID`` where transformers is missing.

Above ``BODY_FROM``: the imports that resolve the body's names here, and a stand-in for each
placeholder, so that importing this module only binds names.
"""

import json
import sys

import torch

from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_INVALID, EXIT_REPRODUCED
from symfuzz.fuzz.model_judge import judge_model_run, model_signature
from symfuzz.fuzz.model_runtime import run_model_schedule

# The placeholders, with stand-ins; in the script, the finding's values, as code.
SLOT_ARCH = ""  # the architecture
SLOT_CLASSES = ()  # its config class and model class in transformers
SLOT_CONFIG = {}  # the config class's keyword arguments
SLOT_CALLS = []  # the calls, one a line
SLOT_CASE = {}  # the rest of the case: seed, dtype, attention, dynamic=, the training step
SLOT_LANE = SLOT_SIGNATURE = SLOT_BACKEND = SLOT_DEVICE = ""
SLOT_MODE = None
SLOT_CONFIGURE = None  # configure()'s lines: the lane's Inductor config

# ================================================================ the script's body: pasted from here on
# ---------------------------------------------------------------- the model: a real architecture, random weights
# The model is transformers' model class built from its config class with CONFIG, its weights drawn
# from CASE["seed"] (build_model, below).
CLASSES = SLOT_CLASSES
CONFIG = SLOT_CONFIG
# ---------------------------------------------------------------- the calls, in order, to one compiled model
CALLS = SLOT_CALLS
CASE = {"kind": "model", "arch": SLOT_ARCH, "config": CONFIG, "calls": CALLS, **SLOT_CASE}
LANE, BACKEND, MODE, DEVICE = SLOT_LANE, SLOT_BACKEND, SLOT_MODE, SLOT_DEVICE
EXPECTED_SIGNATURE = SLOT_SIGNATURE


def configure():
    SLOT_CONFIGURE


def main():
    import os  # (the script's head imports it only where the lane sets an environment)

    try:
        import transformers  # the model's library: the repro needs it beside torch
    except ImportError as exc:
        print(f"this repro needs transformers beside torch: {exc}")
        print("SYMFUZZ-RESULT " + json.dumps({"ok": None, "unsupported": ["transformers"]}))
        return EXIT_INVALID
    print("torch", torch.__version__, "| transformers", transformers.__version__, "| python", sys.version.split()[0])
    configure()
    backend = "eager_only" if os.environ.get("SYMFUZZ_EAGER_ONLY") else BACKEND  # how long eager alone takes
    entries = run_model_schedule(CASE, backend, MODE, DEVICE)
    failures, notes = judge_model_run(CASE, entries, device=DEVICE)
    for note in notes:
        print("note (the model's own business, not judged):", note["detail"])
    for entry in entries:
        c = entry["compiled"]
        print(f"call {entry['call']} step {entry['step']} ({entry['kind']}): graphs compiled {c.get('graphs')}"
              + (f"; compiled raised {c['error']['type']}" if "error" in c else ""))
    if not failures:
        print("SYMFUZZ-RESULT " + json.dumps({"ok": True}))
        return EXIT_FIXED
    failure = failures[0]
    sig = model_signature(CASE, failure, LANE)
    print(f"call {failure['call']} step {failure['step']}: {failure['symptom']} ({failure.get('stage')})")
    if "error" in failure:
        print(failure["error"]["traceback"])
    print(failure.get("detail", ""))
    print("SYMFUZZ-RESULT " + json.dumps({"ok": False, "signature": sig, "call": failure["call"],
                                         "symptom": failure["symptom"]}))
    return EXIT_REPRODUCED
