"""More calls per compile inside its guards (``--reuse-calls``), and the throughput stats.

The extra calls come after every other call, at new sizes that the compile's guards
accept: a cached graph runs them, and each is judged against eager like any other.
"""

import json

import torch

from symfuzz.settings import CampaignConfig
from symfuzz.stats import Stats
from symfuzz.fuzz.case import Case
from symfuzz.merge import Source, merge_stats
from symfuzz.oracles.lanes import execute as execute_module
from symfuzz.oracles.lanes.execute import REUSE_PURPOSE, VALUE_PURPOSE, execute
from symfuzz.oracles.lanes.guards import model_shapes
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.registry import judge
from symfuzz.oracles.reuse import reuse_oracle
from symfuzz.report import stats_problem
from symfuzz.worker_slot import THROUGHPUT_ENV, throughput_env, worker_args
from test_guards import BRANCHY, _load_plants, case_of


def extra(run):
    return [i for i, c in enumerate(run.calls) if c.purpose.startswith(REUSE_PURPOSE)]


def failures(run):
    return [v.headline() for v in judge(run.case, run) if not v.ok]


def test_extra_calls_come_last_inside_the_guards_and_are_checked():
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]])
    before = execute(case, get_lane("eager"), plan=True)
    after = execute(case, get_lane("eager"), plan=True, reuse_calls=3)
    old = [c.to_json() for c in before.case.schedule.calls]
    new = [c.to_json() for c in after.case.schedule.calls]
    assert new[: len(old)] == old  # the calls before them are the same calls
    more = extra(after)
    assert more and more == list(range(len(old), len(old) + len(more)))
    # Then, per call that compiled, as many at its sizes with new tensor values: cached graphs run them.
    values = [i for i, c in enumerate(after.calls) if c.purpose.startswith(VALUE_PURPOSE)]
    assert values and values == list(range(len(old) + len(more), len(new)))
    for i in values:
        call, spec = after.calls[i], after.case.schedule.calls[i]
        assert tuple(model_shapes(spec)) in {tuple(model_shapes(c)) for c in before.case.schedule.calls}
        assert call.graphs == 0 and "out" in call.eager and "out" in call.compiled, (i, call.purpose)
    shapes = [tuple(model_shapes(after.case.schedule.calls[i])) for i in more]
    assert len(set(shapes)) == len(shapes)
    assert not set(shapes) & {tuple(model_shapes(c)) for c in before.case.schedule.calls}  # new sizes
    for i in more:
        call = after.calls[i]
        # Dynamo's own guard managers accepted it, and no graph was compiled: a reuse.
        assert call.predicted_reuse is True and call.graphs == 0, (i, call.purpose)
        # Checked against eager: both sides returned outputs.
        assert "out" in call.eager and "out" in call.compiled
    assert failures(after) == []
    checked = lambda run: sum(1 for c in run.calls if "error" not in c.eager and "error" not in c.compiled)  # noqa: E731
    assert checked(after) == checked(before) + len(more) + len(values)
    # Only the calls inside the guards of the model the other planned calls came from promise reuse.
    own = f"{REUSE_PURPOSE}: graph of call {after.guards['model_call']}"
    assert [after.calls[i].expect_reuse for i in more if after.calls[i].purpose == own] == [True] * 3
    assert not any(after.calls[i].expect_reuse for i in more if after.calls[i].purpose != own)


def test_extra_calls_are_judged_like_any_call():
    """A wrong result at an extra call is a finding at that call (the record is edited,
    since unmodified torch is right there)."""
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]])
    run = execute(case, get_lane("eager"), plan=True, reuse_calls=2)
    last = extra(run)[-1]
    outs = run.calls[last].compiled["out"]
    run.calls[last].compiled["out"] = (tuple(t + 1 for t in outs[0]),) + tuple(outs[1:])
    verdicts = [v for v in judge(run.case, run) if not v.ok]
    assert verdicts and verdicts[0].symptom == "value-mismatch" and verdicts[0].call_index == last


def test_sizes_eager_rejects_are_dropped_not_called(monkeypatch):
    original = execute_module._eager_accepts

    def odd_rejected(fn, call, device, index):
        return call.args[0].shape[0] % 2 == 0 and original(fn, call, device, index)

    monkeypatch.setattr(execute_module, "_eager_accepts", odd_rejected)
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]])
    run = execute(case, get_lane("eager"), plan=True, reuse_calls=4)
    more = extra(run)
    assert more and all(run.case.schedule.calls[i].args[0].shape[0] % 2 == 0 for i in more)
    assert failures(run) == []


