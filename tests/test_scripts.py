"""The one script renderer (corpus/scripts.py): one prelude, one make_input, one
tolerance table and one judging function behind every standalone script.

The tree test reads the source (ast), so it runs no project code. The
agreement test runs opcheck's Inductor check in process and its repro snippet
in a fresh process, on an op planted to be off by just below / just above the
tolerance when compiled.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import ROOT
from snippet_support import run_snippets
from symfuzz.corpus import scripts
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import render_short
from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.minifier.graph_subject import render_script
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import OutputMismatch, Verdict
from symfuzz.corpus.inductor_cache import fresh_cache

PACKAGES = ("fuzz", "oracles", "corpus", "minifier", "opcheck", "symfuzz")
SHEBANG = "#!/usr/bin/env python"


def _trees():
    """Every .py file of the tree but the tests: the packages, benchmarks, examples."""
    tops = [t for t in ROOT.iterdir() if t.name != "tests" and not t.name.startswith(".") and
            not t.name.endswith(".egg-info")]
    paths = [t for t in tops if t.suffix == ".py"] + [p for t in tops if t.is_dir() for p in t.rglob("*.py")]
    assert {p.relative_to(ROOT).parts[0] for p in paths} >= set(PACKAGES)
    for path in sorted(paths):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _definitions():
    """Where the tree defines TOLERANCES, make_input and a script head: as code
    (an assignment, a def, at any depth) or as text to paste into a script
    (a string holding such a definition, or a shebang)."""
    found = {"TOLERANCES": [], "make_input": [], "prelude": []}
    for path, tree in _trees():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "TOLERANCES" for t in targets):
                    found["TOLERANCES"].append(f"{path}:{node.lineno}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name == "make_input":
                    found["make_input"].append(f"{path}:{node.lineno}")
                if node.name == "prelude":
                    found["prelude"].append(f"{path}:{node.lineno}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if re.search(r"^\s*TOLERANCES\s*=", text, re.M):
                    found["TOLERANCES"].append(f"{path}:{node.lineno} (text)")
                if re.search(r"^\s*def make_input\(", text, re.M):
                    found["make_input"].append(f"{path}:{node.lineno} (text)")
                if SHEBANG in text:
                    # The shebang is the prelude's own: it may appear only inside the prelude function.
                    owner = node
                    while owner in parents and not isinstance(owner, ast.FunctionDef):
                        owner = parents[owner]
                    if not (isinstance(owner, ast.FunctionDef) and owner.name == "prelude"):
                        found["prelude"].append(f"{path}:{node.lineno} (text)")
    return found


def test_one_definition_each_of_tolerances_make_input_and_the_prelude():
    found = _definitions()
    assert found == {"TOLERANCES": [found["TOLERANCES"][0]], "make_input": [found["make_input"][0]],
                     "prelude": [found["prelude"][0]]}, found
    assert found["TOLERANCES"][0].startswith("fuzz/runtime/comparing.py:")
    assert found["make_input"][0].startswith("fuzz/runtime/inputs.py:")
    assert found["prelude"][0].startswith("corpus/scripts.py:")


# ---------------------------------------------------------------- every kind of script


def _case():
    program = Program(inputs=(Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0", 4))),
                      body=(OpNode("v1", "add", ("x0", "x1"), {"alpha": 1}),), outputs=("v1",))
    layout = {"kind": "transposed", "dims": [0, 1]}
    calls = tuple(Call((ArgSpec((n, 4), "float32", 1, layout=layout), ArgSpec((n, 4), "float32", 2)))
                  for n in (5, 8))
    return Case(program, Schedule(None, calls))


def _verdict(symptom="value-mismatch"):
    return Verdict(ok=False, oracle="differential", symptom=symptom, stage="runtime",
                   signature=f"{symptom}-0123456789", call_index=1,
                   evidence=OutputMismatch(path="out[0][0]", detail="made up", graphs_at_call=0))


def _graph(accuracy):
    return {"backend": {"name": "eager", "options": {}, "mode": None}, "accuracy": accuracy, "grad_enabled": True,
            "symbols": {"s0": 5},
            "inputs": [{"kind": "tensor", "name": "x", "dims": ["s0", 3], "dynamic": [True, False],
                        "dtype": "float32", "seed": 3, "requires_grad": False},
                       {"kind": "tensor", "name": "i", "dims": [4], "dynamic": [False], "dtype": "int64", "seed": 4,
                        "requires_grad": False}],
            "nodes": [{"op": "call_function", "name": "y", "target": "torch.sin", "args": [{"$node": "x"}],
                       "kwargs": {}}],
            "output": {"$tuple": [{"$node": "y"}]}, "origin": {"script": "s.py", "graph": 1, "nodes": 2}}


def _scripts() -> dict:
    case, lane = _case(), get_lane("eager").to_json()
    finding = Finding(case=case.to_json(), verdict=_verdict(), lane=lane, environment={"torch": "x"})
    symbolic = Finding(case=case.to_json(), lane=lane, environment={"torch": "x"},
                       verdict=Verdict(ok=False, oracle="symbolic-metadata", symptom="fake-real-mismatch",
                                       stage="dynamo", signature="fake-real-mismatch-0123456789", call_index=1))
    recompile = Finding(case=case.to_json(), lane=lane, environment={"torch": "x"},
                        verdict=Verdict(ok=False, oracle="recompiles", symptom="unsound-recompile", stage="guard",
                                        signature="unsound-recompile-0123456789", call_index=1))
    return {
        "repro": scripts.render_repro(finding),
        "symbolic repro": scripts.render_repro(symbolic),
        "unsound-recompile repro": scripts.render_repro(recompile),
        "graph crash": render_script(_graph(False)),
        "graph accuracy": render_script(_graph(True)),
        "snippet": scripts.render_snippet("a snippet", "x = make_input((2, 3), torch.float32, 0, 'sliced')\n"),
    }


def test_every_script_is_built_from_the_same_pieces():
    judged = ("repro", "symbolic repro", "unsound-recompile repro", "graph accuracy")
    make_input = textwrap.dedent(ast.get_source_segment(
        (ROOT / "fuzz" / "runtime" / "inputs.py").read_text(),
        next(n for n in ast.parse((ROOT / "fuzz" / "runtime" / "inputs.py").read_text()).body
             if isinstance(n, ast.FunctionDef) and n.name == "make_input")))
    for kind, text in _scripts().items():
        compile(text, kind, "exec")
        assert text.startswith(SHEBANG + '\n"""'), kind
        assert "import json\nimport sys\n" in text and "import torch\nimport torch.nn.functional as F\n" in text, kind
        assert text.count("def make_input(") == 1 and make_input in text, kind  # pasted from the source, whole
        imports = {m.split(".")[0] for m in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", text, re.M)}
        assert imports <= set(sys.stdlib_module_names) | {"torch", "triton", "sympy"}, (kind, imports)
        assert "assert_close" not in text and "symfuzz." not in re.sub(r"symfuzz\.\w+\(", "", text.split('"""', 2)[2])
        if kind in judged:
            assert text.count("def compare(") == 1 and text.count("TOLERANCES = {") == 1, kind


def test_the_short_repro_carries_the_runtimes_own_tolerance_table_and_passes_where_nothing_differs(tmp_path):
    """The short repro.py (corpus/short_repro.py) pastes script_runtime's TOLERANCES, the one table, and
    lays its inputs out as make_input does: on the Dynamo-only lane nothing differs."""
    finding = Finding(case=_case().to_json(), verdict=_verdict(), lane=get_lane("eager").to_json(),
                      environment={"torch": "x"})
    text = render_short(finding)
    source = (ROOT / "fuzz" / "runtime" / "comparing.py").read_text()
    table = ast.get_source_segment(source, next(n for n in ast.parse(source).body if isinstance(n, ast.Assign)
                                                 and n.targets[0].id == "TOLERANCES"))
    assert text.count("TOLERANCES = {") == 1 and table in text
    assert "randn((4, 5), torch.float32, 1).transpose(0, 1)" in text
    path = tmp_path / "repro.py"
    path.write_text(text)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "c")})
    assert proc.returncode == 0 and "compiled matches eager at every call" in proc.stdout, proc.stderr[-2000:]


