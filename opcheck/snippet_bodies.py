"""What each check's repro snippet does, as code: the pieces of a snippet's ``main()``.

``opcheck.repro`` pastes the body of one or more of these functions (``corpus.linker.function_body``)
into a snippet's ``main()``, after the op is loaded (``op``), the failing input rebuilt
(``inputs()``, called once: ``args, kwargs``) and, for some checks, ``MUTABLE`` set. A function's
parameters name what its body uses from the code before it there, its imports here what the snippet
imports from the helpers file beside it (opcheck/snippet_files.py). The functions named after a
check are its whole body; the fake-tensor checks' bodies are put together from the others by the
failure's kind. Nothing here is called.
"""

# A piece hands the names it binds or imports to the pieces pasted after it (fake_start: real, mode...).
# ruff: noqa: F401, F841

import torch

from symfuzz.fuzz.script_runtime import compare
from symfuzz.opcheck.checks.compile import float64_inputs, run_collecting
from symfuzz.opcheck.checks.device import NEEDS_SHAPE_ENV, strided_like
from symfuzz.opcheck.checks.layout import run_laid_out
from symfuzz.opcheck.checks.mutation import storage_bytes, view_bytes

# The one placeholder (corpus.linker.fill): the name of the torch.library.opcheck test a check
# runs, which is the check's own, "test_<check>" (a stand-in here).
SLOT_TORCH_TEST = ""


def schema(op, args, kwargs):
    """schema: the op under SchemaCheckMode, which raises on an undeclared write or alias."""
    # private torch API, imported where the snippet uses it: a torch that moved it fails this one step
    from torch._subclasses.schema_check_mode import SchemaCheckMode

    with SchemaCheckMode():
        op(*args, **kwargs)  # raises: the op writes to or aliases an input its schema doesn't declare


def mutation(op, args, kwargs, MUTABLE):
    """mutation: which bytes of each input's storage the op wrote, against what the schema declares."""
    tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    versions, before = [t._version for t in tensors], [storage_bytes(t) for t in tensors]  # the whole storage
    with torch.no_grad():
        op(*args, **kwargs)
    for n, t in enumerate(tensors):
        changed = storage_bytes(t) != before[n]
        if n in MUTABLE:
            outside = changed & ~view_bytes(t, changed.numel())
            assert not outside.any(), (f"x{n}: the op wrote {int(outside.sum())} byte(s) of storage outside the view "
                                       f"(sizes {list(t.shape)}, strides {list(t.stride())}, offset {t.storage_offset()})")
        else:
            assert t._version == versions[n], f"x{n} is not declared mutable, but its version counter moved: the op writes to it"
            assert not changed.any(), f"x{n} is not declared mutable, but {int(changed.sum())} byte(s) of its storage changed"
    print("no undeclared write")


def autograd_registration(op, args, kwargs):
    """autograd_registration: torch's own test, then a backward through the op."""
    out = op(*args, **kwargs)
    outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
    leaves = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
    torch.library.opcheck(op, args, kwargs, test_utils=SLOT_TORCH_TEST)
    torch.autograd.grad(sum(o.sum() for o in outs), leaves)  # raises: no backward registered


def fake_start(op, args, kwargs, inputs):
    """faketensor and symbolic_fake, first: the real output, fresh inputs, a FakeTensorMode over a ShapeEnv."""
    # private torch API, imported where the snippet uses it: a torch that moved it fails this one step
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    real_args = args
    real = op(*args, **kwargs)
    args, kwargs = inputs()
    env = ShapeEnv(allow_scalar_outputs=False)  # .item() in a fake kernel raises
    mode = FakeTensorMode(shape_env=env)


def fake_static(op, args, kwargs, mode):
    """faketensor: the op on fake tensors of the inputs' static sizes."""
    fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), (args, kwargs))
    with mode:
        fake = op(*fake_args, **fake_kwargs)


def fake_metadata(real, fake):
    """faketensor's judgement: dtype, shape and strides of the fake outputs against the real ones."""
    for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(fake)):
        print("real", r.dtype, list(r.shape), r.stride(), "| fake", f.dtype, list(f.shape), f.stride())
        assert r.dtype == f.dtype and list(r.shape) == list(f.shape), "fake kernel disagrees with the real one"
        assert all(r.stride(d) == f.stride(d) for d in range(r.dim()) if r.shape[d] > 1), "strides differ"


