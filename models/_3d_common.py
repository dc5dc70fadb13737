"""Helpers shared by the 3D model adapters (SAM-Med3D, SegVol): weights, devices, grids.

Array conventions: volumes are canonical numpy arrays ``(z, y, x)``; spacings are mm in the same
order; voxel coordinates are ``(z, y, x)`` indices. Resampling uses the voxel-centre convention
of ``torch.nn.functional.interpolate(..., align_corners=False)``: index ``i`` of an axis of
``n`` voxels maps to ``(i + 0.5) * n_new / n - 0.5`` on an axis of ``n_new`` voxels.

torch is imported inside functions so that importing an adapter module stays cheap.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np

from intrabench.checkpoints import CHECKPOINTS, checkpoint_path, is_present


def availability_of(key: str, checkpoint_dir: str | None = None) -> str:
    """'ready' when checkpoint ``key`` is in the checkpoint directory, else why not."""
    if is_present(key, checkpoint_dir):
        return "ready"
    return f"checkpoint missing: {CHECKPOINTS[key].filename}"


def resolve_checkpoint(key: str, checkpoint: str | None, checkpoint_dir: str | None) -> str:
    """Path of the checkpoint file; raises CheckpointError (naming file and source) if absent."""
    return str(checkpoint_path(key, checkpoint_dir, checkpoint))


@contextmanager
def seeded_init(seed: int):
    """Deterministic random initialisation without touching the global torch RNG state."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def device_and_precision(device: str, precision: str) -> tuple[Any, str]:
    """The torch device for ``device`` ('auto': CUDA > MPS > CPU) and ``precision`` resolved on
    it ('auto' -> 'bf16' on CUDA, else 'fp32'); ValueError for a bad precision."""
    from intrabench.device import select_device

    from ._precision import check_precision, resolve_precision

    check_precision(precision)
    selected = select_device(device)
    return selected, resolve_precision(precision, selected)


def build_network(make_net: Callable[[], Any], load_weights: Callable[[Any, str], None],
                  checkpoint: str | None, seed: int, device: Any) -> Any:
    """``make_net()`` initialised under ``seed``, ``load_weights(net, checkpoint)`` when a
    checkpoint path is given (None: random weights), moved to ``device`` in eval mode."""
    with seeded_init(seed):
        net = make_net()
    if checkpoint is not None:
        load_weights(net, checkpoint)
    return net.to(device).eval()


def check_weights_mode(weights: str, tiny: bool) -> None:
    """``weights``: "checkpoint" (the default, strict load) or "random" (tests/timing only).

    ``tiny`` (tests/timing only) selects the tiny configuration; with "checkpoint" it expects a
    checkpoint saved from a tiny model (loader round-trip tests).
    """
    if weights not in ("checkpoint", "random"):
        raise ValueError(f"weights must be 'checkpoint' or 'random', not {weights!r}")


def resampled_shape(shape: tuple[int, ...], spacing: tuple[float, ...],
                    target_mm: float) -> tuple[int, int, int]:
    """Shape of ``shape`` voxels at ``spacing`` mm resampled to ``target_mm`` isotropic."""
    return tuple(max(1, int(round(n * s / target_mm))) for n, s in zip(shape, spacing))


def map_to_grid(coords: np.ndarray, old_shape: tuple[int, ...],
                new_shape: tuple[int, ...]) -> np.ndarray:
    """(N, 3) voxel coordinates on ``old_shape`` -> float coordinates on ``new_shape``."""
    factor = np.asarray(new_shape, dtype=float) / np.asarray(old_shape, dtype=float)
    return (np.asarray(coords, dtype=float) + 0.5) * factor - 0.5


def resize(array: np.ndarray, shape: tuple[int, int, int], mode: str = "trilinear") -> np.ndarray:
    """Resize a (z, y, x) float array to ``shape`` (torch, CPU, align_corners=False)."""
    import torch
    import torch.nn.functional as F

    if tuple(array.shape) == tuple(shape):
        return np.asarray(array, dtype=np.float32)
    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))[None, None]
    kwargs = {"align_corners": False} if mode == "trilinear" else {}
    return F.interpolate(tensor, size=tuple(shape), mode=mode, **kwargs)[0, 0].numpy()


def crop_with_padding(array: np.ndarray, start: tuple[int, int, int], size: tuple[int, int, int],
                      value: float = 0.0) -> np.ndarray:
    """``array[start : start + size]`` per axis, filled with ``value`` outside the array."""
    out = np.full(size, value, dtype=array.dtype)
    src, dst = [], []
    for a in range(3):
        lo = max(0, start[a])
        hi = min(array.shape[a], start[a] + size[a])
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - start[a], hi - start[a]))
    out[tuple(dst)] = array[tuple(src)]
    return out


def _linear_weights(positions: np.ndarray, size: int) -> np.ndarray:
    """(len(positions), size) linear interpolation matrix, positions clamped to [0, size-1]."""
    positions = np.clip(positions, 0.0, size - 1.0)
    low = np.floor(positions).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    frac = positions - low
    weights = np.zeros((len(positions), size), dtype=np.float32)
    rows = np.arange(len(positions))
    np.add.at(weights, (rows, low), 1.0 - frac)
    np.add.at(weights, (rows, high), frac)
    return weights


def paste_back(values: np.ndarray, start: tuple[int, int, int], grid_shape: tuple[int, int, int],
               original_shape: tuple[int, int, int]) -> tuple[tuple[slice, ...], np.ndarray]:
    """Trilinearly sample a crop of a resampled grid at the original voxels it covers.

    ``values`` (cz, cy, cx) lies at ``start`` on a grid of ``grid_shape`` voxels that resamples
    the original ``original_shape`` grid. Returns the original-grid region (slices) covered by
    the crop and the interpolated values there (separable linear interpolation, exact trilinear).
    """
    region: list[slice] = []
    matrices: list[np.ndarray] = []
    for a in range(3):
        factor = grid_shape[a] / original_shape[a]
        index = np.arange(original_shape[a])
        local = (index + 0.5) * factor - 0.5 - start[a]
        inside = np.flatnonzero((local >= -0.5) & (local <= values.shape[a] - 0.5))
        if len(inside) == 0:
            return tuple(slice(0, 0) for _ in range(3)), np.zeros((0, 0, 0), np.float32)
        region.append(slice(int(inside[0]), int(inside[-1]) + 1))
        matrices.append(_linear_weights(local[inside], values.shape[a]))
    out = np.tensordot(matrices[0], values, axes=(1, 0))                      # (nz, cy, cx)
    out = np.tensordot(out, matrices[1], axes=(1, 1)).transpose(0, 2, 1)      # (nz, ny, cx)
    out = np.tensordot(out, matrices[2], axes=(2, 1))                         # (nz, ny, nx)
    return tuple(region), out.astype(np.float32)


class EncodingCache:
    """Image encodings of the current case keyed by crop/window, oldest dropped beyond a bound."""

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        return None

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
