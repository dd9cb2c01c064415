"""`symfuzz report --issue FINDING`: one finding as an upstream bug report, in Markdown.

What a PyTorch issue needs, in the order a maintainer reads it: a title that says
what goes wrong, the short script (the minified one when there is one), what was
expected and what happened, the versions, and which layer of the compiler is at
fault. The machinery (the full judge, the signature) is named last.
"""

from __future__ import annotations

from pathlib import Path

from symfuzz.corpus.finding import Finding, FindingFormatError, read_finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.corpus.short_repro import JUDGE_NAME, render_short, short_repro_for, what_was_seen
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.model_case import ARCHS, is_model_case
from symfuzz.oracles.verdict import eager_side

# What each symptom means to a reader of the issue: (what compiled does, what was expected).
_SYMPTOMS = {
    "value-mismatch": ("returns wrong values", "the compiled function returns what eager returns"),
    "metadata-mismatch": ("returns a result of the wrong shape, dtype or structure",
                          "the compiled function returns what eager returns"),
    "gradient-mismatch": ("computes wrong gradients", "the compiled backward gives eager's gradients"),
    "crash": ("raises where eager runs", "the compiled function runs as eager does"),
    "accepts-invalid": ("returns a result where eager raises", "the compiled function raises as eager does"),
    "unsound-guard": ("reuses a graph compiled for other shapes, which is wrong for this call",
                      "a call that reuses a cached graph gets what a fresh compile gives"),
    "over-specialization": ("specializes a dim marked dynamic", "the marked dim stays dynamic"),
    "excess-recompiles": ("recompiles at a call its guards admit", "the call reuses the cached graph"),
    "unsound-recompile": ("recompiles at a call a cached graph's guards accept", "the call reuses that graph"),
    "fake-real-mismatch": ("traces metadata (a fake tensor's) that differs from the real result",
                           "fake tensors' sizes, strides and dtypes match eager's"),
    "process-death": ("kills the process", "the compiled function runs as eager does"),
    "timeout": ("hangs", "the compiled function returns in about eager's time"),
}


# The cheaper lanes triage runs a finding on, as a reader of the issue knows them.
_LANE_WORDS = {"eager": "backend='eager' (Dynamo alone)", "aot_eager": "backend='aot_eager' (Dynamo and AOTAutograd)"}


class IssueError(ValueError):
    """The path is not a finding that can be reported (one line for the user)."""


def issue_report(path) -> str:
    """The Markdown report of the finding at ``path`` (its folder or its finding.json)."""
    path = Path(path)
    file = path / "finding.json" if path.is_dir() else path
    if not file.exists():
        raise IssueError(f"{path} is not a finding (no finding.json there)")
    try:
        finding = read_finding(file)
        if is_model_case(finding.case):
            return _model_issue(finding, file.parent)
        case = Case.from_json(finding.case)
    except (FindingFormatError, ValueError, KeyError, TypeError) as exc:
        raise IssueError(f"{file} cannot be read as a finding: {exc}") from None
    folder = file.parent
    script, which = _script(finding, folder)
    verdict, lane, env = finding.verdict, finding.lane, finding.environment
    does, expected = _SYMPTOMS.get(verdict.symptom, (verdict.symptom, "compiled agrees with eager"))
    dynamic = {True: "dynamic=True", False: "dynamic=False", None: "automatic dynamic shapes"}.get(
        case.schedule.dynamic, "")
    error = getattr(verdict.evidence, "error", None)
    if verdict.symptom == "crash" and isinstance(error, dict) and error.get("type"):
        does = f"raises {str(error['type']).rsplit('.', 1)[-1]} where eager runs"
    title = f"torch.compile (backend={lane.get('backend')}, {dynamic}, {lane.get('device', 'cpu')}) {does}"
    layer = _layer(finding)
    side = eager_side(getattr(verdict.evidence, "detail", ""))
    if side is not None:  # eager's kernel left its op's shape rule, which compiled follows: the bug is eager's
        op, got, rule = side
        title = f"{op} in eager returns {got} where its meta function gives {rule}; torch.compile follows the meta function"
        expected = f"eager's {op} returns what its meta function gives ({rule}), as the compiled function does"
        layer = f"eager: the CPU kernel of {op}, not the compiler" if lane.get("device", "cpu") == "cpu" else \
            f"eager: the kernel of {op}, not the compiler"
    seen = what_was_seen(verdict, case) or verdict.symptom
    lines = [f"### {title}", "",
             f"The script below ({which}) needs only torch. It exits 1 while the bug is present, 0 once it is fixed.",
             "", "```python", script.rstrip(), "```", "",
             f"**Expected:** {expected}.", "", f"**Actual:** {seen}", "",
             f"**Layer at fault:** {layer}", "",
             "**Versions:** " + ", ".join(f"{name} {env[key]}" for name, key in (
                 ("torch", "torch"), ("git", "torch_git"), ("triton", "triton"), ("Python", "python"),
                 ("on", "platform")) if env.get(key)), "",
             f"<sub>Found by symfuzz (finding {verdict.signature}, lane {lane.get('name')}); "
             f"its full judge, with a float64 reference for rounding, is {JUDGE_NAME} beside repro.py.</sub>"]
    return "\n".join(lines) + "\n"


