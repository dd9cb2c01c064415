"""Bad input to opcheck: `symfuzz opcheck ...` and the pytest plugin's options.

Every row: one clear line on stderr, the documented exit code (2 for the CLI, pytest's
USAGE_ERROR, 4, for the plugin), no traceback, and every file left as it was (a store
that could not be read is never rewritten). The CLI rows run `main()` in process and
fail before torch is imported, except the few that need an op library.
"""

pytest_plugins = ["pytester"]

import os
import re
import sys

import pytest
from conftest import ROOT

from symfuzz.cli import main
from symfuzz.opcheck.store import StoreError, XfailStore

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

GOOD_STORE = '{"_version": 1, "data": {"a::b": {"test_schema": {"comment": "known", "status": "xfail"}}}}\n'

# name -> bytes of store.json (None: no store file)
STORES = {
    "good": GOOD_STORE.encode(),
    "not-json": b"{not json",
    "truncated": GOOD_STORE.encode()[:60],
    "top-level-list": b"[1, 2]",
    "data-is-a-list": b'{"_version": 1, "data": []}',
    "version-is-text": b'{"_version": "1", "data": {}}',
    "entry-without-status": b'{"_version": 1, "data": {"a::b": {"test_schema": {"comment": ""}}}}',
    "unknown-status": b'{"_version": 1, "data": {"a::b": {"test_schema": {"comment": "", "status": "maybe"}}}}',
    "comment-not-text": b'{"_version": 1, "data": {"a::b": {"test_schema": {"comment": 3, "status": "xfail"}}}}',
    "latin-1": b'{"_version": 1, "data": {"a::b": {"test_schema": {"comment": "caf\xe9", "status": "xfail"}}}}',
}


def _setup(tmp_path, store, *, read_only=False, folders=()):
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "bad_syntax_mod.py").write_text("def broken(:\n")
    (tmp_path / "exits_mod.py").write_text("import sys\nsys.exit(3)\n")
    if store is not None:
        path = tmp_path / "store.json"
        path.write_bytes(STORES[store])
        if read_only:
            path.chmod(0o444)


