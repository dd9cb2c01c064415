"""A model finding's short ``repro.py``: torch and transformers, the bug in a screenful.

What an upstream report needs: the architecture built from its config class (random weights
from a seed, nothing downloaded), the calls a line each, one ``torch.compile``, and a plain
check at the failing call: the error the compiled call raises (a crash, a refused mark); the
recompile torch makes there (``torch._dynamo.config.error_on_recompile``, turned on just
before that call, with torch's own words for every guard that failed); or
``torch.testing.assert_close`` on each output (a wrong value). The inputs are made exactly as
the campaign made them (``fuzz/model_runtime.make_inputs``: seeded ids or values, a padding
mask from lengths, position ids), so a value bug shows on the same numbers.

The judged script (``corpus.scripts.render_model_repro``: the float64 reference, torch's own
guard rules, the signature) is ``judge.py`` beside it; confirmation runs that one. Calls this
cannot show plainly get no short script (``render_model_short`` returns None): a training step
before the failing call, a recompile inside a decode loop (which step recompiled is the judge's
bookkeeping), another device. A wrong value in a decode loop is checked at each of its steps.
"""

from __future__ import annotations

import json
from typing import Optional

from symfuzz.corpus.scripts import Helpers, lane_configure_lines, prelude
from symfuzz.fuzz.model_case import ARCHS, LENGTH_DIMS, MAIN_INPUT, schedule_lines
from symfuzz.oracles.verdict import error_headline

# The symptoms a short script shows, and how: an error out of the compiled call, a recompile, a value.
_RAISED, _RECOMPILED, _VALUES = ("crash", "over-specialization"), ("excess-recompiles", "lost-dynamism"), \
    ("value-mismatch", "metadata-mismatch")
COMPILED_LINE = "actual = compiled(**kwargs)"  # a crash must come out of this line (short_mismatch)

# Each kind's inputs, as model_runtime._make_inputs makes them (the same generator calls, in order).
_TEXT = ['    kwargs = {"input_ids": torch.randint(0, VOCAB, (batch, length), generator=gen)}',
         '    if call.get("lengths"):  # a padding mask from the rows\' lengths (PADDING)',
         '        kwargs["attention_mask"] = torch.tensor([[int(KEPT) for i in range(length)] for n in call["lengths"]])']
_INPUTS = {
    "decoder": _TEXT + ['    if call.get("positions"):  # position ids that skip the padding',
                        '        mask = kwargs.get("attention_mask", torch.ones(batch, length, dtype=torch.long))',
                        '        kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)'],
    "encoder": _TEXT,
    "seq2seq": _TEXT + ['    kwargs["decoder_input_ids"] = torch.randint(0, VOCAB, (batch, call.get("target", 2)), generator=gen)'],
    "image": ['    pixels = torch.randn(batch, CHANNELS, length, length, generator=gen).to(DTYPE)',
              '    kwargs = {"pixel_values": pixels, "interpolate_pos_encoding": True}'],
    "audio": ['    kwargs = {"input_values": torch.randn(batch, length, generator=gen).to(DTYPE)}'],
    "features": ['    kwargs = {"input_features": torch.randn(batch, MELS, FRAMES, generator=gen).to(DTYPE)}'],
}
# A decode call's forwards, as model_runtime._steps makes them.
_FORWARDS = [
    "def forwards(model, call, kwargs, key):",
    '    """A call\'s forwards: its one, or the prefill and each decode step on a KV cache of its own."""',
    '    if call["kind"] != "decode":',
    "        yield kwargs",
    "        return",
    '    cache = transformers.StaticCache(config=model.config, max_cache_len=call.get("seq", 1) + call.get("steps", 1)) \\',
    '        if call.get("cache") == "static" else transformers.DynamicCache(config=model.config)',
    '    gen, mask = torch.Generator().manual_seed(call["seed"] + 1), kwargs.get("attention_mask")',
    '    yield {**kwargs, key: cache, "use_cache": True}',
    '    for _ in range(call.get("steps", 1)):',
    '        step = {"input_ids": torch.randint(0, VOCAB, (call["batch"], 1), generator=gen), key: cache, "use_cache": True}',
    "        if mask is not None:",
    '            mask = step["attention_mask"] = torch.cat([mask, torch.ones(call["batch"], 1, dtype=mask.dtype)], 1)',
    '            if call.get("positions"):',
    '                step["position_ids"] = mask.sum(-1, keepdim=True) - 1',
    "        yield step",
]


