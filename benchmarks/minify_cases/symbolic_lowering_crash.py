"""A user's bug report for the `symbolic-lowering-crash` plant: a compile-time crash.

A small gated MLP with a ReLU in the middle. It is called at batch 8 and then
at batch 5, so the second call recompiles with a symbolic batch size
(automatic dynamic shapes); under the plant Inductor's relu lowering then
raises RuntimeError("planted: ..."). Run with the plant on
(SYMFUZZ_PLANT=symbolic-lowering-crash, tests/plants on PYTHONPATH) and the
second call raises; without it the script passes.
"""

import torch
from torch import nn


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 24)
        self.gate = nn.Linear(12, 24)
        self.norm = nn.LayerNorm(24)
        self.mid = nn.Linear(24, 24)
        self.out = nn.Linear(24, 6)

    def forward(self, x):
        a = torch.nn.functional.gelu(self.proj(x))
        b = torch.sigmoid(self.gate(x))
        h = self.norm(a * b)
        h = torch.relu(self.mid(h) - h.mean(dim=0, keepdim=True))  # the planted op, mid-graph
        h = h + torch.tanh(a) * 0.25
        y = self.out(h)
        return torch.log_softmax(y, dim=-1) + x.pow(2).mean(dim=-1, keepdim=True)


def main():
    torch.manual_seed(0)
    model = GatedBlock().eval()
    compiled = torch.compile(model, backend="inductor")
    with torch.no_grad():
        for batch in (8, 5):  # the second call recompiles with a dynamic batch size
            x = torch.randn(batch, 12)
            torch.testing.assert_close(compiled(x), model(x), msg=f"compiled != eager at batch {batch}")
    print("ok")


if __name__ == "__main__":
    main()
