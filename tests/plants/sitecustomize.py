"""Planted torch bugs for symfuzz's quality tests.

When SYMFUZZ_PLANT names a plant (or several, comma-separated), this file (on PYTHONPATH, so Python runs
it at start-up in every process: campaign workers and fresh-process repro
runs alike) breaks torch in one specific, realistic way (or, for the
generator-fault plants, symfuzz itself). Without the variable it does nothing.
"""

import os

PLANT = os.environ.get("SYMFUZZ_PLANT", "")


def _is_symbolic(size) -> bool:
    import sympy

    return isinstance(size, sympy.Expr) and not size.is_number


def plant_abs_wrong_when_symbolic():
    """A miscompile: Inductor's abs lowering negates its result, but only when a
    dimension of its input is symbolic. Static-shape compiles stay correct, so
    a single call per program at one shape with dynamic=False cannot see it."""
    import torch
    import torch._inductor.lowering as lowering

    aten = torch.ops.aten
    original = lowering.lowerings[aten.abs.default]

    def abs_lowering(x):
        out = original(x)
        if any(_is_symbolic(s) for s in x.get_size()):
            return lowering.lowerings[aten.neg.default](out)
        return out

    lowering.lowerings[aten.abs.default] = abs_lowering


def plant_tanh_backward_wrong_when_symbolic():
    """A wrong gradient: the decomposition of aten.tanh_backward that Inductor hands
    AOTAutograd scales the gradient by 1.5, but only when a size of its input is
    symbolic. Forward values stay right, and so do static-shape compiles and the
    aot_eager lane (which decomposes nothing): only a compiled backward under
    dynamic shapes is wrong."""
    import torch
    from torch._inductor import decomposition

    aten = torch.ops.aten
    original = decomposition.decompositions[aten.tanh_backward.default]

    def symbolic(t) -> bool:
        return any(isinstance(s, torch.SymInt) and s.node.expr.free_symbols for s in t.shape)

    def tanh_backward(grad_output, output):
        grad = original(grad_output, output)
        return grad * 1.5 if symbolic(output) else grad

    decomposition.decompositions[aten.tanh_backward.default] = tanh_backward


def plant_segfault_on_cos():
    """A crash that kills the process: the Dynamo-only "eager" backend
    dereferences NULL when a graph contains torch.cos."""
    import ctypes

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def crashing_backend(gm, example_inputs):
        if any(node.target in (torch.cos, torch.Tensor.cos) for node in gm.graph.nodes):
            ctypes.string_at(0)  # SIGSEGV
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = crashing_backend


def plant_hang_on_sin():
    """A hang: the "eager" backend never returns when a graph contains torch.sin."""
    import time

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def hanging_backend(gm, example_inputs):
        if any(node.target in (torch.sin, torch.Tensor.sin) for node in gm.graph.nodes):
            while True:
                time.sleep(1)
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = hanging_backend


def plant_slow_compile_on_sin():
    """Merely slow, not hung: the first graph with torch.sin that a process compiles on
    the "eager" backend takes SYMFUZZ_PLANT_SLOW_SECONDS (default 45) longer."""
    import os
    import time

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")
    pending = [float(os.environ.get("SYMFUZZ_PLANT_SLOW_SECONDS", "45"))]

    def slow_backend(gm, example_inputs):
        if pending and any(node.target in (torch.sin, torch.Tensor.sin) for node in gm.graph.nodes):
            time.sleep(pending.pop())
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = slow_backend


def plant_memory_hog_on_sigmoid():
    """Runaway memory: the "eager" backend allocates without end when a graph
    contains torch.sigmoid (the campaign's resident-memory watchdog must stop it)."""
    import time

    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def hogging_backend(gm, example_inputs):
        if any(node.target in (torch.sigmoid, torch.Tensor.sigmoid) for node in gm.graph.nodes):
            hoard = []
            for _ in range(400):  # up to ~20 GiB, touched so it is resident
                hoard.append(bytearray(50 * 1024 * 1024))
                time.sleep(0.02)
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = hogging_backend