def fake_aliasing(real, real_args, fake, fake_args):
    """faketensor's judgement of a wrong-aliasing failure: which inputs each output views, fake against real."""
    # private torch API, imported where the snippet uses it: a torch that moved it fails this one step
    from torch.multiprocessing.reductions import StorageWeakRef

    def views(out, inputs):
        stores = [StorageWeakRef(t.untyped_storage()) for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
        return [[n for n, s in enumerate(stores) if StorageWeakRef(o.untyped_storage()) == s]
                for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]

    print("outputs viewing inputs: real", views(real, real_args), "| fake", views(fake, fake_args))
    assert views(real, real_args) == views(fake, fake_args), "the fake kernel aliases inputs differently"


def fake_symbolic(op, args, kwargs, mode, env, real):
    """symbolic_fake: the op on fake tensors of symbolic sizes; the guards it installed, the sizes on each side."""
    # private torch API, imported where the snippet uses it: a torch that moved it fails this one step
    from torch._dynamo.source import LocalSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext, free_unbacked_symbols

    names = iter(f"x{n}" for n in range(100))
    def symbolic(t):
        ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DUCK] * t.dim())
        return mode.from_tensor(t, source=LocalSource(next(names)), symbolic_context=ctx)

    fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, symbolic, (args, kwargs))
    with mode:
        fake = op(*fake_args, **fake_kwargs)
    print("guards installed by the fake kernel:", [g.expr for g in env.guards])
    print("fake output sizes:", [list(f.shape) for f in torch.utils._pytree.tree_leaves(fake) if isinstance(f, torch.Tensor)])
    print("real output sizes:", [list(r.shape) for r in torch.utils._pytree.tree_leaves(real) if isinstance(r, torch.Tensor)])


def symbolic_specializes(env):
    """symbolic_fake's judgement of a specializes failure: no guard installed."""
    assert not env.guards, "the fake kernel specializes on a size"


def symbolic_unbacked(fake, free_unbacked_symbols):
    """symbolic_fake's judgement of a data-dependent size: an unbacked symbol."""
    sizes = [s for f in torch.utils._pytree.tree_leaves(fake) if isinstance(f, torch.Tensor) for s in f.shape]
    assert any(isinstance(s, torch.SymInt) and free_unbacked_symbols(s.node.expr) for s in sizes), "a data-dependent size must be unbacked (ctx.new_dynamic_size())"


def symbolic_at_hint(real, fake):
    """symbolic_fake's judgement of a wrong-* failure: the fake metadata at this input's sizes against the real."""
    def at_hint(s):
        return s.node.hint if isinstance(s, torch.SymInt) else s

    for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(fake)):
        if isinstance(r, torch.Tensor):
            shape, stride = [at_hint(s) for s in f.shape], [at_hint(s) for s in f.stride()]
            assert r.dtype == f.dtype and list(r.shape) == shape, f"fake {f.dtype}{shape}, real {r.dtype}{list(r.shape)}"
            assert all(r.stride(d) == stride[d] for d in range(r.dim()) if r.shape[d] > 1), f"strides {stride} vs {r.stride()}"


