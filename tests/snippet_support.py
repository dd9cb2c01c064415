"""Run repro snippets (standalone scripts, with the helpers file opcheck writes beside them) in one
fresh process, each as a script of its own."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from symfuzz.opcheck.snippet_files import SHARED, shared_source

ROOT = Path(__file__).resolve().parent.parent

_RUNNER = textwrap.dedent("""
    import json, sys
    results = []
    for path in json.load(open(sys.argv[1])):
        try:
            exec(compile(open(path).read(), path, "exec"), {"__name__": "__main__", "__file__": path})
            results.append([path, "passed", ""])
        except SystemExit as exc:
            results.append([path, "exit", str(exc.code)])
        except BaseException as exc:
            results.append([path, "raised", type(exc).__name__ + ": " + str(exc)[:300]])
    json.dump(results, open(sys.argv[2], "w"))
""")


def run_snippets(tmp_path, snippets: dict) -> dict:
    """{name: (status, why)} for {name: script text}. status: "passed"; "raised", with
    why "ExceptionType: message"; or "exit", with why the exit code."""
    paths = []
    (tmp_path / f"{SHARED}.py").write_text(shared_source())  # the helpers opcheck writes beside its snippets
    for name, text in snippets.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        paths.append(str(path))
    (tmp_path / "paths.json").write_text(json.dumps(paths))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(tmp_path / "paths.json"), str(tmp_path / "out.json")],
                          env=env, timeout=600, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return {Path(p).stem: (status, why) for p, status, why in json.loads((tmp_path / "out.json").read_text())}
