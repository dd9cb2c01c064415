"""The runtime every standalone script carries, by job (fuzz/script_runtime.py gathers it)."""
