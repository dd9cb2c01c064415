"""symfuzz: fuzzing and correctness testing for PyTorch's dynamic-shape compiler.

The subpackages, bottom layer first (docs/architecture.md):
``symfuzz.fuzz`` (the case model, the script runtime, generation),
``symfuzz.oracles.lanes`` (compiling and running a case),
``symfuzz.oracles`` (judging a run), ``symfuzz.corpus`` (findings and their
scripts), ``symfuzz.minifier`` and ``symfuzz.opcheck`` (tools built on them).
This package's own modules are the app: campaign, workers and the CLI.

Importing ``symfuzz`` imports nothing else: the pytest plugin
(``symfuzz.opcheck.plugin``) loads with every pytest run and must not import torch.

In a checkout, ``symfuzz/fuzz`` and its siblings are links to the top-level folders, so
that ``symfuzz.fuzz`` resolves by the ordinary rules wherever ``symfuzz`` is found: from
the checkout itself (``python -m symfuzz.worker`` run at its root), through the installed
package (``pyproject.toml`` maps the folders with ``package-dir``), and in static tools
(pyright, editors).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("symfuzz")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"
