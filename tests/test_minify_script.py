"""The user-script path of the minifier: capture, graph passes, query scripts, user mistakes.

Scripts here compile with backend="eager" (Dynamo only), so each fresh
process costs a torch import, not an Inductor compile.
"""

import json
import textwrap
from pathlib import Path

import pytest
from conftest import planted_env

from symfuzz.minifier.capture import run_capture
from symfuzz.minifier.criteria import SameAsOriginal
from symfuzz.minifier.driver import run_query
from symfuzz.minifier.graph_passes import (PASSES, drop_dynamic_marks, drop_saved_values, keep_one_output, remove_node_chunks, shrink_sizes)
from symfuzz.minifier.graph_subject import GraphSubject, dynamic_dims, input_shape, references, tensor_expr
from symfuzz.minifier.script import ScriptError, choose_graph, prepare_script

# Two calls at two batch sizes: the second compile (automatic dynamic) has a symbolic batch dim.
TWO_SHAPES = """
import torch

def f(x, w):
    h = torch.relu(x @ w)
    return h.view(x.shape[0], -1).sum(1) + x.size(1), h[:, ::2]

compiled = torch.compile(f, backend="eager")
compiled(torch.randn(5, 3), torch.randn(3, 4))
compiled(torch.randn(7, 3), torch.randn(3, 4))
"""

# Only the recompiled, dynamic graph contains cos: with the segfault-cos plant
# the process dies while the second graph compiles.
COS_WHEN_LARGE = """
import torch

def f(x):
    if x.size(0) > 5:
        x = torch.cos(x)
    return x * 2

compiled = torch.compile(f, backend="eager")
compiled(torch.randn(4))
compiled(torch.randn(7))
"""


def write(folder: Path, text: str, name: str = "user.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def two_shapes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two-shapes")
    script = write(folder, TWO_SHAPES)
    return script, run_capture(script, folder / "capture", accuracy=False, timeout=120)


@pytest.fixture(scope="module")
def dynamic_subject(two_shapes):
    script, run = two_shapes
    return GraphSubject.from_record(run.records[1], accuracy=False, script=script.name)


def assert_well_formed(subject: GraphSubject) -> None:
    """Every name is defined once, before use; the script is valid Python."""
    data = subject.data
    defined = set()
    for entry in data["inputs"]:
        assert entry["name"] not in defined
        defined.add(entry["name"])
    for entry in data["inputs"]:
        if entry["kind"] == "size":
            assert entry["of"][0] in defined
    for node in data["nodes"]:
        refs = set(references(node["args"])) | set(references(list(node["kwargs"].values())))
        assert refs <= defined, (node["name"], refs - defined)
        assert node["name"] not in defined
        defined.add(node["name"])
    assert set(references(data["output"])) <= defined
    compile(subject.query_script(), "query.py", "exec")


# ---------------------------------------------------------------- capture


def test_capture_records_each_graph_with_symbols_and_size_inputs(two_shapes):
    _, run = two_shapes
    assert run.returncode == 0, run.output[-2000:]
    assert run.script["compile_calls"] == 1
    assert [r["status"] for r in run.records] == ["ran", "ran"]
    static, dynamic = (r["graph"] for r in run.records)
    assert static["symbols"] == {}
    x = next(i for i in dynamic["inputs"] if i["name"] == "x")
    symbol = x["dims"][0]
    assert isinstance(symbol, str) and x["dynamic"] == [True, False] and x["dims"][1] == 3
    assert dynamic["symbols"] == {symbol: 7}  # the hint is the real size of that call
    sizes = [i for i in dynamic["inputs"] if i["kind"] == "size"]
    assert sizes and all(s["of"] == ["x", 0] for s in sizes)  # a SymInt input is read back from x
    assert Path(x["values"]["path"]).exists()
    assert not dynamic["unsupported"]


def test_a_script_whose_graphs_all_pass_is_explained(two_shapes):
    script, run = two_shapes
    with pytest.raises(ScriptError, match="none of the 2 graphs .* failed.*--accuracy.*TORCHDYNAMO_VERBOSE"):
        choose_graph(run, script, accuracy=False)


def test_a_graph_that_kills_the_process_is_kept_and_chosen(tmp_path):
    script = write(tmp_path, COS_WHEN_LARGE)
    run = run_capture(script, tmp_path / "capture", accuracy=False, timeout=120, env=planted_env("segfault-cos"))
    assert run.returncode is not None and run.returncode < 0  # the script died by a signal
    assert [r["status"] for r in run.records] == ["ran", "compiling"]  # written before the backend ran
    record = choose_graph(run, script, accuracy=False)
    assert record["index"] == 1 and record["guards"]  # the size comparison left a guard
    subject = GraphSubject.from_record(record, accuracy=False, script=script.name)
    outcome = run_query(subject.query_script(), SameAsOriginal(), 120, planted_env("segfault-cos"))
    # the signal, and where it died: compiling, in the planted backend (corpus/deaths.py)
    assert outcome.failure_id().startswith("process-death:SIGSEGV@compiling|sitecustomize.py:crashing_backend"), \
        outcome.output[-2000:]