def _wrapped_in_eager_backend(targets, wrap):
    """The Dynamo-only "eager" backend compiles as usual, but for a graph that calls one of
    ``targets`` it returns ``wrap(compiled)`` instead of the compiled function."""
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def backend(gm, example_inputs):
        compiled = original(gm, example_inputs)
        return wrap(compiled) if any(node.target in targets for node in gm.graph.nodes) else compiled

    registry._COMPILER_FNS["eager"] = backend


def _wrong_in_eager_backend(targets):
    """A cheap miscompile, for tests that need a real value finding fast: the
    Dynamo-only "eager" backend returns every floating output plus one when
    its graph calls one of ``targets`` (nothing is compiled by Inductor, so a
    campaign on the eager lane finds it in seconds)."""
    import torch

    def shifting(compiled):
        def shifted(*args):
            outs = compiled(*args)
            bump = lambda t: t + 1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t  # noqa: E731
            return type(outs)(bump(t) for t in outs) if isinstance(outs, (list, tuple)) else bump(outs)

        return shifted

    _wrapped_in_eager_backend(targets, shifting)


def plant_tanh_wrong_in_eager_backend():
    import torch

    _wrong_in_eager_backend((torch.tanh, torch.Tensor.tanh))


def plant_exp_wrong_in_eager_backend():
    import torch

    _wrong_in_eager_backend((torch.exp, torch.Tensor.exp))


def plant_torch_without_compile():
    """An "older torch" for reference-environment tests: one that lacks torch.compile."""
    import torch

    del torch.compile


