"""Passes that shrink a captured graph (``GraphSubject``).

Each pass is a top-level function ``pass_fn(subject) -> Iterator[GraphSubject]``
yielding candidates, most ambitious first. Passes never run anything: the
driver checks each candidate in a fresh process, keeps the first that still
fails the same way and is strictly smaller, and restarts the pass on it.

Removing nodes keeps the graph's dynamic nature: a node whose value the
remaining graph still needs becomes a fresh input with the node's own
example shape, where a dim that was a symbol keeps that symbol (tied to the
other dims with it, and marked dynamic) and an integer polynomial in the
symbols (e.g. "2*s0") stays that expression (marked dynamic too). Other
dims take their hint. Symbolic dims never shrink below 2: 0 and 1 would be
specialized, and the candidate would no longer be dynamic.
"""

from __future__ import annotations

import copy
import json
from typing import Iterable, Iterator, Optional

from symfuzz.minifier.graph_subject import GraphSubject, dim_value, dynamic_dims, references, symbols_of, tensor_inputs

# Calls kept even when nothing uses their value: they act by side effect.
SIDE_EFFECT_TARGETS = {"_operator.setitem", "torch._C._set_grad_enabled", "torch.amp.autocast_mode._enter_autocast",
                       "torch.amp.autocast_mode._exit_autocast"}


# ---------------------------------------------------------------- graph editing


def is_impure(node: dict) -> bool:
    """In-place ops (``add_``, ``aten.copy_``) and global-state toggles."""
    if node["target"] in SIDE_EFFECT_TARGETS:
        return True
    parts = node["target"].split(".")
    return any(p.endswith("_") and not p.startswith("__") for p in parts[-2:])


def node_references(node: dict) -> set[str]:
    return set(references(node["args"])) | set(references(list(node["kwargs"].values())))


def eliminate_dead_code(data: dict) -> dict:
    """Drop calls nothing uses, then inputs nothing uses (in place; returns ``data``)."""
    used = set(references(data["output"]))
    kept = []
    for node in reversed(data["nodes"]):
        if node["name"] in used or is_impure(node):
            kept.append(node)
            used |= node_references(node)
    data["nodes"] = kept[::-1]
    for entry in data["inputs"]:  # a used size input needs the tensor it is read from
        if entry["kind"] == "size" and entry["name"] in used:
            used.add(entry["of"][0])
    data["inputs"] = [i for i in data["inputs"] if i["name"] in used]
    return data


def output_items(output) -> list:
    if isinstance(output, dict) and "$tuple" in output:
        return list(output["$tuple"])
    if isinstance(output, list):
        return list(output)
    return [output]


def fresh_inputs(node: dict, data: dict) -> Optional[list[dict]]:
    """Inputs that stand in for ``node``'s value, or None if it has no such stand-in.

    A tensor becomes a tensor input of the node's example shape; a SymInt
    that is a plain symbol becomes a size input (read from a tensor with
    that dim, or from a one-dim carrier tensor); an int becomes a scalar.
    """
    value = node.get("value") or {}
    name = node["name"]
    if "tensor" in value:
        meta = value["tensor"]
        dims = list(meta["dims"])
        dynamic = [isinstance(d, str) and dim_value(d, data["symbols"]) >= 2 for d in dims]
        return [{"name": name, "kind": "tensor", "dims": dims, "dynamic": dynamic, "dtype": meta["dtype"],
                 "dim_order": meta["dim_order"], "requires_grad": meta["requires_grad"],
                 "device": meta.get("device", "cpu"), "values": None, "seed": _next_seed(data)}]
    if "symint" in value and isinstance(value["symint"], str) and value["symint"] in data["symbols"]:
        symbol = value["symint"]
        for entry in tensor_inputs(data):
            if symbol in entry["dims"]:
                return [{"name": name, "kind": "size", "of": [entry["name"], entry["dims"].index(symbol)]}]
        carrier = {"name": name + "_carrier", "kind": "tensor", "dims": [symbol], "dynamic": [True],
                   "dtype": "float32", "dim_order": [0], "requires_grad": False, "device": "cpu", "values": None,
                   "seed": _next_seed(data)}
        return [carrier, {"name": name, "kind": "size", "of": [carrier["name"], 0]}]
    if "int" in value:
        return [{"name": name, "kind": "scalar", "value": value["int"]}]
    return None


def _next_seed(data: dict) -> int:
    return max((i.get("seed", 0) for i in tensor_inputs(data)), default=-1) + 1


