"""``symfuzz merge OUT1 OUT2 ... --out DIR``: one OUT folder from several campaigns.

Shards of one seed (``--shard K/N``) run side by side on separate machines; their
OUT folders, merged, read like the unsharded run's. Runs that are not shards (other
seeds, other days) merge too, as long as they fuzzed the same lane.

What a merge writes (docs/output.md describes each file):

- ``findings/``, ``flaky/``, ``unconfirmed/``, ``suspect/``: one folder per
  signature. The representative (``finding.json``, ``repro.py``, ``minified/``...)
  is the source finding whose case has the smallest index (then seed, then source),
  so the result does not depend on the order the sources are given in; every
  other source's ``finding.json`` for that signature, and every source's
  ``duplicates.jsonl`` lines, become the merged ``duplicates.jsonl`` (sorted by
  case index): no duplicate is lost.
- ``candidates.jsonl`` and ``internal_errors.jsonl``: the sources' lines, one
  source after the other; ``internal_errors.json``: the causes, counted together.
- ``timeline.jsonl``: every source's lines with a ``"source"`` field (``"K/N"``
  for a shard, else the folder's name), sorted by (source, t).
- ``corpus/cases/``: the union of the sources' ``corpus/cases/*.json`` (one file
  name is one case).
- ``stats.json``: sums where counts add up, ratios recomputed from the sums,
  ``wall_seconds`` the longest source (shards run side by side) and
  ``wall_seconds_total`` their sum, ``findings.duplicates`` the sources' counts
  plus each source finding that another source's now represents; a key this
  module does not know keeps the first source's value and is named in
  ``merge_notes``; see ``merge_stats``.
- ``merged.json``: the marker of a merge output, with the sources it came from.

Not merged: ``gate.json`` (judge the merged findings again), ``report/``
(``symfuzz report`` renders it from the merged files), worker logs and caches.

Sources are read and never changed. DIR must be new, empty, or an earlier merge
output (one with ``merged.json``), which is replaced whole; the merge is built in
a folder beside DIR and renamed into place, so a merge that fails leaves DIR as
it was. Old OUT folders (without timeline.jsonl, a corpus, ``indices`` or
``shard`` in stats.json) merge too: what they lack is left out.

This module reads JSON files only: it imports neither torch nor the fuzzer.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symfuzz.coverage import merged as merged_features
from symfuzz.corpus.atomic import write_json, write_text
from symfuzz.report import stats_problem, throughput
from symfuzz.stats_schema import RATIO, SECTIONS, keys_of, summed

MARKER = "merged.json"
STORES = ("findings", "flaky", "unconfirmed", "suspect")  # one folder per signature, each


class MergeError(ValueError):
    """A bad input (not a symfuzz OUT, DIR is one of the inputs, mixed seeds or lanes...): one line."""


@dataclass
class Source:
    path: Path
    stats: dict
    label: str  # "K/N" for a shard, else the folder's name
    shards: list  # [(K, N), ...]: the shards this folder holds; empty if it is no shard

    @property
    def order(self) -> tuple:
        """Where this source sorts: shards by (N, K), other folders by label."""
        if self.shards:
            k, n = self.shards[0]
            return (0, n, k, "")
        return (1, 0, 0, self.label)


# ------------------------------------------------------------------ entry point


def merge_outputs(sources: list[Path], dest: Path) -> dict:
    """Merge the OUT folders ``sources`` into ``dest``; return the merged stats.json content.

    Raises MergeError for a bad input; nothing is written then.
    """
    loaded = _load_sources([Path(s) for s in sources])
    dest = Path(dest)
    _check_dest(dest, loaded)
    shards = _check_compatible(loaded)
    build = dest.parent / f".{dest.name}.merging-{secrets.token_hex(4)}"
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        build.mkdir()  # not mkdtemp: its private mode would stay on the renamed folder
    except OSError as exc:
        raise MergeError(f"cannot write to --out {dest}: {exc.strerror or exc}; pick a writable folder") from None
    try:
        counts = {store: _merge_store(store, loaded, build) for store in STORES}
        _concatenate("candidates.jsonl", loaded, build)
        _concatenate("internal_errors.jsonl", loaded, build, add_source=True)
        _merge_internal_errors(loaded, build)
        _merge_timeline(loaded, build)
        _merge_corpus(loaded, build)
        stats = merge_stats(loaded, shards, duplicates=counts["findings"]["demoted"])
        _pick_minified(stats, loaded, counts["findings"]["representatives"], dest)
        write_json(build / "stats.json", stats)
        # the marker last: its presence says the folder is a whole merge output
        write_json(build / MARKER, {"merged_by": "symfuzz merge",
                                    "sources": [{"path": str(s.path.resolve()), "label": s.label,
                                                 "shard": [list(k) for k in s.shards] or None,
                                                 "seed": s.stats.get("seed")} for s in loaded]})
        _move_into_place(build, dest)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return stats


# ------------------------------------------------------------------ inputs


def _load_sources(paths: list[Path]) -> list[Source]:
    if not paths:
        raise MergeError("nothing to merge: give at least one OUT folder")
    seen: dict[Path, Path] = {}
    loaded = []
    for path in paths:
        file = path / "stats.json"
        if not file.is_file():
            raise MergeError(f"{path} is not a symfuzz output folder (no stats.json)")
        resolved = path.resolve()
        if resolved in seen:
            raise MergeError(f"{path} is given twice (as {seen[resolved]} too)")
        seen[resolved] = path
        try:
            stats = json.loads(file.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MergeError(f"{file} is not readable JSON: {exc}") from exc
        if not isinstance(stats, dict) or "programs" not in stats:
            raise MergeError(f"{file} is not a symfuzz stats.json (no 'programs')")
        problem = stats_problem(stats) or next(
            (f"{key!r} is {json.dumps(stats[key])[:40]}, not {what}" for key, kind, what in
             (("lane", str, "a lane's name"), ("seed", int, "a whole number"))
             if stats.get(key) is not None and not isinstance(stats[key], kind)), None)
        if problem:
            raise MergeError(f"{file} is not a symfuzz stats.json: {problem}")
        shards = _shards_of(stats, file)
        label = f"{shards[0][0]}/{shards[0][1]}" if len(shards) == 1 else path.resolve().name
        loaded.append(Source(path, stats, label, shards))
    if not all(s.shards for s in loaded):
        for s in loaded:  # not a shard merge: every source goes by its folder's name
            s.label = s.path.resolve().name
            s.shards = []
        names = Counter(s.label for s in loaded)
        for s in loaded:
            if names[s.label] > 1:
                s.label = str(s.path)  # two folders of one name: the paths tell them apart
    elif any(len(s.shards) > 1 for s in loaded):
        for s in loaded:  # a merged source holds several shards: label it by all of them
            s.label = "+".join(f"{k}/{n}" for k, n in s.shards)
    return sorted(loaded, key=lambda s: s.order)


def _shards_of(stats: dict, file: Path) -> list:
    """The (K, N) shards a stats.json says its folder holds ([] for a run that is no shard)."""
    shard = stats.get("shard")
    try:
        if isinstance(shard, dict) and "merged" in shard:
            return sorted((int(k), int(n)) for k, n in shard["merged"])
        if isinstance(shard, dict):
            return [(int(shard["index"]), int(shard["count"]))]
    except (KeyError, TypeError, ValueError) as exc:
        raise MergeError(f"{file}: 'shard' is not a shard ({shard!r}: {exc})") from exc
    return []  # null, absent (an older symfuzz), or a merge of folders that were no shards


def _check_dest(dest: Path, sources: list[Source]) -> None:
    resolved = dest.resolve()
    for s in sources:
        src = s.path.resolve()
        if resolved == src:
            raise MergeError(f"--out {dest} is one of the folders to merge; merge into a new folder")
        if src.is_relative_to(resolved) or resolved.is_relative_to(src):
            raise MergeError(f"--out {dest} and the source {s.path} lie inside one another; "
                             f"merge into a folder beside them")
    if dest.exists() and not dest.is_dir():
        raise MergeError(f"--out {dest} is a file, not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file():
        raise MergeError(f"--out {dest} is not empty and is no earlier merge output (no {MARKER}); "
                         f"give a new or empty folder")


def _check_compatible(sources: list[Source]) -> bool:
    """Refuse sources whose merge would mean nothing; True if they are shards of one run."""
    lanes = {s.stats.get("lane") for s in sources}
    if len(lanes) > 1:
        which = ", ".join(f"{s.path} is {s.stats.get('lane')}" for s in sources)
        raise MergeError(f"cannot merge campaigns of different lanes ({which})")
    if not all(s.shards for s in sources):
        return False
    for key in ("seed", "max_cases"):
        values = {json.dumps(s.stats.get(key)) for s in sources}
        if len(values) > 1:
            which = ", ".join(f"{s.label} has {s.stats.get(key)}" for s in sources)
            raise MergeError(f"cannot merge shards of different runs: their {key} differ ({which})")
    counts = {n for s in sources for _, n in s.shards}
    if len(counts) > 1:
        raise MergeError(f"cannot merge shards of different splits ({', '.join(s.label for s in sources)}): "
                         f"shards K/N of one N only")
    held = Counter(k for s in sources for k in s.shards)
    twice = [f"{k}/{n}" for (k, n), c in sorted(held.items()) if c > 1]
    if twice:
        raise MergeError(f"shard {', '.join(twice)} is in more than one source: its counts would add up twice")
    return True


# ------------------------------------------------------------------ finding stores


def _case_key(finding: dict) -> tuple:
    """Which of several findings of one signature represents it: the smallest case index, then seed."""
    origin = ((finding.get("case") or {}).get("origin") or {}) if isinstance(finding, dict) else {}
    index, seed = origin.get("index"), origin.get("seed")
    return (index if isinstance(index, int) else math.inf, seed if isinstance(seed, int) else math.inf)


def _merge_store(store: str, sources: list[Source], build: Path) -> dict:
    """Merge ``store``/<sig>/ of every source: its signatures, and how many source findings became duplicates."""
    by_sig: dict[str, list] = {}
    for position, s in enumerate(sources):
        root = s.path / store
        if not root.is_dir():
            continue
        # (a hidden folder is a finding a killed writer left before renaming it into place)
        for folder in sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / "finding.json").is_file()):
            finding = _read_json(folder / "finding.json")
            by_sig.setdefault(folder.name, []).append((_case_key(finding), position, folder, finding))
    demoted, representatives = 0, {}
    for sig, entries in sorted(by_sig.items()):
        entries.sort(key=lambda e: (e[0], e[1]))
        _, _, rep_folder, _ = entries[0]
        representatives[sig] = rep_folder
        target = build / store / sig
        duplicates = []
        for key, position, folder, finding in entries:
            if folder is not rep_folder:
                duplicates.append((key, position, {"case": finding.get("case"), "verdict": finding.get("verdict")}))
            for line in _read_lines(folder / "duplicates.jsonl"):
                duplicates.append((_case_key(line), position, line))
        _copy_tree(rep_folder, target, skip={"duplicates.jsonl", "finding.json"})
        duplicates.sort(key=lambda d: (d[0], d[1], json.dumps(d[2], sort_keys=True, default=str)))
        if duplicates:
            write_text(target / "duplicates.jsonl",
                       "".join(json.dumps(d, sort_keys=True, default=str) + "\n" for _, _, d in duplicates))
        demoted += len(entries) - 1
        # finding.json last: its presence marks the folder complete (as in corpus/store.py)
        _copy_file(rep_folder / "finding.json", target / "finding.json")
    return {"signatures": sorted(by_sig), "demoted": demoted, "representatives": representatives}


# ------------------------------------------------------------------ line files, the corpus


def _concatenate(name: str, sources: list[Source], build: Path, add_source: bool = False) -> None:
    lines = []
    for s in sources:
        for line in _read_lines(s.path / name):
            lines.append({**line, "source": line.get("source", s.label)} if add_source else line)
    if lines:
        write_text(build / name, "".join(json.dumps(line, sort_keys=True, default=str) + "\n" for line in lines))


def _merge_timeline(sources: list[Source], build: Path) -> None:
    lines = []
    for s in sources:
        for line in _read_lines(s.path / "timeline.jsonl"):
            lines.append({**line, "source": line.get("source", s.label)})  # a merged source keeps its labels
    if lines:
        lines.sort(key=lambda line: (_label_order(str(line["source"])), _number(line.get("t"))))
        write_text(build / "timeline.jsonl", "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))


def _label_order(label: str) -> tuple:
    match = re.fullmatch(r"(\d+)/(\d+)", label)
    return (0, int(match[2]), int(match[1]), "") if match else (1, 0, 0, label)


def _merge_internal_errors(sources: list[Source], build: Path) -> None:
    groups = [g for s in sources for g in (_read_json(s.path / "internal_errors.json", {}).get("causes") or [])]
    if groups:
        causes = _merge_causes(groups)
        write_json(build / "internal_errors.json", {"total": sum(g.get("count", 0) for g in causes), "causes": causes})


def _merge_causes(groups: Iterable[dict]) -> list[dict]:
    """Internal-error groups by cause: counts add up; the first source's first case and traceback stay."""
    merged: dict[str, dict] = {}
    for group in groups:
        cause = group.get("cause")
        if cause in merged:
            merged[cause]["count"] = merged[cause].get("count", 0) + group.get("count", 0)
        else:
            merged[cause] = dict(group)
    return sorted(merged.values(), key=lambda g: -g.get("count", 0))


