"""Every standalone script symfuzz writes, rendered in one place.

The scripts need only torch, and each is built from the same pieces:

- one head (``prelude``): the docstring, the environment (set before torch
  is imported), the imports;
- the script's own body, kept as code in a module of its own
  (``body_repro``, ``body_symbolic``, ``body_graph``),
  pasted with the finding's values in place of its placeholders
  (``corpus.linker.module_body``);
- the runtime the script carries, inlined from ``fuzz/script_runtime.py``
  by ``Helpers`` (corpus/linker.py), which reads the module's source (ast)
  and pastes the definitions a script asks for with everything they use.
  That runtime holds the one ``make_input`` (seeded inputs), the one
  ``TOLERANCES`` table and the one judging function, ``compare``, which the
  oracles, the minifier's capture and opcheck's Inductor check also call in
  process: a script cannot disagree with what it reproduces.

The scripts:

- ``render_repro``: a fuzz finding's judged repro (``repro.py`` in the
  store, confirmation, ``symfuzz replay``, the minifier's query scripts). It
  exits ``EXIT_REPRODUCED`` while the bug is present, ``EXIT_FIXED`` once
  fixed, ``EXIT_INVALID`` when nothing can be judged; its last line is
  ``SYMFUZZ-RESULT {json}`` with the signature.
- ``render_graph_repro``: the repro of a graph captured from a user's
  script (the minifier's graph subjects and their checkpoints).
- ``render_snippet``: a straight-line snippet (opcheck's repro snippets).

(A finding's short repro.py, plain and without this runtime, is corpus/short_repro.py's;
it borrows ``compile_config_lines`` and ``mark_lines`` from here.)

The callers above this layer (minifier, opcheck) pass what is particular to
their script as plain data: source text, lines, module names to inline from.
"""

from __future__ import annotations

import json
import keyword
import sys
import textwrap
from typing import Iterable, Optional

from symfuzz.corpus.deaths import ENABLE_LINES as STACK_DUMP_LINES
from symfuzz.corpus.deaths import cause_of, place_from_evidence
from symfuzz.corpus.linker import PROJECT, Helpers, function_body, module_body
from symfuzz.fuzz.ir import PRELUDE as PROGRAM_GLOBALS
from symfuzz.fuzz.model_case import ARCHS, is_model_case, schedule_lines
from symfuzz.oracles.verdict import error_headline

EXIT_FIXED, EXIT_REPRODUCED, EXIT_INVALID = 0, 1, 2

RUNTIME = "symfuzz.fuzz.script_runtime"
SYMBOLIC_TRACE = "symfuzz.oracles.symbolic_trace"
TRITON_CPU = "symfuzz.oracles.lanes.triton_cpu"
EXPORT_RUNNER = "symfuzz.oracles.lanes.export_runner"
RECOMPILE_REASONS = "symfuzz.oracles.lanes.recompile_reasons"
MODULE_RUNTIME = "symfuzz.fuzz.module_runtime"

# The modules that hold the scripts' bodies, as code (corpus.linker.module_body).
REPRO_BODY = "symfuzz.corpus.body_repro"
SYMBOLIC_BODY = "symfuzz.corpus.body_symbolic"
GRAPH_BODY = "symfuzz.corpus.body_graph"
# The constants the bodies import, written as their values.
_CONSTANTS = {"EXIT_FIXED": repr(EXIT_FIXED), "EXIT_REPRODUCED": repr(EXIT_REPRODUCED),
              "EXIT_INVALID": repr(EXIT_INVALID)}


# ---------------------------------------------------------------- the head


