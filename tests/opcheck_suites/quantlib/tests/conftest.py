import pytest
import torch

import quantlib


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def code():
    """The library's 256-entry quantization table (every test uses this one)."""
    return quantlib.create_dynamic_map()
