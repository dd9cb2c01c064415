"""Programs, schedules and cases, the script runtime, and their generation.

Exports are resolved lazily: the ``symfuzz`` command and the worker must not
import torch before a lane has set its environment.
"""

import importlib

_EXPORTS = {
    "ArgSpec": "case", "Call": "case", "Case": "case", "Schedule": "case",
    "Program": "ir",
    "GenConfig": "generate", "cases": "generate", "draw_case": "generate",
    "case_from_choices": "drawing",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
