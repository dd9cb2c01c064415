"""Judging a model case's run (``model_runtime.run_model_schedule``): values and gradients against
eager, with the fp64 reference where they differ; a dim marked dynamic that torch specialized;
recompiles that torch's own rules do not explain (``GuardModel``: the 0/1 specialization, duck
sizing, automatic dynamic), each failed guard with where it came from (``guard_origin``); and
dynamism lost after a graph break. A guard of the model's own code (a branch on a size in
transformers) is the model's business: a note, never a failure.

Pasted into a model finding's repro.py beside the runtime (``corpus.scripts``), so that the
script judges its run as the campaign did and prints the signature its finding was stored
under. It imports only the standard library, torch and the model runtime.
"""

import re

from symfuzz.fuzz.model_case import ARCHS, LENGTH_DIMS, MAIN_INPUT
from symfuzz.fuzz.model_runtime import Reference
from symfuzz.fuzz.runtime.comparing import compare
from symfuzz.fuzz.runtime.signatures import normalize_message, signature

# Where a guard came from, read from Dynamo's guard-failure text (``guard_origin``).
MODEL = "the model's code"


def guard_origin(text):
    """Where a guard came from, from the text Dynamo or the shape environment records for it:
    its framework location in parentheses, or its own words for torch's 0/1 and duck-sizing
    rules. A guard that a Python-level use of a size in the traced code added (a branch,
    ``int()``, a range) is the model's own code: ``MODEL``."""
    if "0/1 specialization" in text:
        return "torch: 0/1 specialization"
    if "duck sizing" in text:
        return "torch: duck sizing"
    if "size mismatch at index" in text or "stride mismatch" in text:
        return "torch: a static size"
    frames = [path.removeprefix("torch/") for path, _ in re.findall(r"\(((?:torch/)?_?[\w/]+\.py):\d+ in (\w+)\)", text)]
    users = re.findall(r"#\s*([\w./-]+\.py):\d+ in \w+ \(", text)
    if any(f.startswith("_dynamo/") for f in frames) and \
            any(u.startswith("transformers/") or "/transformers/" in u for u in users):
        # One guard may join bounds from several places (a range: one bound from a meta function,
        # the other from a branch in the model): where the model's code set one, the guard is its.
        return MODEL
    for path in frames:
        if path.startswith("_dynamo/"):
            # A Python-level use of a size (a branch, int(), range()) in code Dynamo traced: the model's
            # own when that code is transformers', else torch's own Python (an nn.Module's forward...).
            users = re.findall(r"#\s*([\w./-]+\.py):\d+ in \w+ \(", text)
            if not users or any(u.startswith("transformers/") or "/transformers/" in u for u in users):
                return MODEL
            return f"torch: Python code Dynamo traced ({users[-1]})"
        if path.startswith(("_decomp", "_refs", "_prims", "_meta_registrations", "_subclasses", "nn/")):
            return f"torch: a decomposition or meta function ({path})"
        if path.startswith("_inductor"):
            return f"torch: Inductor ({path})"
        if path.startswith(("fx/", "utils/")):
            return f"torch: the shape environment ({path})"
    return "torch"


def guard_text(text):
    """A guard failure's guard alone, without its compile id and location comments."""
    text = re.sub(r"^\d+/\d+: ", "", str(text))
    return text.split("  #")[0].split(" # ")[0].strip()[:300]


def is_torch_origin(origin):
    """Does a guard of this origin say torch got something wrong? Its documented rules (0/1
    specialization, duck sizing) and the model's own code do not."""
    return origin.startswith("torch") and origin not in ("torch: 0/1 specialization", "torch: duck sizing")


