"""factory ops (to be filled)."""

SPECS = []
