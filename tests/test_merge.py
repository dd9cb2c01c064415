"""symfuzz merge: OUT folders of shards or runs become one, and shards merged equal the unsharded run.

The unit tests alter copies of one real campaign's OUT folder (a module fixture);
the acceptance tests run shards through the CLI and compare with the unsharded run.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, TANH_CAMPAIGN, planted_env
from symfuzz.merge import MergeError, merge_outputs
from symfuzz.corpus.inductor_cache import fresh_cache

FUZZ = TANH_CAMPAIGN  # the shared campaign's options: the unsharded run is the shared one


def start_fuzz(out: Path, max_cases: int, shard: str | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(planted_env("tanh-wrong-eager"))
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(out.parent / f"{out.name}-inductor-cache")
    args = [*FUZZ, "--max-cases", str(max_cases), "--out", str(out)] + (["--shard", shard] if shard else [])
    return subprocess.Popen([sys.executable, "-m", "symfuzz.cli", "fuzz", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, expect=(0, 1)) -> str:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode in expect, output
    return output


def stats_of(out: Path) -> dict:
    return json.loads((out / "stats.json").read_text())


@pytest.fixture(scope="module")
def real_out(tanh_campaign) -> Path:
    """One tiny real campaign with a planted value mismatch: the session's shared one (FUZZ, 4 cases)."""
    return tanh_campaign


def copy_out(src: Path, dst: Path, edit=None) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("inductor-cache", "confirm-cache", "workers"))
    if edit is not None:
        stats = stats_of(dst)
        edit(stats)
        (dst / "stats.json").write_text(json.dumps(stats, indent=2))
    return dst


def the_finding(out: Path) -> Path:
    (folder,) = [p.parent for p in (out / "findings").glob("*/finding.json")]
    return folder


def set_index(folder: Path, index: int, marker: str) -> None:
    """Give the finding in ``folder`` case index ``index`` and mark its repro, to see which one a merge keeps."""
    data = json.loads((folder / "finding.json").read_text())
    data["case"]["origin"]["index"] = index
    (folder / "finding.json").write_text(json.dumps(data))
    (folder / "repro.py").write_text((folder / "repro.py").read_text() + f"# {marker}\n")


