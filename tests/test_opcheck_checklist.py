"""opcheck's checks are declared once, in opcheck/checklist.py, and read from there by everything else."""

pytest_plugins = ["pytester"]

import ast

import pytest
from conftest import ROOT
from opcheck_ops import buggy  # noqa: F401 - registers symfuzz_buggy::cube

from symfuzz.cli import main
from symfuzz.opcheck import api, checklist, plugin, plugin_settings, store
from symfuzz.opcheck import cli as opcheck_cli
from symfuzz.opcheck.checklist import CHECKS, SPECS

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

OPCHECK = ROOT / "opcheck"
TABLE = OPCHECK / "checklist.py"
_ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}


def _name_literals(source: str) -> list[tuple[int, str]]:
    """[(line, text)] of the string constants in ``source`` that spell a check's name or store key,
    except those naming an attribute (``getattr(x, "schema")``)."""
    spellings = set(CHECKS) | {"test_" + name for name in CHECKS}
    tree = ast.parse(source)
    attribute_names = {id(node.args[1]) for node in ast.walk(tree)
                       if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                       and node.func.id in _ATTRIBUTE_CALLS and len(node.args) > 1}
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in spellings and id(node) not in attribute_names)


def test_no_check_name_is_spelled_out_outside_the_table():
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in sorted(OPCHECK.rglob("*.py"))
             if path != TABLE for line, text in _name_literals(path.read_text())]
    assert not found, ("check names belong to opcheck/checklist.py alone; refer to a check by its record "
                       "(FAKETENSOR.name) or read the table:\n" + "\n".join(found))


def test_the_table_spells_each_name_exactly_once():
    assert sorted(text for _, text in _name_literals(TABLE.read_text())) == sorted(CHECKS)
    assert len(set(CHECKS)) == len(CHECKS)


def test_a_hard_coded_name_list_is_seen():
    source = 'WANTED = ("schema", "test_faketensor")\nif check == "gradient":\n    x = getattr(op, "schema", None)\n'
    assert _name_literals(source) == [(1, "schema"), (1, "test_faketensor"), (2, "gradient")]


def test_records_are_complete_and_prerequisites_run_first():
    seen = []
    for spec in SPECS:
        assert spec.weight > 0 and spec.description
        assert all(p in seen for p in spec.prerequisites), f"{spec.name}: a prerequisite must come before it"
        assert spec.grads in (checklist.NO_GRADS, checklist.ALL_GRADS, checklist.GRADS_IF_REGISTERED)
        assert spec.edges is not None or spec.examples > 0, f"{spec.name} would try nothing beyond the sample"
        seen.append(spec.name)
    assert checklist.BY_NAME == {spec.name: spec for spec in SPECS}


def test_every_judge_and_edge_rule_resolves():
    # Every check's repro snippet is rendered by tests/test_quality_opcheck.py.
    for spec in SPECS:
        assert callable(spec.judge.resolve()), spec.name
        assert all(edge.sizes in api._EDGE_SIZES for edge in spec.edges or ()), spec.name


def test_check_names_accepts_the_tables_names_and_the_store_spelling():
    assert checklist.check_names(reversed(CHECKS)) == list(CHECKS)
    assert checklist.check_names([" test_faketensor", "schema"]) == ["schema", "faketensor"]
    with pytest.raises(ValueError, match="unknown check[(]s[)] nope; choose from " + ", ".join(CHECKS)):
        checklist.check_names(["schema", "nope"])


def test_the_store_knows_exactly_the_tables_checks():
    assert store.CHECKS == CHECKS
    xfails = store.XfailStore("x.json")
    for name in CHECKS:
        assert xfails.expected("mylib::op", name) == ("success", "")
    with pytest.raises(ValueError, match=", ".join(CHECKS)):
        xfails.expected("mylib::op", "nope")


def test_the_cli_takes_exactly_the_tables_checks(capsys, monkeypatch):
    tasks = []
    monkeypatch.setattr(opcheck_cli, "run_ops", lambda task, **kwargs: tasks.append(task) or [])
    for given, wanted in [(",".join(reversed(CHECKS)), list(CHECKS)), ("test_gradient", ["gradient"])]:
        assert main(["opcheck", "symfuzz_buggy::cube", "--checks", given, "--quiet"]) == 0
        assert tasks.pop().checks == wanted
    assert main(["opcheck", "symfuzz_buggy::cube", "--checks", "nope"]) == 2
    assert "choose from " + ", ".join(CHECKS) in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["opcheck", "--help"])
    help_text = capsys.readouterr().out
    assert "(default all: " + ", ".join(CHECKS) + ")" in " ".join(help_text.split())
    for spec in SPECS:
        assert f"  {spec.name} " in help_text and spec.description in help_text


class _Options:
    """Records what pytest_addoption declares."""

    def __init__(self):
        self.help = {}

    def getgroup(self, *args):
        return self

    def addoption(self, *names, **kwargs):
        self.help.update(dict.fromkeys(names, kwargs.get("help", "")))

    def addini(self, *args, **kwargs):
        pass


def test_the_plugin_takes_exactly_the_tables_checks(pytester):
    assert plugin.CHECKS is CHECKS
    config = pytester.parseconfig("--opcheck", "--opcheck-namespaces=mylib",
                                  "--opcheck-checks=" + ",".join(reversed(CHECKS)))
    assert plugin_settings._settings(config).checks == list(CHECKS)
    config = pytester.parseconfig("--opcheck", "--opcheck-namespaces=mylib", "--opcheck-checks=schema,nope")
    with pytest.raises(pytest.UsageError, match="choose from " + ", ".join(CHECKS)):
        plugin_settings._settings(config)
    options = _Options()
    plugin.pytest_addoption(options)
    assert "default all: " + ", ".join(CHECKS) in options.help["--opcheck-checks"]
