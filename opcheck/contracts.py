"""Shape contracts: which arguments the sweep must not resize, and which follow others.

Real kernels trust some arguments' shapes: a 256-entry quantization code, a
codebook, a lookup table, a per-block scale vector whose length follows from
another argument (``ceil(numel / blocksize)``). Resizing them independently
builds inputs no caller can make, and a kernel that reads out of bounds on
them says nothing about the op. The recorded calls show the contracts:

- an argument **keeps its shape** when it has the same shape in every
  recorded call while other arguments' shapes vary;
- a dim **follows** another argument when it equals ``ceil(n / k)`` in every
  recorded call, where ``n`` is another tensor's numel or one of its dims and
  ``k`` an int argument (or 1 for a numel), and ``n`` or ``k`` varied;
- two tensors' dims are **tied** when they are equal in every recorded call and
  varied (per-row statistics of ``A``: ``A.size(0)``): no axis, broadcasting
  included, gives either a size of its own. So are equal dims that never varied
  where broadcasting cannot relate them (not at the same place from the right,
  the size once in each tensor), and any dim a written tensor (``out=``) shares;
- a tensor that varied only as its rule says (absmax, with only the blocksize
  changing) does not make the others look held fixed.

Where no call varied, the one shape's ties decide: equal sizes move together
(the sweep's ties), ``ceil(n / k)`` rules that hold are taken, and a tensor
whose sizes tie to no other argument and no output is held fixed. The author can name the fixed arguments instead
(``check(..., fixed=("code",))``, a pytest marker or a command-line flag);
``fixed=()`` holds nothing fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# No torch import at module level: the pytest plugin parses --opcheck-fixed with
# parse_fixed, and loading the plugin must not import torch.


@dataclass(frozen=True)
class SizeRule:
    """size = ceil(source / divisor): source is a tensor slot's numel (dim None) or one of its dims."""

    slot: int
    dim: int | None
    divisor_leaf: int | None  # index into the template's leaves of an int argument; None: 1

    def size(self, shapes, leaves) -> int:
        shape = shapes[self.slot]
        source = _numel(shape) if self.dim is None else shape[self.dim]
        k = 1 if self.divisor_leaf is None else int(leaves[self.divisor_leaf])
        return -(-source // k) if k > 0 else source

    def text(self, names, leaf_names) -> str:
        source = f"{names[self.slot]}.numel()" if self.dim is None else f"{names[self.slot]}.size({self.dim})"
        return source if self.divisor_leaf is None else f"ceil({source} / {leaf_names[self.divisor_leaf]})"


@dataclass
class Contracts:
    fixed: dict = field(default_factory=dict)  # slot -> why
    follows: dict = field(default_factory=dict)  # (slot, dim) -> SizeRule
    ties: list = field(default_factory=list)  # ((slot, dim), (slot, dim), why): equal in every call, a contract

    def is_tied(self, slot: int, dim: int) -> bool:
        """Must this dim keep the size of another tensor's dim (a tie every recorded call showed)?"""
        return any((slot, dim) in pair[:2] for pair in self.ties)

    def is_free(self, slot: int, dim: int) -> bool:
        """Does the sweep choose this dim's size (rather than a contract)?"""
        return slot not in self.fixed and (slot, dim) not in self.follows

    def describe(self, template) -> list[str]:
        """One line per contract, for the report."""
        names, leaf_names = slot_names(template), leaf_labels(template)
        lines = [f"{names[s]}: held fixed at {template.slots[s].dtype}{list(template.slots[s].shape)} ({why})"
                 for s, why in sorted(self.fixed.items())]
        for (s, d), rule in sorted(self.follows.items()):
            lines.append(f"{names[s]}: size({d}) follows {rule.text(names, leaf_names)}, as in every recorded call")
        for (s, d), (t, j), why in self.ties:
            lines.append(f"{names[s]}.size({d}) == {names[t]}.size({j}): {why}; no axis unties them")
        return lines


def _numel(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _paths(template):
    # deferred: the plugin parses --opcheck-fixed through this module, and must not import torch
    import torch.utils._pytree as pytree

    leaves, _ = pytree.tree_flatten_with_path((template.args, template.kwargs))
    return [path for path, _ in leaves]


def leaf_labels(template) -> list[str]:
    """A readable name per leaf: the schema's argument name (``code``, ``tensors[1]``), else ``arg2``."""
    schema = getattr(template, "schema", None)
    arg_names = [a.name for a in schema.arguments] if schema is not None else []
    out = []
    for path in _paths(template):
        first, rest = path[1], path[2:]
        if path[0].idx == 0:
            i = first.idx
            name = arg_names[i] if i < len(arg_names) else f"arg{i}"
        else:
            name = str(first.key)
        for key in rest:
            name += f"[{getattr(key, 'idx', getattr(key, 'key', '?'))}]"
        out.append(name)
    return out


def slot_names(template) -> list[str]:
    labels = leaf_labels(template)
    return [labels[i] for i in template.tensor_positions]


def _int_leaves(template) -> list[int]:
    return [i for i, leaf in enumerate(template.leaves)
            if isinstance(leaf, int) and not isinstance(leaf, bool) and leaf > 1]


def infer(templates) -> Contracts:
    """Contracts shown by the recorded calls (templates of one structure)."""
    shapes = [[s.shape for s in t.slots] for t in templates]
    n = len(templates[0].slots)
    varied = [len({call[s] for call in shapes}) > 1 for s in range(n)]
    ints = _int_leaves(templates[0])
    if not any(varied):
        return _from_ties(templates[0])
    follows = {}
    for s in range(n):
        for d in range(len(templates[0].slots[s].shape)):
            rule = _explaining_rule(templates, s, d, varied, ints, require_variation=True)
            if rule is not None:
                follows[(s, d)] = rule
    # A tensor whose every change is explained by rules (absmax: ceil(A.numel() / blocksize),
    # with only the blocksize changing) is not a shape the caller varied: the others
    # keeping theirs does not make them lookup tables.
    # (A rank that changed between calls is variation too: _dim gives None past a call's rank.)
    free_variation = [varied[s] and not all((s, d) in follows or len({_dim(t, s, d) for t in templates}) == 1
                                            for d in range(len(templates[0].slots[s].shape))) for s in range(n)]
    if not any(free_variation):
        # As from one shape, but with the rules every call showed (a rule read off one call
        # could be a coincidence the others refute).
        out = _from_ties(templates[0], follows)
        out.ties = _ties(templates, out)
        return out
    out = Contracts()
    calls = len(templates)
    for s in range(n):
        if not varied[s]:
            others = [slot_names(templates[0])[o] for o in range(n) if free_variation[o]]
            out.fixed[s] = f"the same shape in all {calls} recorded calls while {', '.join(others)} varied"
    out.follows = {k: r for k, r in follows.items() if k[0] not in out.fixed}
    out.ties = _ties(templates, out)
    return out


def _dim(template, s, d):
    shape = template.slots[s].shape
    return shape[d] if d < len(shape) else None


def _ties(templates, contracts) -> list:
    """Pairs of dims of two free tensors, equal in every call, that are a contract:
    their size varied between calls, or no broadcasting can relate them (see _fixed_tie)."""
    first, out = templates[0], []
    n = len(first.slots)
    dims = [(s, d) for s in range(n) if s not in contracts.fixed for d in range(len(first.slots[s].shape))
            if (s, d) not in contracts.follows]
    for i, (s, d) in enumerate(dims):
        for t, j in dims[i + 1:]:
            if t == s:
                continue
            sizes = [(_dim(tpl, s, d), _dim(tpl, t, j)) for tpl in templates]
            if not all(a is not None and a == b for a, b in sizes):
                continue
            if len({a for a, _ in sizes}) > 1:
                out.append(((s, d), (t, j), f"equal in all {len(templates)} recorded calls while it varied"))
            elif all(_fixed_tie(tpl, (s, d), (t, j)) for tpl in templates):
                why = ("the op writes to one of them (the shape it gives its result)"
                       if first.slots[s].mutable or first.slots[t].mutable
                       else "equal in every recorded call, at places broadcasting never relates")
                out.append(((s, d), (t, j), why))
    return out


def _fixed_tie(template, a, b) -> bool:
    """Is the equality of dims ``a`` and ``b`` (slot, dim) a contract even though its size never varied?

    - One of the tensors is one the op writes to (``out=``, in place): it has the shape the op
      gives its result, so it keeps the sizes it shares with the inputs.
    - The two dims cannot meet under broadcasting (they are not at the same place counted from
      the right, as per-row statistics ``[m]`` beside ``A[m, k]``), and the size is unambiguous:
      it occurs once in each tensor. Broadcasting such a pair apart builds an input no caller
      makes; dims broadcasting aligns (a bias ``[k]`` beside ``A[m, k]``) stay the sweep's.
    """
    (s, d), (t, j) = a, b
    slots = template.slots
    size = slots[s].shape[d]
    if size < 2:
        return False
    if slots[s].mutable or slots[t].mutable:
        return True
    if len(slots[s].shape) - d == len(slots[t].shape) - j:
        return False
    return list(slots[s].shape).count(size) == 1 and list(slots[t].shape).count(size) == 1


def _from_ties(template, follows=None) -> Contracts:
    """No recorded call varied: read the contracts from the one call's ties.

    A dim that is ``ceil(n / k)`` of another argument follows it. A tensor none
    of whose sizes ties to another argument, to an output or to such a rule (a
    lookup table beside the data it indexes) is held fixed, as long as another
    tensor is tied to something and stays free for the sweep.
    """
    out = Contracts()
    shapes = [slot.shape for slot in template.slots]
    n = len(shapes)
    ints = _int_leaves(template)
    everywhere = [True] * n
    if follows is not None:
        out.follows = dict(follows)
    else:
        for s in range(n):
            for d in range(len(shapes[s])):
                rule = _explaining_rule([template], s, d, everywhere, ints, require_variation=False)
                if rule is not None:
                    out.follows[(s, d)] = rule
    out.ties = _ties([template], out)
    sized = [s for s in range(n) if any(v >= 2 for v in shapes[s])]
    if len(sized) < 2:
        return out
    outputs = getattr(template, "output_sizes", set())
    linked = {s for s, _ in out.follows} | {rule.slot for rule in out.follows.values()}
    for s in sized:
        others = {v for o in range(n) if o != s for v in shapes[o]}
        if any(v >= 2 and (v in others or v in outputs) for v in shapes[s]):
            linked.add(s)
    if linked:
        for s in sized:
            if s not in linked:
                out.fixed[s] = "its sizes tie to no other argument and no output of the one recorded shape"
        out.ties = [tie for tie in out.ties if tie[0][0] not in out.fixed and tie[1][0] not in out.fixed]
    return out


def _explaining_rule(templates, s, d, varied, ints, *, require_variation):
    """The first rule that gives dim ``d`` of slot ``s`` in every call, or None.
    A dim equal to another dim is left out: the sweep's ties keep those equal.
    ``require_variation``: the rule's source must have changed between calls
    (else, with one call, a divisor or a numel rule is taken as it is)."""
    first = templates[0]
    for t in range(len(first.slots)):
        # A source that kept its shape still gives a rule whose int argument varied:
        # ceil(A.numel() / blocksize) with A fixed and blocksize changing (_source_varies).
        if t == s or (not varied[t] and not require_variation):
            continue
        candidates = [SizeRule(t, None, None)] if len(first.slots[t].shape) >= 2 else []
        candidates += [SizeRule(t, None, k) for k in ints]
        candidates += [SizeRule(t, j, k) for j in range(len(first.slots[t].shape)) for k in ints]
        for rule in candidates:
            if all(_holds(rule, tpl, s, d) for tpl in templates) and (
                    not require_variation or _source_varies(rule, templates)):
                return rule
    return None


def _holds(rule: SizeRule, template, s, d) -> bool:
    shapes = [slot.shape for slot in template.slots]
    if d >= len(shapes[s]) or (rule.dim is not None and rule.dim >= len(shapes[rule.slot])):
        return False
    leaf = template.leaves[rule.divisor_leaf] if rule.divisor_leaf is not None else 1
    if not isinstance(leaf, int) or isinstance(leaf, bool) or leaf < 1:
        return False
    return rule.size(shapes, template.leaves) == shapes[s][d]


def _source_varies(rule: SizeRule, templates) -> bool:
    """A rule whose inputs never changed is a coincidence, not a contract."""
    values = {(rule.size([sl.shape for sl in t.slots], t.leaves)) for t in templates}
    return len(values) > 1


def assign(templates, fixed=None, *, schema=None) -> list[str]:
    """Give each template its contracts; returns the report's lines.

    ``fixed``: None infers; a sequence of argument names holds exactly those
    fixed (``()``: none), with ``follows`` rules still inferred.
    """
    groups: dict = {}
    for t in templates:
        t.schema = schema
        groups.setdefault(t.structure, []).append(t)
    lines = []
    for group in groups.values():
        contracts = infer(group)
        if fixed is not None:
            names = slot_names(group[0])
            unknown = [f for f in fixed if f not in names]
            if unknown:
                raise ValueError(f"fixed: no tensor argument named {', '.join(map(repr, unknown))} "
                                 f"(the tensor arguments are {', '.join(names) or 'none'})")
            contracts.fixed = {names.index(f): "asked for" for f in fixed}
            contracts.follows = {k: r for k, r in contracts.follows.items()
                                 if k[0] not in contracts.fixed and r.slot not in contracts.fixed}
        for t in group:
            t.contracts = contracts
        lines += [line for line in contracts.describe(group[0]) if line not in lines]
    return lines


def parse_fixed(entries) -> dict:
    """["ns::op=a,b", "ns::other="] -> {"ns::op": ["a", "b"], "ns::other": []}."""
    out = {}
    for entry in entries or ():
        op, sep, names = str(entry).partition("=")
        op = op.strip()
        if not sep or "::" not in op:
            raise ValueError(f"expected NS::OP=ARG[,ARG] (or NS::OP= for none), got {entry!r}")
        out[op.removesuffix(".default")] = [n.strip() for n in names.split(",") if n.strip()]
    return out


__all__ = ["Contracts", "SizeRule", "assign", "infer", "parse_fixed", "slot_names"]