def _drop_shape_guards(should_drop):
    """Make Dynamo leave out the shape guards ``should_drop(python_expr)`` picks.

    ``ShapeEnv.produce_guards_verbose`` returns one list of guard expressions
    per language (python, verbose python, C++), index-aligned; Dynamo turns
    them into the guard checks of the compiled frame. Removing entries there
    removes the runtime check while the graph still assumes it: exactly a
    missing-guard bug. The ShapeEnv itself still lists the guard, as it
    would in a real bug of that kind.
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    original = ShapeEnv.produce_guards_verbose

    def produce_guards_verbose(self, *args, **kwargs):
        helpers = original(self, *args, **kwargs)
        python = next((h for h, lang in zip(helpers, kwargs.get("langs", ("python",))) if lang == "python"), helpers[0])
        keep = [i for i, expr in enumerate(python.exprs) if not should_drop(expr)]
        out = []
        for helper in helpers:
            exprs = [helper.exprs[i] for i in keep]
            fields = {f: getattr(helper, f) for f in helper.__dataclass_fields__ if f != "exprs"}
            out.append(type(helper)(exprs=exprs, **fields))
        return out

    ShapeEnv.produce_guards_verbose = produce_guards_verbose


_SIZE = r"L\['\w+'\]\.size\(\)\[\d+\]"


def plant_dropped_comparison_guard():
    """A dropped guard: the lower bound that a size comparison in user code
    installs (``if x.size(0) > 4`` gives ``5 <= L['x'].size()[0]``) is not
    checked, so the graph, specialized to that side of the comparison, is
    reused for sizes on the other side. (Upper bounds from ``< k`` print as
    one conjunct with the 0/1 bound, ``2 <= size and size <= k``; this plant
    leaves those alone.)"""
    import re

    bound = re.compile(rf"^(\d+) <= {_SIZE}$|^{_SIZE} <= (\d+)$|^{_SIZE} [<>]=? \d+$|^\d+ [<>]=? {_SIZE}$")

    def drop(expr):
        m = bound.match(expr.strip())
        if not m:
            return False
        low = m.group(1)
        return low is None or int(low) > 2  # keep the 0/1 bound "2 <= size"

    _drop_shape_guards(drop)


def plant_unguarded_zero_one():
    """An unguarded 0/1 specialization: a dynamic graph is compiled assuming
    its sizes are at least 2 (0/1 specialization), but the ``2 <= size``
    range guard is not checked (with any upper bound printed in the same
    conjunct), so the graph is reused for sizes 0 and 1."""
    import re

    bound = re.compile(rf"^2 <= {_SIZE}( <= \d+)?$|^2 <= {_SIZE} and")

    _drop_shape_guards(lambda expr: bool(bound.match(expr.strip())))


def plant_unguarded_duck_sizing():
    """An unguarded duck-size unification: two dims that had the same size
    when the graph was compiled share one symbol (duck sizing), but the
    equality guard between them is not checked, so the graph is reused for
    unequal sizes. (Dims of one contiguous tensor stay tied through its stride
    guard; the plant bites across tensors.)"""
    import re

    equality = re.compile(rf"^{_SIZE} == {_SIZE}$")
    _drop_shape_guards(lambda expr: bool(equality.match(expr.strip())))


def plant_frame_entry_guard_mismatch():
    """A guard that rejects at frame entry what its guard manager accepts: every
    compiled frame gets one more root guard which, when Dynamo evaluates it at
    the entry of a compiled function (called from torch.compile's wrapper),
    fails for calls with an input tensor that has a dim of size 7, as if the
    runtime read the frame's arguments differently from the dict the guard
    manager is given; asked through the guard manager's own ``check`` (or
    ``check_verbose``, as Dynamo does to find the reason) it passes. A later
    call at such sizes that a cached graph accepts recompiles instead: an
    unsound recompile. The first call of a program compiles without asking
    any guard, so one call per program never shows it."""
    import sys

    import torch
    import torch._dynamo.guards as guards

    original = guards.GuardManagerWrapper.finalize

    def at_frame_entry() -> bool:
        caller = sys._getframe(2)  # 0: this helper, 1: the guard, 2: who evaluates it
        return caller.f_code.co_filename.endswith("eval_frame.py")

    def finalize(self):
        def frame_entry_guard(f_locals):
            sevens = any(isinstance(v, torch.Tensor) and 7 in v.shape for v in dict(f_locals).values())
            return not (sevens and at_frame_entry())

        self.root.add_lambda_guard(frame_entry_guard, ["___frame_entry_guard(L)"], None)
        return original(self)

    guards.GuardManagerWrapper.finalize = finalize


def plant_int_guard():
    """An int guard that admits a changed value: Dynamo compiles a Python int
    argument that it specializes (at the first call under automatic dynamic,
    at every call under ``specialize_int``) as a constant of the graph, and
    guards on its value (``CONSTANT_MATCH``, which is an ``EQUALS_MATCH`` for
    an int). Planted: that guard is not installed for an int argument of the
    compiled frame (source ``L['k']``), so a graph specialized for k=2 is
    reused, wrongly, for k=3. Tensor guards and guards on ints elsewhere stay."""
    import re

    from torch._dynamo.guards import GuardBuilder

    original = GuardBuilder.EQUALS_MATCH
    argument = re.compile(r"^L\['\w+'\]$")

    def EQUALS_MATCH(self, guard, recompile_hint=None):
        if argument.match(guard.name) and type(self.get(guard)) is int:
            return  # planted: no check of the int's value
        return original(self, guard, recompile_hint)

    GuardBuilder.EQUALS_MATCH = EQUALS_MATCH


def plant_symbolic_lowering_crash():
    """A compile-time crash: Inductor's lowering of aten.relu raises when a
    dimension of its input is symbolic. Static-shape compiles of the same
    program succeed, so only a dynamic compile (a second call at a new size,
    a mark_dynamic, or dynamic=True) shows it. relu reaches Inductor as
    aten.relu.default in training and inference graphs alike (AOTAutograd
    does not decompose it), so any small model with a ReLU can hit it."""
    import torch
    import torch._inductor.lowering as lowering

    aten = torch.ops.aten
    original = lowering.lowerings[aten.relu.default]

    def relu_lowering(x):
        if any(_is_symbolic(s) for s in x.get_size()):
            raise RuntimeError(f"planted: relu lowering cannot handle the symbolic size {list(x.get_size())}")
        return original(x)

    lowering.lowerings[aten.relu.default] = relu_lowering


def _fail_generating(should_fail):
    """A symfuzz bug, not a torch one: in campaign workers, the case generator
    raises for the case indices ``should_fail`` picks. The canary is a fixed
    case, not generated, so it passes; the campaign must count these as
    internal errors, group them by cause, and not end green."""
    import sys

    if "symfuzz.worker" not in sys.orig_argv:
        return
    from symfuzz.fuzz import drawing

    original = drawing.generate

    def generate(seed, index, config):
        if should_fail(index):
            # The index in the message: one cause however many cases hit it.
            raise RuntimeError(f"planted generator fault at case {index}")
        return original(seed, index, config)

    drawing.generate = generate
    # A mutant of an earlier case (guidance) is generated too: the same cases fail.
    from symfuzz.fuzz import mutate

    original_mutant = mutate.generate_mutant

    def generate_mutant(seed, index, parent_choices, config, parent=None):
        if should_fail(index):
            raise RuntimeError(f"planted generator fault at case {index}")
        return original_mutant(seed, index, parent_choices, config, parent=parent)

    mutate.generate_mutant = generate_mutant


def plant_slow_generation():
    """In campaign workers, generating any case takes ten minutes: a campaign stopped
    after its canary is stopped while a worker generates."""
    import time

    _fail_generating(lambda index: time.sleep(600) or False)


def plant_disk_full_on_candidates():
    """In the campaign's own process, the disk is full when a candidate is logged."""
    import sys

    if "symfuzz.cli" not in " ".join(sys.orig_argv):
        return
    from symfuzz.corpus import atomic

    original = atomic.append_line

    def append_line(path, data):
        if str(path).endswith("candidates.jsonl"):
            raise atomic.DiskFullError(path)
        return original(path, data)

    atomic.append_line = append_line