def _merge_corpus(sources: list[Source], build: Path) -> None:
    """The union of the sources' corpus/cases/*.json: a file name is a case digest, so one name is one case."""
    for s in sources:
        cases = s.path / "corpus" / "cases"
        if not cases.is_dir():
            continue
        for file in sorted(cases.glob("*.json")):
            target = build / "corpus" / "cases" / file.name
            if not target.exists():
                _copy_file(file, target)


# ------------------------------------------------------------------ stats.json

# Sections whose numbers add up across sources (a dict value: its keys add up too): stats_schema's.
_SUMMED = {name: summed(name) for name in SECTIONS}
# Keys whose value is one setting of the run: kept when the sources agree.
_SETTINGS = ("jobs", "budget_seconds", "executor")


def merge_stats(sources: list[Source], shards: bool, duplicates: int) -> dict:
    """The merged stats.json of ``sources`` (sorted as merge_outputs sorts them);
    ``duplicates``: how many findings/<sig>/finding.json of the sources became duplicates
    (another source's finding represents their signature)."""
    first = sources[0].stats
    notes: list[str] = []
    out: dict[str, Any] = {}
    handled: set[str] = set()

    def take(key: str, value) -> None:
        handled.add(key)
        out[key] = value

    def present(key: str) -> list:
        return [s.stats[key] for s in sources if key in s.stats]

    take("lane", first.get("lane"))
    seeds = sorted({seed for s in sources for seed in (s.stats.get("seeds") or [s.stats.get("seed")])},
                   key=lambda v: (v is None, v))
    take("seed", seeds[0] if len(seeds) == 1 else None)
    if len(seeds) > 1:
        take("seeds", seeds)
    handled.add("seeds")
    if present("max_cases"):
        values = {json.dumps(s.stats.get("max_cases")) for s in sources}
        take("max_cases", first.get("max_cases") if len(values) == 1 else None)
        if len(values) > 1:
            notes.append("max_cases differ: " + ", ".join(f"{s.label}: {s.stats.get('max_cases')}" for s in sources))
    for key in _SETTINGS:
        if present(key):
            values = [s.stats.get(key) for s in sources]
            take(key, values[0])
            if len({json.dumps(v) for v in values}) > 1:
                notes.append(f"{key} differ (kept {values[0]!r}): "
                             + ", ".join(f"{s.label}: {s.stats.get(key)!r}" for s in sources))
    if shards:
        take("shard", {"merged": sorted(list(k) for s in sources for k in s.shards)})
        held = {k for s in sources for k, _ in s.shards}
        count = sources[0].shards[0][1]
        missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in held]
        if missing:
            notes.append(f"shards missing: {', '.join(missing)} (the counts are of the shards merged)")
    else:
        names = []
        for s in sources:
            shard = s.stats.get("shard")
            names.extend(shard if isinstance(shard, list) else [s.label])
        take("shard", names)
    if present("settings"):
        # One campaign's settings record (symfuzz.settings.RunSettings); each shard's names its
        # own shard, which "shard" above merges. The rest should agree.
        settings = [{k: v for k, v in (s.stats.get("settings") or {}).items() if k != "shard"} for s in sources]
        take("settings", settings[0])
        differ = sorted({k for other in settings[1:] for k in set(other) | set(settings[0])
                         if other.get(k) != settings[0].get(k)})
        if differ:
            notes.append(f"settings differ ({', '.join(differ)}; kept {sources[0].label}'s)")
    _merge_indices(sources, shards, take, notes)
    if present("replay"):
        take("replay", _merge_replay([s.stats.get("replay") for s in sources], notes))
    walls = [_number(s.stats.get("wall_seconds")) for s in sources]
    take("wall_seconds", round(max(walls), 2))
    take("wall_seconds_total", round(sum(_number(s.stats.get("wall_seconds_total", s.stats.get("wall_seconds")))
                                         for s in sources), 2))
    take("environment", first.get("environment"))
    environments = [s.stats.get("environment") for s in sources]
    if any(e != environments[0] for e in environments):
        take("environments", [{"source": s.label, **(s.stats.get("environment") or {})} for s in sources])
        torches = sorted({str((e or {}).get("torch")) for e in environments})
        if len(torches) > 1:
            notes.append(f"the sources ran different torch versions: {', '.join(torches)}")
    handled.add("environments")

    for section, keys in _SUMMED.items():
        take(section, _sum_section(section, keys, sources, notes))
    programs, calls, guards = out["programs"], out["calls"], out["guards"]
    programs["validity_rate"] = round(programs.get("valid", 0) / max(programs.get("generated", 0), 1), 4)
    graphs = calls.get("graphs_compiled", 0)
    calls["checked_per_compile"] = round(calls.get("checked", 0) / graphs, 3) if graphs else 0
    regions = guards.get("regions", 0)
    guards["coverage"] = round(guards.get("regions_covered", 0) / regions, 4) if regions else 0

    take("findings", _merge_findings(sources, duplicates, notes))
    seconds = _sum_dicts(s.stats.get("time_seconds") or {} for s in sources)
    take("time_seconds", {k: round(v, 2) for k, v in seconds.items()})
    total = sum(seconds.values())
    # Each source's shares are of its worker time, which its time_seconds add up to (overhead is the rest).
    take("time_share", {k: round(v / total, 4) if total else 0 for k, v in seconds.items()})
    # Per CPU-minute of the merged worker time (what time_seconds adds up to), as a campaign computes them.
    take("throughput", throughput(programs.get("generated", 0), calls.get("checked", 0), guards.get("regions_covered", 0),
                                  out["wall_seconds"], total))
    take("motifs", dict(sorted(_sum_dicts(s.stats.get("motifs") or {} for s in sources).items())))
    archs = sorted({a for s in sources for a in (s.stats.get("models") or {})})
    take("models", {a: _sum_dicts((s.stats.get("models") or {}).get(a) or {} for s in sources) for a in archs})
    oracle_seconds = _sum_dicts(s.stats.get("oracle_seconds") or {} for s in sources)
    take("oracle_seconds", {k: round(v, 2) for k, v in sorted(oracle_seconds.items())})
    take("features", merged_features(s.stats.get("features") or {} for s in sources))
    ops = _sum_dicts(s.stats.get("ops") or {} for s in sources)
    take("ops", dict(sorted(ops.items())))
    take("distinct_ops", len(ops))
    take("canary", _merge_canary(sources))
    take("health", _merge_health(sources))

    for s in sources:  # a source that is itself a merge keeps its notes
        notes.extend(f"{s.label}: {note}" for note in s.stats.get("merge_notes") or [])
    handled.add("merge_notes")
    for s in sources:  # sorted: the first source that has a key gives its value
        for key, value in s.stats.items():
            if key not in handled:
                handled.add(key)
                out[key] = value
                notes.append(f"'{key}' is not a key symfuzz merge knows: kept {s.label}'s value")
    out["merge_notes"] = notes
    return out


