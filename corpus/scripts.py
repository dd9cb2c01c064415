"""Every standalone script symfuzz writes, rendered in one place.

The scripts need only torch, and each is built from the same pieces:

- one head (``prelude``): the docstring, the environment (set before torch
  is imported), the imports;
- the runtime the script carries, inlined from ``fuzz/script_runtime.py``
  by ``Helpers``, which reads the module's source (ast) and pastes the
  definitions a script asks for with everything they use. That runtime
  holds the one ``make_input`` (seeded inputs), the one ``TOLERANCES``
  table and the one judging function, ``compare``, which the oracles,
  the minifier's capture and opcheck's Inductor check also call in
  process: a script cannot disagree with what it reproduces.

The scripts:

- ``render_repro``: a fuzz finding's judged repro (``repro.py`` in the
  store, confirmation, ``symfuzz replay``, the minifier's query scripts). It
  exits ``EXIT_REPRODUCED`` while the bug is present, ``EXIT_FIXED`` once
  fixed, ``EXIT_INVALID`` when nothing can be judged; its last line is
  ``SYMFUZZ-RESULT {json}`` with the signature.
- ``render_compact``: the short repro of a minified module program, which
  raises while the bug is present (corpus/short_repro.py writes the others').
- ``render_graph_repro``: the repro of a graph captured from a user's
  script (the minifier's graph subjects and their checkpoints).
- ``render_snippet``: a straight-line snippet (opcheck's repro snippets).

The callers above this layer (minifier, opcheck) pass what is particular to
their script as plain data: source text, lines, module names to inline from.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import json
import keyword
import sys
import textwrap
import threading
from pathlib import Path
from typing import Iterable, Optional

from symfuzz.corpus.deaths import ENABLE_LINES as STACK_DUMP_LINES
from symfuzz.corpus.deaths import cause_of, place_from_evidence
from symfuzz.fuzz.ir import PRELUDE as PROGRAM_GLOBALS

EXIT_FIXED, EXIT_REPRODUCED, EXIT_INVALID = 0, 1, 2

RUNTIME = "symfuzz.fuzz.script_runtime"
SYMBOLIC_TRACE = "symfuzz.oracles.symbolic_trace"
TRITON_CPU = "symfuzz.oracles.lanes.triton_cpu"
EXPORT_RUNNER = "symfuzz.oracles.lanes.export_runner"
RECOMPILE_REASONS = "symfuzz.oracles.lanes.recompile_reasons"
MODULE_RUNTIME = "symfuzz.fuzz.module_runtime"

# Top-level imports an inlined module may make: the standard library and torch.
_ALLOWED_IMPORTS = set(sys.stdlib_module_names) | {"torch"}
_PROJECT = "symfuzz"


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


# ---------------------------------------------------------------- inlined source


def _module_source(module) -> tuple[str, str]:
    """(dotted name, source text) of a project module, given by name or as a module."""
    if not isinstance(module, str):
        return module.__name__, inspect.getsource(module)
    loaded = sys.modules.get(module)
    if loaded is not None:
        return module, inspect.getsource(loaded)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"no module {module} to inline into a script")
    return module, Path(spec.origin).read_text()


def _binds(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


# The names each statement uses, by the statement (the parsed trees are cached and only read, so a
# statement's names never change; the renderers ask for them once per script otherwise).
_USES: dict[int, tuple[ast.stmt, frozenset]] = {}


def _uses(node: ast.stmt) -> frozenset:
    known = _USES.get(id(node))
    if known is None or known[0] is not node:
        known = _USES[id(node)] = (node, frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))
    return known[1]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_project_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == _PROJECT
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == _PROJECT for a in node.names)


def _segment(lines: list[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` from the module's lines, already split: that function
    splits the whole text again on every call (the repro renderer asks once per import)."""
    part = [line.encode() for line in lines[node.lineno - 1:node.end_lineno]]  # offsets count UTF-8 bytes
    part[-1] = part[-1][:node.end_col_offset]
    part[0] = part[0][node.col_offset:]
    return "\n".join(line.decode() for line in part)


