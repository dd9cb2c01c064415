"""A kernel that killed the checking process: confirm it alone, and shrink its input.

When the child dies of a signal while a check runs, the input it was given is
known (``opcheck.runner`` writes each one down first), but not whether the
real kernel or the check's machinery (a compiler, a fake mode) crashed. So a
*probe* process loads the op the same way, calls only the real kernel on that
input, then on simpler variants of it (``Sweep.simpler``), one at a time,
writing down each before calling it. A probe that dies names the input that
crashed; the next probe starts from there. A probe that gets through every
candidate has reached a smallest crashing input. Each crash costs a process
start, so the shrinking has a time limit.

    python -m symfuzz.opcheck.crashes PROBE.json EVENTS.jsonl
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from symfuzz.opcheck.task import event_writer, kill_group

SHRINK_SECONDS = 60.0  # at most, per crashing op


def shrink_crash(task, op: str, last: dict, *, seconds: float = SHRINK_SECONDS) -> dict:
    """{"confirmed": bool | None, "input", "case", "repro", "shrunk", "probes"} for a crash on ``last``.

    ``confirmed`` is None when nothing could be probed (the input was the
    sample itself, or the probe could not load the op)."""
    out = {"confirmed": None, "input": last["input"], "case": last.get("case"), "repro": "",
           "shrunk": False, "probes": 0}
    if not last.get("variant") and not last.get("argument"):
        return out  # the user's own sample: nothing to rebuild it from but the sample
    deadline = time.monotonic() + seconds
    variant, confirm = last["variant"], True
    with tempfile.TemporaryDirectory(prefix="symfuzz-crash-") as tmp:
        while time.monotonic() < deadline:
            out["probes"] += 1
            tries, died = _probe(task, op, last, variant, confirm, tmp, deadline)
            if not tries:  # it could not load the op, or ran out of time before a try
                return out
            if not died:
                if confirm:  # the kernel alone survived the input the check crashed on
                    out["confirmed"] = False
                return out  # else: every simpler candidate survives; this is the smallest
            crashed = tries[-1]
            out.update(confirmed=True, input=crashed["input"], case=crashed["case"], repro=crashed["repro"],
                       axis=crashed.get("axis", ""))
            if not (confirm and len(tries) == 1):  # a simpler input crashed too
                out["shrunk"], variant = True, crashed["variant"]
            if variant is None:
                return out  # a derived sample as it is: nothing simpler to probe
            confirm = False
    return out


def kernel_alone_finishes(task, op, last: dict, seconds: float):
    """Does the real kernel alone, in a fresh process, return (or refuse the input) within
    ``seconds`` on the input a check hung on? True, False (it hangs there too), or None when
    nothing could be probed (the op could not be loaded, or the input not rebuilt)."""
    with tempfile.TemporaryDirectory(prefix="symfuzz-hang-") as tmp:
        start = time.monotonic()
        tries, died, finished = _probe(task, op, last, last.get("variant"), True, tmp, start + seconds, only=True,
                                       returned=True)
    if not tries or died:
        return None
    return finished


def _probe(task, op, last, variant, confirm, tmp, deadline, only=False, returned=False):
    """Run one probe process; returns (the inputs it tried, did it die of a signal), and with
    ``returned`` also whether it ended by itself before ``deadline``. ``only``: just the input
    given, none simpler."""
    n = len(os.listdir(tmp))
    probe_path, events_path = os.path.join(tmp, f"probe{n}.json"), os.path.join(tmp, f"events{n}.jsonl")
    with open(probe_path, "w") as f:
        json.dump({"task": task.__dict__, "op": op, "sample": last.get("sample", 0), "variant": variant,
                   "argument": last.get("argument", ""), "confirm": confirm, "only": only}, f)
    open(events_path, "w").close()
    child = subprocess.Popen([sys.executable, "-m", "symfuzz.opcheck.crashes", probe_path, events_path],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    finished = True
    try:
        code = child.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill_group(child)
        code, finished = 0, False  # out of time: whatever it tried last did not crash (yet)
    with open(events_path) as f:
        events = [json.loads(line) for line in f if line.strip()]
    tries = [e["try"] for e in events if "try" in e]
    died = code is not None and code < 0
    return (tries, died, finished and code == 0) if returned else (tries, died)


# --------------------------------------------------------------- the probe


def _probe_main(probe_path: str, events_path: str) -> int:
    # deferred: the parent imports this module for its constants without torch; only the probe child checks
    from symfuzz.opcheck.api import _normalize_samples, derived_templates, sample_templates
    from symfuzz.opcheck.checks.common import resolve_op, run_real
    from symfuzz.opcheck.repro import crash_repro
    from symfuzz.opcheck.task import Task, load_task, recorded_samples, schema_samples
    from symfuzz.opcheck.variants import Sweep, Variant, axis_of

    with open(probe_path) as f:
        probe = json.load(f)
    task = Task(**probe["task"])

    emit = event_writer(events_path)
    try:
        load_task(task)
        op = resolve_op(probe["op"])
        samples = _normalize_samples(recorded_samples(task).get(probe["op"]) or schema_samples(probe["op"]))
    except Exception:  # noqa: BLE001 - nothing to probe with; the parent keeps the unshrunk input
        return 3
    # The same templates and contracts the check had, so the sweep builds the same inputs.
    templates, _, _ = sample_templates(op, samples, task.fixed.get(probe["op"]))
    if probe.get("argument"):  # a sample derived with another argument value (opcheck.arguments)
        templates = derived_templates(op, templates, task.fixed.get(probe["op"]))
    template = next((t for t in templates if t.index == probe["sample"] and t.axis == probe.get("argument", "")),
                    None)
    if template is None:
        return 3
    sweep = Sweep(template, seed=task.seed)
    if probe["variant"] is None:  # a derived sample as it is (its argument value crashed it): confirm only
        candidates = [(None, template.original())] if probe["confirm"] else []
    else:
        start = Variant.from_json(probe["variant"])
        candidates = [(v, sweep.case(v)) for v in ([start] if probe["confirm"] else []) + list(sweep.simpler(start))]
    if probe.get("only"):
        candidates = candidates[:1]
    for variant, case in candidates:
        emit({"try": {"input": case.describe(), "case": case.to_json(), "axis": axis_of(case),
                      "variant": variant.to_json() if variant else None, "repro": crash_repro(op, case)}})
        run_real(op, case)  # returns, or refuses the input, unless the kernel crashes the process
    return 0


if __name__ == "__main__":
    sys.exit(_probe_main(sys.argv[1], sys.argv[2]))
