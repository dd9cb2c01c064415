"""Real models at run time: a ``transformers`` architecture built from its config class alone
(no hub, no weights), called through a schedule of sizes on eager and compiled, and each call
judged.

A model case (``fuzz/model_case.py``) names the architecture, the config's keyword arguments,
the seed of the random weights and its calls: forwards at changing batch sizes and sequence
lengths with padding masks and position ids, decode loops that grow a KV cache one token at a
time, and training steps. ``run_model_schedule`` makes every call on an eager model and on the
compiled one and records, per compiled call, what it compiled (graphs, frames) and why
(Dynamo's guard failures, each with the guard's text and where it came from).
``judge_model_run`` turns that record into failures: crashes, values and gradients against
eager (with the fp64 reference where they differ), a dim marked dynamic that was specialized,
recompiles that the calls' guard regions do not explain, and dynamism lost after a graph break.
A recompile or specialization the model's own Python asked for (a branch on a size) is the
model's business: it is noted (``notes``), never a failure.

Pasted into a model finding's repro.py (``corpus.scripts``), so it imports only the standard
library and torch at its top; ``transformers`` is imported where a model is built.
"""

import copy
import re

import torch

from symfuzz.fuzz.model_case import ARCHS, LENGTH_DIMS, MAIN_INPUT
from symfuzz.fuzz.runtime.comparing import compare
from symfuzz.fuzz.runtime.running import describe_exception
from symfuzz.fuzz.runtime.signatures import normalize_message, signature

MARK_FUNCTIONS = {"dynamic": "mark_dynamic", "maybe_dynamic": "maybe_mark_dynamic", "static": "mark_static"}
# Where a guard came from, read from Dynamo's guard-failure text (``guard_origin``).
MODEL = "the model's code"


def load_transformers():
    """The ``transformers`` module, or ImportError saying how to get it."""
    try:
        import transformers  # deferred: only model cases need it, and it takes seconds to import
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("model cases need transformers: pip install 'symfuzz[models]' "
                          f"(or transformers alone) ({exc})") from None
    return transformers


def build_model(case):
    """The case's architecture, randomly initialised from ``case["seed"]``, in eval mode."""
    transformers = load_transformers()
    config_class, model_class, _ = ARCHS[case["arch"]]
    config = getattr(transformers, config_class)(**case["config"])
    config._attn_implementation = case.get("attn") or "eager"
    torch.manual_seed(case["seed"])
    model = getattr(transformers, model_class)(config)
    model = model.to(getattr(torch, case.get("dtype") or "float32"))
    return model.eval()


def _mask(batch, seq, lengths, left):
    mask = torch.ones(batch, seq, dtype=torch.long)
    for row, length in enumerate(lengths or []):
        if length < seq:
            if left:
                mask[row, : seq - length] = 0
            else:
                mask[row, length:] = 0
    return mask


def make_inputs(case, call, dtype=None, device="cpu"):
    """The keyword arguments of one forward: seeded ids or values at the call's sizes, a
    padding mask from its ``lengths`` (left padding for a decoder, right otherwise) and,
    where asked, position ids that skip the padding."""
    inputs = _make_inputs(case, call, dtype)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _make_inputs(case, call, dtype):
    kind = ARCHS[case["arch"]][2]
    config = case["config"]
    gen = torch.Generator().manual_seed(call["seed"])
    batch, seq = call["batch"], call.get("seq", 1)
    dtype = dtype or getattr(torch, case.get("dtype") or "float32")
    if kind in ("decoder", "encoder", "seq2seq"):
        vocab = config.get("vocab_size", 64)
        inputs = {"input_ids": torch.randint(0, vocab, (batch, seq), generator=gen)}
        if call.get("lengths"):
            inputs["attention_mask"] = _mask(batch, seq, call["lengths"], left=kind == "decoder")
        if kind == "decoder" and call.get("positions"):
            mask = inputs.get("attention_mask", torch.ones(batch, seq, dtype=torch.long))
            inputs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
        if kind == "seq2seq":
            inputs["decoder_input_ids"] = torch.randint(0, vocab, (batch, call.get("target", 2)), generator=gen)
        return inputs
    if kind == "image":
        channels = config.get("num_channels", 3)
        pixels = torch.randn(batch, channels, seq, seq, generator=gen).to(dtype)
        return {"pixel_values": pixels, "interpolate_pos_encoding": True}
    if kind == "audio":
        return {"input_values": torch.randn(batch, seq, generator=gen).to(dtype)}
    frames = 2 * config.get("max_source_positions", 1500)
    return {"input_features": torch.randn(batch, config.get("num_mel_bins", 80), frames, generator=gen).to(dtype)}


