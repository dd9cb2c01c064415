"""Lanes, running a case through one, and the oracles that judge the run."""

from .lanes import LANES, Lane, get_lane
from .registry import ORACLES, judge, oracle
from .verdict import Verdict

__all__ = ["LANES", "Lane", "ORACLES", "Verdict", "get_lane", "judge", "oracle"]
