"""The compiler features a campaign counts (symfuzz/coverage.py), and how guidance picks the
cases it mutates (symfuzz/case_source.py): what reached something first becomes a parent,
and whether case i is a mutant, and of which parent, follows from (seed, i)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from symfuzz.case_source import (MAX_PARENT_WEIGHT, MUTANT_SHARE, MUTANT_SHARE_BOUNDS, YIELD_MEMORY, CaseSource,
                                 GuideYield, Parent)
from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.coverage import RARE_CLASSES, Coverage, classes_of, feature_keys, merged
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.messages import CaseResult
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.progress import Progress
from symfuzz.settings import CampaignConfig
from symfuzz.stats import Stats

UNIT_TIER = True


def test_a_case_reaches_new_features_once_and_the_counts_add_up():
    cov = Coverage()
    first = cov.add({"guard": ["Eq(Mod(s,c),0)", "s <= c"], "index": ["FloorDiv[symbolic-divisor]"]}, 1.0)
    assert first == ["guard:Eq(Mod(s,c),0)", "guard:s <= c", "index:FloorDiv[symbolic-divisor]"]
    assert cov.add({"guard": ["s <= c"]}, 2.0) == []
    assert cov.add({"guard": ["s <= c"], "lowering": ["fallback:aten.nonzero.default"]}, 3.0) == [
        "lowering:fallback:aten.nonzero.default"]
    data = cov.to_json()
    assert data["distinct"] == 4 and data["cases_with_new"] == 2
    assert data["by_family"] == {"guard": 2, "index": 1, "lowering": 1}
    assert data["reached"]["guard"] == {"Eq(Mod(s,c),0)": 1, "s <= c": 3}
    assert data["over_time"] == [[1.0, 3], [3.0, 4]]  # the curve grows only when something new is reached
    again = Coverage()
    again.restore(json.loads(json.dumps(data)))  # --resume carries it over
    assert again.to_json() == data
    both = merged([data, data])
    assert both["distinct"] == 4 and both["reached"]["guard"]["s <= c"] == 6
    assert data["cases"] == 3 and data["classes"]["symbolic-divisor-index"] == 1
    assert both["cases"] == 6 and both["classes"]["symbolic-divisor-index"] == 2
    assert list(data["classes"]) == list(RARE_CLASSES)  # every class, reached or not, in the table's order


@pytest.mark.parametrize("keys, expected", [
    (["index:FloorDiv[symbolic-divisor]", "index:ModularIndexing[const-divisor]"], ["symbolic-divisor-index"]),
    (["index:ModularIndexing[symbolic-modulus]"], ["symbolic-divisor-index"]),
    (["index:FloorDiv[const-divisor]", "index:Max[symbolic-bound]"], []),
    (["aot:symints-saved:0", "aot:graph:backward"], ["backward-compiled"]),
    (["aot:symints-saved:2-3"], ["sizes-saved-for-backward"]),
    (["specialize:dynamic-python-int", "specialize:automatic-dynamic:dynamic->static"], ["symbolic-python-number"]),
    (["specialize:python-number:EQUALS_MATCH:AttrSource", "unbacked:created:nonzero", "unbacked:range[0,oo]"],
     ["specialized-python-number", "unbacked-symbol"]),
])
def test_rare_classes_read_a_cases_features(keys, expected):
    assert classes_of(keys) == expected


def test_feature_keys_are_sorted_and_deduplicated():
    assert feature_keys({"b": ["y", "x", "x"], "a": ["z"]}) == ["a:z", "b:x", "b:y"]
    assert feature_keys({}) == [] and feature_keys(None) == []


class _Worker:
    def __init__(self):
        self.assigned = []

    def assign(self, index, case=None, guide=None):
        self.assigned.append((index, case, guide))
        return True


def _source(tmp_path, guidance, corpus=None):
    config = CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), seed=3, max_cases=200, guidance=guidance,
                            corpus=corpus)
    return CaseSource(config, Stats(config), Progress(60, enabled=False))


def _case(i, parent=None):
    program = Program(inputs=(Input("x0", "float32", ("s0", 4)),), body=(OpNode("v1", "neg", ("x0",), {}),),
                      outputs=("v1",))
    calls = (Call((ArgSpec((5, 4), "float32", 1),)),)
    origin = {"seed": 3, "index": i, "choices": [i, 1, 2]}
    if parent is not None:
        origin["mutant"] = {"parent": parent, "edit": "an edit"}
    return Case(program, Schedule(None, calls), origin).to_json()


def _assign_all(source, n):
    worker = _worker = _Worker()
    for _ in range(n):
        source.assign_next(worker)
    return _worker.assigned


def test_without_a_parent_guided_cases_are_steered_and_without_guidance_every_case_is_a_fresh_draw(tmp_path):
    fresh = _source(tmp_path, 0.5)
    fresh.stats.ops.update({"add": 2, "mul": 1})
    guides = [g for _, _, g in _assign_all(fresh, 20) if g is not None]  # nothing reached yet: no parent
    assert 4 <= len(guides) <= 16 and fresh.steered == len(guides) and fresh.mutants == 0
    assert all(g == {"op_counts": {"add": 2, "mul": 1}} for g in guides)  # the ops the run used so far
    off = _source(tmp_path, 0.0)
    off.add_to_corpus(_case(0), 0, CaseResult(), ["index:Mod[symbolic-divisor]"])
    assert off.pool == [] and all(m is None for _, _, m in _assign_all(off, 20))


def test_cases_that_reached_something_new_are_mutated_and_the_choice_follows_the_seed(tmp_path):
    def run():
        source = _source(tmp_path, 0.5)
        source.add_to_corpus(_case(0), 0, CaseResult(total_seconds=4.0),
                             ["guard:s <= c", "index:Mod[symbolic-divisor]", "unbacked:created:item"])
        source.add_to_corpus(_case(1), 1, CaseResult(), [])  # nothing new: not a parent
        # A new guard text or Dynamo guard kind alone (nearly every case has one) makes no parent.
        source.add_to_corpus(_case(3), 3, CaseResult(), ["guard:Ne(s,c)", "dynamo:guard:TENSOR_MATCH"])
        source.add_to_corpus(_case(2), 2, CaseResult(total_seconds=0.5), ["lowering:fallback:aten.nonzero.default"])
        return source, _assign_all(source, 200)

    source, assigned = run()
    assert [p.name for p in source.pool] == ["0", "2"]
    # A parent keeps all the steering features it reached (not the guard text), and its run time.
    assert source.pool[0].features == ("index:Mod[symbolic-divisor]", "unbacked:created:item")
    assert [p.seconds for p in source.pool] == [4.0, 0.5]
    guided = [m for _, _, m in assigned if m is not None]
    mutants = [m for m in guided if "choices" in m]
    assert 70 <= len(guided) <= 130  # about half, at --guidance 0.5
    # MUTANT_SHARE of those mutate a parent; the rest are steered draws
    assert 0.15 <= len(mutants) / len(guided) <= 0.45 and source.mutants == len(mutants)
    assert source.steered == len(guided) - len(mutants)
    assert {m["parent"] for m in mutants} == {"0", "2"}
    assert all(m["choices"] == _case(int(m["parent"]))["origin"]["choices"] for m in mutants)
    assert run()[1] == assigned  # the same seed and pool: the same mutants, of the same parents


def test_a_parent_weighs_by_how_rare_its_features_are_and_fades_while_its_mutants_find_nothing():
    parent = Parent("0", [1, 2], ("index:Mod[symbolic-divisor]", "lowering:aten.add"), seconds=0.5)
    assert parent.weight({"index:Mod[symbolic-divisor]": 1, "lowering:aten.add": 4}) == 1.25  # 1/1 + 1/4
    assert parent.weight({"index:Mod[symbolic-divisor]": 10, "lowering:aten.add": 10}) == 0.2  # both common now
    assert parent.weight({}) == 2.0  # features counted by no case yet (a stored parent's): one each
    parent.mutated = 3  # three mutants, none fruitful: half the share
    assert parent.weight({"index:Mod[symbolic-divisor]": 1, "lowering:aten.add": 4}) == 0.625
    parent.fruitful = 3  # every one reached something new: the whole share, never more
    assert parent.weight({"index:Mod[symbolic-divisor]": 1, "lowering:aten.add": 4}) == 1.25
    slow = Parent("1", [1], ("index:Mod[symbolic-divisor]",), seconds=4.0)
    assert slow.weight({"index:Mod[symbolic-divisor]": 1}) == 0.25  # per second it took
    many = Parent("2", [1], tuple(f"lowering:op{i}" for i in range(20)), seconds=1.0)
    assert many.weight({}) == MAX_PARENT_WEIGHT  # rarity is capped


def test_a_mutant_credits_its_parent_only_when_it_reaches_a_steering_feature_first(tmp_path):
    source = _source(tmp_path, 1.0)
    source.add_to_corpus(_case(0), 0, CaseResult(), ["index:Mod[symbolic-divisor]"])
    source.add_to_corpus(_case(1), 1, CaseResult(), ["lowering:aten.add"])
    assigned = [(i, c, m) for i, c, m in _assign_all(source, 60) if "choices" in m]  # all guided at --guidance 1
    by_parent = Counter(m["parent"] for _, _, m in assigned)
    assert [p.mutated for p in source.pool] == [by_parent["0"], by_parent["1"]]
    of = {name: [i for i, _, m in assigned if m["parent"] == name] for name in ("0", "1")}
    assert of["0"] and of["1"]
    a, b, c = of["1"][0], of["1"][-1], of["0"][0]
    source.add_to_corpus(_case(a, parent="1"), a, CaseResult(), ["lowering:aten.mul"])  # fruit
    source.add_to_corpus(_case(b, parent="1"), b, CaseResult(), ["guard:Eq(s,c)", "dynamo:guard:X"])  # none
    source.add_to_corpus(_case(c, parent="0"), c, CaseResult(), [])
    assert [p.fruitful for p in source.pool] == [0, 1, 0]  # case a reached a new lowering: a parent itself
    assert source.pool[2].name == str(a)
    source.add_to_corpus(_case(a, parent="1"), a, CaseResult(), ["lowering:aten.div"])  # finished already
    source.add_to_corpus(_case(7, parent="1"), "corpus:" + "0" * 40, CaseResult(), ["lowering:aten.sub"])  # replayed
    assert [p.fruitful for p in source.pool[:2]] == [0, 1]  # neither was assigned as this run's mutant
    # A mutant whose edits all failed (a fresh draw stood in) is no mutant of its parent.
    d = of["0"][-1]
    fallback = _case(d, parent="0")
    fallback["origin"]["mutant"]["edit"] = None
    source.add_to_corpus(fallback, d, CaseResult(), [])
    assert source.pool[0].mutated == by_parent["0"] - 1


def test_stored_corpus_cases_are_parents_and_new_features_are_stored_with_the_case(tmp_path, monkeypatch):
    monkeypatch.setattr("symfuzz.case_source.environment", lambda: {"torch": "2.13.0"})  # (platform asks uname)
    corpus = CaseCorpus(tmp_path / "corpus")
    corpus.add(_case(7), "eager", ["op:add", "feature:index:Mod[symbolic-divisor]"], "2.13.0")
    corpus.add(_case(9), "eager", ["finding:value-mismatch-0123456789"], "2.13.0",
               features={"lowering": ["aten.nonzero"], "guard": ["s <= c"]})
    corpus.add(_case(11), "eager", ["op:add", "feature:guard:Ne(s,c)"], "2.13.0")  # nothing rare: no parent
    source = _source(tmp_path, 0.5, corpus=tmp_path / "corpus")
    assert all(p.name.startswith("corpus:") for p in source.pool)
    assert sorted(p.features for p in source.pool) == [("index:Mod[symbolic-divisor]",), ("lowering:aten.nonzero",)]
    reached = {"guard": ["s <= c"]}
    source.add_to_corpus(_case(8), 8, CaseResult(reached=reached), ["guard:s <= c"])  # stored, though no parent
    stored = {s.name: json.loads((corpus.cases_dir / f"{s.name}.json").read_text()) for s in corpus}
    entry = next(e for e in stored.values() if e["case"]["origin"]["index"] == 8)
    assert "feature:guard:s <= c" in entry["why"] and entry["features"] == reached


def test_guided_cases_lean_to_the_kind_that_reaches_new_features_faster_and_neither_starves(tmp_path):
    yields = GuideYield.prior()
    assert yields.mutant_share() == pytest.approx(MUTANT_SHARE)  # before any guided case finished
    yields.count("steered", 60, 60.0)  # a new feature a second
    yields.count("mutant", 3, 30.0)  # one every ten seconds
    assert MUTANT_SHARE_BOUNDS[0] <= yields.mutant_share() < 0.2
    for _ in range(100):
        yields.count("mutant", 0, 30.0)
    assert yields.mutant_share() == MUTANT_SHARE_BOUNDS[0]  # still drawn now and then: it may pay off later
    for _ in range(100):
        yields.count("mutant", 300, 30.0)
    assert yields.mutant_share() == MUTANT_SHARE_BOUNDS[1]

    # The rates are recent ones: steered draws that reaped a feature a second early on, and reach
    # little now, lose the lead to mutants that reach a little more now, however long ago the harvest.
    lately = GuideYield.prior()
    for _ in range(200):
        lately.count("steered", 10, 10.0)
    for _ in range(30):
        lately.count("steered", 1, 10.0)
        lately.count("mutant", 2, 10.0)
    assert lately.mutant_share() > 0.55  # cumulative rates would give 0.18: 2030 features in 2300 s, against 60 in 300 s

    source = _source(tmp_path, 1.0)  # the source counts its finished guided cases, by kind
    steered = _case(4)
    steered["origin"]["steered"] = {"favoured": 200, "ops": ["tanh"]}
    source.add_to_corpus(steered, 4, CaseResult(total_seconds=5.0), ["lowering:aten.tanh", "guard:Eq(s,c)"])
    source.add_to_corpus(_case(5, parent="0"), 5, CaseResult(total_seconds=8.0), [])
    source.add_to_corpus(_case(6), 6, CaseResult(total_seconds=3.0), ["lowering:aten.mul"])  # a fresh draw: neither
    prior = GuideYield.prior()
    m = YIELD_MEMORY
    assert source.yields.features == pytest.approx({"mutant": prior.features["mutant"] * m,
                                                    "steered": prior.features["steered"] * m + 2})
    assert source.yields.seconds == pytest.approx({"mutant": prior.seconds["mutant"] * m + 8.0,
                                                   "steered": prior.seconds["steered"] * m + 5.0})
    # The op a steered draw answered with counts as tried, placed or not: one never valid is not favoured forever.
    guide = next(g for g in map(source.guide_for, range(7, 200)) if g and "op_counts" in g)
    assert guide["op_counts"]["tanh"] == source.stats.ops.get("tanh", 0) + 1