def _merge_indices(sources: list[Source], shards: bool, take, notes: list[str]) -> None:
    lists = [s.stats.get("indices") for s in sources]
    if all(v is None for v in lists):
        return
    if any(v is None for v in lists):  # a partial union would claim cases were not run
        notes.append("indices: left out, since " + ", ".join(s.label for s, v in zip(sources, lists) if v is None)
                     + " did not record them (an older symfuzz)")
        return
    seen: Counter = Counter(i for v in lists for i in set(v))
    again = sorted(i for i, c in seen.items() if c > 1)
    if again and shards:
        raise MergeError(f"the shards overlap: case indices {again[:10]} ran in more than one of them")
    if again and len({s.stats.get("seed") for s in sources}) == 1:
        notes.append(f"{len(again)} case indices of seed {sources[0].stats.get('seed')} ran in more than one "
                     f"source: the sums count those cases more than once")
    take("indices", sorted(seen))


def _merge_replay(replays: list, notes: list[str]) -> dict:
    """The corpus replay phases: cases add up, the first verdict is the earliest, signatures join."""
    replays = [r for r in replays if isinstance(r, dict)]
    firsts = [r["first_verdict_seconds"] for r in replays if r.get("first_verdict_seconds") is not None]
    seconds = [r["seconds"] for r in replays if r.get("seconds") is not None]
    out = {
        "cases": sum(r.get("cases", 0) for r in replays),
        "stored": sum(r.get("stored", 0) for r in replays),  # each shard replays its share of the corpus
        "first_verdict_seconds": min(firsts) if firsts else None,
        "seconds": max(seconds) if seconds else None,  # side by side: the phase ends with the slowest
        "signatures": sorted({sig for r in replays for sig in r.get("signatures") or []}),
    }
    for r in replays:
        for key in r:
            if key not in out:
                out[key] = r[key]
                notes.append(f"'replay.{key}' is not a key symfuzz merge knows: kept the first value")
    return out