def test_make_input_builds_what_make_arg_and_opcheck_build():
    spec = {"shape": [3, 4], "dtype": "float32", "seed": 5, "layout": {"kind": "strided", "dim": 1, "step": 2}}
    made = script_runtime.make_input((3, 4), torch.float32, 5, spec["layout"])
    assert torch.equal(made, script_runtime.make_arg(spec)) and made.stride() == script_runtime.make_arg(spec).stride()
    from symfuzz.opcheck.inputs import TensorInput

    t = TensorInput((3, 5), "float16", "sliced", -2.0, 3.0, seed=4)
    built = t.build()
    assert built.storage_offset() == 1 and built.stride() == (11, 2)
    assert float(built.min()) >= -2.0 and float(built.max()) <= 3.0
    assert torch.equal(eval(t.code(), {"torch": torch, "make_input": script_runtime.make_input}), built)


def test_helpers_paste_what_pieces_use_and_refuse_project_imports():
    pasted = scripts.Helpers().pieces(scripts.RUNTIME, ["compare"])
    names = set(pasted.provided)
    assert {"compare", "flatten", "tensors_close", "within_reference", "mismatch_detail", "TOLERANCES",
            "REF_ERROR_FACTOR"} <= names and "make_input" not in names and "signature" not in names
    # A piece from another module that imports project names brings them along.
    snippet = scripts.Helpers().pieces("symfuzz.opcheck.checks.compile", ["run_collecting", "float64_inputs"])
    assert {"weighted_sum", "differentiable_outputs", "copy_exactly"} <= set(snippet.provided)
    assert "from symfuzz" not in snippet.text()
    with pytest.raises(RuntimeError, match="only the standard library and torch"):
        scripts.Helpers().module("symfuzz.fuzz.choices")  # imports hypothesis at top level
    with pytest.raises(RuntimeError, match="defines no top-level"):
        scripts.Helpers().pieces(scripts.RUNTIME, ["no_such_piece"])


