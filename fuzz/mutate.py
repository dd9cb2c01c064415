"""Mutants of a stored case: its Hypothesis choice sequence drawn again with a small edit.

A case is a pure function of its choice sequence (``drawing.py``), so a case near a stored
one is its choices with one to three edits, drawn again. The edits know the sequence's
shape, read by replaying the parent once (``Layout``): each choice's type and bounds,
where ``build_case``'s loop starts each statement (its kind choice, then the statement's
own choices, the first of them an op statement's op), the statement count before the
loop, and the call count and per-call sizes at the start. So a typical edit changes one
op, size, dtype, flag or mark, drops, duplicates or copies a statement, adds or drops a
call, or redraws everything after a point.

The edited choices are drawn statement by statement (``StatementFeeder``): the header's,
then each statement's own from the statement's start, so an edit that changes how many
choices one statement draws (another op takes other params) leaves the statements after
it as they were. A choice that does not fit the draw it lands on is passed over for one of
the next few that fits (so a choice too many is skipped), else drawn at random, as is every
draw past the end of its statement's choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Callable, Optional

from hypothesis.errors import StopTest

from symfuzz.fuzz.drawing import PROVIDER, draw_with, generate

try:  # internal API: without it mutants fall back to fresh draws (generate_mutant)
    from hypothesis.internal.conjecture.choice import choice_permitted
except ImportError:  # pragma: no cover - depends on the installed Hypothesis
    choice_permitted = None

# build_case draws each statement's kind as integers(0, KIND_MAX), at the top of its loop;
# Worlds.add_input draws each input's seed at each call as integers(0, SEED_MAX).
KIND_MAX = 35
SEED_MAX = 2**31 - 1
# A choice that does not fit its draw: the next few are tried before a random draw (a
# choice too many, a seed of a dropped call, is skipped so the rest stays in step).
LOOKAHEAD = 3
# How many edits a mutant gets (value, weight); at most one of them changes the structure.
EDIT_COUNTS = [(1, 6), (2, 3), (3, 1)]
STRUCTURAL_SHARE = 0.4
# Mutants drawn (each with another edit) before the fresh draw of (seed, index) stands in.
MAX_TRIES = 5
LAYOUT_CACHE_SIZE = 32


def is_kind(choice_type: str, constraints: dict) -> bool:
    """Whether a draw is a statement's kind (``KIND_MAX``)."""
    return choice_type == "integer" and constraints.get("min_value") == 0 \
        and constraints.get("max_value") == KIND_MAX and not constraints.get("weights")


# ------------------------------------------------------------------ reading the parent


@dataclass(frozen=True)
class Layout:
    """The parent's choices as a replay read them.

    ``statements``: the index of each statement's kind choice, in order; a statement's
    choices run to the next one's kind, the last one's on to the end, through the
    schedule's. ``n_ops``: the index of the statement count, or None. ``calls``: whether
    the sequence opens with the call count and the symbol count, then each symbol's size
    at each call (build_case's first draws, all alike). ``seeds``: the indices of the
    inputs' seeds, one per call for each input, in order.
    """

    choices: tuple
    nodes: tuple  # Hypothesis ChoiceNodes: type, value, constraints
    statements: tuple
    n_ops: Optional[int]
    calls: bool
    seeds: tuple
    program: dict
    schedule: dict

    def editable(self, start: int = 0, stop: Optional[int] = None) -> list[int]:
        """Indices of the integer and boolean choices in ``[start, stop)``."""
        stop = len(self.nodes) if stop is None else stop
        return [i for i in range(start, stop) if self.nodes[i].type in ("integer", "boolean")]

    def segments(self) -> list[list]:
        """The choices cut before each statement: the header's, then each statement's."""
        cuts = [0, *self.statements, len(self.choices)] if self.statements else [0, len(self.choices)]
        return [list(self.choices[a:b]) for a, b in zip(cuts, cuts[1:])]

    def locate(self, index: int) -> tuple[int, int]:
        """The (segment, offset) of the choice at ``index``."""
        segment = sum(1 for s in self.statements if s <= index)
        start = self.statements[segment - 1] if segment else 0
        return segment, index - start


def read_layout(choices, config) -> Layout:
    """Replay ``choices`` and read their layout. A sequence that ends early (or was
    written by another generator version) is completed by a fixed random draw."""
    case, data = draw_with(Random(0), config, prefix=tuple(choices))
    nodes = data.nodes
    statements = tuple(i for i, n in enumerate(nodes) if is_kind(n.type, n.constraints))
    n_ops = statements[0] - 1 if statements and statements[0] > 0 else None
    if n_ops is not None and not _bounded(nodes[n_ops], config.min_ops, config.max_ops):
        n_ops = None
    seeds = tuple(i for i, n in enumerate(nodes) if _bounded(n, 0, SEED_MAX))
    return Layout(tuple(data.choices), nodes, statements, n_ops, _opens_with_calls(nodes, config), seeds,
                  case.program.to_json(), case.schedule.to_json())


