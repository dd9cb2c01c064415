"""Steered draws: a fresh case whose op statements lean toward ops the run has not reached,
and whose statements lean toward size-level Python and real-model motifs.

A fresh draw picks each op statement's op by the specs' fixed weights (``OpStatements.draw_op``),
so a short campaign draws matmul, add and mul again and again while most of the 250-odd specs
(and the lowerings, decompositions and guard forms they bring) never come up. A steered draw
is the same generator fed by ``SteeringProvider``: where the generator draws an op statement's
op, it answers, half of the time, with one of the ops the run's finished cases used least often
(at first, those none used: the coordinator sends the counts of uses, ``symfuzz.case_source``),
and otherwise as a fresh draw does. Where it draws a statement's kind, it answers
``KIND_STEER_SHARE`` of the time with a kind that draws size-level Python or a motif (the
statements guard forms, specializations and index arithmetic come from: most of the features a
run reaches are guard forms). Everything else (sizes, operands, schedules, marks) is drawn as usual.

The provider answers a draw with a value the draw accepts, so the case is still a pure
function of its recorded choice sequence: it replays from its JSON alone, mutates and shrinks
like any case, whatever the counts were when it was drawn.
"""

from __future__ import annotations

from random import Random

from symfuzz.fuzz.drawing import PROVIDER, draw_with, generate
from symfuzz.fuzz.mutate import is_kind

# Share of a steered case's op statements answered with a favoured op.
STEER_SHARE = 0.5
# Share of a steered case's statement kinds answered with a size-level or motif kind
# (generate.SIZE_LEVEL_KINDS): fresh draws give them 15 of 36 statements; a steered draw about 6 in 10.
KIND_STEER_SHARE = 0.3
# build_case's statement kinds that may draw an op statement first (``generate.build_case``):
# plain ops, a graph break's other half (after its boolean), and under --ops the motif and
# size-argument kinds. In a module program kinds 2-5 draw module statements, and a motif draws
# its own choices: those draws never have the op draw's bounds, which the provider checks too.
OP_KINDS = frozenset((*range(2, 22), 29, 30, 31, 32, 35))


def op_tickets(config) -> dict:
    """Each op spec's range of tickets ``(low, high)`` in ``draw_op``'s weighted draw, and the
    ticket count: the draw is ``integers(0, count - 1)`` (``choices.weighted``)."""
    from symfuzz.fuzz.generate import spec_weights  # deferred: imports torch

    ranges, low = {}, 0
    for spec, weight in spec_weights(config):
        ranges[spec.name] = (low, low + weight - 1)
        low += weight
    return {"ranges": ranges, "count": low}


if PROVIDER is not None:

    class SteeringProvider(PROVIDER):
        """Symfuzz's provider, answering an op statement's op draw with a favoured op's ticket
        ``STEER_SHARE`` of the time. ``steered``: the ops it answered, in order."""

        def __init__(self, conjecturedata, tickets=(), count=0, rng=None, kinds=(0, ())):
            super().__init__(conjecturedata)
            self.tickets = list(tickets)
            self.count = count
            self.kind_count, self.size_level_kinds = kinds  # the statement-kind draw's size, and which to favour
            self.rng = rng or Random(0)
            self.kind = None  # the last statement kind drawn, until the draw after it
            self.steered: list[str] = []
            self.steered_kinds = 0  # statement kinds answered with a size-level or motif kind

        def draw_integer(self, min_value=None, max_value=None, *, weights=None, shrink_towards=0):
            kind, self.kind = self.kind, None
            if (kind in OP_KINDS and self.tickets and (min_value, max_value) == (0, self.count - 1)
                    and self.rng.random() < STEER_SHARE):
                name, (low, high) = self.tickets[self.rng.randrange(len(self.tickets))]
                self.steered.append(name)
                return self.rng.randint(low, high)
            if (self.size_level_kinds and (min_value, max_value) == (0, self.kind_count - 1)
                    and self.rng.random() < KIND_STEER_SHARE):
                self.kind = self.rng.choice(self.size_level_kinds)
                self.steered_kinds += 1
                return self.kind
            value = super().draw_integer(min_value, max_value, weights=weights, shrink_towards=shrink_towards)
            if is_kind("integer", {"min_value": min_value, "max_value": max_value, "weights": weights}):
                self.kind = value
            return value
else:  # pragma: no cover - depends on the installed Hypothesis
    SteeringProvider = None


def least_used(config, op_counts: dict) -> list[str]:
    """The config's op specs the run's finished cases used least often (``op_counts``: spec
    name -> uses so far, ``Program.ops``): at first those never used."""
    from symfuzz.fuzz.generate import spec_weights  # deferred: imports torch

    names = [spec.name for spec, _ in spec_weights(config)]
    fewest = min(op_counts.get(name, 0) for name in names)
    return [name for name in names if op_counts.get(name, 0) == fewest]


def generate_steered(seed: int, index: int, config, op_counts: dict):
    """Case ``index`` of a campaign as a draw steered toward the least-used ops (``least_used``);
    the plain fresh draw where this Hypothesis has moved its provider API. Its origin holds its
    own choice sequence and ``steered: {"favoured": how many ops were favoured, "ops": the ops
    it answered with, "size_level_kinds": how many statement kinds it answered}``."""
    if SteeringProvider is None:  # pragma: no cover - depends on the installed Hypothesis
        return generate(seed, index, config)
    from symfuzz.fuzz.generate import SIZE_LEVEL_KINDS, STATEMENT_KINDS  # deferred: imports torch

    table = op_tickets(config)
    favour = least_used(config, op_counts)
    tickets = [(name, table["ranges"][name]) for name in favour]
    rng = Random(f"symfuzz-steer:{seed}:{index}")
    case, data = draw_with(Random(f"symfuzz:{seed}:{index}"), config, provider=SteeringProvider,
                           provider_kw={"tickets": tickets, "count": table["count"], "rng": rng,
                                        "kinds": (STATEMENT_KINDS, SIZE_LEVEL_KINDS)})
    origin = {**case.origin, "seed": seed, "index": index, "choices": list(data.choices),
              "steered": {"favoured": len(tickets), "ops": list(data.provider.steered),
                          "size_level_kinds": data.provider.steered_kinds}}
    return type(case)(case.program, case.schedule, origin)