class GuardModel:
    """What torch's own rules predict a compiled model does at each call: which calls reuse a
    graph it compiled and which compile a new one.

    Each graph is kept as what its guards on sizes check: a static dim's size, a dynamic dim
    that is not 0 or 1 (the 0/1 specialization: a size of 0 or 1 compiles static whatever
    ``dynamic=`` says), and the equalities duck sizing found among its dynamic dims. A dim is
    dynamic under ``dynamic=True`` or a mark; under automatic dynamic (``dynamic=None``) once a
    recompile saw it differ from the size it was first compiled at (Dynamo's frame state).
    Graphs are kept per set of inputs: another set of keyword arguments, or a cache that gained
    its tensors, is another entry of the frame."""

    def __init__(self, dynamic):
        self.all_dynamic = dynamic is True
        self.marked = set()  # (input, dim)s the tensors of the call being compiled mark dynamic
        self.first = {}  # (input, dim) -> the size it was first compiled at (automatic dynamic)
        self.dynamic = set()  # (input, dim)s automatic dynamic made dynamic
        self.graphs = {}  # the inputs' names -> [(static sizes, dynamic dims, equal groups)]

    def _is_dynamic(self, at):
        return self.all_dynamic or at in self.marked or at in self.dynamic

    @staticmethod
    def _dims(sizes):
        return {(name, d): v for name, shape in sizes.items() for d, v in enumerate(shape)}

    def reuses(self, sizes, units=()):
        """Does some compiled graph's guards accept a call at ``sizes``, whose inner sizes of
        0 and 1 are ``units`` (``UnitSizes``)?"""
        return bool(self.accepting(sizes, units))

    def accepting(self, sizes, units=()):
        """The tags (``compile``'s) of the graphs whose guards accept a call at ``sizes``."""
        dims = self._dims(sizes)
        found = []
        for static, dynamic, groups, tag in self.graphs.get((tuple(sorted(sizes)), tuple(units)), []):
            if any(dims[at] != v for at, v in static.items()) or any(dims[at] < 2 for at in dynamic):
                continue
            if all(len({dims[at] for at in group}) == 1 for group in groups):
                found.append(tag)
        return found

    def was_static(self, name, dim, size):
        """Did a graph compiled so far hold dim ``dim`` of input ``name`` static at ``size``,
        as torch's rules say it should?"""
        return any(static.get((name, dim)) == size for graphs in self.graphs.values() for static, _, _, _ in graphs)

    def compile(self, sizes, units=(), marked=(), tag=None):
        """A graph compiled at ``sizes`` (inner sizes of 0 and 1: ``units``) from tensors that mark
        ``marked`` dynamic (a mark is the tensor's, not the frame's: a later call's tensors carry none):
        record what its guards check, and ``tag`` (what ``accepting`` gives back for it)."""
        self.marked = set(marked)
        dims = self._dims(sizes)
        for at, v in dims.items():
            if at in self.first and self.first[at] != v:
                self.dynamic.add(at)
            self.first.setdefault(at, v)
        dynamic = {at for at, v in dims.items() if self._is_dynamic(at) and v >= 2}
        static = {at: v for at, v in dims.items() if at not in dynamic}
        groups = {}
        for at in dynamic:
            groups.setdefault(dims[at], []).append(at)
        kept = [g for g in groups.values() if len(g) > 1]
        self.graphs.setdefault((tuple(sorted(sizes)), tuple(units)), []).append((static, dynamic, kept, tag))


def _size_guard(text):
    return bool(re.search(r"size\(\)|size mismatch|stride", text))


def _marked(case, entry):
    """The (input, dim)s a forward's tensors mark dynamic (``mark_inputs``: a call's first forward)."""
    kind = ARCHS[case["arch"]][2]
    names = (MAIN_INPUT[kind], "attention_mask", "position_ids")
    marked = set()
    if entry["step"] == 0:
        call = case["calls"][entry["call"]]
        for what, mark in (call.get("marks") or {}).items():
            if mark.get("mark") in ("dynamic", "maybe_dynamic"):
                if what == "batch":
                    marked.update((name, 0) for name in names + ("decoder_input_ids",))
                else:
                    marked.update((name, d) for name in names for d in LENGTH_DIMS[kind])
    return marked


