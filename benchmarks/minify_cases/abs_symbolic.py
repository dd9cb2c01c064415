"""A user's bug report for the `abs-symbolic` plant: a silent wrong result.

A small MLP block whose middle takes ``torch.abs`` of a residual. The batch
dimension is marked dynamic, so Inductor compiles one graph with a symbolic
batch size; under the plant its abs lowering then negates its result, and
the compiled model disagrees with eager. Run with the plant on
(SYMFUZZ_PLANT=abs-symbolic, tests/plants on PYTHONPATH) and the final check
raises AssertionError; without it the script passes.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = self.norm(h)
        h = h * torch.sigmoid(h)
        g = self.fc2(h)
        g = torch.abs(g - h.mean(dim=-1, keepdim=True))  # the planted op, mid-graph
        g = g + torch.tanh(h) * 0.5
        out = self.fc3(g).softmax(dim=-1)
        return out * x.sum(dim=-1, keepdim=True).cos()


def main():
    torch.manual_seed(0)
    model = Block().eval()
    compiled = torch.compile(model, backend="inductor")
    with torch.no_grad():
        for batch in (8, 5):
            x = torch.randn(batch, 16)
            torch._dynamo.mark_dynamic(x, 0)
            expected = model(x)
            got = compiled(x)
            torch.testing.assert_close(got, expected, msg=f"compiled != eager at batch {batch}")
    print("ok")


if __name__ == "__main__":
    main()
