"""Test-wide settings: 2 torch threads (the CI machine has 2 cores), headless plotting."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")
# OpenMP threads that spin-wait between tiny ops starve each other on a shared 2-core machine
# (a tiny decode went from 17 ms to 1 s under load); passive waiting avoids it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("MPLBACKEND", "Agg")
# caches (target attributes) go to a folder of this session, never to the user's home
if "INTRABENCH_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["INTRABENCH_CACHE"] = tempfile.mkdtemp(prefix="intrabench-test-cache-")
    # removed when the session ends: every run left one in the temporary directory
    atexit.register(shutil.rmtree, os.environ["INTRABENCH_CACHE"], ignore_errors=True)
# exported encoders (ONNX) likewise: never beside the user's checkpoints
os.environ.setdefault(
    "INTRABENCH_EXPORTS", os.path.join(os.environ["INTRABENCH_CACHE"], "exported-encoders")
)

try:
    import torch

    torch.set_num_threads(2)
except ImportError:  # the engine tests do not need torch
    pass

# the benchmark doubles (synthetic-network, synthetic-network-2d) are not built-in models: the
# tests that run them get them registered here, as a config gets them through its imports:
import intrabench.testing.synthetic_network  # noqa: E402, F401