def test_extra_calls_of_an_older_compile_stay_inside_its_guards():
    """Under automatic dynamic, the first call compiles a static graph and the second a
    dynamic one; a planned call that violates a guard compiles a third. Each symbolic
    compile gets its own extra calls, inside its own guards."""
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]], dynamic=None)
    run = execute(case, get_lane("eager"), plan=True, reuse_calls=2)
    sources = {run.calls[i].purpose for i in extra(run)}
    assert len(sources) >= 2, sources  # more than one compile's guards
    assert all(run.calls[i].graphs == 0 for i in extra(run))
    assert failures(run) == []


def test_a_planted_unsound_guard_is_still_found(monkeypatch):
    """The dropped-comparison plant (tests/plants): the third call reuses the graph
    compiled for sizes above 4 at a size below it. The extra calls change nothing
    about the calls that find it, nor about its verdict."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    monkeypatch.setattr(ShapeEnv, "produce_guards_verbose", ShapeEnv.produce_guards_verbose)  # restored after
    _load_plants().plant_dropped_comparison_guard()
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)], [(3, 3), (5,)]])
    verdicts = {}
    for n in (0, 3):
        run = execute(case, get_lane("eager"), plan=True, reuse_calls=n)
        verdict = reuse_oracle(run.case, run)
        assert not verdict.ok and verdict.symptom == "unsound-guard", n
        verdicts[n] = (verdict.signature, verdict.call_index)
        if n:
            assert extra(run)
    assert verdicts[0] == verdicts[3] and verdicts[0][1] == 2


def test_worker_settings_follow_the_campaign_config(tmp_path):
    config = CampaignConfig(out=tmp_path, lane=get_lane("eager"))
    assert config.reuse_calls > 0 and config.throughput_settings
    assert worker_args(config)[-2] == "--settings"
    assert json.loads(worker_args(config)[-1])["reuse_calls"] == config.reuse_calls
    assert throughput_env(config) == THROUGHPUT_ENV
    old = CampaignConfig(out=tmp_path, lane=get_lane("eager"), reuse_calls=0, throughput_settings=False)
    assert json.loads(worker_args(old)[-1])["reuse_calls"] == 0 and throughput_env(old) == {}


def _stats(tmp_path, checked, regions, compiles, wall, jobs=2, workers_wall=None, confirm=0.0):
    stats = Stats(CampaignConfig(out=tmp_path, lane=get_lane("eager"), jobs=jobs))
    stats.counts.update(programs_generated=10, calls_checked=checked, guard_regions_covered=regions,
                        graphs_compiled=compiles, reuse_more_reused=4)
    stats.seconds.update(generate=1.0, compile=50.0, run=2.0, oracle=3.0, execute_other=4.0, confirm=confirm)
    return stats.to_json(wall, {}, workers_wall)


def test_wall_time_after_the_workers_closed_is_no_workers_time_nor_overhead(tmp_path):
    """A run that waits 100 s past its budget for confirmations: the workers were up for 60 s,
    the confirmations ran 120 s (beside the workers, then alone)."""
    data = _stats(tmp_path, checked=120, regions=30, compiles=40, wall=160.0, workers_wall=60.0, confirm=120.0)
    assert data["wall_seconds"] == 160.0
    assert data["throughput"]["cpu_minutes"] == 4.0  # two workers for a minute, plus two minutes of confirming
    assert data["time_seconds"]["oracles"] == 123.0
    assert data["time_seconds"]["overhead"] == 240.0 - (1 + 50 + 2 + 4 + 123)  # 60 s, not 60 + 2 * 100
    still_up = _stats(tmp_path, checked=120, regions=30, compiles=40, wall=160.0, confirm=120.0)
    assert still_up["throughput"]["cpu_minutes"] == 7.333  # while the workers run, all the wall is theirs


def test_a_resumed_run_counts_the_earlier_runs_workers_time_not_their_wait(tmp_path):
    """The earlier run: 500 s of wall, its workers up for 300 s of it (campaign-state.json)."""
    stats = Stats(CampaignConfig(out=tmp_path, lane=get_lane("eager"), jobs=2))
    state = {"counts": {}, "seconds": {}, "ops": {}, "graphs_per_call": {}, "planned": {}, "indices": [],
             "replay": {}, "replayed": [], "wall_seconds": 500.0, "workers_wall_seconds": 300.0}
    stats.restore(state)
    data = stats.to_json(100.0, {}, 60.0)  # this run: 100 s, its workers up for 60 s
    assert data["wall_seconds"] == 600.0
    assert data["throughput"]["cpu_minutes"] == 12.0  # (300 + 60) s of two workers
    del state["workers_wall_seconds"]
    stats.restore(state)
    assert stats.prior_workers_wall == 500.0  # a state written before it was kept: its whole wall


def test_stats_report_throughput_per_cpu_minute(tmp_path):
    data = _stats(tmp_path, checked=120, regions=30, compiles=40, wall=60.0)
    rate = data["throughput"]
    assert rate["cpu_minutes"] == 2.0  # two workers for a minute
    assert rate["checked_calls_per_cpu_minute"] == 60.0
    assert rate["guard_regions_per_cpu_minute"] == 15.0
    assert rate["programs_per_minute"] == 10.0
    assert data["time_seconds"]["planning"] == 4.0
    assert data["guards"]["reuse_more_calls_reused"] == 4
    assert stats_problem(json.loads(json.dumps(data))) is None


def test_merge_recomputes_throughput_from_the_sums(tmp_path):
    a = _stats(tmp_path, checked=120, regions=30, compiles=40, wall=60.0)
    b = _stats(tmp_path, checked=60, regions=0, compiles=20, wall=60.0)
    for s, k in ((a, 1), (b, 2)):
        s["shard"] = {"index": k, "count": 2}
        s["indices"] = [k - 1]
    sources = [Source(tmp_path / str(k), s, f"{k}/2", [(k, 2)]) for s, k in ((a, 1), (b, 2))]
    merged = merge_stats(sources, shards=True, duplicates=0)
    assert not [n for n in merged["merge_notes"] if "throughput" in n or "not a key" in n], merged["merge_notes"]
    rate = merged["throughput"]
    assert rate["cpu_minutes"] == 4.0
    assert rate["checked_calls_per_cpu_minute"] == 45.0
    assert rate["guard_regions_per_cpu_minute"] == 7.5
    assert merged["guards"]["reuse_more_calls_reused"] == 8
    assert stats_problem(merged) is None


def test_a_stored_case_with_extra_calls_replans_them(tmp_path):
    """A corpus replay strips planned calls (extra ones too) and plans them again."""
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]])
    run = execute(case, get_lane("eager"), plan=True, reuse_calls=2)
    stored = Case.from_json(json.loads(json.dumps(run.case.to_json())))
    assert len(stored.without_planned_calls().schedule.calls) == 2
    torch._dynamo.reset()


def test_a_campaign_makes_extra_calls_and_reports_throughput(tmp_path):
    """End to end on the eager lane, two workers (the second warms up beside the canary)."""
    from test_campaign import symfuzz

    out = tmp_path / "out"
    proc = symfuzz(["--lane", "eager", "--ops", "add,mul,relu,sum_dim", "--max-ops", "3", "--max-cases", "4",
                    "--jobs", "2", "--budget", "5m", "--no-confirm", "--out", str(out)], {})
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["programs"]["generated"] == 4
    assert stats["guards"]["planned_calls"].get("reuse-more", 0) > 0
    assert stats["throughput"]["checked_calls_per_cpu_minute"] > 0
    assert stats_problem(stats) is None
    assert "checked calls per compile" in proc.stdout and "per CPU-minute" in proc.stdout


def test_a_worker_idle_once_no_more_cases_go_out_is_closed_and_stops_counting(tmp_path):
    """Two workers, the budget spent: the one with no case is closed at once (its seconds up end
    there), the one still running its case stays; the workers' mean time up counts both."""
    from symfuzz.campaign import Campaign

    class Slot:
        def __init__(self, index):
            self.ready, self.index, self.canary, self.warming, self.closed = True, index, False, False, False

        @property
        def busy(self):
            return self.index is not None

        def close(self):
            self.closed = True

    campaign = Campaign.__new__(Campaign)
    campaign.config = CampaignConfig(out=tmp_path, lane=get_lane("eager"), jobs=2)
    idle, running = Slot(None), Slot(7)
    campaign.spawned, campaign.closed_idle = [idle, running], []
    assert campaign._close_idle([idle, running], 100.0) == [running]
    assert idle.closed and not running.closed and campaign.spawned == [running]
    assert campaign._mean_up(160.0) == 130.0  # (100 + 160) / 2: cpu_minutes counts 260 s, not 320
    assert campaign._close_idle([running], 120.0) == [running]  # a worker with a case is never closed
