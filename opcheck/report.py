"""What a check found: plain data, JSON-able, printable without torch."""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass, field

_MARKS = {"passed": "ok", "failed": "FAIL", "skipped": "skip"}


@dataclass
class Failure:
    check: str
    kind: str  # short label: "wrong-shape", "undeclared-mutation", ...
    message: str  # what differed, in one or a few lines
    input: str  # the smallest failing input, described ("x0: float32[1, 7] transposed")
    repro: str  # a torch-only snippet that shows the failure
    shrunk: bool = False  # was the input shrunk from a larger failing one?
    case: dict | None = None  # the failing input as data (opcheck.inputs.Case.to_json)
    axis: str = ""  # what about the input revealed it: "dtype int32", "value zeros", "layout transposed", "sample", ...


@dataclass
class CheckResult:
    check: str
    status: str  # "passed" | "failed" | "skipped"
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # reported, not failing (e.g. harmless guards)
    reason: str = ""  # why skipped
    inputs_tried: int = 0  # inputs the real kernel accepted and the check judged
    inputs_rejected: int = 0  # generated inputs the real kernel itself refused
    inputs_skipped: int = 0  # generated inputs not judged: they brought no new information (variants.Novelty)
    seconds: float = 0.0
    internal: str = ""  # symfuzz's own error cut this check short (internal_error): not the op's

    @property
    def passed(self) -> bool:
        return self.status != "failed"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> CheckResult:
        return cls(**{**data, "failures": [Failure(**f) for f in data.get("failures", [])]})


@dataclass
class Report:
    op: str  # "ns::name" or "ns::name.overload"
    results: dict[str, CheckResult] = field(default_factory=dict)
    samples: int = 0
    seconds: float = 0.0
    error: str = ""  # the op could not be checked at all (no sample the real kernel accepts, ...)
    contracts: list[str] = field(default_factory=list)  # arguments held fixed or following others, and why
    info: list[str] = field(default_factory=list)  # facts about the op, never failures ("not differentiable: ...")
    internal: str = ""  # symfuzz's own error, which stopped the op's checks (internal_error): not the op's

    @property
    def ok(self) -> bool:
        return not self.error and all(r.passed for r in self.results.values())

    def internal_errors(self) -> list[str]:
        """symfuzz's own errors while checking this op: the op's, then each check's."""
        return ([self.internal] if self.internal else []) + [
            f"{name}: {r.internal}" for name, r in self.results.items() if r.internal]

    @property
    def failures(self) -> list[Failure]:
        return [f for r in self.results.values() for f in r.failures]

    def failed_checks(self) -> list[str]:
        return [name for name, r in self.results.items() if r.status == "failed"]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Report:
        results = {name: CheckResult.from_json(r) for name, r in data.get("results", {}).items()}
        return cls(op=data["op"], results=results, samples=data.get("samples", 0),
                   seconds=data.get("seconds", 0.0), error=data.get("error", ""),
                   contracts=list(data.get("contracts", [])), info=list(data.get("info", [])),
                   internal=data.get("internal", ""))

    def marks(self) -> str:
        """"schema ok, faketensor FAIL, ...", or why the op was not checked."""
        if self.error:
            return f"not checked: {self.error}"
        if self.internal and not self.results:
            return f"not checked: symfuzz's own error: {self.internal}"
        return ", ".join(f"{name} {_MARKS[r.status]}" for name, r in self.results.items())

    def summary_line(self) -> str:
        return f"{self.op}: {self.marks()}"

    def format(self, *, repro: bool = True) -> str:
        """A readable multi-line report; failures first with input and repro."""
        lines = [self.summary_line() + f"  ({self.seconds:.1f}s, {self.samples} sample(s))"]
        lines += [f"  contract {line}" for line in self.contracts]
        lines += [f"  info: {line}" for line in self.info]
        for r in self.results.values():
            for f in r.failures:
                lines.append(f"  FAIL {f.check} [{f.kind}]" + (f" revealed by {f.axis}" if f.axis else ""))
                lines.append(f"    input: {f.input}" + ("  (shrunk)" if f.shrunk else ""))
                for line in f.message.splitlines():
                    lines.append(f"    {line}")
                if repro and f.repro:
                    lines.append("    repro:")
                    lines.extend("      " + line for line in f.repro.splitlines())
            for note in r.notes:
                lines.append(f"  note {r.check}: {note}")
            if r.status == "skipped" and r.reason:
                lines.append(f"  skip {r.check}: {r.reason}")
        return "\n".join(lines)


def internal_error(exc: BaseException) -> str:
    """symfuzz's own error, said as such: what was raised and where (the innermost frames), to report."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " <- ".join(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames))
    text = str(exc).strip().splitlines()
    return (f"{type(exc).__name__}: {text[0] if text else ''} (at {where or 'an unknown place'}); "
            "a bug of symfuzz, not of the op: please report it with this line")


def _short(path: str) -> str:
    """A traceback's file from its package down (".../site-packages/torch/_ops.py" -> "torch/_ops.py")."""
    parts = path.replace("\\", "/").split("/")
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1:])
    return "/".join(parts[-3:])

