"""A finding's short ``repro.py``: the bug in a screenful, for a person to read and paste upstream.

It holds what an upstream bug report needs and nothing else: the program, each
call's inputs on one line, the marks and flags, one ``torch.compile``, and plain
checks a reader knows (``torch.testing.assert_close`` at the dtype's tolerance,
exact equality for integers and bools, the error the compiled call raises). It
raises while the bug is present (exit 1) and prints a line once it is fixed. Its
few helpers (``fuzz/plain_runtime.py``, a dozen lines) come after the program.

The full judge stays in ``judge.py``, written beside it (``scripts.render_repro``):
the tolerance table with its float64 reference, rounding's explainer and the
finding's signature. Confirmation, ``symfuzz replay`` and ``--reference-python``
run that one, so verdicts and signatures do not depend on this script. Where the
plain checks could disagree with it (a rounding difference that the float64
reference forgives), the script says so and ``judge.py`` decides.

Confirmation runs it in a fresh process too. One that met another error first
keeps its place, and its docstring names that error and points to judge.py; one
that passed (only the float64 reference shows the bug) gives way to the judged
script. A module program gets two models built alike (the same seeded parameters and
buffers), one compiled, and its state is checked after each call too; with a
training step, each side has its optimizer and steps on the gradients checked.
Findings this cannot show plainly get no short script (``render_short`` returns
None) and their ``repro.py`` is the judged script itself: torch.export and
Triton-interpreter lanes, other devices, and symptoms judged from the compiler's
bookkeeping (recompiles, guards, fake tensors).
"""

from __future__ import annotations

import re
import textwrap
from typing import Optional

from symfuzz.corpus.model_short import COMPILED_LINE as MODEL_COMPILED_LINE
from symfuzz.corpus.model_short import render_model_short
from symfuzz.corpus.scripts import Helpers, compile_config_lines, docstring_text, mark_lines, what_failed
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.model_case import is_model_case
from symfuzz.fuzz.ir import PRELUDE as PROGRAM_GLOBALS
from symfuzz.fuzz.ir import EffectNode
from symfuzz.fuzz.size_forms import required_config
from symfuzz.fuzz.specs import required_dynamo_config
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT
from symfuzz.oracles.lanes.lane import CACHE_SETTINGS
from symfuzz.oracles.verdict import eager_side, error_headline

PLAIN_RUNTIME = "symfuzz.fuzz.plain_runtime"
JUDGE_NAME = "judge.py"  # the full judged script, beside the short repro.py
# Symptoms a compile and a comparison with eager show: the rest need the judge's bookkeeping.
SHORT_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "crash", "accepts-invalid",
                  "unsound-guard", "process-death", "timeout")
# What confirmation records (corpus/replay.py) when the short repro, run fresh, fails as the finding does.
SHORT_SHOWS = "shows the bug"
OTHER_FAILURE = "it failed otherwise:"  # short_mismatch's words for a run that met another error first
# Where a minified script's plain checks and symfuzz's judge could differ (rounding), said where they are made.
JUDGE_NOTE = "  # judge.py beside this file decides rounding cases"
PROGRAM_MARKER = "# ---------------------------------------------------------------- the program"
# The errors by which torch refuses a call's own marks or flags (``fuzz/runtime/comparing.rejection``):
# raised by Dynamo itself, not wrapped in a backend's failure. The judge goes on past them.
REFUSAL_IMPORTS = ["from torch._dynamo.exc import UserError",
                   "from torch.fx.experimental.symbolic_shapes import ConstraintViolationError, GuardOnDataDependentSymNode"]
REFUSALS = "(ConstraintViolationError, UserError, GuardOnDataDependentSymNode)"


