"""The checks, one module per concern. Each judge takes a Case and returns
None (passed), ``REJECTED`` (the real kernel refused it) or a ``Problem``."""
