"""Faults while symfuzz writes: a full disk, a writer killed at any stage, two writers at once.

Whatever happens, what was already written stays whole, a reader sees no finding or
a whole one (never half of one), and no temp file is left where a writer can sweep it.
None of these tests imports torch: repro.py's text is stubbed (its content is not
what is tested here, its being whole is).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symfuzz.corpus import atomic
from symfuzz.corpus import store as store_module
from symfuzz.corpus.atomic import DiskFullError, append_line, write_json
from symfuzz.corpus.baseline import load_baseline
from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.store import FindingStore, load_findings
from symfuzz.merge import _read_lines
from symfuzz.report import read_timeline

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json"
REPRO = "# repro stub\n" * 2000  # ~26 KB: written in more than one os.write when the disk fills


def _finding(signature: str | None = None) -> Finding:
    data = json.loads(FIXTURE.read_text())
    if signature:
        data["signature"] = signature
        data["verdict"]["signature"] = signature
    return Finding.from_json(data)


@pytest.fixture(autouse=True)
def _no_torch(monkeypatch):
    monkeypatch.setattr(store_module, "render_repro", lambda finding: REPRO)
    monkeypatch.setattr(store_module, "short_repro_for", lambda finding: None)


def _temp_files(root: Path) -> list[Path]:
    return [p for p in Path(root).rglob(f"*{atomic.TMP_SUFFIX}")]


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


class _Disk:
    """os, as corpus/atomic.py sees it, on a disk with ``free`` bytes left; or one whose
    ``fail`` call (fsync, replace) fails with ``code``, as a full disk can make it fail."""

    def __init__(self, free: int = 0, fail: str = "write", code: int = errno.ENOSPC):
        self.free, self.fail, self.code = free, fail, code

    def __getattr__(self, name):
        real = getattr(os, name)
        if name == "write" and self.fail == "write":
            def write(fd, data):
                if self.free <= 0:
                    raise OSError(self.code, os.strerror(self.code))
                n = real(fd, bytes(data[:self.free]))  # a short write: what fits goes in, as the kernel does
                self.free -= n
                return n
            return write
        if name == self.fail:
            def fail(*args, **kwargs):
                raise OSError(self.code, os.strerror(self.code))
            return fail
        return real


@pytest.fixture
def full_disk(monkeypatch):
    def fill(**kwargs):
        monkeypatch.setattr(atomic, "os", _Disk(**kwargs))
    yield fill
    monkeypatch.setattr(atomic, "os", os)


# ---------------------------------------------------------------- a full disk


@pytest.mark.parametrize("fail,free,code", [("write", 100, errno.ENOSPC), ("write", 0, errno.EDQUOT),
                                            ("fsync", 10**9, errno.ENOSPC), ("replace", 10**9, errno.ENOSPC)])
def test_a_full_disk_leaves_the_old_file_whole_and_no_temp_file(tmp_path, full_disk, fail, free, code):
    stats = tmp_path / "stats.json"
    write_json(stats, {"programs": 1})
    before = stats.read_bytes()
    full_disk(free=free, fail=fail, code=code)
    with pytest.raises(DiskFullError) as caught:
        write_json(stats, {"programs": 2, "padding": "x" * 5000})
    assert str(caught.value) == f"disk full writing {stats}"
    assert caught.value.errno == code and isinstance(caught.value, OSError)
    assert stats.read_bytes() == before
    assert _temp_files(tmp_path) == []


def test_a_full_disk_while_adding_a_finding_keeps_the_findings_there(tmp_path, full_disk, monkeypatch):
    store = FindingStore(tmp_path / "findings")
    old = _finding("metadata-mismatch-old")
    store.add(old)
    before = _snapshot(store.root)
    for free in (0, 100, len(REPRO) + 100):  # in repro.py, then in finding.json
        full_disk(free=free)
        with pytest.raises(DiskFullError, match=r"^disk full writing .*/metadata-mismatch-new/(repro\.py|finding\.json)$"):
            store.add(_finding("metadata-mismatch-new"))
        assert [f.signature for _, f in load_findings(store.root)] == ["metadata-mismatch-old"]
        assert [f.signature for f in store] == ["metadata-mismatch-old"]
        assert "metadata-mismatch-new" not in store
        assert {k: v for k, v in _snapshot(store.root).items() if "new" not in k} == before
        assert _temp_files(store.root) == []
        monkeypatch.setattr(atomic, "os", os)
    # the disk has room again: the same finding goes in whole
    assert store.add(_finding("metadata-mismatch-new")) is True
    assert sorted(f.signature for _, f in load_findings(store.root)) == ["metadata-mismatch-new", "metadata-mismatch-old"]
    assert (store.path("metadata-mismatch-new") / "repro.py").read_text() == REPRO
    assert os.stat(store.path("metadata-mismatch-new") / "repro.py").st_mode & 0o777 == 0o755


@pytest.mark.parametrize("free", [0, 10, 10**9])
def test_a_full_disk_while_appending_takes_the_line_back(tmp_path, full_disk, free):
    candidates = tmp_path / "candidates.jsonl"
    for i in range(3):
        append_line(candidates, {"signature": f"s{i}"})
    before = candidates.read_bytes()
    full_disk(free=free, fail="write" if free < 10**9 else "fsync")
    with pytest.raises(DiskFullError, match=f"^disk full writing {candidates}$"):
        append_line(candidates, {"signature": "s3", "case": "x" * 10000})
    assert candidates.read_bytes() == before  # not a byte of the line that did not fit
    assert [line["signature"] for line in _read_lines(candidates)] == ["s0", "s1", "s2"]


def _case(index: int) -> dict:
    case = _finding().case
    return {**case, "origin": {**case["origin"], "index": index}}


def test_a_full_disk_leaves_the_corpus_and_the_baseline_whole(tmp_path, full_disk, monkeypatch):
    corpus = CaseCorpus(tmp_path / "corpus")
    assert corpus.add(_case(0), "eager", ["op:tanh"], "2.13")
    baseline_path = tmp_path / "symfuzz-baseline.json"
    baseline = load_baseline(baseline_path, missing_ok=True)
    baseline.accept([_finding("metadata-mismatch-a")])
    baseline.save()
    before = _snapshot(tmp_path)
    full_disk(free=50)
    with pytest.raises(DiskFullError, match=r"/corpus/cases/[0-9a-f]{40}\.json$"):
        corpus.add(_case(1), "eager", ["op:sin"], "2.13")
    baseline.accept([_finding("metadata-mismatch-b")])
    with pytest.raises(DiskFullError, match=f"^disk full writing {baseline_path}$"):
        baseline.save()
    assert _snapshot(tmp_path) == before and _temp_files(tmp_path) == []
    assert [c.case["origin"]["index"] for c in corpus] == [0]
    assert list(load_baseline(baseline_path).entries) == ["metadata-mismatch-a"]
    monkeypatch.setattr(atomic, "os", os)
    assert corpus.add(_case(1), "eager", ["op:sin"], "2.13")  # room again: it is stored
    assert sorted(c.case["origin"]["index"] for c in corpus) == [0, 1]


# ---------------------------------------------------------------- a torn line


def test_a_torn_last_line_is_skipped_by_readers_and_cut_by_the_next_append(tmp_path):
    # A writer killed mid-line (or a disk that filled under another tool) leaves half a line.
    timeline = tmp_path / "timeline.jsonl"
    append_line(timeline, {"t": 1.0, "programs": 1})
    with open(timeline, "a") as handle:
        handle.write('{"t": 2.0, "progr')
    assert [line["t"] for line in read_timeline(timeline)] == [1.0]
    assert [line["t"] for line in _read_lines(timeline)] == [1.0]
    append_line(timeline, {"t": 3.0, "programs": 3})
    assert timeline.read_text().splitlines() == ['{"programs": 1, "t": 1.0}', '{"programs": 3, "t": 3.0}']
    # a whole last line that only lacks its newline (written by hand) is kept
    with open(timeline, "a") as handle:
        handle.write('{"t": 4.0}')
    append_line(timeline, {"t": 5.0})
    assert [line["t"] for line in read_timeline(timeline)] == [1.0, 3.0, 4.0, 5.0]


# ---------------------------------------------------------------- kill -9 at every stage

# Runs FindingStore.add in a fresh process (no torch) and SIGKILLs it at event number
# STAGE: an event is a call of a file operation corpus/atomic.py or corpus/store.py makes
# (mkdir, mkdtemp, mkstemp, write, chmod, fsync, close, replace, rename, ...), killed
# before it runs; a write is also killed after half of its bytes. With no kill it prints
# its events.
_WRITER = textwrap.dedent("""
    import json, os, pathlib, signal, sys, tempfile
    from symfuzz.corpus import atomic, store
    from symfuzz.corpus.finding import Finding

    base, finding_path, stage, repro = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store.render_repro = lambda finding: repro
    store.short_repro_for = lambda finding: None
    events = []

    def event(name):
        if len(events) == stage:
            os.kill(os.getpid(), signal.SIGKILL)
        events.append(name)

    class Os:
        def __getattr__(self, name):
            real = getattr(os, name)
            if name == "write":
                def write(fd, data):
                    event("write")
                    half = len(data) // 2
                    n = real(fd, bytes(data[:half]))
                    event("write:half")
                    return n + real(fd, bytes(data[half:]))
                return write
            if name in ("chmod", "fchmod", "fsync", "close", "replace", "rename", "unlink", "ftruncate"):
                def call(*args, **kwargs):
                    event(name)
                    return real(*args, **kwargs)
                return call
            return real

    class Tempfile:
        def __getattr__(self, name):
            real = getattr(tempfile, name)
            def call(*args, **kwargs):
                event(name)
                return real(*args, **kwargs)
            return call

    real_mkdir = pathlib.Path.mkdir
    def mkdir(self, *args, **kwargs):
        if not self.exists():
            event("mkdir " + self.name)
        return real_mkdir(self, *args, **kwargs)

    def add(folder, at):
        # in a forked child, so that each stage costs a fork, not a Python start
        global stage
        pid = os.fork()
        if pid == 0:
            stage = at
            atomic.os = store.os = Os()
            atomic.tempfile = store.tempfile = Tempfile()
            pathlib.Path.mkdir = mkdir
            store.FindingStore(folder).add(finding)
            with open(os.path.join(base, "events.json"), "w") as out:
                json.dump(events, out)
            os._exit(0)
        return os.waitpid(pid, 0)[1]

    finding = Finding.from_json(json.loads(open(finding_path).read()))
    assert add(os.path.join(base, "whole"), 10**6) == 0
    with open(os.path.join(base, "events.json")) as f:
        recorded = json.load(f)
    statuses = [add(os.path.join(base, "stage%d" % n), n) for n in range(len(recorded))]
    print(json.dumps({"events": recorded, "killed": [os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses]}))