def prelude(title: str, about: str = "", *, env: Optional[dict] = None, env_defaults: Optional[dict] = None,
            imports: Iterable[str] = (), stack_dumps: bool = True) -> str:
    """The head of every script: a docstring (``title``, then ``about``); the
    environment (``env`` set, ``env_defaults`` set unless already set) before
    torch is imported; then the imports: json, sys, the standard-library lines
    of ``imports``, the names a program may use (``fuzz.ir.PRELUDE``: math,
    torch, F), and the other lines of ``imports`` (e.g. the module that
    registers an op)."""
    doc = docstring_text(title.strip() + ("\n\n" + about.strip("\n") if about.strip() else ""))
    lines = ["#!/usr/bin/env python", f'"""{doc}\n"""']
    if env or env_defaults:
        lines += ["import os", "", "# The environment; it must be set before torch is imported."]
        lines += [f"os.environ[{k!r}] = {v!r}" for k, v in sorted((env or {}).items())]
        lines += [f"os.environ.setdefault({k!r}, {v!r})" for k, v in sorted((env_defaults or {}).items())]
        lines.append("")
    imports = list(imports)
    stdlib = [i for i in imports if i.split()[:1] == ["import"] and i.split()[1].split(".")[0] in sys.stdlib_module_names]
    lines += ["import json", "import sys", *sorted(stdlib), ""]
    if stack_dumps:  # else the script switches them on itself, where it starts (render_snippet)
        lines += [*STACK_DUMP_LINES, ""]
    lines.append(PROGRAM_GLOBALS.rstrip())
    lines += [i for i in imports if i not in stdlib]
    return "\n".join(lines) + "\n"


def docstring_text(text: str) -> str:
    """``text`` as the inside of a ``\"\"\"`` docstring that holds exactly it: backslashes and
    triple quotes escaped (a finding's fields cannot end the docstring), and characters that are not
    printable (a NUL, a carriage return, a lone surrogate) written as escapes."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in text)


def _attribute(name) -> str:
    """``name`` for ``module.<name> = ...``: a config flag's name, never code."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii() and not keyword.iskeyword(name)
            and not name.startswith("_")):
        raise ValueError(f"{name!r:.60} is not a config flag's name")
    return name


def _helpers_section(helpers: Helpers, head: str) -> str:
    sources = ", ".join(s.removeprefix(PROJECT + ".").replace(".", "/") + ".py" for s in helpers.sources)
    return ("# ---------------------------------------------------------------- symfuzz helpers\n"
            f"# Inlined from symfuzz's {sources}, so that this script needs only torch.\n" + helpers.text(head))


def _main_script(head: str, body: str, helpers: Helpers) -> str:
    """A script that runs ``main()`` and exits with what it returns."""
    return (head + "\n" + body.strip("\n") + "\n\n\n" + _helpers_section(helpers, head)
            + '\n\nif __name__ == "__main__":\n    sys.exit(main())\n')


def render_snippet(title: str, body: str, *, about: str = "", imports: Iterable[str] = (),
                   helpers: Iterable[tuple] = ((RUNTIME, ("make_input",)),), shared: Optional[str] = None) -> str:
    """A script that reads as the bug: the head (title, imports, what registers the op), then
    ``body``, the failing input and what fails, as ``main()``; ``main()`` runs last, with stack
    dumps on. The ``helpers`` ((module, names), ``Helpers.pieces``) are imported from the module
    ``shared``, a file written beside the script (opcheck/snippet_files.py), or else pasted after
    ``main()``, where a reader need not go."""
    about = about or "The failing input and what fails come first, in main(); the helpers come after it."
    main = "def main():\n" + textwrap.indent(body.strip("\n"), "    ") + "\n"
    run = '\n\nif __name__ == "__main__":\n' + textwrap.indent("\n".join(STACK_DUMP_LINES), "    ") + "\n    main()\n"
    failing = "# ---------------------------------------------------------------- the failing input, and what fails\n"
    if shared is not None:
        names = sorted({name for _, pieces in helpers for name in pieces})
        head = prelude(title, about, imports=["import os", *imports], stack_dumps=False)
        return (head + f"sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # {shared}.py is beside it\n"
                + f"from {shared} import {', '.join(names)}\n\n" + failing + main + run)
    pasted = Helpers()
    for module, names in helpers:
        pasted.pieces(module, names)
    head = prelude(title, about, imports=imports, stack_dumps=False)
    return head + "\n" + failing + main + "\n\n" + _helpers_section(pasted, head) + run


