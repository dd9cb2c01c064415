"""Argument kinds: samples derived from one by changing its non-tensor arguments.

An author's sample passes one value per argument: ``k=3``, ``bias=None``,
``alpha=0.5``. Bugs hide at the values it never passes: ``x[..., -k:]`` at
``k=0``, a fake kernel that ignores ``n`` once it is given, a branch taken
only for a negative scale. From each argument's schema type this derives new
samples, each changing one argument:

- ``int``/``SymInt``: 0, 1, -1, and one more than the sample's value;
- ``float``: 0.0, the negated value, a large value (1e4);
- ``Scalar`` (a ``number``): as an int or a float, whichever the sample passes;
- ``bool``: the other value;
- an optional argument the sample passes: None; one it leaves None:
  a value of its type (an int: 1 and a size of the sample's first tensor;
  a float: 0.5; a bool: both; a tensor: the first tensor's shape, its last
  dim, and a 0-dim tensor, in its dtype).

Optional tensors that every recorded call gives together, or leaves None together
(a compressed statistics tensor and its code table), are one contract
(``coupled_optionals``): they are dropped together, and one of them is never given
alone. A kernel that crashes on half of such a pair says nothing about the op.

Each derived sample is a ``Template`` whose ``axis`` names the change
("argument k=0", "argument bias given"), and the runner sweeps it like the
sample. A derived sample the real kernel refuses is dropped: the argument's
contract, not a finding.
"""

from __future__ import annotations

import torch

from symfuzz.opcheck.inputs import Template

MAX_DERIVED = 16  # per sample: a long signature must not multiply the sweep without end


def derived_samples(op, template: Template, make, coupled=()) -> list[Template]:
    """Templates differing from ``template`` in one non-tensor argument (or one group of
    ``coupled`` optional tensors, dropped together), with ``axis`` set.

    ``make(args, kwargs)`` builds a template (the caller's: it knows the op's
    schema and mutable arguments)."""
    out = []
    tensors = [t for t in template.leaves if isinstance(t, torch.Tensor)]
    group_of = {name: group for group in coupled for name in group}
    arguments = list(enumerate(op._schema.arguments))
    for position, arg in arguments:
        present, value = _value(template, position, arg)
        alternatives = _alternatives(arg, present, value, tensors)
        group = group_of.get(arg.name)
        if group is not None:
            if value is None or arg.name != group[0]:
                continue  # never given alone; dropped once, with the whole group (below)
            alternatives = [(label, new) for label, new in alternatives if new is None]
        for label, new in alternatives:
            args, kwargs = _with(template, position, arg, new)
            if group is not None:
                for other_position, other in arguments:
                    if other.name in group[1:]:
                        args, kwargs = _with(template, other_position, other, None, args, kwargs)
                label = "=None, ".join(group) + "=None"
                derived = make(args, kwargs)
                derived.axis = f"argument {label}"
            else:
                derived = make(args, kwargs)
                derived.axis = f"argument {arg.name}{label}"
            out.append(derived)
            if len(out) >= MAX_DERIVED:
                return out
    return out


def coupled_optionals(op, templates) -> list[tuple[str, ...]]:
    """Groups of two or more optional tensor arguments that every recorded call
    (``templates``) gives together or leaves None together, in schema order."""
    by_presence: dict = {}
    for position, arg in enumerate(op._schema.arguments):
        optional, base = _type_name(arg.type)
        if optional and base == "Tensor":
            presence = tuple(_value(t, position, arg)[1] is not None for t in templates)
            by_presence.setdefault(presence, []).append(arg.name)
    return [tuple(names) for names in by_presence.values() if len(names) > 1]


def describe_coupled(groups) -> list[str]:
    """The report's contract line for each coupled group."""
    return [f"{', '.join(group)}: given together or None together, as in every recorded call" for group in groups]


def _value(template, position, arg):
    """(the sample passes it, its value or its default)."""
    if not arg.kwarg_only and position < len(template.args):
        return True, template.args[position]
    if arg.name in template.kwargs:
        return True, template.kwargs[arg.name]
    return False, arg.default_value if arg.has_default_value() else None


def _with(template, position, arg, new, args=None, kwargs=None):
    """``template``'s (or the given) arguments with ``arg`` set to ``new``."""
    args = list(template.args if args is None else args)
    kwargs = dict(template.kwargs if kwargs is None else kwargs)
    if not arg.kwarg_only and position < len(args):
        args[position] = new
    else:
        kwargs[arg.name] = new
    return tuple(args), kwargs


def _type_name(t) -> tuple[bool, str]:
    """(optional, the base type's name: "int", "float", "bool", "Tensor", ...)."""
    text = str(t)
    if text.startswith("Optional[") and text.endswith("]"):
        return True, text[len("Optional["):-1]
    if text.endswith("?"):
        return True, text[:-1]
    return False, text


def _alternatives(arg, present, value, tensors):
    """[(label suffix, new value)] for one argument."""
    optional, base = _type_name(arg.type)
    if isinstance(value, torch.Tensor) or base.startswith(("List", "Tensor[]", "int[]", "SymInt[]", "Device",
                                                            "ScalarType", "Layout", "MemoryFormat", "str")):
        if optional and value is not None:
            return [("=None", None)]
        return []
    if value is None:
        return _given(base, tensors) if optional else []
    out = []
    if optional:
        out.append(("=None", None))
    if isinstance(value, bool):
        out.append((f"={not value}", not value))
    elif isinstance(value, int) and base in ("int", "SymInt", "number"):  # "number": a Scalar
        out += [(f"={v}", v) for v in dict.fromkeys((0, 1, -1, value + 1)) if v != value]
    elif isinstance(value, (int, float)) and base in ("float", "SymFloat", "number"):
        value = float(value)
        out += [(f"={v!r}", v) for v in dict.fromkeys((0.0, -value, 1e4)) if v != value]
    return out


def _given(base, tensors):
    """Values for an optional argument the sample leaves None."""
    first = next((t for t in tensors if t.dim() > 0), None)
    if base in ("int", "SymInt", "number"):
        sizes = sorted({int(s) for s in first.shape} | {2 * int(first.shape[-1])}) if first is not None else []
        return [(f"={v}", v) for v in dict.fromkeys([1, *sizes])]
    if base in ("float", "SymFloat"):
        return [("=0.5", 0.5)]
    if base == "bool":
        return [("=False", False), ("=True", True)]
    if base == "Tensor" and first is not None:
        like = first.detach()
        shapes = dict.fromkeys([tuple(like.shape), tuple(like.shape[-1:]), ()])
        return [(f" given {list(shape)}", torch.randn(shape, generator=torch.Generator().manual_seed(0),
                                                     dtype=torch.float64).to(like.dtype)
                 if like.dtype.is_floating_point else torch.zeros(shape, dtype=like.dtype))
                for shape in shapes]
    return []


__all__ = ["MAX_DERIVED", "coupled_optionals", "derived_samples", "describe_coupled"]