def plant_generator_fault_most():
    """The generator fails for 9 of every 10 cases."""
    _fail_generating(lambda index: index % 10 != 0)


def plant_generator_fault_some():
    """The generator fails for 1 of every 10 cases (index 3, 13, ...)."""
    _fail_generating(lambda index: index % 10 == 3)


def plant_lost_buffer_mutation():
    """A lost write-back: AOTAutograd drops the in-graph copy_ that writes an in-place
    update back into a mutated graph input of fixed sizes (a module's buffer, which
    Dynamo keeps static) when the graph has symbolic sizes. Static compiles keep it,
    so a module called at one shape, or compiled with dynamic=False, stays right."""
    import torch
    from torch._functorch._aot_autograd import graph_capture_wrappers as wrappers

    original = wrappers.apply_in_graph_mutations

    def has_symbols() -> bool:
        shape_env = getattr(torch._guards.detect_fake_mode(), "shape_env", None)
        return bool(shape_env is not None and shape_env.backed_var_to_val)

    def apply_in_graph_mutations(input_info, inpt_old, inpt_new, *args, **kwargs):
        static = all(isinstance(s, int) for s in inpt_old.shape)
        if static and not input_info.requires_grad and has_symbols():
            return None  # the buffer keeps its old value
        return original(input_info, inpt_old, inpt_new, *args, **kwargs)

    wrappers.apply_in_graph_mutations = apply_in_graph_mutations


def _at_run_in_eager_backend(targets, effect):
    """A fault in the compiled forward, not while compiling: the function the "eager" backend
    returns for a graph that calls one of ``targets`` runs ``effect()`` first on every call."""

    def faulty(compiled):
        def faulty_compiled_forward(*args):
            effect()
            return compiled(*args)

        return faulty_compiled_forward

    _wrapped_in_eager_backend(targets, faulty)


