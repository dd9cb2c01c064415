"""Verdict: what an oracle concluded about one run of one case, and the facts behind it.

The facts a verdict carries (its ``evidence``) are typed: one frozen dataclass
per family of symptoms, below. Each writes the same JSON object a finding.json
holds under ``verdict.evidence``; ``Verdict.from_json`` picks the family from
the verdict's symptom, so findings written by earlier versions load as typed
records too.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import ClassVar, Optional, Union

SYMPTOMS = (
    "crash",  # compiled raised where eager did not
    "accepts-invalid",  # compiled returned where eager raised
    "value-mismatch",
    "metadata-mismatch",  # shape, dtype or output structure differs
    "gradient-mismatch",  # a gradient with respect to an input differs (the compiled backward)
    "unsound-guard",  # a reused graph is wrong for the new shape; a fresh compile is right
    "over-specialization",  # a dim marked dynamic was specialized without the program asking
    "excess-recompiles",
    "lost-dynamism",  # the graph after a graph break was compiled with static sizes, and recompiles at each new size
    "unsound-recompile",  # a guard manager accepted a call, and the frame recompiled at it anyway
    "fake-real-mismatch",
    "timeout",
    "process-death",  # segfault, abort, out of memory
)
# The oracle name of verdicts the campaign itself reaches, not an oracle over a
# run: the worker running the case died (signal, out of memory) or hung past
# the case timeout. The oracles over a run are listed in registry.ORACLES.
ISOLATION = "isolation"

STAGES = ("dynamo", "aot", "inductor", "codegen", "runtime", "guard", "unknown")

# The cause of a process death for a worker killed past the memory limit (the
# other causes are a signal's name, e.g. "SIGSEGV", or "exit N").
OUT_OF_MEMORY = "out-of-memory"


# ---------------------------------------------------------------- evidence


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The facts behind a verdict. Each subclass is one family of symptoms
    (``SYMPTOMS``; ``None`` stands for a pass) and declares every key its JSON
    object has. Oracles build them by keyword. A field without a default is a
    fact every verdict of the family states; one with a default is context
    (or was added later: an older finding without it still loads as the family).

    ``to_json`` writes the fields that are set: a field that is None is left
    out, except those in ``KEEP_NONE``, where None is itself a fact. ``extra``
    keeps keys this version does not declare (from a finding written by
    another version), so such findings load and are written back unchanged.
    A plain ``Evidence`` holds, in ``extra``, an evidence object that fits no
    family (loaded, never made by an oracle).
    """

    SYMPTOMS: ClassVar[tuple] = ()
    KEEP_NONE: ClassVar[tuple] = ()

    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and (value is not None or f.name in self.KEEP_NONE):
                out[f.name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: dict) -> Optional["Evidence"]:
        """This family's record of ``data``; None when a field it requires is missing."""
        declared = {f.name: f for f in fields(cls) if f.name != "extra"}
        required = {name for name, f in declared.items() if _required(f)}
        if not required <= data.keys():
            return None
        known = {k: v for k, v in data.items() if k in declared}
        return cls(**known, extra={k: v for k, v in data.items() if k not in declared})


def _required(f) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


@dataclass(frozen=True, kw_only=True)
class RaisedError(Evidence):
    """Exactly one side raised on a call: compiled (crash), eager (accepts-invalid:
    compiled returned a result for input eager rejects), or compiled refusing a dim
    marked dynamic that the program never specializes (over-specialization)."""

    SYMPTOMS: ClassVar[tuple] = ("crash", "accepts-invalid", "over-specialization")

    error: dict  # the side that raised, as ``script_runtime.describe_exception``: type, message, stage, traceback
    detail: str = ""  # one line on what the error means here ("" for a plain crash)


@dataclass(frozen=True, kw_only=True)
class OutputMismatch(Evidence):
    """Compiled and eager both returned on a call, with different results."""

    SYMPTOMS: ClassVar[tuple] = ("value-mismatch", "metadata-mismatch", "gradient-mismatch")

    path: str  # the output that differs, e.g. "out[0][2]" (``script_runtime.flatten``); "out": the structure
    detail: str  # how it differs, e.g. "1/4 elements differ ..." or "compiled float32[3], eager float32[4]"
    graphs_at_call: Optional[int] = None  # graphs compiled during the failing call (0: it ran a cached graph)
    # Set when rounding explains the difference (``script_runtime.rounding_explains``): a discrete
    # result flipped where its decision lies within rounding of its threshold. No bug: the
    # campaign keeps such a verdict in suspect/ with this reason, never as a finding.
    rounding: Optional[str] = None
    # For a gradient: the ops that consume the input it is taken with respect to (its key;
    # ``Case.gradient_ops``). None on a gradient mismatch signed by an older symfuzz, which
    # gave every gradient mismatch of a lane and kind one signature.
    gradient_of: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class ExcessRecompile(Evidence):
    """A call that every modelled guard of the cached graph lets through recompiled anyway."""

    SYMPTOMS: ClassVar[tuple] = ("excess-recompiles", "lost-dynamism")

    detail: str
    recompile_reason: str  # Dynamo's reason for the recompile, normalized
    guards: Optional[list] = None  # the guards of the graph the call should have reused, as ``oracles.lanes.guards`` lists them


