"""A discrete output that flips where rounding explains it is no finding; one that flips far
from its threshold still is. In process, no compiling: the compiled side
is the program with a planted change."""

import ast
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from symfuzz.corpus.scripts import RUNTIME, Helpers
from symfuzz.fuzz import script_runtime as rt
from symfuzz.fuzz.runtime import rounding
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.oracles.differential import differential_oracle
from symfuzz.oracles.lanes.execute import CallResult, Run
from symfuzz.oracles.verdict import Verdict

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

EXPLAINED = "discrete flip explained by rounding"


def case():  # the oracle reads the run; the case only names the program
    program = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "relu", ("x0",)),), ("v1",))
    return Case(program, Schedule(True, (Call((ArgSpec((3,), "float32", 1),)),)))


def one_ulp_up(y):
    return torch.nextafter(y, torch.full_like(y, float("inf")))


def bf16_linear_inputs():
    """27 rows of a bfloat16 linear, and a row whose smallest value eager rounded up (so the
    float64 value lies below it): a threshold there is crossed by rounding alone."""
    x = rt.make_input([27, 16], torch.bfloat16, 1)
    w = rt.make_input([8, 16], torch.bfloat16, 2)
    y, y64 = F.linear(x, w), F.linear(x.double(), w.double())
    for row in range(27):
        col = int(y[row].float().argmin())
        if y[row, col].double() > y64[row, col] and int((y[row] == y[row, col]).sum()) == 1:
            return x, w, row, float(y[row, col])
    raise AssertionError("no row of the seeded inputs rounds its minimum up")


def judge(fn, compiled_fn, args):
    """The differential oracle's verdict on one call, and the repro's own judgment of it."""
    eager, compiled = rt.run_call(fn, args), rt.run_call(compiled_fn, args)
    reference = lambda: rt.reference_call(fn, args)["out"]  # noqa: E731
    verdict = differential_oracle(case(), Run("inductor-cpp", [CallResult(eager, compiled, reference)], ["op"]))
    return verdict, rt.judge_call(eager, compiled, reference)


def test_all_of_a_bf16_linear_flipped_by_one_ulp_at_the_threshold_is_explained_not_a_finding():
    x, w, row, t = bf16_linear_inputs()

    def fn(x, w):
        return (F.linear(x, w) > t).all(-1)

    def compiled_fn(x, w):  # rounds the linear one ulp higher, as other compiled code may
        return (one_ulp_up(F.linear(x, w)) > t).all(-1)

    eager, compiled = fn(x, w), compiled_fn(x, w)
    assert int((eager != compiled).sum()) >= 1 and bool(compiled[row]) and not bool(eager[row])
    # The float64 reference agrees with eager, so the old judgment confirmed this flip.
    assert rt.compare((eager,), (compiled,), lambda: (rt.reference_call(fn, [x, w])["out"][0],)) is None
    assert rt.compare((eager,), (compiled,), lambda: (rt.snapshot(fn(x.double(), w.double())),)) is not None

    verdict, repro = judge(fn, compiled_fn, [x, w])
    assert not verdict.ok and verdict.symptom == "value-mismatch"
    reason = verdict.evidence.rounding
    assert reason.startswith(f"{EXPLAINED}: element [{row}] hangs on all() of a mask that hangs on comparison gt"), reason
    assert "<= tol" in reason
    assert repro is None  # the repro script's judgment: no bug
    # The reason survives the finding's JSON.
    assert Verdict.from_json(verdict.to_json()).evidence.rounding == verdict.evidence.rounding


