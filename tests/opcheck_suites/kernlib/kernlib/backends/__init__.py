from . import cpu, default  # noqa: F401