def short_repro_for(finding) -> Optional[str]:
    """The short repro.py to store for a finding: None where there is none, or where confirmation ran
    it (``corpus/replay.py``) and it did not fail at all. One that failed otherwise (another error came
    first) is kept, and says so: a reader still sees the program and its calls in a screenful, and
    judge.py beside it shows the bug."""
    checked = (finding.confirmation or {}).get("short_repro")
    if not checked or checked.startswith(SHORT_SHOWS):
        return render_short(finding)
    other = checked.split(OTHER_FAILURE, 1)
    if len(other) < 2:
        return None  # it passed, or ran past the time limit: only the judge shows this bug
    return render_short(finding, caveat=f"Run in a fresh process, this script failed with another error first: "
                                        f"{other[1].strip()}. judge.py beside it shows the bug: python judge.py")


def shown_plainly(verdict, lane: dict, case) -> bool:
    """Can a short script show this finding (else its repro.py is the judged script)?"""
    return (verdict.symptom in SHORT_SYMPTOMS and not lane.get("runner") and not lane.get("setup")
            and lane.get("device", "cpu") == "cpu")


def render_short(finding, minified: bool = False, caveat: str = "") -> Optional[str]:
    """The short repro of a fuzz finding (``corpus.finding.Finding``; ``minified``: the minifier's
    smallest case of one), or None where it needs the judge. ``caveat``: a paragraph for its docstring."""
    verdict, lane = finding.verdict, finding.lane
    if is_model_case(finding.case):
        return render_model_short(finding)  # torch and transformers: the architecture, its config, the calls
    case = Case.from_json(finding.case)
    if not shown_plainly(verdict, lane, case):
        return None
    calls = case.schedule.calls
    if verdict.call_index is not None:
        calls = calls[: verdict.call_index + 1]  # the calls after the failing one change nothing
    compile_args = f"backend={lane['backend']!r}, dynamic={case.schedule.dynamic!r}"
    if lane.get("mode"):
        compile_args += f", mode={lane['mode']!r}"
    module = bool(case.program.params)
    grads = (any(a.requires_grad for c in calls for a in c.args)
             or any(p.trainable for p in case.program.params))  # a module's gradients are its parameters' too
    out = [_docstring(finding, case, compile_args, len(calls), minified, caveat)]
    # The lane's settings that keep Inductor's caches off become one: force_disable_caches. (Caches stay
    # off: a kernel cached by a run with the bug would stand in for the compile of a run without it.)
    env = {k: v for k, v in (lane.get("env") or {}).items() if k not in CACHE_SETTINGS}
    config = {k: v for k, v in (lane.get("config") or {}).items() if k not in CACHE_SETTINGS}
    caches_off, options = len(config) < len(lane.get("config") or {}), ""
    if minified and lane["backend"] == "inductor":
        # A bug report's compile line: Inductor's settings as torch.compile's options. The caches stay off
        # for the whole process (Dynamo's profile cache too), so that one is a global setting.
        options = f", options={config!r}" if config else ""
        config = {}
    elif caches_off:
        config["force_disable_caches"] = True
    if env:
        out += ["import os", "", *(f"os.environ[{k!r}] = {v!r}" for k, v in sorted(env.items())), ""]
    source, param_makers = _plain_params(case.source.strip())
    # fuzz.ir.PRELUDE's imports (math, torch, F), those the program uses
    out += [line for line in PROGRAM_GLOBALS.strip().splitlines()
            if line == "import torch" or f"{line.split()[-1]}." in source]
    out += compile_config_lines({**lane, "config": config}, case.schedule)
    step = case.schedule.step if grads else None  # a training step (one without gradients changes nothing)
    refusals = _refusals_pass(verdict, case, step)
    if refusals:
        out += REFUSAL_IMPORTS
    if minified and caches_off:
        out.append("torch.compiler.config.force_disable_caches = True  # compile afresh: no cached kernel stands in")
    out += ["", *([] if minified else [PROGRAM_MARKER]), source, "", ""]
    kinds = {_maker(a) for c in calls for a in c.args if not a.scalar} | param_makers
    helpers = Helpers().pieces(PLAIN_RUNTIME, sorted(kinds) + ["check"] + (["gradients"] if grads else [])
                               + (["make_optimizer", "train_step"] if step else []))
    out += [helpers.text("\n".join(out)).strip("\n"), "", "",
            "CALLS = [  # each call's arguments: tensors from a seeded generator",
            *(f"    lambda: [{', '.join(_argument(a) for a in call.args)}]," for call in calls), "]"]
    if module:
        out += ["eager, model = Model(), Model()  # built alike: the same seeded parameters and buffers",
                f"compiled = torch.compile(model, {compile_args}{options})"]
        if step:  # each call is one training step: forward, the seeded loss's gradients, the optimizer's step
            how = ", ".join(repr(step[k]) for k in ("optimizer", "lr", "momentum") if k in step)
            out.append(f"eager_optimizer, optimizer = make_optimizer(eager, {how}), make_optimizer(model, {how})")
    else:
        out.append(f"compiled = torch.compile(fn, {compile_args}{options})")
    out.append("for i, make in enumerate(CALLS):")
    marks = [mark_lines(call) + _mode_lines(case, i) for i, call in enumerate(calls)]
    inputs_judged = _writes_in_place(case.program) or str(getattr(verdict.evidence, "path", "")).startswith("out[1]")
    eager = "eager" if module else "fn"
    if minified and not (module or grads or any(marks) or inputs_judged or verdict.symptom == "accepts-invalid"):
        # (The minifier keeps this only where a run of it shows the bug: minifier/compact.py.)
        # Nothing but the outputs to compare: each side gets fresh inputs, the fewest lines a reader needs.
        return re.sub(r"\n{3,}", "\n\n", "\n".join([
            *out, "    expected = fn(*make())", '    check(f"call {i}: outputs", compiled(*make()), expected)' + JUDGE_NOTE,
            'print("compiled matches eager at every call")', ""]))
    out.append("    eager_args, args = make(), make()")
    out += _per_call_lines(marks)
    if len(calls) > 1 or verdict.symptom == "accepts-invalid":
        # A schedule may hold calls eager refuses (an invalid shape, on purpose): compiled must raise as well,
        # and then the two agree, as the judge has it (fuzz/runtime/comparing.judge_call). (At the failing
        # call itself only an accepts-invalid finding's eager raises.)
        out += ["    try:", f"        expected = {eager}(*eager_args)",
                "    except Exception as error:  # compiled must raise too",
                "        try:", "            compiled(*args)", "        except Exception:", "            continue"]
        dead = sorted(i for i in (finding.triage or {}).get("dead_code_calls") or () if i < len(calls) - 1)
        if dead:  # the oracle passed over these calls (oracles/crash.py dead_code_calls), and judge.py does
            out += [f"        if i in {tuple(dead)!r}:  # eager raised in code nobody reads, which compiled may drop",
                    "            continue"]
        out.append('        raise AssertionError(f"call {i}: compiled returned where eager raised {error!r}")')
    else:
        out.append(f"    expected = {eager}(*eager_args)")
    if grads:
        out += _gradient_lines("expected_grads = gradients(expected, ", "eager_args", "eager" if module else "")
    if step:
        out.append("    train_step(eager_optimizer, eager, expected_grads)")
    if refusals:
        out += ["    try:", "        actual = compiled(*args)",
                f"    except {REFUSALS} as refused:",
                '        print(f"call {i}: torch refused its marks or flags ({type(refused).__name__}); judge.py goes on too")',
                "        continue"]
    else:
        out.append("    actual = compiled(*args)")
    if grads:
        out += _gradient_lines("actual_grads = gradients(actual, ", "args", "model" if module else "")
    if step:
        out.append("    train_step(optimizer, model, actual_grads)")
    out.append('    check(f"call {i}: outputs", actual, expected)' + (JUDGE_NOTE if minified else ""))
    if inputs_judged:
        out.append('    check(f"call {i}: inputs after the call", args, eager_args)')
    if grads:
        out.append('    check(f"call {i}: gradients", actual_grads, expected_grads)')
    if module:  # parameters and buffers: a buffer's running statistics, a step's updated weights
        out.append('    check(f"call {i}: the model\'s state", [*model.state_dict().values()], '
                   '[*eager.state_dict().values()])')
    out += ['print("compiled matches eager at every call")', ""]
    # Pasted into a bug report whole: one blank line between its parts.
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out))