# ---------------------------------------------------------------- opcheck: snippet and check agree


def test_opcheck_inductor_snippet_and_check_agree_just_below_and_above_tolerance(tmp_path):
    """An op off by 0.9 or 1.5 tolerances when Inductor's code calls it: the check
    (in process) and its repro snippet (fresh process) give the same verdict."""
    sys.path.insert(0, str(ROOT / "tests"))
    from opcheck_ops import off_by  # noqa: F401 - registers symfuzz_plant::twice

    from symfuzz.opcheck.checks.common import Problem, make_template
    from symfuzz.opcheck.checks.compile import InductorDynamicCheck
    from symfuzz.opcheck.repro import render
    from symfuzz.opcheck.variants import Sweep, Variant

    op = torch.ops.symfuzz_plant.twice.default
    verdicts, texts = {}, {}
    for k in (0.9, 1.5):
        template = make_template(op, (torch.randn(4, 6), k), {})
        case = Sweep(template).case(Variant((5, 7), layouts=("transposed",), seed=1))
        problem = InductorDynamicCheck(op, with_grad=False, mutable=set())(case)
        assert problem is None or isinstance(problem, Problem), problem
        verdicts[k] = problem
        texts[f"snippet_{k}"] = render("inductor_dynamic", "value-mismatch", op, case)
    snippets = run_snippets(tmp_path, texts)
    assert verdicts[0.9] is None and snippets["snippet_0.9"] == ("passed", ""), (verdicts[0.9], snippets)
    assert verdicts[1.5] is not None and verdicts[1.5].kind == "value-mismatch", verdicts[1.5]
    status, why = snippets["snippet_1.5"]
    assert status == "raised" and why.startswith("AssertionError: compiled vs eager: value-mismatch at out[0]"), snippets