def _first_line(node: ast.stmt, lines: list[str]) -> int:
    """The statement's first line, with its decorators and the comment lines right above it."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


# CPython's parser is not safe to enter from two threads at once (3.11 raises
# "SystemError: AST constructor recursion depth mismatch"), and the minifier
# renders scripts from a thread pool. The trees are only read, so one parse of
# each source serves every script.
_PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=32)
def _parse_locked(text: str) -> ast.Module:
    return ast.parse(text)


def _parse(text: str) -> ast.Module:
    with _PARSE_LOCK:
        return _parse_locked(text)


class Helpers:
    """Project source pasted into a script, each definition once.

    ``module`` pastes a whole module but its docstring; ``pieces`` pastes
    named top-level definitions with every top-level definition they use,
    and the imports those need. A project import in pasted code is replaced
    by the definitions it imports (pasted first) or dropped when the script
    has them already; other imports must be of the standard library or
    torch, so that the script needs only torch.
    """

    def __init__(self):
        self.blocks: list[str] = []
        self.imports: list[str] = []  # import lines the pieces need, in order
        self.provided: dict[str, str] = {}  # name -> the module whose definition the script holds
        self.sources: list[str] = []  # modules pasted from, in order

    def module(self, module) -> "Helpers":
        name, text = _module_source(module)
        if name in self.sources:
            raise RuntimeError(f"{name} is pasted already: paste a whole module before any pieces of it")
        lines = text.splitlines()
        dropped = set()
        tree = _parse(text)
        for index, node in enumerate(tree.body):
            span = range(node.lineno, node.end_lineno + 1)
            if index == 0 and _is_docstring(node):
                dropped.update(span)
            elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
                dropped.update(span)
            elif _is_project_import(node):
                self._resolve(name, node, {a.asname or a.name for a in node.names})
                dropped.update(span)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(name, node)
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                self._provide(name, _binds(node))
        self._source(name)
        self.blocks.append("\n".join(l for n, l in enumerate(lines, 1) if n not in dropped).strip("\n"))
        return self

    def pieces(self, module, names: Iterable[str]) -> "Helpers":
        names = list(names)
        name, text = _module_source(module)
        lines = text.splitlines()
        statements = [n for n in _parse(text).body if not _is_docstring(n)]
        defined: dict[str, ast.stmt] = {}
        for node in statements:
            for bound in _binds(node):
                defined.setdefault(bound, node)
        chosen: dict[int, ast.stmt] = {}
        queue = list(names)
        while queue:
            wanted = queue.pop()
            node = defined.get(wanted)
            if node is None:
                raise RuntimeError(f"{name} defines no top-level {wanted!r}, which a script inlines")
            if id(node) in chosen or (wanted in self.provided and self._has(name, wanted, node)):
                continue
            chosen[id(node)] = node
            queue += [u for u in _uses(node) if u in defined]
        ordered = sorted(chosen.values(), key=lambda n: n.lineno)
        code = []
        # The names a project import brings that are needed: used by the chosen code, or asked for
        # themselves (a module that gathers others' names, as script_runtime gathers fuzz/runtime/'s).
        needed = set().union(*(_uses(n) for n in ordered)) | set(names)
        for node in ordered:
            if _is_project_import(node):
                self._resolve(name, node, {a.asname or a.name for a in node.names} & needed)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(name, node)
                line = _segment(lines, node)
                if line not in self.imports:
                    self.imports.append(line)
            else:
                code.append(node)
        for node in code:
            self._provide(name, _binds(node))
        if code:
            self._source(name)
            self.blocks.append("\n\n\n".join("\n".join(lines[_first_line(n, lines) - 1:n.end_lineno]) for n in code))
        return self

    def text(self, have: str = "") -> str:
        """The pasted source; import lines already in ``have`` (the script's head) are left out."""
        present = set(have.splitlines())
        head = "\n".join(i for i in self.imports if i not in present)
        return (head + "\n\n\n" if head else "") + "\n\n\n".join(self.blocks) + "\n"

    def _has(self, module: str, wanted: str, node: ast.stmt) -> bool:
        """Does the script hold ``module``'s ``wanted`` (bound by ``node``) already?"""
        if self.provided[wanted] == module or _is_project_import(node):
            return True  # pasted from this module, or from the module it imports it from
        raise RuntimeError(f"{module} and {self.provided[wanted]} both define {wanted!r}; a script inlines both")

    def _resolve(self, name: str, node: ast.stmt, imported: set[str]) -> None:
        """Paste what a project import brings, unless the script has it."""
        if not isinstance(node, ast.ImportFrom) or node.level or any(a.asname and a.asname != a.name for a in node.names):
            raise RuntimeError(f"{name}: inlined code may import project names only as `from symfuzz.x import name`")
        missing = sorted(n for n in imported if n not in self.provided)
        if missing:
            self.pieces(node.module, missing)

    def _check_import(self, name: str, node: ast.stmt) -> None:
        roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [node.module.split(".")[0]]
        bad = [r for r in roots if r not in _ALLOWED_IMPORTS]
        if bad:
            raise RuntimeError(f"{name} imports {bad} at top level: scripts inline it, so it may import only "
                               "the standard library and torch (import others inside functions)")

    def _provide(self, module: str, names: set[str]) -> None:
        for bound in names:
            other = self.provided.get(bound)
            if other is not None and other != module:
                raise RuntimeError(f"{module} and {other} both define {bound!r}; a script inlines both")
            self.provided[bound] = module

    def _source(self, name: str) -> None:
        if name not in self.sources:
            self.sources.append(name)


def _helpers_section(helpers: Helpers, head: str) -> str:
    sources = ", ".join(s.removeprefix(_PROJECT + ".").replace(".", "/") + ".py" for s in helpers.sources)
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


_REPRO_BODY = '''
# ---------------------------------------------------------------- the program
{source}
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(r"""
{calls}
""")
OUTPUT_OPS = {output_ops}
GRADIENT_OPS = {gradient_ops}
LANE = {lane_name!r}
EXPECTED_SIGNATURE = {signature!r}
# Dynamo / ShapeEnv flags the schedule sets around compile and calls.
COMPILE_CONFIG = {compile_config}
# constrained: the schedule marks dims or sets flags, so torch may refuse it;
# demands_specialization: the program itself compares sizes.
CONTEXT = {context}
# Calls that every guard of the cached graph admits: they must not recompile.
EXPECT_REUSE = {expect_reuse}


def configure():
{config_lines}


# What each dynamism mark needs from torch: an older torch (a reference environment,
# say) may lack some, and is told so instead of crashing.
MARK_APIS = {{"dynamic": "_dynamo.mark_dynamic", "maybe_dynamic": "_dynamo.maybe_mark_dynamic",
             "static": "_dynamo.mark_static", "unbacked": "_dynamo.decorators.mark_unbacked"}}


def missing_torch_features():
    needed = ["compile", "_dynamo"] + sorted({{MARK_APIS[m.get("mark")] for call in CALLS for arg in call["args"]
                                              for m in (arg.get("marks") or {{}}).values() if m.get("mark") in MARK_APIS}})
    missing = []
    for path in needed:
        head, _, rest = path.partition(".")
        try:
            if head.startswith("_"):  # a submodule: imported here, whether or not torch imports it eagerly
                __import__("torch." + head)
            obj = getattr(torch, head, None)
        except ImportError:
            obj = None
        for part in filter(None, rest.split(".")):
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append("torch." + path)
    return missing


def main():
    print("torch", torch.__version__, "| triton", _installed_triton_version(), "| python", sys.version.split()[0])
    missing = missing_torch_features()
    if missing:
        print(f"this torch ({{torch.__version__}}) lacks what this repro needs: {{', '.join(missing)}}")
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": None, "unsupported": missing}}))
        return {exit_invalid}
    configure()
    skipped = set_compile_config(COMPILE_CONFIG).skipped
    if skipped:
        print("note: this torch lacks config flags", skipped)
    compiled = {make_compiled}
    if __import__("os").environ.get("SYMFUZZ_EAGER_ONLY"):  # how long eager alone takes (hang or slow?)
        compiled = fn
    # An unsound-recompile repro asks the guard managers before each call, as the campaign did.
    watch = {make_watch}
    records = run_schedule(fn, compiled, CALLS, {device!r}, before_call=watch and watch.before_call,
                           on_call=watch and (lambda index, eager, result: watch.after_call(index, result)))
    for index, (eager, result) in enumerate(records):
        failure, key = judge_schedule_call(fn, {fresh_compile}, CALLS, index, eager, result,
                                           {device!r}, CONTEXT, EXPECT_REUSE, OUTPUT_OPS, GRADIENT_OPS)
        if failure is None:
            print(f"call {{index}}: ok (graphs compiled during call: {{result.get('graphs')}})")
            continue
        key = key if key is not None else failure_key(failure, OUTPUT_OPS, GRADIENT_OPS)
        sig = signature(failure["symptom"], LANE, key)
        print(f"call {{index}}: {{failure['symptom']}} ({{failure.get('stage')}})")
        if "error" in failure:
            print(failure["error"]["traceback"])
        print(failure.get("detail", ""))
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "signature": sig, "call": index, "symptom": failure["symptom"]}}))
        return {exit_reproduced}
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
    return {exit_fixed}


def _installed_triton_version():
    try:
        import triton

        return triton.__version__
    except ImportError:
        return None
'''


# fake-real-mismatch findings (the symbolic-metadata oracle): nothing is compiled.
# The script traces the program once with symbolic fake tensors and judges every
# call against that trace, with oracles/symbolic_trace.py inlined.
_SYMBOLIC_BODY = '''
# ---------------------------------------------------------------- the program
{source}
# The same program as the symbolic trace loads it: with `max`, `min` and
# `divmod` on sizes traced the way Dynamo traces them.
PROGRAM_SOURCE = {source_literal}
PROGRAM_PRELUDE = {program_globals!r}
# ---------------------------------------------------------------- the calls, in order
# Each call rebuilds its inputs from a seed: shape, dtype, layout, value seed.
CALLS = json.loads(r"""
{calls}
""")
OUTPUT_OPS = {output_ops}
DEVICE = {device!r}
EXPECTED_SIGNATURE = {signature!r}
# The schedule's flags (of these, the trace honours fx.use_duck_shape only).
COMPILE_CONFIG = {compile_config}
# Leaves whose strides torch promises (views, fresh tensors, final input states):
# they must match eager's at every comparable call; other leaves only where
# they matched at their first comparison.
STRIDE_PATHS = {stride_paths}


def main():
    print("torch", torch.__version__, "| python", sys.version.split()[0])
    try:
        trace = trace_symbolic(PROGRAM_SOURCE, CALLS[0], COMPILE_CONFIG, prelude=PROGRAM_PRELUDE)
    except TraceFailed as exc:
        print("the program cannot be traced with symbolic sizes:", exc)
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": None, "reason": "symbolic trace failed"}}))
        return {exit_invalid}
    judgement = judge_calls(trace, fn, CALLS, lambda index, call: run_call(fn, make_args(call, DEVICE)),
                            STRIDE_PATHS, OUTPUT_OPS)
    last = judgement.index if judgement.index is not None else len(CALLS) - 1
    for index in range(last + 1):
        if index in judgement.skipped:
            print(f"call {{index}}: not comparable ({{judgement.skipped[index]}})")
        elif index != judgement.index:
            print(f"call {{index}}: ok")
    if judgement.mismatch is not None:
        evidence = judgement.evidence(CALLS)
        print(f"call {{judgement.index}}: fake-real-mismatch (dynamo)")
        print(evidence["detail"])
        print("bindings:", evidence["bindings"], "| hint sizes:", evidence["hint_sizes"],
              "| this call's sizes:", evidence["call_sizes"])
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "signature": judgement.signature, "call": judgement.index,
                                              "symptom": "fake-real-mismatch"}}))
        return {exit_reproduced}
    if not judgement.compared:
        print("SYMFUZZ-RESULT " + json.dumps({{"ok": None, "reason": "no call is comparable with the trace"}}))
        return {exit_invalid}
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
    return {exit_fixed}
'''


def _headline(verdict) -> str:
    return f"symfuzz repro: {what_failed(verdict)} ({verdict.stage}) [{verdict.signature}]"


def what_failed(verdict) -> str:
    """The symptom, and for a death or hang where it happened: the first thing a reader needs."""
    place = place_from_evidence(verdict.evidence)
    if place is None:
        return verdict.symptom
    cause = cause_of(verdict.symptom, verdict.evidence)
    return f"{verdict.symptom}, {'ran past its time limit' if cause == 'timeout' else cause} {place.describe()}"


def _calls_json(case) -> str:
    return json.dumps([c.to_json() for c in case.schedule.calls], indent=1)


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
    body = _SYMBOLIC_BODY.format(
        source=case.source,
        source_literal=repr(case.source),
        program_globals=PROGRAM_GLOBALS,
        calls=_calls_json(case),
        output_ops=json.dumps(case.output_ops()),
        device=lane.get("device", "cpu"),
        signature=verdict.signature,
        compile_config=repr(case.schedule.config),
        stride_paths=repr(sorted(stride_paths(case.program))),
        exit_reproduced=EXIT_REPRODUCED, exit_fixed=EXIT_FIXED, exit_invalid=EXIT_INVALID,
    )
    return _main_script(head, body, Helpers().module(RUNTIME).module(SYMBOLIC_TRACE))


def render_repro(finding) -> str:
    """The judged repro of a fuzz finding, from its JSON alone (``Finding``)."""
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
    config_lines = []
    if lane.get("setup") == "triton-interpreter":
        helpers.module(TRITON_CPU)
        config_lines.append("    enable_triton_interpreter()")
    if lane.get("config"):
        config_lines.append("    import torch._inductor.config as inductor_config")
        for key, value in sorted(lane["config"].items()):
            config_lines.append(f"    if hasattr(inductor_config, {key!r}):")
            config_lines.append(f"        inductor_config.{_attribute(key)} = {value!r}")
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
        config_lines += ["    global fn", f"    fn = ModuleSide(Model, None, {side})"]
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
    body = _REPRO_BODY.format(
        source=case.source,
        calls=_calls_json(case),
        output_ops=json.dumps(case.output_ops()),
        gradient_ops=json.dumps(case.gradient_ops()),
        lane_name=lane["name"],
        signature=verdict.signature,
        compile_config=repr(case.schedule.config),
        context=repr(judge_context(case)),
        expect_reuse=repr([verdict.call_index] if verdict.symptom == "excess-recompiles" else []),
        make_watch=("RecompileWatch(compiled)" if module else "RecompileWatch(fn)") if watched else "None",
        config_lines="\n".join(config_lines or ["    pass"]),
        make_compiled=make_compiled,
        fresh_compile=fresh_compile,
        device=lane.get("device", "cpu"),
        exit_reproduced=EXIT_REPRODUCED,
        exit_fixed=EXIT_FIXED,
        exit_invalid=EXIT_INVALID,
    )
    return _main_script(head, body, helpers)


# ---------------------------------------------------------------- minified findings: the short repro

# Findings the short repro can show: it compiles once and compares each call with eager.
COMPACT_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "crash", "accepts-invalid",
                    "unsound-guard", "process-death", "timeout")
