"""Verdict: what an oracle concluded about one run of one case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

SYMPTOMS = (
    "crash",  # compiled raised where eager did not
    "accepts-invalid",  # compiled returned where eager raised
    "value-mismatch",
    "metadata-mismatch",  # shape, dtype or output structure differs
    "unsound-guard",  # a reused graph is wrong for the new shape; a fresh compile is right
    "over-specialization",  # a dim marked dynamic was specialized without the program asking
    "excess-recompiles",
    "fake-real-mismatch",
    "timeout",
    "process-death",  # segfault, abort, out of memory
)
# The oracle name of verdicts the campaign itself reaches, not an oracle over a
# run: the worker running the case died (signal, out of memory) or hung past
# the case timeout. The oracles over a run are listed in registry.ORACLES.
ISOLATION = "isolation"

STAGES = ("dynamo", "aot", "inductor", "codegen", "runtime", "guard", "unknown")


@dataclass(frozen=True)
class Verdict:
    ok: bool
    oracle: str
    symptom: Optional[str] = None
    stage: Optional[str] = None
    signature: Optional[str] = None
    call_index: Optional[int] = None
    evidence: dict = field(default_factory=dict, hash=False)

    def __post_init__(self):
        if not self.ok and self.symptom not in SYMPTOMS:
            raise ValueError(f"unknown symptom {self.symptom!r}")
        if self.stage is not None and self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}")

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "oracle": self.oracle,
            "symptom": self.symptom,
            "stage": self.stage,
            "signature": self.signature,
            "call_index": self.call_index,
            "evidence": self.evidence,
        }

    @staticmethod
    def from_json(data: dict) -> "Verdict":
        return Verdict(**data)

    def headline(self) -> str:
        if self.ok:
            return f"{self.oracle}: pass"
        where = f" at call {self.call_index}" if self.call_index is not None else ""
        return f"{self.symptom} ({self.stage}){where} [{self.signature}]"


def passed(oracle: str) -> Verdict:
    return Verdict(ok=True, oracle=oracle)