# ---------------------------------------------------------------- user mistakes


def test_missing_or_non_python_paths_are_refused(tmp_path):
    with pytest.raises(ScriptError, match="does not exist"):
        prepare_script(tmp_path / "nope.py", accuracy=False, timeout=60, work_dir=tmp_path)
    (tmp_path / "notes.txt").write_text("torch.compile")
    with pytest.raises(ScriptError, match=r"not a Python script \(.py file\)"):
        prepare_script(tmp_path / "notes.txt", accuracy=False, timeout=60, work_dir=tmp_path)


def test_a_script_that_never_compiles_is_explained(tmp_path):
    script = write(tmp_path, "import torch\nprint(torch.ones(2).sum())\n")
    with pytest.raises(ScriptError, match="never called torch.compile.*Compile the failing model"):
        prepare_script(script, accuracy=False, timeout=60, work_dir=tmp_path)


def test_a_script_that_fails_before_compiling_is_explained(tmp_path):
    script = write(tmp_path, "import sys\nimport torch\nraise ValueError(f'no data file {sys.argv[1]}')\n")
    with pytest.raises(ScriptError, match="failed before it called torch.compile: ValueError: no data file data.bin"):
        prepare_script(script, accuracy=False, timeout=60, work_dir=tmp_path, args=("data.bin",))


# ---------------------------------------------------------------- subject and passes


def test_measure_counts_fx_nodes_and_marked_dims(dynamic_subject, two_shapes):
    measure = dynamic_subject.measure()
    record = two_shapes[1].records[1]
    assert measure["nodes"] == record["nodes_total"]  # placeholders + calls + output, as FX counts them
    assert measure["dynamic_dims"] == 1 and measure["elements"] == 7 * 3 + 3 * 4
    assert_well_formed(dynamic_subject)


def test_every_pass_yields_well_formed_candidates(dynamic_subject):
    for pass_fn in PASSES:
        for candidate in pass_fn(dynamic_subject):
            assert_well_formed(candidate)


def test_passes_are_deterministic(dynamic_subject):
    def run_all():
        return [json.dumps(c.to_json(), sort_keys=True) for p in PASSES for c in p(dynamic_subject)]

    assert run_all() == run_all()


def test_removed_nodes_become_inputs_that_keep_their_symbol(dynamic_subject):
    symbol = next(i for i in dynamic_subject.data["inputs"] if i["name"] == "x")["dims"][0]
    candidates = list(remove_node_chunks(dynamic_subject))
    assert candidates and all(c.cost() < dynamic_subject.cost() for c in candidates[:2])
    # Somewhere the relu's operand (the matmul) is cut off: it becomes an input
    # whose batch dim is still the symbol of x, marked dynamic.
    cut = [c for c in candidates if any(n["target"] == "torch.relu" for n in c.data["nodes"])
           and not any(n["target"] == "_operator.matmul" for n in c.data["nodes"])]
    assert cut
    fresh = next(i for i in cut[0].data["inputs"] if i["name"] == "matmul")
    assert fresh["dims"] == [symbol, 4] and fresh["dynamic"] == [True, False]
    assert "mark_dynamic(inputs[" in cut[0].repro_script()


def test_one_output_sizes_marks_and_values_shrink(dynamic_subject):
    outputs = [len(list(references(c.data["output"]))) for c in keep_one_output(dynamic_subject)]
    assert outputs == [1, 1]
    first = next(shrink_sizes(dynamic_subject))
    assert input_shape(next(i for i in first.data["inputs"] if i["name"] == "x"), first.data["symbols"]) == [2, 3]
    assert [dynamic_dims(c.data) for c in drop_dynamic_marks(dynamic_subject)] == [[]]
    seeded = next(drop_saved_values(dynamic_subject))
    assert "torch.load" not in seeded.repro_script() and "manual_seed" in seeded.repro_script()


def test_small_saved_values_are_written_into_the_script_narrowed_to_the_sizes(dynamic_subject):
    import torch

    saved = next(i for i in dynamic_subject.data["inputs"] if i["name"] == "x")
    stored = torch.load(saved["values"]["path"], weights_only=True)
    assert torch.equal(eval(tensor_expr(saved, dynamic_subject.data["symbols"]), {"torch": torch}), stored)
    assert "torch.load" not in dynamic_subject.repro_script()  # the repro needs no capture files
    shrunk = next(shrink_sizes(dynamic_subject))
    x = next(i for i in shrunk.data["inputs"] if i["name"] == "x")
    assert torch.equal(eval(tensor_expr(x, shrunk.data["symbols"]), {"torch": torch}), stored[:2])


def test_query_script_round_trip(dynamic_subject):
    """The rebuilt graph compiles and runs fresh; the shrunk one too, at its new
    size; and the accuracy script (compared with eager) agrees."""
    shrunk = next(shrink_sizes(dynamic_subject))
    for subject in (dynamic_subject, shrunk, shrunk.replace(accuracy=True)):
        outcome = run_query(subject.query_script(), SameAsOriginal(), 120, {})
        assert outcome.returncode == 0 and outcome.result == {"ok": True}, outcome.output[-3000:]