def judge_recompiles(case, entries):
    """Recompiles torch introduced: ([failure], [note]), notes for those the model asked for.

    Where torch's own rules say a graph compiled before accepts a compiled forward
    (``GuardModel``) and it compiled anyway, each guard that failed is judged
    (``_failed_guard``; a graph with a failed guard of the model's code is the model's,
    ``_judge_failure``): one not on sizes (the training flag, a cache object's state), one of
    torch's 0/1 or duck-sizing rules (of an input's size or of a size derived from it), or a
    static size that a graph held static by those rules explains nothing wrong; one of the
    model's own code is a note; any other that torch added (a decomposition's, Inductor's, a
    size compiled static under ``dynamic=True``) makes the call an excess recompile, or lost
    dynamism where the frame is a resume function (the code after a graph break)."""
    failures, notes = [], []
    model = GuardModel(case.get("dynamic"))
    logs, compiled_at = [], []
    for entry in entries:
        c = entry["compiled"]
        if "error" in c or "sizes" not in c:
            continue
        logs.extend(c.get("guards_added") or [])
        sizes = {**c["sizes"], **({"(training)": []} if entry["kind"] == "train" else {})}
        if c.get("graphs", 0) > 0:
            texts = [(frame, t) for frame, ts in sorted((c.get("reasons") or {}).items()) for t in ts]
            units = entry["eager"].get("unit_sizes") or ()
            accepting = model.accepting(sizes, units)
            branch = _other_branch(entry, accepting)
            if accepting and texts and branch:
                notes.append(_recompile_failure(case, entry, texts[0][0], branch, MODEL))
            elif accepting and texts:
                judged = [(frame, *_judge_failure(case, model, t, sizes, compiled_at, logs)) for frame, t in texts]
                torch_made = [j for j in judged if j[2] not in (None, MODEL)]
                if torch_made:
                    failures.append(_recompile_failure(case, entry, *torch_made[0]))
                elif any(origin == MODEL for _, _, origin in judged):
                    notes.append(_recompile_failure(case, entry, *next(j for j in judged if j[2] == MODEL)))
            model.compile(sizes, units, _marked(case, entry), tag=entry)
            compiled_at.append(sizes)
    return failures, notes


_STATIC = re.compile(r"tensor '(?:\w+\[')?(?:kwargs\[')?([\w.\[\]']+?)'\]?'? size mismatch at index (\d+)\. "
                     r"expected (\d+), actual (\d+)")
_SOURCE_SIZE = re.compile(r"(?:L\[')?(?:kwargs\[')?(\w+)'?\]?'?\]?\.size\(\)\[(\d+)\]")


def _other_branch(entry, accepting):
    """Where the model's own code takes a branch at this forward that it did not take at any compile
    whose graph torch's rules say accepts it (``ModelLines``: the lines of transformers each eager
    forward ran), as a guard-like part ("the model's code ran F:104 here, not at call 3  # F:104");
    else None. Only lines new here count: a line that ran at the first call alone (a lazy init, a
    warning given once) is not a branch on sizes."""
    now = entry["eager"].get("model_lines")
    if now is None or not accepting:
        return None
    new = set(now)
    for compiled in accepting:
        then = (compiled or {}).get("eager", {}).get("model_lines")
        if not then or not set(now) - set(then):
            return None  # a graph traced through the same code accepts it: torch's guards decide
        # Only a branch in a function whose code put guards on sizes in that compile: a line that runs
        # for other reasons (a padding mask that is all ones this time) says nothing about sizes.
        guarded = set(re.findall(r"# (transformers/[\w/.-]+\.py):\d+ in (\w+)",
                                 "\n".join((compiled or {}).get("compiled", {}).get("guards_added") or ())))
        new &= {line for line in set(now) - set(then)
                if tuple(re.sub(r":\d+ in ", " ", line).split(" ", 1)) in guarded}
    if not new:
        return None
    line = sorted(new)[0]
    return f"the model's code ran {line} here, not at call {accepting[0]['call']}  # {line} (the model's branch)"


def guard_parts(text):
    """The guards one recompile reason names: Dynamo joins every failed guard of a graph with
    "; " (``report_every_failed_guard``), after the compile id."""
    body = re.sub(r"^\d+/\d+: ", "", str(text))
    return [part for part in re.split(r"; (?=\S)", body) if part.strip()] or [body]


def _judge_failure(case, model, text, sizes, compiled_at, logs):
    """(guard, origin) for one graph's failed guards: the model's where any of them is the model's
    (the call takes another branch of its code, whichever guard Dynamo checked first), else the
    first that torch made, else the first (origin None: torch's documented rules)."""
    judged = [(part, _failed_guard(case, model, part, sizes, compiled_at, logs)) for part in guard_parts(text)]
    model_made = [j for j in judged if j[1] == MODEL]
    torch_made = [j for j in judged if j[1] not in (None, MODEL)]
    if torch_made and not model_made:
        # The shape environment may have folded the model's guard into a torch one (a branch at
        # 16 patches inside a range torch narrowed to 8..12): the compile's own guards decide.
        compile_id = re.match(r"(\d+/\d+): ", str(text))
        failed = _failed_model_guards(logs, compile_id.group(1) if compile_id else None, sizes)
        if failed:
            return failed[0], MODEL
    return (model_made or torch_made or judged)[0]