def mark_inputs(case, call, inputs):
    """The call's dynamism marks on its main input (the compiled side's copy): "batch" marks
    dim 0, "length" the length dims."""
    kind = ARCHS[case["arch"]][2]
    main = inputs[MAIN_INPUT[kind]]
    # Every input that shares the main input's batch and length is marked alike (a mask, position
    # ids), as a user does: marking one and not the others ties the marked size to a static one.
    tensors = [t for _, t in sorted(inputs.items()) if isinstance(t, torch.Tensor) and t.dim() >= 1]
    for what, mark in sorted((call.get("marks") or {}).items()):
        dims = (0,) if what == "batch" else LENGTH_DIMS[kind]
        tied = [t for t in tensors if t.shape[0] == main.shape[0]] if what == "batch" else \
            [t for t in tensors if t.dim() == main.dim() and t.shape[:2] == main.shape[:2]]
        for tensor in tied:
            for dim in dims:
                how = mark.get("mark")
                if how == "dynamic":
                    bounds = {k: mark[k] for k in ("min", "max") if mark.get(k) is not None}
                    torch._dynamo.mark_dynamic(tensor, dim, **bounds)
                elif how in MARK_FUNCTIONS:
                    getattr(torch._dynamo, MARK_FUNCTIONS[how])(tensor, dim)
    return inputs


def output_tree(out):
    """(names, tensors) of a model output's tensor fields, in order (a cache object is skipped)."""
    names, leaves = [], []
    items = out.items() if hasattr(out, "items") else enumerate(out if isinstance(out, (tuple, list)) else [out])
    for name, value in items:
        if isinstance(value, torch.Tensor):
            names.append(str(name))
            leaves.append(value.detach().clone())
    return names, tuple(leaves)


def training_loss(out):
    """The loss of a training step: the model's own loss where it computed one, else the mean
    square of its first output (in float32, so a low-precision model's loss is not rounded away)."""
    loss = out.get("loss") if hasattr(out, "get") else None
    if loss is None:
        first = next(v for v in (out.values() if hasattr(out, "values") else out) if isinstance(v, torch.Tensor))
        loss = first.float().pow(2).mean()
    return loss


def make_cache(case, call, model, batch):
    """A fresh KV cache for a decode call: the library's dynamic cache, or its static cache
    sized for the whole loop."""
    transformers = load_transformers()
    if call.get("cache") == "static":
        length = call.get("seq", 1) + call.get("steps", 1)
        return transformers.StaticCache(config=model.config, max_cache_len=length)
    return transformers.DynamicCache(config=model.config)


def sizes_of(inputs):
    """Each input's shape (a cache's key and value tensors included; [] for one that is no
    tensor), for ``GuardModel``: which inputs a call has decides which graphs can serve it."""
    shapes = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            shapes[name] = list(value.shape)
        else:
            shapes[name] = []
        if hasattr(value, "layers"):  # a transformers cache
            for i, layer in enumerate(value.layers):
                for part in ("keys", "values"):
                    tensor = getattr(layer, part, None)
                    if isinstance(tensor, torch.Tensor):
                        shapes[f"{name}.layers[{i}].{part}"] = list(tensor.shape)
    return shapes


def _steps(case, call, model, on_step, device="cpu"):
    """Run one call's forwards on ``model`` (eager or compiled): one for a forward, the prefill
    and each decode step for a decode call, forward and backward for a training step. For each,
    ``on_step(j, inputs, run)`` gets the inputs and a function that makes the forward."""
    if call["kind"] == "decode":
        inputs = make_inputs(case, call, device=device)
        cache = make_cache(case, call, model, call["batch"])
        inputs.update(past_key_values=cache, use_cache=True)
        gen = torch.Generator().manual_seed(call["seed"] + 1)
        vocab = case["config"].get("vocab_size", 64)
        mask = inputs.get("attention_mask")
        for j in range(1 + call.get("steps", 1)):
            if j:
                ids = torch.randint(0, vocab, (call["batch"], 1), generator=gen).to(device)
                inputs = {"input_ids": ids, "past_key_values": cache, "use_cache": True}
                if mask is not None:
                    mask = torch.cat([mask, torch.ones(call["batch"], 1, dtype=mask.dtype, device=mask.device)], dim=1)
                    inputs["attention_mask"] = mask
                if call.get("positions") and mask is not None:
                    inputs["position_ids"] = mask.sum(-1, keepdim=True) - 1
            on_step(j, inputs, lambda kw: model(**kw))
        return
    inputs = make_inputs(case, call, device=device)
    if call["kind"] == "train":
        on_step(0, inputs, lambda kw: _train_forward(model, kw))
    else:
        on_step(0, inputs, lambda kw: model(**kw))


