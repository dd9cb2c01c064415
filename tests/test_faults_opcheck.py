"""Faults around opcheck: concurrent and killed writers of one xfail store, and
repro snippets run where the op library is not on the path.

The store's writers are forked processes that import no torch (opcheck.store needs none),
so these are quick. The snippet test runs two snippets in fresh processes, side by side.
"""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from opcheck_ops import buggy  # noqa: F401 - registers symfuzz_buggy::* in this process

from symfuzz.cli import main
from symfuzz.opcheck.store import XfailStore, apply_results

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

HUMAN = {"a::kept": {"test_schema": {"comment": "a person wrote this", "status": "xfail"}}}


def _store_text(data):
    return XfailStore("unused", data).to_text()


def _writer(path, worker, rounds):
    for i in range(rounds):
        apply_results(path, [(f"w{worker}::op{i}", "faketensor", False, f"worker {worker} round {i}")])


def _reader(path, stop, bad):
    while not stop.is_set():
        try:
            XfailStore.load(path)  # a half-written file would raise StoreError here
        except Exception as exc:  # noqa: BLE001 - counted, and the test fails on it
            bad.put(repr(exc))


def test_concurrent_accepting_writers_lose_nothing_and_readers_never_see_half_a_file(tmp_path):
    path = str(tmp_path / "failures_dict.json")
    with open(path, "w") as f:
        f.write(_store_text(json.loads(json.dumps(HUMAN))))
    ctx = multiprocessing.get_context("fork")
    stop, bad = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(path, stop, bad))
    reader.start()
    writers = [ctx.Process(target=_writer, args=(path, w, 15)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    stop.set()
    reader.join(30)
    assert bad.empty(), bad.get()
    data = json.loads(open(path).read())["data"]  # valid JSON
    assert data.pop("a::kept") == HUMAN["a::kept"], "an entry already there was lost"
    assert sorted(data) == sorted(f"w{w}::op{i}" for w in range(4) for i in range(15))
    assert data["w2::op14"]["test_faketensor"] == {"comment": "symfuzz: worker 2 round 14", "status": "xfail"}
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def _killed_writer(path, ready):
    """Writes the new store, then stops between the write and the replace, where it is killed."""
    import symfuzz.corpus.atomic as atomic

    def stuck_replace(src, dst):
        ready.set()
        time.sleep(60)

    atomic.os.replace = stuck_replace  # this forked process's own os module attribute
    apply_results(path, [("new::op", "schema", False, "never lands")])


def test_a_writer_killed_between_write_and_replace_leaves_the_old_store(tmp_path):
    path = str(tmp_path / "failures_dict.json")
    old = _store_text(json.loads(json.dumps(HUMAN)))
    with open(path, "w") as f:
        f.write(old)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    writer = ctx.Process(target=_killed_writer, args=(path, ready))
    writer.start()
    try:
        assert ready.wait(30), "the writer never reached the replace"
        # The new content is fully written, in its temporary file, beside the store.
        tmp = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        assert len(tmp) == 1 and "new::op" in (tmp_path / tmp[0]).read_text()
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(30)
        assert writer.exitcode == -signal.SIGKILL
    finally:
        if writer.is_alive():
            writer.kill()
    assert open(path).read() == old, "the store is not the old one"
    # The lock died with its holder: the next writer gets it, merges, and clears the dead one's file.
    apply_results(path, [("next::op", "schema", False, "lands")])
    data = XfailStore.load(path).data
    assert set(data) == {"a::kept", "next::op"}
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# ---------------------------------------------------------------- repro snippets

SNIPPET = "symfuzz_buggy__half_cols__faketensor.py"


def _snippet(tmp_path, monkeypatch, capsys):
    """The faketensor repro of symfuzz_buggy::half_cols, written by `symfuzz opcheck` (in process)."""
    monkeypatch.chdir(tmp_path)
    code = main(["opcheck", "symfuzz_buggy::half_cols", "--checks", "faketensor", "--budget", "5s", "--in-process",
                 "--quiet", "--repro-dir", str(tmp_path / "repros")])
    assert code == 1, capsys.readouterr()
    capsys.readouterr()
    text = (tmp_path / "repros" / SNIPPET).read_text()
    # where this process imported opcheck_ops from
    assert f"import_registering('opcheck_ops.buggy', {str(ROOT / 'tests')!r})" in text
    return text


def _exec(text, monkeypatch, where, *, forget_library=True):
    """Run a snippet in this process (torch is imported already, so it is quick), as the file ``where``
    (beside the helpers file symfuzz wrote); its exit code.
    forget_library: as in a fresh process, opcheck_ops is neither imported nor on sys.path."""
    with monkeypatch.context() as patch:  # undone on return: the module is registered in this process
        if forget_library:
            patch.setattr(sys, "path", [p for p in sys.path if os.path.abspath(p) != str(ROOT / "tests")])
            for name in [m for m in sys.modules if m == "opcheck_ops" or m.startswith("opcheck_ops.")]:
                patch.delitem(sys.modules, name)
        try:
            exec(compile(text, str(where), "exec"), {"__name__": "__main__", "__file__": str(where)})
        except SystemExit as exc:
            return exc.code
        return 0


def test_repro_snippet_that_cannot_load_its_op_says_so_and_exits_2(tmp_path, monkeypatch, capsys):
    """The op library moved away, or no longer registers the op: one "could not run" line and
    exit 2, never 1 ("the bug reproduced")."""
    text = _snippet(tmp_path, monkeypatch, capsys)
    tests_dir = str(ROOT / "tests")
    moved = text.replace(repr(tests_dir), repr(str(tmp_path / "moved_away")))
    assert _exec(moved, monkeypatch, tmp_path / "repros" / SNIPPET) == 2
    _, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "could not run: cannot import opcheck_ops.buggy (ModuleNotFoundError: No module named 'opcheck_ops'); set "
        f"PYTHONPATH to the folder it imports from (it was {tmp_path / 'moved_away'} when this snippet was written)"]
    renamed = text.replace("'symfuzz_buggy::half_cols.default'", "'symfuzz_buggy::half_cols_gone.default'")
    assert renamed != text
    assert _exec(renamed, monkeypatch, tmp_path / "repros" / SNIPPET, forget_library=False) == 2  # the op is gone
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "could not run: no op symfuzz_buggy::half_cols_gone.default is registered"), lines
    assert lines[0].endswith("opcheck_ops.buggy imported but did not register it")


@pytest.mark.integration
@pytest.mark.slow  # two fresh processes that import torch; the in-process test above covers exit 2 quickly
def test_repro_snippet_stands_alone_from_an_unrelated_folder(tmp_path, monkeypatch, capsys):
    """Run from an unrelated folder without PYTHONPATH, the snippet finds the op library where
    it was imported from and shows the bug: exit 1. Moved away: exit 2 with one line."""
    text = _snippet(tmp_path, monkeypatch, capsys)
    moved = tmp_path / "repros" / "moved.py"  # beside the helpers file, as every snippet is written
    moved.write_text(text.replace(repr(str(ROOT / "tests")), repr(str(tmp_path / "moved_away"))))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    procs = {name: subprocess.Popen([sys.executable, str(path)], cwd=elsewhere, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, path in (("found", tmp_path / "repros" / SNIPPET), ("moved", moved))}
    done = {name: (p.wait(300), *p.communicate()) for name, p in procs.items()}
    code, out, err = done["found"]
    assert code == 1 and "AssertionError: fake kernel disagrees with the real one" in err, err[-2000:]
    assert "real torch.float32 [1, 1]" in out  # it got as far as running the op
    code, out, err = done["moved"]
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("could not run: cannot import"), err