""")


def _write_until_killed(base: Path) -> dict:
    """Writes one finding to BASE/whole, then to BASE/stage<N>, killed at event N, for every N."""
    proc = subprocess.run([sys.executable, "-c", _WRITER, str(base), str(FIXTURE), "-1", "# repro stub\n" * 50],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.integration
def test_a_writer_killed_at_any_stage_leaves_no_finding_or_a_whole_one(tmp_path):
    run = _write_until_killed(tmp_path)
    events = run["events"]
    # the stages: the store's folder, the hidden temp folder, repro.py in it (temp file, half
    # written, written, mode, fsync, renamed), finding.json (the same), the folder renamed
    # into place (the commit), the folder fsynced
    assert events[:3] == ["mkdir whole", "mkdtemp", "chmod"], events
    assert events.count("mkstemp") == 2 and events.count("replace") == 2 and events.count("write:half") >= 2
    commit = events.index("rename")
    assert commit > events.index("replace", events.index("replace") + 1)
    expected = _finding()
    folder_of = {}
    for stage, name in enumerate(events):
        root = tmp_path / f"stage{stage}"
        assert run["killed"][stage], (stage, name)
        folder = root / expected.signature
        # What every reader sees: no finding, or the whole one. (Killed between the temp
        # folder's finding.json and its rename, the whole finding is in the hidden folder.)
        found = load_findings(root) if root.exists() else []
        assert [f.to_json() for _, f in found] in ([], [expected.to_json()]), (stage, name)
        assert [f.to_json() for f in FindingStore(root)] == [f.to_json() for _, f in found]
        folder_of[stage] = found[0][0].name if found else None
        # The finding's own folder is there whole, or not at all.
        in_place = folder.exists()
        if in_place:
            assert sorted(p.name for p in folder.iterdir()) == ["finding.json", "repro.py"], (stage, name)
            assert (folder / "repro.py").read_text() == "# repro stub\n" * 50
            assert os.stat(folder / "repro.py").st_mode & 0o777 == 0o755
        assert in_place == (stage > commit), (stage, name)
        # The next writer adds the same finding: whole, and what the killed one left is gone.
        assert FindingStore(root).add(expected) is (not in_place), (stage, name)
        assert [(p.name, f.to_json()) for p, f in load_findings(root)] == [(expected.signature, expected.to_json())]
        assert sorted(p.name for p in folder.iterdir()) == (["duplicates.jsonl"] if in_place else []) + [
            "finding.json", "repro.py"]
        assert [p.name for p in root.iterdir()] == [expected.signature], (stage, name)
    # No finding before the temp folder's finding.json is renamed; a whole one from then on,
    # in its own folder once that is renamed into place.
    second_replace = events.index("replace", events.index("replace") + 1)
    assert all(folder_of[s] is None for s in range(second_replace + 1))
    assert all(folder_of[s] == expected.signature for s in range(commit + 1, len(events)))


# ---------------------------------------------------------------- two writers at once

_ADD = textwrap.dedent("""
    import json, sys
    from symfuzz.corpus import store
    from symfuzz.corpus.finding import Finding

    root, finding_path, case_i = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store.render_repro = lambda finding: "# repro for case %d\\n" % finding.case["i"]
    store.short_repro_for = lambda finding: None
    data = json.loads(open(finding_path).read())
    data["case"] = {**data["case"], "i": case_i}
    s = store.FindingStore(root)
    print(json.dumps([s.add(Finding.from_json({**data, "case": {**data["case"], "n": n}})) for n in range(8)]))
