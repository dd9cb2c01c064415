"""Custom ops for the opcheck quality tests: ``buggy`` (one bug each), ``correct``."""