# ---------------------------------------------------------------- fuzz findings: the judged repro


def _headline(verdict) -> str:
    return f"symfuzz repro: {what_failed(verdict)} ({verdict.stage}) [{verdict.signature}]"


def what_failed(verdict) -> str:
    """The symptom, and for a death or hang where it happened: the first thing a reader needs."""
    place = place_from_evidence(verdict.evidence)
    if place is None:
        return verdict.symptom
    cause = cause_of(verdict.symptom, verdict.evidence)
    return f"{verdict.symptom}, {'ran past its time limit' if cause == 'timeout' else cause} {place.describe()}"


def _calls_literal(case) -> str:
    """The calls as JSON, in a raw string literal."""
    return 'r"""\n' + json.dumps([c.to_json() for c in case.schedule.calls], indent=1) + '\n"""'


def _render_symbolic_repro(finding, case) -> str:
    # Deferred, as in render_repro: the oracles' imports are for fuzz findings only.
    from symfuzz.oracles.symbolic_meta import stride_paths  # (deferred: see above)

    verdict, lane = finding.verdict, finding.lane
    head = prelude(_headline(verdict), (
        f"Oracle: symbolic-metadata (found on lane {lane['name']}; the check does not depend on the lane).\n"
        "Nothing is compiled: the program is traced once with FakeTensor + ShapeEnv symbolic\n"
        "sizes (hinted by the first call), and the trace's sizes, strides and dtypes,\n"
        "evaluated at each call's input sizes, are compared with what eager produced on\n"
        "that call, as the compiler's fake-tensor propagation would promise them.\n"
        f"Found with torch {finding.environment.get('torch')}. Run it with plain `python repro.py`:\n"
        f"exit {EXIT_REPRODUCED} while the bug is present, {EXIT_FIXED} once it is fixed, "
        f"{EXIT_INVALID} if nothing can be judged."))
    body = module_body(SYMBOLIC_BODY, {
        **_CONSTANTS, "PRELUDE": repr(PROGRAM_GLOBALS),
        "SLOT_PROGRAM": case.source,
        "SLOT_PROGRAM_SOURCE": repr(case.source),
        "SLOT_CALLS": _calls_literal(case),
        "SLOT_OUTPUT_OPS": json.dumps(case.output_ops()),
        "SLOT_DEVICE": repr(lane.get("device", "cpu")),
        "SLOT_SIGNATURE": repr(verdict.signature),
        "SLOT_COMPILE_CONFIG": repr(case.schedule.config),
        "SLOT_STRIDE_PATHS": repr(sorted(stride_paths(case.program))),
    })
    return _main_script(head, body, Helpers().module(RUNTIME).module(SYMBOLIC_TRACE))


def _dead_code_context(finding) -> dict:
    """The calls the crash oracle passed over (eager raised only in dead code: ``oracles.crash.
    dead_code_calls``), for the judge to pass over too; {} where there are none."""
    dead = (finding.triage or {}).get("dead_code_calls")
    return {"dead_code_calls": sorted(dead)} if dead else {}


def lane_configure_lines(lane: dict, helpers: Helpers) -> list:
    """A script's configure() lines for ``lane`` (its JSON): the Triton interpreter's setup (its
    module pasted into ``helpers``) and the lane's Inductor config, each flag set where this torch has it."""
    configure = []
    if lane.get("setup") == "triton-interpreter":
        helpers.module(TRITON_CPU)
        configure.append("enable_triton_interpreter()")
    if lane.get("config"):
        configure.append("import torch._inductor.config as inductor_config")
        for key, value in sorted(lane["config"].items()):
            configure.append(f"if hasattr(inductor_config, {key!r}):")
            configure.append(f"    inductor_config.{_attribute(key)} = {value!r}")
    return configure


