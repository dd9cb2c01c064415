"""Lanes: how a case is compiled (backend, device, codegen, mode, config).

A lane is data. ``env`` must be in the process environment before torch is
imported (workers and repro scripts set it first thing); ``config`` is
applied with ``torch._inductor.config.patch`` around each compile, so a
worker can also run a cheaper lane in-process to triage a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass, field
from shutil import which
from typing import Callable, Optional

from symfuzz.oracles.lanes.triton_cpu import enable_triton_interpreter
from symfuzz.oracles.lanes.triton_interpreter_probe import triton_interpreter_unavailable_reason

# Applied to every Inductor lane, on purpose:
# - emulate_precision_casts: Inductor keeps bf16/fp16 intermediates in fp32
#   unless asked to round them like eager does; that difference is by design,
#   not a bug, and would drown real findings.
# - fx_graph_cache/autograd_cache off: a cache hit can hide a codegen bug,
#   and a planted fault must not leak into later runs through the cache.
INDUCTOR_CONFIG = {
    "emulate_precision_casts": True,
    "fx_graph_cache": False,
    "autotune_local_cache": False,
}
INDUCTOR_ENV = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
# The settings above that only keep caches off (a finding's short repro sets force_disable_caches instead).
CACHE_SETTINGS = frozenset({"fx_graph_cache", "autotune_local_cache", *INDUCTOR_ENV})


@dataclass(frozen=True)
class Lane:
    name: str
    backend: str  # "eager" (Dynamo only), "aot_eager", "inductor"
    description: str
    device: str = "cpu"
    codegen: Optional[str] = None  # "cpp", "triton", "triton-interpret"
    mode: Optional[str] = None  # torch.compile(mode=...), e.g. "reduce-overhead"
    env: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    setup: Optional[str] = None  # "triton-interpreter": patch triton for CPU
    # Lanes that do not go through torch.compile name a runner here (see
    # oracles/lanes/runners.py), e.g. "export": torch.export, then run the module.
    runner: Optional[str] = None
    cheaper: tuple[str, ...] = ()  # lanes that triage a failure, cheapest first
    check: Optional[Callable[[], Optional[str]]] = None  # why unavailable, or None
    # Why a failure on this lane cannot be trusted on its own (or None): such
    # failures are kept apart as suspect unless a cheaper lane reproduced them.
    suspect: Optional[Callable[[dict, dict], Optional[str]]] = None

    def unavailable_reason(self) -> Optional[str]:
        if self.check is None:
            return None
        try:
            return self.check()
        except Exception as exc:  # noqa: BLE001 - availability probes must not raise
            return f"availability check failed: {exc}"

    def suspect_reason(self, verdict: dict, case: dict, triage: dict) -> Optional[str]:
        if self.suspect is None:
            return None
        symptom = verdict.get("symptom")
        if any(h.startswith(symptom + " ") for h in (triage or {}).get("lanes", {}).values() if isinstance(h, str)):
            return None  # another lane shows the same symptom: not an artefact of this one
        return self.suspect(verdict, case)

    def compile_kwargs(self, dynamic) -> dict:
        kwargs = {"backend": self.backend, "dynamic": dynamic}
        if self.mode:
            kwargs["mode"] = self.mode
        return kwargs

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "backend": self.backend,
            "device": self.device,
            "codegen": self.codegen,
            "mode": self.mode,
            "env": self.env,
            "config": self.config,
            "setup": self.setup,
            "runner": self.runner,
        }


def _needs_triton_interpreter() -> Optional[str]:
    return triton_interpreter_unavailable_reason()


def _needs_cuda() -> Optional[str]:
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    import torch  # deferred: listing lanes (the CLI, the campaign's parent) must not import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (this torch build: %s)" % torch.__version__
    return None


def _needs_cpp_toolchain() -> Optional[str]:
    cxx = os.environ.get("CXX", "g++")
    if which(cxx) is None and which("c++") is None:
        return f"no C++ compiler found ({cxx}); Inductor's C++ codegen needs one"
    return None


LOW_PRECISION = ("float16", "bfloat16")


def _interpreter_suspect(verdict: dict, case: dict) -> Optional[str]:
    """Triton's interpreter runs kernels with numpy: its own gaps and its bf16/fp16
    emulation are not Inductor bugs. DESIGN.md: confirm those on another lane or a GPU."""
    error = verdict.get("evidence", {}).get("error") or {}
    text = " ".join(str(error.get(k, "")) for k in ("type", "message", "traceback"))
    if "InterpreterError" in text or "triton/runtime/interpreter" in text or "enable_triton_interpreter" in text:
        return "raised inside Triton's CPU interpreter (or symfuzz's adaptation of it); confirm on a GPU"
    if verdict.get("symptom") in ("value-mismatch", "metadata-mismatch", "gradient-mismatch"):
        program = str(case.get("program", ""))
        dtypes = {a.get("dtype") for call in case.get("schedule", {}).get("calls", []) for a in call.get("args", [])}
        if any(d in program for d in LOW_PRECISION) or dtypes & set(LOW_PRECISION):
            return "low-precision values are emulated with numpy on the interpreter lane; confirm on another lane or a GPU"
    return None


LANES: dict[str, Lane] = {}


def register_lane(lane: Lane) -> Lane:
    if lane.name in LANES:
        raise ValueError(f"lane {lane.name!r} is registered twice")
    LANES[lane.name] = lane
    return lane


register_lane(Lane("eager", "eager", "Dynamo only: traces and guards, runs the FX graph eagerly"))
register_lane(Lane("aot_eager", "aot_eager", "Dynamo + AOTAutograd (functionalization, decompositions), no codegen", cheaper=("eager",)))
register_lane(
    Lane(
        "inductor-cpp",
        "inductor",
        "Inductor with C++/OpenMP codegen on CPU",
        codegen="cpp",
        env=INDUCTOR_ENV,
        config={**INDUCTOR_CONFIG, "cpu_backend": "cpp"},
        cheaper=("eager", "aot_eager"),
        check=_needs_cpp_toolchain,
    )
)
register_lane(
    Lane(
        "inductor-triton-interpret",
        "inductor",
        "Inductor's Triton codegen on CPU, run by Triton's interpreter",
        codegen="triton-interpret",
        env={**INDUCTOR_ENV, "TRITON_INTERPRET": "1"},
        config={**INDUCTOR_CONFIG, "cpu_backend": "triton"},
        setup="triton-interpreter",
        cheaper=("eager", "aot_eager", "inductor-cpp"),
        check=_needs_triton_interpreter,
        suspect=_interpreter_suspect,
    )
)
register_lane(
    Lane(
        "inductor-triton",
        "inductor",
        "Inductor's Triton codegen compiled for a CUDA GPU",
        device="cuda",
        codegen="triton",
        env=INDUCTOR_ENV,
        config=dict(INDUCTOR_CONFIG),
        cheaper=("eager", "aot_eager"),
        check=_needs_cuda,
    )
)

# Lanes that compile without torch.compile (oracles/lanes/runners.py). Export
# refusing what it cannot trace, or calls outside its exported guards, is
# not a finding: the runner marks such calls rejected (see
# oracles/lanes/export_runner.py).
register_lane(
    Lane(
        "export",
        "export",
        "torch.export.export (non-strict, Dim.AUTO for dims the schedule varies), then ExportedProgram.module()",
        runner="export",
        cheaper=("eager", "aot_eager"),
    )
)
register_lane(
    Lane(
        "aoti",
        "inductor",
        "torch.export, then AOTInductor (aoti_compile_and_package, C++ on CPU) run from the loaded package",
        codegen="cpp",
        env=INDUCTOR_ENV,
        config={**INDUCTOR_CONFIG, "cpu_backend": "cpp"},
        runner="aoti",
        cheaper=("eager", "aot_eager", "export"),
        check=_needs_cpp_toolchain,
    )
)
register_lane(
    Lane(
        "inductor-cudagraphs",
        "inductor",
        "Inductor's Triton codegen on a CUDA GPU with mode='reduce-overhead' (CUDA graphs)",
        device="cuda",
        codegen="triton",
        mode="reduce-overhead",
        env=INDUCTOR_ENV,
        config=dict(INDUCTOR_CONFIG),
        cheaper=("eager", "aot_eager", "inductor-triton"),
        check=_needs_cuda,
    )
)


def get_lane(name: str) -> Lane:
    if name not in LANES:
        known = ", ".join(LANES)
        raise KeyError(f"unknown lane {name!r}; known lanes: {known} (see `symfuzz lanes`)")
    return LANES[name]


def prepare_process(lane: Lane) -> None:
    """Make this process ready to run ``lane``; call before compiling anything."""
    for key, value in lane.env.items():
        os.environ.setdefault(key, value)
    if lane.setup == "triton-interpreter":
        enable_triton_interpreter()


def config_patch(lane: Lane):
    """A context manager applying the lane's Inductor config."""
    if not lane.config:
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config  # deferred: this module must not import torch (see _needs_cuda)

    known = {k: v for k, v in lane.config.items() if hasattr(inductor_config, k)}
    return inductor_config.patch(known)
