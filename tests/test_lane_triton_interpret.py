"""The Triton-interpreter lane (oracles/lanes/triton_cpu.py) on a CPU-only machine.

Each check runs in a fresh subprocess: TRITON_INTERPRET must be set before
triton (or torch._inductor) is imported, which cannot be undone in the pytest
process.  The subprocess loads oracles/lanes/triton_cpu.py (with what it imports from
its parts, triton_interpreter_probe.py and libdevice_numpy.py) by executing the text
that standalone repro scripts inline (corpus.scripts.Helpers).
"""

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.corpus.scripts import TRITON_CPU, Helpers

ROOT = Path(__file__).resolve().parents[1]
LANE = ROOT / "oracles" / "lanes"
# The lane's module and its parts: scripts inline them, so each must be self-contained.
MODULES = [LANE / "triton_cpu.py", LANE / "triton_interpreter_probe.py", LANE / "libdevice_numpy.py"]
PARTS = {f"symfuzz.oracles.lanes.{m.stem}" for m in MODULES[1:]}
INLINED = Helpers().module(TRITON_CPU).text()
SKIP_RC = 3

PRELUDE = textwrap.dedent(
    f"""
    import json, sys
    _ns = {{"__name__": "symfuzz_triton_cpu"}}
    exec(compile({INLINED!r}, "<symfuzz triton_cpu, inlined>", "exec"), _ns)
    enable_triton_interpreter = _ns["enable_triton_interpreter"]
    triton_interpreter_unavailable_reason = _ns["triton_interpreter_unavailable_reason"]
    """
)

MAIN_PROGRAM = PRELUDE + textwrap.dedent(
    """
    reason = triton_interpreter_unavailable_reason()
    if reason is not None:
        print(reason)
        sys.exit(3)

    import torch  # a bare `import torch` does not import triton

    enable_triton_interpreter()
    enable_triton_interpreter()  # idempotent

    import os
    import torch.nn.functional as F
    from torch._inductor.utils import run_and_get_code

    assert os.environ["TRITON_INTERPRET"] == "1"
    assert torch._inductor.config.cpu_backend == "triton"

    def fn(x, y):
        b = torch.cat([x, y], dim=0)
        s = torch.softmax(b, dim=-1)
        g = F.gelu(b) + torch.tanh(b) + torch.exp(b * 0.5)
        h = torch.log1p(b.abs()) + torch.erf(b) + torch.sqrt(b.abs() + 1.0)
        p = torch.pow(b.abs() + 0.5, 1.7)
        r = torch.relu(x).sum(dim=-1, keepdim=True)
        if x.size(0) > 4:
            return s * g + h.sum(dim=0) + p, r * 2.0
        return s - g * 0.5 + h.sum() - p, r + 1.0

    cfn = torch.compile(fn, dynamic=True, backend="inductor")
    gen = torch.Generator().manual_seed(0)

    def run_all():
        checked = []
        for n in (2, 3, 5, 7, 8, 16):
            x = torch.randn(n, 6, generator=gen)
            y = torch.randn(n + 1, 6, generator=gen)
            got = cfn(x, y)
            want = fn(x, y)
            for g_, w_ in zip(got, want):
                torch.testing.assert_close(g_, w_, rtol=1e-4, atol=1e-4)
            checked.append(n)
        return checked

    checked, codes = run_and_get_code(run_all)
    print(json.dumps({"checked": checked, "codes": codes}))
    """
)


def _run(program, tmp_path, timeout=600):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # the module must set it itself
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp_path / "inductor_cache")
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton_cache")
    env["PYTHONWARNINGS"] = "ignore"
    return subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_dynamic_shapes_match_eager_through_triton_interpreter(tmp_path):
    proc = _run(MAIN_PROGRAM, tmp_path)
    if proc.returncode == SKIP_RC:
        pytest.skip(f"Triton interpreter lane unavailable: {proc.stdout.strip()}")
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    assert result["checked"] == [2, 3, 5, 7, 8, 16]
    codes = result["codes"]
    # One graph per side of the `x.size(0) > 4` branch.
    assert len(codes) >= 2, f"expected a recompile for the size branch, got {len(codes)} graph(s)"
    for code in codes:
        # Triton kernels, not the C++ backend.
        assert "@triton.jit" in code
        assert "cpp_fused" not in code and 'extern "C"' not in code
    joined = "\n".join(codes)
    # Symbolic sizes are passed to the kernels (dynamic=True), and the
    # libdevice stand-ins were actually exercised.
    assert re.search(r"'ks\d+': 'i(32|64)'", joined), "no symbolic size passed as a kernel argument"
    for fn_name in ("libdevice.tanh", "libdevice.erf", "libdevice.log1p", "libdevice.pow"):
        assert fn_name in joined, f"{fn_name} not emitted; the stand-in path was not tested"


def test_enable_after_plain_triton_import_raises_clear_error(tmp_path):
    program = PRELUDE + textwrap.dedent(
        """
        try:
            import triton  # noqa: F401
        except ImportError:
            sys.exit(3)
        reason = triton_interpreter_unavailable_reason()
        try:
            enable_triton_interpreter()
        except RuntimeError as e:
            print(json.dumps({"reason": reason, "error": str(e)}))
        else:
            print(json.dumps({"reason": reason, "error": None}))
        """
    )
    proc = _run(program, tmp_path, timeout=300)
    if proc.returncode == SKIP_RC:
        pytest.skip("triton not installed")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] is not None and "TRITON_INTERPRET=1" in result["error"]
    assert result["reason"] is not None and "TRITON_INTERPRET=1" in result["reason"]


ALLOWED_TOP_LEVEL_IMPORTS = {"torch", "triton", "numpy"}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_module_is_self_contained(module):
    """Only stdlib + torch/triton/numpy imports (and the lane's own parts), so the source can be inlined."""
    tree = ast.parse(module.read_text())
    stdlib = set(sys.stdlib_module_names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports are not allowed"
            assert node.module != "__future__", "__future__ imports break inlining mid-file"
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in stdlib or top in ALLOWED_TOP_LEVEL_IMPORTS or name in PARTS, f"disallowed import {name!r}"
