"""The model source running for real: a small Llama built from its config alone, called through a
schedule of sizes (padding, position ids, a decode loop over a growing KV cache, a training step)
on the cheapest lane, in this process. On stock torch every call is checked and nothing fails."""

import pytest

pytest.importorskip("transformers")

from symfuzz.oracles.lanes.lane import get_lane  # noqa: E402
from symfuzz.oracles.model_oracles import run_model_case  # noqa: E402

CONFIG = {"hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1,
          "intermediate_size": 32, "vocab_size": 64, "max_position_embeddings": 64, "head_dim": 8,
          "pad_token_id": 0, "attention_dropout": 0.0}
CALLS = [
    {"kind": "forward", "batch": 2, "seq": 5, "seed": 1, "lengths": [5, 3], "positions": True,
     "marks": {"length": {"mark": "dynamic", "min": 2, "max": 64}}},
    {"kind": "forward", "batch": 3, "seq": 9, "seed": 2, "lengths": [9, 4, 7], "positions": True},
    {"kind": "decode", "batch": 2, "seq": 4, "seed": 3, "lengths": [4, 2], "positions": True, "steps": 3},
    {"kind": "train", "batch": 2, "seq": 6, "seed": 4, "lengths": [6, 6], "positions": True},
    {"kind": "forward", "batch": 2, "seq": 11, "seed": 5, "lengths": [11, 8], "positions": True},
]


def test_a_real_architecture_runs_its_schedule_on_one_compiled_model_and_stock_torch_passes():
    case = {"kind": "model", "arch": "llama", "config": CONFIG, "attn": "sdpa", "dtype": "float32", "seed": 7,
            "dynamic": True, "step": {"optimizer": "sgd", "lr": 0.05}, "calls": CALLS}
    result = run_model_case(case, get_lane("eager"))
    assert result["verdicts"] == [], result["verdicts"]
    # One entry per forward: the decode call is its prefill and three steps.
    assert result["calls"] == len(CALLS) + 3 and result["checked"] == result["calls"], result["first_errors"]
    assert result["features"]["architecture"] == "llama" and result["features"]["gradient_calls"] == 1
    # Inside the first graph's guards, the second forward and the last reuse it: no compile.
    graphs = result["graphs"]
    assert graphs[0] > 0 and graphs[1] == 0 and graphs[-1] == 0, graphs
