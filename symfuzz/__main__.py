"""``python -m symfuzz``: the same as the ``symfuzz`` command."""

from symfuzz.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
