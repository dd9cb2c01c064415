"""A finding.json, a baseline entry or a stored corpus case never injects code.

symfuzz renders a finding's case into Python (the program, the repro scripts) and
campaign workers run stored cases, so every field that reaches source is checked as
it is read (``Program.from_json``, ``Case.from_json``, ``Finding.from_json``): each
hostile variant below is refused by ``symfuzz replay`` and ``symfuzz minify`` with
exit 2 and one line naming the field, and the marker file its payload would create
never appears. Text that only lands in a docstring is escaped instead. Every program
the generator writes still passes (a few dozen drawn here; hundreds when slow).
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import re
import types
from pathlib import Path

import pytest

import symfuzz.cli
from conftest import ROOT
from symfuzz.corpus.finding import Finding, FindingFormatError, check_case
from symfuzz.fuzz import ir_check
from symfuzz.fuzz.case import Case

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

GOOD = ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json"  # written by a real campaign
MARKER = "symfuzz-injected"  # the file each payload would create in the current folder
TOUCH = f"__import__('pathlib').Path('{MARKER}').touch()"

# Nodes of every kind the generator writes (forms copied from generated programs), over the
# fixture's values x0, x1, v1, v5, n3; appended to the fixture's program.
EXTRA_NODES = [
    {"kind": "branch", "out": "b1", "cond": "x1.size(0) > 3 and n3 % 2 == 0", "then": "x1 * 2",
     "orelse": "torch.relu(x1)"},
    {"kind": "check", "form": "assert", "cond": "x1.shape[0] >= 1"},
    {"kind": "expr", "out": "e1", "expr": "x1 / math.sqrt(max(x1.shape[-1], 1))"},
    {"kind": "cond", "out": "c1", "pred": "x1.size(0) > 3", "operands": ["x1", "v5"], "then": "a0 * 2",
     "orelse": "torch.maximum(a0, a1)", "style": "def"},
    {"kind": "cond", "out": "c2", "pred": "x1.size(0) > 3", "operands": ["x1"], "then": "a0.sin()",
     "orelse": "a0 - 1", "style": "lambda"},
    {"kind": "graph_break"},
    {"kind": "effect", "op": "fill_", "args": ["b1"], "params": {"v": 1.5, "reject": ""}},
    {"kind": "op", "out": "r1", "op": "reshape", "args": ["x1"], "params": {"shape": "-1", "descs": [["rest"]]}},
    {"kind": "op", "out": "d1", "op": "item_size", "args": ["x1"],
     "params": {"cmp": " > 0", "hint": "torch._check_is_size({out}_n)", "use": "{0}.new_zeros({out}_n)"}},
]


def good() -> dict:
    data = json.loads(GOOD.read_text())
    data["case"]["program"]["body"] += copy.deepcopy(EXTRA_NODES)
    data["case"]["program"]["outputs"] += ["b1", "e1", "c1", "c2", "r1", "d1"]
    return data


def body_node(data: dict, out=None, kind=None) -> dict:
    return next(n for n in data["case"]["program"]["body"] if (out is None or n.get("out") == out)
                and (kind is None or n["kind"] == kind))


def hostile(change):
    """The good finding with ``change(data)`` applied."""
    def build():
        data = good()
        change(data)
        return data
    return build


def set_in(path: str, value):
    """A change setting ``data[a][b]...`` (path "a.b..."; a number indexes a list)."""
    def change(data):
        *heads, last = path.split(".")
        target = data
        for head in heads:
            target = target[int(head)] if isinstance(target, list) else target[head]
        target[int(last) if isinstance(target, list) else last] = value
    return change


def node_field(out, field, value, kind=None):
    return lambda data: body_node(data, out, kind).__setitem__(field, value)


def arg_field(field, value, call=0, arg=1):
    return lambda data: data["case"]["schedule"]["calls"][call]["args"][arg].__setitem__(field, value)


# Each row: (field, change to the good finding, regex the one line must match).
ROWS = [
    # -- the program: expressions
    ("size.expr", node_field("n3", "expr", TOUCH), r"size node n3: expr .* uses '__import__', which a generated "
     r"program never does"),
    ("branch.cond", node_field("b1", "cond", f"torch.os.system('touch {MARKER}') == 0"),
     r"branch node b1: cond .* uses the attribute 'os'"),
    ("branch.then", node_field("b1", "then", f"[open('{MARKER}', 'w'), x1][1]"), r"branch node b1: then .* uses 'open'"),
    ("branch.orelse", node_field("b1", "orelse", f"x1 if exec({TOUCH!r}) else x1"), r"branch node b1: orelse .* uses 'exec'"),
    ("check.cond", node_field(None, "cond", f"eval({TOUCH!r}) is None", kind="check"),
     r"check node body\[\d+\]: cond .* uses 'eval'"),
    ("check.form", node_field(None, "form", f"{TOUCH} or", kind="check"), r"check node body\[\d+\]: form .* is not one of"),
    ("expr.expr", node_field("e1", "expr", "x1.__class__.__init__.__globals__['os'].system('true')"),
     r"expr node e1: expr .* uses the attribute '__class__'"),
    ("expr.expr-newline", node_field("e1", "expr", f"x1\n{TOUCH}"), r"expr node e1: expr must be one line of Python"),
    ("expr.expr-lambda-default", node_field("e1", "expr", "(lambda a=x1: a)()"),
     r"expr node e1: expr .* uses parameters other than plain names"),
    ("expr.expr-walrus", node_field("e1", "expr", "(y := x1)"), r"expr node e1: expr .* uses namedexpr syntax"),
    ("cond.pred", node_field("c1", "pred", "globals()['__builtins__'] and x1.size(0) > 3"),
     r"cond node c1: pred .* uses 'globals'"),
    ("cond.then", node_field("c1", "then", "a0.sum().tolist() or [__import__('os')]"), r"cond node c1: then .* uses '__import__'"),
    ("cond.orelse", node_field("c1", "orelse", "breakpoint()"), r"cond node c1: orelse .* uses 'breakpoint'"),
    ("cond.operands", node_field("c1", "operands", [f"x1,)); {TOUCH}; ((x1"]), r"cond node c1: operands\[0\]: .* is not a name"),
    ("cond.style", node_field("c1", "style", "exec"), r"cond node c1: style 'exec' is not"),
    # -- the program: names
    ("op.out", node_field("v1", "out", f"v1 = {TOUCH}; v1"), r"op node body\[0\]: out: .* is not a name"),
    ("op.out-dunder", node_field("v1", "out", "__builtins__"), r"op node body\[0\]: out: '__builtins__' is not a name"),
    ("op.out-builtin", node_field("v1", "out", "print"), r"op node body\[0\]: out: 'print' is not a name"),
    ("op.args", node_field("v1", "args", ["x1", f"{TOUCH} or x0"]), r"op node v1: args\[1\]: .* is neither a value's name"),
    ("op.op", node_field("v1", "op", "os.system"), r"op node v1: no op spec named 'os\.system'"),
    ("op.params", node_field("r1", "params", {"shape": f"{TOUCH} or -1", "descs": [["rest"]]}),
     r"op node r1: param 'shape' of op 'reshape' renders to code that uses '__import__'"),
    ("op.params-statement", node_field("r1", "params", {"shape": f"-1)\nimport os\nos.system('touch {MARKER}'", "descs": []}),
     r"op node r1: param 'shape' of op 'reshape' renders to code that uses import syntax"),
    ("op.params-object", node_field("r1", "params", {"shape": {"a": 1}, "descs": []}),
     r"op node r1: param 'shape': .* is not a number, a string"),
    ("op.params-format", node_field("d1", "params", {"cmp": "{0.__class__}", "hint": "", "use": "{0}"}),
     r"op node d1: param 'cmp': .* holds a format field"),
    ("op.params-missing", node_field("r1", "params", {}), r"op node r1: its args and params do not fill the template"),
    ("effect.params", lambda data: body_node(data, kind="effect")["params"].__setitem__("v", f"{TOUCH} or 1"),
     r"effect node body\[\d+\]: param 'v' of op 'fill_' renders to code that uses '__import__'"),
    ("node.kind", lambda data: data["case"]["program"]["body"].append({"kind": "exec", "code": TOUCH}),
     r"kind 'exec' is not a node kind this symfuzz knows"),
    ("node.extra-field", node_field("n3", "code", TOUCH), r"size node\): unknown field 'code'"),
    ("input.name", set_in("case.program.inputs.0.name", "x0=__import__('os')"), r"input 0: name: .* is not a name"),
    ("input.dtype", set_in("case.program.inputs.0.dtype", f"float32, {TOUCH}"),
     r"input x0: dtype .* is not one symfuzz generates"),
    ("input.dims", set_in("case.program.inputs.1.dims", [f"s3; {TOUCH}"]),
     r"input x1: dims\[0\]: .* is neither a size symbol nor a size"),
    ("outputs", lambda data: data["case"]["program"]["outputs"].append(f"v10); {TOUCH}; (v10"),
     r"outputs\[\d+\]: .* is not a name"),
    # -- the schedule
    ("arg.dtype", arg_field("dtype", f"float32, {TOUCH}"), r"schedule: call 0: args\[1\]: dtype .* is not one symfuzz "
     r"generates"),
    ("arg.shape", arg_field("shape", [f"{TOUCH} or 6"]), r"call 0: args\[1\]: shape .* is not a list of sizes"),
    ("arg.seed", arg_field("seed", f"42); {TOUCH}; (0"), r"call 0: args\[1\]: seed .* is not a whole number"),
    ("arg.layout-kind", arg_field("layout", {"kind": TOUCH}), r"call 0: args\[1\]: layout .* is not one of the layouts"),
    ("arg.layout-value", arg_field("layout", {"kind": "strided", "dim": f"0, {TOUCH}", "step": 2}),
     r"call 0: args\[1\]: layout dim .* is not a whole number"),
    ("arg.layout-key", arg_field("layout", {"kind": "contiguous", "code": TOUCH}),
     r"call 0: args\[1\]: layout .* has the unknown key 'code'"),
    ("arg.marks-dim", arg_field("marks", {f"0, {TOUCH}": {"mark": "dynamic"}}),
     r"call 0: args\[1\]: marks: .* is not a dim"),
    ("arg.marks-bound", arg_field("marks", {"0": {"mark": "dynamic", "min": f"2, max={TOUCH}"}}),
     r"call 0: args\[1\]: marks\[0\]\.min .* is not a whole number"),
    ("arg.marks-kind", arg_field("marks", {"0": {"mark": TOUCH}}), r"call 0: args\[1\]: marks\[0\]: .* is not a mark"),
    ("schedule.config-flag", set_in("case.schedule.config", {"dynamo": {f"x = {TOUCH}; y": True}}),
     r"schedule: config\.dynamo: .* is not a flag name"),
    ("schedule.config-group", set_in("case.schedule.config", {f"x = {TOUCH}; y": {}}),
     r"schedule: config .* is not one of dynamo, fx"),
    ("schedule.dynamic", set_in("case.schedule.dynamic", TOUCH), r"schedule: dynamic must be true, false or null"),
    # -- the lane
    ("lane.config-key", lambda data: data["lane"]["config"].__setitem__(f"fx_graph_cache = {TOUCH}; x", False),
     r"field 'lane\.config' has the key .* which is not a flag name"),
    ("lane.config-value", lambda data: data["lane"]["config"].__setitem__("fx_graph_cache", {"a": TOUCH}),
     r"field 'lane\.config\.fx_graph_cache' must be a number, a string, true/false or null"),
    ("lane.env-key", lambda data: data["lane"]["env"].__setitem__("LD_PRELOAD", f"/tmp/{MARKER}.so"),
     r"field 'lane\.env' has the variable 'LD_PRELOAD'; a lane sets only torch's and triton's"),
    ("lane.env-value", lambda data: data["lane"]["env"].__setitem__("TORCHINDUCTOR_FX_GRAPH_CACHE", ["0"]),
     r"field 'lane\.env\.TORCHINDUCTOR_FX_GRAPH_CACHE' must be a string"),
]


def finding_folder(tmp: Path, data: dict) -> Path:
    folder = tmp / "out" / "findings" / data["verdict"]["signature"]
    folder.mkdir(parents=True)
    (folder / "finding.json").write_text(json.dumps(data))
    return folder


def test_the_finding_with_every_node_kind_loads_and_renders():
    """The rows below change one field of this finding each: it is good as it stands."""
    data = good()
    finding = Finding.from_json(data)
    case = Case.from_json(finding.case)
    kinds = {type(n).__name__ for n in case.program.body}
    assert kinds == {"OpNode", "SizeNode", "BranchNode", "CheckNode", "ExprNode", "CondNode", "GraphBreakNode",
                     "EffectNode"}
    ast.parse(case.source)
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case


@pytest.mark.parametrize("command", ["replay", "minify"])
@pytest.mark.parametrize("field, change, message", ROWS, ids=[row[0] for row in ROWS])
def test_a_hostile_field_is_refused_as_it_is_read(field, change, message, command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = good()
    change(data)
    folder = finding_folder(tmp_path, data)
    before = (folder / "finding.json").read_bytes()
    assert symfuzz.cli.main([command, str(folder)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    if command == "replay":  # replay names each finding it skips, then says that none could be read
        assert len(lines) == 2 and lines[1].startswith("symfuzz replay: none of the 1 findings"), err
        assert lines[0].startswith("skipped ") and "finding.json" in lines[0], err
    else:
        assert len(lines) == 1 and lines[0].startswith("symfuzz minify: ") and "finding.json" in lines[0], err
    assert re.search(message, lines[0]), err
    assert "Traceback" not in err
    assert not (tmp_path / MARKER).exists()  # nothing ran
    assert (folder / "finding.json").read_bytes() == before and sorted(p.name for p in folder.iterdir()) == [
        "finding.json"]


def test_the_rows_cover_every_field_that_reaches_source():
    fields = {row[0].split("-")[0] for row in ROWS}
    assert {"size.expr", "branch.cond", "branch.then", "branch.orelse", "check.cond", "expr.expr", "cond.pred",
            "cond.then", "cond.orelse", "cond.operands", "op.out", "op.args", "op.op", "op.params", "effect.params",
            "input.name", "input.dtype", "input.dims", "outputs", "arg.dtype", "arg.shape", "arg.seed", "arg.layout",
            "arg.marks", "schedule.config", "lane.config", "lane.env"} <= fields
    assert len({row[0] for row in ROWS}) == len(ROWS)


def test_a_hostile_stored_corpus_case_or_baseline_repro_is_refused():
    """Stored cases (campaign workers run them) and baseline repros are read by the same parser."""
    data = good()
    node_field("n3", "expr", TOUCH)(data)
    with pytest.raises(FindingFormatError, match=r"is not a stored case symfuzz wrote"):
        check_case(data["case"], what="stored case")
    with pytest.raises(ValueError, match=r"size node n3: expr .* uses '__import__'"):
        Case.from_json(data["case"])


def test_text_from_a_finding_stays_inside_the_repro_docstring(tmp_path):
    """Verdict, lane and environment text lands in the repro's docstring: quotes, backslashes,
    NULs and carriage returns in it cannot end the docstring, and it holds the text as written."""
    from symfuzz.corpus.scripts import render_repro
    from symfuzz.corpus.short_repro import render_short

    nasty = f'2.13"""\nimport os; os.system("touch {MARKER}")\n"""\\'
    data = good()
    data["environment"]["torch"] = nasty + "\x00\r\ud800"
    data["lane"]["name"] = 'inductor"""\\'
    backend = data["lane"]["backend"] = f"inductor'); {TOUCH}; ('"  # repr'd where it is code
    finding = Finding.from_json(data)
    for script in (render_repro(finding), render_short(finding)):
        tree = ast.parse(script)
        doc = ast.get_docstring(tree, clean=False)
        assert nasty + "\x00\r\ud800" in doc
        assert not any(isinstance(n, ast.Import) and any(a.name == "os" for a in n.names) and n.col_offset == 0
                       and n.lineno > 1 and script.splitlines()[n.lineno - 1].startswith("import os;") for n in tree.body)
        assert backend in {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
        script.encode("utf-8")  # a lone surrogate is escaped: the script can be written
    assert not (tmp_path / MARKER).exists()


# ---------------------------------------------------------------- every generated program passes


def generated_cases_pass(seeds, count, ops=None):
    from symfuzz.fuzz.drawing import generate
    from symfuzz.fuzz.generate import GenConfig

    config = GenConfig(ops=ops) if ops else GenConfig()
    for seed in seeds:
        for index in range(count):
            case = generate(seed, index, config)
            read = Case.from_json(json.loads(json.dumps(case.to_json())))  # raises on anything refused
            assert read.source == case.source


def test_generated_programs_pass_the_check():
    generated_cases_pass((0, 1, 2), 12)


@pytest.mark.slow
@pytest.mark.parametrize("family", [None, "datadep", "inplace", "view", "factory", "indexing", "nn", "linalg"])
def test_many_generated_programs_pass_the_check(family):
    from symfuzz.fuzz.specs import all_specs

    ops = tuple(s.name for s in all_specs() if s.family == family) if family else None
    generated_cases_pass((3, 4, 5), 100 if family is None else 30, ops)


# ---------------------------------------------------------------- the attribute list


GENERATOR_MODULES = ["symfuzz.fuzz.generate", "symfuzz.fuzz.ir", "symfuzz.fuzz.specs.base", "symfuzz.fuzz.motifs",
                     "symfuzz.fuzz.size_forms", "symfuzz.fuzz.scalars", "symfuzz.fuzz.modules",
                     "symfuzz.fuzz.ir_nodes", "symfuzz.fuzz.ir_check", "symfuzz.fuzz.worlds",
                     "symfuzz.fuzz.op_statements", "symfuzz.fuzz.size_statements"] + [
    f"symfuzz.fuzz.specs.{family}" for family in ("pointwise", "reduction", "view", "indexing", "linalg", "nn",
                                                  "inplace", "datadep", "factory")]


def test_every_attribute_the_generator_writes_is_allowed():
    """Attributes in the generator's source text (``.name`` in a string, or a string that starts
    ``name(`` as the in-place forms do): a new spec's method must be added to ``ir_check.ATTRIBUTES``."""
    written = set()
    for module in GENERATOR_MODULES:
        tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
        prose = set()  # docstrings and error messages: not source the generator writes
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                prose.add(id(body[0].value))
            if isinstance(node, (ast.Raise, ast.Call)) and isinstance(node, ast.Raise) or (
                    isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "warn"):
                prose |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                written |= set(re.findall(r"\.\s*([A-Za-z_]\w*)", node.value))
                lead = re.match(r"([a-z]\w*_)\(", node.value)  # "neg_()", pasted after "{0}."
                written |= {lead.group(1)} if lead else set()
    missing = sorted(written - ir_check.ATTRIBUTES - ir_check.BUILTINS - ir_check.SCAFFOLD_ATTRIBUTES)
    assert not missing, f"add to fuzz/ir_check.py ATTRIBUTES: {missing}"


def test_the_allowed_attributes_reach_no_module_but_torch_s_own():
    """``torch.os.system`` has no underscore: attributes are allowed by name, and none of them
    leads from torch, F, math or a tensor to a module other than torch's functional ones."""
    import math

    import torch
    import torch.nn.functional as F

    allowed = {torch, F, math, torch.nn, torch.linalg, torch._dynamo, torch.functional}
    assert not {"os", "sys", "system", "load", "save", "hub", "ops", "utils", "jit", "library", "builtins",
                "importlib", "subprocess", "from_file", "classes", "package", "serialization"} & ir_check.ATTRIBUTES
    seen, queue = set(), [torch, F, math, torch.zeros(2, 2)]
    while queue:
        base = queue.pop()
        for name in ir_check.ATTRIBUTES:
            value = getattr(base, name, None)
            if isinstance(value, types.ModuleType):
                assert value in allowed, f"{getattr(base, '__name__', base)!s:.40}.{name} is the module {value.__name__}"
                if id(value) not in seen:
                    seen.add(id(value))
                    queue.append(value)