def _snapshot(root):
    """Every file below root with its bytes and mode: 'unchanged' means this."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            data = open(path, "rb").read() if os.path.isfile(path) else b""
            out[os.path.relpath(path, root)] = (st.st_mode, data)
    return out


# (id, store, read_only, argv, stderr regex). Ops named "a::b" are never looked up:
# these mistakes are found before torch is imported.
CLI_ROWS = [
    ("store-not-json", "not-json", False, ["a::b", "--store", "store.json"], r"--store: store\.json: not valid JSON"),
    ("store-truncated", "truncated", False, ["a::b", "--store", "store.json", "--accept"],
     r"store\.json: not valid JSON \(Expecting value: line 1 column 61"),
    ("store-top-level-list", "top-level-list", False, ["a::b", "--store", "store.json"],
     r"expected a JSON object at top level"),
    ("store-data-is-a-list", "data-is-a-list", False, ["a::b", "--store", "store.json"],
     r"'data' must be an object mapping op to tests"),
    ("store-version-is-text", "version-is-text", False, ["a::b", "--store", "store.json"],
     r"'_version' is '1', expected 1"),
    ("store-entry-without-status", "entry-without-status", False, ["a::b", "--store", "store.json"],
     r"op 'a::b', test 'test_schema': expected an object with exactly 'comment' and 'status'"),
    ("store-unknown-status", "unknown-status", False, ["a::b", "--store", "store.json", "--accept"],
     r"unknown status 'maybe'; expected xfail, skip or xsuccess"),
    ("store-comment-not-text", "comment-not-text", False, ["a::b", "--store", "store.json"],
     r"'comment' must be a string"),
    ("store-not-utf8", "latin-1", False, ["a::b", "--store", "store.json", "--accept"],
     r"store\.json: not UTF-8 text \(invalid continuation byte at byte \d+\)"),
    ("store-is-a-folder", None, False, ["a::b", "--store", "a_folder"], r"a_folder: is a folder, not a store file"),
    ("store-read-only-with-accept", "good", True, ["a::b", "--store", "store.json", "--accept"],
     r"store\.json: is read-only; accept mode rewrites it"),
    ("store-under-a-file-with-accept", None, False, ["a::b", "--store", "a_file/store.json", "--accept"],
     r"a_file/store\.json: cannot read it \(Not a directory\)"),
    ("accept-without-store", None, False, ["a::b", "--accept"], r"--accept needs --store PATH"),
    ("budget-zero", None, False, ["a::b", "--budget", "0"], r"--budget must be (a )?positive"),
    ("budget-not-a-duration", None, False, ["a::b", "--budget", "soon"], r"--budget.*duration.*'soon'|'soon' is not a duration"),
    ("op-timeout-zero", None, False, ["a::b", "--op-timeout", "0s"], r"--op-timeout must be (a )?positive"),
    ("seed-not-a-number", None, False, ["a::b", "--seed", "x"], r"--seed: invalid int value: 'x'"),
    ("checks-empty", None, False, ["a::b", "--checks", ","], r"--checks names no check; choose from schema"),
    ("checks-unknown", None, False, ["a::b", "--checks", "schema,nope"], r"--checks: unknown check\(s\) nope"),
    ("namespace-is-an-op", None, False, ["--namespace", "mylib::op"],
     r"--namespace: mylib::op is not a namespace \(mylib, not mylib::op\)"),
    ("json-is-a-folder", None, False, ["a::b", "--json", "a_folder"], r"--json a_folder is a folder"),
    ("repro-dir-is-a-file", None, False, ["a::b", "--repro-dir", "a_file"], r"--repro-dir a_file is a file"),
    ("fixed-malformed", None, False, ["a::b", "--fixed", "nonsense"], r"--fixed: expected NS::OP=ARG"),
    ("unknown-option", None, False, ["a::b", "--no-such-flag"], r"unrecognized arguments: --no-such-flag"),
    # These import torch: the op library or the op itself is what is wrong.
    ("module-missing", None, False, ["a::b", "--module", "no_such_module_h3"],
     r"cannot import --module no_such_module_h3: ModuleNotFoundError"),
    ("module-syntax-error", None, False, ["a::b", "--module", "bad_syntax_mod"],
     r"cannot import --module bad_syntax_mod: SyntaxError"),
    ("module-exits", None, False, ["a::b", "--module", "exits_mod"], r"cannot import --module exits_mod: SystemExit: 3"),
    ("unknown-op", "good", False, ["symfuzz_buggy::no_such_op", "--module", "opcheck_ops.buggy", "--store", "store.json",
                                   "--accept"], r"no op symfuzz_buggy::no_such_op is registered"),
    ("not-an-op-name", None, False, ["half_cols"], r"is not an op name"),
    ("calls-file-missing", None, False, ["--from", "nosuch.jsonl"], r"cannot read calls file nosuch\.jsonl"),
    ("calls-file-is-a-folder", None, False, ["--from", "a_folder"], r"cannot read calls file a_folder"),
]


@pytest.mark.parametrize(("store", "read_only", "argv", "pattern"), [row[1:] for row in CLI_ROWS],
                         ids=[row[0] for row in CLI_ROWS])
def test_cli_bad_input_is_one_line_exit_2_and_touches_nothing(tmp_path, monkeypatch, capsys, store, read_only, argv,
                                                              pattern):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(ROOT / "tests"), *sys.path])  # opcheck_ops; restored after
    _setup(tmp_path, store, read_only=read_only)
    before = _snapshot(tmp_path)
    try:
        code = main(["opcheck", *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert re.search(pattern, err), err
    assert "Traceback" not in out + err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert _snapshot(tmp_path) == before, "a file changed"


def test_a_missing_store_is_an_empty_store_and_accept_may_create_it(tmp_path):
    path = tmp_path / "new" / "deeper" / "store.json"
    assert XfailStore.load(path).data == {}
    XfailStore.check_writable(path)  # missing folders are made on save
    assert not (tmp_path / "new").exists()


def test_check_writable_refuses_a_read_only_folder(tmp_path, monkeypatch):
    # Tests may run as root, who may write anywhere: the folder's refusal is simulated.
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path))
    with pytest.raises(StoreError, match="is not writable; accept mode writes the store there"):
        XfailStore.check_writable(tmp_path / "store.json")


# ---------------------------------------------------------------- the pytest plugin

PLUGIN_ROWS = [
    ("no-namespaces", None, False, ["--opcheck"], r"--opcheck needs the op namespaces"),
    ("namespace-is-an-op", None, False, ["--opcheck", "--opcheck-namespaces=a::b"], r"a::b is not a namespace"),
    ("store-not-json", "not-json", False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-store=store.json"],
     r"--opcheck-store: .*store\.json: not valid JSON"),
    ("store-not-utf8", "latin-1", False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-store=store.json",
                                          "--opcheck-accept"], r"store\.json: not UTF-8 text"),
    ("store-is-a-folder", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-store=a_folder"],
     r"a_folder: is a folder, not a store file"),
    ("store-wrong-types", "data-is-a-list", False, ["--opcheck", "--opcheck-namespaces=a",
                                                     "--opcheck-store=store.json"], r"'data' must be an object"),
    ("store-read-only-with-accept", "good", True, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-store=store.json",
                                                    "--opcheck-accept"], r"store\.json: is read-only"),
    ("accept-without-store", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-accept"],
     r"needs a store to write: --opcheck-store=PATH"),
    ("checks-unknown", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-checks=fake"],
     r"--opcheck-checks: unknown check\(s\) fake"),
    ("budget-not-a-number", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-budget=soon"],
     r"--opcheck-budget: expected a positive number of seconds, got 'soon'"),
    ("budget-negative", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-budget=-5"],
     r"--opcheck-budget: expected a positive number"),
    ("fixed-malformed", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-fixed=nonsense"],
     r"--opcheck-fixed: expected NS::OP=ARG"),
    ("calls-is-a-folder", None, False, ["--opcheck", "--opcheck-namespaces=a", "--opcheck-calls=a_folder"],
     r"--opcheck-calls: .*a_folder is a folder"),
]


@pytest.mark.parametrize(("store", "read_only", "argv", "pattern"), [row[1:] for row in PLUGIN_ROWS],
                         ids=[row[0] for row in PLUGIN_ROWS])
def test_plugin_bad_option_is_a_pytest_usage_error(pytester, store, read_only, argv, pattern):
    """pytest reports a pytest.UsageError raised while configuring as one "ERROR: ..." line and exits 4."""
    _setup(pytester.path, store, read_only=read_only)
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    before = _snapshot(pytester.path)
    result = pytester.runpytest_inprocess(*argv, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    err = "\n".join(result.errlines)
    assert re.search(r"^ERROR: .*" + pattern, err, re.MULTILINE), err
    assert "Traceback" not in err + "\n".join(result.outlines)
    assert _snapshot(pytester.path) == before, "a file changed"