@dataclass(frozen=True, kw_only=True)
class UnsoundRecompile(Evidence):
    """The program's own frame recompiled at a call that one of its cached graphs'
    guard managers, asked just before the call with the same arguments, accepted
    (``oracles.lanes.recompile_reasons``): a guard rejected at frame entry what its
    guard manager accepts, or state a guard reads changed between the two."""

    SYMPTOMS: ClassVar[tuple] = ("unsound-recompile",)

    detail: str
    recompile_reason: str  # Dynamo's guard failure for the entry that had accepted, as recorded
    admitted_by: list  # compile ids ("0/1") of the entries whose guard managers accepted the call before it
    reasons: Optional[dict] = None  # code name -> normalized guard failures recorded during the call
    guard_manager_accepted: bool = True  # the predicting guard managers' verdict


@dataclass(frozen=True, kw_only=True)
class UnsoundGuard(Evidence):
    """A call that ran a cached graph failed, and a fresh compile at the same shapes is right."""

    SYMPTOMS: ClassVar[tuple] = ("unsound-guard",)
    KEEP_NONE: ClassVar[tuple] = ("path", "guard_manager_accepted")

    detail: str  # the reused graph's failure, as that symptom's own detail
    path: Optional[str]  # the output that differs; None when the reused graph raised
    reused_symptom: str  # what the reused graph did wrong: value-mismatch, metadata-mismatch or crash
    purpose: Optional[str] = None  # why the call was made: "drawn", or the guard-directed plan that added it
    guard_manager_accepted: Optional[bool] = None  # did the cached graph's guard manager accept the call (None: not asked)
    error: Optional[dict] = None  # the reused graph's exception, when it raised (as in RaisedError)
    gradient_of: Optional[str] = None  # as in OutputMismatch, for a reused graph's wrong gradient


@dataclass(frozen=True, kw_only=True)
class FakeRealMismatch(Evidence):
    """A fake tensor's symbolic metadata, evaluated at a call's sizes, differs from
    what eager produced on that call (``oracles.symbolic_trace.compare_call``)."""

    SYMPTOMS: ClassVar[tuple] = ("fake-real-mismatch",)
    KEEP_NONE: ClassVar[tuple] = ("dim",)

    path: str  # the output leaf; "out" when the number of leaves differs
    what: str  # which fact differs: structure, value, dtype, rank, size or stride
    dim: Optional[int]  # the dim of a size or stride; None for the other facts
    symbolic: str  # the fake tensor's expression (or dtype, or sizes) for that fact
    expected: Union[int, str]  # the expression's value at this call's sizes
    actual: Union[int, str]  # what eager gave
    sizes: Optional[list] = None  # for a stride: eager's sizes of the leaf
    strides: Optional[list] = None  # for a stride: eager's strides of the leaf
    rule: Optional[str] = None  # for a stride: why it must match ("allow-listed", or agreed at the first call)
    bindings: dict  # symbol -> its value at this call, e.g. {"s0": 5}
    hint_sizes: list  # the input sizes the trace was made at (the first call), one list per input
    call_sizes: list  # this call's input sizes
    detail: str  # the mismatch in one sentence


@dataclass(frozen=True, kw_only=True)
class SymbolicCoverage(Evidence):
    """A pass of the symbolic-metadata oracle: what it compared and what it could not."""

    SYMPTOMS: ClassVar[tuple] = (None,)

    compared_calls: list  # indices of the calls compared with the trace
    skipped_calls: dict  # str(call index) -> why that call was not comparable
    layout_divergences: Optional[list] = None  # strides fake and eager chose differently from the first call (not findings)


@dataclass(frozen=True, kw_only=True)
class SymbolicSkipped(Evidence):
    """A pass of the symbolic-metadata oracle that judged nothing."""

    SYMPTOMS: ClassVar[tuple] = (None,)

    skipped: str  # why: "no calls", "symbolic trace failed"
    reason: Optional[str] = None  # the trace's own error, when it failed


@dataclass(frozen=True, kw_only=True)
class Hung(Evidence):
    """The worker running the case was killed past the case timeout (oracle ISOLATION)."""

    SYMPTOMS: ClassVar[tuple] = ("timeout",)

    timeout_seconds: float  # the case timeout it ran past
    worker_log_tail: Optional[str] = None  # the end of the worker's log (what torch printed)
    # Where it hung, from the stack it printed when asked before it was killed (corpus/deaths.py):
    # the phase and the innermost frames outside the harness. None: signed by an older symfuzz.
    phase: Optional[str] = None
    frames: Optional[list] = None


