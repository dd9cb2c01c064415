"""A sample for an op that has none, built from its schema.

``symfuzz opcheck mylib::op`` may name an op no test has called. We fill each
argument from its type (tensors float32, ints 2, floats 0.5, ...) and try a
few tensor shape patterns until the real kernel accepts one. The sweep then
varies it as it would an author's sample.
"""

from __future__ import annotations

import torch

from symfuzz.opcheck.checks.common import OpCheckUsageError

# Shapes to try for the tensor arguments, in order: elementwise-like, a
# matmul chain, vectors, 3-D, scalars.
_PATTERNS = (
    lambda n: [(4, 8)] * n,
    lambda n: [(4, 8), (8, 3)] + [(3, 5)] * max(0, n - 2),
    lambda n: [(8,)] * n,
    lambda n: [(2, 3, 4)] * n,
    lambda n: [()] * n,
)


def _tensor(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g)


def _value(arg, shape_iter, seed):
    t = arg.type
    kind = str(t)
    if kind.startswith("Optional[") or kind.endswith("?"):
        return None  # an optional argument without a default: the op must handle None
    if kind in ("Tensor",):
        return _tensor(next(shape_iter), seed)
    if kind in ("List[Tensor]", "Tensor[]"):
        return [_tensor(next(shape_iter), seed), _tensor(next(shape_iter), seed + 1)]
    if kind in ("int", "SymInt"):
        return 2
    if kind in ("float",):
        return 0.5
    if kind in ("bool",):
        return False
    if kind in ("number", "Scalar"):
        return 1.0
    if kind in ("List[int]", "int[]", "List[SymInt]", "SymInt[]"):
        return [2]
    if kind in ("ScalarType", "ScalarType?"):
        return torch.float32
    raise OpCheckUsageError(f"cannot make up a value of type {kind} for argument {arg.name!r}")


def sample_from_schema(op) -> tuple[tuple, dict]:
    schema = op._schema
    # Arguments with defaults keep them (an optional bias stays None); the ones
    # after a skipped positional go by keyword, so nothing shifts position.
    args = [a for a in schema.arguments if not a.has_default_value()]
    n_tensors = sum(2 if "Tensor[]" in str(a.type) or "List[Tensor]" in str(a.type) else 1 for a in args
                    if "Tensor" in str(a.type))
    errors = []
    for pattern in _PATTERNS:
        shapes = iter(pattern(max(n_tensors, 1)) + [(4, 8)] * 4)
        positional, kwargs = [], {}
        skipped = False
        try:
            for i, arg in enumerate(schema.arguments):
                if arg.has_default_value():
                    skipped = True
                    continue
                value = _value(arg, shapes, seed=i)
                if arg.kwarg_only or skipped:
                    kwargs[arg.name] = value
                else:
                    positional.append(value)
            with torch.no_grad():
                op(*positional, **kwargs)
        except OpCheckUsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - the kernel refusing a guess: try the next pattern
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        return tuple(positional), kwargs
    raise OpCheckUsageError(
        f"could not build a sample for {schema.name} from its schema (the kernel refused every guess; last: "
        f"{errors[-1] if errors else '?'}). Record real calls from your tests with "
        f"`pytest --opcheck --opcheck-namespaces=NS --opcheck-record-only` and pass --from"
    )
