"""inplace ops (to be filled)."""

SPECS = []