def _null_read():
    import ctypes

    ctypes.string_at(0)  # SIGSEGV


def _spin():
    import time

    while True:
        time.sleep(1)


def plant_segfault_exp_at_run():
    """A crash that kills the process in the compiled forward (not while compiling): a
    graph with torch.exp compiles on the "eager" backend, and dereferences NULL when called."""
    import torch

    _at_run_in_eager_backend((torch.exp, torch.Tensor.exp), _null_read)


def plant_hang_exp_at_run():
    """A hang in the compiled forward: a graph with torch.exp compiles on the "eager"
    backend, and never returns when called."""
    import torch

    _at_run_in_eager_backend((torch.exp, torch.Tensor.exp), _spin)


def _gradient_wrong_in_eager_backend(name):
    """A wrong gradient in one op's backward, cheaply (no Inductor): the "eager" backend
    compiles graphs whose calls of ``torch.<name>`` (or the method) are replaced by one
    whose backward scales the gradient by 1.5. Forward values stay right, and so does
    every gradient that does not flow through that op."""
    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")
    op = getattr(torch, name)

    class ScaledBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.5

    def op_with_wrong_backward(*args, **kwargs):
        return ScaledBackward.apply(op(*args, **kwargs))

    def backend(gm, example_inputs):
        changed = False
        for node in gm.graph.nodes:
            if (node.op == "call_function" and node.target in (op, getattr(torch.Tensor, name))) or \
                    (node.op == "call_method" and node.target == name):
                node.op, node.target = "call_function", op_with_wrong_backward
                changed = True
        if changed:
            gm.recompile()
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = backend


def plant_grad_wrong_tanh_eager():
    _gradient_wrong_in_eager_backend("tanh")


def plant_grad_wrong_exp_eager():
    _gradient_wrong_in_eager_backend("exp")


def plant_segfault_cos_index():
    """A crash in a generated kernel: Inductor's lowering of aten.cos reads its input 2**44
    rows past its start when a size of the input is symbolic (an index-arithmetic bug), so
    the C++ kernel that computes cos segfaults; static-shape compiles stay correct. A
    program's forward cos dies in the compiled forward, and the backward of sin (whose
    derivative is cos) in the compiled backward."""
    import torch
    import torch._inductor.lowering as lowering
    from torch._inductor import ir

    aten = torch.ops.aten
    original = lowering.lowerings[aten.cos.default]

    def cos_lowering(x):
        out = original(x)
        if not any(_is_symbolic(s) for s in x.get_size()):
            return out
        load = out.make_loader()

        def far_away(index):
            index = list(index)
            index[0] = index[0] + 2 ** 44
            return load(index)

        return ir.Pointwise.create(device=out.get_device(), dtype=out.get_dtype(), inner_fn=far_away,
                                   ranges=list(out.get_size()))

    lowering.lowerings[aten.cos.default] = cos_lowering


def _size_symbol(symbol) -> bool:
    """A size symbol as a kernel's index arithmetic prints it: ``s0`` (a size), ``ps0``
    (a size expression computed once), ``u0`` (unbacked), or ``ks0`` (a size passed to the
    kernel); not an index variable (``x0``, ``r0_1``, ``xindex``...)."""
    import re

    return re.fullmatch(r"(k?s|ps|u)\d+", symbol.name) is not None


def _symbolic(expr) -> bool:
    return any(_size_symbol(s) for s in expr.free_symbols)


def _indexes(expr) -> bool:
    return any(not _size_symbol(s) for s in expr.free_symbols)