@dataclass(frozen=True, kw_only=True)
class Died(Evidence):
    """The worker running the case died: a signal, an exit, or killed past the
    memory limit (oracle ISOLATION)."""

    SYMPTOMS: ClassVar[tuple] = ("process-death",)

    cause: str  # OUT_OF_MEMORY, a signal's name ("SIGSEGV"), or "exit N"
    limit_mb: Optional[int] = None  # for OUT_OF_MEMORY: the memory limit it passed
    returncode: Optional[int] = None  # for a signal or an exit: the process's return code
    worker_log_tail: Optional[str] = None  # the end of the worker's log (what torch printed)
    # Where it died, from faulthandler's stack (corpus/deaths.py), as for Hung.
    phase: Optional[str] = None
    frames: Optional[list] = None

    @property
    def out_of_memory(self) -> bool:
        return self.cause == OUT_OF_MEMORY


# Families tried, in order, for a verdict's symptom (None: a pass).
FAMILIES = (RaisedError, OutputMismatch, ExcessRecompile, UnsoundRecompile, UnsoundGuard, FakeRealMismatch,
            SymbolicCoverage, SymbolicSkipped, Hung, Died)


def evidence_from_json(symptom: Optional[str], data: dict) -> Optional[Evidence]:
    """The typed record of a verdict's evidence object: the first family of the
    symptom that it fits; a plain Evidence holding it when none does; None for {}."""
    if not data:
        return None
    for family in FAMILIES:
        if symptom in family.SYMPTOMS:
            parsed = family.from_json(data)
            if parsed is not None:
                return parsed
    return Evidence(extra=dict(data))


# ---------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """One oracle's conclusion: pass (``ok``), or a symptom at a stage, at a call
    (None: not tied to one), with the signature that names the bug and, in
    ``evidence``, the facts of the symptom's family."""

    ok: bool
    oracle: str
    symptom: Optional[str] = None
    stage: Optional[str] = None
    signature: Optional[str] = None
    call_index: Optional[int] = None
    evidence: Optional[Evidence] = field(default=None, hash=False)  # None: nothing to say (written as {})

    def __post_init__(self):
        if not self.ok and self.symptom not in SYMPTOMS:
            raise ValueError(f"unknown symptom {self.symptom!r}")
        if self.stage is not None and self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}")
        ev = self.evidence
        if ev is not None and type(ev) is not Evidence and self.symptom not in ev.SYMPTOMS:
            raise ValueError(f"{type(ev).__name__} is not evidence of {self.symptom or 'a pass'}")

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "oracle": self.oracle,
            "symptom": self.symptom,
            "stage": self.stage,
            "signature": self.signature,
            "call_index": self.call_index,
            "evidence": self.evidence.to_json() if self.evidence is not None else {},
        }

    @staticmethod
    def from_json(data: dict) -> "Verdict":
        """A verdict from ``to_json``'s object, including one written by an earlier version."""
        evidence = evidence_from_json(data.get("symptom"), data.get("evidence") or {})
        return Verdict(**{**data, "evidence": evidence})

    def headline(self) -> str:
        if self.ok:
            return f"{self.oracle}: pass"
        where = f" at call {self.call_index}" if self.call_index is not None else ""
        return f"{self.symptom} ({self.stage}){where} [{self.signature}]"


def passed(oracle: str, evidence: Optional[Evidence] = None) -> Verdict:
    return Verdict(ok=True, oracle=oracle, evidence=evidence)


# An eager kernel whose result left its op's meta function (oracles/eager_meta.py), in the words a
# finding's detail keeps; ``eager_side`` reads them back for reports (without importing torch).
_EAGER_OFF_RULE = re.compile(r"eager's (?P<op>\S+) returned (?P<eager>\S+\[[^\]]*\])(?: \(result \d+\))? where its meta "
                             r"function, the shape rule the compiler follows, gives (?P<meta>\S+\[[^\]]*\])")


def eager_off_rule(op: str, eager: str, meta: str) -> str:
    """"eager's OP returned EAGER where its meta function ... gives META" (``eager_side`` reads it)."""
    return f"eager's {op} returned {eager} where its meta function, the shape rule the compiler follows, gives {meta}"


def eager_side(detail: str) -> Optional[tuple[str, str, str]]:
    """(op, what eager's kernel returned, what its meta function gives) where a finding's detail
    says an eager kernel left its shape rule (``eager_off_rule``'s words), else None."""
    match = _EAGER_OFF_RULE.search(detail or "")
    return (match["op"], match["eager"], match["meta"]) if match else None


def error_headline(message) -> str:
    """The first line of an error message that says something: a compiler wrapper's header
    ("backend='inductor' raised:", with the wrapped error on the lines after it) and Dynamo's
    hint lines are passed over, as ``normalize_message`` does for signatures."""
    for line in str(message or "").splitlines():
        line = line.strip()
        if line and not line.endswith("raised:") and not line.startswith("Set TORCHDYNAMO_VERBOSE"):
            return line
    return ""
