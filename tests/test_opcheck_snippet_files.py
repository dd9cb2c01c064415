"""Where opcheck's repro snippets go, and the helpers file they share (opcheck/snippet_files.py)."""

from __future__ import annotations

import ast

from symfuzz.corpus.scripts import render_snippet
from symfuzz.opcheck.checklist import LAYOUT_CONSISTENCY
from symfuzz.opcheck.snippet_files import ALWAYS, CHECK_PIECES, SHARED, shared_source, snippet_path, write_snippet

UNIT_TIER = True


def test_the_plugin_and_the_cli_name_a_snippet_one_way(tmp_path):
    assert snippet_path(tmp_path, "mylib::op.default", "faketensor") == tmp_path / "mylib__op.default__faketensor.py"
    assert snippet_path(tmp_path, "mylib::op", "schema").name == "mylib__op__schema.py"


def test_a_snippet_is_written_with_the_helpers_it_imports_beside_it(tmp_path):
    pieces = [*ALWAYS, *CHECK_PIECES[LAYOUT_CONSISTENCY.name]]
    text = render_snippet("a snippet", "x = make_input((2, 3), torch.float32, 0, 'sliced')\nprint(compare(x, x))",
                          helpers=pieces, shared=SHARED)
    path = write_snippet(tmp_path / "repros", "mylib::op", LAYOUT_CONSISTENCY.name, text)
    assert path.read_text() == text.rstrip("\n") + "\n"
    helpers = (tmp_path / "repros" / f"{SHARED}.py").read_text()
    assert helpers == shared_source()
    defined = {t.id for n in ast.parse(helpers).body if isinstance(n, ast.Assign) for t in n.targets
               if isinstance(t, ast.Name)} | {n.name for n in ast.parse(helpers).body
                                               if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    [imported] = [n for n in ast.parse(text).body if isinstance(n, ast.ImportFrom) and n.module == SHARED]
    assert {a.name for a in imported.names} == {"make_input", "import_registering", "lookup_op", "compare",
                                                "run_laid_out"}
    assert {a.name for a in imported.names} <= defined
    # Every piece any check's snippet imports is there, pasted from symfuzz's source: only torch needed.
    for _, names in (*ALWAYS, *(p for pieces in CHECK_PIECES.values() for p in pieces)):
        assert set(names) <= defined, names
    imports = {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else n.module.split(".")[0]
               for n in ast.walk(ast.parse(helpers)) if isinstance(n, (ast.Import, ast.ImportFrom)) and
               (not isinstance(n, ast.ImportFrom) or n.level == 0)}
    assert "symfuzz" not in imports
    assert len(text.splitlines()) < 40  # the helpers are not pasted into it