MODEL_RUNTIME = "symfuzz.fuzz.model_runtime"
MODEL_JUDGE = "symfuzz.fuzz.model_judge"
MODEL_BODY = "symfuzz.corpus.body_model"


def render_model_repro(finding) -> str:
    """A model finding's repro: the architecture, its config and the calls first, then the
    judging the campaign did; it needs torch and transformers only."""
    case, verdict, lane = finding.case, finding.verdict, finding.lane
    config_class, model_class, _ = ARCHS[case["arch"]]
    schedule = "\n".join(f"  {line}" for line in schedule_lines(case["calls"], verdict.call_index))
    evidence = verdict.evidence.to_json() if verdict.evidence is not None else {}
    what = evidence.get("detail") or ""
    error = evidence.get("error") or {}
    if error:  # a crash or a refused mark: the error itself, in its first telling line
        what = f"{what}: {str(error.get('type', '')).rsplit('.', 1)[-1]}: {error_headline(error.get('message'))}"
    about = (f"{case['arch']}: transformers.{model_class}({config_class}(**CONFIG)), random weights (seed "
             f"{case['seed']}), {case.get('dtype', 'float32')}, attention {case.get('attn', 'eager')}; "
             f"torch.compile(model, backend={lane.get('backend')!r}, dynamic={case.get('dynamic')!r}) on lane "
             f"{lane['name']}.\nAt call {verdict.call_index}: {what}\nThe calls (each to the one compiled model):\n"
             f"{schedule}\n\nFound with torch {finding.environment.get('torch')} and transformers "
             f"{finding.environment.get('transformers')}. Run it with plain `python repro.py` (torch and transformers "
             f"only): exit {EXIT_REPRODUCED} while the bug is present, {EXIT_FIXED} once it is fixed.")
    head = prelude(f"{verdict.symptom} in {case['arch']} at call {verdict.call_index} [{verdict.signature}]",
                   about, env=lane.get("env") or {})
    helpers = Helpers().module(MODEL_RUNTIME).module(MODEL_JUDGE)
    configure = lane_configure_lines(lane, helpers)
    rest = {k: v for k, v in case.items() if k not in ("kind", "arch", "config", "calls", "origin")}
    calls = "[\n" + "".join(f"    {_literal(c)},\n" for c in case["calls"]) + "]"
    body = module_body(MODEL_BODY, {
        **_CONSTANTS,
        "SLOT_ARCH": repr(case["arch"]),
        "SLOT_CLASSES": repr((config_class, model_class)),
        "SLOT_CONFIG": _literal(case["config"]),
        "SLOT_CALLS": calls,
        "SLOT_CASE": _literal(rest),
        "SLOT_LANE": repr(lane["name"]),
        "SLOT_BACKEND": repr(lane.get("backend")),
        "SLOT_MODE": repr(lane.get("mode")),
        "SLOT_DEVICE": repr(lane.get("device", "cpu")),
        "SLOT_SIGNATURE": repr(verdict.signature),
        "SLOT_CONFIGURE": "\n".join(configure or ["pass"]),
    })
    return _main_script(head, body, helpers)


def _literal(value) -> str:
    """A checked case's JSON value as Python source (true/false/null as True/False/None)."""
    return repr(json.loads(json.dumps(value, sort_keys=True)))


