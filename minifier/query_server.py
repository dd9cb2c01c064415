"""A warm query server: imports torch once, then forks a fresh child for each query.

Started by ``minifier.warm_queries`` as ``python -m symfuzz.minifier.query_server``
with the environment every query of one minify run shares. A cold query spends
6-9 s importing torch before it compiles anything; a child forked from this
server starts with those imports done.

Isolation: the server itself only imports modules. It never compiles, traces or
runs a tensor op, so every child starts from the same state a fresh interpreter
would reach after its imports: no Dynamo caches, no compiled graphs, no counters,
no thread pools (a fork is only safe while the parent has no other threads).
Each child runs in a session of its own (the client kills its whole process
group on a timeout), in the query's folder, with stdin from /dev/null and stdout
and stderr to the query's log file, and ends as ``python SCRIPT`` would:
the script's exit code, 1 with a traceback for an uncaught exception, a signal
for a crash.

Protocol, one JSON object per line: the server writes ``{"ready": true}`` once
warm; then for each request ``{"script": PATH, "cwd": DIR, "log": FILE}`` it
answers ``{"pid": PID}`` as soon as the child exists and ``{"pid": PID,
"returncode": CODE}`` when it ended (negative: killed by that signal). It exits
at the end of its input.
"""

from __future__ import annotations

import json
import os
import sys

# What a query script imports before it can compile: torch and Dynamo (every script),
# Inductor's compile entry (every Inductor lane), and what a first compile imports lazily
# (measured on torch 2.13). Nothing here starts a thread.
WARM_MODULES = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch.fx.experimental.symbolic_shapes",
                "torch._dynamo.backends.inductor", "torch._dynamo.repro.after_dynamo", "torch.export._trace",
                "torch.fx.experimental.validator", "torch.utils.cpp_extension", "sympy.combinatorics")


def warm_up() -> None:
    """Import what queries import, and run the machine probes every Inductor CPU compile makes
    once per process: which vector instruction sets the C++ compiler and the CPU support
    (a test program compiled and loaded per ISA, ~1.5 s). They depend on the machine and the
    environment alone, never on a query. A module missing from an older torch is skipped."""
    for name in WARM_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass
    try:
        from torch._inductor import cpu_vec_isa  # (deferred: part of the warm-up above)

        cpu_vec_isa.valid_vec_isa_list()
    except Exception:  # noqa: BLE001 - a probe that fails here fails again, and is reported, in the query
        pass


def threads() -> int:
    """Threads of this process (the OS's count: a native thread pool counts too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _child(request: dict, protocol: tuple) -> None:
    """Run one script as ``python SCRIPT`` would, then exit this process (never returns)."""
    code = 1
    try:
        for fd in protocol:
            os.close(fd)
        os.setsid()
        os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        code = _run_script(request["script"])
    finally:
        os._exit(code)


def _run_script(script: str) -> int:
    # deferred: the child only needs these once it runs a script
    import atexit
    import runpy
    import traceback

    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message"): printed, exit status 1, as the interpreter does
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # what a normal interpreter exit runs (Inductor's worker pools stop here)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    return code


def serve() -> int:
    # The protocol keeps its own descriptors: stdout and stderr become the child's log, and
    # anything the warm-up imports print must not land in the protocol.
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    import torch  # noqa: F401 (deferred: imported first, to count the threads importing torch starts)

    # ``import torch`` starts a BLAS worker thread, idle and fork-safe (its library re-initializes in
    # a child, as in DataLoader workers, which fork after importing torch). Anything the warm-up adds
    # on top could hold a lock at the fork and deadlock the child: then no warm server, cold queries.
    baseline = threads()
    warm_up()
    if threads() > baseline:
        replies.write(json.dumps({"ready": False, "reason": f"the warm-up started {threads() - baseline} "
                                  "threads"}) + "\n")
        return 1
    replies.write(json.dumps({"ready": True}) + "\n")
    protocol = (requests.fileno(), replies.fileno())
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, protocol)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve())
