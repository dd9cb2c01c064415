"""indexing ops (to be filled)."""

SPECS = []
