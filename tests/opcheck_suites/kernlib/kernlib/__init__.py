"""kernlib: a small op library of 8-bit kernels (a test fixture for symfuzz's opcheck
plugin, built like the real libraries whose suites opcheck was tried on).

Its ops follow contracts that no schema states and that a sweep must learn from the
recorded calls (see _ops.py), and four of them carry a genuine bug that one float32
sample never shows (named in their kernels' docstrings).
"""

from . import _ops  # noqa: F401  (defines the ops)
from . import _fake  # noqa: F401  (fake kernels)
from . import _autograd  # noqa: F401  (autograd formulas)
from . import backends  # noqa: F401  (real kernels)
