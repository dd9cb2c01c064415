"""Reusing an --out folder: refused when it holds another run, continued with --resume.

A campaign writes what it needs to continue into ``OUT/campaign-state.json`` (beside
stats.json, at the same moments): the counters behind stats.json, the case indices
it finished, the corpus cases it replayed, and what fixes its cases and their checks
(``symfuzz.settings.RunSettings.identity``: seed, lane, shard, generator settings, guard
planning, reused calls; and the torch version). ``--resume`` checks that the new run
draws the same cases, then carries the counters over and runs the indices not yet
finished. Without ``--resume``, a folder that is not empty is refused: stats that
restart beside findings that stay would count duplicates wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from symfuzz.corpus.finding import read_json_file

STATE_FILE = "campaign-state.json"
STATE_VERSION = 1


class OutFolderError(Exception):
    """--out cannot take this run (it holds another run and --resume was not given, or
    --resume does not match it): a usage mistake, exit 2, said in one line."""


def identity(config, torch_version: Optional[str]) -> dict:
    """What fixes case i of a campaign and the checks made on it (``RunSettings.identity``,
    and the torch version): a resumed run must draw the same cases and check them alike."""
    return {**config.settings.identity(), "torch": torch_version}


# How each identity key is spelled on the command line, for the messages.
_FLAGS = {"seed": "--seed", "lane": "--lane", "shard": "--shard",
          "gen_config": "--ops/--max-ops/--translation-validation/--module-rate/--gradient-share",
          "guard_planning": "--no-guard-planning", "reuse_calls": "--reuse-calls", "guidance": "--guidance",
          "torch": "torch",
          "confirm": "--no-confirm", "source": "--source", "models": "--models"}


def check_out_folder(config, torch_version: Optional[str]) -> Optional[dict]:
    """The state to resume from (None: start a new campaign); raises OutFolderError."""
    out = Path(config.out)
    if out.exists() and not out.is_dir():
        raise OutFolderError(f"--out {out} exists and is not a folder; pick a folder")
    # The case corpus may live inside --out (--corpus OUT/corpus, restored from a CI cache).
    corpus = Path(config.corpus).resolve() if getattr(config, "corpus", None) else None
    # Hidden files (.gitkeep, .DS_Store) are not a run.
    entries = sorted(p.name for p in out.iterdir() if p.resolve() != corpus and not p.name.startswith(".")) \
        if out.is_dir() else []
    if not entries:
        return None
    if not config.resume:
        raise OutFolderError(f"--out {out} already holds {_describe(out, entries)}; continue that campaign with "
                             f"--resume, or pick an empty --out (or delete this one)")
    state = _read_state(out)
    mine = identity(config, torch_version)
    theirs = _upgraded(state.get("identity") or {})
    # A state from before the settings record holds no reuse_calls: not compared.
    # A state from before guidance ran every case fresh: guidance 0.
    theirs = {"guidance": 0.0, **theirs} if "reuse_calls" in theirs else theirs
    theirs = {"source": "random", "models": [], **theirs}  # a state from before the model source drew random programs only
    different = [key for key in mine if theirs.get(key) != mine[key]
                 and (key in theirs or key not in ("reuse_calls", "guidance"))]
    if different:
        what = "; ".join(f"{_FLAGS[k]}: {_show(theirs.get(k))} there, {_show(mine[k])} now" for k in different)
        raise OutFolderError(f"--resume: {out} holds a campaign that draws other cases ({what}); resume it with "
                             f"the same settings, or pick an empty --out")
    return state


def _upgraded(theirs: dict) -> dict:
    """An identity as this symfuzz writes it: one written before the settings record
    (``RunSettings``) carried guard planning inside the generator settings."""
    if "guard_planning" in theirs or not isinstance(theirs.get("gen_config"), dict):
        return theirs
    gen = dict(theirs["gen_config"])
    return {**theirs, "guard_planning": gen.pop("guard_planning", True), "gen_config": gen}


def write_state(out: Path, config, torch_version: Optional[str], stats, summary: dict, replayed: list,
                wall: float, write_json, workers_wall: Optional[float] = None) -> None:
    """``wall``: the seconds of this run and the ones it resumes; ``workers_wall``: of those,
    the seconds workers were up (the whole wall if None)."""
    write_json(out / STATE_FILE, {
        "version": STATE_VERSION,
        "identity": identity(config, torch_version),
        "wall_seconds": round(wall, 2),
        "workers_wall_seconds": round(wall if workers_wall is None else workers_wall, 2),
        "counts": dict(stats.counts), "seconds": dict(stats.seconds), "ops": dict(stats.ops),
        "graphs_per_call": dict(stats.graphs_per_call), "planned": dict(stats.planned),
        "indices": sorted(stats.indices), "replay": dict(stats.replay), "replayed": sorted(replayed),
        "summary": dict(summary), "features": stats.coverage.to_json(),
    })


def _read_state(out: Path) -> dict:
    path = out / STATE_FILE
    if not path.is_file():
        raise OutFolderError(f"--resume: {out} holds no campaign state ({STATE_FILE} is missing: not a symfuzz fuzz "
                             f"folder, or one from an older symfuzz); pick an empty --out")
    try:  # strictly: UTF-8, no duplicate keys, not too big (nothing in it is executed)
        state = read_json_file(path, 64 * 1024 * 1024, "campaign state")
    except ValueError as exc:
        raise OutFolderError(f"--resume: {path} cannot be read ({exc}); pick an empty --out") from None
    shapes = {"identity": dict, "wall_seconds": (int, float), "counts": dict, "seconds": dict, "ops": dict,
              "graphs_per_call": dict, "planned": dict, "indices": list, "replay": dict, "replayed": list,
              "summary": dict}
    bad = [key for key, kind in shapes.items() if not isinstance(state.get(key) if isinstance(state, dict) else None,
                                                                  kind)]
    if not bad:
        numbers = (int, float)
        bad = [key for key, ok in (
            ("indices", all(isinstance(i, int) and not isinstance(i, bool) for i in state["indices"])),
            ("replayed", all(isinstance(n, str) for n in state["replayed"])),
            ("workers_wall_seconds", isinstance(state.get("workers_wall_seconds", 0.0), numbers)
             and not isinstance(state.get("workers_wall_seconds"), bool)),
            *((key, all(isinstance(k, str) and isinstance(v, numbers) and not isinstance(v, bool)
                        for k, v in state[key].items()))
              for key in ("counts", "seconds", "ops", "graphs_per_call", "planned", "summary")),
        ) if not ok]
    if bad or state.get("version") != STATE_VERSION:
        what = f"field(s) {', '.join(bad)} missing or of the wrong type" if bad else f"version {state.get('version')!r}"
        raise OutFolderError(f"--resume: {path} is not a state this symfuzz wrote ({what}); pick an empty --out")
    return state


def _describe(out: Path, entries: list[str]) -> str:
    try:
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        programs = stats["programs"]["generated"]
        findings = stats["findings"]["confirmed"]
        return f"an earlier campaign (seed {stats['seed']}, {programs} programs, {findings} confirmed findings)"
    except (OSError, ValueError, KeyError, TypeError):
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        return f"{len(entries)} other file(s) ({shown})"


def _show(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
