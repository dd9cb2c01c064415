"""The oracles that judge a run: each reads what a case did on a lane and returns a Verdict.

Lanes and execution live below, in ``symfuzz.oracles.lanes``.
"""