# The lines of the short repro that call the compiled function: a failure raised
# from one of them came from the compiled side.
COMPILED_CALL = "actual = compiled(*args)"
# With inputs that require grad: the compiled backward (AOTAutograd's backward graph).
COMPILED_BACKWARD = "actual_grads = input_gradients(actual, [a for a in args if getattr(a, 'requires_grad', False)])"
COMPILED_CALL_ON_INVALID = "result = compiled(*make_inputs())"

_MARK_FUNCTIONS = {"dynamic": "torch._dynamo.mark_dynamic", "maybe_dynamic": "torch._dynamo.maybe_mark_dynamic",
                   "static": "torch._dynamo.mark_static", "unbacked": "torch._dynamo.decorators.mark_unbacked"}


def _input_expr(arg) -> str:
    if arg.scalar:  # a Python number or int list (Case.from_json checked it), as a literal
        value = arg.value
        if arg.scalar == "ints":
            return repr([int(v) for v in value])
        return repr({"int": int, "float": float, "bool": bool}[arg.scalar](value))
    layout = arg.layout or {}
    # ints and a dtype's name only (Case.from_json checks them): nothing from a file is pasted as code
    expr = f"make_input({tuple(int(n) for n in arg.shape)!r}, torch.{_attribute(arg.dtype)}, {int(arg.seed)}"
    if layout.get("kind", "contiguous") != "contiguous":
        expr += f", {layout!r}"
    return expr + (").requires_grad_()" if arg.requires_grad else ")")


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