""")


@pytest.mark.integration
def test_two_processes_adding_one_signature_give_one_whole_finding_and_duplicates(tmp_path):
    root = tmp_path / "findings"
    procs = [subprocess.Popen([sys.executable, "-c", _ADD, str(root), str(FIXTURE), str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    results = [json.loads(p.communicate(timeout=60)[0] or "null") for p in procs]
    assert all(p.returncode == 0 for p in procs), [p.stderr for p in procs]
    assert sum(r.count(True) for r in results) == 1  # one process stored it; every other add is a duplicate
    (folder, finding), = load_findings(root)
    # repro.py belongs to the case in finding.json, not to the other process's case
    assert (folder / "repro.py").read_text() == f"# repro for case {finding.case['i']}\n"
    duplicates = [json.loads(line) for line in (folder / "duplicates.jsonl").read_text().splitlines()]
    assert len(duplicates) == 15 and all("case" in d for d in duplicates)
    assert _temp_files(root) == []


_ACCEPT = textwrap.dedent("""
    import json, sys
    from symfuzz.corpus import baseline as b
    from symfuzz.corpus.finding import Finding

    path, finding_path, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    data = json.loads(open(finding_path).read())
    for n in range(5):
        sig = "metadata-mismatch-%s%02d" % (tag, n)
        base = b.load_baseline(path, missing_ok=True)
        base.accept([Finding.from_json({**data, "signature": sig, "verdict": {**data["verdict"], "signature": sig}})])
        base.save()
""")


@pytest.mark.integration
def test_two_accepts_into_one_baseline_at_once_keep_both(tmp_path):
    path = tmp_path / "symfuzz-baseline.json"
    procs = [subprocess.Popen([sys.executable, "-c", _ACCEPT, str(path), str(FIXTURE), tag], stderr=subprocess.PIPE,
                              text=True) for tag in ("a", "b")]
    for proc in procs:
        proc.communicate(timeout=60)
        assert proc.returncode == 0, proc.stderr
    entries = load_baseline(path).entries
    assert sorted(entries) == sorted(f"metadata-mismatch-{t}{n:02d}" for t in "ab" for n in range(5))
    assert _temp_files(tmp_path) == [] and [p.name for p in tmp_path.iterdir()] == ["symfuzz-baseline.json"]
