"""The minifier: shrinks a failure (a finding's case, or a failing script) while it stays the same bug.

``run`` is the entry point (``minify_finding``, ``minify_path``); ``driver`` runs candidates
in fresh processes; ``case_passes``/``case_subject`` shrink a finding's program and schedule;
``capture``, ``graph_passes``/``graph_subject`` and ``script`` shrink a captured Dynamo graph
of a failing script; ``criteria`` says what "the same bug" means.
"""
