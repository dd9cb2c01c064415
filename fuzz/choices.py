"""The two drawing helpers every generator shares: the ``draw`` type and weighted choice."""

from __future__ import annotations

from typing import Any, Callable

import hypothesis.strategies as st

Draw = Callable[[st.SearchStrategy], Any]


def weighted(draw: Draw, pairs):
    """Draw a value by weight; shrinks toward the first pair."""
    total = sum(w for _, w in pairs)
    ticket = draw(st.integers(0, total - 1))
    for value, w in pairs:
        if ticket < w:
            return value
        ticket -= w
    raise AssertionError("unreachable")