def tree(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ stats


def test_counts_add_up_and_ratios_are_recomputed(real_out, tmp_path):
    def other_run(stats):
        stats["seed"] = 7
        stats["programs"].update(generated=10, valid=5, compiled=4, called=4, internal_errors=1)
        stats["calls"].update(made=100, checked=60, graphs_compiled=30)
        stats["calls"]["graphs_compiled_per_call"] = {"0": 5, "3": 2}
        stats["guards"].update(regions=50, regions_covered=10)
        stats["guards"]["planned_calls"] = {"reuse": 1, "new-kind": 4}
        stats["ops"] = {"tanh": 5, "sin": 3}
        stats["time_seconds"] = {k: 10.0 for k in stats["time_seconds"]}
        stats["wall_seconds"] = 99.5
        stats["findings"]["interrupted"] = True
        stats["health"]["problems"] = ["stopped early: too many internal errors"]

    a = copy_out(real_out, tmp_path / "a")
    b = copy_out(real_out, tmp_path / "b", other_run)
    sa, sb = stats_of(a), stats_of(b)
    merged = merge_outputs([a, b], tmp_path / "merged")
    assert merged == stats_of(tmp_path / "merged")

    for key in ("generated", "valid", "compiled", "called", "internal_errors"):
        assert merged["programs"][key] == sa["programs"][key] + sb["programs"][key]
    for key in ("made", "checked", "recompiles", "graphs_compiled", "rejected_by_marks"):
        assert merged["calls"][key] == sa["calls"][key] + sb["calls"][key]
    for key in ("regions", "regions_covered", "programs_with_guards", "over_guards", "planned_reuse_calls_reused"):
        assert merged["guards"][key] == sa["guards"][key] + sb["guards"][key]
    assert merged["calls"]["graphs_compiled_per_call"]["0"] == sa["calls"]["graphs_compiled_per_call"]["0"] + 5
    assert merged["calls"]["graphs_compiled_per_call"]["3"] == 2
    assert merged["guards"]["planned_calls"]["new-kind"] == 4
    assert merged["guards"]["planned_calls"]["reuse"] == sa["guards"]["planned_calls"]["reuse"] + 1
    assert merged["ops"]["tanh"] == sa["ops"]["tanh"] + 5 and merged["ops"]["sin"] == 3
    assert merged["distinct_ops"] == len(set(sa["ops"]) | {"sin"}) == len(merged["ops"])

    generated, valid = merged["programs"]["generated"], merged["programs"]["valid"]
    assert merged["programs"]["validity_rate"] == round(valid / generated, 4) != sa["programs"]["validity_rate"]
    calls = merged["calls"]
    assert calls["checked_per_compile"] == round(calls["checked"] / calls["graphs_compiled"], 3)
    guards = merged["guards"]
    assert guards["coverage"] == round(guards["regions_covered"] / guards["regions"], 4)
    total = sum(merged["time_seconds"].values())
    for key, seconds in merged["time_seconds"].items():
        assert seconds == round(sa["time_seconds"][key] + 10.0, 2)
        assert merged["time_share"][key] == round(seconds / total, 4)

    assert merged["wall_seconds"] == 99.5
    assert merged["wall_seconds_total"] == round(sa["wall_seconds"] + 99.5, 2)
    assert merged["seed"] is None and merged["seeds"] == [0, 7]  # runs, not shards: other seeds may merge
    assert merged["shard"] == ["a", "b"]
    assert merged["lane"] == "eager" and merged["max_cases"] == 4
    assert merged["findings"]["interrupted"] is True
    assert merged["health"]["problems"] == ["b: stopped early: too many internal errors"]
    assert merged["merge_notes"] == []
    assert not (tmp_path / "merged" / "gate.json").exists()  # judged again after a merge, not merged


def test_unknown_keys_are_kept_with_a_note(real_out, tmp_path):
    a = copy_out(real_out, tmp_path / "a", lambda s: s.update(future_key={"x": 1}))
    b = copy_out(real_out, tmp_path / "b", lambda s: s.update(future_key={"x": 2}))
    merged = merge_outputs([b, a], tmp_path / "merged")
    assert merged["future_key"] == {"x": 1}  # the first source in merge order, whatever the argument order
    assert any("future_key" in note for note in merged["merge_notes"])


def test_an_older_out_folder_merges(real_out, tmp_path):
    """An OUT folder from before timeline.jsonl, corpora, indices and shards still merges."""
    def older(stats):
        for key in ("shard", "indices", "replay", "max_cases", "executor"):
            stats.pop(key, None)

    a = copy_out(real_out, tmp_path / "a", older)
    b = copy_out(real_out, tmp_path / "b", older)
    for out in (a, b):
        (out / "timeline.jsonl").unlink(missing_ok=True)
        (out / "gate.json").unlink(missing_ok=True)
    merged = merge_outputs([a, b], tmp_path / "merged")
    assert "indices" not in merged and "replay" not in merged and "max_cases" not in merged
    assert merged["programs"]["generated"] == 2 * stats_of(a)["programs"]["generated"]
    assert not (tmp_path / "merged" / "timeline.jsonl").exists()


# ------------------------------------------------------------------ findings, candidates, corpora, timeline


def test_findings_dedup_by_signature_and_keep_every_duplicate(real_out, tmp_path):
    a = copy_out(real_out, tmp_path / "a")
    b = copy_out(real_out, tmp_path / "b")
    sig = the_finding(a).name
    (the_finding(a) / "duplicates.jsonl").unlink(missing_ok=True)
    set_index(the_finding(a), 3, "from a")
    set_index(the_finding(b), 1, "from b")  # the smaller case index represents the signature
    case = json.loads((the_finding(b) / "finding.json").read_text())
    dup = {"case": {**case["case"], "origin": {**case["case"]["origin"], "index": 2}}, "verdict": case["verdict"]}
    (the_finding(b) / "duplicates.jsonl").write_text(json.dumps(dup) + "\n")
    # b also holds a signature a lacks, and a flaky candidate
    shutil.copytree(the_finding(b), b / "findings" / "other-sig-0000000000")
    stats = stats_of(b)
    stats["findings"]["signatures"] = sorted([sig, "other-sig-0000000000"])
    stats["findings"]["confirmed"] = 2
    stats["findings"]["duplicates"] = 1
    (b / "stats.json").write_text(json.dumps(stats))
    stats = stats_of(a)
    stats["findings"]["duplicates"] = 0
    (a / "stats.json").write_text(json.dumps(stats))
    shutil.copytree(the_finding(a), a / "flaky" / sig)

    merged = merge_outputs([a, b], tmp_path / "ab")
    out = tmp_path / "ab"
    assert merged["findings"]["signatures"] == sorted([sig, "other-sig-0000000000"])
    assert merged["findings"]["confirmed"] == 2
    assert "from b" in (out / "findings" / sig / "repro.py").read_text()
    assert os.access(out / "findings" / sig / "repro.py", os.X_OK)
    assert json.loads((out / "findings" / sig / "finding.json").read_text())["case"]["origin"]["index"] == 1
    lines = [json.loads(line) for line in (out / "findings" / sig / "duplicates.jsonl").read_text().splitlines()]
    assert [line["case"]["origin"]["index"] for line in lines] == [2, 3]  # b's duplicate and a's finding
    assert merged["findings"]["duplicates"] == 1 + 1  # b counted one; a's finding became one more
    assert (out / "flaky" / sig / "finding.json").exists()
    candidates = (out / "candidates.jsonl").read_text().splitlines()
    assert len(candidates) == 2 * len((a / "candidates.jsonl").read_text().splitlines())

    # The argument order changes nothing.
    merge_outputs([b, a], tmp_path / "ba")
    first, second = tree(out), tree(tmp_path / "ba")
    first.pop("merged.json"), second.pop("merged.json")
    assert first == second


def test_corpora_join_and_timelines_carry_their_source(real_out, tmp_path):
    a = copy_out(real_out, tmp_path / "a")
    b = copy_out(real_out, tmp_path / "b")
    for out, names in ((a, ["1111", "2222"]), (b, ["2222", "3333"])):
        for name in names:
            (out / "corpus" / "cases").mkdir(parents=True, exist_ok=True)
            (out / "corpus" / "cases" / f"{name}.json").write_text(json.dumps({"case": {}, "lane": "eager"}))
    (b / "timeline.jsonl").write_text("".join(json.dumps({"t": t, "programs": t}) + "\n" for t in (7.0, 2.0)))
    merge_outputs([b, a], tmp_path / "merged")
    out = tmp_path / "merged"
    assert sorted(p.name for p in (out / "corpus" / "cases").iterdir()) == ["1111.json", "2222.json", "3333.json"]
    lines = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    a_lines = (a / "timeline.jsonl").read_text().splitlines()
    assert [line["source"] for line in lines] == ["a"] * len(a_lines) + ["b", "b"]
    assert [line["t"] for line in lines[-2:]] == [2.0, 7.0]
    assert [line["t"] for line in lines[:-2]] == sorted(json.loads(line)["t"] for line in a_lines)


# ------------------------------------------------------------------ shards


def as_shard(k: int, n: int, indices: list, seed: int = 0):
    def edit(stats):
        stats.update(shard={"index": k, "count": n}, indices=indices, seed=seed)
    return edit


def test_shards_merge_into_one_run(real_out, tmp_path):
    one = copy_out(real_out, tmp_path / "one", as_shard(1, 2, [0, 2]))
    two = copy_out(real_out, tmp_path / "two", as_shard(2, 2, [1, 3]))
    (two / "timeline.jsonl").write_text(json.dumps({"t": 1.0}) + "\n")
    merged = merge_outputs([two, one], tmp_path / "merged")
    assert merged["shard"] == {"merged": [[1, 2], [2, 2]]}
    assert merged["indices"] == [0, 1, 2, 3]
    assert merged["seed"] == 0 and "seeds" not in merged
    sources = {json.loads(line)["source"] for line in (tmp_path / "merged" / "timeline.jsonl").read_text().splitlines()}
    assert sources == {"1/2", "2/2"}

    three = copy_out(real_out, tmp_path / "three", as_shard(3, 4, [2]))
    with pytest.raises(MergeError, match="different splits"):
        merge_outputs([one, three], tmp_path / "mixed")


def test_a_merge_of_shards_merges_on_with_the_rest(real_out, tmp_path):
    shards = [copy_out(real_out, tmp_path / f"s{k}", as_shard(k, 4, [k - 1])) for k in (1, 2, 3, 4)]
    first = merge_outputs(shards[:2], tmp_path / "first")
    assert first["shard"] == {"merged": [[1, 4], [2, 4]]}
    assert any("shards missing: 3/4, 4/4" in note for note in first["merge_notes"])
    merged = merge_outputs([shards[3], tmp_path / "first", shards[2]], tmp_path / "all")
    assert merged["shard"] == {"merged": [[1, 4], [2, 4], [3, 4], [4, 4]]}
    assert merged["indices"] == [0, 1, 2, 3]
    assert merged["programs"]["generated"] == 4 * stats_of(real_out)["programs"]["generated"]
    assert merged["wall_seconds_total"] == round(4 * stats_of(real_out)["wall_seconds"], 2)
    lines = [json.loads(line) for line in (tmp_path / "all" / "timeline.jsonl").read_text().splitlines()]
    sources = [line["source"] for line in lines]
    assert sources == sorted(sources, key=lambda s: int(s[0])) and set(sources) == {"1/4", "2/4", "3/4", "4/4"}
    with pytest.raises(MergeError, match="shard 1/4 is in more than one source"):
        merge_outputs([tmp_path / "first", shards[0]], tmp_path / "twice")


@pytest.mark.parametrize("second, message", [
    (as_shard(2, 2, [1, 3], seed=5), "seed differ"),
    (as_shard(1, 2, [4]), "shard 1/2 is in more than one source"),
    (as_shard(2, 2, [1, 2]), "overlap"),
])
def test_shards_that_do_not_belong_together_are_refused(real_out, tmp_path, second, message):
    one = copy_out(real_out, tmp_path / "one", as_shard(1, 2, [0, 2]))
    two = copy_out(real_out, tmp_path / "two", second)
    with pytest.raises(MergeError, match=message):
        merge_outputs([one, two], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".merged")]  # no half-built merge left


