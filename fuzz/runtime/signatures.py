"""Signatures: the stable name of a failure, from what tells bugs apart and nothing that varies
with the seed, the sizes or the process.

Part of the runtime every standalone script carries (fuzz/script_runtime.py): it imports
only the standard library, torch and the runtime's other parts, which corpus.scripts pastes too.
"""

import hashlib
import re




# What differs between two reports of one bug, erased in this order (each
# pattern sees what the ones before left): Dynamo's source comments ("guard
# # the line it came from # file:line in fn (torch file:line in fn)": the
# line is the program's, rendered differently by a campaign and a repro);
# fake tensors' reprs ("FakeTensor(..., size=(s0, 4))": a value, like a number);
# addresses; absolute paths (temp
# folders, caches, sources; a file's line number goes with the numbers);
# long hashes (Inductor's cache keys); FX's numbered node names (add,
# add_1: the suffix only counts repeats); symbols of any kind (s0, u1, ks2, zf3);
# numbers, floats and negatives included, but not the bits of a dtype's
# name (float32, int64 tell bugs apart); lists and tuples of numbers and
# symbols (sizes, strides, values: their length is a rank or a size, and a
# dim is static or symbolic by the schedule's marks); quoted names (sources like
# L['x0'], kernel and backend names); runs of blanks.
_VOLATILE = [
    (re.compile(r"\s+#.*?(?:<[^>]*>|\S+\.py):\d+ in [\w<>]+(?: \([^)]*\))?"), " # <source>"),
    (re.compile(r"FakeTensor\([^()]*(?:\([^()]*\)[^()]*)*\)"), "0"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?<![\w)\]])(?:/[\w.+@~-]+){2,}/?|/[\w./-]+\.(py|cpp|so|h)\b"), "<path>"),
    (re.compile(r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{24,}\b"), "<hash>"),
    (re.compile(r"(?<=[A-Za-z])_\d+\b"), ""),
    (re.compile(r"\b(?:[suq]|ps|ks|zu?f)\d+\b"), "s?"),
    (re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"(?<!float)(?<!int)(?<!complex)(?<!\d)\d+"), "N"),
    (re.compile(r"\[[Ns?,.\s\[\]*+/-]*\]"), "[N...]"),
    (re.compile(r"(?<![\w\]])\((?=[^()]*,)[Ns?,.\s*+/-]*\)"), "(N...)"),
    (re.compile(r"'[^']*'"), "'?'"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message):
    """The line of an error that names the real problem, with numbers, paths, symbols erased.

    Compiler wrappers put a header first ("backend='inductor' raised:");
    the wrapped error on the following lines is what tells bugs apart.
    """
    lines = [l.strip() for l in str(message).splitlines() if l.strip()]
    lines = [l for l in lines if not l.endswith("raised:") and not l.startswith("Set TORCHDYNAMO_VERBOSE")]
    head = next((l for l in lines if "Error" in l or "Exception" in l), lines[0] if lines else "")
    for pattern, repl in _VOLATILE:
        head = pattern.sub(repl, head)
    return head.strip()[:200]


def signature(symptom, lane, key):
    """A short stable id: same symptom, lane and key give the same signature."""
    digest = hashlib.sha1(f"{symptom}|{lane}|{key}".encode()).hexdigest()[:10]
    return f"{symptom}-{digest}"


def gradient_of(path, gradient_ops):
    """For a path into the gradients ("out[2][i]..."), the ops that consume input ``i``
    (``gradient_ops``, from ``Case.gradient_ops``); None for any other path."""
    m = re.match(r"out\[2\]\[(\d+)\]", path or "")
    if m is None or int(m.group(1)) >= len(gradient_ops):
        return None
    return gradient_ops[int(m.group(1))]


def failure_key(failure, output_ops, gradient_ops=()):
    """The part of a failure that says which bug it is, for the signature.

    One function for the oracles and every repro script, so that a script
    prints the signature its finding was stored under. It names what the
    minifier keeps while shrinking and nothing it changes: for errors, the
    exception's type and its normalized message; for mismatches, the op that
    made the output that differs ("input-mutation" for a final input state;
    for a gradient, "grad:" and the ops that consume the input it is taken with
    respect to, ``gradient_ops``: ``Case.gradient_ops``) and how it differs
    (``compare``'s kind: never sizes or values).
    """
    if failure["symptom"] in ("crash", "accepts-invalid", "over-specialization"):
        error = failure.get("error") or {}
        return f"{error.get('type', '')}|{normalize_message(error.get('message', ''))}"
    path = failure.get("path", "out")
    m = re.match(r"out\[(\d+)\](?:\[(\d+)\])?", path)
    op = "?"
    if m and m.group(1) == "0" and m.group(2) is not None:
        i = int(m.group(2))
        op = output_ops[i] if i < len(output_ops) else "?"
    elif m and m.group(1) == "1":
        op = "input-mutation"
    elif m and m.group(1) == "2":
        consumers = gradient_of(path, gradient_ops)
        op = f"grad:{consumers}" if consumers else "grad"
    elif m and m.group(1) == "3":
        op = "module-state"
    kind = failure.get("kind")
    return f"{op}|{kind}" if kind else op