def test_a_comparison_flipped_far_from_its_threshold_is_still_a_value_mismatch():
    x, w, row, t = bf16_linear_inputs()

    def fn(x, w):
        return (F.linear(x, w) > t).all(-1)

    eager = fn(x, w)
    wrong_row = int((~eager).nonzero()[-1])
    assert wrong_row != row

    def compiled_fn(x, w):  # a real bug: a row far below the threshold said True
        out = (one_ulp_up(F.linear(x, w)) > t).all(-1)
        out[wrong_row] = True
        return out

    y64 = F.linear(x.double(), w.double())
    assert float(y64[wrong_row].min()) < t - 0.5  # far beyond any bfloat16 rounding
    verdict, repro = judge(fn, compiled_fn, [x, w])
    assert not verdict.ok and verdict.symptom == "value-mismatch" and verdict.evidence.rounding is None
    assert repro is not None and repro["symptom"] == "value-mismatch"


def test_argmax_near_tie_is_explained_and_a_wrong_index_with_a_big_margin_is_not():
    x = rt.make_input([12, 16], torch.float32, 3)
    w = rt.make_input([6, 16], torch.float32, 4)
    y = F.linear(x, w)
    top2 = y.topk(2, -1)
    row = int((top2.values[:, 0] - top2.values[:, 1]).argmin())
    gap = float(top2.values[row, 0] - top2.values[row, 1])
    assert gap > 1e-3  # a real gap: fp32 rounding cannot close it, a planted near tie can

    def fn(x, w):
        y = F.linear(x, w)
        y = y + (y == y[row].max()).float() * (-gap * 0.9999)  # the winner now leads by a hair
        return y.argmax(-1)

    def near_tie_flip(x, w):  # rounds the program's final subtraction the other way
        y = F.linear(x, w)
        y = y + (y == y[row].max()).float() * (-gap * 1.0001)
        return y.argmax(-1)

    assert int((fn(x, w) != near_tie_flip(x, w)).sum()) == 1
    verdict, repro = judge(fn, near_tie_flip, [x, w])
    assert not verdict.ok and verdict.evidence.rounding.startswith(EXPLAINED + ": argmax"), verdict.evidence.rounding
    assert repro is None

    def wrong_index(x, w):  # a real bug: argmin where argmax belongs
        return F.linear(x, w).argmin(-1)

    verdict, repro = judge(fn, wrong_index, [x, w])
    assert not verdict.ok and verdict.symptom == "value-mismatch" and verdict.evidence.rounding is None
    assert repro is not None


def test_float32_comparison_flipped_beyond_its_tolerance_is_a_value_mismatch():
    x = rt.make_input([40], torch.float32, 5)
    k = 7
    near = float(x[k] * 3 + 1) + 5e-3  # 5e-3 above element k: far beyond float32 rounding

    def fn(x):
        return (x * 3 + 1) > near

    def off_by_a_bit(x):  # a real bug: 1e-2 added before the comparison
        return (x * 3 + 1 + 1e-2) > near

    assert not bool(fn(x)[k]) and bool(off_by_a_bit(x)[k])
    verdict, repro = judge(fn, off_by_a_bit, [x])
    assert not verdict.ok and verdict.symptom == "value-mismatch" and verdict.evidence.rounding is None
    assert repro is not None

    on = float(x[k] * 3 + 1)  # exactly on element k's float32 value: one ulp flips it

    def at_threshold(x):
        return (x * 3 + 1) > on

    def one_ulp_higher(x):
        return one_ulp_up(x * 3 + 1) > on

    assert not bool(at_threshold(x)[k]) and bool(one_ulp_higher(x)[k])
    verdict, repro = judge(at_threshold, one_ulp_higher, [x])
    assert repro is None
    assert verdict.ok or verdict.evidence.rounding.startswith(EXPLAINED)


def test_a_real_mismatch_on_a_later_call_wins_over_an_explained_flip():
    x, w, row, t = bf16_linear_inputs()

    def fn(x, w):
        return (F.linear(x, w) > t).all(-1)

    def compiled_fn(x, w):
        return (one_ulp_up(F.linear(x, w)) > t).all(-1)

    args = [x, w]
    explained = CallResult(rt.run_call(fn, args), rt.run_call(compiled_fn, args),
                           lambda: rt.reference_call(fn, args)["out"])
    real = CallResult(rt.run_call(fn, args), rt.run_call(lambda x, w: ~fn(x, w), args),
                      lambda: rt.reference_call(fn, args)["out"])
    verdict = differential_oracle(case(), Run("inductor-cpp", [explained, real], ["op"]))
    assert not verdict.ok and verdict.call_index == 1 and verdict.evidence.rounding is None


