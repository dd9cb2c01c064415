"""Real-model motifs (fuzz/motifs.py) and the wider size-level Python (fuzz/size_forms.py).

Each motif and each size form can be drawn, is valid in every world, passes the
program check (every attribute it writes is allowed), and is recorded where it
must be (``origin["motifs"]``, unbacked sizes, the Dynamo flags ``.item()``
needs); programs of all of them compile and pass on aot_eager.
"""

from __future__ import annotations

from random import Random

import pytest
from hypothesis.internal.conjecture.data import ConjectureData

from symfuzz.fuzz import motifs, size_forms
from symfuzz.fuzz.case import Call, Case, Schedule
from symfuzz.fuzz.generate import Builder, GenConfig, build_case, choose_outputs
from symfuzz.fuzz.ir import CheckNode, ExprNode, Input, Program, SizeNode
from symfuzz.fuzz.schedule import demands_specialization
from symfuzz.fuzz.script_runtime import make_args, run_call
from symfuzz.oracles.lanes.execute import load_function

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

# Three worlds (calls) with different sizes; s2 is even everywhere (heads, RoPE, patches can use it).
SYMBOLS = {"s0": (2, 5, 3), "s1": (4, 6, 9), "s2": (4, 8, 6)}


def builder(seed: str, config: GenConfig = GenConfig()) -> Builder:
    data = ConjectureData(random=Random(seed))
    b = Builder(data.draw, config, {k: v for k, v in SYMBOLS.items()}, 3)
    b.add_input(("s0", "s1", "s2"), "float32")
    return b


def case_of(b: Builder, dynamic=None) -> Case:
    program = Program(tuple(b.inputs), tuple(b.body), tuple(choose_outputs(b)))
    calls = tuple(Call(tuple(b.arg_specs[w]), {k: v[w] for k, v in b.symbols.items()}) for w in range(b.n_worlds))
    config = {"dynamo": size_forms.required_config(program)} if size_forms.required_config(program) else {}
    return Case(Program.from_json(program.to_json()), Schedule(dynamic, calls, config))  # from_json: the program check


def runs_in_every_world(case: Case) -> None:
    fn = load_function(case.source)
    for call in case.schedule.calls:
        result = run_call(fn, make_args(call.to_json()))
        assert "error" not in result, (case.source, result["error"])


def drawn(draw_one, name: str, tries: int = 40):
    """The first builder (over seeds) on which ``draw_one(b)`` succeeds."""
    for i in range(tries):
        b = builder(f"{name}:{i}")
        if draw_one(b):
            return b
    raise AssertionError(f"{name}: not drawn in {tries} tries")


@pytest.mark.parametrize("name", motifs.MOTIF_NAMES)
def test_each_motif_is_drawn_valid_in_every_world_and_recorded(name):
    b = drawn(lambda b: motifs.draw_motif(b, only=name), name)
    assert b.motifs == [name]
    case = case_of(b)
    runs_in_every_world(case)
    source = case.source
    expected = {"heads": "transpose(1, 2)", "flatten": "", "patches": "unfold(", "rope": "torch.cat((-",
                "kv_cache": "torch.cat(", "pad_mask": "torch.arange(", "strided_reshape": "", "buffer_slice": "[:"}[name]
    if name == "patches":
        assert any(t in source for t in ("unfold(", "pixel_unshuffle(", ".permute(0, 2, 4, 1, 3, 5)")), source
    else:
        assert expected in source, source
    # sizes are read from the values, never baked in: every dim of the motif's shapes comes from .size/.shape
    assert ".size(" in source or ".shape[" in source


def test_a_motif_that_fails_somewhere_leaves_no_trace():
    b = builder("undo")
    before = (list(b.body), list(b.inputs), dict(b.symbols))

    def fail(b):
        motifs.new_input(b, ("s0", motifs.multiple_symbol(b, 7)))  # a new input and a new symbol...
        motifs.expr(b, "x0.view(-1, 7, 5)")  # ...then a statement no world accepts
    original = motifs.MOTIFS[:]
    motifs.MOTIFS[:] = [("fail", fail, 1)]
    try:
        assert not motifs.draw_motif(b)
    finally:
        motifs.MOTIFS[:] = original
    assert (list(b.body), list(b.inputs), dict(b.symbols)) == before and b.motifs == []


def test_build_case_records_the_motifs_it_drew_in_origin():
    seen = set()
    for i in range(30):
        case, b = build_case(ConjectureData(random=Random(f"origin:{i}")).draw)
        assert case.origin.get("motifs", []) == b.motifs
        seen.update(b.motifs)
    assert seen and seen <= set(motifs.MOTIF_NAMES)
    # --ops restricts a campaign to some ops: no motif adds others
    for i in range(10):
        case, b = build_case(ConjectureData(random=Random(f"ops:{i}")).draw, GenConfig(ops=("add", "mul", "sin")))
        assert not b.motifs