def _refusals_pass(verdict, case, step) -> bool:
    """Does the short script go on past a call torch refuses (``REFUSALS``), as the judge does?

    Only where a call before the failing one can be refused, so that a reader of any other
    finding is spared the lines: torch refuses a dim marked dynamic that the program must
    specialize (``ConstraintViolationError``), and a guard Dynamo itself must make on an
    unbacked size (``GuardOnDataDependentSymNode``, ``UserError``). So some call before the
    failing one is marked, or the program has unbacked sizes: it reads values into sizes
    (``.item()``, ``nonzero``), or recompiles make dims unbacked. The judge then calls the next
    call; the script must too, or it stops at a refusal, short of the bug. Not for an
    over-specialization finding, which is such an error, nor for a training step, whose eager
    side has stepped already."""
    if verdict.symptom == "over-specialization" or step is not None or verdict.call_index in (None, 0):
        return False
    marked = any(arg.marks for call in case.schedule.calls[: verdict.call_index] for arg in call.args)
    dynamo = (case.schedule.config or {}).get("dynamo") or {}
    unbacked = (dynamo.get("automatic_dynamic_shapes_mark_as") == "unbacked"
                or bool(required_dynamo_config(case.program)) or bool(required_config(case.program)))
    return marked or unbacked


def _per_call_lines(per_call: list) -> list[str]:
    """The loop's lines that only some calls run (marks, a mode switch): one ``if`` per distinct block,
    naming every call that runs it."""
    calls_of: dict = {}
    for i, lines in enumerate(per_call):
        if lines:
            calls_of.setdefault(tuple(lines), []).append(i)
    out = []
    for lines, calls in calls_of.items():
        test = f"i == {calls[0]}" if len(calls) == 1 else f"i in {tuple(calls)!r}"
        out += [f"    if {test}:", *(f"        {line}" for line in lines)]
    return out


