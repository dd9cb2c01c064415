"""Steered draws (fuzz/steer.py): op statements lean toward the ops the run used least; the
case is still a pure function of its recorded choices; and the worker request that carries
the counts (symfuzz/messages.py)."""

from __future__ import annotations

from collections import Counter

from symfuzz import worker
from symfuzz.fuzz import steer
from symfuzz.fuzz.drawing import case_from_choices, generate
from symfuzz.fuzz.generate import GenConfig, spec_weights
from symfuzz.fuzz.ir import EffectNode, OpNode
from symfuzz.messages import Assign, Started, decode_request, encode_request
from symfuzz.settings import RunSettings

UNIT_TIER = True

CONFIG = GenConfig()
N = 12


def test_tickets_cover_the_weighted_draw_of_every_spec_once():
    table = steer.op_tickets(CONFIG)
    weights = spec_weights(CONFIG)
    assert table["count"] == sum(w for _, w in weights)
    low = 0
    for spec, weight in weights:
        assert table["ranges"][spec.name] == (low, low + weight - 1)
        low += weight


def test_least_used_are_the_ops_no_case_used_then_the_fewest():
    names = [spec.name for spec, _ in spec_weights(CONFIG)]
    assert steer.least_used(CONFIG, {}) == names
    unused = steer.least_used(CONFIG, {"add": 3, "mul": 1})
    assert "add" not in unused and "mul" not in unused and len(unused) == len(names) - 2
    every = {name: 2 for name in names}
    every["tanh"] = 1
    assert steer.least_used(CONFIG, every) == ["tanh"]


def test_a_steered_draw_reaches_the_ops_a_run_has_not_used_and_replays_from_its_choices():
    """Counts as if every op but a few had been used by many cases: the steered draws use the few
    far more often than the fresh draws of the same indices, and each replays from its choices."""
    names = [spec.name for spec, _ in spec_weights(CONFIG)]
    rare = names[::10]  # one spec in ten: matmul, add and the like are among them or not, by order
    counts = {name: 0 if name in rare else 50 for name in names}
    steered_uses, fresh_uses = Counter(), Counter()
    for i in range(N):
        case = steer.generate_steered(3, i, CONFIG, counts)
        assert case.origin["index"] == i and set(case.origin["steered"]["ops"]) <= set(rare)
        again = case_from_choices(case.origin["choices"], CONFIG)
        assert again.program.to_json() == case.program.to_json()
        assert again.schedule.to_json() == case.schedule.to_json()
        assert steer.generate_steered(3, i, CONFIG, counts).to_json() == case.to_json()  # (seed, index, counts)
        steered_uses.update(op for op in case.program.ops() if op in rare)
        fresh_uses.update(op for op in generate(3, i, CONFIG).program.ops() if op in rare)
    assert sum(steered_uses.values()) >= 2 * sum(fresh_uses.values()) > 0, (steered_uses, fresh_uses)
    assert len(steered_uses) > len(fresh_uses)


def test_a_steered_draw_leans_to_size_level_statements_and_motifs():
    """Guard forms, most of what a run reaches, come from size-level Python and motifs: a steered
    draw answers some statement kinds with theirs, so its programs hold more of those statements
    than the fresh draws of the same indices (each still replaying from its choices)."""
    def size_level(case):
        return sum(not isinstance(node, (OpNode, EffectNode)) for node in case.program.body)

    steered = [steer.generate_steered(7, i, CONFIG, {}) for i in range(30)]  # a case alone varies too much
    assert sum(c.origin["steered"]["size_level_kinds"] > 0 for c in steered) >= 20
    assert all(case_from_choices(c.origin["choices"], CONFIG).program == c.program for c in steered[:5])
    fresh = sum(size_level(generate(7, i, CONFIG)) for i in range(30))
    assert sum(map(size_level, steered)) >= 1.3 * fresh > 0  # 406 against 273 here


def test_the_assign_request_carries_op_counts_and_the_worker_draws_a_steered_case(monkeypatch):
    request = decode_request(encode_request(Assign(4, None, {"op_counts": {"add": 2, "tanh": 1}})))
    assert request == Assign(4, None, {"op_counts": {"add": 2, "tanh": 1}})
    monkeypatch.setattr(worker, "run_case", lambda case, lane, **kwargs: {"seconds": {}})
    sent = []
    settings = RunSettings(lane="eager", seed=3, guard_planning=False, reuse_calls=0)
    worker.run_generated(request.index, settings, CONFIG, None, sent.append, request.case, request.guide)
    started = [e for e in sent if isinstance(e, Started)]
    assert started and started[0].case == steer.generate_steered(3, 4, CONFIG, {"add": 2, "tanh": 1}).to_json()
    assert started[0].case["origin"]["steered"]["favoured"] == len(spec_weights(CONFIG)) - 2
