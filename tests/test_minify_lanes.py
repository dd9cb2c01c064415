"""The minifier's cheapest lane first: a finding whose bug lives in Dynamo is minified on a
Dynamo-only lane, and the result is checked on the finding's own lane."""

from dataclasses import dataclass, replace
from typing import Optional

from conftest import planted_env
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import ExprNode, Input, OpNode, Program
from symfuzz.minifier.case_passes import CASE_PASSES
from symfuzz.minifier.case_subject import CaseSubject
from symfuzz.minifier.criteria import SameStoredSignature
from symfuzz.minifier.driver import Driver
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import Verdict

# Stored under no real signature: the criterion takes the original's own (an unsound guard) at
# calibration, as for a finding an older symfuzz keyed.
SIGNATURE = "unsound-guard-0000000000"


def int_guard_finding(lane="inductor-cpp") -> CaseSubject:
    """x * k with k an int: under the planted int-guard bug (tests/plants) Dynamo reuses the
    graph specialized for k=2 at k=3, on every backend."""
    program = Program((Input("x0", "float32", ("s0", 3)), Input("k1", "int64", (), "int")),
                      (OpNode("v1", "relu", ("x0",)), ExprNode("v2", "v1 * k1"), OpNode("v3", "tanh", ("v2",)),
                       OpNode("v4", "abs", ("x0",))), ("v3", "v4"))
    calls = tuple(Call((ArgSpec((n, 3), "float32", n), ArgSpec.of_scalar("int", k)), {"s0": n})
                  for n, k in ((5, 2), (5, 3), (6, 3)))
    verdict = Verdict(False, "reuse-soundness", "unsound-guard", "guard", SIGNATURE, 1)
    return CaseSubject(Case(program, Schedule(None, calls)), verdict, get_lane(lane).to_json(), {})


def test_cheaper_variants_are_dynamo_lanes_of_an_inductor_finding_signed_under_its_lane():
    subject = int_guard_finding()
    variants = subject.cheaper_variants()
    assert [v.run_lane_name for v in variants] == ["eager", "aot_eager"]
    assert all(v.finding().lane["name"] == "inductor-cpp" for v in variants)  # signs as the finding
    assert "backend='eager'" in variants[0].query_script()
    assert variants[0].to_json() != subject.to_json()  # another query, memoized apart
    assert variants[0].on_own_lane() == subject
    assert int_guard_finding("aot_eager").cheaper_variants() == []  # not an Inductor lane
    passed = CaseSubject(subject.case, subject.verdict, subject.lane, {}, triage={"lanes": {"eager": "pass"}})
    assert [v.run_lane_name for v in passed.cheaper_variants()] == ["aot_eager"]


def test_a_dynamo_bug_found_on_inductor_is_minified_on_eager_and_checked_on_inductor(tmp_path):
    messages = []
    driver = Driver(SameStoredSignature(SIGNATURE), tmp_path / "out", budget=900, query_timeout=300,
                    env=planted_env("int-guard"), progress=messages.append)
    result = driver.minify(int_guard_finding(), CASE_PASSES)
    assert result.lane == {"minified_on": "eager", "tried": ["eager"], "final_check": "same failure"}, messages
    assert result.best.run_lane is None and result.best.lane["name"] == "inductor-cpp"
    assert result.after["ops"] == 1 and result.after["calls"] == 2, result.after
    assert result.repro_check["same_bug"], result.repro_check
    assert "backend='inductor'" in (tmp_path / "out" / "repro.py").read_text()


# Toy subjects (no torch): a set of items; the bug needs 3 and 7 on every lane, and 5 as well on
# the finding's own lane when ``own_needs`` says so.
TOY_QUERY = '''
import json
items, needs = {items!r}, {needs!r}
if needs <= items:
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "symptom": "crash", "signature": "crash-toy"}}))
else:
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
'''


@dataclass(frozen=True)
class LaneToy:
    items: tuple
    own_needs: frozenset = frozenset({3, 7})
    cheap_needs: Optional[frozenset] = frozenset({3, 7})  # None: never fails there
    run_lane: Optional[str] = None
    kind: str = "toy"

    def to_json(self):
        return {"items": list(self.items), "lane": self.run_lane}

    def measure(self):
        return {"nodes": len(self.items)}

    def cost(self):
        return (len(self.items),)

    def query_script(self):
        needs = self.own_needs if self.run_lane is None else (self.cheap_needs or {-1})
        return TOY_QUERY.format(items=set(self.items), needs=set(needs))

    repro_script = query_script

    def cheaper_variants(self):
        return [replace(self, run_lane="cheap")]

    def on_own_lane(self):
        return replace(self, run_lane=None)

    @property
    def run_lane_name(self):
        return self.run_lane or "own"


def drop_one(subject):
    for i in range(len(subject.items)):
        yield replace(subject, items=subject.items[:i] + subject.items[i + 1:])


def toy_driver(tmp_path, **kwargs):
    return Driver(SameStoredSignature("crash-toy"), tmp_path / "out", budget=120, query_timeout=60,
                  progress=lambda message: None, **kwargs)


def test_the_cheap_lane_is_tried_first_and_the_result_checked_on_the_own_lane(tmp_path):
    result = toy_driver(tmp_path).minify(LaneToy((1, 3, 5, 7, 9)), [drop_one])
    assert result.best == LaneToy((3, 7))  # back on the own lane
    assert result.lane == {"tried": ["cheap"], "minified_on": "cheap", "final_check": "same failure"}
    assert "original" not in result.phases  # the cheap run stood in for the original's check


def test_a_result_that_does_not_fail_on_the_own_lane_is_minified_again_there(tmp_path):
    subject = LaneToy((1, 3, 5, 7, 9), own_needs=frozenset({3, 5, 7}))
    result = toy_driver(tmp_path).minify(subject, [drop_one])
    assert result.best == LaneToy((3, 5, 7), own_needs=frozenset({3, 5, 7}))
    assert result.lane["final_check"].startswith("different")


def test_without_a_cheap_lane_showing_it_the_original_is_checked_on_its_own_lane(tmp_path):
    subject = LaneToy((1, 3, 5, 7, 9), cheap_needs=None)
    result = toy_driver(tmp_path).minify(subject, [drop_one])
    assert result.best == LaneToy((3, 7), cheap_needs=None)
    assert result.lane == {"tried": ["cheap"]} and "original" in result.phases
    # The earlier method (--own-lane-only) never tries the cheap lane.
    own = toy_driver(tmp_path, cheapest_lane_first=False).minify(LaneToy((1, 3, 5, 7, 9)), [drop_one])
    assert own.best == LaneToy((3, 7)) and own.lane == {}
