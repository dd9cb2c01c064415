"""pytest plugin: check every custom op a test suite calls, switched on by one line.

    [pytest]
    addopts = --opcheck --opcheck-namespaces=mylib --opcheck-store=opcheck_failures.json

Stage 1, while the tests run: each call to an op in the chosen namespaces made
during a test's call phase, and each sample a test hands to
``torch.library.opcheck``, is recorded with copies of its inputs
(``opcheck.calls.CallRecorder``). At session end the distinct calls are written
to the calls file and, unless ``--opcheck-record-only``, each op is checked by
``opcheck.check`` with its recorded calls as samples, in a child process
(``opcheck.runner``: a kernel that crashes or hangs on a swept shape becomes a
result, not the end of the session). Each (op, check) result is
judged against the xfail store (``opcheck.store``, PyTorch's failures_dict.json
format): an unexpected failure, or an unexpected success (strict, as in
PyTorch), fails the run; ``--opcheck-accept`` rewrites the store instead.
An op with no autograd formula is reported as not differentiable (an info line
in the summary), not as a failure, unless ``--opcheck-require-autograd`` (ini
``opcheck_require_autograd``) or the store's per-op ``require_autograd`` setting
asks for one.
Stage 2, ``symfuzz opcheck --from <calls file>``, reruns the checks without the suite.

pytest-xdist: each worker records and checks the ops its own tests called, writes
its calls to ``<calls file>.<worker id>`` and sends its reports (JSON) through
``config.workeroutput``. The controller merges the reports per op (a check failed
if it failed on any worker), merges the calls files, judges and reports.

Loading this module must not import torch: once symfuzz is installed, pytest
loads it in every run in the environment, most of which never use it. So only the
standard library, pytest, ``opcheck.checklist`` and ``opcheck.store`` at module level; the modules that
need torch are imported when ``--opcheck`` is on, in the processes that run tests.
The same holds for the modules this one imports: ``opcheck.plugin_settings`` (the
options, checked), ``opcheck.plugin_session`` (the session's work, above) and
``opcheck.report_merging`` (the workers' reports merged per op).
"""

from __future__ import annotations

from symfuzz.opcheck.checklist import CHECKS
from symfuzz.opcheck.plugin_session import OpcheckSession
from symfuzz.opcheck.plugin_settings import DEFAULT_BUDGET, DEFAULT_CALLS, _settings


def pytest_addoption(parser):
    group = parser.getgroup("symfuzz opcheck", "symfuzz opcheck: check the custom ops the tests call")
    # Defaults are None so that "not given on the command line" can fall back to the ini value.
    group.addoption("--opcheck", action="store_true", default=None, dest="opcheck",
                    help="record calls to custom ops during the tests and check those ops at the end (ini: opcheck)")
    group.addoption("--no-opcheck", action="store_false", default=None, dest="opcheck",
                    help="switch opcheck off, e.g. when the ini's addopts switches it on")
    group.addoption("--opcheck-namespaces", default=None, metavar="NS[,NS...]",
                    help="op namespaces to record and check, e.g. mylib (ini: opcheck_namespaces)")
    group.addoption("--opcheck-store", default=None, metavar="PATH",
                    help="xfail store (PyTorch failures_dict.json format), relative to rootdir; "
                         "without one every failure is unexpected (ini: opcheck_store)")
    group.addoption("--opcheck-accept", action="store_true", default=False,
                    help="rewrite the store so that it expects this run's results; the run is not failed "
                         "by opcheck (also SYMFUZZ_OPCHECK_ACCEPT=1 or PYTORCH_OPCHECK_ACCEPT=1)")
    group.addoption("--opcheck-calls", default=None, metavar="PATH",
                    help=f"where to write the recorded calls, relative to rootdir (default {DEFAULT_CALLS}; "
                         "ini: opcheck_calls)")
    group.addoption("--opcheck-record-only", action="store_true", default=False,
                    help="only record the calls (stage 1); check them later with symfuzz opcheck --from FILE")
    group.addoption("--opcheck-checks", default=None, metavar="CHECK[,CHECK...]",
                    help=f"checks to run (default all: {', '.join(CHECKS)}; ini: opcheck_checks)")
    group.addoption("--opcheck-budget", default=None, metavar="SECONDS",
                    help=f"time budget per op, shared by its checks (default {DEFAULT_BUDGET:g}; ini: opcheck_budget)")
    group.addoption("--opcheck-workers", default=None, metavar="N",
                    help="check this many ops side by side, each in its own child process (default: the CPU count, "
                         "at most 4; 1 on a pytest-xdist worker, whose siblings already check theirs; "
                         "ini: opcheck_workers)")
    group.addoption("--opcheck-quick", action="store_true", default=None,
                    help="sweep only the edge variants (no random ones) and leave out the checks that compile with "
                         "Inductor: near torch.library.opcheck's time (ini: opcheck_quick)")
    group.addoption("--opcheck-fixed", action="append", default=None, metavar="NS::OP=ARG[,ARG]",
                    help="tensor arguments of an op the sweep must not resize (a lookup table, a codebook); "
                         "NS::OP= holds none fixed. Repeatable. Default: inferred from the recorded calls "
                         "(ini: opcheck_fixed, one per line; marker: @pytest.mark.opcheck_fixed(op, *args))")
    group.addoption("--opcheck-in-process", action="store_true", default=None,
                    help="check the ops in the pytest process itself, without crash isolation: a kernel that "
                         "crashes on a swept input then ends the session (ini: opcheck_in_process)")
    group.addoption("--opcheck-require-autograd", action="store_true", default=None,
                    help="a missing gradient formula is a failure, on every op checked (default: off: an op with "
                         "no autograd formula is reported as not differentiable, an info line, and the checks that "
                         "need gradients skip; a store entry \"require_autograd\" under an op turns it on for that "
                         "op; ini: opcheck_require_autograd)")
    parser.addini("opcheck", "record and check custom ops (as --opcheck)", type="bool", default=False)
    parser.addini("opcheck_namespaces", "op namespaces to record and check, comma-separated", default="")
    parser.addini("opcheck_store", "xfail store path, relative to rootdir", default="")
    parser.addini("opcheck_calls", "calls file path, relative to rootdir", default="")
    parser.addini("opcheck_checks", "checks to run, comma-separated (default all)", default="")
    parser.addini("opcheck_budget", "time budget per op in seconds", default="")
    parser.addini("opcheck_workers", "ops checked side by side (default: the CPU count, at most 4)", default="")
    parser.addini("opcheck_quick", "edge variants only, no Inductor compile (default false)", type="bool",
                  default=False)
    parser.addini("opcheck_fixed", "NS::OP=ARG[,ARG] per line: arguments held fixed", type="linelist", default=[])
    parser.addini("opcheck_in_process", "check ops in the pytest process (no crash isolation)", type="bool",
                  default=False)
    parser.addini("opcheck_require_autograd", "a missing gradient formula is a failure, on every op (default false)",
                  type="bool", default=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "opcheck_fixed(op, *args): symfuzz opcheck holds these tensor arguments "
                                       "of op fixed while it sweeps shapes")
    settings = _settings(config)
    if settings is not None:
        config.pluginmanager.register(OpcheckSession(config, settings), "symfuzz_opcheck_session")