@pytest.mark.parametrize("draw_one", [size_forms.draw_conversion, size_forms.draw_cross_check,
                                      size_forms.draw_unbacked_check, size_forms.draw_size_arguments],
                         ids=lambda f: f.__name__)
def test_each_size_form_is_drawn_and_valid_in_every_world(draw_one):
    def with_partner(b):  # cross checks relate two values' sizes
        b.add_input(("s1", "s0"), "float32")
        return draw_one(b)
    b = drawn(with_partner, draw_one.__name__)
    runs_in_every_world(case_of(b))


def test_every_size_form_template_runs_and_passes_the_program_check():
    inputs = (Input("x0", "float32", ("s0", "s1")), Input("x1", "float32", ("s1", "s2")))
    body = [SizeNode("n0", "x0.size(1)"), SizeNode("n1", "x1.size(1)"), SizeNode("u0", size_forms.COUNTS[0].format(x="x1", d=0)),
            CheckNode("check", "u0 <= x0.size(1)")]
    fields = dict(x="x0", n="n0", m="n1", k=4, d=1)
    for i, form in enumerate(size_forms.CONVERSION_SIZES):
        body.append(SizeNode(f"c{i}", form.format(**fields)))
    for i, form in enumerate(size_forms.CONVERSION_SCALES + size_forms.SIZE_ARGUMENTS):
        body.append(ExprNode(f"e{i}", form.format(**fields)))
    for i, form in enumerate(size_forms.COUNTS):
        body.append(SizeNode(f"u{i + 1}", form.format(x="x0", d=0)))
    for i, form in enumerate(size_forms.COUNT_USES):
        body.append(ExprNode(f"w{i}", form.format(y="x0", e=1, u="u0")))
    program = Program(inputs, tuple(body), ("e0",))
    Program.from_json(program.to_json())
    fn = load_function(program.render())
    args = make_args({"args": [{"shape": [5, 6], "dtype": "float32", "seed": 1}, {"shape": [6, 7], "dtype": "float32",
                                                                                "seed": 2}]})
    assert "error" not in run_call(fn, args)


def test_unbacked_sizes_are_tracked_and_get_the_flag_item_needs():
    b = drawn(lambda b: b.add_input(("s1", "s2"), "int64") and size_forms.draw_unbacked_check(b), "unbacked")
    counts = [n.out for n in b.body if isinstance(n, SizeNode) and ".item()" in n.expr]
    assert counts and set(counts) <= b.unbacked
    case = case_of(b)
    assert size_forms.required_config(case.program) == {"capture_scalar_outputs": True}
    assert any(isinstance(n, CheckNode) and n.cond.startswith(f"{counts[0]} <= ") for n in b.body)
    plain = Program(case.program.inputs, (SizeNode("n1", "x0.size(0) // 2"),), ("x0",))
    assert size_forms.required_config(plain) == {}


def test_size_forms_that_compare_sizes_demand_specialization():
    x = (Input("x0", "float32", ("s0",)),)
    for expr in ("torch.sym_max(x0.size(0), 2)", "(x0.size(0) > 3) + 1", "(x0.size(0) >= x0.size(0)) * x0.size(0)",
                 "torch.sym_min(x0.size(0), 3)"):
        assert demands_specialization(Program(x, (SizeNode("n1", expr),), ("x0",))), expr
    assert demands_specialization(Program(x, (CheckNode("check", "x0.size(0) <= x0.size(0)"),), ("x0",)))
    assert not demands_specialization(Program(x, (SizeNode("n1", "math.ceil(x0.size(0) / 2)"),), ("x0",)))


@pytest.mark.integration
def test_programs_of_every_motif_and_size_form_compile_and_pass_on_aot_eager(monkeypatch):
    from symfuzz.oracles.lanes.execute import execute
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.registry import judge

    b = builder("aot", GenConfig(max_inputs=8))
    for name in motifs.MOTIF_NAMES:
        assert any(motifs.draw_motif(b, only=name) for _ in range(30)), name
    for draw_one in (size_forms.draw_conversion, size_forms.draw_cross_check, size_forms.draw_unbacked_check,
                     size_forms.draw_size_arguments):
        assert any(draw_one(b) for _ in range(30)), draw_one.__name__
    monkeypatch.setattr("symfuzz.fuzz.generate.MAX_OUTPUTS", 100)  # every sink an output: nothing is dead code
    case = case_of(b, dynamic=True)  # one compile for all three calls (cheap)
    run = execute(case, get_lane("aot_eager"))
    assert all("error" not in c.compiled for c in run.calls), [c.compiled.get("error") for c in run.calls]
    failures = [v for v in judge(case, run) if not v.ok]
    assert not failures, (case.source, failures)