def render_model_short(finding) -> Optional[str]:
    """The short repro of a model finding (``corpus.finding.Finding``), or None where only the
    judged script can show it."""
    case, verdict, lane = finding.case, finding.verdict, finding.lane
    failing, symptom = verdict.call_index, verdict.symptom
    if failing is None or symptom not in _RAISED + _RECOMPILED + _VALUES or lane.get("device", "cpu") != "cpu" \
            or lane.get("mode") or lane.get("runner") or lane.get("setup"):
        return None
    calls = case["calls"][: failing + 1]  # the calls after the failing one change nothing
    if any(c["kind"] == "train" for c in calls) or (calls[-1]["kind"] == "decode" and symptom in _RECOMPILED):
        return None  # a training step's weights, or which step of a loop recompiled: the judged script's bookkeeping
    config_class, model_class, kind = ARCHS[case["arch"]]
    decodes = any(c["kind"] == "decode" for c in calls)
    dtype = case.get("dtype") or "float32"
    evidence = verdict.evidence.to_json() if verdict.evidence is not None else {}
    error = evidence.get("error") or {}
    what = evidence.get("detail") or symptom
    if error:
        what = f"compiled raised {str(error.get('type', '')).rsplit('.', 1)[-1]}: {error_headline(error.get('message'))}"
    title = f"{symptom} in {case['arch']} (transformers' {model_class}) at call {failing}: {what}"
    about = ("The calls, each to one torch.compile'd model:\n" + "\n".join(f"  {line}" for line in schedule_lines(calls, failing))
             + f"\n\nFound by symfuzz ({verdict.signature}) with torch {finding.environment.get('torch')} and "
             f"transformers {finding.environment.get('transformers')}. It needs only those two, and exits 1 while "
             "the bug is present, 0 once it is fixed. judge.py beside it is the judged script (a float64 "
             "reference for rounding, torch's own guard rules).")
    imports = ["import copy", *(["import inspect"] if decodes else []), "import transformers"]
    lines = [prelude(title, about, env=lane.get("env") or {}, imports=imports, stack_dumps=False).rstrip(), "",
             f"CONFIG = {_literal(case['config'])}  # transformers.{config_class}'s keyword arguments",
              "CALLS = ["]
    lines += [f"    {_literal(c)},{'  # fails here' if i == failing else ''}" for i, c in enumerate(calls)]
    lines += ["]", "", "", "def make_inputs(call):", '    batch, length = call["batch"], call.get("seq", 1)',
              '    gen = torch.Generator().manual_seed(call["seed"])', *_input_lines(kind, case, dtype),
              "    return kwargs", "", "", *_mark_lines(kind)]
    if decodes:
        lines += ["", "", *[line.replace("VOCAB", repr(case["config"].get("vocab_size", 64))) for line in _FORWARDS]]
    configure = lane_configure_lines(lane, Helpers())
    lines += ["", "", "def configure():  # the Inductor config symfuzz's lane ran with",
              *[f"    {line}" for line in configure or ["pass"]], "", ""]
    lines += _main_lines(case, lane, model_class, config_class, dtype, symptom, failing, decodes,
                         evidence.get("recompile_reason"))
    return "\n".join(lines).rstrip() + "\n"


def _literal(value) -> str:
    """A JSON value as Python source (true/false/null as True/False/None)."""
    return repr(json.loads(json.dumps(value, sort_keys=True)))


def _input_lines(kind, case, dtype):
    config = case["config"]
    names = {"VOCAB": repr(config.get("vocab_size", 64)), "DTYPE": f"torch.{dtype}",
             "CHANNELS": repr(config.get("num_channels", 3)), "MELS": repr(config.get("num_mel_bins", 80)),
             "FRAMES": repr(2 * config.get("max_source_positions", 1500)),
             "PADDING": "left, for a decoder" if kind == "decoder" else "right",
             "KEPT": "i >= length - n" if kind == "decoder" else "i < n"}
    out = []
    for line in _INPUTS[kind]:
        for name, value in names.items():
            line = line.replace(name, value)
        out.append(line)
    return out


