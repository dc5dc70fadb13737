"""A tiny random-weight clickability network, to plug into the ``network`` model in tests."""

from __future__ import annotations


def build(ndim: int = 3):
    """Two convolutions (3 -> 4 -> 1 channels), fixed random weights (seed 0)."""
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv3d if ndim == 3 else torch.nn.Conv2d
    return torch.nn.Sequential(conv(3, 4, 3, padding=1), torch.nn.ReLU(), conv(4, 1, 3, padding=1))