def test_the_pasted_runtime_judges_a_flip_as_the_campaign_does():
    """A repro script carries compare and reference_call pasted from script_runtime: the pasted
    copy must explain the same flip (or confirmation disagrees with the campaign)."""
    x, w, row, t = bf16_linear_inputs()
    pasted = {}
    helpers = Helpers().pieces(RUNTIME, ["compare", "reference_call"])
    exec(compile("\n".join(helpers.imports + helpers.blocks), "<repro>", "exec"), pasted)
    assert "class RoundingShadow" in "\n".join(helpers.blocks)

    def fn(x, w):
        return (F.linear(x, w) > t).all(-1)

    eager, compiled = fn(x, w), (one_ulp_up(F.linear(x, w)) > t).all(-1)
    reference = lambda: pasted["reference_call"](fn, [x, w])["out"]  # noqa: E731
    assert pasted["compare"](eager, compiled, reference) is None
    bug = compiled.clone()
    bug[int((~eager).nonzero()[-1])] = True
    assert not torch.equal(bug, compiled)
    assert pasted["compare"](eager, bug, reference)["symptom"] == "value-mismatch"


@pytest.mark.integration
def test_the_campaign_keeps_an_explained_flip_in_suspect_and_never_confirms_it(tmp_path):
    from symfuzz.campaign import Campaign
    from symfuzz.settings import CampaignConfig
    from symfuzz.corpus.finding import Finding
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.verdict import OutputMismatch

    fixture = Finding.from_json(json.loads(
        (Path(__file__).parent / "fixtures" / "finding-v1-metadata-mismatch.json").read_text()))
    evidence = OutputMismatch(path="out", detail="1/27 elements differ", rounding="discrete flip explained by rounding")
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="inductor",
                      signature="value-mismatch-rounding", call_index=0, evidence=evidence)
    campaign = Campaign(CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), quiet=True))
    campaign.confirmation.candidate(Finding(case=fixture.case, verdict=verdict, lane=campaign.config.lane.to_json()))
    kept = json.loads((tmp_path / "out" / "suspect" / "value-mismatch-rounding" / "finding.json").read_text())
    assert kept["triage"]["suspect"] == "discrete flip explained by rounding"
    confirmation = campaign.confirmation
    assert confirmation.queue.empty() and not confirmation.confirming and not confirmation.confirmed


# ---------------------------------------------------------------- what rounding can never explain
# The reviewer's reproductions (bfloat16 x, a decision m = x * 1.5 > 0.5 with an element within
# rounding of 0.5): each compiled value below is one no flip of m can produce, so each must stay a
# value-mismatch.


def near_threshold_inputs():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, generator=g) * 2 - 1).to(torch.bfloat16)
    w = torch.randn(64, 8, generator=g).to(torch.bfloat16)
    # the precondition: the decision is ambiguous somewhere, so each test below could be explained away
    entry = rt.explain_rounding(lambda x: (x * 1.5) > 0.5, [x])[0]
    assert entry is not None and entry.taint is not None and 1 <= int(entry.taint.sum()) < 64
    return x, w


def judged(fn, args, wrong):
    """compare's verdict on ``wrong`` (eager's output -> compiled's), and what it explained."""
    eager = rt.run_call(fn, [a.clone() for a in args])["out"]
    explained = []
    diff = rt.compare(eager, wrong(eager), lambda: rt.reference_call(fn, [a.clone() for a in args])["out"], explained)
    return diff, explained


def test_a_float_sum_downstream_of_a_near_tie_is_not_explained():
    x, _ = near_threshold_inputs()

    def fn(x):
        m = (x * 1.5) > 0.5
        return torch.where(m, x, x * 2).sum()

    diff, explained = judged(fn, [x], lambda e: (e[0] + 100.0, e[1]))  # a sum off by 100
    assert diff is not None and diff["symptom"] == "value-mismatch" and diff["kind"] == "float:finite"
    assert explained == []