# ------------------------------------------------------------------ bad inputs and the destination


def test_bad_inputs_are_one_line_errors(real_out, tmp_path):
    a = copy_out(real_out, tmp_path / "a")
    inductor = copy_out(real_out, tmp_path / "c", lambda s: s.update(lane="inductor-cpp"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    cases = [
        ([a, tmp_path / "missing"], tmp_path / "m1", "missing is not a symfuzz output folder \\(no stats.json\\)"),
        ([a, tmp_path / "empty"], tmp_path / "m2", "empty is not a symfuzz output folder"),
        ([a, inductor], tmp_path / "m3", "different lanes"),
        ([a, a], tmp_path / "m4", "given twice"),
        ([a], a, "one of the folders to merge"),
        ([a], a / "merged", "inside one another"),
        ([a], tmp_path / "full", "not empty"),
        ([], tmp_path / "m5", "nothing to merge"),
    ]
    for sources, dest, message in cases:
        with pytest.raises(MergeError, match=message) as info:
            merge_outputs(sources, dest)
        assert "\n" not in str(info.value)
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"


def test_an_earlier_merge_output_is_replaced_whole(real_out, tmp_path):
    a = copy_out(real_out, tmp_path / "a")
    b = copy_out(real_out, tmp_path / "b")
    dest = tmp_path / "merged"
    merge_outputs([a, b], dest)
    (dest / "report").mkdir()
    (dest / "report" / "summary.md").write_text("stale")
    merged = merge_outputs([a], dest)
    assert merged["programs"]["generated"] == stats_of(a)["programs"]["generated"]
    assert not (dest / "report").exists()
    assert json.loads((dest / "merged.json").read_text())["sources"][0]["label"] == "a"


# ------------------------------------------------------------------ acceptance: shards merged equal the unsharded run


def assert_merge_equals_unsharded(unsharded: Path, shards: list[Path], dest: Path) -> None:
    merged, whole = merge_outputs(shards, dest), stats_of(unsharded)
    assert merged["findings"]["signatures"] == whole["findings"]["signatures"]
    assert {p.name for p in (dest / "findings").iterdir()} == {p.name for p in (unsharded / "findings").iterdir()}
    for key in ("generated", "valid", "compiled"):
        assert merged["programs"][key] == whole["programs"][key], key
    for key in ("made", "checked"):
        assert merged["calls"][key] == whole["calls"][key], key
    assert merged["ops"] == whole["ops"]
    assert merged["indices"] == whole["indices"] == list(range(whole["max_cases"]))
    assert merged["shard"] == {"merged": [[k, len(shards)] for k in range(1, len(shards) + 1)]}


def test_two_shards_merged_equal_the_unsharded_run(real_out, tmp_path):
    """--max-cases 4: the module's campaign is the unsharded run; the two shards run side by side."""
    procs = [start_fuzz(tmp_path / f"shard{k}", 4, f"{k}/2") for k in (1, 2)]
    for proc in procs:
        finish(proc)
    assert_merge_equals_unsharded(real_out, [tmp_path / "shard2", tmp_path / "shard1"], tmp_path / "merged")


@pytest.mark.slow
def test_two_shards_merged_equal_the_unsharded_run_of_six_cases(tmp_path):
    """--max-cases 6, one run after the other (about two minutes on two cores)."""
    finish(start_fuzz(tmp_path / "whole", 6))
    for k in (1, 2):
        finish(start_fuzz(tmp_path / f"shard{k}", 6, f"{k}/2"))
    assert_merge_equals_unsharded(tmp_path / "whole", [tmp_path / "shard1", tmp_path / "shard2"], tmp_path / "merged")
