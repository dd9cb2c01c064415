"""The minifier keeps a death where it happened: a planted segfault shrinks to the op that
segfaults, and never into another death by the same signal (corpus/deaths.py)."""

from __future__ import annotations

from conftest import planted_env
from test_signatures import EAGER, case_of, died

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.store import FindingStore
from symfuzz.minifier.criteria import same_failure
from symfuzz.minifier.run import MinifyOptions, finding_failure_id, minify_finding
from symfuzz.oracles.verdict import Died, Verdict

# cos dies while compiling (the backend); exp compiles, then dies when its graph is called.
PLANTS = "segfault-cos,segfault-exp-at-run"


def test_a_planted_segfault_minifies_to_its_op_and_never_into_another_death(tmp_path):
    # The graph holds exp and cos, so it dies compiling at cos. Without cos, the same program
    # still dies by SIGSEGV, in exp's compiled forward: another bug, which must not be kept.
    case = case_of(["exp", "cos", "tanh"], shapes=((5, 6), (7, 6)))
    outcome = died(case, PLANTS, tmp_path)
    assert outcome.place["phase"] == "compiling"
    evidence = Died(cause="SIGSEGV", returncode=-11, **outcome.place)
    verdict = Verdict(ok=False, oracle="isolation", symptom="process-death", stage="unknown",
                      signature=outcome.signature, evidence=evidence)
    finding = Finding(case=case.to_json(), verdict=verdict, lane=EAGER.to_json())
    store = FindingStore(tmp_path / "findings")
    store.add(finding)
    folder = store.path(finding.signature)
    result = minify_finding(folder, MinifyOptions(budget=400, jobs=2, env=planted_env(PLANTS)), lambda m: None)
    ops = result.best.case.program.ops()
    assert ops == ["cos"], result.best.case.source


def test_failure_ids_of_deaths_match_by_place_and_allow_a_kernel_to_lose_fused_ops():
    kernel = "process-death:SIGSEGV@compiled forward|<kernel cpp_fused_cos_mul> < torch/_inductor/output_code.py:__call__"
    fewer_ops = kernel.replace("cpp_fused_cos_mul", "cpp_fused_cos")
    other_op = kernel.replace("cpp_fused_cos_mul", "cpp_fused_exp")
    backward = kernel.replace("compiled forward", "compiled backward")
    assert same_failure(kernel, kernel) and same_failure(kernel, fewer_ops)
    assert not same_failure(kernel, other_op) and not same_failure(kernel, backward)
    assert not same_failure(kernel, kernel.replace("SIGSEGV", "SIGABRT"))
    assert not same_failure(kernel, "process-death:SIGSEGV")  # where it died is unknown: not the same


def test_a_stored_death_names_its_place_in_the_failure_id():
    place = {"phase": "compiling", "frames": ["sitecustomize.py:crashing_backend", "torch/__init__.py:__call__"]}
    verdict = Verdict(ok=False, oracle="isolation", symptom="process-death", signature="process-death-0123456789",
                      evidence=Died(cause="SIGSEGV", **place))
    finding = Finding(case={}, verdict=verdict, lane=EAGER.to_json())
    assert finding_failure_id(finding) == ("process-death:SIGSEGV@compiling|sitecustomize.py:crashing_backend < "
                                           "torch/__init__.py:__call__")
