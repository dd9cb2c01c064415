"""The builder's values in every world: its inputs, and statements kept only if they run in all.

Each call of the schedule is a world with concrete sizes (``generate.py``).
``Worlds`` holds what the builder knows of each world: the inputs (real CPU
tensors, seeded as the run will make them, and Python numbers), their layouts,
and each value's shapes; ``try_statement`` runs a drawn statement in every world
and keeps it only if all succeed, and ``save``/``restore`` undo a statement that
a later check rejects. The statements themselves are drawn by ``OpStatements``
and ``SizeStatements``, and by the modules the generator draws through.
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Optional

import hypothesis.strategies as st
import torch
import torch.nn.functional as torch_F

from symfuzz.fuzz.case import ArgSpec
from symfuzz.fuzz.choices import weighted
from symfuzz.fuzz.ir import SCALAR_KINDS, EffectNode, Input, OpNode, SizeNode, node_reads, render_node
from symfuzz.fuzz.modules import tie_dims
from symfuzz.fuzz.script_runtime import make_arg
from symfuzz.fuzz.specs.base import DTYPE_KIND, Operand, ScalarInput

# (value, weight): the dtypes and layouts of inputs.
DTYPE_WEIGHTS = [("float32", 12), ("float64", 2), ("float16", 2), ("bfloat16", 2), ("int64", 2), ("int32", 2), ("bool", 1)]
LAYOUT_WEIGHTS = [("contiguous", 14), ("transposed", 3), ("strided", 3), ("expanded", 2)]

MAX_NUMEL = 1 << 16  # per value per world: keeps each run fast and memory small

# What a statement's source may read besides the world's values (ir.PRELUDE's imports).
GLOBALS = {"torch": torch, "F": torch_F, "math": math}


class Worlds:
    """Inputs and statements, tracked per world: a mixin of ``generate.Builder``,
    whose ``__init__`` sets up the state these methods read and write."""

    # ------------------------------------------------------------ inputs

    def add_input(self, dims: tuple, dtype: str) -> Optional[Operand]:
        name = f"x{len(self.inputs)}"
        shapes = []
        for w in range(self.n_worlds):
            shapes.append(tuple(d if isinstance(d, int) else self.symbols[d][w] for d in dims))
        if any(math.prod(s) > MAX_NUMEL for s in shapes):
            return None
        self.inputs.append(Input(name, dtype, tuple(dims)))
        # Mostly one layout for all calls (so graphs get reused and guards are
        # tested); sometimes a new layout per call (stride guards, recompiles).
        per_call = self.draw(st.integers(0, 3)) == 0
        layout = self.draw_layout(shapes[0])
        for w, shape in enumerate(shapes):
            if per_call and w > 0:
                layout = self.draw_layout(shape)
            spec = ArgSpec(shape, dtype, self.draw(st.integers(0, 2**31 - 1)), layout)
            self.arg_specs[w].append(spec)
            self.envs[w][name] = make_arg(spec.to_json(), device="cpu")
        operand = Operand(name, dtype, tuple(shapes))
        self.tensors.append(operand)
        return operand

    def add_scalar_input(self, kind: str, values: tuple, prefix: str) -> str:
        """A Python number or int-list input (``ir.SCALAR_KINDS``) taking
        ``values[w]`` in world ``w``; its name. An int input is an int
        variable like a size read (``self.ints``), so sizes may use it."""
        name = f"{prefix}{len(self.inputs)}"
        self.inputs.append(Input(name, SCALAR_KINDS[kind], (), kind))
        for w, value in enumerate(values):
            spec = ArgSpec.of_scalar(kind, value)
            self.arg_specs[w].append(spec)
            self.envs[w][name] = make_arg(spec.to_json())
        if kind == "int":
            self.ints[name] = tuple(values)
        return name

    def scalar_inputs(self) -> list[ScalarInput]:
        """The program's Python number and int-list inputs, with their values per world."""
        return [ScalarInput(i.name, i.kind, tuple(env[i.name] for env in self.envs))
                for i in self.inputs if not i.is_tensor]

    def draw_dims(self, rank: int) -> tuple:
        names = sorted(self.symbols)
        dims = []
        for _ in range(rank):
            choice = self.draw(st.integers(0, 9))
            if choice < 8:
                dims.append(self.draw(st.sampled_from(names)))
            elif choice == 8:
                dims.append(1)
            else:
                dims.append(self.draw(st.sampled_from([2, 3, 5])))
        return tie_dims(self, tuple(dims)) if self.module is not None else tuple(dims)

    def draw_layout(self, shape) -> dict:
        kind = weighted(self.draw, LAYOUT_WEIGHTS)
        rank = len(shape)
        if kind == "transposed" and rank >= 2:
            a = self.draw(st.integers(0, rank - 2))
            return {"kind": "transposed", "dims": [a, self.draw(st.integers(a + 1, rank - 1))]}
        if kind == "strided" and rank >= 1:
            return {"kind": "strided", "dim": self.draw(st.integers(0, rank - 1)), "step": self.draw(st.sampled_from([2, 3]))}
        if kind == "expanded" and rank >= 1:
            return {"kind": "expanded", "dim": self.draw(st.integers(0, rank - 1))}
        return {"kind": "contiguous"}

    def dims_for(self, shapes_per_world: list[tuple[int, ...]]) -> Optional[tuple]:
        """Input dims (symbols or ints) reproducing these per-world shapes, if any."""
        rank = len(shapes_per_world[0])
        dims = []
        for d in range(rank):
            values = tuple(s[d] for s in shapes_per_world)
            if len(set(values)) == 1 and (values[0] in (1, 2, 3, 5) or not self._symbol_for(values)):
                dims.append(values[0])
                continue
            sym = self._symbol_for(values)
            if sym is None:
                return None
            dims.append(sym)
        return tuple(dims)

    def _symbol_for(self, values):
        for name in sorted(self.symbols):
            if self.symbols[name] == values:
                return name
        return None

    # ------------------------------------------------------------ statements

    def try_statement(self, node, new_value: Optional[str]) -> bool:
        """Execute ``node`` in every world; keep it only if all succeed."""
        code = "\n".join(render_node(node))
        results = []
        try:
            compiled = compile(code, "<fuzz>", "exec")
        except SyntaxError as exc:  # a spec bug: fail loudly
            raise AssertionError(f"spec rendered invalid Python:\n{code}") from exc
        trial_envs = []
        for env in self.envs:
            # An in-place statement runs on a copy of the world (deepcopy keeps
            # views aliased): if a later world rejects it, no values changed.
            local = copy.deepcopy(env) if isinstance(node, EffectNode) else dict(env)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec(compiled, GLOBALS, local)
            except Exception:
                return False
            if new_value is not None:
                value = local.get(new_value)
                if isinstance(value, torch.Tensor):
                    if value.numel() > MAX_NUMEL or value.is_complex():
                        return False
                elif not isinstance(value, int) or isinstance(value, bool) or abs(value) > 4096:
                    return False
                results.append(value)
            trial_envs.append(local)
        if new_value is not None and isinstance(results[0], torch.Tensor):
            if any(not isinstance(r, torch.Tensor) or r.dtype != results[0].dtype or r.dim() != results[0].dim() for r in results):
                return False
            dtype = str(results[0].dtype).removeprefix("torch.")
            if dtype not in DTYPE_KIND:
                return False
            self.tensors.append(Operand(new_value, dtype, tuple(tuple(r.shape) for r in results)))
        elif new_value is not None:
            self.ints[new_value] = tuple(results)
        if new_value is not None and self._reads_unbacked(node):
            self.unbacked.add(new_value)
        self.envs = trial_envs
        self.body.append(node)
        return True

    def _reads_unbacked(self, node) -> bool:
        if isinstance(node, OpNode) and self.spec_by_name[node.op].value_sized:
            return True
        return bool(node_reads(node) & self.unbacked)

    def size_ref(self, operand: Operand, dim: int) -> str:
        """Source for a size of ``operand``: an int variable or an inline read."""
        values = operand.sizes(dim)
        # An int read from values (unbacked) may equal this size in every world
        # by chance; compiled, the two would not be known equal.
        unbacked = operand.name in self.unbacked
        existing = [n for n, v in self.ints.items() if v == values and (n in self.unbacked) == unbacked]
        mode = self.draw(st.integers(0, 3))
        if existing and mode == 0:
            return self.draw(st.sampled_from(existing))
        if mode == 1:
            name = self.fresh("n")
            form = self.draw(st.sampled_from(["{v}.size({d})", "{v}.shape[{d}]"]))
            if self.try_statement(SizeNode(name, form.format(v=operand.name, d=dim)), name):
                return name
        return f"{operand.name}.size({dim})" if mode != 3 else f"{operand.name}.shape[{dim}]"

    def save(self):
        return (list(self.body), list(self.envs), dict(self.ints), list(self.tensors), list(self.inputs),
                [list(a) for a in self.arg_specs], set(self.unbacked))

    def restore(self, saved):
        self.body, self.envs, self.ints, self.tensors, self.inputs, self.arg_specs, self.unbacked = saved

