"""Where a process died or hung, read from the Python stack that ``faulthandler`` printed.

A segfault, an abort, a hang or a runaway allocation leaves no exception to sign. What is
stable about it is where it happened: the phase (compiling, the compiled forward, the
compiled backward, eager code) and the innermost frames that are not the harness's. Workers
and every script symfuzz writes enable ``faulthandler`` (``ENABLE_LINES``), so a fatal
signal prints the dying thread's stack; before a hung or runaway process is killed, it is
sent ``DUMP_SIGNAL``, which prints every thread's stack (``ask_for_stack``).

``place_of(text)`` reads the last such dump in a process's output and returns a
``DeathPlace``: its ``key`` goes into the signature, so two deaths in different places
get different signatures, and one death keeps its signature whatever the program's
sizes, seeds, temporary folders or process. Frames are named by file (from the package
down: ``torch/_inductor/output_code.py``) and function, never by line or address. A frame
in code Inductor generated is named by the kernel it calls (``cpp_fused_cos_mul``, the
counter dropped), read from the generated file, never by the file's hashed name.

Dropped: the standard library, symfuzz's own files, the script or program being run
(a campaign and a repro render it differently), and Python's frozen modules.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# The signal that makes a process print every thread's stack (registered by ENABLE_LINES).
DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
# How long a process gets to print its stack before it is killed.
DUMP_GRACE_SECONDS = 1.0
# The lines a script or worker runs first: a fatal signal prints the stack, and so does DUMP_SIGNAL.
ENABLE_LINES = (
    "import faulthandler",
    "import signal",
    "",
    "try:  # a death prints where it happened; so does SIGUSR1, sent before a hung run is killed",
    "    faulthandler.enable()",
    "    faulthandler.register(signal.SIGUSR1, all_threads=True)",
    "except (AttributeError, OSError, ValueError):  # no SIGUSR1 (Windows), or no file behind stderr",
    "    pass",
)
# How many frames, innermost first, name the place.
FRAMES = 3


def enable() -> None:
    """In this process: what ``ENABLE_LINES`` does in a script."""
    try:
        faulthandler.enable()
        if DUMP_SIGNAL is not None:
            faulthandler.register(DUMP_SIGNAL, all_threads=True)
    except (OSError, ValueError):  # no file descriptor behind stderr: nothing to print to
        pass


def ask_for_stack(process) -> None:
    """Send ``process`` (a ``subprocess.Popen``, or a pid) the dump signal and give it
    ``DUMP_GRACE_SECONDS`` to print its stack; a Popen that ends sooner is not waited for."""
    if DUMP_SIGNAL is None:
        return
    pid = process if isinstance(process, int) else process.pid
    try:
        os.kill(pid, DUMP_SIGNAL)
    except (ProcessLookupError, PermissionError):
        return
    if isinstance(process, int):
        time.sleep(DUMP_GRACE_SECONDS)
        return
    try:
        process.wait(timeout=DUMP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass


# ---------------------------------------------------------------- reading a dump

_HEADER = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+(?: \[[^\]]*\])? \(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)\s*$')


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str


@dataclass(frozen=True)
class Thread:
    current: bool  # the thread that got the signal (the faulting one, for a fatal signal)
    frames: tuple  # Frame, innermost first


def last_dump(text: str) -> list[Thread]:
    """The threads of the last dump in ``text`` (a log may hold several); [] if none."""
    lines = str(text).splitlines()
    starts = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if not starts:
        return []
    # The dump's threads are the headers before the last one with only frames and blank lines between.
    group = [starts[-1]]
    for i in reversed(starts[:-1]):
        between = lines[i + 1:group[0]]
        if all(not line.strip() or _FRAME.match(line) or line.strip() in ("...", "<no Python frame>")
               for line in between):
            group.insert(0, i)
        else:
            break
    threads = []
    for i in group:
        frames = []
        for line in lines[i + 1:]:
            m = _FRAME.match(line)
            if not m:
                break
            frames.append(Frame(m.group(1), int(m.group(2)), m.group(3)))
        threads.append(Thread(lines[i].startswith("Current"), tuple(frames)))
    return threads


def chosen_thread(threads: list[Thread], hang: bool) -> Optional[Thread]:
    """The thread that names the place: for a fatal signal, the one it hit; for a hang
    (a dump on request, delivered to any thread), the main thread, whose outermost
    frame is a module's top level."""
    if hang:
        main = [t for t in threads if t.frames and t.frames[-1].function == "<module>"]
        if main:
            return main[0]
    current = [t for t in threads if t.current]
    return current[0] if current else (threads[0] if threads else None)


