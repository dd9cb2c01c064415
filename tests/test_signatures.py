"""Finding signatures are stable (one bug, one signature, whatever program, sizes,
seed or process shows it) and precise (two bugs, two signatures), on real runs.

Each bug is planted in the Dynamo-only "eager" backend for the length of one
test (the way tests/plants/sitecustomize.py plants them in other processes);
the cases are real ``Case`` objects run by ``execute`` on the eager lane and
judged by the real oracles, exactly as a campaign's worker does.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch
from torch._dynamo.backends import registry

from symfuzz.corpus.deaths import ask_for_stack, death_signature, place_of
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.runtime import running
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import BranchNode, ExprNode, Input, OpNode, Program
from symfuzz.oracles.crash import crash_oracle
from symfuzz.oracles.differential import differential_oracle
from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import Died, Hung, Verdict

from conftest import ROOT, planted_env
from symfuzz.corpus.inductor_cache import fresh_cache

EAGER = get_lane("eager")


# ---------------------------------------------------------------- planted bugs


def _each_output(change):
    """A backend like "eager" whose compiled graphs return ``change(t)`` for each output ``t``."""
    original = registry.lookup_backend("eager")

    def backend(gm, example_inputs):
        compiled = original(gm, example_inputs)

        def wrong(*args):
            outs = compiled(*args)
            return type(outs)(change(t) for t in outs) if isinstance(outs, (list, tuple)) else change(outs)

        return wrong

    return backend


def _nan_first(t):
    t = t.clone()
    t.view(-1)[0] = float("nan")
    return t


BUGS = {
    "plus-one-float": _each_output(lambda t: t + 1 if t.is_floating_point() else t),
    "plus-one-int": _each_output(lambda t: t + 1 if not t.is_floating_point() and t.dtype != torch.bool else t),
    "nan-first": _each_output(lambda t: _nan_first(t) if t.is_floating_point() else t),
    "to-float64": _each_output(lambda t: t.double() if t.dtype == torch.float32 else t),
    "drop-last-column": _each_output(lambda t: t[..., :-1]),
    "extra-dim": _each_output(lambda t: t.unsqueeze(0)),
}


def _crashing(headline):
    """A backend that refuses every graph with ``headline`` and volatile details:
    a temp folder, an address, the input's real and traced sizes (symbols
    like s77 where dynamic), a line number."""

    def backend(gm, example_inputs):
        real = next(x for x in example_inputs if isinstance(x, torch.Tensor)).shape
        traced = next(n.meta["example_value"] for n in gm.graph.nodes
                      if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.Tensor)).shape
        with tempfile.TemporaryDirectory() as tmp:
            raise RuntimeError(f"{headline} for input of {real} traced as {traced} at {hex(id(gm))}, "
                               f"see {tmp}/kernel.cpp line {len(gm.code)}")

    return backend


@pytest.fixture
def plant(monkeypatch):
    """plant(backend): the "eager" backend is ``backend`` until the test ends."""
    return lambda backend: monkeypatch.setitem(registry._COMPILER_FNS, "eager", backend)


# ---------------------------------------------------------------- real cases


def case_of(ops, dtype="float32", shapes=((3, 4), (5, 4)), seed=1, dynamic=True):
    """``x -> ops[0] -> ops[1] -> ...``, called once per shape (all of one rank)."""
    dims = tuple(f"s{d}" for d in range(len(shapes[0])))
    body, last = [], "x0"
    for i, op in enumerate(ops):
        body.append(OpNode(f"v{i + 1}", op, (last,)))
        last = f"v{i + 1}"
    program = Program((Input("x0", dtype, dims),), tuple(body), (last,))
    calls = tuple(Call((ArgSpec(tuple(shape), dtype, seed + i),)) for i, shape in enumerate(shapes))
    return Case(program, Schedule(dynamic, calls))


def judged(case, oracle=differential_oracle):
    verdict = oracle(case, execute(case, EAGER))
    assert not verdict.ok, "the planted bug was not found"
    return verdict


# ---------------------------------------------------------------- stability


def test_one_value_bug_has_one_signature_across_programs_sizes_dtypes_and_seeds(plant):
    plant(BUGS["plus-one-float"])
    verdicts = [
        judged(case_of(["abs", "tanh"])),
        judged(case_of(["neg", "exp", "tanh"], dtype="float64", shapes=((7,), (2,)), seed=40)),
        judged(case_of(["tanh"], dtype="bfloat16", shapes=((2, 3, 5),), dynamic=None)),
    ]
    assert {v.symptom for v in verdicts} == {"value-mismatch"}
    assert len({v.signature for v in verdicts}) == 1, [v.evidence.detail for v in verdicts]


def test_one_metadata_bug_has_one_signature_at_every_rank(plant):
    """The minifier lowers ranks and shrinks sizes: the key names neither."""
    plant(BUGS["extra-dim"])
    a = judged(case_of(["tanh"], shapes=((3,), (6,))))
    b = judged(case_of(["abs", "tanh"], shapes=((2, 3, 4),), seed=9))
    assert a.symptom == b.symptom == "metadata-mismatch" and a.signature == b.signature
    plant(BUGS["drop-last-column"])
    c = judged(case_of(["tanh"], shapes=((3, 5),)))
    d = judged(case_of(["exp", "tanh"], shapes=((4,), (9,)), seed=5))
    assert c.signature == d.signature and c.signature != a.signature


def test_one_crash_has_one_signature_whatever_its_message_says_of_sizes_paths_and_addresses(plant):
    plant(_crashing("planted: no kernel"))
    a = judged(case_of(["tanh"], shapes=((3, 4),)), crash_oracle)
    b = judged(case_of(["abs", "tanh"], shapes=((6,), (2,)), dynamic=None), crash_oracle)
    message_a, message_b = a.evidence.error["message"], b.evidence.error["message"]
    assert message_a != message_b  # other sizes, temp folder, address: the raw messages differ
    assert a.symptom == b.symptom == "crash" and a.signature == b.signature


@pytest.mark.parametrize("messages", [
    ["RuntimeError: failed in /tmp/tmpab12cd/k.cpp line 123 at 0x7f3a2c001e40, cannot write /tmp/tmpab12cd",
     "RuntimeError: failed in /tmp/tmpzq9xyw/k.cpp line 7 at 0x55d0c0ffee00, cannot write /tmp/tmpzq9xyw"],
    ["AssertionError: expected size s0 == 3 for L['x0'].size()[0], got torch.Size([3, 4])",
     "AssertionError: expected size u12 == 17 for L['x3'].size()[1], got torch.Size([17, 4, 2])"],
    ["LoweringException: bad index in buf3 from add_1 (stride (4, 1), offset -2, value 1.5e-05)",
     "LoweringException: bad index in buf12 from add (stride (1,), offset 0, value 3)"],
    ["OSError: cannot load /tmp/torchinductor_ci/c3/cc3xyzbq7lmno2pqrstuv4wxyz5abcd6efgh.so",
     "OSError: cannot load /home/me/.cache/torchinductor_me/ab/cabzzzzzz9qqqqqqq8wwwwwww7vvvvv.so"],
    # Dynamo's guard comments quote the program's line, which a campaign and a repro render differently.
    ["AssertionError: Guard failed on the same frame it was created. Guard fail reason: 0/0: 0 <= k4  #   "
     "# <symfuzz program>:7 in fn (_dynamo/variables/builder.py:3222 in wrap_symint)",
     "AssertionError: Guard failed on the same frame it was created. Guard fail reason: 0/0: 0 <= k4  "
     "# v3 = x2 + k4  # /tmp/symfuzz-minify-n_j3xoln/repro.py:28 in fn (_dynamo/variables/builder.py:3222 in "
     "wrap_symint)"],
    # Which outputs a graph returns changes with every statement the minifier drops.
    ["PendingUnbackedSymbolNotFound: Pending unbacked symbols {u2} not in returned outputs "
     "[FakeTensor(..., size=(s39,)), s39] .",
     "PendingUnbackedSymbolNotFound: Pending unbacked symbols {u0} not in returned outputs "
     "[FakeTensor(..., size=(s1, 4), dtype=torch.int64), FakeTensor(..., size=()), s1] ."],
])
def test_messages_of_one_bug_normalize_to_one_key(messages):
    keys = {script_runtime.normalize_message(m) for m in messages}
    assert len(keys) == 1, keys


@pytest.mark.parametrize("a,b", [
    ("RuntimeError: expected float32 but got int64", "RuntimeError: expected float64 but got int32"),
    ("IndexError: index 3 is out of bounds for dimension 0", "IndexError: index 3 is out of bounds for dimension s0"),
    ("RuntimeError: bad size Eq(s0, 3)", "RuntimeError: bad size Eq(s0, s1)"),
    ("AssertionError: Guard fail reason: 0/0: 0 <= k4  # v = x + k4  # /tmp/a/repro.py:28 in fn",
     "AssertionError: Guard fail reason: 0/0: Eq(k4, 0)  # v = x + k4  # /tmp/a/repro.py:28 in fn"),
])
def test_messages_of_different_bugs_keep_apart(a, b):
    """What is erased is what varies within one bug: dtypes, a static against a
    symbolic size, the structure of a guard stay."""
    assert script_runtime.normalize_message(a) != script_runtime.normalize_message(b)


def test_two_processes_give_one_signature_and_the_repro_script_agrees(plant):
    """The same bug judged here, in another process (another hash seed, the bug
    planted by tests/plants), and by the finding's repro script in a third gives
    one signature: the contract a CI baseline of signatures relies on."""
    case = case_of(["abs", "tanh"])
    plant(BUGS["plus-one-float"])
    here = judged(case)
    code = (
        "import json, sys\n"
        "from symfuzz.fuzz.case import Case\n"
        "from symfuzz.oracles.differential import differential_oracle\n"
        "from symfuzz.oracles.lanes.execute import execute\n"
        "from symfuzz.oracles.lanes.lane import get_lane\n"
        "case = Case.from_json(json.loads(sys.stdin.read()))\n"
        "print(json.dumps(differential_oracle(case, execute(case, get_lane('eager'))).to_json()))\n"
    )
    env = {**os.environ, **planted_env("tanh-wrong-eager"), "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(case.to_json()), capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["symptom"] == "value-mismatch" and verdict["signature"] == here.signature
    finding = Finding(case=case.to_json(), verdict=Verdict.from_json(verdict), lane=EAGER.to_json())
    outcome = replay_finding(finding, timeout=300, env_extra=planted_env("tanh-wrong-eager"))
    assert outcome.status == "reproduced" and outcome.signature == verdict["signature"], outcome.output_tail


# ---------------------------------------------------------------- precision


def test_a_dtype_bug_and_a_shape_bug_on_one_op_have_two_signatures(plant):
    found = {}
    for bug in ("to-float64", "drop-last-column", "extra-dim"):
        plant(BUGS[bug])
        found[bug] = judged(case_of(["abs", "tanh"]))
    assert {v.symptom for v in found.values()} == {"metadata-mismatch"}
    assert len({v.signature for v in found.values()}) == 3


def test_value_bugs_in_float_and_in_integer_outputs_of_one_op_have_two_signatures(plant):
    plant(BUGS["plus-one-float"])
    in_floats = judged(case_of(["neg", "abs"]))
    plant(BUGS["plus-one-int"])
    in_ints = judged(case_of(["neg", "abs"], dtype="int64"))
    assert in_floats.symptom == in_ints.symptom == "value-mismatch"
    assert in_floats.signature != in_ints.signature


def test_wrong_finite_values_and_new_nans_on_one_op_have_two_signatures(plant):
    plant(BUGS["plus-one-float"])
    wrong = judged(case_of(["tanh"]))
    plant(BUGS["nan-first"])
    nan = judged(case_of(["tanh"]))
    assert wrong.symptom == nan.symptom == "value-mismatch" and wrong.signature != nan.signature


def test_two_crashes_of_one_program_have_two_signatures(plant):
    plant(_crashing("planted: no kernel"))
    a = judged(case_of(["tanh"]), crash_oracle)
    plant(_crashing("planted: bad stride"))
    b = judged(case_of(["tanh"]), crash_oracle)
    assert a.signature != b.signature


def test_compare_names_how_outputs_differ_without_sizes_or_values():
    e32 = torch.ones(3, 4)
    kinds = {
        "dtype:float32->float64": (e32, e32.double()),
        "dtype:float32->float64,rank:+1": (e32, e32.double()[None]),
        "rank:-1": (e32, e32[0]),
        "shape": (e32, e32[:, :2]),
        "type:Tensor->int": (e32, 3),
        "float:finite": (e32, e32 + 1),
        "float:nonfinite": (e32, e32 / 0),
        "float:lost-nonfinite": (e32 / 0, e32),
        "int": (torch.arange(4), torch.arange(4) + 1),
        "bool": (torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool)),
        "scalar:int": (3, 4),
    }
    for kind, (eager, compiled) in kinds.items():
        diff = script_runtime.compare(((eager,), ()), ((compiled,), ()))
        assert diff["kind"] == kind, (kind, diff)
        assert script_runtime.failure_key(diff, ["tanh"]) == "tanh|" + kind
    assert script_runtime.compare(((e32,), ()), ((e32, e32), ()))["kind"] == "count:more"


# ---------------------------------------------------------------- wrong gradients


def _gradient_scaled(targets):
    """A backend like "eager" whose graphs that call one of ``targets`` hand back outputs whose
    gradient is 1.5 times the true one (forward values stay right)."""
    original = registry.lookup_backend("eager")

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.5

    def backend(gm, example_inputs):
        compiled = original(gm, example_inputs)
        if not any(node.target in targets for node in gm.graph.nodes):
            return compiled

        def scaled(*args):
            outs = compiled(*args)
            fix = lambda t: Scaled.apply(t) if isinstance(t, torch.Tensor) and t.requires_grad else t  # noqa: E731
            return type(outs)(fix(t) for t in outs) if isinstance(outs, (list, tuple)) else fix(outs)

        return scaled

    return backend


def with_grads(case):
    """``case`` with its first input requiring grad at every call."""
    calls = tuple(Call((ArgSpec(c.args[0].shape, c.args[0].dtype, c.args[0].seed, requires_grad=True),))
                  for c in case.schedule.calls)
    return Case(case.program, Schedule(case.schedule.dynamic, calls))


def test_one_wrong_gradient_keeps_its_signature_across_sizes_seeds_and_dtypes(plant):
    plant(_gradient_scaled((torch.tanh, torch.Tensor.tanh)))
    verdicts = [
        judged(with_grads(case_of(["tanh"]))),
        judged(with_grads(case_of(["tanh", "abs"], shapes=((7,), (2,)), seed=40))),
        judged(with_grads(case_of(["tanh"], dtype="float64", shapes=((2, 3, 5),), dynamic=None))),
    ]
    assert {v.symptom for v in verdicts} == {"gradient-mismatch"}
    assert {v.evidence.gradient_of for v in verdicts} == {"tanh"}
    assert len({v.signature for v in verdicts}) == 1, [v.evidence.detail for v in verdicts]


def test_wrong_gradients_through_two_ops_have_two_signatures(plant):
    """Keyed by the op that consumes the input whose gradient differs: a wrong gradient
    through tanh and one through exp are two bugs (an older symfuzz gave every wrong
    gradient of a lane one signature)."""
    plant(_gradient_scaled((torch.tanh, torch.Tensor.tanh)))
    through_tanh = judged(with_grads(case_of(["tanh"])))
    plant(_gradient_scaled((torch.exp, torch.Tensor.exp)))
    through_exp = judged(with_grads(case_of(["exp"])))
    assert through_tanh.symptom == through_exp.symptom == "gradient-mismatch"
    assert (through_tanh.evidence.gradient_of, through_exp.evidence.gradient_of) == ("tanh", "exp")
    assert through_tanh.signature != through_exp.signature


def test_a_gradient_key_names_the_ops_that_consume_each_input():
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s0",))),
                      (OpNode("v1", "tanh", ("x0",)), OpNode("v2", "mul", ("v1", "x1")),
                       OpNode("v3", "exp", ("x1",))), ("v2", "v3"))
    calls = (Call((ArgSpec((3,), "float32", 1, requires_grad=True), ArgSpec((3,), "float32", 2, requires_grad=True))),)
    case = Case(program, Schedule(True, calls))
    assert case.gradient_ops() == ["tanh", "exp+mul"]
    failure = {"symptom": "gradient-mismatch", "path": "out[2][1]", "kind": "float:finite"}
    assert script_runtime.failure_key(failure, case.output_ops(), case.gradient_ops()) == "grad:exp+mul|float:finite"
    # A branch counts by the ops it calls; bare arithmetic passes the input on to what reads it.
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s0",))),
                      (ExprNode("v1", "x0 * 2"), OpNode("v2", "tanh", ("v1",)),
                       BranchNode("v3", "x1.size(0) > 2", "x1.abs()", "torch.relu(x1)")), ("v2", "v3"))
    assert Case(program, Schedule(True, calls)).gradient_ops() == ["tanh", "abs+relu"]


# ---------------------------------------------------------------- deaths and hangs
#
# Real processes die here: each case's repro runs in a fresh process with bugs planted by
# tests/plants/sitecustomize.py, and its death or hang is signed from the stack that
# faulthandler printed (corpus/deaths.py), as a campaign signs a worker's.

DEATHS = "segfault-cos,segfault-exp-at-run"  # cos: dies compiling; exp: dies in the compiled forward
HANGS = "hang-sin,hang-exp-at-run"  # sin: hangs compiling; exp: hangs in the compiled forward


def died(case, plants, tmp_path, lane=EAGER, cause="SIGSEGV"):
    """The replay of ``case`` as a death finding stored without a place (as an older symfuzz
    stored them): reproduced by its cause, with the signature of where it died now."""
    verdict = Verdict(ok=False, oracle="isolation", symptom="process-death", stage="unknown",
                      signature=script_runtime.signature("process-death", lane.name, cause), evidence=Died(cause=cause))
    finding = Finding(case=case.to_json(), verdict=verdict, lane=lane.to_json())
    env = {**planted_env(plants), "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "cache")}
    outcome = replay_finding(finding, timeout=300, env_extra=env)
    assert outcome.status == "reproduced" and outcome.signature, outcome.output_tail
    return outcome


def hung(case, plants, tmp_path):
    """The signature of ``case``'s hang: once its repro has started its calls (it printed its
    first line, after its imports: a slow machine must not be caught importing torch), it is
    given 4 s to reach the hang, asked where it is (as a campaign asks), and killed."""
    finding = Finding(case=case.to_json(), verdict=Verdict(ok=False, oracle="isolation", symptom="timeout",
                                                          evidence=Hung(timeout_seconds=4)), lane=EAGER.to_json())
    script = tmp_path / f"hang-{case.program.ops()[0]}.py"
    script.write_text(render_repro(finding))
    env = {**os.environ, **planted_env(plants), "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "cache"),
           "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "hang.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 240
            while "torch " not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(4)
            assert proc.poll() is None, log.read_text()[-3000:]
            ask_for_stack(proc.pid)
        finally:
            proc.kill()
            proc.wait()
    text = log.read_text()
    place = place_of(text, hang=True)
    assert place.frames, text[-3000:]
    return death_signature("timeout", EAGER.name, "timeout", place), place


def test_one_death_keeps_its_signature_across_programs_sizes_seeds_and_processes(tmp_path):
    a = died(case_of(["exp"], shapes=((3, 4), (5, 4))), DEATHS, tmp_path)
    b = died(case_of(["abs", "exp", "tanh"], shapes=((7,), (2,)), seed=40, dynamic=None), DEATHS, tmp_path)
    assert a.place == b.place and a.signature == b.signature
    assert a.place["phase"] == "compiled forward" and a.place["frames"][:2] == [
        "sitecustomize.py:_null_read", "sitecustomize.py:faulty_compiled_forward"]


def test_deaths_in_two_places_have_two_signatures(tmp_path):
    """One signal, one lane: an older symfuzz gave both one signature."""
    compiling = died(case_of(["cos"]), DEATHS, tmp_path)
    at_run = died(case_of(["exp"]), DEATHS, tmp_path)
    assert compiling.place["phase"] == "compiling" and at_run.place["phase"] == "compiled forward"
    assert compiling.signature != at_run.signature


def test_deaths_in_a_forward_and_a_backward_kernel_have_two_signatures(tmp_path):
    """A real generated kernel: Inductor's cos reads out of bounds at symbolic sizes. The forward
    of cos dies in the kernel that computes it; the backward of sin (whose derivative is cos)
    in the compiled backward's. Each is named by the kernel's fused ops, not its file."""
    inductor = get_lane("inductor-cpp")
    forward = died(case_of(["cos"]), "segfault-cos-index", tmp_path, lane=inductor)
    backward = died(with_grads(case_of(["sin"])), "segfault-cos-index", tmp_path, lane=inductor)
    assert forward.place["phase"] == "compiled forward"
    assert forward.place["frames"][0] == "<kernel cpp_fused_cos>", forward.place
    assert backward.place["phase"] == "compiled backward"
    assert backward.place["frames"][0].startswith("<kernel cpp_fused_") and "cos" in backward.place["frames"][0]
    assert forward.signature != backward.signature
    again = died(case_of(["cos"], shapes=((6, 2), (9, 2)), seed=7), "segfault-cos-index", tmp_path, lane=inductor)
    assert again.signature == forward.signature


def test_one_hang_keeps_its_signature_and_hangs_in_two_places_have_two(tmp_path):
    a, at_run = hung(case_of(["exp"], shapes=((3, 4), (5, 4))), HANGS, tmp_path)
    b, _ = hung(case_of(["exp", "abs"], shapes=((7,), (2,)), seed=40), HANGS, tmp_path)
    c, compiling = hung(case_of(["sin"]), HANGS, tmp_path)
    assert a == b
    assert (at_run.phase, compiling.phase) == ("compiled forward", "compiling")
    assert a != c


def test_a_death_stack_names_torch_frames_and_kernels_not_paths_lines_or_hashes(tmp_path):
    generated = tmp_path / "ab" / ("c" + "x7" * 20 + ".py")
    generated.parent.mkdir()
    generated.write_text("def call(args):\n    buf0 = empty()\n    cpp_fused_cos_mul_3(arg0_1, buf0, s27)\n")
    dump = (
        "Fatal Python error: Segmentation fault\n\n"
        "Thread 0x00007f503c8ff6c0 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 982 in run\n\n'
        "Current thread 0x00007f5072213b80 (most recent call first):\n"
        f'  File "{generated}", line 3 in call\n'
        '  File "/venv/lib/python3.11/site-packages/torch/_inductor/output_code.py", line 763 in __call__\n'
        f'  File "{running.__file__}", line 5 in run_call\n'  # the harness's own
        '  File "/venv/lib/python3.11/site-packages/torch/_functorch/_aot_autograd/subclass_codegen.py:codegen(w)", '
        "line 8 in _runtime_wrapper\n"
        '  File "/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 1446 in _fn\n'
        '  File "/tmp/symfuzz-replay-abc/repro.py", line 21 in fn\n'
        '  File "/tmp/symfuzz-replay-abc/repro.py", line 40 in <module>\n\n'
        "Extension modules: torch._C (total: 1)\n"
    )
    place = place_of("earlier output\n" + dump)
    assert place.phase == "compiled forward"
    assert place.frames == ("<kernel cpp_fused_cos_mul>", "torch/_inductor/output_code.py:__call__",
                            "torch/_functorch/_aot_autograd/subclass_codegen.py:_runtime_wrapper")
    moved = dump.replace("line 763", "line 901").replace("/venv/", "/other/env/").replace("/tmp/symfuzz-replay-abc",
                                                                                          "/tmp/q")
    assert place_of(moved) == place


def test_a_kernel_behind_dynamos_disable_wrapper_dies_in_eager_code_not_a_compiled_forward():
    """torch.library runs registered kernels inside Dynamo's disable wrapper, the same _fn in
    eval_frame.py that calls a compiled function; called from torch/_compile.py, it is eager."""
    site = "/venv/lib/python3.11/site-packages"
    dump = ("Current thread 0x00007f5072213b80 (most recent call first):\n"
            f'  File "{site}/torch/library.py", line 939 in func_no_dynamo\n'
            f'  File "{site}/torch/_dynamo/eval_frame.py", line 1446 in _fn\n'
            f'  File "{site}/torch/_compile.py", line 54 in inner\n'
            f'  File "{site}/torch/_ops.py", line 841 in __call__\n'
            '  File "/tmp/run.py", line 9 in <module>\n')
    assert place_of(dump).phase == "eager"
    compiled = dump.replace(f'  File "{site}/torch/_compile.py", line 54 in inner\n', '  File "/tmp/run.py", line 3 in f\n')
    assert place_of(compiled).phase == "compiled forward"
