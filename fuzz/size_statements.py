"""The builder's size-level Python: statements on sizes rather than on tensor values.

Arithmetic on sizes, sizes passed through plain Python (``len(range(n))``,
``max(x.shape)``), branches and ``torch.cond`` on size predicates,
``assert``/``torch._check`` facts, ``math.sqrt`` scales, views shaped by size
variables, and explicit graph breaks. Each is run in every world (``Worlds``)
and kept only where it holds at every call, so the program stays valid.
"""

from __future__ import annotations

import warnings
from typing import Optional

import hypothesis.strategies as st
import torch

from symfuzz.fuzz.ir import BranchNode, CheckNode, CondNode, ExprNode, GraphBreakNode, OpNode, SizeNode
from symfuzz.fuzz.specs.base import FLOAT, Operand
from symfuzz.fuzz.worlds import GLOBALS


class SizeStatements:
    """Size-level statements: a mixin of ``generate.Builder``."""

    def draw_size_arith(self) -> bool:
        """``n = <arithmetic on sizes>``: size-level Python feeding later ops."""
        tensors = [t for t in self.tensors if t.rank > 0]
        if not tensors:
            return False
        t = self.draw(st.sampled_from(tensors))
        a = self.size_ref(t, self.draw(st.integers(0, t.rank - 1)))
        form = self.draw(st.sampled_from(["{a} * 2", "{a} + 1", "{a} // 2 + 1", "max({a}, 1)", "{a} * {b}", "{a} + {b}", "min({a}, 3)"]))
        b = a
        if "{b}" in form:
            u = self.draw(st.sampled_from(tensors))
            b = self.size_ref(u, self.draw(st.integers(0, u.rank - 1)))
        name = self.fresh("n")
        return self.try_statement(SizeNode(name, form.format(a=a, b=b)), name)

    # ------------------------------------------------------ size-level Python

    def backed_sized(self) -> list[Operand]:
        """Tensors with a dim whose sizes are plain inputs' sizes (not read from values)."""
        return [t for t in self.tensors if t.rank > 0 and t.name not in self.unbacked]

    def draw_size_predicate(self) -> Optional[str]:
        """A comparison on sizes, sometimes two chained with ``and``/``or``.

        Thresholds come from the worlds' sizes: between them (calls take
        different sides), equal to one world's size (``== k`` specializes
        one call), or past all of them.
        """
        sized = self.backed_sized()
        if not sized:
            return None
        s = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, s.rank - 1))
        values = s.sizes(d)
        distinct = sorted(set(values))
        k = distinct[len(distinct) // 2]
        one = self.draw(st.sampled_from(values))
        ref = self.draw(st.sampled_from([f"{s.name}.size({d})", f"{s.name}.shape[{d}]", None]))
        ref = ref or self.size_ref(s, d)
        forms = [
            f"{ref} > {k - 1}", f"{ref} % 2 == 0", f"{ref} == {k}", f"{s.name}.numel() >= {k}",
            f"{ref} == {one}", f"{ref} != {one}", f"{ref} < {k}", f"{ref} <= {distinct[0]}",
            f"{ref} >= {distinct[-1]}", f"{ref} * 2 > {k} + 1",
        ]
        same = [(t, e) for t in sized for e in range(t.rank) if t.sizes(e) == values and (t.name, e) != (s.name, d)]
        if same:  # two sizes equal in every world (duck sizing makes them one symbol)
            t, e = self.draw(st.sampled_from(same))
            forms.append(f"{ref} == {t.name}.size({e})")
        other = self.draw(st.sampled_from(sized))
        e = self.draw(st.integers(0, other.rank - 1))
        if (other.name, e) != (s.name, d):
            forms.append(f"{ref} < {other.name}.size({e})")
        cond = self.draw(st.sampled_from(forms))
        if self.draw(st.integers(0, 3)) == 0:
            rest = self.draw_size_predicate()
            if rest is not None and " and " not in rest and " or " not in rest:
                cond = f"{cond} {self.draw(st.sampled_from(['and', 'and', 'or']))} {rest}"
        return cond

    def draw_branch(self) -> bool:
        """An ``if`` on sizes whose arms give same-shaped tensors."""
        floats = [t for t in self.tensors if t.kind == FLOAT]
        if not floats or not self.backed_sized():
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        cond = self.draw_size_predicate()
        arms = ["{x} * 2", "{x} - 1", "torch.relu({x})", "{x}.sin()", "{x} + {x}.sum()",
                "{x} / math.sqrt({x}.numel() + 1)", "{x} * {x}.dim()"]
        a = self.draw(st.sampled_from(arms))
        b = self.draw(st.sampled_from(arms))
        name = self.fresh("v")
        node = BranchNode(name, cond, a.format(x=x.name), b.format(x=x.name))
        ok = self.try_statement(node, name)
        if not ok or self.tensors[-1].shapes != x.shapes:
            self.restore(saved)
            return False
        return ok

    def draw_check(self) -> bool:
        """``assert`` / ``torch._check`` / ``torch._check_is_size`` of a size fact
        that holds at every call (so the program stays valid)."""
        sized = self.backed_sized()
        if not sized:
            return False
        saved = self.save()
        s = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, s.rank - 1))
        values = s.sizes(d)
        lo, hi = min(values), max(values)
        ref = self.size_ref(s, d)
        absent = [v for v in (0, 1, hi + 1) if v not in values]
        forms = [
            ("assert", f"{ref} > {lo - 1 - self.draw(st.integers(0, 2))}"),
            ("assert", f"{ref} >= {lo}"),
            ("check", f"{ref} >= {lo}"),
            ("check", f"{ref} <= {hi + self.draw(st.sampled_from([0, 1, 8]))}"),
            ("check_is_size", ref),
            ("assert", f"{s.name}.numel() >= {min(s.numels())}"),
        ]
        if absent:
            forms.append((self.draw(st.sampled_from(["assert", "check"])), f"{ref} != {self.draw(st.sampled_from(absent))}"))
        same = [(t, e) for t in sized for e in range(t.rank) if t.sizes(e) == values and (t.name, e) != (s.name, d)]
        if same:
            t, e = self.draw(st.sampled_from(same))
            forms.append((self.draw(st.sampled_from(["assert", "check"])), f"{ref} == {t.name}.shape[{e}]"))
        form, cond = self.draw(st.sampled_from(forms))
        if not self.try_statement(CheckNode(form, cond), None):
            self.restore(saved)
            return False
        return True

    def draw_scale(self) -> bool:
        """``v = x / math.sqrt(x.shape[-1])`` and friends: a size through ``math`` as a float scale."""
        floats = [t for t in self.tensors if t.kind == FLOAT]
        sized = self.backed_sized()
        if not floats or not sized:
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        s = x if x in sized and self.draw(st.integers(0, 2)) else self.draw(st.sampled_from(sized))
        d = s.rank - 1 if self.draw(st.booleans()) else self.draw(st.integers(0, s.rank - 1))
        ref = self.draw(st.sampled_from([f"{s.name}.shape[-1]" if d == s.rank - 1 else f"{s.name}.shape[{d}]", None]))
        ref = ref or self.size_ref(s, d)
        form = self.draw(st.sampled_from([
            "{x} / math.sqrt({n})",
            "{x} / math.sqrt({n})",
            "{x} * (1.0 / math.sqrt(max({n}, 1)))",
            "{x} * math.sqrt({n} + 1)",
            "{x} * {n} ** -0.5",
            "{x} / math.log2({n} + 2)",
            "torch.softmax({x} / math.sqrt({n}), dim=-1)",
        ]))
        name = self.fresh("v")
        if not self.try_statement(ExprNode(name, form.format(x=x.name, n=ref)), name) or self.tensors[-1].dtype != x.dtype:
            self.restore(saved)
            return False
        return True

    # Sizes through plain Python: what Dynamo must trace without torch's help.
    SIZE_PYTHON_FORMS = [
        "len(range({n}))",
        "int(sum([{n}, 2]))",
        "max({t}.shape)",
        "min({t}.shape)",
        "sum({t}.shape)",
        "math.prod({t}.shape)",
        "len({t})",
        "sorted({t}.shape)[-1]",
        "list({t}.shape)[{d}]",
        "{t}.shape[{d}:].numel()",
        "abs({n} - {t}.size(-1))",
        "math.ceil({n} / 2)",
        "divmod({n}, 3)[0]",
        "int(math.sqrt({n}))",
        "({n} + 1) // 2 * 2",
    ]

    def draw_size_python(self) -> bool:
        """``n = len(range(x.size(0)))``, ``n = max(x.shape)``...; then maybe a use of ``n``."""
        sized = self.backed_sized()
        if not sized:
            return False
        saved = self.save()
        t = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, t.rank - 1))
        form = self.draw(st.sampled_from(self.SIZE_PYTHON_FORMS))
        n = self.size_ref(t, d) if "{n}" in form else ""
        name = self.fresh("n")
        if not self.try_statement(SizeNode(name, form.format(n=n, t=t.name, d=d)), name):
            self.restore(saved)
            return False
        if self.draw(st.integers(0, 2)):
            self.draw_int_use(name)
        return True

    def draw_int_use(self, n: str) -> bool:
        """A tensor from an int variable: ``x * n``, ``x[..., :n]``, ``x.new_zeros(n)``..."""
        candidates = [t for t in self.tensors if t.name not in self.unbacked]
        if not candidates:
            return False
        x = self.draw(st.sampled_from(candidates))
        form = self.draw(st.sampled_from([
            "{x} * {n}", "{x} + {n}", "{x}[..., :{n}]", "torch.full_like({x}, {n})", "{x}.new_zeros({n})",
            "torch.arange({n}, device={x}.device) + {x}.sum()",
        ]))
        name = self.fresh("v")
        return self.try_statement(ExprNode(name, form.format(x=x.name, n=n)), name)

    def draw_size_view(self) -> bool:
        """A view/reshape whose target is computed from a size variable:
        ``n = x.size(0)`` then ``x.view(n // 2, -1)`` (and ``-1, n``; ``n, -1``
        with ``n`` a product; ``numel // k, k``)."""
        sized = self.backed_sized()
        if not sized or not any(s.name in ("view", "reshape") for s in self.specs):
            return False
        x = self.draw(st.sampled_from(sized))
        r = x.rank
        forms = []
        for d in range(r):
            if all(v >= 2 and v % 2 == 0 for v in x.sizes(d)):
                forms.append(("half", d))
        if all(v > 0 for v in x.sizes(r - 1)):
            forms.append(("last", r - 1))
        if r >= 2 and all(v > 0 for v in x.numels()):
            forms.append(("prod", 0))
        for k in (2, 3, 4):
            if all(v > 0 and v % k == 0 for v in x.numels()):
                forms.append(("numel", k))
        if not forms:
            return False
        saved = self.save()
        kind, d = self.draw(st.sampled_from(forms))
        n = self.fresh("n")
        if kind == "half":
            expr = self.draw(st.sampled_from([f"{x.name}.size({d})", f"{x.name}.shape[{d}]"] + (["len({t})"] if d == 0 else [])))
            expr = expr.format(t=x.name)
            shape, descs = f"{n} // 2, -1", [["div", 0, d, 2], ["rest"]]
            if d == 0 and r == 1:
                shape, descs = f"{n} // 2, 2", [["div", 0, 0, 2], ["c", 2]]
            elif d != 0:  # keep the dims before d, split d in half, infer the rest
                lead = ", ".join(f"{x.name}.size({e})" for e in range(d))
                shape, descs = f"{lead}, {n} // 2, -1", [["d", 0, e] for e in range(d)] + [["div", 0, d, 2], ["rest"]]
        elif kind == "last":
            expr = self.draw(st.sampled_from([f"{x.name}.shape[-1]", f"{x.name}.size(-1)"]))
            shape, descs = f"-1, {n}", [["rest"], ["d", 0, d]]
        elif kind == "prod":
            expr = f"{x.name}.size(0) * {x.name}.size(1)"
            if r == 2:
                shape, descs = f"{n}", [["prod", [[0, 0], [0, 1]]]]
            else:
                shape, descs = f"{n}, -1", [["prod", [[0, 0], [0, 1]]], ["rest"]]
        else:
            expr = f"{x.name}.numel()"
            shape, descs = f"{n} // {d}, {d}", [["rest"], ["c", d]]
        if not self.try_statement(SizeNode(n, expr), n):
            self.restore(saved)
            return False
        allowed = [s.name for s in self.specs if s.name in ("view", "reshape")]  # GenConfig.ops may exclude them
        if not all(env[x.name].is_contiguous() for env in self.envs) and "reshape" in allowed:
            allowed = ["reshape"]
        op = self.draw(st.sampled_from(allowed))
        params = {"shape": shape, "descs": descs}
        name = self.fresh("v")
        if not self.try_statement(OpNode(name, op, (x.name,), params), name):
            self.restore(saved)
            return False
        self.check_shape_rule(self.spec_by_name[op], [x], [x.name], params)
        return True

    def draw_graph_break(self) -> bool:
        """``torch._dynamo.graph_break()`` between statements (a no-op in eager)."""
        if not self.body or isinstance(self.body[-1], GraphBreakNode):
            return False
        return self.try_statement(GraphBreakNode(), None)

    COND_ARMS = ["{a} * 2", "{a} - 1", "torch.relu({a})", "{a}.sin()", "{a}.cos() + {a}.sum()",
                 "{a} * {a}.size(-1)", "{a} / math.sqrt({a}.numel() + 1)", "torch.tanh({a}) * 0.5", "{a}.abs()"]
    COND_PAIR_ARMS = ["{a} + {b}", "{a} * {b}", "{a} - {b}.sin()", "torch.maximum({a}, {b})"]

    def draw_cond(self) -> bool:
        """``torch.cond(<size predicate>, true_fn, false_fn, (x,))`` with both
        branches giving the same shape, dtype and strides in every world."""
        floats = [t for t in self.tensors if t.kind == FLOAT and t.rank > 0 and t.name not in self.unbacked]
        if not floats:
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        pred = self.draw_size_predicate()
        # Operands of a higher-order op must not alias each other.
        partners = [t for t in floats if t.shapes == x.shapes and t.dtype == x.dtype and t.name != x.name
                    and not any(_share_storage(env[t.name], env[x.name]) for env in self.envs)]
        operands = (x.name,)
        arms = list(self.COND_ARMS)
        if partners and self.draw(st.booleans()):
            operands += (self.draw(st.sampled_from(partners)).name,)
            arms += self.COND_PAIR_ARMS * 2
        then = self.draw(st.sampled_from(arms)).format(a="a0", b="a1")
        orelse = self.draw(st.sampled_from(arms)).format(a="a0", b="a1")
        style = self.draw(st.sampled_from(["lambda", "def"]))
        if pred is None or not self._arms_agree(operands, then, orelse):
            self.restore(saved)
            return False
        name = self.fresh("v")
        if not self.try_statement(CondNode(name, pred, operands, then, orelse, style), name):
            self.restore(saved)
            return False
        return True

    def _arms_agree(self, operands, then: str, orelse: str) -> bool:
        """Both branches of a cond run in every world and agree on metadata."""
        params = ", ".join(f"a{i}" for i in range(len(operands)))
        try:
            branches = [eval(f"lambda {params}: {arm}", GLOBALS) for arm in (then, orelse)]
            for env in self.envs:
                args = [env[o] for o in operands]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    a, b = (f(*args) for f in branches)
                if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                    return False
                if a.shape != b.shape or a.dtype != b.dtype or a.stride() != b.stride() or a.dtype != args[0].dtype:
                    return False
        except Exception:
            return False
        return True



def _share_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
