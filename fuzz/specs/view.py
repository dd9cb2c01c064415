"""view ops (to be filled)."""

SPECS = []