def _mark_lines(kind):
    main, dims = MAIN_INPUT[kind], LENGTH_DIMS[kind]
    return ["def mark(kwargs, call):",
            f'    """The call\'s marks: {main}\'s batch (dim 0) or length (dims {dims}), on each input that shares it."""',
            f"    main = kwargs[{main!r}]",
            '    for what, how in sorted((call.get("marks") or {}).items()):',
            "        for t in [t for t in kwargs.values() if isinstance(t, torch.Tensor) and t.dim() >= 1]:",
            '            if (t.shape[0] == main.shape[0]) if what == "batch" else '
            "(t.dim() == main.dim() and t.shape[:2] == main.shape[:2]):",
            f'                for dim in ((0,) if what == "batch" else {dims!r}):',
            '                    if how["mark"] == "dynamic":',
            '                        torch._dynamo.mark_dynamic(t, dim, **{k: how[k] for k in ("min", "max") if k in how})',
            "                    else:",
            "                        torch._dynamo.maybe_mark_dynamic(t, dim)"]


def _main_lines(case, lane, model_class, config_class, dtype, symptom, failing, decodes, verdict_guard=None):
    out = ["def main():",
           "    configure()",
           f"    config = transformers.{config_class}(**CONFIG)",
           f"    config._attn_implementation = {case.get('attn') or 'eager'!r}",
           f"    torch.manual_seed({case['seed']})  # the random weights",
           f"    model = transformers.{model_class}(config).to(torch.{dtype}).eval()",
           "    # A copy of its own, as in symfuzz's run: eager forwards may update a model's buffers (a rope cache).",
           f"    compiled = torch.compile(copy.deepcopy(model), backend={lane.get('backend')!r}, "
           f"dynamic={case.get('dynamic')!r})"]
    if decodes:
        out.append('    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"')
    out += ["    with torch.no_grad():", "        for i, call in enumerate(CALLS):",
            "            kwargs = make_inputs(call)"]
    if symptom in _RECOMPILED:
        out += [f"            if i == {failing}:  # torch's own rules say a graph compiled above accepts this call",
                "                torch._logging.set_logs(recompiles_verbose=True)",
                "                torch._dynamo.config.error_on_recompile = True"]
    if decodes:
        out += ["            eager = list(forwards(model, call, make_inputs(call), key))",
                "            mark(kwargs, call)",
                "            for j, kwargs in enumerate(forwards(model, call, kwargs, key)):",
                "                expected = model(**eager[j])"]
        indent = "                "
    else:
        out += ["            expected = model(**kwargs)", "            mark(kwargs, call)"]
        indent = "            "
    out += [f"{indent}try:", f"{indent}    {COMPILED_LINE}"]
    if symptom in _RECOMPILED:
        guard = (verdict_guard or "")[:80]
        out += [f"{indent}except torch._dynamo.exc.RecompileError as exc:",
                f"{indent}    if {guard!r} not in str(exc):  # the guard symfuzz saw fail",
                f"{indent}        raise RuntimeError(f\"call {{i}} recompiled, but not on the guard symfuzz saw: {{exc}}\")",
                f"{indent}    raise AssertionError(f\"call {{i}}: recompiled where torch's own rules say a graph "
                "compiled before accepts the sizes:\\n{exc}\") from None"]
    out += [f"{indent}except Exception as exc:  # symfuzz's run went on past an error before the failing call",
            f"{indent}    if i == {failing}:",
            f"{indent}        raise",
            f"{indent}    print(f\"call {{i}}: compiled raised {{type(exc).__name__}}, as in symfuzz's run; not this bug\")",
            f"{indent}    {'break' if decodes else 'continue'}"]
    if symptom in _VALUES:
        # Deferred: torch, which rendering needs only here.
        import torch
        from symfuzz.fuzz.runtime.comparing import TOLERANCES

        rtol, atol = TOLERANCES[getattr(torch, dtype)]  # the judge's, compiled against eager
        out += [f"{indent}for name, want in expected.items() if i == {failing} else ():",
                f"{indent}    if isinstance(want, torch.Tensor):",
                f"{indent}        try:",
                f"{indent}            torch.testing.assert_close(actual[name], want, rtol={rtol}, atol={atol})",
                f"{indent}        except AssertionError as exc:",
                f"{indent}            raise AssertionError(f\"call {{i}}: {{name}}: compiled differs from eager: "
                "{exc}\") from None"]
    return out + ['    print("no failure: the bug is fixed")', "", "", 'if __name__ == "__main__":', "    main()"]
