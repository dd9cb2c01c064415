"""The model source: drawing model cases, checking them as read, judging their recompiles by
torch's own rules, and rendering their repro. No model is built here (no transformers import,
no compile): the runs are in test_models_run.py and test_quality_models.py."""

import ast
import copy
import json

import pytest

from symfuzz.corpus.finding import Finding, FindingFormatError, check_case
from symfuzz.corpus.scripts import render_repro
from symfuzz.fuzz.model_case import ARCHS, check_model_case, describe_call, is_model_case, schedule_lines
from symfuzz.fuzz.model_draw import CONFIGS, generate_model, model_case_from_choices
from symfuzz.fuzz.model_judge import (MODEL, GuardModel, _derived_zero_or_one, _guard_holds, compile_blocks,
                                        guard_origin, guard_parts, is_torch_origin, judge_model_run, judge_recompiles,
                                        model_signature)
from symfuzz.oracles.verdict import ExcessRecompile, OutputMismatch, Verdict
from symfuzz.settings import parse_source, source_of
from symfuzz.stats import model_table

UNIT_TIER = True


def test_every_architecture_has_a_config_and_a_campaign_goes_round_them():
    assert set(CONFIGS) == set(ARCHS) and len(ARCHS) >= 15
    first = [generate_model(0, i, list(ARCHS))["arch"] for i in range(len(ARCHS))]
    assert sorted(first) == sorted(ARCHS)  # the first cases cover every architecture once
    assert first != [generate_model(1, i, list(ARCHS))["arch"] for i in range(len(ARCHS))]  # in a seed's order


def test_a_model_case_is_a_pure_function_of_seed_and_index_and_replays_from_its_choices():
    one, two = generate_model(3, 7, list(ARCHS)), generate_model(3, 7, list(ARCHS))
    assert one == two and generate_model(3, 8, list(ARCHS)) != one
    again = model_case_from_choices(one["origin"]["choices"], one["origin"]["archs"])
    assert again == {k: v for k, v in one.items() if k != "origin"}
    assert json.loads(json.dumps(one)) == one  # plain JSON: a finding stores it as it is


