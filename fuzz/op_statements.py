"""The builder's op statements: an op spec, its operands and its params.

``draw_op`` picks a spec, a first operand it accepts and, for a spec of more
than one operand, partners of the shapes it asks for (a live value, a parameter
or buffer of a module program, a number, or a new input), then draws the spec's
params and keeps the statement if it runs in every world (``Worlds``). Where a
spec declares a shape rule, the result's shapes are checked against it.
"""

from __future__ import annotations

import hypothesis.strategies as st

from symfuzz.fuzz.choices import weighted
from symfuzz.fuzz.ir import EffectNode, OpNode
from symfuzz.fuzz.modules import state_partner
from symfuzz.fuzz.scalars import number_partner
from symfuzz.fuzz.specs.base import DTYPE_KIND, SCALAR_VALUES, Operand, OpSpec, ParamContext
from symfuzz.fuzz.worlds import DTYPE_WEIGHTS

SCALARS = [2, 3, -1, 0.5, 1.5, -2.5]


class OpStatements:
    """Op-spec statements: a mixin of ``generate.Builder``."""

    def draw_op(self) -> bool:
        saved = self.save()
        spec: OpSpec = weighted(self.draw, self.spec_weights)
        if spec.arity == 0:
            operands: list[Operand] = []
        else:
            candidates = [t for t in self.tensors if spec.accepts(t)]
            if not candidates:
                return False
            first = candidates[-1 - self.draw(st.integers(0, len(candidates) - 1))]
            operands = [first]
        args = [o.name for o in operands]
        for _ in range(1, spec.arity):
            partner = self.draw_partner(spec, operands[0])
            if partner is None:
                self.restore(saved)
                return False
            if isinstance(partner, Operand):
                operands.append(partner)
                args.append(partner.name)
            else:
                args.append(partner)
        ctx = ParamContext(self.draw, operands, self.size_ref, self.ints,
                           lambda name: [env[name] for env in self.envs if name in env], self.scalar_inputs())
        params = spec.params(ctx)
        if spec.effect:
            node = EffectNode(spec.name, tuple(args), params)
            ok = self.try_statement(node, None)
            if ok:
                self._refresh_shapes()
        else:
            name = self.fresh("v")
            ok = self.try_statement(OpNode(name, spec.name, tuple(args), params), name)
            if ok and spec.shape is not None:
                self.check_shape_rule(spec, operands, args, params)
        if not ok:
            self.restore(saved)
        return ok

    def check_shape_rule(self, spec: OpSpec, operands: list[Operand], args: list[str], params: dict) -> None:
        """Record where a spec's declared shape rule disagrees with meta execution."""
        result = self.tensors[-1]
        by_name = {o.name: o for o in operands}
        scalars = self.scalar_inputs()
        for w, actual in enumerate(result.shapes):
            shapes = [by_name[a].shapes[w] if a in by_name else () for a in args]
            try:
                # A shape rule reads the world's values of the scalar inputs its params name.
                world = {**params, SCALAR_VALUES: {s.name: s.values[w] for s in scalars}} if scalars else params
                expected = tuple(spec.shape(shapes, world))
            except Exception as exc:  # noqa: BLE001 - a spec bug, recorded
                expected = f"shape rule raised {exc!r}"
            if expected != actual:
                self.shape_rule_mismatches.append((spec.name, shapes, params, expected, actual))

    def _refresh_shapes(self):
        """After an in-place op, re-read shapes (resize_-free ops keep them)."""
        self.tensors = [
            Operand(t.name, t.dtype, tuple(tuple(env[t.name].shape) for env in self.envs)) for t in self.tensors
        ]

    def draw_partner(self, spec: OpSpec, first: Operand):
        mode = spec.partner
        if mode in ("scalar", "scalar-ok") and (mode == "scalar" or self.draw(st.integers(0, 3)) == 0):
            number = repr(self.draw(st.sampled_from(SCALARS)))
            return number_partner(self, divides=mode == "scalar") or number
        if first.name in self.unbacked:
            # Sizes read from values: another tensor matches them only by
            # chance in every world, which compiled code cannot know. Pair
            # the value with itself, or with a scalar.
            if mode in ("broadcast", "same", "scalar-ok") and first.kind in (spec.partner_kinds or spec.kinds):
                return first
            return repr(self.draw(st.sampled_from(SCALARS))) if mode == "scalar-ok" else None
        if callable(mode):
            shapes = mode(self.draw, first)
            if shapes is None:
                return None
        else:
            shapes = self._broadcast_variant(first) if mode != "same" else list(first.shapes)
        kinds = spec.partner_kinds or spec.kinds
        # Reuse a live value with exactly the needed shapes, or make a new input.
        live = [t for t in self.tensors if list(t.shapes) == list(shapes) and t.kind in kinds and t.name != first.name
                and t.name not in self.unbacked]
        if live and self.draw(st.booleans()):
            return self.draw(st.sampled_from(live))
        if self.module is not None and DTYPE_KIND[first.dtype] in kinds:
            state = state_partner(self, list(shapes), first.dtype)  # a parameter or buffer of fixed shape
            if state is not None:
                return state
        dims = self.dims_for(list(shapes))
        if dims is None or len(self.inputs) >= self.config.max_inputs + 2:
            return live[0] if live else None
        dtype = first.dtype
        if DTYPE_KIND[dtype] not in kinds or self.draw(st.integers(0, 3)) == 0:
            # A different dtype exercises type promotion; it must suit the spec.
            dtype = weighted(self.draw, [(d, w) for d, w in DTYPE_WEIGHTS if DTYPE_KIND[d] in kinds])
        return self.add_input(dims, dtype)

    def _broadcast_variant(self, first: Operand) -> list[tuple[int, ...]]:
        """``first``'s shapes, with some dims set to 1 and maybe leading dims dropped."""
        rank = first.rank
        drop = self.draw(st.integers(0, rank)) if rank and self.draw(st.integers(0, 3)) == 0 else 0
        ones = [self.draw(st.integers(0, 4)) == 0 for _ in range(rank)]
        out = []
        for shape in first.shapes:
            s = [1 if ones[i] else shape[i] for i in range(rank)]
            out.append(tuple(s[drop:]))
        return out
