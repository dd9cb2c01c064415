"""Mutation check: does the op write only to the inputs its schema declares, and only inside them?

Before the call it records each input's version counter and a byte copy of
its whole storage (the parts outside the view too); after the call, an input
the schema does not declare mutable must have neither moved. The schema check
(SchemaCheckMode) compares values, so it misses a write that leaves them as
they were (``x.add_(0)``, ``x.copy_(x.clone())``); functionalization and
Inductor still reorder around the undeclared write. A declared-mutable input
must keep the bytes outside its view: a kernel that writes through the raw
pointer as if the view were contiguous from offset 0 overwrites them.

Inputs sharing one storage are judged together, per storage: a declared write
to one view legitimately moves the shared version counter of the others.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.multiprocessing.reductions import StorageWeakRef

from symfuzz.opcheck.checks.common import Problem
from symfuzz.opcheck.contracts import slot_names
from symfuzz.opcheck.inputs import Case, Template
from symfuzz.opcheck.variants import REJECTED


def input_labels(template: Template) -> list[str]:
    """Per tensor slot: "`name` (x<n>)" with the schema's argument name when known, else "x<n>"
    (the repro snippets call the inputs x0, x1, ...)."""
    plain = [f"x{n}" for n in range(len(template.slots))]
    if getattr(template, "schema", None) is None:
        return plain
    return [f"`{name}` ({x})" if name != x else x for name, x in zip(slot_names(template), plain)]


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 copy of the whole storage under ``t``, not just the elements its view covers."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).clone()


def view_bytes(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    """A bool mask over the ``nbytes`` bytes of ``t``'s storage: True where its view reads."""
    size = t.element_size()
    elements = torch.zeros(nbytes // size, dtype=torch.bool)
    if t.numel():
        # Indexing rather than a fill through the view: an expanded view (stride 0)
        # overlaps itself, and in-place writes refuse that.
        index = torch.arange(nbytes // size).as_strided(t.shape, t.stride(), t.storage_offset())
        elements[index.reshape(-1)] = True
    mask = torch.zeros(nbytes, dtype=torch.bool)
    mask[: elements.numel() * size] = elements.repeat_interleave(size)
    return mask


class MutationCheck:
    def __init__(self, op, template: Template):
        self.op = op
        self.mutable = {n for n, s in enumerate(template.slots) if s.mutable}
        self.labels = input_labels(template)

    def __call__(self, case: Case):
        try:
            args, kwargs = case.build()
        except Exception:  # noqa: BLE001 - an input that cannot be built is no input
            return REJECTED
        tensors = [t for t in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(t, torch.Tensor)]
        groups: dict = {}  # storage -> the input positions on it
        for n, t in enumerate(tensors):
            groups.setdefault(StorageWeakRef(t.untyped_storage()), []).append(n)
        versions = [t._version for t in tensors]
        before = {key: storage_bytes(tensors[members[0]]) for key, members in groups.items()}
        try:
            with torch.no_grad():
                self.op(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the real kernel refusing an input is not a finding
            return REJECTED
        for key, members in groups.items():
            problem = self._judge_storage(tensors, members, versions, before[key])
            if problem is not None:
                return problem
        return None

    def _judge_storage(self, tensors, members, versions, before) -> Problem | None:
        after = storage_bytes(tensors[members[0]])
        written = [n for n in members if n in self.mutable]
        others = [n for n in members if n not in self.mutable]
        if after.numel() != before.numel():  # resized (an out= argument): the write is the resize
            if written:
                return None
            return self._undeclared(others[0], moved=tensors[others[0]]._version != versions[others[0]],
                                    bytes_changed=abs(after.numel() - before.numel()))
        changed = after != before
        if not written:
            for n in others:
                moved = tensors[n]._version != versions[n]
                if moved or changed.any():
                    return self._undeclared(n, moved=moved, bytes_changed=int(changed.sum()))
            return None
        if not changed.any():
            return None
        nbytes = changed.numel()
        declared = torch.zeros(nbytes, dtype=torch.bool)
        for n in written:
            declared |= view_bytes(tensors[n], nbytes)
        outside = changed & ~declared
        if not outside.any():
            return None
        # The storage is shared with an input the op may not write: bytes it views are its.
        for n in others:
            hit = outside & view_bytes(tensors[n], nbytes)
            if hit.any():
                return self._undeclared(n, moved=False, bytes_changed=int(hit.sum()))
        return self._outside_view(written, tensors, int(outside.sum()))

    def _undeclared(self, n, *, moved: bool, bytes_changed: int) -> Problem:
        if moved and bytes_changed:
            how = f"its version counter moved and {bytes_changed} byte(s) of its storage changed"
        elif moved:
            how = ("its version counter moved (an in-place op on it), though its values are unchanged: "
                   "SchemaCheckMode, which compares values, misses this write")
        else:
            how = (f"{bytes_changed} byte(s) of its storage changed without its version counter moving "
                   "(a write through .data, a raw pointer, or the storage outside the view)")
        return Problem(
            "undeclared-mutation",
            f"the op writes to input {self.labels[n]}, which its schema does not declare mutable: {how}.\n"
            f"schema: {self.op._schema}\n"
            "declare it (mutates_args=(...) with custom_op, Tensor(a!) in the schema) or stop writing to it "
            "(write to a clone); torch.compile reorders and drops writes the schema hides",
        )

    def _outside_view(self, written, tensors, count: int) -> Problem:
        views = "; ".join(f"{self.labels[n]}: sizes {list(tensors[n].shape)}, strides {list(tensors[n].stride())}, "
                          f"storage offset {tensors[n].storage_offset()}" for n in written)
        return Problem(
            "write-outside-view",
            f"the op wrote {count} byte(s) of storage outside the view of its mutable input(s) ({views}).\n"
            "A kernel that writes through the data pointer as if the tensor were contiguous from offset 0 does "
            "this; index with the tensor's strides and storage offset, or compute into a contiguous buffer and "
            "copy_ it back",
        )


def mutation_judge(op, runner, template):
    """The mutation check's judge (opcheck.checklist)."""
    return MutationCheck(op, template)