def test_drawn_schedules_are_what_model_users_run():
    cases = [generate_model(0, i, ["llama", "gpt2", "qwen2"]) for i in range(150)]
    calls = [c for case in cases for c in case["calls"]]
    kinds = {c["kind"] for c in calls}
    assert kinds == {"forward", "decode", "train"}
    assert any(c.get("lengths") and min(c["lengths"]) < c["seq"] for c in calls)  # padding
    assert any(c.get("positions") for c in calls) and any(c.get("cache") == "static" for c in calls)
    assert {case["dynamic"] for case in cases} == {True, None}
    marks = [m for c in calls for m in (c.get("marks") or {}).values()]
    assert any(m.get("max") for m in marks) and any(m["mark"] == "dynamic" and "max" not in m for m in marks)
    # Many checked calls per compile: every case ends in forwards at new sizes inside compiled regions.
    assert min(len(case["calls"]) for case in cases) >= 16
    # A user never marks a size of 1 dynamic (torch specializes it whatever the mark says), nor a
    # length whose derived size is 1 (ViT's patches per side).
    for case in cases + [generate_model(0, i, ["vit"]) for i in range(40)]:
        first = case["calls"][0]
        for what, mark in (first.get("marks") or {}).items():
            assert (first["batch"] if what == "batch" else first["seq"] // (4 if case["arch"] == "vit" else 1)) >= 2
            if case["arch"] == "vit" and what == "length" and "min" in mark:
                assert mark["min"] >= 8


@pytest.mark.parametrize("edit, field", [
    (lambda c: c.update(arch="resnet"), "arch"),
    (lambda c: c["config"].update({"import os": 1}), "config"),
    (lambda c: c["config"].update(hidden_size=object()), "config"),
    (lambda c: c["calls"][0].update(batch=0), "batch"),
    (lambda c: c["calls"][0].update(marks={"batch": {"mark": "unbacked"}}), "marks"),
    (lambda c: c.update(dynamic=False), "dynamic"),
    (lambda c: c["calls"].append({"kind": "train", "batch": 1, "seq": 2, "seed": 0}) or c.update(step=None), "step"),
])
def test_a_model_case_read_from_a_file_is_checked_field_by_field(edit, field):
    case = copy.deepcopy(generate_model(0, 1, ["llama"]))
    edit(case)
    with pytest.raises(ValueError, match=field):
        check_model_case(case)
    with pytest.raises(FindingFormatError, match="not a case this symfuzz can read"):
        check_case(case)


def test_sources_mix_by_seed_and_index():
    assert parse_source("models,random") == "random,models" and parse_source("models") == "models"
    with pytest.raises(ValueError, match="unknown source"):
        parse_source("programs")
    mixed = [source_of("random,models", 0, i) for i in range(200)]
    assert 60 < mixed.count("models") < 140 and mixed == [source_of("random,models", 0, i) for i in range(200)]
    assert {source_of("models", 0, i) for i in range(10)} == {"models"}


ZERO_ONE = ("0/0: 2 <= x.size()[1] <= 6  # if x.shape[1] > 6:  # transformers/x.py:4 in f (user code shown is first "
            "use of this value--the guard itself is not due user code but due to 0/1 specialization in the "
            "framework; to avoid specialization try torch._dynamo.decorators.mark_unbacked(tensor, dim))")


@pytest.mark.parametrize("text, origin", [
    (ZERO_ONE, "torch: 0/1 specialization"),
    ("kwargs['a'].size()[1] == kwargs['a'].size()[0]  # duck sizing added this equality", "torch: duck sizing"),
    ("0/1: 7 <= x.size()[1]  # if x.shape[1] > 6:  # transformers/models/x.py:4 in f "
     "(_dynamo/variables/tensor.py:2606 in evaluate_expr)", MODEL),
    ("eval Eq(s5, 5) [guard added] n = len(range(x.shape[-1]))  # nn/modules/sparse.py:5 in forward "
     "(_dynamo/variables/tensor.py:2606 in evaluate_expr)", "torch: Python code Dynamo traced (nn/modules/sparse.py)"),
    ("eval s7 < 16 [guard added] return F.conv1d(x, w)  # transformers/m.py:10 in f (_subclasses/fake_impls.py:1811 "
     "in conv)", "torch: a decomposition or meta function (_subclasses/fake_impls.py)"),
    ("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 5, actual 7", "torch: a static size"),
    # A range whose bounds came from a meta function and from a branch in the model: the model's.
    ("8 <= kwargs['p'].size()[2] <= 12  # x.flatten(2)  # transformers/vit.py:69 in forward (_refs/__init__.py:3965 in "
     "_reshape_view_helper_core_alg) and if n == m:  # transformers/vit.py:103 in f (_dynamo/variables/tensor.py:2606 "
     "in evaluate_expr)", MODEL),
])
def test_a_guard_says_where_it_came_from(text, origin):
    assert guard_origin(text) == origin
    assert is_torch_origin(origin) == (origin.startswith("torch") and "0/1" not in origin and "duck" not in origin)


def test_torch_s_rules_predict_which_calls_reuse_a_graph():
    dynamic = GuardModel(True)
    dynamic.compile({"input_ids": [2, 5]})
    assert dynamic.reuses({"input_ids": [3, 9]})  # new sizes, same region
    assert not dynamic.reuses({"input_ids": [1, 9]})  # a size of 1: the 0/1 specialization
    assert not dynamic.reuses({"input_ids": [2, 5], "attention_mask": [2, 5]})  # other inputs: another entry
    duck = GuardModel(True)
    duck.compile({"input_ids": [4, 4]})
    assert duck.reuses({"input_ids": [6, 6]}) and not duck.reuses({"input_ids": [6, 7]})  # duck sizing
    auto = GuardModel(None)  # automatic dynamic: static first, a changed dim dynamic at its recompile
    auto.compile({"input_ids": [2, 5]})
    assert not auto.reuses({"input_ids": [2, 7]})
    auto.compile({"input_ids": [2, 7]})
    assert auto.reuses({"input_ids": [2, 11]}) and not auto.reuses({"input_ids": [3, 11]})
    marked = GuardModel(None)  # a mark is its tensor's: it makes the first graph dynamic, not later ones
    marked.compile({"input_ids": [3, 5]}, marked={("input_ids", 0)})
    assert marked.reuses({"input_ids": [4, 5]}) and not marked.reuses({"input_ids": [4, 6]})
    inner = GuardModel(True)  # a size inside the model at 0 or 1 (one patch) is another region
    inner.compile({"pixel_values": [2, 3, 8, 8]}, units=())
    assert not inner.reuses({"pixel_values": [2, 3, 4, 4]}, units=("embeddings:0:1:1",))


def _entry(call, sizes, graphs, reasons=None, kind="forward", units=()):
    return {"call": call, "step": 0, "kind": kind, "eager": {"out": (), "unit_sizes": list(units)},
            "compiled": {"out": (), "graphs": graphs, "sizes": sizes, "reasons": reasons or {}, "guards_added": []}}


def _case(dynamic=True):
    return {"kind": "model", "arch": "llama", "dynamic": dynamic,
            "calls": [{"kind": "forward", "batch": 2, "seq": 5, "seed": 0}] * 3}


def test_a_recompile_torch_s_rules_do_not_explain_is_judged_by_its_guard():
    decomposition = ("(kwargs['input_ids'].size()[1] % 8) == 0  # x = y.view(-1)  # transformers/m.py:3 in f "
                     "(_refs/__init__.py:300 in view)")
    model_guard = ("kwargs['input_ids'].size()[1] <= 8  # if n > 8:  # transformers/m.py:3 in f "
                   "(_dynamo/variables/tensor.py:2606 in evaluate_expr)")
    for reason, failures, notes in [(decomposition, 1, 0), (model_guard, 0, 1),
                                    ("self.training == True", 0, 0), (ZERO_ONE.replace("x.size", "kwargs['x'].size"), 0, 0)]:
        entries = [_entry(0, {"input_ids": [2, 8]}, 1),
                   _entry(1, {"input_ids": [3, 12]}, 1, {"forward": [reason]})]
        found, noted = judge_recompiles(_case(), entries)
        assert (len(found), len(noted)) == (failures, notes), reason
    # A call torch's rules put in a new region (a size of 1) recompiles by design, whatever the guard says.
    entries = [_entry(0, {"input_ids": [2, 8]}, 1), _entry(1, {"input_ids": [1, 12]}, 1, {"forward": [decomposition]})]
    assert judge_recompiles(_case(), entries) == ([], [])


def test_a_static_size_under_dynamic_true_is_torch_s_unless_its_rules_made_it_static():
    static = "tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12"
    entries = [_entry(0, {"input_ids": [2, 8]}, 1), _entry(1, {"input_ids": [3, 12]}, 1, {"forward": [static]})]
    (failure,), _ = judge_recompiles(_case(True), entries)
    assert failure["symptom"] == "excess-recompiles" and failure["guard"].startswith("tensor 'kwargs")
    resumed = [_entry(0, {"input_ids": [2, 8]}, 1),
               _entry(1, {"input_ids": [3, 12]}, 1, {"torch_dynamo_resume_in_forward_at_9": [
                   "tensor 'hidden' size mismatch at index 1. expected 8, actual 12"]})]
    (lost,), _ = judge_recompiles(_case(True), resumed)
    assert lost["symptom"] == "lost-dynamism"
    # Under automatic dynamic the first graph is static by design: its failure explains nothing wrong.
    auto = [_entry(0, {"input_ids": [2, 8]}, 1), _entry(1, {"input_ids": [2, 12]}, 1, {"forward": [static]}),
            _entry(2, {"input_ids": [2, 16]}, 0)]
    assert judge_recompiles(_case(None), auto) == ([], [])


def test_a_size_derived_by_floor_division_at_one_is_torch_s_0_1_rule():
    guard = "((kwargs['pixel_values'].size()[2] // 4)*(kwargs['pixel_values'].size()[3] // 4)) != 16"
    assert _derived_zero_or_one(guard, [{"pixel_values": [2, 3, 4, 4]}])
    assert not _derived_zero_or_one(guard, [{"pixel_values": [2, 3, 16, 16]}])


def _model_finding(symptom="value-mismatch"):
    case = generate_model(0, 2, ["llama"])
    failure = {"symptom": symptom, "key": "forward|logits|values", "call": 1}
    evidence = OutputMismatch(path="logits", detail="logits: 3/160 elements differ; at [0, 1, 2]: compiled 1.5, "
                                                    "eager -0.7") if symptom == "value-mismatch" else \
        ExcessRecompile(detail="recompiled ...", recompile_reason="s0 % 8 == 0", guards=["torch: Inductor"])
    verdict = Verdict(ok=False, oracle="model", symptom=symptom, stage="runtime",
                      signature=model_signature(case, failure, "inductor-cpp"), call_index=1, evidence=evidence)
    lane = {"name": "inductor-cpp", "backend": "inductor", "device": "cpu", "env": {}, "config": {"cpu_backend": "cpp"}}
    return Finding(case=case, verdict=verdict, lane=lane, environment={"torch": "2.13.0", "transformers": "5.25.0"})


def test_a_model_finding_s_repro_opens_with_the_bug_and_needs_only_torch_and_transformers():
    finding = _model_finding()
    assert is_model_case(finding.case)
    text = render_repro(finding)
    tree = ast.parse(text)
    head = text.split("# ---------------------------------------------------------------- the model")[0]
    assert head.count("\n") < 40, head
    assert "value-mismatch in llama at call 1" in head and "logits: 3/160 elements differ" in head
    assert "LlamaForCausalLM(LlamaConfig(**CONFIG))" in head
    for line in schedule_lines(finding.case["calls"], 1):
        assert line in head
    assert "call 1: " + describe_call(finding.case["calls"][1]) + "   <- fails here" in head
    # Its config and its calls are right below the docstring, as code.
    assert text.index("CONFIG = {") < text.index("CALLS = [") < text.index("def main():")
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "symfuzz" not in imported and imported <= set(__import__("sys").stdlib_module_names) | {"torch", "transformers"}
    assert finding.verdict.signature in text
    # It is read back from finding.json as it was written.
    assert Finding.from_json(json.loads(json.dumps(finding.to_json()))).case == finding.case


def test_stats_count_cases_calls_and_findings_per_architecture():
    counts = {"model:llama:cases": 2, "model:llama:calls": 30, "model:gpt2:findings": 1, "programs_generated": 3}
    table = model_table(counts)
    assert table["llama"]["cases"] == 2 and table["llama"]["calls"] == 30 and table["llama"]["findings"] == 0
    assert table["gpt2"]["findings"] == 1 and set(table) == {"llama", "gpt2"}


def test_the_html_report_has_a_row_per_architecture():
    from symfuzz.report_html import _models_section

    html = "\n".join(_models_section({"models": {"llama": {"cases": 2, "calls": 31, "findings": 1}, "bert": {}}}))
    assert "<h2>Real models</h2>" in html and "<td>llama</td><td>2</td><td>31</td>" in html and "<td>bert</td>" in html
    assert _models_section({"models": {}}) == []


def test_a_refused_mark_past_the_model_s_own_position_table_is_the_model_s_limit():

    case = {"kind": "model", "arch": "bert", "dynamic": None, "config": {"max_position_embeddings": 66},
            "calls": [{"kind": "forward", "batch": 1, "seq": 24, "seed": 0}]}
    message = ("Constraints violated (L['kwargs']['input_ids'].size()[1])!\n  - Not all values of "
               "L['kwargs']['input_ids'].size()[1] in the specified range L['kwargs']['input_ids'].size()[1] <= 512 "
               "satisfy the generated guard 2 <= L['kwargs']['input_ids'].size()[1] and "
               "L['kwargs']['input_ids'].size()[1] <= 66")
    error = {"type": "torch.fx.experimental.symbolic_shapes.ConstraintViolationError", "message": message,
             "traceback": ""}
    entry = {"call": 0, "step": 0, "kind": "forward", "eager": {"out": ()},
             "compiled": {"error": error, "guards_added": [
                 "eval s1 <= 66 [guard added] x = self.position_ids[:, :n]  # transformers/m.py:3 in f "
                 "(_subclasses/fake_impls.py:10 in slice)"]}}
    failures, notes = judge_model_run(case, [entry])
    assert failures == [] and notes[0]["origin"] == MODEL
    # The same guard where no size of the config explains its bound is torch's.
    failures, _ = judge_model_run({**case, "config": {"max_position_embeddings": 512}}, [entry])
    assert failures[0]["symptom"] == "over-specialization" and "fake_impls.py" in failures[0]["origin"]
    # Drawn bounds stay inside the model's position table.
    for i in range(60):
        drawn = generate_model(0, i, ["bert", "gpt2", "opt"])
        for mark in (drawn["calls"][0].get("marks") or {}).values():
            assert mark.get("max", 0) <= 128



# ViT's branch where the patches fill its position table, as a compile records it (guard_lines).
_VIT_BLOCK = [
    "compile 0/0",
    "bind s1 = L['kwargs']['pixel_values'].size()[2]",
    "bind s2 = L['kwargs']['pixel_values'].size()[3]",
    "eval Ne(((s1//4))*((s2//4)), 16) [guard added] if num_patches == num_positions:  "
    "# transformers/models/vit/modeling_vit.py:103 in interpolate_pos_encoding (_dynamo/variables/tensor.py:2606 in evaluate_expr)",
    "eval 3*s2 <= 36 [guard added] (_prims_common/__init__.py:2070 in are_strides_like_channels_last_or_false)",
]


def test_a_compile_s_guards_hold_or_fail_at_another_call_s_sizes():
    binds, guards = compile_blocks(_VIT_BLOCK)["0/0"]
    assert binds == {"s1": ("pixel_values", 2), "s2": ("pixel_values", 3)}
    at = lambda h: {"pixel_values": [2, 3, h, h]}  # noqa: E731 - a table of sizes
    assert [_guard_holds(g, binds, at(12)) for g in guards] == [True, True]
    assert [_guard_holds(g, binds, at(16)) for g in guards] == [False, False]
    assert _guard_holds(guards[0], binds, {"input_ids": [2, 5]}) is None  # a size the call lacks: undecided
    assert _guard_holds("eval Ne(sqrt(s1), 2) [guard added]", binds, at(4)) is None  # a function not in the table
    assert guard_parts("0/0: a <= 3  # x (f.py:1 in g); b == 2  # y") == ["a <= 3  # x (f.py:1 in g)", "b == 2  # y"]


def test_a_recompile_where_the_model_takes_another_branch_is_the_model_s_even_when_torch_s_guard_failed_first():
    # torch folded the model's guard into its own range (8..12): Dynamo names only torch's.
    torch_range = ("0/0: 8 <= kwargs['pixel_values'].size()[2] <= 12  # x  # transformers/models/vit/modeling_vit.py:118 "
                   "in interpolate_pos_encoding (_prims_common/__init__.py:511 in _is_non_overlapping_and_dense_or_false)")
    case = {"kind": "model", "arch": "vit", "dynamic": True, "calls": [{"kind": "forward", "batch": 2, "seq": 12, "seed": 0}] * 3}
    first = _entry(0, {"pixel_values": [2, 3, 12, 12]}, 1)
    first["compiled"]["guards_added"] = _VIT_BLOCK
    on_table = _entry(1, {"pixel_values": [2, 3, 16, 16]}, 1, {"wrapper": [torch_range]})
    found, noted = judge_recompiles(case, [first, on_table])
    assert found == [] and "Ne(((s1//4))*((s2//4)), 16)" in noted[0]["guard"]
    # Off the table (20 px: 5x5 patches) the model's branch holds: torch's range alone recompiled.
    off_table = _entry(1, {"pixel_values": [2, 3, 20, 20]}, 1, {"wrapper": [torch_range]})
    found, noted = judge_recompiles(case, [first, off_table])
    assert len(found) == 1 and "_prims_common" in found[0]["origin"] and noted == []


def test_a_refused_mark_whose_range_holds_a_branch_of_the_model_is_the_model_s():
    message = ("Constraints violated (L['kwargs']['pixel_values'].size()[2])!\n  - You marked "
               "L['kwargs']['pixel_values'].size()[2] as dynamic but your code specialized it to be a constant (8).")
    error = {"type": "torch.fx.experimental.symbolic_shapes.ConstraintViolationError", "message": message}

    def run(high):
        case = {"kind": "model", "arch": "vit", "dynamic": True, "config": {},
                "calls": [{"kind": "forward", "batch": 2, "seq": 8, "seed": 0,
                           "marks": {"length": {"mark": "dynamic", "min": 8, "max": high}}}]}
        entry = {"call": 0, "step": 0, "kind": "forward", "eager": {"out": ()},
                 "compiled": {"error": error, "sizes": {"pixel_values": [2, 3, 8, 8]},
                              "guards_added": _VIT_BLOCK + ["set_replacement s1 = 8 "
                                                            "(_prims_common/__init__.py:2070 in are_strides_like_channels_last_or_false)"]}}
        return judge_model_run(case, [entry])

    failures, notes = run(512)  # 16 px (the table's 4x4 patches, height and width) is in the range: the model branches there
    assert failures == [] and notes[0]["origin"] == MODEL
    failures, notes = run(15)  # no branch of the model inside 8..15: torch's specialization is the finding
    assert failures[0]["symptom"] == "over-specialization" and "_prims_common" in failures[0]["origin"]


def _imports(text):
    tree = ast.parse(text)
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_a_model_finding_s_short_repro_opens_with_the_bug_in_a_screenful(arch):
    from symfuzz.corpus.short_repro import render_short

    case = generate_model(0, 0, [arch])
    case["calls"] = [{**c, "kind": "forward"} for c in case["calls"]]  # no training step before the failing call
    for symptom in ("value-mismatch", "excess-recompiles"):
        finding = _model_finding(symptom)
        finding.case = case
        text = render_short(finding)
        assert text is not None, (arch, symptom)
        first = text.split("\n", 3)[1]
        assert first.startswith(f'"""{symptom} in {arch} (transformers\' {ARCHS[arch][1]}) at call 1'), first
        assert len(text.splitlines()) <= 100, text
        assert _imports(text) <= set(__import__("sys").stdlib_module_names) | {"torch", "transformers"}
        # The calls through the failing one, as the case has them; the rest change nothing.
        calls = text[text.index("CALLS = ["):text.index("\n]\n")]
        assert calls.count("'seed'") == 2 and "# fails here" in calls
        assert ("error_on_recompile = True" in text) == (symptom == "excess-recompiles")
        assert ("torch.testing.assert_close" in text) == (symptom == "value-mismatch")


def test_a_short_repro_is_left_to_the_judged_script_where_it_cannot_show_the_bug_plainly():
    from symfuzz.corpus.short_repro import render_short

    finding = _model_finding()
    trained = copy.deepcopy(finding)
    trained.case["calls"][0] = {**trained.case["calls"][0], "kind": "train"}
    assert render_short(trained) is None  # a training step's weights before the failing call
    gpu = copy.deepcopy(finding)
    gpu.lane["device"] = "cuda"
    assert render_short(gpu) is None
    decode = copy.deepcopy(_model_finding("excess-recompiles"))
    decode.case["calls"][1] = {**decode.case["calls"][1], "kind": "decode", "steps": 2}
    assert render_short(decode) is None  # which step of a loop recompiled is the judge's bookkeeping
    # A decode loop before a failing forward is written out: prefill and steps on a cache of each side's own.
    decoding = copy.deepcopy(finding)
    decoding.case["calls"][0] = {**decoding.case["calls"][0], "kind": "decode", "steps": 2}
    text = render_short(decoding)
    assert "def forwards(model, call, kwargs, key):" in text and "transformers.DynamicCache" in text
    ast.parse(text)


def test_an_error_dynamo_raised_while_tracing_is_put_at_dynamo_s_stage():
    from symfuzz.fuzz.runtime.running import exception_stage

    traced = AssertionError("not simple sympy type <class 'NoneType'>: None\n\nfrom user code:\n   File \"m.py\", line 3")
    assert exception_stage(traced) == "dynamo"
    assert exception_stage(AssertionError("plain")) == "runtime"


def test_a_recompile_where_the_model_s_code_runs_a_new_branch_is_the_model_s():
    torch_guard = ("0/1: tensor 'kwargs['pixel_values']' size mismatch at index 2. expected 8, actual 16  # x "
                   "(_prims_common/__init__.py:2070 in are_strides_like_channels_last_or_false)")
    case = {"kind": "model", "arch": "vit", "dynamic": True, "calls": [{"kind": "forward", "batch": 2, "seq": 8, "seed": 0}] * 3}
    vit = "transformers/models/vit/modeling_vit.py"
    interpolating = [f"{vit}:100 in interpolate_pos_encoding", f"{vit}:118 in interpolate_pos_encoding"]
    # The compile at 8 px guarded sizes in interpolate_pos_encoding (the model's code there branches on them).
    guarded = [f"eval ((s1//4)) >= 2 [guard added] x = interpolate(  # {vit}:118 in interpolate_pos_encoding "
               "(_prims_common/__init__.py:511 in f)", "set_replacement s1 = 8 (_prims_common/__init__.py:2070 in f)"]

    def run(lines_now, guards=guarded):
        first = _entry(0, {"pixel_values": [2, 3, 8, 8]}, 1)
        first["eager"]["model_lines"] = interpolating + ["transformers/warn_once.py:3 in warn"]  # a first call's own line
        first["compiled"]["guards_added"] = ["compile 0/0", *guards]
        later = _entry(1, {"pixel_values": [2, 3, 16, 16]}, 1, {"wrapper": [torch_guard]})
        later["eager"]["model_lines"] = lines_now
        return judge_recompiles(case, [first, later])

    # 16 px fills the position table: the model returns it as it is (line 104), a branch it did not take at 8.
    table = [f"{vit}:100 in interpolate_pos_encoding", f"{vit}:104 in interpolate_pos_encoding"]
    found, noted = run(table)
    assert found == [] and "modeling_vit.py:104 in interpolate_pos_encoding here, not at call 0" in noted[0]["detail"]
    # The same code as at 8 (the warning given once at the first call aside): torch's pin on 8 is the finding.
    found, noted = run(interpolating)
    assert len(found) == 1 and "_prims_common" in found[0]["origin"] and noted == []
    # A new line in a function where that compile guarded no size (a mask that is all ones this time) is no branch on sizes.
    found, noted = run(interpolating + ["transformers/masking_utils.py:40 in padding_mask_function"])
    assert len(found) == 1 and noted == []
    found, noted = run(table, guards=guarded[1:])
    assert len(found) == 1 and noted == []


def test_a_kv_cache_whose_layout_changed_between_steps_recompiles_by_torch_s_stride_guards():
    def judged(guard):
        entries = [_entry(0, {"input_ids": [2, 8]}, 1), _entry(1, {"input_ids": [3, 12]}, 1, {"forward": [guard]})]
        return judge_recompiles(_case(), entries)

    where = "  # x = y  # transformers/cache_utils.py:9 in update (_inductor/lowering.py:1 in f)"
    assert judged("0/0: cache.layers[0].keys.stride()[1] == cache.layers[0].keys.size()[3]" + where) == ([], [])
    # The same guard's origin on another input is torch's: the rule reads the guard, not its comment.
    assert len(judged("0/0: kwargs['input_ids'].stride()[0] == kwargs['input_ids'].size()[1]" + where)[0]) == 1
    assert len(judged("0/0: kwargs['cache_position'].stride()[0] == 2" + where)[0]) == 1


def test_a_short_repro_makes_the_inputs_and_marks_the_campaign_made():
    import torch

    from symfuzz.corpus.short_repro import render_short
    from symfuzz.fuzz.model_runtime import make_inputs, mark_inputs

    for arch in ("llama", "bert", "t5", "vit", "wav2vec2", "whisper_encoder"):
        finding = _model_finding()
        case = generate_model(1, 0, [arch])
        calls = [{**c, "kind": "forward"} for c in case["calls"][:2]]
        kind = ARCHS[arch][2]
        if kind in ("decoder", "encoder", "seq2seq"):  # padding (and position ids) as a padded batch has them
            calls[1] = {**calls[1], "lengths": [max(1, calls[1]["seq"] - r) for r in range(calls[1]["batch"])],
                        "positions": kind == "decoder", "marks": {"length": {"mark": "dynamic", "min": 2}}}
        case["calls"] = calls
        finding.case = case
        space = {"__name__": "short"}
        exec(compile(render_short(finding), "short.py", "exec"), space)  # defines; main() does not run
        for call in calls:
            theirs, ours = make_inputs(case, call), space["make_inputs"](call)
            assert set(theirs) == set(ours), arch
            for name, value in theirs.items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(value, ours[name]) and value.dtype == ours[name].dtype, (arch, name)
            mark_inputs(case, call, theirs)
            space["mark"](ours, call)
            marked = {k: getattr(v, "_dynamo_dynamic_indices", set()) for k, v in theirs.items() if isinstance(v, torch.Tensor)}
            assert marked == {k: getattr(v, "_dynamo_dynamic_indices", set()) for k, v in ours.items()
                              if isinstance(v, torch.Tensor)}, arch