# ---------------------------------------------------------------- floats that jump
# A remainder drops by its divisor where its operand crosses a multiple of it, a float floor steps by 1:
# a last-bit difference upstream moves such a float by the whole step. That is explained only at an
# element within rounding of the jump, and only by a move of at most that step (carried through ops that scale
# or shift it by a known amount).


def jump_inputs():
    """float32: 0.99999994 (so ``x * 3`` rounds to just below 3), and values far from any multiple of 1."""
    return [torch.tensor([float(torch.nextafter(torch.tensor(1.0), torch.tensor(0.0))), 0.5, -0.25, 0.75])]


def test_a_remainder_that_jumps_by_its_divisor_at_a_multiple_is_explained():
    def fn(x):
        return torch.remainder(x * 3, 3) * 2 + 1

    def compiled_fn(x):  # rounds x * 3 one ulp higher, to 3.0 exactly: the remainder drops from 3 to 0
        return torch.remainder(one_ulp_up(x * 3), 3) * 2 + 1

    (x,) = jump_inputs()
    eager, compiled = fn(x), compiled_fn(x)
    assert float(eager[0] - compiled[0]) > 5.9 and torch.allclose(eager[1:], compiled[1:])
    verdict, repro = judge(fn, compiled_fn, [x])
    assert not verdict.ok and verdict.evidence.rounding.startswith(
        "jump explained by rounding: element [0] hangs on remainder"), verdict.evidence.rounding
    assert "<= step 6" in verdict.evidence.rounding  # the divisor, doubled by the * 2
    assert repro is None


@pytest.mark.parametrize("wrong", [
    lambda e: (torch.cat([e[0][:1], e[0][1:] + 6]), e[1]),  # off by the step where no jump is near
    lambda e: (torch.cat([e[0][:1] - 9, e[0][1:]]), e[1]),  # near the jump, but off by more than the step
])
def test_a_remainder_off_where_or_by_what_no_jump_gives_is_a_value_mismatch(wrong):
    (x,) = jump_inputs()
    diff, explained = judged(lambda x: torch.remainder(x * 3, 3) * 2 + 1, [x], wrong)
    assert diff is not None and diff["symptom"] == "value-mismatch" and diff["kind"] == "float:finite"
    assert explained == []


def test_a_float_floor_steps_by_one_and_no_more():
    (x,) = jump_inputs()

    def fn(x):
        return torch.floor(x * 3) / 2

    diff, explained = judged(fn, [x], lambda e: (torch.cat([e[0][:1] + 0.5, e[0][1:]]), e[1]))
    assert diff is None and explained[0]["reason"].startswith(
        "jump explained by rounding: element [0] hangs on rounding floor")
    diff, explained = judged(fn, [x], lambda e: (torch.cat([e[0][:1] + 1.0, e[0][1:]]), e[1]))
    assert diff is not None and explained == []  # two steps


def test_an_op_the_shadow_cannot_follow_after_a_near_tie_explains_nothing():
    x, w = near_threshold_inputs()

    def fn(x, w):
        m = (x * 1.5) > 0.5
        return torch.where(m, x, -x) @ w

    diff, explained = judged(fn, [x, w], lambda e: (e[0] * 0 + 7.0, e[1]))  # every element wrong
    assert diff is not None and diff["symptom"] == "value-mismatch" and explained == []

    def decided(x, w):
        m = (x * 1.5) > 0.5
        return (torch.where(m, x, -x) @ w) > 0

    diff, explained = judged(decided, [x, w], lambda e: (~e[0], e[1]))  # all 8 bools flipped
    assert diff is not None and diff["symptom"] == "value-mismatch" and diff["kind"] == "bool" and explained == []
    # matmul is unknown to the shadow: with a tainted input it breaks the run, it does not taint everything
    mode = rt.RoundingShadow()
    with mode:
        decided(x.clone(), w.clone())
    assert mode.broken is not None and mode.broken.startswith("matmul")