def _model_issue(finding: Finding, folder: Path) -> str:
    """A model finding's report: the architecture and the sizes in the title, the smallest script
    there is (a graph-level minified one, torch only, where the minifier cut one; else repro.py,
    torch and transformers: the short one where confirmation kept it, the judged one where not),
    expected and actual, the versions with transformers'."""
    case, verdict, lane, env = finding.case, finding.verdict, finding.lane, finding.environment
    config_class, model_class, _ = ARCHS[case["arch"]]
    does, expected = _SYMPTOMS.get(verdict.symptom, (verdict.symptom, "compiled agrees with eager"))
    if verdict.symptom == "lost-dynamism":
        does, expected = ("compiles the code after a graph break with static sizes",
                          "the graph after the break stays dynamic like the one before it")
    dynamic = {True: "dynamic=True", None: "automatic dynamic shapes"}.get(case.get("dynamic"), "")
    title = (f"torch.compile (backend={lane.get('backend')}, {dynamic}, {lane.get('device', 'cpu')}) {does} in "
             f"transformers' {model_class} at changing sizes")
    minified = folder / "minified" / "repro.py"
    short = short_repro_for(finding)  # None where confirmation found that it does not show the bug
    if minified.is_file():
        script, which = minified.read_text(errors="replace"), "minified by symfuzz to one compiled graph; torch only"
    elif (folder / "repro.py").is_file():
        script, which = (folder / "repro.py").read_text(errors="replace"), "symfuzz's repro; torch and transformers"
    elif short is not None:
        script, which = short, "symfuzz's repro, written from the finding; torch and transformers"
    else:
        script, which = render_repro(finding), "symfuzz's judged repro, written from the finding; torch and transformers"
    evidence = verdict.evidence.to_json() if verdict.evidence is not None else {}
    seen = evidence.get("detail") or str((evidence.get("error") or {}).get("message", verdict.symptom))[:300]
    lines = [f"### {title}", "",
             f"A randomly initialised {model_class} ({config_class} in the script, no weights downloaded) is called "
             f"through the sizes the script lists, on one compiled model. The script ({which}) exits 1 while "
             "the bug is present, 0 once it is fixed.", "", "```python", script.rstrip(), "```", "",
             f"**Expected:** {expected}.", "", f"**Actual:** at call {verdict.call_index}: {seen}", "",
             "**Versions:** " + ", ".join(f"{name} {env[key]}" for name, key in (
                 ("torch", "torch"), ("git", "torch_git"), ("transformers", "transformers"), ("triton", "triton"),
                 ("Python", "python"), ("on", "platform")) if env.get(key)), "",
             f"<sub>Found by symfuzz (finding {verdict.signature}, lane {lane.get('name')}).</sub>"]
    return "\n".join(lines) + "\n"


def _script(finding: Finding, folder: Path) -> tuple[str, str]:
    """(the script a reader should run, what it is): the minified short repro, the finding's short
    repro.py (a short repro.py has judge.py beside it), else one rendered from the finding's JSON
    (a folder written by an older symfuzz, or a finding.json alone)."""
    for where, which in ((folder / "minified", "minified by symfuzz"), (folder, "symfuzz's repro")):
        if (where / "repro.py").is_file() and (where / JUDGE_NAME).is_file():
            return (where / "repro.py").read_text(errors="replace"), which
    short = render_short(finding)
    if short is not None:
        return short, "symfuzz's repro, written from the finding: run it to see that it fails"
    return render_repro(finding), "symfuzz's judged repro: it prints what it compares"


def _layer(finding: Finding) -> str:
    """Which compiler layer is at fault, from the finding's triage (the same case on cheaper lanes)."""
    triage = finding.triage or {}
    stage = triage.get("stage") or finding.verdict.stage
    lanes = triage.get("lanes") or {}
    passed = sorted(_LANE_WORDS.get(name, name) for name, result in lanes.items() if result == "pass")
    failed = sorted(_LANE_WORDS.get(name, name) for name, result in lanes.items() if result != "pass")
    why = []
    if passed:
        why.append(f"the same program passes on {' and '.join(passed)}")
    if failed:
        why.append(f"it fails with {' and '.join(failed)} too")
    return f"{stage}" + (f" ({'; '.join(why)})" if why else "")