def _sum_section(section: str, keys: tuple, sources: list[Source], notes: list[str]) -> dict:
    out: dict[str, Any] = {}
    derived = set(keys_of(section, RATIO))  # recomputed by the caller
    for key in keys:
        values = [(s.stats.get(section) or {}).get(key) for s in sources]
        values = [v for v in values if v is not None]
        if not values:
            continue
        if isinstance(values[0], dict):
            out[key] = dict(sorted(_sum_dicts(values).items()))
        else:
            out[key] = sum(values)
    for s in sources:
        for key, value in (s.stats.get(section) or {}).items():
            if key not in keys and key not in derived and key not in out:
                out[key] = value
                notes.append(f"'{section}.{key}' is not a key symfuzz merge knows: kept {s.label}'s value")
    return out


def _merge_findings(sources: list[Source], duplicates: int, notes: list[str]) -> dict:
    found = [s.stats.get("findings") or {} for s in sources]
    signatures = sorted({sig for f in found for sig in f.get("signatures") or []})
    # A run with --no-confirm lists its signatures but confirms none: only confirming runs' signatures count.
    confirmed = {sig for f in found if f.get("confirmed", 0) >= len(f.get("signatures") or [])
                 for sig in f.get("signatures") or []}
    out = {
        "confirmed": len(confirmed),
        "signatures": signatures,
        # a later case of a confirmed signature, as the campaign counts them, plus each source's
        # finding of a signature another source represents (a twin stored while its signature
        # was being confirmed is a line in duplicates.jsonl but no count, in a campaign too)
        "duplicates": sum(f.get("duplicates", 0) for f in found) + duplicates,
        "interrupted": any(bool(f.get("interrupted")) for f in found),
        "interrupted_by": next((f["interrupted_by"] for f in found if f.get("interrupted_by")), None),
        "minified": {},
    }
    for key in ("reported_unconfirmed", "flaky", "suspect", "unconfirmed"):
        out[key] = sum(f.get(key, 0) for f in found)
    for s, f in zip(sources, found):
        for sig, result in (f.get("minified") or {}).items():
            out["minified"].setdefault(sig, result)
        for key, value in f.items():
            if key not in out:
                out[key] = value
                notes.append(f"'findings.{key}' is not a key symfuzz merge knows: kept {s.label}'s value")
    return out