def _gradient_lines(start: str, args: str, model: str) -> list[str]:
    """The loop's lines that take the gradients for ``args`` (the inputs that require grad), then
    for ``model``'s trainable parameters (a module program's), in the judge's order."""
    wanted = f"[a for a in {args} if getattr(a, 'requires_grad', False)]"
    if not model:
        return [f"    {start}{wanted})"]
    return [f"    {start}{wanted}", f"    {' ' * len(start)}+ [p for p in {model}.parameters() if p.requires_grad])"]


# A module's parameter or buffer made from a seed, as fuzz/ir.py renders it.
_PARAM_INPUT = re.compile(r"make_input\((\([\d, ]*\)), torch\.(\w+), (\d+)\)")


def _plain_params(source: str) -> tuple[str, set]:
    """A module program's source with its seeded parameters and buffers made by the short script's
    own helpers (randn, seeded) instead of the judge's make_input; (source, the helpers it needs)."""
    used = set()

    def plain(match):
        maker = _maker_of(match[2])
        used.add(maker)
        return f"{maker}({match[1]}, torch.{match[2]}, {match[3]})"

    return _PARAM_INPUT.sub(plain, source), used


def _mode_lines(case, index: int) -> list[str]:
    """A module program's switch to train or eval mode before call ``index`` (a new model trains;
    a call whose ``training`` is None keeps the mode it finds)."""
    if not case.program.params:
        return []
    mode = True
    for call in case.schedule.calls[:index]:
        mode = mode if call.training is None else call.training
    wanted = case.schedule.calls[index].training
    if wanted is None or wanted == mode:
        return []
    return [f"eager.train({wanted})", f"model.train({wanted})"]


def _writes_in_place(program) -> bool:
    """Does the program write to a tensor in place (an input, or a view of one, may change)?"""
    return (any(isinstance(node, EffectNode) for node in program.body)
            or re.search(r"\.[A-Za-z0-9]\w*_\(|\]\s*=[^=]", program.render()) is not None)


