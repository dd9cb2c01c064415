"""The sweep stops on information, not on time, and --quick keeps catching.

Counts only, never seconds: how fast it is shows in benchmarks/opcheck.py.
"""

import torch
from opcheck_ops import buggy, correct

import symfuzz.opcheck as opcheck
from symfuzz.cli import main
from symfuzz.opcheck.api import PATIENCE
from symfuzz.opcheck.checks.common import make_template
from symfuzz.opcheck.plugin_settings import _settings
from symfuzz.opcheck.task import Task
from symfuzz.opcheck.variants import Novelty, Sweep, Variant, info_key, search

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

FAR = float("inf")  # no deadline: a stop here is the information's doing


def _sweep(*shapes):
    args = tuple(torch.randn(*s) for s in shapes)
    return Sweep(make_template(torch.ops.aten.add.Tensor, args, {}) if len(args) == 2 else
                 make_template(torch.ops.aten.neg.default, args, {}), seed=0)


class Recording:
    """A judge that passes every input and remembers them."""

    def __init__(self):
        self.cases = []

    def __call__(self, case):
        self.cases.append(case)
        return None


def test_an_edge_that_brings_nothing_new_is_not_judged():
    sw = _sweep((4, 8))
    judge = Recording()
    # (5, 9) and (7, 11): both sizes odd, unequal, not 1: the second shows nothing the first did not.
    found = search(judge, sw, deadline=FAR, examples=0, novelty=Novelty(PATIENCE),
                   variants=[Variant((5, 9), seed=1), Variant((7, 11), seed=1), Variant((1, 9), seed=1)])
    assert (found.tried, found.skipped) == (2, 1)
    assert [tuple(c.inputs[0].shape) for c in judge.cases] == [(5, 9), (1, 9)]


def test_without_novelty_every_edge_is_judged():
    judge = Recording()
    found = search(judge, _sweep((4, 8)), deadline=FAR, examples=0,
                   variants=[Variant((5, 9), seed=1), Variant((7, 11), seed=1)])
    assert (found.tried, found.skipped) == (2, 0)


def test_random_variants_stop_after_patience_inputs_with_nothing_new():
    sw = _sweep((4, 8))
    judge = Recording()
    novelty = Novelty(PATIENCE)
    found = search(judge, sw, deadline=FAR, examples=200, novelty=novelty)
    assert found.failure is None and found.stopped and not found.out_of_time
    assert found.tried < 200  # far fewer than the examples it was allowed
    # The last PATIENCE inputs judged brought no feature the ones before them had not.
    before = set().union(*(info_key(c) for c in judge.cases[:-PATIENCE]))
    assert all(info_key(c) <= before for c in judge.cases[-PATIENCE:])
    assert novelty.stale == PATIENCE


def test_without_patience_the_random_variants_run_to_their_count():
    judge = Recording()
    stopped = search(judge, _sweep((4, 8)), deadline=FAR, examples=30, novelty=Novelty(PATIENCE))
    judge = Recording()
    legacy = search(judge, _sweep((4, 8)), deadline=FAR, examples=30, novelty=Novelty(None))
    assert not legacy.stopped and legacy.tried > stopped.tried


def test_a_new_guard_is_new_information():
    case = _sweep((4, 8)).case(Variant((5, 9), seed=1))
    novelty = Novelty(PATIENCE)

    class Guarding:
        last_info = {("guard", "Eq(x0.size(1), 9)")}

    assert novelty.add(case)
    assert not novelty.add(case)  # the same input again: nothing new
    assert novelty.add(case, Guarding())  # the same sizes, but the trace installed a guard not seen before
    assert novelty.stale == 0


def test_a_check_learns_only_its_own_kinds_of_feature():
    sw = _sweep((4, 8))
    novelty = Novelty(PATIENCE, learns=("size", "relations", "rank"))
    novelty.add(sw.case(Variant((5, 9), seed=1)))
    # Another dtype or layout is information to a fake kernel at concrete sizes, not to a symbolic trace.
    assert not novelty.is_new(sw.case(Variant((5, 9), dtypes=(("float32", "int64"),), seed=1)))
    assert not novelty.is_new(sw.case(Variant((5, 9), layouts=("transposed",), seed=1)))
    assert novelty.is_new(sw.case(Variant((1, 9), seed=1)))
    assert Novelty(PATIENCE).is_new(sw.case(Variant((5, 9), dtypes=(("float32", "int64"),), seed=1)))


def test_a_dtype_of_a_class_already_seen_is_nothing_new():
    sw = _sweep((4, 8))
    keys = {d: info_key(sw.case(Variant((4, 8), dtypes=(("float32", d),), seed=1)))
            for d in ("int64", "int32", "int16", "float16", "bfloat16")}
    assert keys["int32"] == keys["int16"] != keys["int64"]
    assert keys["float16"] == keys["bfloat16"]