def render_repro(finding) -> str:
    """The judged repro of a fuzz finding, from its JSON alone (``Finding``)."""
    if is_model_case(finding.case):
        return render_model_repro(finding)
    # Deferred: the lanes import torch, z3 and torch._dynamo, which opcheck, rendering its snippets
    # here, does not need.
    from symfuzz.fuzz.case import Case  # (deferred: see above)
    from symfuzz.oracles.lanes.execute import judge_context  # (deferred: see above)
    from symfuzz.oracles.lanes.runners import ARTIFACTS, runner_spec  # (deferred: see above)

    case = Case.from_json(finding.case)
    verdict, lane = finding.verdict, finding.lane
    if verdict.symptom == "fake-real-mismatch":
        return _render_symbolic_repro(finding, case)
    helpers = Helpers().module(RUNTIME)
    configure = lane_configure_lines(lane, helpers)  # configure()'s lines
    mode = f", mode={lane['mode']!r}" if lane.get("mode") else ""
    make_compiled = f"torch.compile(fn, backend={lane['backend']!r}, dynamic={case.schedule.dynamic!r}{mode})"
    # The fresh recheck of a failing reused call compiles with dynamic=True: the
    # reused graph was symbolic, and a static fresh compile would hide a
    # dynamic-shape kernel bug behind an "unsound guard" (oracles/lanes/execute.py).
    fresh_compile = f"lambda: torch.compile(fn, backend={lane['backend']!r}, dynamic=True{mode})"
    how = f"torch.compile(dynamic={case.schedule.dynamic!r})"
    if lane.get("runner"):
        # torch.export lanes: the runner (oracles/lanes/export_runner.py, inlined) exports at the
        # first call and runs the exported artifact on every call, as the campaign did.
        helpers.module(EXPORT_RUNNER)
        artifact = ARTIFACTS[lane["runner"]]
        make_compiled = (f"build_exported_runner(fn, {runner_spec(case)!r}, CALLS, make_args, "
                         f"{lane.get('device', 'cpu')!r}, artifact={artifact!r})")
        fresh_compile = "no_fresh_compile"
        how = f"torch.export.export, then {'AOTInductor' if artifact == 'aoti' else 'ExportedProgram.module()'}"
    module = bool(case.program.params)
    if module:
        # A module program: eager and compiled each run their own Model, built alike, whose state
        # carries over from call to call (fuzz/module_runtime.py, inlined); configure() makes eager's.
        helpers.module(MODULE_RUNTIME)
        side = f"{case.schedule.step!r}, {lane.get('device', 'cpu')!r}"  # a checked step spec (Case.from_json)
        configure += ["global fn", f"fn = ModuleSide(Model, None, {side})"]
        compile_model = f"torch.compile(model, backend={lane['backend']!r}, dynamic={case.schedule.dynamic!r}{mode})"
        make_compiled = f"ModuleSide(Model, lambda model: {compile_model}, {side})"
        fresh_compile = f"lambda model: torch.compile(model, backend={lane['backend']!r}, dynamic=True{mode})"
        how = f"torch.compile(model, dynamic={case.schedule.dynamic!r})" + (
            f", each call one training step ({case.schedule.step['optimizer']})" if case.schedule.step else "")
    watched = verdict.symptom == "unsound-recompile"
    if watched:
        helpers.module(RECOMPILE_REASONS)
    head = prelude(_headline(verdict), (
        f"Lane: {lane['name']} ({lane.get('backend')}); {how}.\n"
        f"Found with torch {finding.environment.get('torch')}. Run it with plain `python repro.py`:\n"
        f"exit {EXIT_REPRODUCED} while the bug is present, {EXIT_FIXED} once it is fixed."),
        env=lane.get("env") or {})
    body = module_body(REPRO_BODY, {
        **_CONSTANTS,
        "SLOT_PROGRAM": case.source,
        "SLOT_CALLS": _calls_literal(case),
        "SLOT_OUTPUT_OPS": json.dumps(case.output_ops()),
        "SLOT_GRADIENT_OPS": json.dumps(case.gradient_ops()),
        "SLOT_LANE": repr(lane["name"]),
        "SLOT_SIGNATURE": repr(verdict.signature),
        "SLOT_COMPILE_CONFIG": repr(case.schedule.config),
        "SLOT_CONTEXT": repr({**judge_context(case), **_dead_code_context(finding)}),
        "SLOT_EXPECT_REUSE": repr([verdict.call_index] if verdict.symptom == "excess-recompiles" else []),
        "SLOT_WATCH": ("RecompileWatch(compiled)" if module else "RecompileWatch(fn)") if watched else "None",
        "SLOT_CONFIGURE": "\n".join(configure or ["pass"]),
        "SLOT_COMPILED": make_compiled,
        "SLOT_FRESH_COMPILE": fresh_compile,
        "SLOT_DEVICE": repr(lane.get("device", "cpu")),
    })
    return _main_script(head, body, helpers)


