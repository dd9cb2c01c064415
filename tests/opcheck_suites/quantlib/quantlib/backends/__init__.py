from . import cpu, default  # noqa: F401  (registers the kernels)