def _docstring(finding, case, compile_args: str, ncalls: int, minified: bool, caveat: str = "") -> str:
    verdict = finding.verdict
    at = f", at call {verdict.call_index} of {ncalls}" if verdict.call_index is not None and ncalls > 1 else ""
    seen = what_was_seen(verdict, case)
    if minified:
        # What the finding saw was seen on its own program, before the minifier shrank it: said as such.
        lines = [f"{what_failed(verdict)} under torch.compile({compile_args}) on cpu{at}."]
        seen = f", which saw: {seen[0].lower()}{seen[1:].rstrip('.')}." if seen else "."
        lines += textwrap.wrap(f"Minified by symfuzz from finding {verdict.signature} (torch "
                               f"{finding.environment.get('torch')}){seen} Exits 1 while the bug is present.", 100)
        return '"""' + docstring_text("\n".join(lines)) + '"""'
    lines = [f"{what_failed(verdict)} under torch.compile({compile_args}) on cpu{at}{':' if seen else '.'}"]
    if seen:
        lines += textwrap.wrap(seen, 96)
    if verdict.symptom == "unsound-guard":
        lines += ["The failing call ran a graph compiled for earlier calls; a fresh compile at its shapes is right."]
    elif verdict.symptom in ("process-death", "timeout"):
        lines += ["The process " + ("dies" if verdict.symptom == "process-death" else "hangs") + " in that call."]
    torch_version = finding.environment.get('torch')
    lines += ["", f"symfuzz finding {verdict.signature}, torch {torch_version}. Exits 1 while the bug is present;",
              "judge.py beside it (symfuzz's full judge: float64 reference, signature) decides if they differ."]
    if caveat:
        lines += ["", *textwrap.wrap(caveat, 96)]
    return '"""' + docstring_text("\n".join(lines)) + '\n"""'


def what_was_seen(verdict, case) -> str:
    """What the compiled side did, in one line for a reader ("" when the verdict says nothing more)."""
    evidence = verdict.evidence
    error = getattr(evidence, "error", None)
    if isinstance(error, dict):
        raised = f"{error.get('type', 'an error')}: {error_headline(error.get('message'))}"
        if verdict.symptom == "accepts-invalid":  # the error is eager's: the compiled call returned
            # (the detail says more only where an eager kernel left its op's shape rule: oracles/eager_meta.py)
            why = getattr(evidence, "detail", "")
            more = f" But {why}." if eager_side(why) else ""
            return f"Eager raised {raised}; compiled returned a result.{more}"
        return f"Compiled raised {raised}"
    path, detail = getattr(evidence, "path", None), getattr(evidence, "detail", "")
    if detail:
        return f"At {_place(path, case)}: {detail}" if path else f"Compiled: {detail}"
    return ""


def _place(path: str, case) -> str:
    """A judged path (``script_runtime.flatten`` over (outputs, inputs after the call, gradients, and a
    module's state after the call)) in words."""
    match = re.fullmatch(r"out\[(\d+)\]\[(\d+)\](.*)", path)
    if match is None:
        return path
    part, k, rest = int(match[1]), int(match[2]), match[3]
    program, calls = case.program, case.schedule.calls
    if part == 1:
        names = [i.name for i in program.inputs]
    elif part == 2:  # the inputs that require grad, then a module's trainable parameters
        names = [i.name for i, a in zip(program.inputs, calls[0].args if calls else ()) if a.requires_grad]
        names += [f"self.{p.name}" for p in program.params if p.trainable]
    elif part == 3:  # a module's state_dict: its parameters, then its buffers
        names = [f"self.{p.name}" for kind in ("parameter", "buffer") for p in program.params if p.kind == kind]
    else:  # an output: named by its place
        names = []
    name = names[k] if k < len(names) else str(k)
    return {0: f"output {k}{rest}", 1: f"input {name}{rest} after the call (written in place)",
            2: f"the gradient for {name}{rest}", 3: f"the model's {name}{rest} after the call"}.get(part, path)