# What a guard's text may call, as plain Python on sizes (``_guard_holds``).
_GUARD_FUNCTIONS = {
    "Eq": lambda a, b: a == b, "Ne": lambda a, b: a != b, "Mod": lambda a, b: a % b, "PythonMod": lambda a, b: a % b,
    "FloorDiv": lambda a, b: a // b, "Max": max, "Min": min, "Abs": abs,
    "CeilToInt": lambda a: -(-a // 1), "FloorToInt": lambda a: a // 1, "TruncToInt": int,
    "IntTrueDiv": lambda a, b: a / b, "FloatTrueDiv": lambda a, b: a / b, "ToFloat": float,
    "And": lambda *a: all(a), "Or": lambda *a: any(a), "Not": lambda a: not a, "True": True, "False": False,
}


def compile_blocks(lines):
    """{compile id: (binds, [guard line])} from a run's guard lines (``guard_lines``): each
    symbol's input and dim (``bind s3 = L['input_ids'].size()[1]``), and the guards it holds."""
    blocks, current = {}, None
    for line in lines:
        if line.startswith("compile "):
            current = blocks[line[len("compile "):]] = ({}, [])
        elif current is None:
            continue
        elif line.startswith("bind "):
            m = re.match(r"bind (\w+) = (.*)", line)
            # Only the sizes of the call's own inputs: a local of an inner frame (after a graph break)
            # of the same name is another tensor.
            place = _SOURCE_SIZE.search(m.group(2)) if m and "['kwargs']" in m.group(2) else None
            if place is not None:
                current[0][m.group(1)] = (place.group(1), int(place.group(2)))
        elif line.startswith("eval "):
            current[1].append(line)
    return blocks


def _guard_holds(line, binds, sizes):
    """Does the guard of a guard line (``eval EXPR [guard added] ...``) hold at ``sizes``? None
    where it names a size the call does not have or a function it cannot evaluate."""
    expr = line[len("eval "):].split(" [guard added]")[0]

    def value(m):
        name, dim = binds.get(m.group(0), (None, None))
        shape = sizes.get(name)
        return str(shape[dim]) if shape is not None and dim < len(shape) else m.group(0)

    text = re.sub(r"\b[a-z]+\d+\b", value, expr)
    if any(word not in _GUARD_FUNCTIONS for word in re.findall(r"[A-Za-z_]\w*", text)):
        return None  # a size it cannot bind, or a function not in the table
    try:
        return bool(eval(text, {"__builtins__": {}}, dict(_GUARD_FUNCTIONS)))  # names checked above: sizes only
    except Exception:  # noqa: BLE001 - a division by zero at these sizes: not decided here
        return None


def _failed_model_guards(logs, compile_id, sizes):
    """The guards of the model's own code in compile ``compile_id`` that fail at ``sizes``: the
    call takes another branch of the model than that graph was traced through. As
    ``"GUARD  # WHERE"`` parts, like Dynamo's reasons."""
    binds, guards = compile_blocks(logs).get(compile_id, ({}, []))
    return [f"{line[len('eval '):].split(' [guard added]')[0]}  # {line.split('[guard added] ', 1)[-1]}"
            for line in guards if guard_origin(line) == MODEL and _guard_holds(line, binds, sizes) is False]


def _failed_guard(case, model, text, sizes, compiled_at, logs):
    """Who a failed guard's recompile is on: None (torch's documented rules, or not a guard on
    sizes), ``MODEL``, or the torch origin (``guard_origin``) that makes it a finding."""
    if not _size_guard(text):
        return None
    if "stride" in guard_text(text) and re.search(r"\bcache\b|past_key_values", guard_text(text)):
        # A KV cache holds what the model's last step made of it (a transposed view after a prefill,
        # a contiguous cat after a step): a new layout, and torch guards every input's strides.
        return None
    origin = _origin_of_failure(text, logs)
    if origin in ("torch: 0/1 specialization", "torch: duck sizing"):
        return None
    m = _STATIC.search(text)
    if m is not None:
        name, dim, expected, actual = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
        if min(expected, actual) <= 1 or model.was_static(name, dim, expected):
            return None  # a size of 0 or 1, or a graph that torch's rules kept static at that size
        if case.get("dynamic") is None and "kwargs[" not in text:
            return None  # an inner frame (after a graph break) has automatic dynamic of its own, not modelled
        return origin
    if _derived_zero_or_one(text, [sizes] + compiled_at):
        return None
    return origin


def _derived_zero_or_one(text, size_sets):
    """Does a size derived by floor division in the guard (``(s // 4)``) come to 0 or 1 at the
    call or at an earlier compile? Torch specializes such a derived size like an input's."""
    guard = guard_text(text)
    for sizes in size_sets:
        def value(m, sizes=sizes):
            shape = sizes.get(m.group(1))
            return str(shape[int(m.group(2))]) if shape and int(m.group(2)) < len(shape) else m.group(0)

        numeric = _SOURCE_SIZE.sub(value, guard)
        for top, div in re.findall(r"\(([\d\s*+-]+) // (\d+)\)", numeric):
            try:
                if eval(top, {"__builtins__": {}}) // int(div) in (0, 1):  # digits and + - * only (the regex)
                    return True
            except Exception:  # noqa: BLE001 - not arithmetic after all
                continue
    return False


def _origin_of_failure(text, logs):
    """Where a failed guard came from. A static size ("expected 5, actual 7") was made static
    by the compile that replaced its symbol with that number: the origin of that log line
    (``GuardLog``), where one is found."""
    origin = guard_origin(text)
    m = re.search(r"expected (\d+), actual", text)
    if m is None or origin != "torch: a static size":
        return origin
    size = m.group(1)
    for line in reversed(logs):
        if re.search(rf"(Eq\(s\d+, {size}\)|set_replacement s\d+ = {size}\b)", line):
            found = guard_origin(line)
            if found != "torch":
                return found
    return origin


def _recompile_failure(case, entry, frame, text, origin):
    resumed = "resume_in" in frame
    static = "size mismatch at index" in text
    if resumed and static:
        symptom, what = "lost-dynamism", "the graph after a graph break was compiled with static sizes"
    else:
        symptom = "excess-recompiles"
        what = ("recompiled where a graph compiled before accepts the call by torch's own rules"
                + (" (dynamic=True)" if case.get("dynamic") else " (automatic dynamic)"))
    guard = guard_text(text)
    return {"symptom": symptom, "stage": "guard", "call": entry["call"], "step": entry["step"],
            "path": frame, "origin": origin, "guard": guard,
            "detail": f"{what}: the guard {guard!r} failed ({origin}; frame {frame})",
            "key": f"{'resume' if resumed else frame}|{normalize_message(guard)}|{origin.split(' (')[0]}"}


def _config_limit(case, message):
    """``MODEL`` where a refused mark's range runs past a size the model's config holds (a
    position table of ``max_position_embeddings`` rows): the guard that narrows the range to it
    is the model's limit, whichever torch function met it; else None."""
    m = re.search(r"satisfy the generated guard (.*)", message)
    if m is None:
        return None
    bounds = {int(n) for n in re.findall(r"(?<![\w.])(\d+)(?![\w.])", m.group(1))}
    sizes = {v for v in (case.get("config") or {}).values() if isinstance(v, int) and not isinstance(v, bool) and v > 2}
    return MODEL if any(abs(b - v) <= 2 for b in bounds for v in sizes) else None


def _branch_in_range(case, entry):
    """``MODEL`` where the model's own code branches on a marked size somewhere inside the range
    the mark claims (ViT takes another path where the patches fill its position table): that mark
    cannot hold on this model whatever torch does, so the refusal is the model's business."""
    marks = case["calls"][entry["call"]].get("marks") or {}
    marked = set(re.findall(r"You marked (\S+) as dynamic", entry["compiled"]["error"].get("message", "")))
    places = {(m.group(1), int(m.group(2))) for m in map(_SOURCE_SIZE.search, marked) if m}
    sizes = entry["compiled"].get("sizes") or {}
    if not places or not sizes:
        return None
    blocks = compile_blocks(entry["compiled"].get("guards_added") or []).values()
    length_dims = LENGTH_DIMS[ARCHS[case["arch"]][2]]
    for key in ("batch", "length"):
        group = {(name, dim) for name, dim in places if (dim == 0) == (key == "batch")}
        if key == "length":  # a length mark covers every length dim (an image's height and width)
            group |= {(name, d) for name, dim in group if dim in length_dims for d in length_dims}
        if not group:
            continue
        mark = marks.get(key) or {}
        now = max((sizes[name][dim] for name, dim in group if name in sizes and dim < len(sizes[name])), default=2)
        low, high = max(int(mark.get("min") or 2), 2), int(mark.get("max") or 4 * now)
        for binds, guards in blocks:
            model_guards = [g for g in guards if guard_origin(g) == MODEL]
            for value in range(low, min(high, low + 1024) + 1) if model_guards else ():
                at = {name: [value if (name, d) in group else v for d, v in enumerate(shape)]
                      for name, shape in sizes.items()}
                if any(_guard_holds(g, binds, at) is False for g in model_guards):
                    return MODEL
    return None


def _specialization_origin(entry):
    """Where a dim marked dynamic was specialized: the origins of the guards that compile
    added which tie one symbol to a number (``Eq(s3, 7)``, ``s3 < 16``, a replacement)."""
    lines = entry["compiled"].get("guards_added") or []
    # A size replaced by a number is the specialization itself: its origin first, then the guards'.
    replaced = [line for line in lines if re.search(r"set_replacement s\d+ = \d+", line)]
    guarded = [line for line in lines if re.search(r"eval (Eq\()?s\d+(, | ?[<>=]=? ?)\d+\)?\s*\[guard added\]", line)]
    pinned = replaced + guarded
    origins = [guard_origin(line) for line in pinned]
    torch_made = [o for o in origins if is_torch_origin(o)]
    if torch_made:
        return torch_made[0]
    return MODEL if MODEL in origins else "unknown"


def judge_model_run(case, entries, reference=None, device="cpu"):
    """The run's failures, the deciding one first, and its notes: ([failure], [note]).

    ``reference(call_index)`` gives the fp64 records of a call (``Reference``), asked only where
    compiled and eager differ beyond tolerance."""
    failures, notes = [], []
    ref_of = reference or Reference(case, device)

    for entry in entries:
        e, c = entry["eager"], entry["compiled"]
        where = {"call": entry["call"], "step": entry["step"]}
        if "error" in c and "error" not in e:
            error = c["error"]
            if "ConstraintViolation" in error.get("type", "") or "Constraints violated" in error.get("message", ""):
                origin = _config_limit(case, error.get("message", "")) or _branch_in_range(case, entry) or \
                    _specialization_origin(entry)
                item = {"symptom": "over-specialization", "stage": "dynamo", "error": error, "origin": origin,
                        "detail": f"a dim marked dynamic was specialized or guarded: {origin}", **where,
                        "key": f"{error.get('type')}|{normalize_message(error.get('message', ''))}|{origin}"}
                # Only a guard torch made is torch's bug; one of the model's code (or one whose origin no
                # log line shows) is a note: marking that dim dynamic was the user's claim, not torch's.
                (failures if is_torch_origin(origin) else notes).append(item)
                break
            failures.append({"symptom": "crash", "stage": error.get("stage", "unknown"), "error": error, **where,
                             "detail": "compiled raised where eager returned",
                             "key": f"{error.get('type')}|{normalize_message(error.get('message', ''))}"})
            break
        if "error" in e:
            break  # eager refused the call: nothing to compare from here on
        diff = compare(tuple(e["out"]), tuple(c["out"]),
                       lambda entry=entry: tuple(_ref_tree(ref_of(entry["call"]), entry["step"])))
        if diff is not None:
            index = int(re.match(r"out\[(\d+)\]", diff["path"]).group(1)) if diff["path"].startswith("out[") else -1
            names = e.get("names") or []
            name = names[index] if 0 <= index < len(names) else diff["path"]
            symptom = "gradient-mismatch" if name.startswith(("grad:", "param:")) and diff["symptom"] == "value-mismatch" \
                else diff["symptom"]
            failures.append({"symptom": symptom, "stage": "runtime", "path": name, **where,
                             "detail": f"{name}: {diff['detail']}",
                             "key": f"{entry['kind']}|{_generic(name)}|{diff.get('kind', '')}"})
            break
    recompiles, model_notes = judge_recompiles(case, entries)
    return failures + recompiles, notes + model_notes


def _ref_tree(records, step):
    record = records[step] if step < len(records) else None
    return record["out"] if record and "out" in record else ()


def _generic(name):
    """An output's name without layer numbers: the same bug in layer 0 or 1 signs alike."""
    return re.sub(r"\.\d+\.", ".N.", name)


def model_signature(case, failure, lane):
    """The finding's signature: the symptom, the lane and what tells the bug apart. An error
    (a crash, a refused mark) signs by its type and message alone, so one torch bug met by several
    architectures is one finding; a wrong value or recompile is the architecture's own graph, and
    signs with the architecture."""
    if failure["symptom"] in ("crash", "over-specialization"):
        return signature(failure["symptom"], lane, failure["key"])
    return signature(failure["symptom"], lane, f"{case['arch']}|{failure['key']}")
