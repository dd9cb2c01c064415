"""Run repro scripts in fresh processes: confirmation during a campaign, and ``symfuzz replay``."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .finding import Finding
from .repro import EXIT_BROKEN, EXIT_FIXED, EXIT_REPRODUCED, render_repro

# symptom -> what a reproduction looks like for it
DEATH_SYMPTOMS = ("process-death",)


@dataclass
class ReplayOutcome:
    status: str  # "reproduced", "fixed", "broken", "different" (fails, other signature)
    returncode: Optional[int]
    signature: Optional[str]
    seconds: float
    output_tail: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


def run_script(script: Path, env_extra: dict, timeout: float, memory_limit_mb: Optional[int] = None):
    """Run ``python script`` in a fresh process; (returncode or None on timeout, output, seconds)."""
    import time

    env = dict(os.environ)
    env.update(env_extra)
    env.setdefault("PYTHONHASHSEED", "0")

    def limit_memory():
        if memory_limit_mb:
            size = memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(script)],
            env=env,
            cwd=script.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            preexec_fn=limit_memory,
            text=True,
            errors="replace",
        )
        return proc.returncode, proc.stdout, time.monotonic() - start
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return None, out, time.monotonic() - start


def replay_finding(finding: Finding, timeout: float = 600.0, env_extra: Optional[dict] = None,
                   memory_limit_mb: Optional[int] = None) -> ReplayOutcome:
    """Regenerate the repro from the finding's JSON alone and run it fresh."""
    symptom = finding.verdict["symptom"]
    with tempfile.TemporaryDirectory(prefix="symfuzz-replay-") as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(render_repro(finding))
        extra = {"TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "inductor-cache")}
        extra.update(env_extra or {})
        if symptom == "process-death" and finding.verdict.get("evidence", {}).get("cause") == "out-of-memory":
            memory_limit_mb = memory_limit_mb or finding.verdict["evidence"].get("limit_mb")
        code, out, seconds = run_script(script, extra, timeout, memory_limit_mb)
    return classify(finding, code, out, seconds)


def classify(finding: Finding, code, out: str, seconds: float) -> ReplayOutcome:
    symptom = finding.verdict["symptom"]
    tail = out[-6000:]
    result = _result_line(out)
    sig = result.get("signature") if result else None
    if symptom == "timeout":
        status = "reproduced" if code is None else ("fixed" if code == EXIT_FIXED else "different")
    elif symptom == "process-death":
        status = "reproduced" if (code is not None and code not in (EXIT_FIXED, EXIT_REPRODUCED, EXIT_BROKEN)) else (
            "fixed" if code == EXIT_FIXED else "different")
    elif code == EXIT_REPRODUCED:
        status = "reproduced" if sig == finding.signature else "different"
    elif code == EXIT_FIXED:
        status = "fixed"
    else:
        status = "broken"
    return ReplayOutcome(status, code, sig, round(seconds, 2), tail)


def _result_line(out: str) -> Optional[dict]:
    for line in reversed(out.splitlines()):
        if line.startswith("SYMFUZZ-RESULT "):
            try:
                return json.loads(line[len("SYMFUZZ-RESULT "):])
            except json.JSONDecodeError:
                return None
    return None
