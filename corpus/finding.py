"""Finding: a failing case, its verdict, the environment, and how it was confirmed."""

from __future__ import annotations

import functools
import platform
import sys
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Optional

from symfuzz.oracles.verdict import Verdict

# The format of finding.json. The verdict's evidence became typed records without
# changing it: findings of every version-1 symfuzz load.
FINDING_VERSION = 1


def environment() -> dict:
    """Versions that, with the seed, reproduce a campaign (a fresh copy each call)."""
    return dict(_environment())


@functools.lru_cache(maxsize=None)
def _environment() -> dict:
    # Computed once per process: the campaign loop asks for it every few seconds.
    env = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        # optional here: a finding records which versions ran, whatever is installed
        import torch

        env["torch"] = torch.__version__
        env["torch_git"] = getattr(torch.version, "git_version", None)
    except ImportError:
        env["torch"] = None
    try:
        # optional: triton is only needed by some lanes
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    try:
        env["symfuzz"] = version("symfuzz")
    except Exception:  # noqa: BLE001 - running from a checkout
        env["symfuzz"] = None
    return env


@dataclass
class Finding:
    case: dict  # Case.to_json()
    verdict: Verdict
    lane: dict  # Lane.to_json(): the lane is embedded so the finding replays alone
    environment: dict = field(default_factory=environment)
    triage: dict = field(default_factory=dict)
    confirmation: Optional[dict] = None

    @property
    def signature(self) -> str:
        return self.verdict.signature

    def to_json(self) -> dict:
        return {
            "finding_version": FINDING_VERSION,
            "signature": self.signature,
            "case": self.case,
            "verdict": self.verdict.to_json(),
            "lane": self.lane,
            "environment": self.environment,
            "triage": self.triage,
            "confirmation": self.confirmation,
        }

    @staticmethod
    def from_json(data: dict) -> "Finding":
        if data.get("finding_version", 1) > FINDING_VERSION:
            raise ValueError("this finding was written by a newer symfuzz; upgrade symfuzz to replay it")
        try:
            verdict = Verdict.from_json(data["verdict"])
        except (TypeError, ValueError) as exc:  # a symptom, stage or field this version does not know
            raise ValueError(f"this finding's verdict is not one this symfuzz knows ({exc}); it may have been "
                             "written by a newer symfuzz: upgrade symfuzz to replay it") from None
        return Finding(
            case=data["case"],
            verdict=verdict,
            lane=data["lane"],
            environment=data.get("environment", {}),
            triage=data.get("triage", {}),
            confirmation=data.get("confirmation"),
        )
