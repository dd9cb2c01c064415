"""symfuzz opcheck: a custom-op checker that sweeps shapes from one sample.

``opcheck.check(op, samples)`` runs the checks ``torch.library.opcheck`` runs
(schema, autograd registration, fake vs real, AOT dispatch with dynamic
shapes) and adds a shape sweep, a symbolic fake-kernel check, numerical
gradients and Inductor with dynamic shapes. See ``opcheck.api``.

Importing this package does not import torch: the pytest plugin
(``opcheck.plugin``) is loaded by every pytest run once symfuzz is installed,
and must stay cheap. The API is loaded on first use.
"""

from symfuzz.opcheck.checklist import CHECKS  # the table of checks: no torch
from symfuzz.opcheck.report import Report

__all__ = ["CHECKS", "Report", "check"]


def __getattr__(name):
    if name == "check":
        # deferred: the API imports torch, and the pytest plugin loads this package without it
        from symfuzz.opcheck.api import check

        return check
    raise AttributeError(f"module 'symfuzz.opcheck' has no attribute {name!r}")