def _train_forward(model, inputs):
    with torch.enable_grad():
        out = model(**inputs)
        training_loss(out).backward()
    return out


def _grads(model):
    """Every trainable parameter's gradient, zeros where it has none: AOTAutograd returns
    zeros for a parameter the loss does not reach where eager leaves None, and both mean the
    same step."""
    names, leaves = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            names.append(f"grad:{name}")
            leaves.append(p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
    return names, leaves


def _params(model):
    return [f"param:{n}" for n, _ in model.named_parameters()], [p.detach().clone() for p in model.parameters()]


class Side:
    """One side of a model case: its own model (compiled by ``compile_model`` when given), the
    optimizer of its training steps, and per call the trees of what it returned."""

    def __init__(self, model, compile_model=None, step=None, cast=None):
        self.model = model
        self.cast = cast  # a dtype the float inputs are widened to (the fp64 reference)
        self.forward = compile_model(model) if compile_model is not None else model
        self.optimizer = None
        if step is not None:
            self.optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=step["lr"])

    def run(self, case, call, index, device="cpu", marks=False, before=None, after=None):
        """[(names, tree) or {"error": ...}] for each forward of the call."""
        records = []
        self.model.train(call["kind"] == "train")

        def on_step(j, inputs, forward):
            if marks and j == 0:
                mark_inputs(case, call, inputs)
            if self.cast is not None:
                inputs.update({k: v.to(self.cast) for k, v in inputs.items()
                               if isinstance(v, torch.Tensor) and v.is_floating_point()})
            if before is not None:
                before(index, j, inputs)
            try:
                out = forward(inputs)
                names, tree = output_tree(out)
                if call["kind"] == "train":
                    g_names, grads = _grads(self.model)
                    names, tree = names + g_names, tree + tuple(grads)
                    if self.optimizer is not None:
                        self.optimizer.step()
                    self.model.zero_grad(set_to_none=True)
                    p_names, params = _params(self.model)
                    names, tree = names + p_names, tree + tuple(params)
                record = {"names": names, "out": tree}
            except Exception as exc:  # noqa: BLE001 - any failure is data here
                record = {"error": describe_exception(exc)}
            if after is not None:
                after(index, j, record)
            records.append(record)
            if "error" in record:
                raise _Stop()

        try:
            _steps(case, call, self.forward, on_step, device)
        except _Stop:
            pass
        return records

    def sync_from(self, other):
        """Continue from ``other``'s weights: a training step's drift, or a side that stopped
        midway, is not carried into the next call."""
        with torch.no_grad():
            for mine, theirs in zip(self.model.parameters(), other.model.parameters()):
                mine.copy_(theirs)


class _Stop(Exception):
    pass


def _graph_count():
    try:
        from torch._dynamo.utils import counters  # private torch API, looked up at use

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def _guard_failures():
    """{code name: number of guard failures recorded}, and the texts by code name."""
    try:
        from torch._dynamo.utils import guard_failures  # private torch API, looked up at use

        return {code: list(reasons) for code, reasons in guard_failures.items()}
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return {}


def _shape_env_of(example_inputs):
    try:
        from torch._guards import detect_fake_mode  # private torch API, looked up at use

        mode = detect_fake_mode(example_inputs)
        return getattr(mode, "shape_env", None)
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return None


def guard_lines(shape_env, start=0):
    """The guards a shape environment holds from its ``start``-th on, and the sizes it replaced
    by numbers, each as a line that says where it came from ("eval GUARD [guard added] USER
    LINE (TORCH FILE:LINE in FN)", as torch logs them), for ``guard_origin``."""
    lines = []
    try:
        for guard in list(shape_env.guards)[start:]:
            lines.append(f"eval {guard.expr} [guard added] {guard.sloc}")
        for symbol, value in list(shape_env.replacements.items()):
            if getattr(value, "is_number", False):
                lines.append(f"set_replacement {symbol} = {value} {shape_env.replacements_slocs.get(symbol, '')}")
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        pass
    return lines


