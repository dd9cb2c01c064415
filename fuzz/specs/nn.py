"""nn ops (to be filled)."""

SPECS = []
