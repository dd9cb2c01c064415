"""Bad command-line input: one clear line on stderr, exit 2, no traceback, nothing written.

Each row is (argv, exit code, a regex the last stderr line must match). The rows run in
process through ``symfuzz.cli.main`` in a folder of prepared inputs (a file, a good OUT, OUT
folders with a broken stats.json, a folder holding an earlier run); every file's bytes in
that folder are the same afterwards. Bad flags fail while parsing, before torch is imported
(``test_a_bad_flag_is_refused_before_torch_is_imported``), so the table is fast.
Bad file contents (findings, baselines, stores) are tests/test_bad_input_files.py's.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import symfuzz.cli as cli
from symfuzz.settings import CASE_TIMEOUT_FLOOR

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

GOOD_STATS = {"programs": {"generated": 3, "valid": 3}, "calls": {"checked": 4}, "findings": {"confirmed": 0},
              "lane": "eager", "seed": 0}
CPUS = os.cpu_count() or 1

FUZZ = ["fuzz", "--lane", "eager"]  # a lane every machine has: the rows fail on their own flag
ROWS = [
    # durations: negative values reach the type function; zero, junk, non-finite, too long
    (FUZZ + ["--budget", "-5s"], 2, r"^symfuzz fuzz: --budget must be positive, got -5s"),
    (FUZZ + ["--budget", "-1"], 2, r"--budget must be positive, got -1"),
    (FUZZ + ["--budget", "0"], 2, r"--budget must be positive, got 0"),
    (FUZZ + ["--budget", "10x"], 2, r"--budget must be a duration such as 120s, 10m, 1h or 1h30m, got '10x'"),
    (FUZZ + ["--budget", "1e9"], 2, r"--budget must be a duration .*got '1e9'"),
    (FUZZ + ["--budget", "nan"], 2, r"--budget must be a duration .*got 'nan'"),
    (FUZZ + ["--budget", "inf"], 2, r"--budget must be a duration .*got 'inf'"),
    (FUZZ + ["--budget", "-inf"], 2, r"--budget must be a duration .*got '-inf'"),
    (FUZZ + ["--budget", ""], 2, r"--budget must be a duration .*got ''"),
    (FUZZ + ["--budget", "169h"], 2, r"--budget must be at most a week \(168h\), got 169h"),
    (FUZZ + ["--case-timeout", "0"], 2, r"--case-timeout must be at least 30s, got 0: a case compiles its program "
                                        r"once per recompile .* merely slow"),
    (FUZZ + ["--case-timeout", "29s"], 2, r"--case-timeout must be at least 30s, got 29s"),
    (FUZZ + ["--case-timeout", "-5s"], 2, r"--case-timeout must be at least 30s, got -5s"),
    (FUZZ + ["--confirm-timeout", "0"], 2, r"--confirm-timeout must be positive, got 0"),
    (FUZZ + ["--source", "programs"], 2, r"unknown source programs: use random, models or random,models"),
    (FUZZ + ["--models", "llama"], 2, r"--models picks architectures of the model source: add --source models"),
    (FUZZ + ["--canary-timeout", "-1m"], 2, r"--canary-timeout must be positive, got -1m"),
    (FUZZ + ["--minify-budget", "0"], 2, r"--minify-budget must be positive, got 0"),
    (FUZZ + ["--reference-timeout", "0"], 2, r"--reference-timeout must be positive, got 0"),
    (FUZZ + ["--reference-timeout", "-1m"], 2, r"--reference-timeout must be positive, got -1m"),
    # numbers
    (FUZZ + ["--seed", "abc"], 2, r"--seed must be a whole number, got 'abc'"),
    (FUZZ + ["--seed", "-1"], 2, r"--seed must be between 0 and 2\*\*63-1 \(9223372036854775807\), got -1"),
    (FUZZ + ["--seed", str(2**63)], 2, r"--seed must be between 0 and 2\*\*63-1 .*got 9223372036854775808"),
    (FUZZ + ["--jobs", "0"], 2, r"--jobs must be at least 1, got 0"),
    (FUZZ + ["--jobs", "-3"], 2, r"--jobs must be at least 1, got -3"),
    (FUZZ + ["--jobs", "two"], 2, r"--jobs must be a whole number, got 'two'"),
    (FUZZ + ["--jobs", str(4 * CPUS + 1)], 2, rf"--jobs must be at most {4 * CPUS} with the local executor "
                                              rf"\(4 per CPU, {CPUS} here\), got {4 * CPUS + 1}: .*--executor ray"),
    (FUZZ + ["--jobs", "10000"], 2, r"--jobs must be at most \d+ with the local executor"),
    (FUZZ + ["--memory-limit", "0"], 2, r"--memory-limit must be at least 1, got 0"),
    (FUZZ + ["--memory-limit", "1"], 2, r"--memory-limit must be at least 1024 \(MB\), got 1: a worker holds"),
    (FUZZ + ["--max-ops", "0"], 2, r"--max-ops must be at least 1, got 0"),
    (FUZZ + ["--max-cases", "0"], 2, r"--max-cases must be at least 1, got 0"),
    (FUZZ + ["--max-findings", "-1"], 2, r"--max-findings must be at least 1, got -1"),
    (FUZZ + ["--translation-validation", "abc"], 2, r"--translation-validation must be a share between 0 and 1, "
                                                    r"e\.g\. 0\.05, got 'abc'"),
    (FUZZ + ["--translation-validation", "2"], 2, r"--translation-validation must be a share .*got '2'"),
    (FUZZ + ["--translation-validation", "-0.5"], 2, r"--translation-validation must be a share .*got '-0.5'"),
    (FUZZ + ["--translation-validation", "nan"], 2, r"--translation-validation must be a share .*got 'nan'"),
    # names and choices
    (FUZZ + ["--ops", ""], 2, r"--ops names no op \(''\); .*`symfuzz ops`"),
    (FUZZ + ["--ops", ",,,"], 2, r"--ops names no op \(',,,'\)"),
    (["fuzz", "--lane", "no-such-lane"], 2, r"unknown lane 'no-such-lane'; known lanes: .*eager"),
    (FUZZ + ["--shard", "0/2"], 2, r"--shard must be K/N with 1 <= K <= N, got 0/2"),
    (FUZZ + ["--shard", "3/2"], 2, r"--shard must be K/N with 1 <= K <= N, got 3/2"),
    (FUZZ + ["--shard", "a/b"], 2, r"--shard must be K/N \(shard K of N\), e\.g\. 1/4, got 'a/b'"),
    (FUZZ + ["--executor", "bogus"], 2, r"--executor: invalid choice: 'bogus'"),
    (FUZZ + ["--fail-on", "sometimes"], 2, r"--fail-on must be one of regression, new, any, got 'sometimes'"),
    (FUZZ + ["--fail-on", "regression"], 2, r"--fail-on regression needs --reference-python"),
    (FUZZ + ["--ray-address", "10.0.0.1:6379"], 2, r"--ray-address is for --executor ray"),
    (FUZZ + ["--no-such-flag"], 2, r"^symfuzz: unrecognized arguments: --no-such-flag"),
    (FUZZ + ["--budget"], 2, r"--budget: expected one argument"),
    (FUZZ + ["--", "x"], 2, r"arguments after `--` are only for `symfuzz minify script.py`: x"),
    # where a run writes
    (FUZZ + ["--out", "afile"], 2, r"cannot write to --out afile: it is a file, not a folder; pick a writable folder"),
    (FUZZ + ["--out", "afile/sub"], 2, r"cannot write to --out afile/sub: it lies under afile, which is a file"),
    (FUZZ + ["--corpus", "afile"], 2, r"--corpus afile cannot hold a corpus"),
    (FUZZ + ["--baseline", "missing.json"], 2, r"baseline missing.json does not exist"),
    (FUZZ + ["--reference-python", "/no/such/python"], 2, r"--reference-python /no/such/python"),
    # the other subcommands' flags
    (["minify", "afile.py", "--budget", "-5s"], 2, r"^symfuzz minify: --budget must be positive, got -5s"),
    (["minify", "afile.py", "--timeout", "0"], 2, r"--timeout must be positive, got 0"),
    (["minify", "afile.py", "--jobs", "0"], 2, r"--jobs must be at least 1, got 0"),
    (["minify", "afile.py", "--jobs", str(4 * CPUS + 1)], 2, rf"--jobs must be at most {4 * CPUS} \(4 per CPU"),
    (["minify", "afile.py", "--match", "x", "--accuracy"], 2, r"--accuracy: not allowed with argument --match"),
    (["minify"], 2, r"the following arguments are required: path"),
    (["replay", "good", "--timeout", "-1m"], 2, r"^symfuzz replay: --timeout must be positive, got -1m"),
    (["replay", "good", "--fail-on", "x"], 2, r"--fail-on must be one of"),
    (["accept"], 2, r"the following arguments are required: out"),
    (["accept", "notout"], 2, r"notout is not a symfuzz output folder"),
    (["merge", "good"], 2, r"the following arguments are required: --out"),
    (["merge", "good", "--out", "m", "--reference-timeout", "0"], 2, r"--reference-timeout must be positive, got 0"),
    (["merge", "missing", "--out", "m"], 2, r"missing is not a symfuzz output folder \(no stats.json\)"),
    (["merge", "afile", "--out", "m"], 2, r"afile is not a symfuzz output folder"),
    (["merge", "good", "--out", "good"], 2, r"--out good is one of the folders to merge"),
    (["merge", "good", "--out", "afile"], 2, r"--out afile is a file, not a folder"),
    (["merge", "good", "--out", "earlier"], 2, r"--out earlier is not empty and is no earlier merge output"),
    (["merge", "good", "badjson", "--out", "m"], 2, r"badjson/stats.json is not readable JSON"),
    (["merge", "good", "badutf", "--out", "m"], 2, r"badutf/stats.json is not readable JSON: 'utf-8' codec"),
    (["merge", "good", "wrongtypes", "--out", "m"], 2, r"wrongtypes/stats.json is not a symfuzz stats.json: "
                                                       r"'programs' is 5, not an object"),
    (["merge", "good", "badcounts", "--out", "m"], 2, r"'calls.checked' is \"many\", not a number"),
    (["report", "notout"], 2, r"notout is not a symfuzz output folder \(no stats.json\)"),
    (["report", "afile"], 2, r"afile is not a symfuzz output folder"),
    (["report", "badjson"], 2, r"badjson/stats.json is not readable JSON"),
    (["report", "badutf"], 2, r"badutf/stats.json is not readable JSON: 'utf-8' codec"),
    (["report", "wrongtypes"], 2, r"wrongtypes/stats.json is not a symfuzz stats.json: 'programs' is 5"),
    (["report", "listjson"], 2, r"listjson/stats.json is not a symfuzz stats.json: it holds list"),
    (["report", "badcounts"], 2, r"'calls.checked' is \"many\", not a number"),
    (["report", "good", "--dest", "afile"], 2, r"cannot write to --dest afile: it is a file, not a folder"),
    (["report", "good", "--dest", "afile/sub"], 2, r"cannot write to --dest afile/sub: it lies under afile"),
    (["lanes", "extra"], 2, r"unrecognized arguments: extra"),
    (["ops", "--verbose"], 2, r"unrecognized arguments: --verbose"),
    (["opcheck", "--budget", "-5s"], 2, r"^symfuzz opcheck: --budget must be positive, got -5s"),
    (["opcheck", "--op-timeout", "0"], 2, r"--op-timeout must be positive, got 0"),
    (["nosuchcommand"], 2, r"invalid choice: 'nosuchcommand'"),
    ([], 2, r"the following arguments are required: command"),
]


class CampaignWouldStart(BaseException):
    """Raised instead of starting a campaign (a BaseException: main() turns an Exception into exit 3)."""


def _prepare(root: Path) -> None:
    (root / "afile").write_text("not a folder\n")
    (root / "afile.py").write_text("print('never run')\n")
    (root / "notout").mkdir()
    for name, text in [("good", json.dumps(GOOD_STATS)), ("badjson", "{not json"), ("listjson", "[1, 2]"),
                       ("wrongtypes", json.dumps({**GOOD_STATS, "programs": 5})),
                       ("badcounts", json.dumps({**GOOD_STATS, "calls": {"checked": "many"}}))]:
        (root / name).mkdir()
        (root / name / "stats.json").write_text(text)
    (root / "badutf").mkdir()
    (root / "badutf" / "stats.json").write_bytes(b'{"programs": "\xff\xfe"}')
    (root / "earlier").mkdir()
    (root / "earlier" / "notes.txt").write_text("an earlier run's file\n")


def _snapshot(root: Path) -> dict:
    """Every file's bytes and every folder under root (relative paths)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    _prepare(tmp_path)
    monkeypatch.chdir(tmp_path)

    def no_campaign(config):  # a row that got this far would start a real campaign
        raise CampaignWouldStart(f"the flags were accepted and a campaign would start: {config}")

    monkeypatch.setattr(cli, "Campaign", no_campaign)
    handler = signal.getsignal(signal.SIGTERM)  # main() installs its own
    yield tmp_path
    signal.signal(signal.SIGTERM, handler)