def _bounded(node, low, high) -> bool:
    return node.type == "integer" and (node.constraints.get("min_value"), node.constraints.get("max_value")) == (low, high)


def _opens_with_calls(nodes, config) -> bool:
    if len(nodes) < 2 or not _bounded(nodes[0], config.min_calls, config.max_calls) \
            or not _bounded(nodes[1], 1, config.max_symbols):
        return False
    count = nodes[0].value * nodes[1].value
    sizes = nodes[2:2 + count]
    return len(sizes) == count and all(n.type == "integer" and n.constraints == sizes[0].constraints for n in sizes)


_layouts: dict = {}


def parent_layout(choices, config) -> Layout:
    """``read_layout``, remembered for the last few parents (a pool's parents recur)."""
    key = (repr(list(choices)), repr(config))  # (a config with an --ops list is not hashable)
    layout = _layouts.get(key)
    if layout is None:
        layout = read_layout(choices, config)
        if len(_layouts) >= LAYOUT_CACHE_SIZE:
            _layouts.pop(next(iter(_layouts)))
        _layouts[key] = layout
    return layout


# ------------------------------------------------------------------ drawing statement by statement


if PROVIDER is not None and choice_permitted is not None:

    class StatementFeeder(PROVIDER):
        """Symfuzz's provider, answering each draw from ``segments`` first.

        Segment 0 feeds the draws before the first statement; each statement's kind draw
        moves to the next segment, from its start. A value of the wrong type or outside the
        draw's bounds is passed over for one of the next ``LOOKAHEAD`` that fits, else drawn
        at random, as is any draw past a segment's end. ``kinds`` counts the statements drawn.
        """

        def __init__(self, conjecturedata, segments=()):
            super().__init__(conjecturedata)
            self.segments = [list(s) for s in segments]
            self.segment = 0
            self.offset = 0
            self.kinds = 0
            self.misfits = 0
            self._inner = 0  # inside a draw that draws others (strings, bytes): those are not fed

        def _fed(self, choice_type: str, constraints: dict):
            if self._inner:
                return None
            if is_kind(choice_type, constraints):
                self.kinds += 1
                self.segment, self.offset = self.kinds, 0
            if self.segment >= len(self.segments):
                return None
            segment = self.segments[self.segment]
            for offset in range(self.offset, min(len(segment), self.offset + 1 + LOOKAHEAD)):
                value = segment[offset]
                kind = {bool: "boolean", int: "integer", float: "float", str: "string", bytes: "bytes"}.get(type(value))
                if kind == choice_type and choice_permitted(value, constraints):
                    self.misfits += offset - self.offset
                    self.offset = offset + 1
                    return (value,)
            if self.offset < len(segment):
                self.misfits += 1
                self.offset += 1
            return None

        def draw_integer(self, min_value=None, max_value=None, *, weights=None, shrink_towards=0):
            fed = self._fed("integer", {"min_value": min_value, "max_value": max_value, "weights": weights,
                                        "shrink_towards": shrink_towards})
            return fed[0] if fed else super().draw_integer(min_value, max_value, weights=weights,
                                                           shrink_towards=shrink_towards)

        def draw_boolean(self, p=0.5):
            fed = self._fed("boolean", {"p": p})
            return fed[0] if fed else super().draw_boolean(p)

        def draw_float(self, **constraints):
            fed = self._fed("float", constraints)
            return fed[0] if fed else self._inside(super().draw_float, **constraints)

        def draw_string(self, intervals, **constraints):
            fed = self._fed("string", {"intervals": intervals, **constraints})
            return fed[0] if fed else self._inside(super().draw_string, intervals, **constraints)

        def draw_bytes(self, **constraints):
            fed = self._fed("bytes", constraints)
            return fed[0] if fed else self._inside(super().draw_bytes, **constraints)

        def _inside(self, draw, *args, **kwargs):
            self._inner += 1
            try:
                return draw(*args, **kwargs)
            finally:
                self._inner -= 1
else:  # pragma: no cover - depends on the installed Hypothesis
    StatementFeeder = None


