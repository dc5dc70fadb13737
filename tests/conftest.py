"""Test-wide settings: 2 torch threads (the CI machine has 2 cores), headless plotting."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")
os.environ.setdefault("MPLBACKEND", "Agg")

try:
    import torch

    torch.set_num_threads(2)
except ImportError:  # the engine tests do not need torch
    pass