# ---------------------------------------------------------------- naming frames

_PACKAGES = re.compile(r".*[/\\](?:site|dist)-packages[/\\]")
_STDLIB = re.compile(r"[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]")
_GENERATED = re.compile(r"[/\\][a-z0-9]{30,}\.py$")  # Inductor's code cache: <dir>/<2 chars>/<hash>.py
_COUNTER = re.compile(r"_\d+(?=\.|$)")
_CALLEE = re.compile(r"^\s*(?:[\w\s,()]+=\s*)?([A-Za-z_][\w.]*)\s*\(")


def _harness_dirs() -> tuple[str, ...]:
    """symfuzz's own folders: an installed package, or a checkout's top-level subpackages."""
    here = Path(__file__).resolve().parent
    root = here.parent
    if root.name == "symfuzz":
        return (str(root),)
    return tuple(str(root / name) for name in ("symfuzz", "fuzz", "oracles", "corpus", "minifier", "opcheck"))


_HARNESS = _harness_dirs()
HARNESS_DIRS = _HARNESS  # public: other layers tell symfuzz's own frames from the user's with it


def _generated_callee(path: str, line: int) -> Optional[str]:
    """The name a generated module's line calls (Inductor's ``call`` calls its kernels)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    m = _CALLEE.match(text)
                    return m.group(1) if m else None
    except OSError:
        return None
    return None


def frame_name(frame: Frame, script: Optional[str]) -> Optional[str]:
    """A frame's stable name, or None for a frame that does not name the place."""
    path = frame.path.split(":codegen(", 1)[0]  # AOTAutograd's generated wrappers: "file.py:codegen(name)"
    if path.startswith("<eval_with_key>"):
        return f"<fx graph>:{frame.function}"
    if path.startswith("<") or path == script:
        return None  # frozen modules, exec'd programs, the script itself
    if _GENERATED.search(path):
        if frame.function == "call":  # the wrapper: name the kernel it was calling
            callee = _generated_callee(frame.path, frame.line)
            return f"<kernel {_COUNTER.sub('', callee)}>" if callee else "<generated>:call"
        return f"<kernel {_COUNTER.sub('', frame.function)}>"
    if any(path == d or path.startswith(d + os.sep) for d in _HARNESS) or f"{os.sep}symfuzz{os.sep}" in path:
        return None
    packaged = _PACKAGES.sub("", path)
    if packaged == path and _STDLIB.search(path):
        return None
    return f"{packaged if packaged != path else _from_package_root(path)}:{frame.function}"


def _from_package_root(path: str) -> str:
    """A file outside site-packages, named from its package's top folder (``quantlib/backends/cpu.py``
    for a checkout's package; just the file's name where it is in no package)."""
    parts = path.replace("\\", "/").split("/")
    start = len(parts) - 1
    while start > 1 and os.path.isfile("/".join(parts[:start]) + "/__init__.py"):
        start -= 1
    return "/".join(parts[start:])


# ---------------------------------------------------------------- the place

# Files whose frames mean the compiler was at work (Dynamo tracing, a backend compiling,
# AOTAutograd or Inductor building a graph), whatever ran below them.
_COMPILING = ("torch/_dynamo/convert_frame.py", "torch/_dynamo/output_graph.py", "torch/_inductor/compile_fx.py",
              "torch/_inductor/graph.py", "torch/_inductor/scheduler.py", "torch/_inductor/codegen/",
              "torch/export/_trace.py")


@dataclass(frozen=True)
class DeathPlace:
    phase: str  # "compiling", "compiled backward", "backward", "compiled forward", "eager", "unknown"
    frames: tuple  # stable frame names, innermost first (at most FRAMES)

    @property
    def key(self) -> str:
        return f"{self.phase}|{' < '.join(self.frames)}"

    @classmethod
    def from_key(cls, key: str) -> "DeathPlace":
        phase, _, frames = key.partition("|")
        return cls(phase, tuple(frames.split(" < ")) if frames else ())

    @property
    def kernel_ops(self) -> Optional[frozenset]:
        """The ops in the name of the generated kernel it died in (None: not in a kernel)."""
        for name in self.frames:
            m = re.match(r"<kernel (\w+?)_fused_(\w+)(?:\.\w+)?>", name)
            if m:
                return frozenset(m.group(2).split("_"))
        return None

    def describe(self) -> str:
        """E.g. "in the compiled forward, at <kernel cpp_fused_cos>"."""
        where = f", at {self.frames[0]}" if self.frames else ""
        return _PHASE_WORDS.get(self.phase, self.phase) + where


