import torch


def test_torch_imports():
    assert torch.tensor([1, 2]).sum().item() == 3