# ---------------------------------------------------------------- compile settings and marks, for short repros

_MARK_FUNCTIONS = {"dynamic": "torch._dynamo.mark_dynamic", "maybe_dynamic": "torch._dynamo.maybe_mark_dynamic",
                   "static": "torch._dynamo.mark_static", "unbacked": "torch._dynamo.decorators.mark_unbacked"}


def compile_config_lines(lane: dict, schedule) -> list[str]:
    """Module-level lines that set the lane's Inductor config and the schedule's flags."""
    config = []
    if lane.get("config"):
        config.append("import torch._inductor.config")
    config += [f"torch._inductor.config.{_attribute(k)} = {v!r}" for k, v in sorted((lane.get("config") or {}).items())]
    config += [f"torch._dynamo.config.{_attribute(k)} = {v!r}" for k, v in sorted(schedule.config.get("dynamo", {}).items())]
    if schedule.config.get("fx"):
        config.append("import torch.fx.experimental._config")
        config += [f"torch.fx.experimental._config.{_attribute(k)} = {v!r}" for k, v in sorted(schedule.config["fx"].items())]
    config += [f"torch.compiler.config.{_attribute(k)} = {v!r}" for k, v in sorted(schedule.config.get("compiler", {}).items())]
    return config


def mark_lines(call) -> list[str]:
    """``torch._dynamo`` mark calls for a call's compiled-side arguments, ``args[i]``."""
    lines = []
    for a, arg in enumerate(call.args):
        for d, mark in sorted(arg.marks.items()):
            kind = mark.get("mark", "auto")
            bounds = "".join(f", {k}={int(mark[k])}" for k in ("min", "max") if mark.get(k) is not None)
            fn = _MARK_FUNCTIONS.get(kind)
            if fn is not None:
                lines.append(f"{fn}(args[{a}], {int(d)}{bounds if kind in ('dynamic', 'unbacked') else ''})")
    return lines


# ---------------------------------------------------------------- captured graphs


def render_graph_repro(*, title: str, about: str, function: str, make_inputs: str, marks: str, backend: str,
                       compile_kwargs: str = "", grad_enabled: bool = True, accuracy: bool = False,
                       imports: Iterable[str] = ()) -> str:
    """The repro of a graph captured from a user's script: ``function`` (the
    graph as ``def fn(...)``), ``make_inputs`` (``def make_inputs()``, which
    may call ``make_input``), ``marks`` (indented ``mark_dynamic`` lines on
    ``inputs``), compiled with ``backend``. A crash, or with ``accuracy`` a
    difference from eager (``compare``), prints ``SYMFUZZ-RESULT`` with a
    signature and exits ``EXIT_REPRODUCED``; eager failing exits ``EXIT_INVALID``."""
    head = prelude(title, about, env_defaults={"TORCHINDUCTOR_COMPILE_THREADS": "1"},
                   imports=["import traceback", *imports])
    body = module_body(GRAPH_BODY, {
        **_CONSTANTS,
        "SLOT_BACKEND": repr(backend),
        "SLOT_FUNCTION": function,
        "SLOT_MAKE_INPUTS": make_inputs,
        "SLOT_GRAD_ENABLED": str(grad_enabled),
        "SLOT_MARKS": textwrap.dedent(marks),
        "SLOT_COMPILED": f"torch.compile(fn, backend=BACKEND{compile_kwargs})",
        "SLOT_ACCURACY_CHECK": function_body(GRAPH_BODY, "accuracy_check") if accuracy else "",
    })
    names = ["make_input", "signature", "normalize_message"] + (["compare", "reference_call", "snapshot"] if accuracy else [])
    return _main_script(head, body, Helpers().pieces(RUNTIME, names))