def render_compact(case, verdict, lane: dict, environment: dict, *, discrete: bool = True) -> Optional[str]:
    """The short repro of a minified module program (``fuzz.case.Case`` with parameters) that fails as
    ``verdict`` says on ``lane``, or None when it needs the judged repro: runner lanes (torch.export),
    the Triton interpreter, other devices, and symptoms judged from the compile's bookkeeping. (Other
    programs get corpus/short_repro.py's plain script.)

    It holds the flags, the ``Model`` class and the calls' inputs, runs eager and compiled each on
    their own model, and raises on the first call where ``compare`` says compiled differs from eager.
    Its float64 reference carries rounding's explainer (``reference_call``, with the shadow
    interpreter, some 500 lines) unless the caller knows that every leaf it compares is a float
    (``discrete=False``), where that explains nothing."""
    symptom = verdict.symptom
    if (symptom not in COMPACT_SYMPTOMS or lane.get("runner") or lane.get("setup")
            or lane.get("device", "cpu") != "cpu" or not case.program.params):
        return None
    schedule = case.schedule
    compile_args = f"backend={lane['backend']!r}, dynamic={schedule.dynamic!r}"
    if lane.get("mode"):
        compile_args += f", mode={lane['mode']!r}"
    what = what_failed(verdict)
    head = prelude(f"{what}{',' if what != symptom else ''} under torch.compile({compile_args}) on cpu.", (
        f"Minified by symfuzz from finding {verdict.signature} (lane {lane['name']}),\n"
        f"found with torch {environment.get('torch')}. `python repro.py` raises while the bug is present."),
        env=lane.get("env"))
    out = [*compile_config_lines(lane, schedule), "", case.source.rstrip(), "", ""]
    reference = "reference_call" if discrete else "float64_call"
    return _main_script(head, *_compact_module_main(case, symptom, compile_args, out, reference))


