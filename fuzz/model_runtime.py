"""Real models at run time: a ``transformers`` architecture built from its config class alone
(no hub, no weights), called through a schedule of sizes on eager and compiled, and each call
judged.

A model case (``fuzz/model_case.py``) names the architecture, the config's keyword arguments,
the seed of the random weights and its calls: forwards at changing batch sizes and sequence
lengths with padding masks and position ids, decode loops that grow a KV cache one token at a
time, and training steps. ``run_model_schedule`` makes every call on an eager model and on the
compiled one and records, per compiled call, what it compiled and why (Dynamo's guard failures,
the guards its compiles added, each with where it came from), and, on eager's side, which sizes
inside the model are 0 or 1. ``fuzz/model_judge.py`` turns that record into failures.

Pasted into a model finding's repro.py (``corpus.scripts``), so it imports only the standard
library and torch at its top; ``transformers`` is imported where a model is built.
"""

import copy
import inspect
import sys

import torch

from symfuzz.fuzz.model_case import ARCHS, LENGTH_DIMS, MAIN_INPUT
from symfuzz.fuzz.runtime.running import describe_exception

MARK_FUNCTIONS = {"dynamic": "mark_dynamic", "maybe_dynamic": "maybe_mark_dynamic", "static": "mark_static"}


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


def make_cache(case, call, model):
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
        cache = make_cache(case, call, model)
        name = cache_keyword(model)
        inputs.update({name: cache, "use_cache": True})
        gen = torch.Generator().manual_seed(call["seed"] + 1)
        vocab = case["config"].get("vocab_size", 64)
        mask = inputs.get("attention_mask")
        for j in range(1 + call.get("steps", 1)):
            if j:
                ids = torch.randint(0, vocab, (call["batch"], 1), generator=gen).to(device)
                inputs = {"input_ids": ids, name: cache, "use_cache": True}
                if mask is not None:
                    mask = torch.cat([mask, torch.ones(call["batch"], 1, dtype=mask.dtype, device=mask.device)], dim=1)
                    inputs["attention_mask"] = mask
                if call.get("positions") and mask is not None:
                    inputs["position_ids"] = mask.sum(-1, keepdim=True) - 1
            on_step(j, inputs, lambda kw: _inference(model, kw))
        return
    inputs = make_inputs(case, call, device=device)
    if call["kind"] == "train":
        on_step(0, inputs, lambda kw: _train_forward(model, kw))
    else:
        on_step(0, inputs, lambda kw: _inference(model, kw))


def cache_keyword(model):
    """The keyword a model's forward takes its KV cache by: ``cache`` in transformers releases that
    deprecate ``past_key_values`` (5.x warns, and drops it in 5.40), else ``past_key_values``."""
    forward = getattr(getattr(model, "_orig_mod", model), "forward", None)
    try:
        names = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in names else "past_key_values"


def _inference(model, inputs):
    """A forward or a decode step as users run inference: without autograd (a compile then builds no
    backward graph, which only a training step needs)."""
    with torch.no_grad():
        return model(**inputs)


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


def report_every_failed_guard():
    """Have Dynamo record every guard of a graph that a call fails, not only the first: the
    ``recompiles_verbose`` log artifact, enabled without a handler (nothing is printed). Which
    guard Dynamo checks first is an accident of order: a call that takes another branch of the
    model's code may fail a torch guard first and the model's guard after it."""
    try:
        from torch._logging._internal import log_state  # private torch API, looked up at use

        log_state.enable_artifact("recompiles_verbose")
    except Exception:  # noqa: BLE001 - internals moved in some torch version: the first failure only
        pass


def _shape_env_of(example_inputs):
    try:
        from torch._guards import detect_fake_mode  # private torch API, looked up at use

        mode = detect_fake_mode(example_inputs)
        return getattr(mode, "shape_env", None)
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return None


def _compile_id():
    try:
        from torch._guards import CompileContext  # private torch API, looked up at use

        return str(CompileContext.current_compile_id())
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return "?"


