"""Where opcheck's repro snippets go, and the helpers file they share.

One naming rule for the plugin and the CLI: ``<op, "::" as "__">__<check>.py`` in the
snippets' folder. A snippet holds what a reader needs (the op loaded, the failing input,
the one thing that fails) and imports the rest from ``symfuzz_snippet_helpers.py``,
which symfuzz writes beside it: rebuilding inputs (``make_input``), loading the op, and
the pieces of each check's own run and judging, so a snippet agrees with its check.
The helpers need only torch. Nothing here imports torch: the pytest plugin writes snippets.
"""

from __future__ import annotations

from pathlib import Path

from symfuzz.corpus.atomic import write_text
from symfuzz.corpus.scripts import RUNTIME, Helpers
from symfuzz.opcheck.checklist import FAKE_DEVICE, INDUCTOR_DYNAMIC, LAYOUT_CONSISTENCY, MUTATION

SHARED = "symfuzz_snippet_helpers"  # the module every snippet imports its helpers from
LOADERS = ("symfuzz.opcheck.snippet_runtime", ("import_registering", "lookup_op"))
ALWAYS = ((RUNTIME, ("make_input",)), LOADERS)  # every snippet's
# A check's own pieces, beyond ALWAYS (keyed by the check's name: opcheck.checklist).
CHECK_PIECES = {
    INDUCTOR_DYNAMIC.name: ((RUNTIME, ("compare",)), ("symfuzz.opcheck.checks.compile", ("run_collecting",
                                                                                           "float64_inputs"))),
    MUTATION.name: (("symfuzz.opcheck.checks.mutation", ("storage_bytes", "view_bytes")),),
    FAKE_DEVICE.name: (("symfuzz.opcheck.checks.device", ("strided_like", "NEEDS_SHAPE_ENV")),),
    LAYOUT_CONSISTENCY.name: ((RUNTIME, ("compare",)), ("symfuzz.opcheck.checks.layout", ("run_laid_out",))),
}


def snippet_path(directory, op: str, check: str) -> Path:
    """The snippet of ``op`` ("ns::name" or "ns::name.overload") failing ``check``."""
    return Path(directory) / f"{op.replace('::', '__')}__{check}.py"


def write_snippet(directory, op: str, check: str, text: str) -> Path:
    """Write a snippet, and the helpers it imports beside it (rewritten: one symfuzz's helpers for all)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text(directory / f"{SHARED}.py", shared_source())
    path = snippet_path(directory, op, check)
    write_text(path, text.rstrip("\n") + "\n")
    return path


def shared_source() -> str:
    """The helpers module: every piece any snippet imports, pasted from symfuzz's source."""
    helpers = Helpers()
    for module, names in (*ALWAYS, *(piece for pieces in CHECK_PIECES.values() for piece in pieces)):
        helpers.pieces(module, names)
    sources = ", ".join(s.removeprefix("symfuzz.").replace(".", "/") + ".py" for s in helpers.sources)
    return (f'"""Helpers for the symfuzz opcheck repro snippets beside this file: it holds what they do\n'
            f'before and around their failing call. Written by symfuzz, from its {sources}.\n'
            f'They need only torch."""\n\n' + helpers.text())