def _compact_module_main(case, symptom: str, compile_args: str, out: list, reference: str) -> tuple:
    """(body, helpers) of the short repro of a module program: ``out`` (flags and the
    ``Model`` class) followed by a main() that runs eager and compiled on their own
    models (``module_runtime.ModuleSide``, inlined) and compares, after each call, the
    outputs, inputs, gradients and the models' parameters and buffers."""
    schedule = case.schedule
    step = f"{schedule.step!r}"  # a checked step spec (Case.from_json), or None
    out += ["def main():",
            "    # Eager and compiled each run their own Model, built alike; its parameters and buffers carry over",
            "    # from call to call" + (f", and each call is one training step ({schedule.step['optimizer']})."
                                        if schedule.step else "."),
            f"    eager, side = ModuleSide(Model, None, {step}), "
            f"ModuleSide(Model, lambda model: torch.compile(model, {compile_args}), {step})",
            "    compiled = lambda *args: side.call_tree(args)  # outputs, inputs, gradients, then the model's state",
            "    for call, (training, make_inputs) in enumerate(CALLS):",
            "        for model_side in (eager, side):",
            '            model_side.begin_call(call, {"training": training})  # train or eval mode',
            "        eager_args = make_inputs()"]
    if symptom == "accepts-invalid":
        out += ["        try:",
                "            expected = eager.call_tree(eager_args)",
                "        except Exception as exc:",
                f"            {COMPILED_CALL_ON_INVALID}",
                "            raise AssertionError(f\"accepts-invalid at call {call}: compiled returned, eager raised {exc!r}\")"]
    else:
        out.append("        expected = eager.call_tree(eager_args)")
    out.append("        args = make_inputs()")
    for i, lines in enumerate(mark_lines(c) for c in schedule.calls):
        if lines:
            out.append(f"        if call == {i}:")
            out += [f"            {line}" for line in lines]
    out += [f"        {COMPILED_CALL}",
            "        # Beyond tolerance, compared with a float64 run from the state eager started this call from.",
            f"        diff = name_gradient(compare(expected, actual, lambda: {reference}(eager.replay(call), "
            "make_inputs()).get(\"out\")))",
            "        if diff is not None:",
            "            raise AssertionError(f\"{diff['symptom']} at call {call}: {diff['path']}: {diff['detail']}\")",
            '    print("compiled matches eager at every call")', "", "",
            "CALLS = [  # each call's mode (train?) and inputs, rebuilt from seeds"]
    out += [f"    ({call.training!r}, lambda: [{', '.join(_input_expr(a) for a in call.args)}]),"
            for call in schedule.calls]
    out.append("]")
    helpers = Helpers().pieces(RUNTIME, ["make_input", "compare", reference, "name_gradient"])
    return "\n".join(out), helpers.module(MODULE_RUNTIME)


