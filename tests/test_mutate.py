"""Mutants of stored cases (fuzz/mutate.py): drawn from a parent's choices with small edits,
a pure function of (seed, index, parent), replayable from their own choices, close to their
parent but not it; and the worker request that carries a parent (symfuzz/messages.py)."""

from __future__ import annotations

import json
import math
import re
import statistics
import struct
from collections import Counter
from random import Random

import pytest
from hypothesis.errors import StopTest

from symfuzz import worker
from symfuzz.fuzz import mutate
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.drawing import case_from_choices, generate
from symfuzz.fuzz.generate import GenConfig
from symfuzz.messages import Assign, Started, decode_request, encode_request
from symfuzz.settings import RunSettings

UNIT_TIER = True

CONFIG = GenConfig()
SEED = 5
N_PARENTS = 40


def statements(case: Case) -> list[str]:
    """The program's statements with value names erased (a dropped statement renames the rest)."""
    return [re.sub(r"\b[a-z]\d+\b", "_", json.dumps(node, sort_keys=True)) for node in case.program.to_json()["body"]]


def same_case(a: Case, b: Case) -> bool:
    return a.program.to_json() == b.program.to_json() and a.schedule.to_json() == b.schedule.to_json()


@pytest.fixture(scope="module")
def families():
    """(parent, mutant) for N_PARENTS parents, one mutant each."""
    out = []
    for i in range(N_PARENTS):
        parent = generate(SEED, i, CONFIG)
        out.append((parent, mutate.generate_mutant(SEED, 1000 + i, parent.origin["choices"], CONFIG, parent=f"p{i}")))
    return out


def test_a_mutant_is_a_pure_function_of_seed_index_and_parent():
    parent = generate(SEED, 0, CONFIG)
    first = mutate.generate_mutant(SEED, 7, parent.origin["choices"], CONFIG, parent="p0")
    mutate._layouts.clear()  # read the parent again rather than remembered
    again = mutate.generate_mutant(SEED, 7, parent.origin["choices"], CONFIG, parent="p0")
    assert first.to_json() == again.to_json()
    other = mutate.generate_mutant(SEED, 8, parent.origin["choices"], CONFIG, parent="p0")
    assert other.origin["choices"] != first.origin["choices"]


def test_a_mutant_replays_from_its_own_choices(families):
    for _, mutant in families[:10]:
        assert same_case(case_from_choices(mutant.origin["choices"], CONFIG), mutant)


def test_mutants_differ_from_their_parents_but_keep_most_of_them(families):
    fresh = [m for _, m in families if m.origin["mutant"]["edit"] is None]
    assert len(fresh) <= N_PARENTS // 10, [m.origin["mutant"] for m in fresh]
    kept = []
    for parent, mutant in families:
        assert not same_case(parent, mutant)
        assert Case.from_json(json.loads(json.dumps(mutant.to_json()))).to_json() == mutant.to_json()
        assert mutant.origin["mutant"]["parent"].startswith("p")
        if mutant.origin["mutant"]["edit"] is not None:
            ours, theirs = Counter(statements(parent)), Counter(statements(mutant))
            kept.append(sum((ours & theirs).values()) / max(1, sum(ours.values())))
    # Typically all but a statement or two of the parent survive; an edit of an input (its
    # rank, its dtype) may rebuild the program, as it changes what every op may take.
    assert statistics.median(kept) >= 0.75, sorted(kept)
    assert sum(k >= 0.5 for k in kept) >= 0.7 * len(kept), sorted(kept)


def test_the_parents_statements_are_found_and_drawn_back_unedited():
    for i in range(8):
        parent = generate(SEED, i, CONFIG)
        layout = mutate.read_layout(parent.origin["choices"], CONFIG)
        assert layout.choices == tuple(parent.origin["choices"])
        assert layout.statements and layout.n_ops is not None and layout.calls, \
            "build_case no longer draws as fuzz/mutate.py reads it (KIND_MAX, the counts first)"
        segments = layout.segments()
        case, data, kinds = mutate.draw_segments(segments, Random(0), CONFIG)
        assert kinds == len(segments) - 1 and tuple(data.choices) == layout.choices and same_case(case, parent)