def plant_symbolic_divisor_index():
    """Index arithmetic miscomputed when its divisor is a size symbol: Inductor's kernel
    printers (C++ and Triton) print ``ModularIndexing(i, d, m)`` (``(i // d) % m``) one
    step on, ``(i // d + 1) % m``, when ``d`` or ``m`` holds a size symbol, and
    ``FloorDiv(i, d)`` (``i // d``) of an index ``i`` as ``max(i - 1, 0) // d`` when ``d``
    holds one. Both stay inside the buffer (no crash): the kernel reads the wrong element.
    Such terms come from views and reshapes of non-contiguous values with dynamic sizes
    (for ``x`` of sizes ``(s0, s1)``, ``x.t().reshape(-1)`` loads ``x[i % s0, i // s0]``);
    constant divisors and moduli print as before, and so does a ``FloorDiv`` with no index
    variable in it (the wrapper's size arithmetic, loop bounds), so static compiles and
    many dynamic ones stay right."""
    from torch._inductor.codegen import cpp_utils, triton

    cpp_modular, cpp_floordiv = cpp_utils.CppPrinter._print_ModularIndexing, cpp_utils.CppPrinter._print_FloorDiv
    triton_modular, triton_floordiv = triton.TritonPrinter._print_ModularIndexing, triton.TritonPrinter._print_FloorDiv

    def cast(text):
        return f"static_cast<int64_t>({text})"

    def cpp_modular_indexing(self, expr):
        x, div, mod = expr.args
        if not (expr.is_integer and (_symbolic(div) or _symbolic(mod))):
            return cpp_modular(self, expr)
        q = self.doprint(x) if div == 1 else f"c10::div_floor_integer({cast(self.doprint(x))}, {cast(self.doprint(div))})"
        return f"(({cast(q)} + 1) % {cast(self.doprint(mod))})"  # planted: one element on

    def cpp_floor_div(self, expr):
        x, div = expr.args
        if not (expr.is_integer and _symbolic(div) and _indexes(x)):
            return cpp_floordiv(self, expr)
        shifted = f"std::max<int64_t>({cast(self.doprint(x))} - 1, 0)"  # planted: one element back
        return f"c10::div_floor_integer({shifted}, {cast(self.doprint(div))})"

    def triton_modular_indexing(self, expr):
        x, div, mod = expr.args
        if not (_symbolic(div) or _symbolic(mod)):
            return triton_modular(self, expr)
        q = f"({self.doprint(x)})" if div == 1 else f"(({self.doprint(x)}) // ({self.doprint(div)}))"
        return f"(({q} + 1) % ({self.doprint(mod)}))"  # planted: one element on

    def triton_floor_div(self, expr):
        x, div = expr.args
        if not (_symbolic(div) and _indexes(x)) or not (x.is_nonnegative and div.is_nonnegative):
            return triton_floordiv(self, expr)
        return f"(tl.maximum(({self.doprint(x)}) - 1, 0) // ({self.doprint(div)}))"  # planted: one element back

    cpp_utils.CppPrinter._print_ModularIndexing = cpp_modular_indexing
    cpp_utils.CppPrinter._print_FloorDiv = cpp_floor_div
    triton.TritonPrinter._print_ModularIndexing = triton_modular_indexing
    triton.TritonPrinter._print_FloorDiv = triton_floor_div


def plant_python_number_guard():
    """A weakened guard on a Python number: Dynamo compiles an int or float argument that it
    specializes (at the first call under automatic dynamic, at every call under
    ``specialize_int``/``specialize_float``) as a constant of the graph and guards on its
    value (``EQUALS_MATCH``: ``L['k'] == 2``). Planted: for an int or float argument of the
    compiled frame that guard compares with a tolerance, ``abs(L['k'] - 2) <= 1``, as if
    written for floats that may round, so a graph specialized for k=2 is reused for k=3 (or
    f=0.5 for f=1.5). Only a number argument that changes between calls, by at most 1, shows
    it; bools, tensors, numbers elsewhere (globals, attributes) and equal values keep their
    guards as before."""
    import re

    from torch._dynamo.guards import GuardBuilder, get_verbose_code_parts

    original = GuardBuilder.EQUALS_MATCH
    argument = re.compile(r"^L\['\w+'\]$")

    def EQUALS_MATCH(self, guard, recompile_hint=None):
        val = self.get(guard)
        if not (argument.match(guard.name) and type(val) in (int, float) and val == val):
            return original(self, guard, recompile_hint)
        ref = self.arg_ref(guard)
        code = [f"abs({ref} - {val!r}) <= 1"]  # planted: a tolerance where equality was needed

        def close(x):
            return type(x) is type(val) and abs(x - val) <= 1

        self.get_guard_manager(guard).add_lambda_guard(close, get_verbose_code_parts(code, guard), guard.user_stack)
        self._set_guard_export_info(guard, code)

    GuardBuilder.EQUALS_MATCH = EQUALS_MATCH


