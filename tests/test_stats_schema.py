"""stats.json's counted sections are declared once (symfuzz/stats_schema.py): the campaign writes
them from there, merge adds up what is declared there, and the reports check those types."""

from __future__ import annotations

import ast
from collections import Counter
from types import SimpleNamespace

import pytest

from conftest import ROOT
from symfuzz import merge, report
from symfuzz.stats import Stats
from symfuzz.stats_schema import COUNT, COUNTS, RATIO, SECTIONS, keys_of, section, summed

UNIT_TIER = True


def _campaign_stats() -> dict:
    config = SimpleNamespace(jobs=2, seed=0, lane=SimpleNamespace(name="eager"), max_cases=None, shard=None,
                             executor="local", budget=60.0, settings=SimpleNamespace(to_json=dict))
    stats = Stats(config)
    stats.counts.update({counter: n + 1 for section in SECTIONS.values()
                         for n, (kind, counter) in enumerate(section.values()) if kind == COUNT})
    return stats.to_json(10.0, {})


def test_the_campaign_writes_exactly_the_declared_keys_from_its_counters(monkeypatch):
    monkeypatch.setattr("symfuzz.stats.environment", lambda: {})
    written = _campaign_stats()
    for name, keys in SECTIONS.items():
        assert list(written[name]) == list(keys), name
        for n, (key, (kind, counter)) in enumerate(keys.items()):
            if kind == COUNT:
                assert written[name][key] == n + 1, (name, key)
            elif kind == COUNTS:
                assert isinstance(written[name][key], dict), (name, key)
    assert report.stats_problem(written) is None


def test_merge_and_the_reports_read_their_keys_from_the_schema():
    assert merge._SUMMED == {name: summed(name) for name in SECTIONS}
    for name in SECTIONS:
        assert set(summed(name)) | set(keys_of(name, RATIO)) == set(SECTIONS[name])
        named, _ = report.SECTION_TYPES[name]
        assert set(named) == set(keys_of(name, COUNTS))


def test_no_other_module_keeps_its_own_list_of_stats_keys():
    """A literal tuple, list, set or dict holding three or more counts of one section, anywhere in
    the app but the schema, is a second list to keep in step. (The campaign's computed values, the
    ratios and objects of counts, are checked against the schema when it writes them.)"""
    found = []
    for path in sorted((ROOT / "symfuzz").glob("*.py")):
        if path.name == "stats_schema.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                strings = Counter(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
                for name, keys in SECTIONS.items():
                    if len(set(strings) & set(keys_of(name, COUNT))) >= 3:
                        found.append(f"{path.name}:{node.lineno} ({name})")
    assert not found, found


def test_a_computed_value_the_schema_does_not_declare_is_refused():
    with pytest.raises(KeyError, match="bogus"):
        section("programs", Counter(), {"validity_rate": 1.0, "bogus": 2})
    with pytest.raises(KeyError, match="validity_rate"):
        section("programs", Counter(), {})


def test_each_kind_of_generated_case_counts_the_features_it_reached_first_and_its_seconds(monkeypatch):
    """stats.json guidance: what each kind (fresh, steered, mutant) reached first, and the worker
    seconds its cases took (benchmarks/features.py divides them); a corpus replay is no kind."""
    from symfuzz.messages import CaseResult

    monkeypatch.setattr("symfuzz.stats.environment", lambda: {})
    config = SimpleNamespace(jobs=1, seed=0, lane=SimpleNamespace(name="eager"), max_cases=None, shard=None,
                             executor="local", budget=60.0, settings=SimpleNamespace(to_json=dict))
    stats = Stats(config)
    origins = {"fresh": {}, "steered": {"steered": {"ops": ["add"]}}, "mutant": {"mutant": {"edit": "op"}}}

    def finish(index, kind, reached, seconds):
        result = CaseResult(valid=True, reached=reached, case={"origin": origins[kind]}, total_seconds=seconds)
        stats.add_result(index, result, [])

    finish(0, "fresh", {"guard": ["s <= c", "Eq(s,c)"]}, 2.0)
    finish(1, "steered", {"guard": ["s <= c"], "index": ["FloorDiv[symbolic-divisor]"]}, 3.0)  # one new
    finish(2, "mutant", {"guard": ["Eq(s,c)"]}, 1.5)  # nothing new
    finish(3, "fresh", {"lowering": ["lowered:aten.add.Tensor"]}, 4.0)
    finish("corpus:abc", "steered", {"assert": ["Eq(u,c)"]}, 9.0)  # a replay: counted in no kind
    guided = stats.to_json(10.0, {})["guidance"]
    assert guided["new_features_by_kind"] == {"fresh": 3, "steered": 1, "mutant": 0}
    assert guided["seconds_by_kind"] == {"fresh": 6.0, "steered": 3.0, "mutant": 1.5}
