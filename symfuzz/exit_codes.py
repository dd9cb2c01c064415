"""The exit codes of the ``symfuzz`` commands: a contract (docs/exit-codes.md)."""

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143
