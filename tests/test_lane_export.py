"""The torch.export lanes (export, aoti) and the CUDA-graphs lane.

What export refuses by design (a program it cannot trace, calls outside the
exported guards, 0/1 sizes at dims traced as dynamic) must never become a
finding; what it gets wrong must. Planted faults are monkeypatched into
torch in this process only (and, for the repro script, in its own process
through a sitecustomize in a temporary folder).
"""

import ast
import json
import inspect
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import BranchNode, Input, OpNode, Program, SizeNode
from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.lanes.export_runner import dynamic_shapes_for
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.registry import judge
from symfuzz.fuzz.schedule import demands_specialization as program_compares_sizes
from symfuzz.oracles.lanes.runners import runner_spec

REJECTED = ".LaneRejectedCall"


def call(s0, seed, layout=None):
    layout = layout or {"kind": "contiguous"}
    return Call((ArgSpec((s0, 4), "float32", seed, layout), ArgSpec((s0,), "float32", seed + 1)), {"s0": s0})


TRANSPOSED = {"kind": "transposed", "dims": [0, 1]}


def pointwise_case(sizes=(3, 5, 8), layouts=(None, TRANSPOSED, None)):
    """relu(x0 + 2*x1[:, None]) summed over dim 0, and abs of the sum: no size comparisons."""
    program = Program(
        (Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0",))),
        (
            OpNode("v0", "unsqueeze", ("x1",), {"dim": 1}),
            OpNode("v1", "add", ("x0", "v0"), {"alpha": 2}),
            OpNode("v2", "relu", ("v1",)),
            OpNode("v3", "sum_dim", ("v2",), {"dim": 0, "keepdim": False}),
            OpNode("v4", "abs", ("v1",)),
        ),
        ("v3", "v4"),
    )
    calls = tuple(call(s, 10 * i, layouts[i % len(layouts)]) for i, s in enumerate(sizes))
    return Case(program, Schedule(True, calls))


def branch_case():
    """``if x0.size(0) > 4``: export keeps the first call's arm and guards s0 >= 5."""
    program = Program(
        (Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0",))),
        (BranchNode("v0", "x0.size(0) > 4", "x0 * 2", "x0 - 1"), OpNode("v1", "relu", ("v0",))),
        ("v1",),
    )
    return Case(program, Schedule(None, (call(6, 1), call(3, 2), call(8, 3))))


def failures(case, lane="export"):
    run = execute(case, get_lane(lane))
    return run, [v for v in judge(case, run) if not v.ok]


# ---------------------------------------------------------------- pieces, no export


def test_dynamic_shapes_give_varying_symbols_auto_bounds_and_the_rest_static():
    (spec,) = dynamic_shapes_for(runner_spec(pointwise_case()), [c.to_json() for c in pointwise_case().schedule.calls])
    x0, x1 = spec
    assert x0[1] == torch.export.Dim.STATIC
    assert x0[0] is x1[0]  # one hint per symbol, shared by the dims that carry it
    assert type(x0[0]).__name__ == "_DimHint" and (x0[0].min, x0[0].max) == (3, 8)
    # A symbol that does not vary across the calls is static too.
    (spec,) = dynamic_shapes_for({"dims": [["s0", None]]}, [{"args": [{"shape": [4, 2]}]}, {"args": [{"shape": [4, 2]}]}])
    assert spec[0] == {0: torch.export.Dim.STATIC, 1: torch.export.Dim.STATIC}


def test_size_comparisons_are_recognised():
    assert not program_compares_sizes(pointwise_case().program)
    assert program_compares_sizes(branch_case().program)
    clamp = Program((Input("x0", "float32", ("s0",)),), (SizeNode("n0", "min(x0.size(0), 3)"),), ("x0",))
    assert program_compares_sizes(clamp)


def test_export_runner_module_is_self_contained():
    """Only stdlib and torch imports, so corpus.scripts can inline its source."""
    tree = ast.parse((ROOT / "oracles" / "lanes" / "export_runner.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module != "__future__"
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in set(sys.stdlib_module_names) | {"torch"}, name


# ---------------------------------------------------------------- the export lane


def test_export_lane_runs_every_call_and_passes():
    case = pointwise_case((3, 5, 8, 6))
    run, failed = failures(case)
    assert failed == []
    assert len(run.calls) == 4
    for c in run.calls:  # every call was run by the exported module and compared
        assert "error" not in c.compiled and "out" in c.compiled


def test_size_branch_rejects_the_other_path_without_a_finding():
    run, failed = failures(branch_case())
    assert failed == []
    first, other, same = run.calls
    assert "out" in first.compiled and "out" in same.compiled  # the exported arm, compared with eager
    assert other.compiled["error"]["type"].endswith(REJECTED)
    assert "Guard failed" in other.compiled["error"]["message"]


def test_data_dependent_branch_is_unsupported_not_a_finding():
    program = Program(
        (Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0",))),
        (BranchNode("v0", "x0.sum() > 0", "x0 * 2", "x0 - 1"),),
        ("v0",),
    )
    run, failed = failures(Case(program, Schedule(True, (call(3, 1), call(5, 2)))))
    assert failed == []
    assert all(c.compiled["error"]["type"].endswith(REJECTED) for c in run.calls)
    assert "cannot trace" in run.calls[0].compiled["error"]["message"]


def test_sizes_zero_and_one_at_a_dynamic_dim_are_not_judged():
    run, failed = failures(pointwise_case((4, 1, 6)))
    assert failed == []
    assert run.calls[1].compiled["error"]["type"].endswith(REJECTED)
    assert "out" in run.calls[2].compiled


def test_by_design_refusals_seen_in_campaigns_stay_quiet():
    """Two false alarms an early version reported. (1) An input the program never reads has
    size 1 in the first call: export specializes it (0/1 example sizes, by design) while
    Dynamo, which does not guard unread inputs, admits later sizes. (2) ``divmod`` on a size:
    non-strict export runs it on a SymInt, which does not support it (unsupported, not a bug)."""
    unread = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", (2, "s1"))),
                     (OpNode("v0", "relu", ("x0",)),), ("v0",))
    calls = tuple(Call((ArgSpec((s0,), "float32", 1), ArgSpec((2, s1), "float32", 2)), {"s0": s0, "s1": s1})
                  for s0, s1 in ((5, 1), (6, 4), (7, 3)))
    run, failed = failures(Case(unread, Schedule(True, calls)))
    assert failed == [] and run.calls[1].compiled["error"]["type"].endswith(REJECTED)

    divmod_program = Program((Input("x0", "float32", ("s0",)),),
                             (SizeNode("n0", "divmod(x0.size(0), 3)[0]"), OpNode("v1", "relu", ("x0",))), ("v1",))
    calls = tuple(Call((ArgSpec((s0,), "float32", s0),), {"s0": s0}) for s0 in (4, 7))
    run, failed = failures(Case(divmod_program, Schedule(True, calls)))
    assert failed == [] and "cannot trace" in run.calls[0].compiled["error"]["message"]


def install_wrong_abs():
    """A miscompile inside export: the unlifting that builds ExportedProgram.module()
    turns every aten.abs into -abs. Eager, Dynamo and the ExportedProgram's own graph
    are untouched. Self-contained: repro subprocesses get its source as a sitecustomize."""
    import torch
    import torch.export._unlift as unlift

    original = unlift._unlift_exported_program_lifted_states

    def wrong_abs(x):
        return torch.ops.aten.neg.default(torch.ops.aten.abs.default(x))

    def unlift_with_wrong_abs(ep, *args, **kwargs):
        gm = original(ep, *args, **kwargs)
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.aten.abs.default:
                node.target = wrong_abs
        gm.recompile()
        return gm

    unlift._unlift_exported_program_lifted_states = unlift_with_wrong_abs


def _plant_wrong_abs(monkeypatch):
    import torch.export._unlift as unlift

    # Registered first so that monkeypatch restores the original afterwards.
    monkeypatch.setattr(unlift, "_unlift_exported_program_lifted_states", unlift._unlift_exported_program_lifted_states)
    install_wrong_abs()


def test_planted_export_miscompile_is_a_value_mismatch(monkeypatch):
    _plant_wrong_abs(monkeypatch)
    case = pointwise_case()
    _, failed = failures(case)
    assert [(v.oracle, v.symptom, v.call_index) for v in failed] == [("differential", "value-mismatch", 0)]
    assert failed[0].evidence.path == "out[0][1]"  # v4 = abs(...)


def test_export_ignoring_dynamic_shapes_is_reported_only_where_nothing_asks_for_it(monkeypatch):
    """A planted over-specialization: export drops ``dynamic_shapes`` and specializes every dim.
    A branch-free program is then refused at calls that Dynamo runs on one graph: a finding.
    The program with a size branch may be specialized by design: rejected, no finding."""
    original = torch.export.export

    def export_static(mod, args, *rest, dynamic_shapes=None, **kwargs):
        return original(mod, args, *rest, **kwargs)

    monkeypatch.setattr(torch.export, "export", export_static)
    run, failed = failures(pointwise_case())
    # Call 1 has a transposed input: Dynamo recompiles for the new strides, so
    # nothing contradicts export there (rejected); call 2 is contiguous again.
    assert run.calls[1].compiled["error"]["type"].endswith(REJECTED)
    assert [(v.symptom, v.stage, v.call_index) for v in failed] == [("crash", "guard", 2)]
    assert failed[0].evidence.error["type"] == "symfuzz.export_runner.ExportOverSpecialized"

    run, failed = failures(branch_case())
    assert failed == []
    assert run.calls[2].compiled["error"]["type"].endswith(REJECTED)


def test_repro_of_an_export_finding_needs_only_torch_and_reproduces(tmp_path, monkeypatch):
    _plant_wrong_abs(monkeypatch)
    case = pointwise_case()
    _, failed = failures(case)
    verdict = failed[0]
    finding = Finding(case=case.to_json(), verdict=verdict, lane=get_lane("export").to_json())
    source = render_repro(finding)
    imports = {i.split(".")[0] for i in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", source, re.M)}
    assert imports <= {"os", "json", "sys", "math", "torch", "hashlib", "re", "time", "traceback", "triton",
                       "shutil", "tempfile", "faulthandler", "signal"}
    assert "build_exported_runner(fn" in source and "torch.compile(fn" not in source

    # The same plant in the repro's own process, through a sitecustomize; no symfuzz on the path.
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(inspect.getsource(install_wrong_abs) + "\ninstall_wrong_abs()\n")
    script = tmp_path / "repro.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(plant)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1].split(" ", 1)[1])
    assert result["signature"] == verdict.signature and result["call"] == 0


# ---------------------------------------------------------------- AOTInductor


def test_aoti_lane_runs_every_call_and_passes():
    """About 25-50 s on the 2-core CI machine (the first C++ compile of AOTInductor's headers
    into this test's empty cache dominates): under the 60 s line for the slow marker."""
    lane = get_lane("aoti")
    if lane.unavailable_reason():
        pytest.skip(lane.unavailable_reason())
    case = pointwise_case((3, 5, 1, 8, 6), (None, None, None, TRANSPOSED, None))
    run, failed = failures(case, "aoti")
    assert failed == []
    compared = [i for i, c in enumerate(run.calls) if "out" in c.compiled]
    # Call 2 has size 1 at a dynamic dim, and call 3's x0 is transposed while AOTInductor
    # compiled for the first call's strides: both rejected, not judged.
    assert compared == [0, 1, 4]
    assert all(run.calls[i].compiled["error"]["type"].endswith(REJECTED) for i in (2, 3))


# ---------------------------------------------------------------- CUDA graphs


@pytest.mark.gpu
def test_cudagraphs_lane_runs_every_call_and_passes():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch")
    lane = get_lane("inductor-cudagraphs")
    if lane.unavailable_reason():
        pytest.skip(lane.unavailable_reason())
    case = pointwise_case((3, 5, 8, 5))
    run, failed = failures(case, "inductor-cudagraphs")
    assert failed == []
    assert all("out" in c.compiled for c in run.calls)
