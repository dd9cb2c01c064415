"""Every file symfuzz reads gives a clear answer when it is bad.

Findings (``symfuzz replay`` / ``minify`` / ``accept``), baselines, stored corpus
cases and scripts to minify: each bad one is one line on stderr naming the file
(and the field), exit 2, no traceback, and the input folder byte-for-byte as it
was. One unreadable finding never stops a folder's replay; ``accept`` is all or
nothing; a failed minify leaves no folder behind. All in process and cheap: bad
input fails before any repro runs (a good finding's replay is stubbed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest

import symfuzz.cli
from conftest import ROOT
from symfuzz.corpus.case_corpus import CaseCorpus, CorpusError, case_digest
from symfuzz.corpus.finding import Finding, FindingFormatError, read_finding
from symfuzz.corpus.replay import ReplayOutcome
from symfuzz.corpus.store import load_findings, scan_findings
from symfuzz.minifier import run as minify_run
from symfuzz.minifier.capture import CaptureRun
from symfuzz.minifier.driver import OriginalDoesNotFail
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_path

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

GOOD = ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json"  # written by a real campaign
GOOD_SIG = "metadata-mismatch-dda589485d"


def good() -> dict:
    return json.loads(GOOD.read_text())


# ---------------------------------------------------------------- building bad inputs


def finding_dir(tmp: Path, content, name: str = "value-mismatch-0123456789") -> Path:
    """OUT/findings/NAME/finding.json holding ``content`` (bytes, str, or JSON data), beside a repro.py."""
    folder = tmp / "out" / "findings" / name
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text("raise SystemExit('a repro must not run on bad input')\n")
    file = folder / "finding.json"
    if isinstance(content, bytes):
        file.write_bytes(content)
    elif isinstance(content, str):
        file.write_text(content)
    else:
        file.write_text(json.dumps(content))
    return folder


def good_finding(tmp: Path) -> Path:
    folder = tmp / "out" / "findings" / GOOD_SIG
    folder.mkdir(parents=True)
    shutil.copy(GOOD, folder / "finding.json")
    (folder / "repro.py").write_text("# stub\n")
    return folder


def edited(**changes) -> dict:
    data = good()
    for path, value in changes.items():
        *heads, last = path.split("__")
        target = data
        for head in heads:
            target = target[head]
        target[last] = value
    return data


def special(tmp: Path, make) -> Path:
    folder = tmp / "out" / "findings" / "value-mismatch-0123456789"
    folder.mkdir(parents=True)
    make(folder / "finding.json")
    return folder


def sparse(path: Path) -> None:
    with open(path, "wb") as handle:
        handle.truncate(51 * 2**20)  # 51 MB of holes: nothing written to the disk


def baseline_file(tmp: Path, content) -> Path:
    path = tmp / "base" / "symfuzz-baseline.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def good_entry() -> dict:
    data = good()
    return {"signature": GOOD_SIG, "symptom": "metadata-mismatch", "description": "d", "reason": "",
            "repro": {k: data[k] for k in ("case", "verdict", "lane", "environment", "triage")}}


def with_good_out(tmp: Path) -> Path:
    good_finding(tmp)
    (tmp / "out" / "stats.json").write_text("{}")
    return tmp / "out"


def with_bad_out(tmp: Path, content) -> Path:
    finding_dir(tmp, content)
    return with_good_out(tmp)


def incomplete(tmp: Path) -> Path:
    """A finding folder a campaign stopped writing: repro.py, no finding.json."""
    folder = finding_dir(tmp, "")
    (folder / "finding.json").unlink()
    return folder


# Each row: (name, build(tmp) -> argv, exit code, regex the stderr must match).
ROWS = [
    # -- finding.json: wrong types, not JSON, not a finding at all
    ("wrong-types-replay", lambda t: ["replay", str(finding_dir(t, {"case": 5, "verdict": "a", "lane": 3,
                                                                       "signature": 7}))],
     2, r"finding\.json: field 'verdict' must be an object, got a string; this is not a finding symfuzz wrote"),
    ("wrong-types-minify", lambda t: ["minify", str(finding_dir(t, {"case": 5, "verdict": "a", "lane": 3,
                                                                       "signature": 7}))],
     2, r"^symfuzz minify: \S+finding\.json: field 'verdict' must be an object, got a string"),
    ("not-json", lambda t: ["replay", str(finding_dir(t, "hello, world"))], 2, r"is not readable JSON"),
    ("truncated-json", lambda t: ["replay", str(finding_dir(t, GOOD.read_text()[:300]))], 2,
     r"is not readable JSON: .*\(cut short: truncated\?\)"),
    ("empty-file", lambda t: ["replay", str(finding_dir(t, b""))], 2, r"finding\.json: is empty"),
    ("not-utf8", lambda t: ["replay", str(finding_dir(t, b'{"case": "caf\xe9"}'))], 2, r"is not UTF-8 text"),
    ("top-level-array", lambda t: ["minify", str(finding_dir(t, [1, 2]))], 2, r"it holds an array, not a finding"),
    ("top-level-number", lambda t: ["replay", str(finding_dir(t, "42"))], 2, r"it holds a number, not a finding"),
    ("future-version", lambda t: ["replay", str(finding_dir(t, edited(finding_version=99)))], 2,
     r"written by a newer symfuzz \(finding_version 99; this one reads 1\); upgrade symfuzz"),
    ("version-not-a-number", lambda t: ["replay", str(finding_dir(t, edited(finding_version="1")))], 2,
     r"field 'finding_version' must be a whole number"),
    ("signature-escapes", lambda t: ["replay", str(finding_dir(t, edited(signature="../../etc/x",
                                                                          verdict__signature="../../etc/x")))],
     2, r"field 'verdict\.signature' '\.\./\.\./etc/x' is not a signature"),
    ("signature-separator", lambda t: ["minify", str(finding_dir(t, edited(signature="a/b", verdict__signature="a/b")))],
     2, r"is not a signature"),
    ("signature-disagrees", lambda t: ["replay", str(finding_dir(t, edited(signature="crash-0123456789")))], 2,
     r"field 'signature' 'crash-0123456789' differs from the verdict's"),
    ("verdict-passed", lambda t: ["replay", str(finding_dir(t, edited(verdict__ok=True)))], 2,
     r"'verdict\.ok' is true, but a finding records a failure"),
    ("evidence-wrong-type", lambda t: ["minify", str(finding_dir(t, edited(verdict__evidence__detail=5)))], 2,
     r"field 'verdict\.evidence\.detail' must be a string, got a number"),
    ("case-not-a-case", lambda t: ["replay", str(finding_dir(t, edited(case={"program": 5, "schedule": {}})))], 2,
     r"field 'case' is not a case this symfuzz can read \(AttributeError"),
    ("lane-without-name", lambda t: ["replay", str(finding_dir(t, edited(lane={"backend": "eager"})))], 2,
     r"field 'lane\.name' is missing"),
    ("duplicate-keys", lambda t: ["replay", str(finding_dir(t, '{"case": {}, "case": {}}'))], 2,
     r"has the key 'case' twice"),
    ("nested-too-deep", lambda t: ["replay", str(finding_dir(t, "[" * 100000 + "]" * 100000))], 2,
     r"nested too deeply"),
    ("huge-file", lambda t: ["replay", str(special(t, sparse))],
     2, r"is 51 MB: too big for a finding file \(at most 50 MB\), so it was not read"),
    ("finding-json-is-a-folder", lambda t: ["replay", str(special(t, lambda p: p.mkdir()))], 2,
     r"finding\.json: is a folder, not a finding file"),
    ("finding-json-given-is-a-folder", lambda t: ["minify", str(special(t, lambda p: p.mkdir()) / "finding.json")],
     2, r"is a folder, not a finding file"),
    ("symlink-to-passwd", lambda t: ["replay", str(special(t, lambda p: p.symlink_to("/etc/passwd")))], 2,
     r"finding\.json: is not readable JSON"),
    ("symlink-to-dev-zero", lambda t: ["replay", str(special(t, lambda p: p.symlink_to("/dev/zero")))], 2,
     r"is not a regular file"),
    ("fifo", lambda t: ["minify", str(special(t, lambda p: os.mkfifo(p)))], 2, r"is not a regular file"),
    ("broken-symlink", lambda t: ["replay", str(special(t, lambda p: p.symlink_to(t / "nowhere")))], 2,
     r"does not exist \(or is a broken symlink\)"),
    ("no-finding-json-in-its-folder", lambda t: ["replay", str(incomplete(t))], 2,
     r"skipped \S+value-mismatch-0123456789: has no finding\.json: a campaign stopped while writing"),
    ("empty-folder", lambda t: ["replay", str((t / "empty").mkdir() or t / "empty")], 2,
     r"no findings in \S+empty \(give a finding folder"),
    # -- accept: all or nothing, the baseline untouched
    ("accept-with-a-bad-finding", lambda t: ["accept", str(with_bad_out(t, "{")), "--baseline", str(t / "b.json")], 2,
     r"1 finding\(s\) in \S+ cannot be read, so nothing was accepted \(\S+b\.json is unchanged\).*\n"
     r"  \S+value-mismatch-0123456789/finding\.json: is not readable JSON"),
    ("accept-into-a-baseline-with-a-bad-finding",
     lambda t: ["accept", str(with_bad_out(t, [1])), "--baseline",
                str(baseline_file(t, {"baseline_version": 1, "entries": {}}))], 2, r"nothing was accepted"),
    ("accept-baseline-not-json", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                            str(baseline_file(t, "{entries"))], 2,
     r"baseline \S+symfuzz-baseline\.json is not readable JSON.*nothing was accepted; the file is unchanged"),
    ("accept-baseline-not-utf8", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                            str(baseline_file(t, b'{"entries": {"\xff": 1}}'))], 2,
     r"baseline \S+ is not UTF-8 text"),
    ("accept-baseline-duplicate-keys", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                                  str(baseline_file(t, '{"entries": {}, "entries": {}}'))], 2,
     r"has the key 'entries' twice"),
    ("accept-baseline-entries-wrong-type", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                                      str(baseline_file(t, {"entries": [1]}))], 2,
     r"is not a symfuzz baseline \(no \"entries\" object\)"),
    ("accept-baseline-hostile-key", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                               str(baseline_file(t, {"entries": {"../x": good_entry()}}))], 2,
     r"entry '\.\./x' is not keyed by a signature"),
    ("accept-baseline-entry-not-an-object", lambda t: ["accept", str(with_good_out(t)), "--baseline",
                                                       str(baseline_file(t, {"entries": {GOOD_SIG: "x"}}))], 2,
     rf"entry '{GOOD_SIG}' must be an object, got a string"),
    ("replay-baseline-malformed-repro",
     lambda t: ["replay", "--baseline", str(baseline_file(t, {"entries": {GOOD_SIG: {
         **good_entry(), "repro": {**good_entry()["repro"], "verdict": "a"}}}}))], 2,
     rf"entry '{GOOD_SIG}' has a repro that is not a finding: field 'verdict' must be an object"),
    ("replay-baseline-repro-case-garbage",
     lambda t: ["replay", "--baseline", str(baseline_file(t, {"entries": {GOOD_SIG: {
         **good_entry(), "repro": {**good_entry()["repro"], "case": {"program": {}}}}}}))], 2,
     rf"entry '{GOOD_SIG}' has no replayable repro: field 'case' is not a case"),
    ("replay-baseline-future", lambda t: ["replay", "--baseline", str(baseline_file(t, {"baseline_version": 7,
                                                                                         "entries": {}}))], 2,
     r"written by a newer symfuzz"),
    # -- minify: inputs that are not a finding nor a script that can run
    ("minify-missing-path", lambda t: ["minify", str(t / "nope.py")], 2, r"nope\.py does not exist"),
    ("minify-folder-without-finding", lambda t: ["minify", str((t / "d").mkdir() or t / "d")], 2,
     r"no finding\.json under"),
    ("minify-txt-file", lambda t: ["minify", str((t / "a.txt").write_text("x") and t / "a.txt")], 2,
     r"a\.txt is neither a finding folder \(with finding\.json\) nor a Python script"),
    ("minify-script-not-utf8", lambda t: ["minify", str((t / "s.py").write_bytes(b"x = '\xff\xfe'\n") and t / "s.py")],
     2, r"s\.py is not UTF-8 text"),
    ("minify-script-empty", lambda t: ["minify", str((t / "s.py").write_text("\n\n") and t / "s.py")], 2,
     r"s\.py is empty: there is nothing to run"),
    ("minify-script-syntax-error", lambda t: ["minify", str((t / "s.py").write_text("x = (\n") and t / "s.py")], 2,
     r"s\.py line 1: SyntaxError: '\(' was never closed"),
    ("minify-script-nul-byte", lambda t: ["minify", str((t / "s.py").write_bytes(b"x = 1\x00\n") and t / "s.py")], 2,
     r"s\.py: SyntaxError: source code string cannot contain null bytes"),
]


def snapshot(root: Path) -> dict:
    """Every path under ``root``: a file's bytes, a link's target, or its kind (never opening a FIFO)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                st = os.lstat(path)
                # a sparse 51 MB file is compared by size and mtime, not read
                out[rel] = ("file", path.read_bytes() if st.st_size < 2**20 else (st.st_size, st.st_mtime_ns))
            else:
                out[rel] = ("dir" if stat.S_ISDIR(mode) else "special", stat.S_IFMT(mode))
    return out


