"""A campaign run from Python gets what ``symfuzz fuzz`` gives: the gate, gate.json, the
summary and the exit code (symfuzz.fuzz_run.run_fuzz), not only stats.json."""

from __future__ import annotations

import json
import threading

import pytest

from symfuzz.campaign import Campaign, CampaignError
from symfuzz.fuzz_run import EXIT_ENVIRONMENT, EXIT_OK, GateOptions, run_fuzz
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.settings import CampaignConfig

UNIT_TIER = True


@pytest.fixture(autouse=True)
def _no_environment_probe(monkeypatch):
    """The machine's description (platform asks `uname`): a process, which the unit tier starts none of."""
    for module in ("symfuzz.campaign", "symfuzz.stats"):
        monkeypatch.setattr(f"{module}.environment", lambda: {"torch": "2.13.0"})


def _campaign(tmp_path, outcome):
    """A real campaign on an empty --out whose run (workers, cases) is replaced by ``outcome``:
    the stats it writes, with the health problems given, or a CampaignError."""
    config = CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), quiet=True)
    campaign = Campaign(config)

    def run():
        if isinstance(outcome, Exception):
            raise outcome
        stats = campaign.write_stats(1.0)
        stats["health"]["problems"] = list(outcome)
        return stats

    campaign.run = run
    return config, campaign


def test_a_campaign_run_from_python_is_judged_summarized_and_given_its_exit_code(tmp_path, capsys):
    config, campaign = _campaign(tmp_path, ())
    outcome = run_fuzz(config, GateOptions(), campaign=campaign)
    assert outcome.code == EXIT_OK and outcome.gate is not None
    assert json.loads((config.out / "gate.json").read_text())["exit_code"] == EXIT_OK
    printed = capsys.readouterr()
    assert "programs   0 generated" in printed.out and f"stats      {config.out / 'stats.json'}" in printed.out
    assert "symfuzz: lane eager, seed 0" in printed.err


def test_an_unhealthy_run_exits_3_and_says_why(tmp_path, capsys):
    config, campaign = _campaign(tmp_path, ["stopped early: most programs were invalid"])
    outcome = run_fuzz(config, GateOptions(), campaign=campaign)
    assert outcome.code == EXIT_ENVIRONMENT
    assert json.loads((config.out / "gate.json").read_text())["exit_code"] == EXIT_ENVIRONMENT
    assert "stopped early: most programs were invalid (symfuzz or its environment is wrong" in capsys.readouterr().err


def test_a_campaign_that_cannot_test_anything_exits_3_without_stats(tmp_path, capsys):
    config, campaign = _campaign(tmp_path, CampaignError("the canary program failed"))
    outcome = run_fuzz(config, GateOptions(), campaign=campaign)
    assert (outcome.code, outcome.stats, outcome.gate) == (EXIT_ENVIRONMENT, None, None)
    assert "symfuzz fuzz: the canary program failed" in capsys.readouterr().err


def test_the_settings_record_reaches_stats_json_and_round_trips(tmp_path):
    config = CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), seed=7, shard=(2, 3), reuse_calls=1,
                            guard_planning=False, gen_config={"max_ops": 3})
    written = Campaign(config).write_stats(1.0)["settings"]
    assert written == config.settings.to_json()
    assert written["shard"] == [2, 3] and written["guard_planning"] is False and written["reuse_calls"] == 1
    assert type(config.settings).from_json(json.loads(json.dumps(written))) == config.settings


def test_with_max_findings_no_case_starts_while_enough_candidates_are_in_confirmation(tmp_path):
    config = CampaignConfig(out=tmp_path / "out", lane=get_lane("eager"), quiet=True, max_findings=2)
    campaign = Campaign(config)
    confirmation = campaign.confirmation
    done = threading.Event()
    confirmation.thread = threading.Thread(target=done.wait, daemon=True)  # stands in for the confirming thread
    confirmation.thread.start()
    assert not campaign.waiting_for_confirmations()
    confirmation.confirmed.add("crash-1")
    assert not campaign.waiting_for_confirmations()  # one more is wanted, and none is on its way
    confirmation.confirming.add("crash-2")
    assert campaign.waiting_for_confirmations()
    confirmation.confirming.discard("crash-2")  # it did not confirm (flaky): cases go on
    assert not campaign.waiting_for_confirmations()
    confirmation.confirming.add("crash-3")
    assert campaign.waiting_for_confirmations()
    done.set()  # the confirming thread is gone: nobody will decide crash-3, so cases go on
    confirmation.thread.join(timeout=5)
    assert not campaign.waiting_for_confirmations()
    unlimited = Campaign(CampaignConfig(out=tmp_path / "other", lane=get_lane("eager"), quiet=True))
    unlimited.confirmation.confirming.update({"a", "b", "c"})
    assert not unlimited.waiting_for_confirmations()