def draw_segments(segments: list[list], random: Random, config):
    """Draw a case from ``segments`` (``StatementFeeder``); returns the case, its
    ConjectureData and how many statements it drew."""
    case, data = draw_with(random, config, provider=StatementFeeder, provider_kw={"segments": segments})
    return case, data, data.provider.kinds


# ------------------------------------------------------------------ values


def new_value(node, rng: Random):
    """Another value for an integer or boolean choice, inside its bounds; None if it has none.

    A boolean flips. An integer of a small range is nudged by one half of the time; else it
    goes to its lowest value (the simplest: a weighted choice's first entry, a flag's
    default), its highest (a flag set) or anywhere between, a third of the time each.
    """
    if node.type == "boolean":
        return not node.value
    if node.type != "integer":
        return None
    low, high = node.constraints.get("min_value"), node.constraints.get("max_value")
    value = node.value
    if low is None or high is None:  # unbounded: the generator draws none; stay near
        return value + rng.choice([-2, -1, 1, 2])
    if low == high:
        return None
    if high - low <= 16 and rng.random() < 0.5:
        step = rng.choice([-1, 1])
        return value + step if low <= value + step <= high else value - step
    pick = rng.choice([low, high, None])
    while pick is None or pick == value:
        pick = rng.randint(low, high)
    return pick


def _point(layout: Layout, segments: list[list], rng: Random, indices: list[int], what: str) -> Optional[str]:
    """Give one of ``indices`` (of the parent's choices, picked at random) another value."""
    rng.shuffle(indices)
    for i in indices[:4]:
        value = new_value(layout.nodes[i], rng)
        segment, offset = layout.locate(i)
        if value is not None and value != segments[segment][offset]:
            old, segments[segment][offset] = segments[segment][offset], value
            return f"{what} #{i} {old!r}->{value!r}"
    return None


# ------------------------------------------------------------------ point edits
# Each takes (layout, segments, rng), gives one choice of ``segments`` another value and
# describes it, or returns None where it finds nothing to edit.


def edit_statement_head(layout, segments, rng) -> Optional[str]:
    """The first choice of a statement after its kind: an op statement's op."""
    heads = [s + 1 for s in layout.statements if s + 1 < len(layout.nodes)
             and not is_kind(layout.nodes[s + 1].type, layout.nodes[s + 1].constraints)]
    return _point(layout, segments, rng, heads, "statement op/operand")


def edit_statement_kind(layout, segments, rng) -> Optional[str]:
    """A statement's kind (op, size arithmetic, branch, check, motif...): its choices read anew."""
    return _point(layout, segments, rng, list(layout.statements), "statement kind")


def edit_statement(layout, segments, rng) -> Optional[str]:
    """Any choice of a statement but its kind: an operand, a param, a partner."""
    kinds = set(layout.statements)
    start = layout.statements[0] if layout.statements else len(layout.nodes)
    return _point(layout, segments, rng, [i for i in layout.editable(start) if i not in kinds], "statement choice")


def edit_header(layout, segments, rng) -> Optional[str]:
    """A choice before the statements: a size, a rank, a dtype, dynamic=, an input. Not the
    counts of calls and symbols (``add_call`` and ``drop_call`` change those), nor of statements."""
    start = 2 if layout.calls else 0
    stop = layout.n_ops if layout.n_ops is not None else (layout.statements[0] if layout.statements else 0)
    return _point(layout, segments, rng, layout.editable(start, stop), "header")


def edit_tail(layout, segments, rng) -> Optional[str]:
    """A choice after the last statement's kind: the last statement's, then the schedule's
    marks, flags and gradients."""
    start = layout.statements[-1] + 1 if layout.statements else 0
    return _point(layout, segments, rng, layout.editable(start), "tail")


def flip_boolean(layout, segments, rng) -> Optional[str]:
    """A boolean choice flipped (reuse a live value or make an input, a graph break...)."""
    return _point(layout, segments, rng, [i for i in layout.editable() if layout.nodes[i].type == "boolean"], "flag")


POINT_EDITS: list[tuple[Callable, int]] = [
    (edit_statement_head, 4), (edit_header, 3), (edit_tail, 3), (edit_statement, 2), (edit_statement_kind, 1),
    (flip_boolean, 1),
]

# ------------------------------------------------------------------ structural edits
# Each takes (layout, segments, rng) and returns (variants, description), or None. The
# variants are segment lists tried in order: the first that draws as many statements as
# it has is kept, else the first. (A statement that failed in every world, or only read
# sizes, does not count toward the statement count, which the choices alone do not tell:
# so a dropped statement comes with the count lowered, then as it was.)