class CompileWatch:
    """Around each compiled forward: the graphs it compiled, the guard failures Dynamo
    recorded (the reasons of its recompiles) by frame, the guards its compiles added with
    where each came from, and its inputs' sizes. ``backend(inner)`` is the backend that
    records each compile's shape environment before handing the graph to ``inner``."""

    def __init__(self):
        self.shape_envs = []

    def backend(self, inner):
        import torch._dynamo  # (torch is imported already; the name is looked up here)

        compile_graph = torch._dynamo.lookup_backend(inner) if isinstance(inner, str) else inner

        def recording(gm, example_inputs):
            shape_env = _shape_env_of(example_inputs)
            if shape_env is not None and all(e is not shape_env for e in self.shape_envs):
                self.shape_envs.append(shape_env)
            return compile_graph(gm, example_inputs)

        return recording

    def before(self, index, step, inputs):
        self._graphs, self._failures = _graph_count(), _guard_failures()
        self._sizes = sizes_of(inputs)
        self._envs = len(self.shape_envs)

    def after(self, index, step, record):
        failures = _guard_failures()
        reasons = {}
        for code, texts in failures.items():
            new = texts[len(self._failures.get(code, [])):]
            if new:
                reasons[getattr(code, "co_name", str(code))] = [str(t).split("\nUser stack")[0] for t in new]
        graphs = _graph_count()
        record["graphs"] = graphs - self._graphs if graphs >= 0 and self._graphs >= 0 else -1
        record["reasons"] = reasons
        record["sizes"] = self._sizes
        record["guards_added"] = [line for env in self.shape_envs[self._envs:] for line in guard_lines(env)][-200:]


def run_model_schedule(case, backend, mode=None, device="cpu"):
    """Every call of the case on an eager model and a compiled one: ``torch.compile(model,
    backend=backend, dynamic=case["dynamic"], mode=mode)``.

    Returns [{"call", "step", "kind", "eager", "compiled"}] with one entry per forward; a
    compiled entry holds the graphs it compiled, the guard failures recorded, the guards added
    and its inputs' sizes. With a training step, each side has its own model and optimizer,
    and after each call the compiled side continues from eager's weights."""
    eager_model = build_model(case).to(device)
    training = any(c["kind"] == "train" for c in case["calls"])
    # Each side has its own copy: eager's carries hooks that read its inner sizes (UnitSizes).
    compiled_model = copy.deepcopy(eager_model)
    units = UnitSizes(eager_model)
    watch = CompileWatch()
    # A mode (CUDA graphs) takes a backend's name: such a compile's guards go unrecorded.
    how = {} if backend == "eager_only" else {"backend": backend, "mode": mode} if mode else \
        {"backend": watch.backend(backend)}

    def compile_model(model):
        if backend == "eager_only":  # no compile at all: how long the calls take in eager alone
            return model
        return torch.compile(model, dynamic=case.get("dynamic"), **how)

    eager = Side(eager_model, step=case.get("step") if training else None)
    compiled = Side(compiled_model, compile_model, case.get("step") if training else None)
    entries = []
    for index, call in enumerate(case["calls"]):
        e_records = eager.run(case, call, index, device, before=units.before, after=units.after)
        c_records = compiled.run(case, call, index, device, marks=True, before=watch.before, after=watch.after)
        for j, c_record in enumerate(c_records):
            e_record = e_records[j] if j < len(e_records) else {"error": {"type": "missing", "message": ""}}
            entries.append({"call": index, "step": j, "kind": call["kind"], "eager": e_record, "compiled": c_record})
        if training:
            compiled.sync_from(eager)
    units.close()
    return entries


class UnitSizes:
    """Which sizes inside the eager model are 0 or 1 at each forward: every submodule's
    outputs, read by forward hooks. Torch specializes a size derived from the inputs (a patch
    count, a length after a convolution) at 0 and 1 like an input's own, so a call whose inner
    sizes cross 1 is in another guard region even when its inputs' sizes are not."""

    def __init__(self, model):
        self.current = set()
        self.handles = [module.register_forward_hook(self._hook(name)) for name, module in model.named_modules()]

    def _hook(self, name):
        def hook(module, args, output):
            tensors = [output] if isinstance(output, torch.Tensor) else \
                [t for t in (output if isinstance(output, (tuple, list)) else ()) if isinstance(t, torch.Tensor)]
            for i, tensor in enumerate(tensors):
                for dim, size in enumerate(tensor.shape):
                    if size <= 1:
                        self.current.add(f"{name}:{i}:{dim}:{size}")
        return hook

    def before(self, index, step, inputs):
        self.current = set()

    def after(self, index, step, record):
        record["unit_sizes"] = sorted(self.current)

    def close(self):
        for handle in self.handles:
            handle.remove()


def reference_records(case, call_index, device="cpu"):
    """The fp64 reference of one call's forwards: the model in float64 from the same seed, the
    calls before it replayed (training steps change the weights)."""
    model = build_model(case).to(device=device, dtype=torch.float64)  # the case's own weights, widened
    training = any(c["kind"] == "train" for c in case["calls"])
    side = Side(model, step=case.get("step") if training else None, cast=torch.float64)
    records = []
    for index, call in enumerate(case["calls"][: call_index + 1]):
        records = side.run(case, call, index, device)
    return records


