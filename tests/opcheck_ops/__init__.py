"""Custom ops for the opcheck quality tests: ``buggy`` (one bug each), ``correct``, ``crashy``,
``off_by`` (off by a chosen share of the tolerance under Inductor, for the snippet-agreement test),
``sweep_bugs`` (bugs one float32 sample hides) and ``sweep_ok`` (their correct twins and forward-only
ops), which share ``kernel_parts``."""