def fake_device(op, args, kwargs):
    """fake_device: the fake kernel on meta tensors and on fake cuda tensors, against the real output."""
    # private torch API, imported where the snippet uses it: a torch that moved it fails this one step
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    real = op(*args, **kwargs)


    def same_metadata(real, out, device):
        for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(out)):
            if not isinstance(r, torch.Tensor):
                continue
            print(f"real {r.dtype}{list(r.shape)} strides {r.stride()} | on {device}: {f.device} {f.dtype}{list(f.shape)} "
                  f"strides {f.stride()}")
            assert f.device.type == device, f"on {device} inputs the fake kernel returned a tensor on {f.device}"
            sizes = [s if isinstance(s, int) else None for s in f.shape]  # None: a data-dependent size
            assert f.dtype == r.dtype and len(sizes) == r.dim(), "dtype or rank differs"
            assert all(s in (None, rs) for s, rs in zip(sizes, r.shape)), "shape differs"
            if None not in sizes:
                assert all(f.stride(d) == r.stride(d) for d in range(r.dim()) if r.shape[d] > 1), "strides differ"


    # (a) meta tensors with the inputs' sizes, strides and storage offsets
    meta_args, meta_kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: strided_like(t, "meta"), (args, kwargs))
    try:
        meta = op(*meta_args, **meta_kwargs)
    except Exception as exc:
        if not NEEDS_SHAPE_ENV.search(f"{type(exc).__name__}: {exc}"):
            raise
        print("data-dependent output sizes need a ShapeEnv: not judged on meta tensors")
    else:
        same_metadata(real, meta, "meta")
    # (b) FakeTensors on cuda (no GPU needed)
    with FakeTensorMode(shape_env=ShapeEnv()):
        fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda t: strided_like(t, "cuda"), (args, kwargs))
        fake = op(*fake_args, **fake_kwargs)
    same_metadata(real, fake, "cuda")
    print("the fake kernel agrees on meta and on fake cuda tensors")


def layout_consistency(op, inputs, MUTABLE):
    """layout_consistency: the op on the inputs as laid out against the same inputs made contiguous."""
    def run(contiguous=False, float64=False):
        """(outputs, mutated inputs) of fresh inputs, as laid out or made contiguous, as the check runs them."""
        args, kwargs = inputs()
        return run_laid_out(op, args, kwargs, MUTABLE, contiguous=contiguous, float64=float64)


    def reference():  # the fp64 reference, for outputs that differ only by rounding
        try:
            return run(contiguous=True, float64=True)
        except Exception:
            return None


    # compare() calls its first argument "eager" (here: contiguous) and its second "compiled" (here: as laid out)
    diff = compare(run(contiguous=True), run(), reference)  # paths: out[0] outputs, out[1] mutated inputs
    assert diff is None, f"op(x) differs from op(x.contiguous()): {diff['symptom']} at {diff['path']}: {diff['detail']}"
    print("op(x) matches op(x.contiguous())")


def gradient(op, args, kwargs):
    """gradient: gradcheck of the op's floating outputs with respect to the inputs that require grad."""
    leaves, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    slots = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]

    def fn(*tensors):
        new = list(leaves)
        for i, t in zip(slots, tensors):
            new[i] = t
        a, k = torch.utils._pytree.tree_unflatten(new, spec)
        out = op(*a, **k)
        return tuple(o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.is_floating_point())

    torch.autograd.gradcheck(fn, tuple(leaves[i] for i in slots), check_undefined_grad=False, check_batched_grad=False)


def aot_dispatch_dynamic(op, args, kwargs):
    """aot_dispatch_dynamic: torch's own test."""
    torch.library.opcheck(op, args, kwargs, test_utils=SLOT_TORCH_TEST)


def inductor_dynamic(op, inputs, MUTABLE):
    """inductor_dynamic: the op compiled by Inductor with dynamic shapes against eager, judged as the check judges."""
    def run(fn, float64=False):
        """(outputs, mutated inputs, input grads) of fresh inputs, as the check runs them."""
        args, kwargs = inputs()
        if float64:
            args, kwargs = float64_inputs(args, kwargs)
        return run_collecting(fn, args, kwargs, MUTABLE)


    def reference():  # the fp64 reference, for outputs that differ from eager only by rounding
        try:
            return run(op, float64=True)
        except Exception:
            return None


    compiled = torch.compile(lambda *a, **k: op(*a, **k), backend="inductor", dynamic=True, fullgraph=True)
    expected, actual = run(op), run(compiled)
    diff = compare(expected, actual, reference)  # paths: out[0] outputs, out[1] mutated inputs, out[2] grads
    assert diff is None, f"compiled vs eager: {diff['symptom']} at {diff['path']}: {diff['detail']}"
    print("compiled matches eager")


def kernel_crash(op, args, kwargs):
    """A crash's snippet (opcheck/crashes.py): the real kernel on the input; a crash kills the process."""
    out = op(*args, **kwargs)  # a kernel crash kills the process here
    print('the kernel returned normally on this input')
