"""The library author's own tests: one sample per op, compared with a reference.

They know nothing about symfuzz; the opcheck plugin (switched on in pytest.ini)
records the op calls they make and checks the ops on shapes swept from them.
"""

import mylib
import torch
import torch.nn.functional as F


def sample(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_scaled_gelu():
    x = sample(4, 8)
    torch.testing.assert_close(mylib.scaled_gelu(x, 0.5), 0.5 * F.gelu(x, approximate="tanh"))


def test_scaled_gelu_grad():
    x = sample(4, 8).requires_grad_()
    mylib.scaled_gelu(x, 2.0).sum().backward()
    ref = x.detach().clone().requires_grad_()
    (2.0 * F.gelu(ref, approximate="tanh")).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)


def test_pair_sum():
    x, y = sample(4, 8), sample(4, 8, seed=1)
    torch.testing.assert_close(mylib.pair_sum(x, y), x + y)


def test_downsample():
    x = sample(4, 8)
    torch.testing.assert_close(mylib.downsample(x), x[:, ::2])


def test_snap():
    x = sample(4, 8)
    torch.testing.assert_close(mylib.snap(x, 0.25), torch.round(x * 4) / 4)
