"""reduction ops (to be filled)."""

SPECS = []