def plant_heads_transpose_symbolic():
    """An index bug in attention's heads split and merge: in a graph compiled with symbolic
    sizes, ``x.transpose(1, 2)`` of a 4-D tensor (batch, seq, heads, head_dim -> batch, heads,
    seq, head_dim, and back) is computed as a reshape to the transposed shape: the shape is
    right, the elements are not, unless the sequence or the heads are 1. Static compiles stay
    right, so a model compiled at one size with dynamic=False never shows it. Cheap: the
    "eager" backend (Dynamo only)."""
    import torch
    from torch._dynamo.backends import registry

    original = registry.lookup_backend("eager")

    def reshaped_transpose(x, a, b):
        if x.dim() == 4 and sorted((a % 4, b % 4)) == [1, 2]:
            return x.reshape(x.shape[0], x.shape[2], x.shape[1], x.shape[3])
        return x.transpose(a, b)

    def backend(gm, example_inputs):
        # A graph with symbolic sizes takes them as SymInt inputs (its tensors' shapes may be concrete).
        symbolic = any(isinstance(t, torch.SymInt) for t in example_inputs) or \
            any(isinstance(s, torch.SymInt) for t in example_inputs if isinstance(t, torch.Tensor) for s in t.shape)
        if symbolic:
            for node in gm.graph.nodes:
                if (node.op == "call_method" and node.target == "transpose") or \
                        (node.op == "call_function" and node.target is torch.transpose):
                    node.op, node.target = "call_function", reshaped_transpose
            gm.recompile()
        return original(gm, example_inputs)

    registry._COMPILER_FNS["eager"] = backend


def plant_kv_cache_length_unguarded():
    """A guard bug on a KV cache that grows by one: Dynamo's tensor guard on a cache's key and
    value tensors (``cache.layers[i].keys``, or ``past_key_values...``) does not check their length dim, nor the
    strides that follow from it. A graph compiled with the cache length static (automatic
    dynamic's first compile) is reused at the next decode step, one longer, where it is wrong."""
    import torch._dynamo.guards as guards

    original = guards.GuardBuilder.TENSOR_MATCH
    convert = guards.convert_to_concrete_values

    def TENSOR_MATCH(self, guard, value=None):
        if ".layers[" not in guard.name or not guard.name.endswith((".keys", ".values")):
            return original(self, guard, value)
        calls = []

        def loose(values):
            out = convert(values)
            calls.append(1)
            if out is not None and len(out) == 4:
                out = list(out)
                if len(calls) == 1:
                    out[2] = None  # the size: the cache length
                else:
                    out[0] = out[1] = None  # the strides over it
            return out

        guards.convert_to_concrete_values = loose
        try:
            return original(self, guard, value)
        finally:
            guards.convert_to_concrete_values = convert

    guards.GuardBuilder.TENSOR_MATCH = TENSOR_MATCH


def plant_embedding_specializes_length():
    """A specialization in torch's own Python: ``nn.Embedding.forward`` iterates over the
    positions of its input (``range(input.shape[-1])``), which makes Dynamo turn the sequence
    length into a constant. A model whose length dim is marked dynamic is refused
    (ConstraintViolationError), and under dynamic=True every new length recompiles."""
    import torch

    original = torch.nn.Embedding.forward

    def forward(self, input):
        positions = len(list(range(input.shape[-1])))  # a Python loop over the length: specializes it
        return original(self, input) if positions >= 0 else None

    torch.nn.Embedding.forward = forward