def guard_lines(shape_env, compile_id="?"):
    """What one compile's shape environment holds, as lines: ``compile ID`` (the id Dynamo's
    recompile reasons start with), each symbol's input (``bind s3 = L['input_ids'].size()[1]``),
    then its guards and the sizes it replaced by numbers, each saying where it came from ("eval
    GUARD [guard added] USER LINE (TORCH FILE:LINE in FN)", as torch logs them), for
    ``guard_origin`` and for evaluating a compile's guards at another call's sizes."""
    lines = [f"compile {compile_id}"]
    try:
        for symbol, sources in list(shape_env.var_to_sources.items()):
            if sources:
                name = sources[0].name  # a property in recent torch, a method before
                lines.append(f"bind {symbol} = {name() if callable(name) else name}")
    except Exception:  # noqa: BLE001 - internals moved in some torch version: no bindings
        pass
    try:
        for guard in list(shape_env.guards)[:400]:
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
        self.shape_envs = []  # (shape env, compile id) of each compile, in order

    def backend(self, inner):
        import torch._dynamo  # (torch is imported already; the name is looked up here)

        compile_graph = torch._dynamo.lookup_backend(inner) if isinstance(inner, str) else inner

        def recording(gm, example_inputs):
            shape_env = _shape_env_of(example_inputs)
            if shape_env is not None and all(e is not shape_env for e, _ in self.shape_envs):
                self.shape_envs.append((shape_env, _compile_id()))
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
        record["guards_added"] = [line for env, cid in self.shape_envs[self._envs:] for line in guard_lines(env, cid)]


def run_model_schedule(case, backend, mode=None, device="cpu"):
    """Every call of the case on an eager model and a compiled one: ``torch.compile(model,
    backend=backend, dynamic=case["dynamic"], mode=mode)``.

    Returns [{"call", "step", "kind", "eager", "compiled"}] with one entry per forward; a
    compiled entry holds the graphs it compiled, the guard failures recorded, the guards added
    and its inputs' sizes. With a training step, each side has its own model and optimizer,
    and after each call the compiled side continues from eager's weights."""
    eager_model = build_model(case).to(device)
    training = any(c["kind"] == "train" for c in case["calls"])
    report_every_failed_guard()
    # Each side has its own copy: eager's carries hooks that read its inner sizes (UnitSizes).
    compiled_model = copy.deepcopy(eager_model)
    units, lines = UnitSizes(eager_model), ModelLines()
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
        e_records = eager.run(case, call, index, device, before=lambda *a: (units.before(*a), lines.before(*a)),
                              after=lambda *a: (lines.after(*a), units.after(*a)))
        c_records = compiled.run(case, call, index, device, marks=True, before=watch.before, after=watch.after)
        for j, c_record in enumerate(c_records):
            e_record = e_records[j] if j < len(e_records) else {"error": {"type": "missing", "message": ""}}
            entries.append({"call": index, "step": j, "kind": call["kind"], "eager": e_record, "compiled": c_record})
        if training:
            compiled.sync_from(eager)
    units.close()
    return entries


class ModelLines:
    """Which lines of the model's own code (the ``transformers`` package) each eager forward ran.
    Two calls that run different lines took different branches of the model (a patch grid that
    fills the position table, a cache that is empty): a recompile between them is the model's,
    whichever guard torch checked first, and even where torch pinned the size before the model's
    guard was recorded."""

    def __init__(self):
        self.lines, self._before = set(), None

    def _trace(self, frame, event, arg):
        if event == "call" and str(frame.f_globals.get("__name__", "")).startswith("transformers."):
            return self._line
        return None

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines.add((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        return self._line

    def before(self, index, step, inputs):
        self.lines, self._before = set(), sys.gettrace()
        sys.settrace(self._trace)

    def after(self, index, step, record):
        sys.settrace(self._before)
        record["model_lines"] = sorted(f"{_package_path(path)}:{line} in {name}" for path, line, name in self.lines)


def _package_path(path):
    """A file's path from its package (``transformers/models/vit/modeling_vit.py``)."""
    at = path.replace("\\", "/").rfind("/transformers/")
    return path[at + 1:] if at >= 0 else path


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


class Reference:
    """The fp64 reference of a case's calls: the model in float64 from the same seed, its calls
    made once, in order, as far as the judge asks (training steps change the weights, so a call's
    reference needs the calls before it). ``reference(i)`` gives call ``i``'s records; asking in
    call order costs one pass over the schedule, not one per call."""

    def __init__(self, case, device="cpu"):
        self.case, self.device = case, device
        self.side, self.made, self.kept = None, 0, {}

    def __call__(self, call_index):
        if call_index in self.kept:
            return self.kept[call_index]
        if self.side is None or call_index < self.made:
            model = build_model(self.case).to(device=self.device, dtype=torch.float64)  # the case's weights, widened
            training = any(c["kind"] == "train" for c in self.case["calls"])
            self.side = Side(model, step=self.case.get("step") if training else None, cast=torch.float64)
            self.made = 0
        records = []
        while self.made <= call_index:
            records = self.side.run(self.case, self.case["calls"][self.made], self.made, self.device)
            self.made += 1
        self.kept[call_index] = records
        return records