def test_a_decision_on_a_sum_of_flipped_floats_is_not_explained():
    x, _ = near_threshold_inputs()

    def fn(x):
        m = (x * 1.5) > 0.5
        return torch.where(m, x, -x).sum() > 0

    assert abs(float(torch.where((x.double() * 1.5) > 0.5, x.double(), -x.double()).sum())) > 1  # far from 0
    diff, explained = judged(fn, [x], lambda e: (~e[0], e[1]))
    assert diff is not None and diff["kind"] == "bool" and explained == []


def test_a_count_of_flipped_decisions_moves_at_most_by_the_number_of_near_ties():
    x, _ = near_threshold_inputs()
    x = torch.cat([x, x * 0.999, x * 1.001, -x]).contiguous()  # 256 elements, a few near 0.2 / 3 - 1 / 3

    def fn(x):
        return ((x * 3.0 + 1.0) > 0.2).sum()

    entry = rt.explain_rounding(fn, [x])[0]
    near = int(entry.step)  # how many elements lie within rounding of the threshold
    assert near >= 1
    for off in (1, -near):
        diff, explained = judged(fn, [x], lambda e: (e[0] + off, e[1]))
        assert diff is None and explained[0]["reason"].startswith(EXPLAINED), (off, diff)
        assert f"<= step {near}" in explained[0]["reason"]
    for off in (near + 1, 1000):  # more flips than there are near ties: a real miscompile
        diff, explained = judged(fn, [x], lambda e: (e[0] + off, e[1]))
        assert diff is not None and diff["symptom"] == "value-mismatch" and diff["kind"] == "int" and explained == []

    def thresholded(x):  # a decision on the count: only a count within `near` of 100 may flip
        return ((x * 3.0 + 1.0) > 0.2).sum() > 100

    count = int(fn(x))
    assert abs(count - 100) > 2 * near
    diff, explained = judged(thresholded, [x], lambda e: (~e[0], e[1]))
    assert diff is not None and diff["kind"] == "bool" and explained == []

    def counted_where(x):  # where(m, 1, 0) of a mask counts as well: step 1 per near tie
        return torch.where((x * 3.0 + 1.0) > 0.2, 1, 0).sum()

    assert judged(counted_where, [x], lambda e: (e[0] + 1, e[1]))[0] is None
    assert judged(counted_where, [x], lambda e: (e[0] + near + 1, e[1]))[0] is not None


def test_a_bool_flipped_far_from_its_threshold_through_an_operator_torch_names_oddly():
    x, _ = near_threshold_inputs()
    far = int(((x.double() * 1.5 - 0.5).abs()).argmax())  # the element farthest from the threshold

    def inverted(x):
        return ~((x * 1.5) > 0.5)

    def rdiv(x):  # 2 / mask: torch calls it __rdiv__
        return (2 / ((x * 1.5) > 0.5).to(torch.bfloat16).add(1)) > 1.5

    for fn in (inverted, rdiv):
        def flip_far(e):
            bad = e[0].clone()
            bad[far] = ~bad[far]
            return (bad, e[1])
        diff, explained = judged(fn, [x], flip_far)
        assert diff is not None and diff["symptom"] == "value-mismatch" and explained == [], fn.__name__
        # and the near tie itself, flipped, is explained (the ops are followed, not given up on)
        near = int(rt.explain_rounding(fn, [x])[0].taint.int().argmax())

        def flip_near(e, near=near):
            bad = e[0].clone()
            bad[near] = ~bad[near]
            return (bad, e[1])
        diff, explained = judged(fn, [x], flip_near)
        assert diff is None and explained[0]["reason"].startswith(EXPLAINED), fn.__name__