UNKNOWN = DeathPlace("unknown", ())
_PHASE_WORDS = {"compiling": "while compiling", "compiled forward": "in the compiled forward",
                "compiled backward": "in the compiled backward", "backward": "in a backward pass",
                "eager": "in eager code", "unknown": "at a place its output does not say"}


def phase_of(frames: tuple) -> str:
    names = [_PACKAGES.sub("", f.path).replace("\\", "/") for f in frames]
    if any(n.startswith(c) for n in names for c in _COMPILING):
        return "compiling"
    if any(n.startswith("torch/autograd/") for n in names):
        compiled = any(n.startswith(("torch/_functorch/", "torch/_inductor/")) for n in names)
        return "compiled backward" if compiled else "backward"
    if any(f.path.startswith("<eval_with_key>") or _GENERATED.search(f.path) for f in frames):
        return "compiled forward"
    # Dynamo's wrapper around a compiled function; the same wrapper also disables Dynamo
    # around eager code (torch.library's kernels, torch._disable_dynamo: called from torch/_compile.py).
    for i, (name, frame) in enumerate(zip(names, frames)):
        if name.startswith("torch/_dynamo/eval_frame.py") and frame.function == "_fn":
            if not (i + 1 < len(names) and names[i + 1].startswith("torch/_compile.py")):
                return "compiled forward"
    return "eager"


def place_of(text: str, hang: bool = False) -> DeathPlace:
    """Where the process whose output is ``text`` died (``hang``: where it was when asked)."""
    thread = chosen_thread(last_dump(text), hang)
    if thread is None or not thread.frames:
        return UNKNOWN
    script = next((f.path for f in reversed(thread.frames) if f.function == "<module>"), None)
    names = [n for n in (frame_name(f, script) for f in thread.frames) if n is not None]
    return DeathPlace(phase_of(thread.frames), tuple(names[:FRAMES]))


def death_key(cause: str, place: DeathPlace) -> str:
    """The failure key of a death (``cause``: the signal's name or "out-of-memory") or, with
    cause "timeout", of a hang: what ``script_runtime.signature`` hashes with the lane."""
    return f"{cause}|{place.key}"


def same_place(expected: DeathPlace, found: DeathPlace) -> bool:
    """Is ``found`` where ``expected`` died, for the minifier? The same phase and frames; in a
    generated kernel, one whose ops are among the expected kernel's (dropping a statement
    that was fused into it renames the kernel, ``cpp_fused_cos_mul`` to ``cpp_fused_cos``)."""
    if expected == found:
        return True
    ops_a, ops_b = expected.kernel_ops, found.kernel_ops
    if expected.phase != found.phase or ops_a is None or ops_b is None or not ops_b <= ops_a:
        return False
    strip = lambda p: tuple("<kernel>" if n.startswith("<kernel ") else n for n in p.frames)  # noqa: E731
    kind = lambda p: next(n.split("_fused_")[0] for n in p.frames if n.startswith("<kernel "))  # noqa: E731
    return strip(expected) == strip(found) and kind(expected) == kind(found)


# ---------------------------------------------------------------- signatures

def death_signature(symptom: str, lane: str, cause: str, place: DeathPlace) -> str:
    """The signature of a death ("process-death") or hang ("timeout", cause "timeout")."""
    # deferred: the runtime imports torch, which the parts of this module that the pytest
    # plugin's and the campaign's own processes use (reading a stack) do not need
    from symfuzz.fuzz.script_runtime import signature

    return signature(symptom, lane, death_key(cause, place))


def failure_id(symptom: str, cause: str, place: Optional[DeathPlace]) -> str:
    """The minifier's name for a death or hang: "process-death:SIGSEGV@<place key>", "timeout@..."
    (without "@..." where the place is not known: a finding stored by an older symfuzz)."""
    where = f"@{place.key}" if place is not None else ""
    return ("timeout" if symptom == "timeout" else f"process-death:{cause}") + where


def place_from_evidence(evidence) -> Optional[DeathPlace]:
    """The place a Died or Hung evidence records; None for one signed by an older symfuzz."""
    phase = getattr(evidence, "phase", None)
    if phase is None:
        return None
    return DeathPlace(phase, tuple(getattr(evidence, "frames", None) or ()))


def cause_of(symptom: str, evidence) -> str:
    """The cause in a death's or hang's key: the signal's name, "out-of-memory", or "timeout"."""
    return "timeout" if symptom == "timeout" else str(getattr(evidence, "cause", "") or "")