PLANTS = {
    "heads-transpose-symbolic": plant_heads_transpose_symbolic,
    "kv-cache-length-unguarded": plant_kv_cache_length_unguarded,
    "embedding-specializes-length": plant_embedding_specializes_length,
    "lost-buffer-mutation": plant_lost_buffer_mutation,
    "dropped-comparison-guard": plant_dropped_comparison_guard,
    "unguarded-zero-one": plant_unguarded_zero_one,
    "unguarded-duck-sizing": plant_unguarded_duck_sizing,
    "abs-symbolic": plant_abs_wrong_when_symbolic,
    "grad-symbolic": plant_tanh_backward_wrong_when_symbolic,
    "segfault-cos": plant_segfault_on_cos,
    "segfault-exp-at-run": plant_segfault_exp_at_run,
    "segfault-cos-index": plant_segfault_cos_index,
    "hang-exp-at-run": plant_hang_exp_at_run,
    "grad-wrong-tanh-eager": plant_grad_wrong_tanh_eager,
    "grad-wrong-exp-eager": plant_grad_wrong_exp_eager,
    "hang-sin": plant_hang_on_sin,
    "slow-compile-sin": plant_slow_compile_on_sin,
    "slow-generation": plant_slow_generation,
    "disk-full-candidates": plant_disk_full_on_candidates,
    "tanh-wrong-eager": plant_tanh_wrong_in_eager_backend,
    "exp-wrong-eager": plant_exp_wrong_in_eager_backend,
    "torch-without-compile": plant_torch_without_compile,
    "oom-sigmoid": plant_memory_hog_on_sigmoid,
    "symbolic-lowering-crash": plant_symbolic_lowering_crash,
    "int-guard": plant_int_guard,
    "python-number-guard": plant_python_number_guard,
    "symbolic-divisor-index": plant_symbolic_divisor_index,
    "frame-entry-guard-mismatch": plant_frame_entry_guard_mismatch,
    "generator-fault-most": plant_generator_fault_most,
    "generator-fault-some": plant_generator_fault_some,
}

# Plants that patch symfuzz, not torch: applied at start-up (they import what they patch).
SYMFUZZ_PLANTS = {"slow-generation", "disk-full-candidates", "generator-fault-most", "generator-fault-some"}


class _AfterTorch:
    """A meta path finder that applies the torch plants right after ``import torch`` runs.

    Not at start-up: every Python process on PYTHONPATH runs this file, and most that
    torch starts never import torch (Inductor's CPU vector-ISA probes, six short
    `python -c` runs per fresh compile cache); importing torch in each would add
    seconds to every compile, which no real environment pays. A plant imports what it
    patches once torch's own __init__ is done, as it did when it imported torch itself."""

    def __init__(self, plants):
        self.plants = plants

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        import sys

        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once: the rest of the import, and later ones, go as usual
        spec = importlib.util.find_spec(name)  # as the finders after this one would find it
        if spec is None or spec.loader is None:
            return spec
        run_module, plants = spec.loader.exec_module, self.plants

        def exec_module(module):
            run_module(module)
            for plant in plants:
                plant()

        spec.loader.exec_module = exec_module
        return spec


def _apply(names):
    import sys

    deferred = [PLANTS[name] for name in names if name not in SYMFUZZ_PLANTS]
    if deferred:
        if "torch" in sys.modules:  # something imported it already at start-up
            for plant in deferred:
                plant()
        else:
            sys.meta_path.insert(0, _AfterTorch(deferred))
    for name in names:
        if name in SYMFUZZ_PLANTS:
            PLANTS[name]()


# Several plants at once: SYMFUZZ_PLANT=tanh-wrong-eager,exp-wrong-eager (a "new" environment
# with two bugs beside a reference environment with one).
_apply([name for name in PLANT.split(",") if name])