# ---------------------------------------------------------------- captured graphs


_GRAPH_BODY = '''
BACKEND = {backend!r}


{function}


{make_inputs}


def main():
    torch.set_grad_enabled({grad_enabled})
    try:
        expected = fn(*make_inputs())
    except Exception as exc:  # the program itself is invalid: nothing to judge
        traceback.print_exc()
        return finish({{"ok": None, "invalid": "eager fails", "error": describe(exc)}}, {exit_invalid})
    inputs = make_inputs()
{marks}
    compiled = torch.compile(fn, backend=BACKEND{compile_kwargs})
    try:
        actual = compiled(*inputs)
    except Exception as exc:
        traceback.print_exc()
        return fail("crash", describe(exc), key=f"{{type(exc).__module__}}.{{type(exc).__qualname__}}|"
                                                f"{{normalize_message(str(exc))}}")
{check}    print("compiled ran without failing")
    return finish({{"ok": True}}, {exit_fixed})


def describe(exc):
    return {{"type": f"{{type(exc).__module__}}.{{type(exc).__qualname__}}", "message": str(exc)[:2000]}}


def fail(symptom, error=None, key="", detail=""):
    result = {{"ok": False, "symptom": symptom, "signature": signature(symptom, BACKEND, key)}}
    if error is not None:
        result["error"] = error
    if detail:
        result["detail"] = detail
    return finish(result, {exit_reproduced})


def finish(result, code):
    print("SYMFUZZ-RESULT " + json.dumps(result))
    return code
'''

_GRAPH_ACCURACY_CHECK = '''    # Outputs that differ from eager only by rounding are judged against a float64 run.
    reference = lambda: (reference_call(fn, make_inputs()).get("out") or (None,))[0]
    diff = compare(snapshot(expected), snapshot(actual), reference)
    if diff is not None:
        print(f"compiled differs from eager at {diff['path']}: {diff['detail']}")
        return fail(diff["symptom"], key=diff["symptom"], detail=f"{diff['path']}: {diff['detail']}")
'''


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
    body = _GRAPH_BODY.format(
        backend=backend, function=function, make_inputs=make_inputs, marks=marks, compile_kwargs=compile_kwargs,
        grad_enabled=grad_enabled, check=_GRAPH_ACCURACY_CHECK if accuracy else "",
        exit_fixed=EXIT_FIXED, exit_reproduced=EXIT_REPRODUCED, exit_invalid=EXIT_INVALID)
    names = ["make_input", "signature", "normalize_message"] + (["compare", "reference_call", "snapshot"] if accuracy else [])
    return _main_script(head, body, Helpers().pieces(RUNTIME, names))