# ---------------------------------------------------------------- judging


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
    for path, _ in re.findall(r"\(((?:torch/)?_?[\w/]+\.py):\d+ in (\w+)\)", text):
        path = path.removeprefix("torch/")
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
        dims = self._dims(sizes)
        for static, dynamic, groups in self.graphs.get((tuple(sorted(sizes)), tuple(units)), []):
            if any(dims[at] != v for at, v in static.items()) or any(dims[at] < 2 for at in dynamic):
                continue
            if all(len({dims[at] for at in group}) == 1 for group in groups):
                return True
        return False

    def was_static(self, name, dim, size):
        """Did a graph compiled so far hold dim ``dim`` of input ``name`` static at ``size``,
        as torch's rules say it should?"""
        return any(static.get((name, dim)) == size for graphs in self.graphs.values() for static, _, _ in graphs)

    def compile(self, sizes, units=(), marked=()):
        """A graph compiled at ``sizes`` (inner sizes of 0 and 1: ``units``) from tensors that mark
        ``marked`` dynamic (a mark is the tensor's, not the frame's: a later call's tensors carry none):
        record what its guards check."""
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
        self.graphs.setdefault((tuple(sorted(sizes)), tuple(units)), []).append((static, dynamic, kept))


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
    (``_failed_guard``): one not on sizes (the training flag, a cache object's state), one of
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
            if model.reuses(sizes, units) and texts:
                judged = [(frame, t, _failed_guard(case, model, t, sizes, compiled_at, logs)) for frame, t in texts]
                torch_made = [j for j in judged if j[2] not in (None, MODEL)]
                if torch_made:
                    failures.append(_recompile_failure(case, entry, *torch_made[0]))
                elif any(origin == MODEL for _, _, origin in judged):
                    notes.append(_recompile_failure(case, entry, *next(j for j in judged if j[2] == MODEL)))
            model.compile(sizes, entry["eager"].get("unit_sizes") or (), _marked(case, entry))
            compiled_at.append(sizes)
    return failures, notes


_STATIC = re.compile(r"tensor '(?:\w+\[')?(?:kwargs\[')?([\w.\[\]']+?)'\]?'? size mismatch at index (\d+)\. "
                     r"expected (\d+), actual (\d+)")
_SOURCE_SIZE = re.compile(r"(?:L\[')?(?:kwargs\[')?(\w+)'?\]?'?\]?\.size\(\)\[(\d+)\]")


def _failed_guard(case, model, text, sizes, compiled_at, logs):
    """Who a failed guard's recompile is on: None (torch's documented rules, or not a guard on
    sizes), ``MODEL``, or the torch origin (``guard_origin``) that makes it a finding."""
    if not _size_guard(text):
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


def _specialization_origin(entry):
    """Where a dim marked dynamic was specialized: the origins of the guards that compile
    added which tie one symbol to a number (``Eq(s3, 7)``, ``s3 < 16``, a replacement)."""
    lines = entry["compiled"].get("guards_added") or []
    pinned = [line for line in lines
              if re.search(r"(eval (Eq\()?s\d+(, | ?[<>=]=? ?)\d+\)?\s*\[guard added\]|set_replacement s\d+ = \d+)", line)]
    origins = [guard_origin(line) for line in pinned]
    torch_made = [o for o in origins if is_torch_origin(o)]
    if torch_made:
        return torch_made[0]
    return MODEL if MODEL in origins else "unknown"


def judge_model_run(case, entries, reference=None, device="cpu"):
    """The run's failures, the deciding one first, and its notes: ([failure], [note]).

    ``reference(call_index)`` gives the fp64 records of a call (``reference_records``), asked
    only where compiled and eager differ beyond tolerance."""
    failures, notes = [], []
    cache = {}

    def ref_of(call):
        if call not in cache:
            cache[call] = (reference or (lambda i: reference_records(case, i, device)))(call)
        return cache[call]

    for entry in entries:
        e, c = entry["eager"], entry["compiled"]
        where = {"call": entry["call"], "step": entry["step"]}
        if "error" in c and "error" not in e:
            error = c["error"]
            if "ConstraintViolation" in error.get("type", "") or "Constraints violated" in error.get("message", ""):
                origin = _specialization_origin(entry)
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
    """The finding's signature: the symptom, the lane, the architecture and what tells the bug apart."""
    return signature(failure["symptom"], lane, f"{case['arch']}|{failure['key']}")