def _maker(arg) -> str:
    """The plain_runtime function that makes a tensor argument."""
    return _maker_of(arg.dtype)


def _maker_of(dtype: str) -> str:
    """The plain_runtime function that makes a tensor of ``dtype``: randn for floats, seeded for the rest."""
    return "randn" if DTYPE_KIND.get(dtype) == FLOAT else "seeded"


def _argument(arg) -> str:
    """An argument as one expression: a literal, or ``seeded(...)`` laid out as symfuzz laid it out."""
    if arg.scalar:  # a Python number or int list (Case.from_json checked it)
        if arg.scalar == "ints":
            return repr([int(v) for v in arg.value])
        return repr({"int": int, "float": float, "bool": bool}[arg.scalar](arg.value))
    # deferred: the runtime imports torch, which the store (importing this module) must not need to load
    from symfuzz.fuzz.script_runtime import base_shape, normal_layout

    rank = len(arg.shape)
    layout = normal_layout(arg.layout, rank)
    base = tuple(int(n) for n in base_shape(arg.shape, layout))
    # ints and a dtype's name only (Case.from_json checked them): nothing from a file is pasted as code
    expr = f"{_maker(arg)}({base!r}, torch.{str(arg.dtype)}, {int(arg.seed)})"
    kind = layout.get("kind", "contiguous")
    if kind == "transposed":
        a, b = (int(d) for d in layout["dims"])
        expr += f".transpose({a}, {b})"
    elif kind in ("strided", "sliced"):
        dim = int(layout["dim"]) % rank
        step = f"::{int(layout['step'])}" if kind == "strided" else "1::2"
        expr += "[" + ":, " * dim + step + "]"
    elif kind == "expanded":
        expr += f".expand({tuple(int(n) for n in arg.shape)!r})"
    return expr + (".requires_grad_()" if arg.requires_grad else "")


# A traceback's exception line: "pkg.module.SomeError: message" (or no message), unindented, a class name last.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:?$)")
# The short repro's lines that run the compiled function: a crash must come out of one of them.
_COMPILED_LINES = ("actual = compiled(*args)", "actual_grads = gradients(actual", "compiled(*args)", "compiled(*make())",
                   MODEL_COMPILED_LINE)


def short_mismatch(finding, code: Optional[int], out: str, exceeded: bool = False) -> Optional[str]:
    """None when a run of the short repro (exit ``code``, None past the time limit; output ``out``;
    ``exceeded``: killed past the memory limit) shows the finding's failure; else what it showed
    instead, in a few words. The script prints no signature: this checks what a reader would, the
    error that ended it and the call it names."""
    verdict, evidence = finding.verdict, finding.verdict.evidence
    lines = [line for line in out.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if code is None:
        return "it ran past the time limit"
    if verdict.symptom == "process-death":
        died = exceeded if getattr(evidence, "out_of_memory", False) else code < 0 or code > 128
        return None if died else f"it did not die (exit {code}): {last[:200]}"
    if code != 1:
        return f"exit {code}: {last[:200]}"
    # The exception that ended it: the first exception line of the traceback's last block (the
    # message's later lines, a wrapped error's own, and Dynamo's hints follow it).
    block = out.rsplit("Traceback (most recent call last):", 1)[-1]
    raised = next((line for line in block.splitlines() if _EXCEPTION_LINE.match(line)), "")
    own_check = re.match(r"AssertionError: call (\d+): ", raised)
    error = getattr(evidence, "error", None)
    if verdict.symptom == "accepts-invalid":
        shown = own_check is not None and "compiled returned where eager raised" in raised
    elif isinstance(error, dict):  # the compiled call raised this error
        name = str(error.get("type", "")).rsplit(".", 1)[-1]
        shown = (bool(name) and name in raised.split(":")[0] and own_check is None
                 and any(line in block for line in _COMPILED_LINES))
    else:  # a check failed, at the finding's call
        shown = own_check is not None and verdict.call_index in (None, int(own_check[1]))
    return None if shown else f"{OTHER_FAILURE} {(raised or last)[:200]}"
