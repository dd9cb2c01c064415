"""Custom ops for the opcheck quality tests: ``buggy`` (one bug each), ``correct``, ``crashy``, and
``off_by`` (off by a chosen share of the tolerance under Inductor, for the snippet-agreement test)."""