def test_each_edit_changes_what_it_says():
    layouts = (mutate.parent_layout(generate(SEED, i, CONFIG).origin["choices"], CONFIG) for i in range(20))
    layout = next(lay for lay in layouts if len(lay.statements) >= 4)
    segments = layout.segments()
    rng = Random(0)

    edited = [list(s) for s in segments]
    assert mutate.edit_statement_head(layout, edited, rng) is not None
    changed = [(k, j) for k, s in enumerate(segments) for j, v in enumerate(s) if edited[k][j] != v]
    assert len(changed) == 1 and changed[0][1] == 1  # a statement's first choice after its kind

    variants, description = mutate.drop_statement(layout, segments, rng)
    assert description.startswith("drop statement")
    assert all(len(v) == len(segments) - 1 for v in variants)
    assert variants[0][0][layout.n_ops] == segments[0][layout.n_ops] - 1 or len(variants) == 1

    n_calls, n_symbols = segments[0][0], segments[0][1]
    n_inputs = len(layout.seeds) // n_calls  # a seed per call for every input
    for edit, step in ((mutate.add_call, 1), (mutate.drop_call, -1)):
        edited = edit(layout, segments, rng)
        if edited is None:
            continue
        (variant,), description = edited
        assert variant[0][0] == n_calls + step and len(variant) == len(segments)
        grown = sum(map(len, variant)) - sum(map(len, segments))
        assert grown == step * (n_symbols + n_inputs), description


def test_mutate_choices_is_small_and_chosen_by_its_random():
    parent = generate(SEED, 4, CONFIG)
    choices = parent.origin["choices"]
    first = mutate.mutate_choices(choices, Random(3), CONFIG)
    assert first == mutate.mutate_choices(choices, Random(3), CONFIG)
    segments, description = first
    assert 1 <= len(description.split("; ")) <= 3
    assert sum(len(s) for s in segments) >= len(choices) // 2 or "redraw" in description


def test_a_parent_from_another_generator_version_still_gives_a_case():
    parent = generate(SEED, 2, CONFIG)
    for choices in (parent.origin["choices"][:15], [True, 3, 2.5] + parent.origin["choices"][3:]):
        mutant = mutate.generate_mutant(SEED, 11, choices, CONFIG, parent="old")
        assert mutant.origin["mutant"]["parent"] == "old"
        assert same_case(case_from_choices(mutant.origin["choices"], CONFIG), mutant)


def test_a_mutant_that_cannot_be_drawn_falls_back_to_the_fresh_case(monkeypatch):
    def overrun(*args, **kwargs):
        raise StopTest(0)

    monkeypatch.setattr(mutate, "draw_segments", overrun)
    parent = generate(SEED, 1, CONFIG)
    case = mutate.generate_mutant(SEED, 12, parent.origin["choices"], CONFIG, parent="p1")
    assert same_case(case, generate(SEED, 12, CONFIG))
    assert case.origin["mutant"]["edit"] is None and "overran" in case.origin["mutant"]["fallback"]


AWKWARD = [True, False, 0, 1, -1, 2**70, 1.5, -0.0, 5e-324, math.inf, -math.inf, math.nan,
           struct.unpack(">d", bytes.fromhex("7ff0000000000001"))[0], b"", b"\x00\xff", "", "s\u00e9\n"]


def test_the_assign_request_carries_a_mutant_with_any_choices():
    line = encode_request(Assign(9, None, {"parent": "ab12", "choices": AWKWARD}))
    assert "\n" not in line and "NaN" not in line and "Infinity" not in line
    request = decode_request(line)
    assert request.index == 9 and request.case is None and request.guide["parent"] == "ab12"
    back = request.guide["choices"]
    assert [type(c) for c in back] == [type(c) for c in AWKWARD]
    for ours, theirs in zip(back, AWKWARD):
        if isinstance(ours, float):
            assert struct.pack(">d", ours) == struct.pack(">d", theirs)
        else:
            assert ours == theirs
    assert decode_request(encode_request(Assign(3))) == Assign(3)


def test_the_worker_draws_the_mutant_it_is_sent(monkeypatch):
    parent = generate(SEED, 6, CONFIG)
    monkeypatch.setattr(worker, "run_case", lambda case, lane, **kwargs: {"seconds": {}})
    sent = []
    settings = RunSettings(lane="eager", seed=SEED, guard_planning=False, reuse_calls=0)
    request = decode_request(encode_request(Assign(21, None, {"parent": "p6", "choices": parent.origin["choices"]})))
    worker.run_generated(request.index, settings, CONFIG, None, sent.append, request.case, request.guide)
    started = [e for e in sent if isinstance(e, Started)]
    expected = mutate.generate_mutant(SEED, 21, parent.origin["choices"], CONFIG, parent="p6")
    assert started and started[0].case == expected.to_json()
    assert started[0].case["origin"]["mutant"]["parent"] == "p6"
