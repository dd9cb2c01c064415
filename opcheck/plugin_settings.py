"""The opcheck plugin's settings: what ``--opcheck`` and its options (or the ini file) ask for, checked.

``_settings`` reads them for ``opcheck.plugin`` at ``pytest_configure``; a mistake is a
``pytest.UsageError`` (one line, no traceback). Loaded by the plugin in every pytest run, so
no torch here (see ``opcheck.plugin``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from symfuzz.opcheck.checklist import check_names
from symfuzz.opcheck.store import StoreError, XfailStore, normalize_op

# Seconds per op, a hard limit over all its checks. Most ops finish in a few seconds, stopping
# when new inputs bring nothing new; the limit keeps stage 2 within a typical suite's own time
# (a few seconds per op). opcheck.api's own default (120) is meant for one op at a time.
DEFAULT_BUDGET = 15.0
DEFAULT_CALLS = ".symfuzz/opcheck-calls.jsonl"  # relative to rootdir
# Accept mode from the environment; PYTORCH_OPCHECK_ACCEPT=1 is what PyTorch's own
# generate_opcheck_tests reads, so users who know that get the same behaviour here.
ACCEPT_ENV = ("SYMFUZZ_OPCHECK_ACCEPT", "PYTORCH_OPCHECK_ACCEPT")


@dataclass
class Settings:
    namespaces: list[str]
    store: Path | None
    accept: str  # "" when off, else what switched it on (shown in the summary)
    calls: Path
    record_only: bool
    checks: list[str] | None  # None: all
    budget: float
    fixed: dict  # {op: [argument names]} from the command line or ini; markers add theirs
    in_process: bool
    require_autograd: bool = False  # every op: a missing gradient formula is a failure
    quick: bool = False  # edge variants only, no Inductor compile (opcheck.api.check's quick)
    workers: int = 1  # child processes checking ops side by side
    store_requires: frozenset = frozenset()  # the ops (normalized) whose store entry requires autograd

    def requires_autograd(self, op) -> bool:
        return self.require_autograd or normalize_op(op) in self.store_requires


def _option(config, name, ini):
    """The command-line value if given, else the ini value: the command line wins."""
    value = config.getoption(name)
    return config.getini(ini) if value is None else value


def _names(text):
    return [part.strip() for part in str(text).replace(" ", ",").split(",") if part.strip()]


def _settings(config) -> Settings | None:
    """The plugin's settings, or None when --opcheck is off. Mistakes are UsageErrors (one line, no traceback)."""
    if not _option(config, "opcheck", "opcheck"):
        return None
    namespaces = _names(_option(config, "opcheck_namespaces", "opcheck_namespaces"))
    if not namespaces:
        raise pytest.UsageError("--opcheck needs the op namespaces to check: --opcheck-namespaces=mylib[,other] "
                                "(or opcheck_namespaces in the ini file)")
    bad = [ns for ns in namespaces if "::" in ns or not ns.isidentifier()]
    if bad:
        raise pytest.UsageError(f"--opcheck-namespaces: {', '.join(bad)} is not a namespace (mylib, not mylib::op)")
    root = config.rootpath
    store = _option(config, "opcheck_store", "opcheck_store")
    calls = _option(config, "opcheck_calls", "opcheck_calls") or DEFAULT_CALLS
    checks = _names(_option(config, "opcheck_checks", "opcheck_checks")) or None
    if checks is not None:
        try:
            checks = check_names(checks)  # the store's spelling (test_<check>) is accepted too
        except ValueError as exc:
            raise pytest.UsageError(f"--opcheck-checks: {exc}") from None
    budget_text = _option(config, "opcheck_budget", "opcheck_budget") or DEFAULT_BUDGET
    try:
        budget = float(budget_text)
    except ValueError:
        budget = -1.0
    if not budget > 0:
        raise pytest.UsageError(f"--opcheck-budget: expected a positive number of seconds, got {budget_text!r}")
    workers_text = _option(config, "opcheck_workers", "opcheck_workers")
    if workers_text in (None, ""):
        workers = 1 if hasattr(config, "workerinput") else min(os.cpu_count() or 1, 4)
    else:
        try:
            workers = int(workers_text)
        except ValueError:
            workers = 0
        if workers < 1:
            raise pytest.UsageError(f"--opcheck-workers: expected a positive whole number, got {workers_text!r}")
    accept = "--opcheck-accept" if config.getoption("opcheck_accept") else ""
    for var in ACCEPT_ENV:
        if not accept and os.environ.get(var) == "1":
            accept = f"{var}=1"
    if accept and not store:
        raise pytest.UsageError(f"opcheck accept mode ({accept}) needs a store to write: --opcheck-store=PATH")
    fixed_lines = config.getoption("opcheck_fixed")
    fixed_lines = config.getini("opcheck_fixed") if fixed_lines is None else fixed_lines
    from symfuzz.opcheck.contracts import parse_fixed  # no torch there: the plugin must load without it

    try:
        fixed = parse_fixed(fixed_lines)
    except ValueError as exc:
        raise pytest.UsageError(f"--opcheck-fixed: {exc}") from None
    settings = Settings(namespaces=namespaces, store=root / store if store else None, accept=accept,
                        calls=root / calls, record_only=bool(config.getoption("opcheck_record_only")),
                        checks=checks, budget=budget, fixed=fixed,
                        in_process=bool(_option(config, "opcheck_in_process", "opcheck_in_process")),
                        require_autograd=bool(_option(config, "opcheck_require_autograd", "opcheck_require_autograd")),
                        quick=bool(_option(config, "opcheck_quick", "opcheck_quick")), workers=workers)
    if settings.store is not None:
        try:
            store = XfailStore.load(settings.store)  # a broken store should stop the run now, not after the tests
            if accept:
                XfailStore.check_writable(settings.store)
        except StoreError as exc:
            raise pytest.UsageError(f"--opcheck-store: {exc}") from None
        # Read once, here: accept mode never changes these settings, so the end of the run would read the same.
        settings.store_requires = frozenset(op for op in store.data if store.requires_autograd(op))
    if settings.calls.is_dir():
        raise pytest.UsageError(f"--opcheck-calls: {settings.calls} is a folder; name the file to write the calls to")
    return settings