def _with_count(layout: Layout, segments: list[list], delta: int) -> Optional[list[list]]:
    """``segments`` with the statement count moved by ``delta``, or None if out of bounds."""
    out = [list(s) for s in segments]
    if not delta:
        return out
    if layout.n_ops is None:
        return None
    node = layout.nodes[layout.n_ops]
    value = out[0][layout.n_ops] + delta
    if not node.constraints["min_value"] <= value <= node.constraints["max_value"]:
        return None
    out[0][layout.n_ops] = value
    return out


def _variants(layout: Layout, segments: list[list], deltas) -> list:
    return [v for v in (_with_count(layout, segments, d) for d in deltas) if v is not None]


def drop_statement(layout, segments, rng):
    """A statement other than the last removed."""
    if len(segments) < 3:
        return None
    i = rng.randrange(1, len(segments) - 1)
    edited = segments[:i] + segments[i + 1:]
    return _variants(layout, edited, (-1, 0)), f"drop statement {i - 1}"


def duplicate_statement(layout, segments, rng):
    """A copy of a statement other than the last inserted before another one (or itself)."""
    if len(segments) < 3:
        return None
    j = rng.randrange(1, len(segments) - 1)
    i = rng.randrange(1, len(segments))
    edited = segments[:i] + [list(segments[j])] + segments[i:]
    return _variants(layout, edited, (1, 0)), f"copy statement {j - 1} before statement {i - 1}"


def replace_statement(layout, segments, rng):
    """A statement other than the last replaced by a copy of another one."""
    if len(segments) < 4:
        return None
    i, j = rng.sample(range(1, len(segments) - 1), 2)
    edited = segments[:i] + [list(segments[j])] + segments[i + 1:]
    return _variants(layout, edited, (0, 1, -1)), f"statement {i - 1} replaced by a copy of statement {j - 1}"