@pytest.mark.parametrize("name, build, code, message", ROWS, ids=[row[0] for row in ROWS])
def test_a_bad_input_file_is_one_clear_line(name, build, code, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = build(tmp_path)

    def no_replay(*args, **kwargs):
        raise AssertionError("a repro ran on bad input")

    monkeypatch.setattr(symfuzz.cli, "replay_finding", no_replay)
    before = snapshot(tmp_path)
    assert symfuzz.cli.main(argv) == code
    err = capsys.readouterr().err
    assert re.search(message, err, re.M | re.S), err
    assert "Traceback" not in err and "internal error" not in err
    assert snapshot(tmp_path) == before  # read-only: nothing written, nothing removed


def test_the_rows_cover_what_issue_14_lists():
    assert len(ROWS) >= 25 and len({row[0] for row in ROWS}) == len(ROWS)


# ---------------------------------------------------------------- one bad finding never stops a folder


@pytest.mark.parametrize("status, code", [("fixed", 2), ("reproduced", 1), ("broken", 3)])
def test_replay_replays_every_readable_finding_and_names_each_unreadable_one(status, code, tmp_path, capsys,
                                                                                monkeypatch):
    """Exit: 1 (fails under the policy) beats 3 (could not judge) beats 2 (unreadable) beats 0."""
    good_finding(tmp_path)
    finding_dir(tmp_path, {"verdict": 1})
    finding_dir(tmp_path, "", name="crash-0123456789")
    (tmp_path / "out" / "findings" / "crash-0123456789" / "finding.json").unlink()
    replayed = []

    def fake_replay(finding, timeout):
        replayed.append(finding.signature)
        return ReplayOutcome(status, 1, finding.signature if status == "reproduced" else None, 0.1, "", reason="x")

    monkeypatch.setattr(symfuzz.cli, "replay_finding", fake_replay)
    before = snapshot(tmp_path)
    assert symfuzz.cli.main(["replay", str(tmp_path / "out" / "findings")]) == code
    out, err = capsys.readouterr()
    assert replayed == [GOOD_SIG]
    skipped = [line for line in err.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 2, err
    assert re.match(r"skipped \S+/crash-0123456789: has no finding\.json", skipped[0])
    assert re.match(r"skipped \S+/value-mismatch-0123456789/finding\.json: field 'verdict' must be an object, "
                    r"got a number", skipped[1])
    assert "2 skipped: cannot be read" in out and "Traceback" not in err
    assert snapshot(tmp_path) == before


def test_a_good_folder_replays_as_before(tmp_path, capsys, monkeypatch):
    good_finding(tmp_path)
    monkeypatch.setattr(symfuzz.cli, "replay_finding",
                        lambda finding, timeout: ReplayOutcome("fixed", 0, None, 0.1, ""))
    assert symfuzz.cli.main(["replay", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "0/1 reproduced, 1 fixed" in out and "skipped" not in out + err


def test_accept_writes_the_good_findings_once_the_bad_one_is_gone(tmp_path, capsys):
    out = with_good_out(tmp_path)
    bad = finding_dir(tmp_path, "{")
    baseline = tmp_path / "b.json"
    assert symfuzz.cli.main(["accept", str(out), "--baseline", str(baseline)]) == 2
    assert not baseline.exists()
    shutil.rmtree(bad)
    assert symfuzz.cli.main(["accept", str(out), "--baseline", str(baseline)]) == 0
    assert list(json.loads(baseline.read_text())["entries"]) == [GOOD_SIG]
    capsys.readouterr()


# ---------------------------------------------------------------- the reading functions themselves


def test_load_findings_raises_the_first_unreadable_and_scan_reads_past_it(tmp_path):
    good_finding(tmp_path)
    finding_dir(tmp_path, "[]")
    found, unreadable = scan_findings(tmp_path / "out")
    assert [f.signature for _, f in found] == [GOOD_SIG]
    assert [(p.parent.name, why.split(";")[0]) for p, why in unreadable] == [
        ("value-mismatch-0123456789", "it holds an array, not a finding object")]
    with pytest.raises(FindingFormatError, match=r"value-mismatch-0123456789/finding\.json: it holds an array"):
        load_findings(tmp_path / "out")
    assert isinstance(FindingFormatError("x"), ValueError)  # callers that catch ValueError still do


def test_a_finding_minified_folder_is_not_taken_for_an_incomplete_finding(tmp_path):
    folder = good_finding(tmp_path)
    (folder / "minified").mkdir()
    (folder / "minified" / "repro.py").write_text("")
    found, unreadable = scan_findings(tmp_path / "out")
    assert len(found) == 1 and unreadable == []


def test_read_finding_round_trips_a_real_finding_and_names_the_file(tmp_path):
    assert read_finding(GOOD).to_json() == good()
    with pytest.raises(FindingFormatError, match=r"^\S+x\.json: is empty"):
        path = tmp_path / "x.json"
        path.write_text("")
        read_finding(path)
    with pytest.raises(FindingFormatError, match="field 'case' is missing"):
        Finding.from_json({k: v for k, v in good().items() if k != "case"})


def test_reading_findings_baselines_and_corpora_runs_no_code():
    """No pickle, marshal, yaml, eval or exec where these files are read (they are JSON, parsed as data)."""
    for module in ("corpus/finding.py", "corpus/store.py", "corpus/baseline.py", "corpus/case_corpus.py"):
        source = (ROOT / module).read_text()
        assert not re.search(r"\b(pickle|marshal|shelve|yaml|torch\.load|eval\(|exec\()", source), module


# ---------------------------------------------------------------- the case corpus


def stored(tmp: Path, content, name: str | None = None) -> Path:
    cases = tmp / "corpus" / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    path = cases / f"{name or case_digest({'n': str(content)})}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_a_corpus_skips_each_file_that_is_not_a_stored_case_and_leaves_it_as_it_is(tmp_path):
    real = {"case": good()["case"], "lane": "eager", "why": ["op:tanh"]}
    stored(tmp_path, real, name=case_digest(real["case"]))
    bad = [stored(tmp_path, b"\xff\xfe"), stored(tmp_path, "{"), stored(tmp_path, []),
           stored(tmp_path, {"case": "x"}), stored(tmp_path, {"case": {"program": {}, "schedule": {}}, "lane": 3}),
           stored(tmp_path, {"case": {"program": {}, "schedule": {}}, "why": [1]}),
           stored(tmp_path, real, name="notes")]
    unparsable = stored(tmp_path, {"case": {"program": {"inputs": 5}, "schedule": {}}})
    before = snapshot(tmp_path)
    corpus = CaseCorpus(tmp_path / "corpus")
    assert len(list(corpus)) == 2 and len(corpus.unreadable) == len(bad)
    assert [c.name for c in corpus.replayable()] == [case_digest(real["case"])]
    assert {p for p, _ in corpus.unreadable} == set(bad) | {unparsable}
    assert all("Traceback" not in why and why for _, why in corpus.unreadable)
    assert snapshot(tmp_path) == before


def test_a_corpus_that_cannot_be_used_is_refused_at_once(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CorpusError, match=r"--corpus \S+file: \S+file is not a folder"):
        CaseCorpus(tmp_path / "file")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cases").write_text("")
    with pytest.raises(CorpusError, match=r"cases is not a folder"):
        CaseCorpus(tmp_path / "c")
    CaseCorpus(tmp_path / "new" / "corpus")  # missing: created when a case is added


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_corpus_is_refused_at_once(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        with pytest.raises(CorpusError, match="cannot be written"):
            CaseCorpus(tmp_path / "ro")
    finally:
        (tmp_path / "ro").chmod(0o755)


# ---------------------------------------------------------------- a failed minify leaves nothing behind


def _fail_after_writing(exc):
    def minify(self, subject, passes):
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "query.log").write_text("...")
        raise exc
    return minify


@pytest.mark.parametrize("exc", [OriginalDoesNotFail("it ended with exit code 0"), KeyboardInterrupt(),
                                 RuntimeError("a symfuzz bug")], ids=["does-not-fail", "interrupted", "crashed"])
def test_a_failed_finding_minify_removes_its_folder(exc, tmp_path, monkeypatch):
    folder = good_finding(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr(minify_run.Driver, "minify", _fail_after_writing(exc))
    with pytest.raises((MinifyError, type(exc))):
        minify_path(folder, MinifyOptions(quiet=True))
    assert snapshot(tmp_path) == before  # no minified/ left in the finding's folder


def test_an_interrupted_minify_keeps_the_best_repro_it_wrote_and_out_is_kept(tmp_path, monkeypatch):
    folder = good_finding(tmp_path)

    def interrupted(self, subject, passes):
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "best.json").write_text("{}")  # the driver saved progress before the interrupt
        raise KeyboardInterrupt

    monkeypatch.setattr(minify_run.Driver, "minify", interrupted)
    with pytest.raises(KeyboardInterrupt):
        minify_path(folder, MinifyOptions(quiet=True))
    assert (folder / "minified" / "best.json").exists()
    monkeypatch.setattr(minify_run.Driver, "minify", _fail_after_writing(OriginalDoesNotFail("no")))
    with pytest.raises(MinifyError):
        minify_path(folder, MinifyOptions(quiet=True, out=tmp_path / "mine"))
    assert (tmp_path / "mine" / "query.log").exists()  # the user named it: kept for them to look at


def test_a_failed_script_minify_removes_its_capture_folder(tmp_path, monkeypatch):
    script = tmp_path / "s.py"
    script.write_text("import torch\n")
    (tmp_path / "s.minified").mkdir()  # an earlier run's folder: kept, only this run's capture/ goes
    (tmp_path / "s.minified" / "repro.py").write_text("# earlier\n")
    before = snapshot(tmp_path)

    def capture(script, folder, **kwargs):
        folder.mkdir(parents=True)
        (folder / "graph-000.json").write_text("{}")
        return CaptureRun(folder, [], 0, "", 0.1, {"compile_calls": 0})

    monkeypatch.setattr("symfuzz.minifier.script.run_capture", capture)
    with pytest.raises(MinifyError, match="never called torch.compile"):
        minify_path(script, MinifyOptions(quiet=True))
    assert snapshot(tmp_path) == before
    shutil.rmtree(tmp_path / "s.minified")
    with pytest.raises(MinifyError):
        minify_path(script, MinifyOptions(quiet=True))
    assert not (tmp_path / "s.minified").exists()


@pytest.mark.slow
@pytest.mark.parametrize("source, message", [
    ("print('hello')\n", r"never called torch\.compile"),
    ("import sys\nsys.exit(0)\n", r"never called torch\.compile"),
    ("import torch\nf = torch.compile(lambda x: x.sin() + 1, backend='eager')\nf(torch.ones(3))\n",
     r"s\.py runs without a compiled failure, so there is nothing to minify"),
], ids=["never-compiles", "exits-0", "runs-fine"])
@pytest.mark.integration
def test_a_script_that_does_not_fail_is_nothing_to_minify(source, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text(source)
    before = snapshot(tmp_path)
    assert symfuzz.cli.main(["minify", "s.py", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err
    assert snapshot(tmp_path) == before


def test_a_writer_s_hidden_temp_folder_is_not_read(tmp_path):
    good_finding(tmp_path)
    hidden = tmp_path / "out" / "findings" / f".{GOOD_SIG}.abcd.tmp"
    hidden.mkdir()
    (hidden / "finding.json").write_text("{")  # half-written by a store writer: not a finding yet
    found, unreadable = scan_findings(tmp_path / "out")
    assert [f.signature for _, f in found] == [GOOD_SIG] and unreadable == []
