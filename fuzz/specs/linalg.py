"""linalg ops (to be filled)."""

SPECS = []