def remove_nodes(subject: GraphSubject, names: Iterable[str]) -> Optional[GraphSubject]:
    """The graph without the named call nodes, or None if nothing useful is left.

    - A removed node the rest still uses becomes a fresh input (see
      ``fresh_inputs``); one that cannot (a tuple, a SymInt expression)
      is kept after all.
    - A kept node that lost all its users becomes an output: removing the
      tail of a graph truncates it there.
    """
    data = copy.deepcopy(subject.data)
    by_name = {n["name"]: n for n in data["nodes"]}
    removed = set(names) & set(by_name)
    while True:
        needed = _needed_by([n for n in data["nodes"] if n["name"] not in removed])
        stuck = {name for name in removed & needed if fresh_inputs(by_name[name], data) is None}
        if not stuck:
            break
        removed -= stuck
    if not removed:
        return None
    users = _users(data["nodes"])
    survivors = [n for n in data["nodes"] if n["name"] not in removed]
    already_out = set(references(data["output"]))
    frontier = [n["name"] for n in survivors
                if users[n["name"]] and users[n["name"]] <= removed and n["name"] not in already_out
                and "tensor" in (n.get("value") or {})]
    items = [item for item in output_items(data["output"]) if not set(references(item)) & removed]
    data["output"] = {"$tuple": items + [{"$node": name} for name in frontier]}
    data["nodes"] = survivors
    for name in (n for n in by_name if n in removed and n in needed):
        data["inputs"].extend(fresh_inputs(by_name[name], data))
    return _finished(data)


def _finished(data: dict) -> Optional[GraphSubject]:
    """DCE, and None when no call or no output is left (nothing to compile)."""
    eliminate_dead_code(data)
    if not data["nodes"] or not any(True for _ in references(data["output"])):
        return None
    return GraphSubject(data)


def _needed_by(nodes: list[dict]) -> set[str]:
    needed = set()
    for node in nodes:
        needed |= node_references(node)
    return needed


def _users(nodes: list[dict]) -> dict[str, set[str]]:
    users = {n["name"]: set() for n in nodes}
    for node in nodes:
        for ref in node_references(node):
            if ref in users:
                users[ref].add(node["name"])
    return users


def with_output(subject: GraphSubject, items: list) -> Optional[GraphSubject]:
    data = copy.deepcopy(subject.data)
    data["output"] = {"$tuple": items}
    return _finished(data)


def _unique(candidates: Iterable[Optional[GraphSubject]]) -> Iterator[GraphSubject]:
    """Skip None and repeats (the driver would ask again otherwise: its cache only helps once asked)."""
    seen = set()
    for candidate in candidates:
        if candidate is None:
            continue
        key = json.dumps(candidate.data, sort_keys=True)
        if key not in seen:
            seen.add(key)
            yield candidate


def _by_cost(candidates: Iterable[Optional[GraphSubject]]) -> list[GraphSubject]:
    return sorted(_unique(candidates), key=lambda c: c.cost())


def _edit_inputs(subject: GraphSubject, edit) -> Optional[GraphSubject]:
    """A copy whose tensor inputs ``edit(entry)`` changed in place; None if it changed none."""
    data = copy.deepcopy(subject.data)
    changed = [edit(entry) for entry in tensor_inputs(data)]
    return GraphSubject(data) if any(changed) else None


# ---------------------------------------------------------------- passes: structure