def test_no_error_of_the_rounding_check_escapes_compare(monkeypatch):
    """A CUDA lane's outputs live on the GPU, the shadow's masks on the CPU: whatever goes wrong
    in explaining, compare answers with the mismatch (never raises, never explains)."""
    x, w, row, t = bf16_linear_inputs()

    def fn(x, w):
        return (F.linear(x, w) > t).all(-1)

    eager = (fn(x, w),)
    compiled = ((one_ulp_up(F.linear(x, w)) > t).all(-1),)
    reference = lambda: (rt.reference_call(fn, [x, w])["out"][0],)  # noqa: E731
    assert rt.compare(eager, compiled, reference) is None  # explained, when nothing goes wrong

    class OnAnotherDevice:  # a mask that cannot meet the outputs, as a CPU mask meets CUDA outputs
        def __init__(self, shape):
            self.shape = shape

        def cpu(self):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")

        def __and__(self, other):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")

        __rand__ = __and__

        def __invert__(self):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")

    real = rt.explain_rounding

    def on_device(fn, args):
        found = real(fn, args)
        for entry in found or []:
            if entry is not None and entry.taint is not None:
                entry.taint = OnAnotherDevice(entry.taint.shape)
        return found

    monkeypatch.setattr(rounding, "explain_rounding", on_device)
    explained = []
    diff = rt.compare(eager, compiled, reference, explained)
    assert diff is not None and diff["symptom"] == "value-mismatch" and explained == []

    def broken(*_):
        raise RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu")

    monkeypatch.setattr(rounding, "_rounding_reason", broken)
    assert rt.rounding_explains(eager[0], compiled[0], reference()[0]) is None
    diff = rt.compare(eager, compiled, reference, explained)
    assert diff is not None and diff["symptom"] == "value-mismatch" and explained == []


def test_pasted_pieces_judge_as_the_runtime_does():
    """Scripts paste top-level statements of the runtime's parts by the names they bind: a statement
    that binds none (an augmented assignment, a bare call) would be left out of every script."""
    parts = sorted(Path(rt.__file__).parent.joinpath("runtime").glob("*.py"))
    assert len(parts) == 7, parts
    for path in [Path(rt.__file__), *parts]:
        tree = ast.parse(path.read_text())
        for node in tree.body[1:]:  # the docstring first
            assert isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign,
                                     ast.AnnAssign)), f"{path.name}:{node.lineno}: a statement pasted scripts would drop"
            if isinstance(node, ast.Assign):
                assert all(isinstance(t, ast.Name) for t in node.targets), f"{path.name}:{node.lineno}"

    x, _ = near_threshold_inputs()
    far = int(((x.double() * 1.5 - 0.5).abs()).argmax())
    near = int(rt.explain_rounding(lambda x: (x * 1.5) > 0.5, [x])[0].taint.int().argmax())

    def fn(x):
        return ~((x * 1.5) > 0.5)

    def rdiv(x):
        return 2 / ((x * 1.5) > 0.5).to(torch.bfloat16).add(1)

    def verdicts(runtime):
        out = []
        for program, at in ((fn, far), (fn, near), (rdiv, near)):
            eager = runtime["run_call"](program, [x.clone()])["out"]
            bad = eager[0].clone()
            bad[at] = ~bad[at] if bad.dtype == torch.bool else 9.0
            diff = runtime["compare"](eager, (bad, eager[1]), lambda: runtime["reference_call"](program, [x.clone()])["out"])
            out.append(None if diff is None else diff["symptom"])
        return out

    expected = verdicts(vars(rt))
    assert expected == ["value-mismatch", None, "value-mismatch"]
    # the names the compact repro and the graph repro paste (corpus/scripts.py)
    for names in (["make_input", "compare", "reference_call"],
                  ["make_input", "signature", "normalize_message", "compare", "reference_call", "snapshot"]):
        helpers = Helpers().pieces(RUNTIME, names + ["run_call"])
        pasted = {}
        exec(compile("\n".join(helpers.imports + helpers.blocks), "<repro>", "exec"), pasted)
        assert verdicts(pasted) == expected, names
