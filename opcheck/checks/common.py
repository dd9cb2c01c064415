"""What every check needs: the op, its schema, running the real kernel."""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from symfuzz.corpus.deaths import HARNESS_DIRS
from symfuzz.opcheck.inputs import Case, Template
from symfuzz.opcheck.variants import REJECTED


class OpCheckUsageError(Exception):
    """A user mistake (unknown op, bad arguments): printed without a traceback."""


@dataclass
class Problem:
    kind: str
    message: str
    axis: str = ""  # the sweep axis the judge itself varied ("device meta"); "" lets the runner name it from the input


def resolve_op(op) -> torch._ops.OpOverload:
    """OpOverload from an OpOverload, packet, CustomOpDef or "ns::name[.overload]"."""
    if isinstance(op, str):
        name = op.strip()
        if "::" not in name:
            raise OpCheckUsageError(f"{name!r} is not an op name: expected 'namespace::name' (e.g. mylib::my_op)")
        ns, rest = name.split("::", 1)
        base, _, overload = rest.partition(".")
        try:
            packet = getattr(getattr(torch.ops, ns), base)
        except (AttributeError, RuntimeError):
            raise OpCheckUsageError(
                f"no op {ns}::{base} is registered (did you import the module that defines it? use --module)"
            ) from None
        if not overload and "default" in packet.overloads():
            overload = "default"  # "ns::name" names the default overload, as op_name() writes it
        op = getattr(packet, overload) if overload else packet
    if type(op).__name__ == "CustomOpDef":
        op = op._opoverload
    if isinstance(op, torch._ops.OpOverloadPacket):
        overloads = op.overloads()
        if len(overloads) != 1:
            raise OpCheckUsageError(
                f"{op._qualified_op_name} has overloads {overloads}: name one, e.g. {op._qualified_op_name}.{overloads[0]}"
            )
        op = getattr(op, overloads[0])
    if not isinstance(op, torch._ops.OpOverload):
        raise OpCheckUsageError(f"expected an op (torch.ops.ns.name or 'ns::name'), got {type(op).__name__}")
    return op


def op_name(op: torch._ops.OpOverload) -> str:
    name = op._schema.name
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def mutable_slots(op, args, kwargs) -> set[int]:
    """Indices of the tensor slots the schema lets the op write to."""
    written = set()
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        written.update(id(leaf) for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor))
    leaves = [leaf for leaf in pytree.tree_leaves((tuple(args), dict(kwargs))) if isinstance(leaf, torch.Tensor)]
    return {n for n, leaf in enumerate(leaves) if id(leaf) in written}


def make_template(op, args, kwargs) -> Template:
    return Template(args, kwargs, mutable_positions=mutable_slots(op, args, kwargs))


def run_real(op, case: Case, **build):
    """(args, kwargs, output) or REJECTED when the real kernel raises (or the input cannot be built)."""
    try:
        args, kwargs = case.build(**build)
    except Exception:  # noqa: BLE001 - an input this dtype cannot hold is no input at all
        return REJECTED
    try:
        with contextlib.nullcontext() if build.get("requires_grad") else torch.no_grad():
            out = op(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the real kernel refusing an input is not a finding
        return REJECTED
    return args, kwargs, out


def tensor_leaves(value) -> list:
    """(path, leaf) for each leaf of an output tree; paths like out[0]."""
    leaves, _ = pytree.tree_flatten_with_path(value) if hasattr(pytree, "tree_flatten_with_path") else (None, None)
    if leaves is None:
        return [(f"out[{i}]", leaf) for i, leaf in enumerate(pytree.tree_leaves(value))]
    return [("out" + pytree.keystr(path), leaf) for path, leaf in leaves]


def float_slots(template: Template) -> set[int]:
    """Tensor slots that can require grad: floating and not written by the op."""
    return {n for n, s in enumerate(template.slots) if s.dtype.startswith(("float", "bfloat", "complex")) and not s.mutable}


def differentiable_outputs(out) -> list:
    return [leaf for _, leaf in tensor_leaves(out) if isinstance(leaf, torch.Tensor) and leaf.dtype.is_floating_point]


def first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    line = f"{type(exc).__name__}: {line}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


# ------------------------------------------------- torch's own checking machinery


class Machinery:
    """What a check gets when torch's own checking machinery (FakeTensorMode converting the
    inputs, gradcheck) fails on an input the real kernel runs fine on: not the op's failure.
    The check leaves that input unjudged and says so once (``not_checked``)."""

    def __init__(self, what: str, exc: BaseException):
        self.why = f"{what} failed on them ({first_line(exc, 200)})"


def raised_by_machinery(exc: BaseException) -> bool:
    """Did ``exc`` come from torch's machinery alone? Every frame of its traceback is torch's,
    the stdlib's or symfuzz's, and it was not raised by the op call itself (torch/_ops.py, a
    custom op's dispatch in torch/_library): a fake kernel in C++ raises there, one in Python
    shows its own frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    innermost = frames[-1].filename.replace("\\", "/")
    if innermost.endswith("/torch/_ops.py") or "/torch/_library/" in innermost:
        return False

    def machinery(path: str) -> bool:
        path = path.replace("\\", "/")
        return "/torch/" in path or path.startswith(HARNESS_DIRS) or ("/lib/python" in path and "-packages/" not in path)

    return all(machinery(f.filename) for f in frames)


def not_checked(notes: list, case, why: str) -> None:
    """Say once, in a check's notes, that some inputs were not judged because ``why``."""
    head = f"not checked on some inputs: {why}"
    if not any(n.startswith(head) for n in notes):
        notes.append(f"{head}, e.g. {case.describe()}; the op runs fine on them")

