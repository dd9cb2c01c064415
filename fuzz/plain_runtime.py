"""The helpers a finding's short ``repro.py`` carries, after the bug (``corpus/short_repro.py`` pastes them).

Plain on purpose: a seeded generator, ``torch.testing.assert_close`` and
``torch.autograd.grad``, which any reader of an upstream issue knows. They build
the same inputs and cotangents as ``script_runtime`` and compare at the same
tolerances, without its float64 reference: that stays with the full judge,
``judge.py``, which symfuzz writes beside the short script.
"""

import torch

from symfuzz.fuzz.module_runtime import ADAM_EPS
from symfuzz.fuzz.script_runtime import COTANGENT_SEED, TOLERANCES


def randn(shape, dtype, seed):  # a floating input as symfuzz drew it: standard normal in float32, seeded
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def seeded(shape, dtype, seed):  # any other input as symfuzz drew it: ints in [-8, 8], bools, complex normal
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-8, 9, shape, generator=g, dtype=dtype)


def check(what, actual, expected):  # compiled against eager: floats at their dtype's tolerance, the rest exactly
    actual, expected = torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    assert len(actual) == len(expected), f"{what}: compiled gives {len(actual)} values, eager {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        rtol, atol = TOLERANCES.get(e.dtype.to_real(), (0, 0)) if isinstance(e, torch.Tensor) else (0, 0)
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what} [{i}]: {m}")


def gradients(out, inputs):  # of sum_i (o_i * c_i).sum() over the outputs o_i that require grad, c_i seeded
    leaves = torch.utils._pytree.tree_leaves(out)
    terms = [(o * randn(o.shape, o.dtype, COTANGENT_SEED + i)).sum() for i, o in enumerate(leaves)
             if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
    if not terms:
        return [torch.zeros_like(x) for x in inputs]
    return torch.autograd.grad(sum(terms), inputs, allow_unused=True, materialize_grads=True)


def make_optimizer(model, kind, lr, momentum=0.0):  # a training step's optimizer over the trainable parameters
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return None
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    return torch.optim.Adam(params, lr=lr, eps=ADAM_EPS)


def train_step(optimizer, model, grads):  # the update: the parameters' gradients (the last of grads), then a step
    params = [p for p in model.parameters() if p.requires_grad]
    for p, g in zip(params, grads[len(grads) - len(params):]):
        p.grad = g
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad()
