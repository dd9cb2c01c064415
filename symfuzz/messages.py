"""The worker protocol: the campaign's requests and the worker's events, as typed records.

One JSON object a line, both ways. The campaign writes a request on the worker's stdin
(``Assign``, ``RunCanary``, ``Warmup``); the worker answers on its protocol stream
(``symfuzz.worker``):

    Ready                      once it has imported torch and set up its lane
    Started(index, case)       before anything can crash: a death loses nothing
    Planned(index, case)       guard-directed calls were appended to the case
    Judged(index, verdicts)    the failing verdicts, before triage (which may kill it)
    Result(index, body)        the case is done: ``CaseResult``
    CanaryDone(body)           the canary program's ``CaseResult``
    Warm(ok, total_seconds)    after ``Warmup``: the canary program ran again

Both sides build and read these records only; the JSON keys live here once. Local
workers (``symfuzz.local_worker``) and Ray workers (``symfuzz.ray_executor``) carry the
same lines.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass, field, fields
from typing import Optional, Union

# The index of a replayed corpus case, in place of a generated case's number: "corpus:<its digest>".
CORPUS_PREFIX = "corpus:"


def is_corpus_index(index) -> bool:
    return str(index).startswith(CORPUS_PREFIX)


# ------------------------------------------------------------------ requests


@dataclass(frozen=True)
class Assign:
    """Run case ``index`` (generated from the seed), or the stored ``case`` of a corpus replay.
    ``guide``, for a generated case guided by coverage (``symfuzz.case_source``): a mutant of
    a stored case, ``{"parent": its name, "choices": its Hypothesis choice sequence}``
    (``symfuzz.fuzz.mutate.generate_mutant``), or a draw steered toward the ops the run used
    least, ``{"op_counts": {spec name: cases' uses so far}}`` (``symfuzz.fuzz.steer.generate_steered``)."""

    index: Union[int, str]
    case: Optional[dict] = None
    guide: Optional[dict] = None


@dataclass(frozen=True)
class RunCanary:
    """Run the canary program and answer ``CanaryDone`` (``symfuzz.canary``)."""


@dataclass(frozen=True)
class Warmup:
    """Run the canary program, its result unused, and answer ``Warm``."""


Request = Union[Assign, RunCanary, Warmup]


def encode_request(request: Request) -> str:
    if isinstance(request, Assign):
        data = {"index": request.index} if request.case is None else {"index": request.index, "case": request.case}
        if request.guide is not None:
            data["guide"] = dict(request.guide)
            if "choices" in request.guide:
                data["guide"]["choices"] = encode_choices(request.guide["choices"])
    elif isinstance(request, RunCanary):
        data = {"canary": True}
    else:
        data = {"warmup": True}
    return json.dumps(data)


def decode_request(line: str) -> Request:
    data = json.loads(line)
    if data.get("canary"):
        return RunCanary()
    if data.get("warmup"):
        return Warmup()
    guide = data.get("guide")
    if guide is not None and "choices" in guide:
        guide = {**guide, "choices": decode_choices(guide["choices"])}
    return Assign(data["index"], data.get("case"), guide)


def encode_choices(choices) -> list:
    """A Hypothesis choice sequence as plain JSON, losslessly: booleans, integers, strings and
    finite floats as themselves, other floats as ``{"float": their IEEE bits in hex}`` (every
    NaN kept apart), bytes as ``{"bytes": hex}``."""
    out = []
    for choice in choices:
        if isinstance(choice, float) and not math.isfinite(choice):
            out.append({"float": struct.pack(">d", choice).hex()})
        elif isinstance(choice, bytes):
            out.append({"bytes": choice.hex()})
        else:
            out.append(choice)
    return out


def decode_choices(data) -> list:
    """The choice sequence ``encode_choices`` wrote."""
    out = []
    for choice in data:
        if isinstance(choice, dict) and "float" in choice:
            out.append(struct.unpack(">d", bytes.fromhex(choice["float"]))[0])
        elif isinstance(choice, dict) and "bytes" in choice:
            out.append(bytes.fromhex(choice["bytes"]))
        else:
            out.append(choice)
    return out


# ------------------------------------------------------------------ events


@dataclass
class CaseResult:
    """What running one case gave (``symfuzz.worker.run_case``), or the internal error that
    stopped it. The counts feed stats.json (``symfuzz.stats.Stats.add_result``)."""

    valid: bool = False  # every drawn call ran in eager
    compiled: bool = False  # no call failed compiled where eager succeeded
    calls: int = 0
    checked: int = 0  # calls compared: both sides returned
    recompiles: int = 0
    graphs: list = field(default_factory=list)  # graphs compiled by each call
    seconds: dict = field(default_factory=dict)  # compile, run, oracle, execute_other (and generate)
    verdicts: list = field(default_factory=list)  # failing verdicts' JSON, the deciding one first
    triage: dict = field(default_factory=dict)
    case: Optional[dict] = None  # the case as run (with its guard-directed calls)
    guards: dict = field(default_factory=dict)  # regions, coverage, recompile classes...
    planned: list = field(default_factory=list)  # the purpose of each guard-directed call
    planned_reused: int = 0
    reuse_more_reused: int = 0
    rejected: int = 0
    first_errors: dict = field(default_factory=dict)  # the first error of each side, one line
    features: dict = field(default_factory=dict)  # gradient calls, scalar inputs, module, motifs
    # What the compiler did with the case, name-free: family -> features (oracles/lanes/compile_features.py)
    reached: dict = field(default_factory=dict)
    guard_shapes: list = field(default_factory=list)
    ops: dict = field(default_factory=dict)  # op name -> uses
    internal_error: Optional[str] = None  # a symfuzz traceback: nothing above was measured
    total_seconds: float = 0.0

    @classmethod
    def from_json(cls, data: dict) -> "CaseResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> dict:
        data = asdict(self)
        if self.internal_error is None:
            del data["internal_error"]
        return data


@dataclass(frozen=True)
class Ready:
    pid: int
    torch: str


@dataclass(frozen=True)
class Started:
    index: Union[int, str]
    case: dict


@dataclass(frozen=True)
class Planned:
    index: Union[int, str]
    case: dict


@dataclass(frozen=True)
class Judged:
    index: Union[int, str]
    verdicts: list


@dataclass(frozen=True)
class Result:
    index: Union[int, str]
    body: CaseResult


@dataclass(frozen=True)
class CanaryDone:
    body: CaseResult


@dataclass(frozen=True)
class Warm:
    ok: bool
    total_seconds: float


Event = Union[Ready, Started, Planned, Judged, Result, CanaryDone, Warm]

_SIMPLE = {"ready": Ready, "started": Started, "planned": Planned, "judged": Judged, "warm": Warm}
_NAMES = {cls: name for name, cls in _SIMPLE.items()}


def encode_event(event: Event) -> str:
    if isinstance(event, Result):
        data = {"event": "result", "index": event.index, **event.body.to_json()}
    elif isinstance(event, CanaryDone):
        data = {"event": "canary", **event.body.to_json()}
    else:
        data = {"event": _NAMES[type(event)], **asdict(event)}
    return json.dumps(data, default=str)


def decode_event(line: str) -> Optional[Event]:
    """The event a protocol line holds; None for a line that is not one (cut short by a death)."""
    try:
        data = json.loads(line)
        kind = data.pop("event")
        if kind == "result":
            index = data.pop("index")
            return Result(index, CaseResult.from_json(data))
        if kind == "canary":
            return CanaryDone(CaseResult.from_json(data))
        cls = _SIMPLE[kind]
        return cls(**{f.name: data[f.name] for f in fields(cls)})
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
