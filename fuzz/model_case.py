"""A model case: a real architecture (``transformers``), its config, and the calls made to it.

Its JSON is what a model finding stores and what its repro.py pastes: the architecture's
name, the config class's keyword arguments, the attention implementation, the dtype, the
seed of the random weights, ``dynamic=``, the optimizer of its training steps and its calls
(``check_model_case`` lists the keys). Everything is checked as it is read, because scripts
paste it as Python source: a value is a JSON scalar or a list of them, a key an identifier.
``fuzz/model_runtime.py`` runs it; ``fuzz/model_draw.py`` draws it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import keyword
import subprocess
import sys

# name -> (config class, model class, what it is called with). Kinds: "decoder" (token ids,
# left padding, position ids, a KV cache), "encoder" (token ids, right padding), "seq2seq"
# (token ids and decoder token ids), "image" (pixel values at a changing image size), "audio"
# (raw samples of a changing length), "features" (log-mel features of the one length the model takes).
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", "decoder"),
    "mistral": ("MistralConfig", "MistralForCausalLM", "decoder"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", "decoder"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", "decoder"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", "decoder"),
    "phi": ("PhiConfig", "PhiForCausalLM", "decoder"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", "decoder"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", "decoder"),
    "opt": ("OPTConfig", "OPTForCausalLM", "decoder"),
    "bert": ("BertConfig", "BertModel", "encoder"),
    "roberta": ("RobertaConfig", "RobertaModel", "encoder"),
    "distilbert": ("DistilBertConfig", "DistilBertModel", "encoder"),
    "t5": ("T5Config", "T5ForConditionalGeneration", "seq2seq"),
    "bart": ("BartConfig", "BartForConditionalGeneration", "seq2seq"),
    "vit": ("ViTConfig", "ViTModel", "image"),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", "audio"),
    "whisper_encoder": ("WhisperConfig", "WhisperForAudioClassification", "features"),
}
# The input whose batch (dim 0) and length carry the call's sizes, by kind; and the dims of its length.
MAIN_INPUT = {"decoder": "input_ids", "encoder": "input_ids", "seq2seq": "input_ids", "image": "pixel_values",
              "audio": "input_values", "features": "input_features"}
LENGTH_DIMS = {"decoder": (1,), "encoder": (1,), "seq2seq": (1,), "image": (2, 3), "audio": (1,), "features": ()}

KIND = "model"  # a case JSON with this "kind" is a model case, not a Program and Schedule
CALL_KINDS = ("forward", "decode", "train")
CALL_MARKS = ("dynamic", "maybe_dynamic")  # drawn on the main input's batch or length dims
ATTENTION = ("eager", "sdpa")
DTYPES = ("float32", "bfloat16")
CACHES = ("dynamic", "static")
# Limits a stored case must keep (scripts paste it; a huge size would only waste a machine).
MAX_SIZE, MAX_BATCH, MAX_STEPS, MAX_CALLS = 512, 16, 16, 48


def model_source_unavailable_reason(probe: bool = True):
    """Why the model source cannot run here (None: it can). With ``probe``, a child process
    imports transformers and one model class (a few seconds; this process imports neither):
    an install can be there and still fail to import, as a torchvision built for another torch
    makes it ("operator torchvision::nms does not exist")."""
    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed: pip install 'symfuzz[models]' (or -c constraints.txt transformers)"
    if not probe:
        return None
    try:
        done = subprocess.run([sys.executable, "-c", "import transformers; transformers.LlamaConfig"],
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return "importing transformers took over 3 minutes"
    if done.returncode == 0:
        return None
    last = ([line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"])[-1]
    hint = " (a torchvision built for another torch: uninstall it; the model source needs none)" \
        if "torchvision" in done.stderr else ""
    return f"importing transformers fails: {last.strip()[:200]}{hint}"


def unsupported_lane_reason(lane):
    """Why model cases cannot run on ``lane`` (an ``oracles.lanes.lane.Lane``; None: they can)."""
    if lane.runner:
        return f"lane {lane.name} compiles through {lane.runner}, not torch.compile: model cases need torch.compile"
    return None


def model_source_description() -> str:
    """One line for `symfuzz lanes`: can the model source run, with which transformers."""
    reason = model_source_unavailable_reason()
    if reason is not None:
        return f"model source (--source models): not available: {reason}"
    return (f"model source (--source models): available, transformers {importlib.metadata.version('transformers')}, "
            f"{len(ARCHS)} architectures ({', '.join(ARCHS)})")


def is_model_case(data) -> bool:
    return isinstance(data, dict) and data.get("kind") == KIND


def _whole(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _scalar(value) -> bool:
    if isinstance(value, list):
        return len(value) <= 32 and all(_scalar(v) for v in value)
    if isinstance(value, dict):  # a nested group of settings, e.g. rope_parameters
        return len(value) <= 16 and all(isinstance(k, str) and k.isidentifier() and _scalar(v) and not isinstance(v, dict)
                                        for k, v in value.items())
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    return value is None or isinstance(value, (bool, int, str)) and (not isinstance(value, str) or len(value) <= 64)


def _check_call(call, where: str) -> None:
    if not isinstance(call, dict) or call.get("kind") not in CALL_KINDS:
        raise ValueError(f"{where}: a call must be an object whose kind is one of {', '.join(CALL_KINDS)}")
    known = {"kind", "batch", "seq", "lengths", "positions", "marks", "steps", "cache", "target", "seed"}
    extra = sorted(set(call) - known)
    if extra:
        raise ValueError(f"{where}: unknown key {extra[0]!r:.40}")
    if not _whole(call.get("batch"), 1, MAX_BATCH) or not _whole(call.get("seq", 1), 1, MAX_SIZE):
        raise ValueError(f"{where}: batch must be 1..{MAX_BATCH} and seq 1..{MAX_SIZE}")
    if not _whole(call.get("seed"), 0, 2**31):
        raise ValueError(f"{where}: seed must be a whole number")
    lengths = call.get("lengths")
    if lengths is not None and not (isinstance(lengths, list) and len(lengths) == call["batch"]
                                    and all(_whole(n, 1, call.get("seq", 1)) for n in lengths)):
        raise ValueError(f"{where}: lengths must give each row's length, 1..seq")
    if not _whole(call.get("steps", 1), 1, MAX_STEPS) or not _whole(call.get("target", 2), 1, MAX_SIZE):
        raise ValueError(f"{where}: steps must be 1..{MAX_STEPS} and target 1..{MAX_SIZE}")
    if call.get("cache", "dynamic") not in CACHES or not isinstance(call.get("positions", False), bool):
        raise ValueError(f"{where}: cache must be one of {', '.join(CACHES)} and positions true/false")
    marks = call.get("marks") or {}
    if not isinstance(marks, dict):
        raise ValueError(f"{where}: marks must be an object")
    for what, mark in marks.items():
        if what not in ("batch", "length") or not isinstance(mark, dict) or mark.get("mark") not in CALL_MARKS \
                or set(mark) - {"mark", "min", "max"} \
                or not all(mark.get(b) is None or _whole(mark[b], 0, MAX_SIZE * 4) for b in ("min", "max")):
            raise ValueError(f"{where}: marks[{what!r:.20}] is not a mark of batch or length "
                             f"({', '.join(CALL_MARKS)}, with optional min and max)")


def check_model_case(data) -> dict:
    """``data`` as a model case, or ValueError naming the field that is wrong."""
    if not is_model_case(data):
        raise ValueError("not a model case (its kind must be 'model')")
    known = {"kind", "arch", "config", "attn", "dtype", "seed", "dynamic", "step", "calls", "origin"}
    extra = sorted(set(data) - known)
    if extra:
        raise ValueError(f"model case: unknown key {extra[0]!r:.40}")
    if data.get("arch") not in ARCHS:
        raise ValueError(f"model case: arch {data.get('arch')!r:.40} is not one of {', '.join(ARCHS)}")
    config = data.get("config")
    if not isinstance(config, dict) or len(config) > 64:
        raise ValueError("model case: config must be an object of the config class's keyword arguments")
    for key, value in config.items():
        if not (isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)) or not _scalar(value):
            raise ValueError(f"model case: config[{key!r:.40}] must be an identifier holding a number, string, "
                             "true/false, null, a list of them or an object of them")
    if data.get("attn", "eager") not in ATTENTION or data.get("dtype", "float32") not in DTYPES:
        raise ValueError(f"model case: attn must be one of {', '.join(ATTENTION)} and dtype one of {', '.join(DTYPES)}")
    if not _whole(data.get("seed"), 0, 2**31) or data.get("dynamic", True) not in (True, None):
        raise ValueError("model case: seed must be a whole number and dynamic true or null")
    step = data.get("step")
    if step is not None and not (isinstance(step, dict) and set(step) == {"optimizer", "lr"}
                                 and step["optimizer"] == "sgd" and isinstance(step["lr"], (int, float))
                                 and not isinstance(step["lr"], bool) and 0 < step["lr"] <= 1):
        raise ValueError("model case: step must be null or {\"optimizer\": \"sgd\", \"lr\": 0 < lr <= 1}")
    calls = data.get("calls")
    if not isinstance(calls, list) or not 1 <= len(calls) <= MAX_CALLS:
        raise ValueError(f"model case: calls must be a list of 1..{MAX_CALLS} calls")
    for i, call in enumerate(calls):
        _check_call(call, f"model case: calls[{i}]")
    if any(c["kind"] == "train" for c in calls) and step is None:
        raise ValueError("model case: a training call needs the case's step")
    if not isinstance(data.get("origin", {}), dict):
        raise ValueError("model case: origin must be an object")
    return data


def describe_call(call) -> str:
    """One call in a line, as a repro's reader sees it."""
    sizes = f"batch {call['batch']}, seq {call.get('seq', 1)}"
    extra = []
    if call.get("lengths") and any(n < call.get("seq", 1) for n in call["lengths"]):
        extra.append(f"lengths {call['lengths']}")
    if call.get("positions"):
        extra.append("position ids")
    if call["kind"] == "decode":
        extra.append(f"then {call.get('steps', 1)} decode steps, {call.get('cache', 'dynamic')} cache")
    for what, mark in sorted((call.get("marks") or {}).items()):
        bounds = "".join(f" {b}={mark[b]}" for b in ("min", "max") if mark.get(b) is not None)
        extra.append(f"{mark['mark']} {what}{bounds}")
    return f"{call['kind']}: {sizes}" + (f" ({'; '.join(extra)})" if extra else "")


def schedule_lines(calls, failing=None, most: int = 8) -> list:
    """The calls, a line each, as a repro's reader sees them: every call where they are few; else
    the first ones, the failing one, and the rest summed up (their kinds and the sizes they span)."""
    if len(calls) <= most:
        return [f"call {i}: {describe_call(c)}" for i, c in enumerate(calls)]
    shown = set(range(most - 2)) | ({failing} if failing is not None else set())
    lines, skipped = [], []

    def flush():
        if skipped:
            group = [calls[i] for i in skipped]
            kinds = sorted({c["kind"] for c in group})
            batches = [c["batch"] for c in group]
            seqs = [c.get("seq", 1) for c in group]
            lines.append(f"calls {skipped[0]}-{skipped[-1]}: {len(group)} {'/'.join(kinds)}s, batch "
                         f"{min(batches)}-{max(batches)}, seq {min(seqs)}-{max(seqs)}")
            skipped.clear()

    for i, call in enumerate(calls):
        if i in shown:
            flush()
            lines.append(f"call {i}: {describe_call(call)}" + ("   <- fails here" if i == failing else ""))
        else:
            skipped.append(i)
    flush()
    return lines

