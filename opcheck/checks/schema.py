"""Schema check: does the op mutate or alias only what its schema declares?

Runs the real kernel under PyTorch's SchemaCheckMode, which compares inputs
before and after the call and checks output storages against the schema's
alias annotations. Layout variants matter here: ``x.reshape(-1)`` aliases a
contiguous input and copies a transposed one. Where SchemaCheckMode itself fails on
an input the kernel runs fine on (its comparisons lack float8 kernels), that input is
not judged, and the report says so as an info line: torch's checker is not the op.
"""

from __future__ import annotations

import torch
from torch._subclasses.schema_check_mode import SchemaCheckMode

from symfuzz.opcheck.checks.common import Problem, first_line, run_real
from symfuzz.opcheck.inputs import Case
from symfuzz.opcheck.variants import REJECTED, UNJUDGED


class SchemaCheck:
    def __init__(self, op):
        self.op = op
        self.notes: list[str] = []  # the report's info lines (opcheck.api reads them)

    def __call__(self, case: Case):
        if run_real(self.op, case) is REJECTED:
            return REJECTED
        args, kwargs = case.build()
        try:
            with torch.no_grad(), SchemaCheckMode():
                self.op(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - SchemaCheckMode reports by raising
            text = str(exc)
            schema = str(self.op._schema)
            if "not defined as mutable but was mutated" in text:
                return Problem("undeclared-mutation", f"{first_line(exc)}\nschema: {schema}\n"
                               "declare it (Tensor(a!) / mutates_args=...) or stop writing to the input")
            if "alias" in text:
                return Problem("undeclared-alias", f"{first_line(exc)}\nschema: {schema}\n"
                               "return a new tensor (e.g. .clone()) or declare the alias (Tensor(a) -> Tensor(a))")
            # The kernel alone ran on this input (run_real above): anything else SchemaCheckMode
            # raises is its own comparison failing (float8 has no kernels to compare with), not the op.
            note = (f"not checked on some inputs: torch's SchemaCheckMode itself failed on them "
                    f"({case.describe()}: {first_line(exc)}); the op runs fine on them")
            if not any(n.startswith("not checked on some inputs: torch's SchemaCheckMode") for n in self.notes):
                self.notes.append(note)
            return UNJUDGED
        return None


def schema_judge(op, runner, template):
    """The schema check's judge (opcheck.checklist)."""
    return SchemaCheck(op)
