"""The ground a campaign covered: the compiler features its cases reached, by family and over time.

A case's features (``CaseResult.reached``: family -> name-free features, collected by
``oracles/lanes/compile_features.py``) are what the compiler did with it: guard forms,
index forms in generated kernels, lowerings and fallbacks, unbacked symbols, AOTAutograd's
mutations and saved sizes, graph breaks, recompile classes. ``Coverage`` counts how many
cases reached each feature and says which features a case reached first: those cases are
what guidance mutates (``symfuzz.case_source``), and what stats.json and the HTML report
show under "features".
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

# A feature as one string: "family:feature" (a feature may itself contain ':').
SEP = ":"
# stats.json keeps the over-time curve to this many points (the newest replaces the oldest half's
# every other point), so a long campaign's file stays small.
MAX_POINTS = 400


# The compiler's rare paths that the generator's idioms aim at (fuzz/motifs.py, fuzz/scalars.py,
# fuzz/modules.py), each a pattern over a case's "family:feature" keys: a case is in a class when
# one of its features matches. stats.json counts the cases of each class (``features.classes``),
# so that a run, or benchmarks/idioms.py's two runs side by side, says how often each was reached.
RARE_CLASSES = {
    # Inductor index arithmetic whose divisor or modulus is a size symbol (views and reshapes of
    # non-contiguous tensors produce it)
    "symbolic-divisor-index": r"index:.*\[(symbolic|index)-(divisor|modulus)\]",
    # a Python number compiled as a symbol: it changed between calls (or was marked dynamic)
    "symbolic-python-number": r"specialize:dynamic-python-int$",
    # a Python number the graph specialized on (a guard on its value)
    "specialized-python-number": r"specialize:python-number:",
    # sizes that only the values know (nonzero, .item(), a slice by a data-dependent length)
    "unbacked-symbol": r"unbacked:created:",
    "data-dependent-guard": r"unbacked:guard-on-unbacked$",
    "backward-compiled": r"aot:graph:backward$",
    "sizes-saved-for-backward": r"aot:symints-saved:(?!0$)",
    "input-mutation": r"aot:input:mutates-(data|metadata|storage_metadata)$",
    "graph-break": r"dynamo:break:",
    "recompile": r"recompile:",
    "automatic-dynamic": r"specialize:automatic-dynamic:static->dynamic$",
}
_CLASS_PATTERNS = {name: re.compile(pattern) for name, pattern in RARE_CLASSES.items()}


def classes_of(keys: Iterable[str]) -> list[str]:
    """The rare classes (``RARE_CLASSES``) that a case with these feature keys is in, in table order."""
    keys = list(keys)
    return [name for name, pattern in _CLASS_PATTERNS.items() if any(pattern.match(k) for k in keys)]


def feature_keys(reached: dict) -> list[str]:
    """A case's features as "family:feature" strings, sorted."""
    keys = set()
    for family, features in (reached or {}).items():
        for feature in features or ():
            keys.add(f"{family}{SEP}{feature}")
    return sorted(keys)


def guide_kind(case: dict) -> str:
    """How a case was drawn (``symfuzz.case_source``): "mutant" (of an earlier case), "steered"
    (toward the least-used ops) or "fresh". A mutant whose every edit failed, so that the fresh
    draw stood in, is fresh."""
    origin = (case or {}).get("origin") or {}
    if (origin.get("mutant") or {}).get("edit"):
        return "mutant"
    return "steered" if origin.get("steered") else "fresh"


def family_of(key: str) -> str:
    return key.split(SEP, 1)[0]


class Coverage:
    """Which features the run's cases reached, how many cases reached each, and when."""

    def __init__(self):
        self.cases = Counter()  # "family:feature" -> cases that reached it
        self.points: list[list[float]] = []  # [seconds since the start, distinct features] when it grew
        self.cases_with_new = 0  # cases that reached a feature no earlier case had
        self.classes = Counter()  # rare class (RARE_CLASSES) -> cases in it
        self.counted = 0  # cases counted

    def add(self, reached: dict, elapsed: float) -> list[str]:
        """Count one case's features; return those no earlier case reached."""
        keys = feature_keys(reached)
        new = [k for k in keys if k not in self.cases]
        self.cases.update(keys)
        self.classes.update(classes_of(keys))
        self.counted += 1
        if new:
            self.cases_with_new += 1
            self.points.append([round(elapsed, 2), len(self.cases)])
            if len(self.points) > MAX_POINTS:
                half = len(self.points) // 2
                self.points = self.points[:half:2] + self.points[half:]
        return new

    def by_family(self) -> dict:
        out = Counter(family_of(k) for k in self.cases)
        return dict(sorted(out.items()))

    def to_json(self) -> dict:
        """stats.json's "features" section."""
        reached: dict = {}
        for key, n in sorted(self.cases.items()):
            family, _, feature = key.partition(SEP)
            reached.setdefault(family, {})[feature] = n
        return {"distinct": len(self.cases), "by_family": self.by_family(), "cases_with_new": self.cases_with_new,
                "cases": self.counted, "classes": {name: self.classes[name] for name in RARE_CLASSES},
                "over_time": [list(p) for p in self.points], "reached": reached}

    def restore(self, section: dict) -> None:
        """Carry over a resumed run's features (stats.json's "features" section)."""
        for family, features in (section.get("reached") or {}).items():
            for feature, n in features.items():
                self.cases[f"{family}{SEP}{feature}"] += int(n)
        self.points = [list(p) for p in section.get("over_time") or []]
        self.cases_with_new = int(section.get("cases_with_new") or 0)
        self.classes.update({name: int(n) for name, n in (section.get("classes") or {}).items()})
        self.counted = int(section.get("cases") or 0)


def merged(sections: Iterable[dict]) -> dict:
    """Several runs' "features" sections as one (``symfuzz merge``): cases added up per feature;
    the over-time curve is each run's own, so the merged one keeps none."""
    total = Coverage()
    for section in sections:
        if section:
            other = Coverage()
            other.restore(section)
            total.cases.update(other.cases)
            total.cases_with_new += other.cases_with_new
            total.classes.update(other.classes)
            total.counted += other.counted
    return {**total.to_json(), "over_time": []}