def truncate(layout, segments, rng):
    """Everything from a late statement on, or from a point after the last one's kind, drawn afresh."""
    if len(segments) < 2:
        return None
    cuts = [(k, 0) for k in range(max(2, len(segments) // 2), len(segments))]
    if len(segments[-1]) > 1:
        cuts.append((len(segments) - 1, rng.randrange(1, len(segments[-1]))))
    if not cuts:
        return None
    segment, offset = rng.choice(cuts)
    edited = segments[:segment] + ([segments[segment][:offset]] if offset else [])
    where = f"statement {segment - 1}" if not offset else f"#{layout.statements[segment - 1] + offset}"
    return [edited], f"redraw from {where}"


def _seed_groups(layout: Layout, n_calls: int) -> list[list[int]]:
    """Each input's seeds (indices of the parent's choices), one per call."""
    seeds = list(layout.seeds)
    if len(seeds) % n_calls:
        return []
    return [seeds[k:k + n_calls] for k in range(0, len(seeds), n_calls)]


def add_call(layout, segments, rng):
    """One more call: a new size for every symbol and a new seed for every input, after a random call."""
    header = segments[0]
    if not layout.calls or header[0] >= layout.nodes[0].constraints["max_value"]:
        return None
    n_calls, n_symbols = header[0], header[1]
    after = rng.randrange(n_calls)
    size = layout.nodes[2].constraints
    places = [(*layout.locate(group[after]), 0, SEED_MAX) for group in _seed_groups(layout, n_calls)]
    places += [(0, 2 + s * n_calls + after, size["min_value"], size["max_value"]) for s in range(n_symbols)]
    edited = [list(s) for s in segments]
    for segment, offset, low, high in sorted(places, reverse=True):  # the last first: earlier offsets hold
        edited[segment].insert(offset + 1, rng.randint(low, high))
    edited[0][0] = n_calls + 1
    return [edited], f"add a call after call {after}"


def drop_call(layout, segments, rng):
    """One call fewer: every symbol's size and every input's seed at that call removed."""
    header = segments[0]
    if not layout.calls or header[0] <= layout.nodes[0].constraints["min_value"]:
        return None
    n_calls, n_symbols = header[0], header[1]
    call = rng.randrange(n_calls)
    places = [layout.locate(group[call]) for group in _seed_groups(layout, n_calls)]
    places += [(0, 2 + s * n_calls + call) for s in range(n_symbols)]
    edited = [list(s) for s in segments]
    for segment, offset in sorted(places, reverse=True):  # the last first: earlier offsets hold
        del edited[segment][offset]
    edited[0][0] = n_calls - 1
    return [edited], f"drop call {call}"


STRUCTURAL_EDITS: list[tuple[Callable, int]] = [
    (drop_statement, 3), (duplicate_statement, 2), (replace_statement, 2), (truncate, 2), (add_call, 1),
    (drop_call, 1),
]


def _pick(rng: Random, pairs):
    ticket = rng.randrange(sum(w for _, w in pairs))
    for value, w in pairs:
        if ticket < w:
            return value
        ticket -= w
    raise AssertionError("unreachable")


def mutate_layout(layout: Layout, rng: Random) -> tuple[list, str]:
    """The edits of ``mutate_choices`` on a layout read already: (the segment lists to try,
    in order, as the structural edits say; the description)."""
    segments = layout.segments()
    n_edits = _pick(rng, EDIT_COUNTS)
    structural = rng.random() < STRUCTURAL_SHARE
    done = []
    for _ in range(8 * n_edits):  # an edit may find nothing to change: pick another
        if len(done) >= n_edits - structural:
            break
        described = _pick(rng, POINT_EDITS)(layout, segments, rng)
        if described is not None:
            done.append(described)
    variants = [segments]
    for _ in range(8 if structural else 0):
        edited = _pick(rng, STRUCTURAL_EDITS)(layout, segments, rng)
        if edited is not None and edited[0]:
            variants, described = edited
            done.append(described)
            break
    if not done:  # nothing else applies (no statements, no integer choices): redraw the end
        cut = rng.randrange(len(layout.choices) + 1)
        variants, done = [[list(layout.choices[:cut])]], [f"redraw from #{cut}"]
    return variants, "; ".join(done)


def mutate_choices(choices, rng: Random, config=None) -> tuple[list, str]:
    """A small change of ``choices``, chosen by ``rng``: (the new choices, a description).

    One to three edits: choices given another value (an op, a size, a dtype, a flag, a
    mark, an operand), and at most one structural edit (a statement dropped, duplicated or
    copied over another, a call added or dropped, everything from a point on redrawn). The
    new choices come statement by statement, a list of segments: the header's, then each
    statement's (``StatementFeeder`` draws them; past a segment's end, draws are random).
    ``config`` is the GenConfig the parent was drawn with (the default one if None).
    """
    from symfuzz.fuzz.generate import GenConfig  # deferred: imports torch (see drawing.draw_with)

    variants, description = mutate_layout(parent_layout(choices, config or GenConfig()), rng)
    return variants[0], description


def generate_mutant(seed: int, index: int, parent_choices, config, parent=None):
    """Case ``index`` of a campaign as a mutant of the case whose choices are ``parent_choices``.

    A pure function of (seed, index, parent_choices) and the versions. The case's origin
    holds its own full choice sequence (``case_from_choices`` replays it) and
    ``mutant: {"parent": parent, "edit": description}``. A mutant that comes out the same
    case as its parent, or that overruns Hypothesis's limits, is drawn again with other
    edits; after ``MAX_TRIES`` the case is the fresh draw ``generate(seed, index)``, with
    ``mutant: {"parent": parent, "edit": None, "fallback": why}``.
    """
    rng = Random(f"symfuzz-mutant:{seed}:{index}")
    why = "every edit gave the parent again"
    if StatementFeeder is None:  # pragma: no cover - depends on the installed Hypothesis
        why, tries = "this Hypothesis has moved the internals mutants are drawn with", 0
    else:
        try:
            layout, tries = parent_layout(parent_choices, config), MAX_TRIES
        except StopTest:
            why, tries = "the parent's choices overran Hypothesis's size limit", 0
    for _ in range(tries):
        variants, description = mutate_layout(layout, rng)
        drawn = draw_variants(variants, rng, config)
        if drawn is None:
            why = "the mutants overran Hypothesis's size limit"
            continue
        case, data = drawn
        if case.program.to_json() == layout.program and case.schedule.to_json() == layout.schedule:
            continue
        origin = {**case.origin, "seed": seed, "index": index, "choices": list(data.choices),
                  "mutant": {"parent": parent, "edit": description}}
        return type(case)(case.program, case.schedule, origin)
    case = generate(seed, index, config)
    return type(case)(case.program, case.schedule,
                      {**case.origin, "mutant": {"parent": parent, "edit": None, "fallback": why}})


def draw_variants(variants: list, rng: Random, config):
    """(case, data) of the first variant that draws as many statements as it has segments
    for, else of the first that draws at all; None if every one overran."""
    drawn = None
    for segments in variants[:3]:
        try:
            case, data, kinds = draw_segments(segments, Random(rng.getrandbits(64)), config)
        except StopTest:
            continue
        if kinds == len(segments) - 1:
            return case, data
        drawn = drawn or (case, data)
    return drawn