def test_the_sweep_judges_fewer_inputs_than_before_and_still_passes_a_correct_op():
    args, kwargs = correct.SAMPLES["scaled_add"]
    new = opcheck.check(correct.OPS["scaled_add"], [(args, kwargs)], checks=["faketensor", "symbolic_fake"])
    old = opcheck.check(correct.OPS["scaled_add"], [(args, kwargs)], checks=["faketensor", "symbolic_fake"],
                        _legacy=True)
    assert new.ok and old.ok, new.format(repro=False)
    for name in ("faketensor", "symbolic_fake"):
        assert new.results[name].inputs_tried < old.results[name].inputs_tried, name
        assert new.results[name].inputs_skipped > 0 and old.results[name].inputs_skipped == 0
    assert "time budget ran out" not in " ".join(new.results["faketensor"].notes)


def test_quick_still_catches_a_planted_bug_and_leaves_out_inductor():
    args, kwargs = buggy.SAMPLES["half_cols"]
    report = opcheck.check(buggy.OPS["half_cols"], [(args, kwargs)], quick=True,
                           checks=["faketensor", "inductor_dynamic"])
    assert ("faketensor", "wrong-shape") in [(f.check, f.kind) for f in report.failures]
    inductor = report.results["inductor_dynamic"]
    # Skipped because faketensor failed (a prerequisite) or because of --quick: either way, no compile.
    assert inductor.status == "skipped" and inductor.inputs_tried == 0


def test_quick_judges_the_edges_only_and_says_why_inductor_is_left_out():
    args, kwargs = correct.SAMPLES["scaled_add"]
    report = opcheck.check(correct.OPS["scaled_add"], [(args, kwargs)], quick=True,
                           checks=["faketensor", "aot_dispatch_dynamic", "inductor_dynamic"])
    assert report.ok, report.format(repro=False)
    assert "--quick" in report.results["inductor_dynamic"].reason
    assert report.results["aot_dispatch_dynamic"].inputs_tried == 1  # the sample, as torch.library.opcheck
    full = opcheck.check(correct.OPS["scaled_add"], [(args, kwargs)], checks=["faketensor"])
    assert report.results["faketensor"].inputs_tried < full.results["faketensor"].inputs_tried


def test_the_command_takes_quick(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["opcheck", "symfuzz_buggy::half_cols", "--quick", "--checks", "faketensor,inductor_dynamic",
                 "--in-process", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 1 and "FAIL faketensor [wrong-shape]" in out


def test_the_task_carries_quick_to_the_child():
    assert Task(ops=["a::b"], quick=True).quick and not Task(ops=["a::b"]).quick


class _Config:
    """Just enough of pytest's config for the plugin's settings: command-line options, no ini."""

    def __init__(self, tmp_path, **options):
        self.rootpath, self.options = tmp_path, options

    def getoption(self, name):
        return self.options.get(name)

    def getini(self, name):
        return [] if name == "opcheck_fixed" else ""


def test_the_plugin_takes_quick(tmp_path):
    on = _settings(_Config(tmp_path, opcheck=True, opcheck_namespaces="mylib", opcheck_quick=True))
    off = _settings(_Config(tmp_path, opcheck=True, opcheck_namespaces="mylib"))
    assert on.quick and not off.quick


def test_quick_traces_aot_as_torch_library_opcheck_does(monkeypatch):
    """Under --quick the AOT check takes the sample as given (its own requires_grad), as
    torch.library.opcheck does; the default makes every floating input require grad."""
    from torch.testing._internal.optests import generate_tests

    seen = []

    def record(op, args, kwargs, dynamic):
        seen.append([a.requires_grad for a in args if isinstance(a, torch.Tensor)])

    monkeypatch.setattr(generate_tests, "safe_aot_autograd_check", record)
    op = correct.OPS["scaled_add"]
    args, kwargs = correct.SAMPLES["scaled_add"]
    assert not any(a.requires_grad for a in args if isinstance(a, torch.Tensor))
    opcheck.check(op, [(args, kwargs)], quick=True, checks=["aot_dispatch_dynamic"])
    assert seen == [[False, False]]
    seen.clear()
    wants_grad = tuple(a.detach().requires_grad_() if n == 0 else a for n, a in enumerate(args))
    opcheck.check(op, [(wants_grad, kwargs)], quick=True, checks=["aot_dispatch_dynamic"])
    assert seen == [[True, False]]
    seen.clear()
    opcheck.check(op, [(args, kwargs)], checks=["aot_dispatch_dynamic"], sweep=False)
    assert seen == [[True, True]]