def _merge_canary(sources: list[Source]) -> dict | None:
    canaries = [(s, s.stats.get("canary")) for s in sources]
    known = [(s, c) for s, c in canaries if isinstance(c, dict)]
    if not known:
        return None
    failed = [(s, c) for s, c in known if not c.get("ok")]
    ok = False if failed else (None if len(known) < len(canaries) else True)
    return {
        "ok": ok,
        "cause": "; ".join(f"{s.label}: {c.get('cause')}" for s, c in failed) or None,
        "seconds": max(_number(c.get("seconds")) for _, c in known),
        "log": (failed or known)[0][1].get("log"),
    }


def _merge_health(sources: list[Source]) -> dict:
    problems, stopped = [], []
    for s in sources:
        health = s.stats.get("health") or {}
        problems.extend(f"{s.label}: {p}" for p in health.get("problems") or [])
        if health.get("stopped_early"):
            stopped.append(f"{s.label}: {health['stopped_early']}")
    causes = _merge_causes(g for s in sources for g in (s.stats.get("health") or {}).get("internal_error_causes") or [])
    return {"problems": problems, "stopped_early": "; ".join(stopped) or None, "internal_error_causes": causes}


def _pick_minified(stats: dict, sources: list[Source], representatives: dict, dest: Path) -> None:
    """findings.minified: for each signature, what minifying its representative gave (else the first
    source's result), with a repro path into the merged folder, which holds a copy of that folder."""
    minified = stats["findings"].get("minified") or {}
    for s in sources:
        for sig, result in ((s.stats.get("findings") or {}).get("minified") or {}).items():
            rep = representatives.get(sig)
            if rep is not None and rep.resolve().parent.parent == s.path.resolve():
                minified[sig] = result
    for sig, result in minified.items():
        repro = result.get("repro") if isinstance(result, dict) else None
        rep = representatives.get(sig)
        if repro and rep is not None and Path(repro).resolve().is_relative_to(rep.resolve()):
            minified[sig] = {**result, "repro": str(dest.resolve() / "findings" / sig
                                                    / Path(repro).resolve().relative_to(rep.resolve()))}


# ------------------------------------------------------------------ small helpers


def _sum_dicts(dicts: Iterable[dict]) -> dict:
    total: dict = {}
    for d in dicts:
        for key, value in d.items():
            total[key] = total.get(key, 0) + value
    return total


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _read_json(path: Path, default=None):
    if default is not None and not path.is_file():
        return default
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MergeError(f"{path} is not readable JSON: {exc}") from exc


def _read_lines(path: Path) -> list[dict]:
    """A .jsonl file's records; a torn last line (a run killed mid-write) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _copy_file(src: Path, dst: Path) -> None:
    """Copy atomically (a temp file, then a rename), keeping the mode (repro.py stays executable)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, src.stat().st_mode & 0o777)
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _copy_tree(src: Path, dst: Path, skip: set[str]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if rel.parts[0] in skip or path.is_symlink():
            continue
        if path.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            _copy_file(path, dst / rel)


def _move_into_place(build: Path, dest: Path) -> None:
    """Rename the finished merge onto ``dest`` (an earlier merge output there is replaced whole)."""
    if dest.is_dir() and any(dest.iterdir()):
        old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.old-"))
        os.replace(dest, old / "merge")
        os.replace(build, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        if dest.is_dir():
            dest.rmdir()
        os.replace(build, dest)