def keep_one_output(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Return just one of the outputs (and drop what only the others needed)."""
    items = output_items(subject.data["output"])
    if len(items) > 1:
        yield from _by_cost(with_output(subject, [item]) for item in items)


def remove_node_chunks(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Delta debugging over the call nodes: for halves, quarters, ... single
    nodes, first keep only one chunk, then remove one chunk. Removed nodes
    that are still needed become fresh inputs (see ``remove_nodes``)."""
    names = [n["name"] for n in subject.data["nodes"]]

    def candidates():
        for chunks in _partitions(names):
            if len(chunks) > 1:
                for chunk in chunks:
                    keep = set(chunk)
                    yield remove_nodes(subject, [n for n in names if n not in keep])
            for chunk in chunks:
                yield remove_nodes(subject, chunk)

    yield from _unique(candidates())


def _partitions(items: list) -> Iterator[list[list]]:
    """Contiguous chunks of ``items``: 2 chunks, then 4, 8, ... up to single items."""
    count = 2
    while True:
        count = min(count, len(items))
        size = -(-len(items) // count)
        yield [items[i:i + size] for i in range(0, len(items), size)]
        if count >= len(items):
            return
        count *= 2


def truncate_at_node(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Make one node the only output (dropping everything after it)."""
    nodes = [n for n in subject.data["nodes"] if "tensor" in (n.get("value") or {})]
    yield from _by_cost(with_output(subject, [{"$node": n["name"]}]) for n in nodes)


# ---------------------------------------------------------------- passes: shapes


def drop_dynamic_marks(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Unmark dynamic dims: all at once, per symbol, then one dim at a time.
    What survives is the set of marks the failure needs."""
    marked = dynamic_dims(subject.data)
    if not marked:
        return
    groups = [marked]
    by_expr: dict[str, list] = {}
    for name, dim in marked:
        entry = _input(subject.data, name)
        by_expr.setdefault(entry["dims"][dim], []).append((name, dim))
    groups += [g for g in by_expr.values() if len(g) > 1] + [[m] for m in marked]
    yield from _unique(_unmarked(subject, group) for group in groups)


def _unmarked(subject: GraphSubject, group: list) -> Optional[GraphSubject]:
    wanted = set(group)

    def edit(entry):
        hits = [d for d in range(len(entry["dims"])) if (entry["name"], d) in wanted and entry["dynamic"][d]]
        for d in hits:
            entry["dynamic"][d] = False
        return bool(hits)

    return _edit_inputs(subject, edit)


def shrink_sizes(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Smaller values for the size symbols: every symbol to 2 at once, then
    each symbol to 2, 3 or half. Dims sharing a symbol stay equal."""
    symbols = subject.data["symbols"]
    used = sorted({s for entry in tensor_inputs(subject.data) for d in entry["dims"] for s in symbols_of(d)} & set(symbols))
    changes = [{s: 2 for s in used if symbols[s] > 2}]
    for symbol in used:
        value = symbols[symbol]
        changes += [{symbol: v} for v in sorted({2, 3, value // 2}) if 2 <= v < value]
    yield from _unique(_with_symbols(subject, change) for change in changes if change)


def _with_symbols(subject: GraphSubject, change: dict) -> Optional[GraphSubject]:
    data = copy.deepcopy(subject.data)
    data["symbols"].update(change)
    for entry in tensor_inputs(data):
        for dim, dynamic in zip(entry["dims"], entry["dynamic"]):
            size = dim_value(dim, data["symbols"])
            if size < (2 if dynamic and isinstance(dim, str) else 1):
                return None  # a dynamic dim of 0 or 1 would be specialized
    return GraphSubject(data)


def shrink_static_dims(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Smaller static dims: all static dims of one size together (they are
    often the same feature size), to 2 or half."""
    sizes = sorted({d for entry in tensor_inputs(subject.data) for d in entry["dims"] if isinstance(d, int) and d > 2},
                   reverse=True)
    for size in sizes:
        for new in sorted({2, size // 2}):
            if 2 <= new < size:
                yield from _unique([_edit_inputs(subject, lambda e, s=size, n=new: _resize_static(e, s, n))])


def _resize_static(entry: dict, size: int, new: int) -> bool:
    hits = [d for d, dim in enumerate(entry["dims"]) if isinstance(dim, int) and dim == size]
    for d in hits:
        entry["dims"][d] = new
    return bool(hits)


# ---------------------------------------------------------------- passes: inputs


def drop_saved_values(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Seeded values instead of the script's saved ones (the repro then needs no files)."""
    yield from _per_input(subject, lambda e: bool(e.get("values")), lambda e: e.update(values=None))


def simplify_dtypes(subject: GraphSubject) -> Iterator[GraphSubject]:
    """float64 / float16 / bfloat16 inputs become float32."""
    floating = ("float64", "float16", "bfloat16")
    yield from _per_input(subject, lambda e: e["dtype"] in floating, lambda e: e.update(dtype="float32"))


def drop_requires_grad(subject: GraphSubject) -> Iterator[GraphSubject]:
    """Inputs that need no grad (AOTAutograd then compiles no backward),
    then grad mode off altogether."""
    yield from _per_input(subject, lambda e: e["requires_grad"], lambda e: e.update(requires_grad=False))
    if subject.data["grad_enabled"] and not any(e["requires_grad"] for e in tensor_inputs(subject.data)):
        yield subject.replace(grad_enabled=False)


def _per_input(subject: GraphSubject, applies, change) -> Iterator[GraphSubject]:
    """All applicable inputs changed at once, then each one alone."""
    names = [e["name"] for e in tensor_inputs(subject.data) if applies(e)]
    groups = ([names] if len(names) > 1 else []) + [[n] for n in names]

    def edited(group: set) -> Optional[GraphSubject]:
        def edit(entry):
            if entry["name"] not in group:
                return False
            change(entry)
            return True

        return _edit_inputs(subject, edit)

    yield from _unique(edited(set(group)) for group in groups)


def _input(data: dict, name: str) -> dict:
    return next(i for i in data["inputs"] if i["name"] == name)


PASSES = [
    keep_one_output,
    remove_node_chunks,
    truncate_at_node,
    drop_dynamic_marks,
    shrink_sizes,
    shrink_static_dims,
    drop_saved_values,
    simplify_dtypes,
    drop_requires_grad,
]