def run_main(argv, capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse: a parse error exits 2, --help and --version 0
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv, code, pattern", ROWS, ids=[" ".join(r[0]) or "(nothing)" for r in ROWS])
def test_a_bad_flag_gets_one_clear_line_and_changes_nothing(workdir, capsys, argv, code, pattern):
    before = _snapshot(workdir)
    got, _, err = run_main(argv, capsys)
    lines = err.strip().splitlines()
    assert got == code, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err  # one line: no usage block, no traceback
    assert re.search(pattern, lines[0]), lines[0]
    assert _snapshot(workdir) == before


def test_a_read_only_out_is_refused_before_the_campaign(workdir, capsys):
    if os.geteuid() == 0:  # root writes into a chmod 555 folder: the probe would pass
        pytest.skip("root ignores folder permissions")
    locked = workdir / "locked"
    locked.mkdir()
    (locked / "kept.txt").write_text("kept\n")
    locked.chmod(0o555)
    try:
        before = _snapshot(workdir)
        for out in ("locked", "locked/sub"):
            code, _, err = run_main(FUZZ + ["--out", out], capsys)
            assert code == 2, err
            assert err.strip() == (f"symfuzz fuzz: cannot write to --out {out}: Permission denied; "
                                   f"pick a writable folder")
        code, _, err = run_main(["merge", "good", "--out", "locked/m"], capsys)
        assert (code, err.strip()) == (2, "symfuzz merge: cannot write to --out locked/m: Permission denied; "
                                          "pick a writable folder")
        assert _snapshot(workdir) == before
    finally:
        locked.chmod(0o755)


def test_an_out_the_probe_cannot_write_is_refused(workdir, capsys, monkeypatch):
    """What a read-only file system says (root cannot be kept out by permissions: this runs as root too)."""
    write_bytes = Path.write_bytes

    def read_only(self, data):
        if self.name.startswith(".symfuzz-write-probe-"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", read_only)
    for argv, line in [(FUZZ + ["--out", "earlier"], "symfuzz fuzz: cannot write to --out earlier: "),
                       (["report", "good"], "symfuzz report: cannot write to good/report: "),
                       (["report", "good", "--dest", "earlier"], "symfuzz report: cannot write to --dest earlier: ")]:
        before = _snapshot(workdir)
        code, _, err = run_main(argv, capsys)
        assert code == 2, err
        assert err.strip().startswith(line) and "Read-only file system" in err, err
        assert _snapshot(workdir).keys() - before.keys() <= {"good/report"}


def test_a_writable_out_passes_the_checks_and_reaches_the_campaign(workdir, capsys):
    """The control row: the same flags, well formed, get as far as starting the campaign."""
    with pytest.raises(CampaignWouldStart):
        cli.main(FUZZ + ["--out", "fresh", "--budget", "10m", "--case-timeout", f"{CASE_TIMEOUT_FLOOR:.0f}s",
                         "--seed", str(2**63 - 1), "--jobs", "1", "--memory-limit", "1024",
                         "--translation-validation", "0", "--shard", "2/2", "--max-ops", "1"])
    assert (workdir / "fresh").is_dir() and not any((workdir / "fresh").iterdir())  # the probe file is gone


def test_negative_values_are_joined_to_their_option_only():
    options = cli.value_options(cli.build_parser())
    assert {"--budget", "--case-timeout", "--seed", "--out", "--timeout", "--op-timeout"} <= options
    assert "--quiet" not in options and "--resume" not in options
    assert cli.join_negative_values(["fuzz", "--budget", "-5s", "--quiet", "-1", "--seed", "-.5", "--out", "-x"],
                                    options) == ["fuzz", "--budget=-5s", "--quiet", "-1", "--seed=-.5", "--out", "-x"]


def test_version_lists_symfuzz_and_what_it_tests(capsys):
    code, out, err = run_main(["--version"], capsys)
    assert code == 0 and err == ""
    names = [line.split(" ", 1)[0] for line in out.splitlines()]
    assert names == ["symfuzz", "torch", "triton", "hypothesis", "z3"]
    for line in out.splitlines():
        assert re.fullmatch(r"\S+ (\d\S*|not installed)", line), line


@pytest.mark.parametrize("command", ["fuzz", "minify", "replay", "accept", "merge", "report", "lanes", "ops"])
def test_help_states_defaults_and_exit_codes(capsys, command):
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0
    assert "exit codes" in out and "2 " in out.split("exit codes", 1)[1]
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    for action in sub._actions:
        if action.option_strings and action.default not in (None, False) and action.help != "==SUPPRESS==" \
                and action.dest != "help":
            option_help = " ".join(sub.formatter_class("x")._get_help_string(action).split())
            assert "default" in option_help, (command, action.option_strings)


def test_top_level_help_points_to_the_exit_code_contract(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0 and "docs/exit-codes.md" in out and "--version" in out
    assert (Path(__file__).parent.parent / "docs" / "exit-codes.md").is_file()


def test_replay_and_minify_help_say_what_runs_code(capsys):
    for command in ("replay", "minify"):
        _, out, _ = run_main([command, "--help"], capsys)
        text = " ".join(out.split())
        assert "no pickle, no eval" in text and "like any script you would run" in text, command


@pytest.mark.integration
def test_a_bad_flag_is_refused_before_torch_is_imported():
    code = ("import sys\nfrom symfuzz.cli import main\n"
            "try:\n    main(['fuzz', '--budget', '-5s'])\nexcept SystemExit as exc:\n"
            "    print(exc.code, 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["2", "False"], proc.stdout + proc.stderr
    assert proc.stderr.strip() == "symfuzz fuzz: --budget must be positive, got -5s (see `symfuzz fuzz --help`)"
