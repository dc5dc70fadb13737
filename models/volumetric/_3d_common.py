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
from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import Model
from intrabench.io.checkpoints import checkpoint_path, readiness


def availability_of(key: str, checkpoint_dir: str | None = None) -> str:
    """'ready' when checkpoint ``key`` is in the checkpoint directory and known to be the
    pinned file, else why not (missing, wrong, unverified: :func:`readiness`)."""
    return readiness(key, checkpoint_dir)


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
    from intrabench.models.runtime._precision import check_precision, resolve_precision

    check_precision(precision)
    selected = select_device(device)
    return selected, resolve_precision(precision, selected)


def build_network(
    make_net: Callable[[], Any],
    load_weights: Callable[[Any, str], None],
    checkpoint: str | None,
    seed: int,
    device: Any,
) -> Any:
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


class CentredGrid:
    """torchio's ``Resample(target_mm)`` grid: per axis ``floor(n * s / target)`` voxels of
    ``target`` mm (at least 1; a singleton axis stays 1) whose centre coincides with the
    original grid's centre, so the field of view shrinks by less than one new voxel and is
    never extrapolated.

    Index maps, per axis (original index ``i``, new index ``j``, ratio ``r = target / s``):
    ``i = offset + j * r`` with ``offset = (n - 1) / 2 - (m - 1) / 2 * r``. Arrays are
    ``(z, y, x)``; spacings mm in the same order.
    """

    def __init__(
        self, shape: tuple[int, ...], spacing: tuple[float, ...], target_mm: float
    ) -> None:
        self.original = tuple(int(n) for n in shape)
        self.ratio = np.array([target_mm / float(s) for s in spacing])
        self.shape = tuple(
            1 if n == 1 else max(1, int(np.floor(n * s / target_mm)))
            for n, s in zip(self.original, spacing)
        )
        n = np.asarray(self.original, dtype=float)
        m = np.asarray(self.shape, dtype=float)
        self.offset = (n - 1) / 2 - (m - 1) / 2 * self.ratio

    def to_grid(self, coords: np.ndarray) -> np.ndarray:
        """(N, 3) original voxel indices -> float indices on the new grid."""
        return (np.asarray(coords, dtype=float) - self.offset) / self.ratio

    def resample(self, array: np.ndarray) -> np.ndarray:
        """``array`` (on the original grid) linearly interpolated at the new voxel centres,
        float32; positions beyond the last original voxel centre take the edge value (ITK's
        linear interpolator, which torchio uses, clamps its neighbours the same way)."""
        out = np.asarray(array, dtype=np.float32)
        for axis in range(3):
            out = _linear_along(out, self._positions(axis), axis)
        return out

    def resample_with_torch(self, array: np.ndarray, device: Any) -> np.ndarray:
        """:meth:`resample` computed by torch on ``device`` (a GPU: milliseconds where NumPy
        takes about a second for a CT on the CPU while the card waits), equal to it to the
        bit: the same neighbours and float32 fractions (computed on the host, as there), then
        per axis the same float32 difference, product and sum, each an eager kernel of its own
        and so rounded on its own (no fused multiply-add). Returns a NumPy array."""
        import torch

        out = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(device)
        for axis in range(3):
            low, high, frac = _neighbours(self._positions(axis), out.shape[axis])
            shape = [1] * out.ndim
            shape[axis] = len(frac)
            below = out.index_select(axis, torch.from_numpy(low).to(device))
            above = out.index_select(axis, torch.from_numpy(high).to(device))
            del out
            weight = torch.from_numpy(frac.reshape(shape)).to(device)
            out = below + (above - below) * weight
            del below, above
        return out.cpu().numpy()

    def _positions(self, axis: int) -> np.ndarray:
        """The new voxel centres along ``axis`` as float original indices."""
        return self.offset[axis] + np.arange(self.shape[axis]) * self.ratio[axis]

    def nearest_original(self, axis: int) -> np.ndarray:
        """For each original index along ``axis``, the nearest new index (ITK's nearest
        neighbour: round half up), -1 where it falls outside the new grid."""
        index = np.floor(
            (np.arange(self.original[axis]) - self.offset[axis]) / self.ratio[axis] + 0.5
        ).astype(np.int64)
        return np.where((index >= 0) & (index < self.shape[axis]), index, -1)


