"""A discrete output that flips where rounding explains it is no finding; one that flips far
from its threshold still is (issue 14, item 10). In process, no compiling: the compiled side
is the program with a planted change."""

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from symfuzz.corpus.scripts import RUNTIME, Helpers
from symfuzz.fuzz import script_runtime as rt
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.oracles.differential import differential_oracle
from symfuzz.oracles.lanes.execute import CallResult, Run
from symfuzz.oracles.verdict import Verdict

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


def test_the_campaign_keeps_an_explained_flip_in_suspect_and_never_confirms_it(tmp_path):
    from symfuzz.campaign import Campaign, CampaignConfig
    from symfuzz.corpus.finding import Finding
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.verdict import OutputMismatch

    fixture = Finding.from_json(json.loads(
        (Path(__file__).parent / "fixtures" / "finding-v1-metadata-mismatch.json").read_text()))
    evidence = OutputMismatch(path="out", detail="1/27 elements differ", rounding="discrete flip explained by rounding")
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="inductor",
                      signature="value-mismatch-rounding", call_index=0, evidence=evidence)
    campaign = Campaign(CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), quiet=True))
    campaign.candidate(Finding(case=fixture.case, verdict=verdict, lane=campaign.config.lane.to_json()))
    kept = json.loads((tmp_path / "out" / "suspect" / "value-mismatch-rounding" / "finding.json").read_text())
    assert kept["triage"]["suspect"] == "discrete flip explained by rounding"
    assert campaign.confirm_queue.empty() and not campaign.confirming and not campaign.confirmed
