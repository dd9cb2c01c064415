"""Stopping a campaign, reusing its folder, and telling a hang from a slow program.

SIGTERM (what CI systems send on cancel or timeout) at three stages: while a
worker generates a case, while it compiles one, and while a candidate is being
confirmed in a fresh process. Each time: exit 143, stats.json and the summary
final, every candidate kept, and nothing that was merely stopped recorded as a
finding. Then ``--resume`` continues the stopped campaign and confirms what it
left unconfirmed; a folder holding another run is refused without it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, planted_env

from symfuzz.campaign import Campaign
from symfuzz.settings import REUSE_CALLS, CampaignConfig
from symfuzz.corpus.replay import ReplayOutcome, _judge_hang, hang_limit
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.resume import STATE_FILE, OutFolderError, check_out_folder

EAGER = ["--lane", "eager", "--max-ops", "2", "--jobs", "1", "--budget", "10m", "--seed", "0"]


def start(args, plant: str, extra_env=None) -> subprocess.Popen:
    env = dict(os.environ, **planted_env(plant), **(extra_env or {}))
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.Popen([sys.executable, "-m", "symfuzz.cli", "fuzz", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, what: str, limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def canary_passed(out: Path) -> bool:
    log = out / "canary.log"
    return log.exists() and "passed" in log.read_text()


def terminate(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr, stderr
    return stdout, stderr


def assert_final(out: Path, stdout: str) -> dict:
    """stats.json and gate.json are the final ones, and the summary was printed."""
    stats = json.loads((out / "stats.json").read_text())
    assert stats["findings"]["interrupted"] is True and stats["findings"]["interrupted_by"] == "SIGTERM"
    assert json.loads((out / "gate.json").read_text())["exit_code"] == 143
    assert "programs   " in stdout and f"stats      {out / 'stats.json'}" in stdout, stdout
    state = json.loads((out / STATE_FILE).read_text())
    assert state["counts"].get("programs_generated", 0) == stats["programs"]["generated"]
    return stats


def kept_signatures(out: Path) -> set[str]:
    return {p.parent.name for p in out.glob("*/*/finding.json")}


def test_sigterm_while_a_worker_generates(tmp_path):
    out = tmp_path / "out"
    proc = start([*EAGER, "--ops", "add", "--out", out], "slow-generation")
    wait_for(lambda: canary_passed(out), "the canary")
    time.sleep(1.0)  # the worker has case 0 and is generating it (for ten minutes)
    stdout, _ = terminate(proc)
    stats = assert_final(out, stdout)
    assert stats["programs"]["generated"] == 0
    assert not (out / "candidates.jsonl").exists() and not kept_signatures(out)  # a stopped case is no finding


def test_sigterm_while_a_worker_compiles(tmp_path):
    out = tmp_path / "out"
    proc = start([*EAGER, "--ops", "sin", "--out", out], "hang-sin")
    wait_for(lambda: canary_passed(out), "the canary")
    time.sleep(3.0)  # case 0 is generated in well under a second; its compile never returns
    stdout, _ = terminate(proc)
    assert_final(out, stdout)
    # The worker was killed by the stop, not past the case timeout: no timeout finding.
    assert not (out / "candidates.jsonl").exists() and not kept_signatures(out)


def test_sigterm_while_confirming_keeps_the_candidate_and_resume_confirms_it(tmp_path):
    out = tmp_path / "out"
    proc = start([*EAGER, "--ops", "cos", "--out", out], "segfault-cos")
    wait_for(lambda: (out / "candidates.jsonl").exists(), "a candidate")
    stdout, _ = terminate(proc)  # its fresh-process confirmation has just started
    stats = assert_final(out, stdout)
    seen = {json.loads(line)["signature"] for line in (out / "candidates.jsonl").read_text().splitlines()}
    assert seen and seen <= {p.parent.name for p in out.glob("unconfirmed/*/finding.json")}
    assert stats["findings"]["unconfirmed"] == len(seen) and stats["findings"]["confirmed"] == 0
    done = stats["indices"]

    # The folder holds that run: refused without --resume, and left as it was.
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = subprocess.run([sys.executable, "-m", "symfuzz.cli", "fuzz", *EAGER, "--ops", "cos", "--out", str(out)],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert "--resume" in refused.stderr and "Traceback" not in refused.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # --resume: no case left to run (max 1 case, and case 0 is done), the candidate is confirmed.
    proc = start([*EAGER, "--ops", "cos", "--out", out, "--resume", "--max-cases", max(done) + 1, "--quiet"],
                 "segfault-cos")
    stdout, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 1, stdout + stderr
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats["findings"]["signatures"]) == seen
    assert stats["findings"]["unconfirmed"] == 0 and not list(out.glob("unconfirmed/*/finding.json"))
    assert stats["indices"] == done  # carried over, nothing run twice


def _config(out: Path, **kw) -> CampaignConfig:
    return CampaignConfig(out=out, lane=get_lane("eager"), quiet=True, **kw)


def test_resume_runs_the_indices_not_yet_finished(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    first = Campaign(_config(out, max_cases=8))
    first.stats.indices = [0, 1, 3]
    first.stats.counts["programs_generated"] = 3
    first.summary["flaky"] = 2
    first.write_stats(12.5)
    again = Campaign(_config(out, max_cases=8, resume=True))
    assert again.cases.next_index == 2 and list(again.cases.indices) == [4, 5, 6, 7]
    stats = again.write_stats(1.0)
    assert stats["programs"]["generated"] == 3 and stats["findings"]["flaky"] == 2
    assert stats["wall_seconds"] == 13.5 and stats["indices"] == [0, 1, 3]


def test_resume_after_a_kill_shelves_and_confirms_the_candidates_no_store_holds(tmp_path):
    """kill -9 leaves candidates queued for confirmation only in candidates.jsonl (and maybe a
    torn last line): --resume stores them in unconfirmed/ and confirms them first."""
    out = tmp_path / "out"
    Campaign(_config(out)).write_stats(3.0)
    candidate = json.loads((ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json").read_text())
    (out / "candidates.jsonl").write_text(json.dumps(candidate) + "\n" + '{"case": {"pro')
    again = Campaign(_config(out, resume=True))
    assert [f.signature for f in again.confirmation.resumed_unconfirmed] == [candidate["signature"]]
    assert (out / "unconfirmed" / candidate["signature"] / "finding.json").exists()
    assert again.write_stats(1.0)["findings"]["unconfirmed"] == 0  # queued now; counted again if shelved


def _fixture_finding():
    from symfuzz.corpus.finding import Finding

    return Finding.from_json(json.loads((ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json").read_text()))


def test_resume_confirms_an_unconfirmed_candidate_with_its_twins_and_loses_neither(tmp_path):
    from dataclasses import replace

    from symfuzz.corpus.replay import ReplayOutcome as Outcome

    out = tmp_path / "out"
    first = Campaign(_config(out))
    finding = _fixture_finding()
    twin = replace(finding, case={**finding.case, "origin": {**finding.case["origin"], "index": 99}})
    first.confirmation.unconfirmed.add(finding)
    first.confirmation.unconfirmed.add(twin)  # a later case with that signature: unconfirmed/S/duplicates.jsonl
    first.summary["unconfirmed"] = 2
    first.write_stats(1.0)
    sig = finding.signature

    # Killed before shelving anything, twice over: the count is taken from the folder, never negative.
    for _ in range(2):
        again = Campaign(_config(out, resume=True))
        assert [f.signature for f in again.confirmation.resumed_unconfirmed] == [sig, sig]
        assert again.write_stats(1.0)["findings"]["unconfirmed"] == 0  # both queued, not shelved

    # Stopped with both still pending: the folder stays as it was; both are counted.
    for f in again.confirmation.resumed_unconfirmed:
        again.confirmation.to_confirm(f)
    before = (out / "unconfirmed" / sig / "duplicates.jsonl").read_text()
    again.confirmation.shelve_unconfirmed()
    assert again.summary["unconfirmed"] == 2
    assert (out / "unconfirmed" / sig / "duplicates.jsonl").read_text() == before

    # Decided (reproduced): the finding and its twin go to findings/, and unconfirmed/ lets go.
    third = Campaign(_config(out, resume=True))
    for f in third.confirmation.resumed_unconfirmed:
        third.confirmation.to_confirm(f)
    queued = third.confirmation.queue.get_nowait()
    third.confirmation.record(queued, Outcome("reproduced", 1, sig, 3.0, ""))
    third.confirmation.shelve_unconfirmed()
    assert not (out / "unconfirmed" / sig).exists() and third.summary["unconfirmed"] == 0
    assert len((out / "findings" / sig / "duplicates.jsonl").read_text().splitlines()) == 1


def test_resume_ignores_hidden_folders_and_judges_orphans_before_confirming_them(tmp_path):
    out = tmp_path / "out"
    Campaign(_config(out)).write_stats(1.0)
    hidden = out / "findings" / ".metadata-mismatch-dda589485d.ab12cd.tmp"  # a writer killed before its rename
    hidden.mkdir(parents=True)
    (hidden / "finding.json").write_text("{}")
    candidate = json.loads((ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json").read_text())
    candidate["verdict"]["evidence"]["rounding"] = "discrete flip explained by rounding: element [0]"
    (out / "candidates.jsonl").write_text(json.dumps(candidate) + "\n")
    again = Campaign(_config(out, resume=True))
    assert again.confirmation.confirmed == set() and again.confirmation.resumed_unconfirmed == []
    kept = json.loads((out / "suspect" / candidate["signature"] / "finding.json").read_text())
    assert kept["triage"]["suspect"].startswith("discrete flip explained by rounding")


def test_hidden_files_do_not_make_an_out_folder_busy(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".gitkeep").write_text("")
    assert check_out_folder(_config(tmp_path / "out"), "2") is None


@pytest.mark.parametrize("change, message", [
    ({"seed": 1}, "--seed: 0 there, 1 now"),
    ({"shard": (1, 2)}, "--shard: None there"),
    ({"gen_config": {"max_ops": 3}}, "--ops/--max-ops"),
    ({"confirm": False}, "--no-confirm: True there, False now"),
    ({"reuse_calls": 0}, f"--reuse-calls: {REUSE_CALLS} there, 0 now"),
    ({"guard_planning": False}, "--no-guard-planning: True there, False now"),
])
def test_resume_refuses_a_campaign_that_draws_other_cases(tmp_path, change, message):
    out = tmp_path / "out"
    Campaign(_config(out)).write_stats(1.0)
    with pytest.raises(OutFolderError, match=message.replace("(", r"\(")):
        check_out_folder(_config(out, resume=True, **change), "2.13.0")


def test_resume_takes_a_state_written_before_the_settings_record(tmp_path):
    """Guard planning rode in the generator settings, and reused calls were not recorded."""
    out = tmp_path / "out"
    Campaign(_config(out)).write_stats(1.0)
    state = json.loads((out / STATE_FILE).read_text())
    old = state["identity"]
    old["gen_config"]["guard_planning"] = old.pop("guard_planning")
    del old["reuse_calls"]
    (out / STATE_FILE).write_text(json.dumps(state))
    assert check_out_folder(_config(out, resume=True), state["identity"]["torch"]) is not None
    with pytest.raises(OutFolderError, match="--no-guard-planning: True there, False now"):
        check_out_folder(_config(out, resume=True, guard_planning=False), state["identity"]["torch"])


@pytest.mark.parametrize("content, message", [
    (None, "holds no campaign state"),
    ("{trunc", "cannot be read"),
    ('{"version": 1, "identity": {}}', "not a state this symfuzz wrote"),
    (b"\xff\xfe", "cannot be read"),
    ('{"version": 1, "identity": {}, "wall_seconds": 1, "counts": {"x": "2"}, "seconds": {}, "ops": {}, '
     '"graphs_per_call": {}, "planned": {}, "indices": [], "replay": {}, "replayed": [], "summary": {}}',
     "field.s. counts"),
])
def test_resume_refuses_a_folder_without_a_readable_state(tmp_path, content, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stats.json").write_text("{}")
    if content is not None:
        path = out / STATE_FILE
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(OutFolderError, match=message):
        check_out_folder(_config(out, resume=True), "2.13.0")
    with pytest.raises(OutFolderError, match="already holds 2 other file|already holds 1 other file"):
        check_out_folder(_config(out), "2.13.0")


def test_an_empty_or_missing_out_starts_a_new_campaign(tmp_path):
    (tmp_path / "with-corpus" / "corpus" / "cases").mkdir(parents=True)  # --corpus OUT/corpus, restored first
    assert check_out_folder(_config(tmp_path / "with-corpus", corpus=tmp_path / "with-corpus" / "corpus"), "2") is None
    assert check_out_folder(_config(tmp_path / "missing", resume=True), "2.13.0") is None
    (tmp_path / "empty").mkdir()
    assert check_out_folder(_config(tmp_path / "empty"), "2.13.0") is None
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutFolderError, match="not a folder"):
        check_out_folder(_config(tmp_path / "file"), "2.13.0")


# ---------------------------------------------------------------- hang or slow?

def _timed_out(seconds: float) -> ReplayOutcome:
    return ReplayOutcome("reproduced", None, None, seconds, "")


def test_a_hang_needs_eager_to_be_fast_and_compiled_to_run_past_the_longer_limit():
    assert hang_limit(30, 300) == 300 and hang_limit(180, 300) == 420
    hung = _judge_hang(_timed_out(300), 300, 30, lambda: (0, "", 4.0, False))
    assert hung.status == "reproduced" and hung.reason.startswith("hung:")
    slow_eager = _judge_hang(_timed_out(300), 300, 30, lambda: (0, "", 200.0, False))
    assert slow_eager.status == "broken" and "slow, not the compiler" in slow_eager.reason
    eager_hangs = _judge_hang(_timed_out(300), 300, 30, lambda: (None, "", 300.0, False))
    assert eager_hangs.status == "broken" and "ran past the limit" in eager_hangs.reason
    finished = _judge_hang(ReplayOutcome("fixed", 0, None, 48.0, ""), 300, 30, lambda: pytest.fail("not needed"))
    assert finished.status == "fixed" and finished.reason.startswith("slow, not hung")


@pytest.mark.slow
def test_a_slow_compile_past_a_short_case_timeout_is_no_finding(tmp_path):
    """The first sin graph a process compiles takes 45 s more: the worker is killed past a
    30 s case timeout, but the fresh process finishes under the longer limit: suspect, not
    a timeout finding, and the run is green."""
    out = tmp_path / "out"
    proc = start([*EAGER, "--ops", "sin", "--max-cases", "1", "--case-timeout", "30s", "--quiet", "--out", out],
                 "slow-compile-sin")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout + stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["findings"]["confirmed"] == 0 and stats["findings"]["suspect"] == 1
    suspect = json.loads(next(out.glob("suspect/timeout-*/finding.json")).read_text())
    assert suspect["triage"]["suspect"].startswith("slow, not hung"), suspect["triage"]


def test_a_full_disk_stops_the_campaign_in_one_line_and_keeps_what_was_written(tmp_path):
    out = tmp_path / "out"
    proc = start([*EAGER, "--ops", "tanh", "--max-cases", "4", "--quiet", "--out", out],
                 "tanh-wrong-eager,disk-full-candidates")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 3, stdout + stderr
    assert "Traceback" not in stderr
    assert f"disk full writing {out / 'candidates.jsonl'}" in stderr and "--resume" in stderr, stderr
    stats = json.loads((out / "stats.json").read_text())  # whole, and final
    assert stats["programs"]["generated"] >= 1
    json.loads((out / STATE_FILE).read_text())


def test_a_short_case_timeout_does_not_shorten_the_canary(tmp_path):
    """The canary is a fresh worker's cold first compile: at the 30 s case-timeout floor it
    still gets 2 minutes (a cold canary took over 30 s on an idle machine here)."""
    assert Campaign(_config(tmp_path / "a", case_timeout=30.0)).canary_limit == 120.0
    assert Campaign(_config(tmp_path / "b", case_timeout=300.0)).canary_limit == 300.0
    assert Campaign(_config(tmp_path / "c", case_timeout=30.0, canary_timeout=20.0)).canary_limit == 20.0


def test_a_signal_while_a_worker_starts_waits_until_the_worker_is_tracked():
    """SIGTERM inside Popen used to leave a started worker that nobody held: it outlived the
    run and wrote to its log afterwards. Inside the block the signal is held, then raised."""
    from symfuzz.campaign import Terminated
    from symfuzz.signals import signals_deferred

    def raise_terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        reached = []
        with pytest.raises(Terminated):
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                reached.append("after the signal")  # not cut short
        assert reached == ["after the signal"]
        assert signal.getsignal(signal.SIGTERM) is raise_terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_while_a_candidate_is_logged_keeps_its_line(tmp_path, monkeypatch):
    """A SIGTERM that landed while candidates.jsonl was being written used to take the
    half-written line back (whole or not at all), so the stop lost the candidate it should
    keep. The line is finished first; then the signal stops the run."""
    import symfuzz.corpus.atomic as atomic
    from symfuzz.campaign import Terminated

    write_all = atomic._write_all

    def write_after_a_signal(fd, data):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        write_all(fd, data)

    def raise_terminated(signum, frame):
        raise Terminated()

    campaign = Campaign(_config(tmp_path / "out"))
    finding = _fixture_finding()
    monkeypatch.setattr(atomic, "_write_all", write_after_a_signal)
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with pytest.raises(Terminated):
            campaign.confirmation.candidate(finding)
    finally:
        signal.signal(signal.SIGTERM, previous)
    lines = (tmp_path / "out" / "candidates.jsonl").read_text().splitlines()
    assert [json.loads(line)["signature"] for line in lines] == [finding.signature]


def test_once_max_findings_are_confirmed_the_other_candidates_wait_in_unconfirmed(tmp_path):
    import threading

    from symfuzz.corpus.replay import ReplayOutcome as Outcome

    campaign = Campaign(_config(tmp_path / "out", max_findings=1))
    confirmation = campaign.confirmation
    finding = _fixture_finding()
    confirmation.confirming.add(finding.signature)
    confirmation.record(finding, Outcome("reproduced", 1, finding.signature, 3.0, ""))
    assert len(confirmation.confirmed) == 1
    pending = json.loads(json.dumps(finding.to_json()))
    pending["verdict"]["signature"] = pending["signature"] = "metadata-mismatch-another"
    pending.pop("confirmation", None)  # not yet run in a fresh process
    from symfuzz.corpus.finding import Finding

    other = Finding.from_json(pending)
    confirmation.confirming.add(other.signature)
    confirmation.in_confirmation = other  # its fresh-process run is in flight: minutes, for a heavy program
    cancelled = threading.Event()
    confirmation.runner.cancel = cancelled.set
    confirmer = threading.Thread(target=cancelled.wait, args=(30,))
    confirmer.start()
    started = time.monotonic()
    confirmation.finish(confirmer)
    assert cancelled.is_set() and time.monotonic() - started < 5, "not waited for: the run asked for one"
    confirmation.shelve_unconfirmed()
    assert campaign.summary["unconfirmed"] == 1 and (tmp_path / "out" / "unconfirmed" / other.signature).exists()


def test_a_stop_shelves_a_logged_candidate_no_store_holds_but_not_one_whose_verdict_is_being_recorded(tmp_path):
    from symfuzz.corpus.atomic import append_line
    from symfuzz.corpus.finding import Finding
    from symfuzz.corpus.replay import ReplayOutcome as Outcome

    campaign = Campaign(_config(tmp_path / "out"))
    confirmation = campaign.confirmation
    logged = _fixture_finding()  # a signal landed after candidates.jsonl had it, before the queue did
    append_line(tmp_path / "out" / "candidates.jsonl", logged.to_json())
    recording = json.loads(json.dumps(logged.to_json()))
    recording["verdict"]["signature"] = recording["signature"] = "metadata-mismatch-recording"
    append_line(tmp_path / "out" / "candidates.jsonl", recording)
    recording = Finding.from_json(recording)
    outcome = Outcome("reproduced", 1, recording.signature, 3.0, "")
    recording.confirmation = outcome.to_json()  # its fresh-process run is over; record() comes next
    confirmation.in_confirmation = recording
    confirmation.confirming.add(recording.signature)
    confirmation.shelve_unconfirmed()
    unconfirmed = {p.parent.name for p in (tmp_path / "out").glob("unconfirmed/*/finding.json")}
    assert unconfirmed == {logged.signature} and campaign.summary["unconfirmed"] == 1
    confirmation.record(recording, outcome)
    assert (tmp_path / "out" / "findings" / recording.signature / "finding.json").exists()