def _neighbours(positions: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For float ``positions`` on an axis of ``size`` voxels (clamped to it): the lower and
    upper neighbours' indices (int64) and the float32 weight of the upper one."""
    positions = np.clip(positions, 0.0, size - 1.0)
    low = np.floor(positions).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    return low, high, (positions - low).astype(np.float32)


def _linear_along(array: np.ndarray, positions: np.ndarray, axis: int) -> np.ndarray:
    """Linear interpolation of ``array`` at float ``positions`` along ``axis`` (clamped)."""
    low, high, frac = _neighbours(positions, array.shape[axis])
    shape = [1] * array.ndim
    shape[axis] = len(positions)
    frac = frac.reshape(shape)
    below = np.take(array, low, axis=axis)
    above = np.take(array, high, axis=axis)
    return (below + (above - below) * frac).astype(np.float32)


def map_to_grid(
    coords: np.ndarray, old_shape: tuple[int, ...], new_shape: tuple[int, ...]
) -> np.ndarray:
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


def crop_with_padding(
    array: np.ndarray, start: tuple[int, int, int], size: tuple[int, int, int], value: float = 0.0
) -> np.ndarray:
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


class CaseStateAhead:
    """``prepare_case`` for a model whose per-case state is a function of the image alone:
    the subclass computes it in :meth:`case_state` and takes it in ``set_case`` through
    :meth:`state_for`, which returns the state prepared ahead for that very image (the runner
    prepares it in a thread, :mod:`intrabench.execution._case_ahead`) or computes it now."""

    _prepared: tuple[Any, Any] | None = None

    def case_state(self, image: Any) -> Any:
        """What ``set_case(image)`` keeps, from ``image`` alone (no state of the current case
        is read or written: it may run beside forward passes on another case)."""
        raise NotImplementedError

    def prepare_case(self, image: Any) -> None:
        self._prepared = (image, self.case_state(image))

    def state_for(self, image: Any) -> Any:
        """The state of ``image``: prepared ahead (then dropped here) or computed now."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] is image:
            return prepared[1]
        return self.case_state(image)


class NetworkModel3D(Model):
    """What the 3D network adapters share: the model-time counter (``_seconds``, added to by
    ``set_case`` and ``predict``) and availability from the checkpoint table's entry
    ``checkpoint_key``."""

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """Off the CPU on a GPU: from the ``device`` parameter (default ``auto``)."""
        from intrabench.device import computes_off_cpu

        return computes_off_cpu(params.get("device", "auto"))

    checkpoint_key: ClassVar[str] = ""
    _seconds: float = 0.0

    @classmethod
    def availability(cls) -> str:
        return availability_of(cls.checkpoint_key)

    def model_seconds(self) -> float:
        return self._seconds

    def reset_timer(self) -> None:
        self._seconds = 0.0

    def load_network(
        self,
        make_net: Callable[[], Any],
        load_weights: Callable[[Any, str], None],
        weights: str,
        checkpoint: str | None,
        checkpoint_dir: str | None,
        seed: int,
    ) -> Any:
        """The network on ``self.device``: ``make_net()`` with the checkpoint's weights loaded
        strictly (``weights="checkpoint"``: the explicit file, else the table's file in the
        checkpoint directory; CheckpointError when absent) or random under ``seed``."""
        path = (
            resolve_checkpoint(self.checkpoint_key, checkpoint, checkpoint_dir)
            if weights == "checkpoint"
            else None
        )
        return build_network(make_net, load_weights, path, seed, self.device)
