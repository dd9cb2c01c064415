"""Findings on disk: the store, repro scripts, and replay."""

from .finding import Finding
from .replay import ReplayOutcome, replay_finding
from .repro import render_repro
from .store import FindingStore, load_findings

__all__ = ["Finding", "FindingStore", "ReplayOutcome", "load_findings", "render_repro", "replay_finding"]
