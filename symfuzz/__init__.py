"""symfuzz: fuzzing and correctness testing for PyTorch's dynamic-shape compiler.

The subpackages, bottom layer first (docs/architecture.md):
``symfuzz.fuzz`` (the case model, the script runtime, generation),
``symfuzz.oracles.lanes`` (compiling and running a case),
``symfuzz.oracles`` (judging a run), ``symfuzz.corpus`` (findings and their
scripts), ``symfuzz.minifier`` and ``symfuzz.opcheck`` (tools built on them).
This package's own modules are the app: campaign, workers and the CLI.

Importing ``symfuzz`` imports nothing else: the pytest plugin
(``symfuzz.opcheck.plugin``) loads with every pytest run and must not import torch.
"""

import os
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("symfuzz")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"

# In a source checkout the subpackages are the folders beside this one (fuzz/,
# oracles/, ...), which pyproject.toml maps into this package when it is installed.
# Where this file is imported from the checkout itself (``python -m symfuzz.worker``
# run from the repository root puts the root first on sys.path, ahead of any
# installed copy), look for them there too.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "fuzz", "ir.py")):
    __path__.append(_checkout)
