"""Stand-ins for large networks: fixed forward time, masks shaped like a trained model's.

``synthetic-network`` lets anyone measure the engine around a GPU model without a GPU: each
:meth:`~SyntheticNetwork.predict` takes ``forward_ms`` milliseconds of wall time, like a
synchronised GPU forward pass (the CPU is free while it waits), and returns a mask that looks
like what a trained network gives on CT: the structure under the prompt (grown from the
prompt's seed voxel within ``tolerance`` image units, inside a region of interest), perturbed
(dilated, eroded or shifted by one voxel) and, with probability ``leak_probability``, leaking
into a large ellipsoidal region of the body around it, as single clicks on CT sometimes do.
``accepts`` narrows the prompt kinds it takes to those of the model it stands for.
``setup_of`` (``{name: sam-med3d, params: {...}}``) makes the stand-in also build that real model
(``prepare``) and run its ``set_case`` on every case, never its forward pass: a proxy run then
has the phases a real run has outside its forward passes (building the network, e.g. random
weights drawn on the CPU; the model's per-case set-up, e.g. SAM-Med3D's resampling to 1.5 mm),
at this machine's speed. ``stands_for`` names the model it stands for: its passes are counted
under that name (``forward_calls_by_model``), to calibrate the proxy per model.

Every choice is drawn from a generator seeded by the prompt's content, so a prompt always gives
the same mask, whatever the order of calls. Masks are (z, y, x) booleans on the image grid.
Negative clicks remove a ball of ``eraser_mm`` around them; the previous mask is replaced
(the model takes ``mask`` so that corrective refiners can drive it).

``synthetic-network-2d`` does the same slice by slice (one ``forward_ms`` per predicted slice,
like a 2D model's encoder call), for the per-slice prompters and their propagation.

Used by ``benchmarks/bench_gpu_run.py --proxy-ms`` and the engine's throughput tests; it is
not a segmentation method.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, ClassVar

import numpy as np
from scipy import ndimage

from intrabench.errors import ConfigError
from intrabench.interfaces import Model, SliceModel, SliceOutput
from intrabench.io.volume import Volume
from intrabench.masks import bounding_box_within, connected_components, union_of_boxes
from intrabench.registry import models
from intrabench.types import Prediction, Prompt, SlicePrompt


def _ellipsoid(radii: np.ndarray) -> np.ndarray:
    """Boolean ellipsoid with semi-axes ``radii`` (voxels, z, y, x), centred in its box."""
    half = np.ceil(radii).astype(int)
    z, y, x = np.ogrid[-half[0] : half[0] + 1, -half[1] : half[1] + 1, -half[2] : half[2] + 1]
    return (z / radii[0]) ** 2 + (y / radii[1]) ** 2 + (x / radii[2]) ** 2 <= 1.0


class _StandIn:
    """What both stand-ins share: their parameters and the fixed forward time."""

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """Always: the stand-ins stand for GPU networks (the CPU is free while they wait)."""
        return True

    #: forward passes (and their seconds) of every stand-in in this process, for benchmarks
    total_forward_seconds: ClassVar[float] = 0.0
    total_forward_calls: ClassVar[int] = 0
    #: the same passes at their nominal ``forward_ms`` (a calibrated card's time), in seconds
    nominal_forward_seconds: ClassVar[float] = 0.0
    #: the same passes by the name of the model each stand-in stands for (``stands_for``; its
    #: own name without one): a card's forward seconds per model over these calibrate it
    forward_calls_by_model: ClassVar[dict[str, int]] = {}

    def _configure_stands_for(self, stands_for: str | None) -> None:
        if stands_for is not None and (
            not isinstance(stands_for, str) or not 0 < len(stands_for) <= 200
        ):
            raise ConfigError(
                f"{self.name}: stands_for must be a model's name, not {stands_for!r:.80}"
            )
        self.stands_for = stands_for or self.name

    def _configure_setup(self, setup_of: dict[str, Any] | None) -> None:
        """Check ``setup_of`` (see the module docstring): a mapping with a registered model
        ``name`` (not a stand-in) and optional ``params``; the model is built later."""
        self._real: Model | None = None
        self._setup_of: tuple[str, dict[str, Any]] | None = None
        if setup_of is None:
            return
        if not isinstance(setup_of, dict) or set(setup_of) - {"name", "params"}:
            raise ConfigError(
                f"{self.name}: setup_of must be a mapping with 'name' and "
                f"'params', not {setup_of!r:.80}"
            )
        name, params = setup_of.get("name"), setup_of.get("params") or {}
        if not isinstance(name, str):
            raise ConfigError(f"{self.name}: setup_of names no model: {name!r:.80}")
        if issubclass(models.get(name), _StandIn):  # an unknown name: the registry's line
            raise ConfigError(f"{self.name}: setup_of must name a real model, not {name!r}")
        if not isinstance(params, dict):
            raise ConfigError(
                f"{self.name}: setup_of's params must be a mapping, not {params!r:.80}"
            )
        models.check_params(name, dict(params))
        self._setup_of = (name, dict(params))

    def prepare(self) -> None:
        """Build the real model of ``setup_of`` now (nothing without it)."""
        self._set_up_model()

    def _set_up_model(self) -> Model | None:
        """The real model of ``setup_of``, built and prepared on first use; None without."""
        if self._setup_of is None:
            return None
        if self._real is None:
            name, params = self._setup_of
            real = models.create(name, params)
            real.prepare()
            self._real = real
        return self._real

    def prepare_case(self, image: Volume) -> None:
        """The real model's ``prepare_case`` (its set-up ahead), when there is one."""
        real = self._set_up_model()
        if real is not None:
            real.prepare_case(image)

    def _set_up_case(self, image: Volume) -> None:
        """The real model's ``set_case`` (its per-case set-up), when there is one."""
        real = self._set_up_model()
        if real is not None:
            real.set_case(image)

    @classmethod
    def accepts_for(cls, params: dict[str, Any]) -> frozenset[str]:
        """The stand-in's prompt kinds, narrowed by its ``accepts`` parameter (a list of kinds
        it takes, e.g. the kinds of the model it stands for: a stand-in for SegVol leaves out
        ``mask``, so a run does not refine it where the real run would not)."""
        wanted = params.get("accepts")
        if wanted is None:
            return cls.accepts
        if not isinstance(wanted, (list, tuple)) or not all(isinstance(k, str) for k in wanted):
            raise ConfigError(
                f"{cls.name}: accepts must be a list of prompt kinds, not {wanted!r:.80}"
            )
        unknown = set(wanted) - cls.accepts
        if unknown:
            raise ConfigError(
                f"{cls.name} cannot take {', '.join(sorted(unknown))} prompts "
                f"(it takes {', '.join(sorted(cls.accepts))})"
            )
        return frozenset(wanted)

    def _configure(
        self,
        forward_ms: float,
        leak_probability: float,
        tolerance: float,
        context_mm: float,
        leak_radius_mm: float,
    ) -> None:
        if not math.isfinite(forward_ms) or forward_ms < 0 or not 0.0 <= leak_probability <= 1.0:
            raise ValueError(
                "forward_ms must be a finite number >= 0 and leak_probability in [0, 1]"
            )
        self.forward_ms = float(forward_ms)
        self.leak_probability = float(leak_probability)
        self.tolerance = float(tolerance)
        self.context_mm = float(context_mm)
        self.leak_radius_mm = float(leak_radius_mm)

    def _finish_forward(self, started: float) -> float:
        """Wait out the rest of ``forward_ms`` since ``started`` (the rest of the "GPU call":
        the CPU is free meanwhile), count the pass; returns its seconds."""
        remaining = self.forward_ms / 1000.0 - (time.perf_counter() - started)
        if remaining > 0:
            time.sleep(remaining)
        elapsed = time.perf_counter() - started
        _StandIn.total_forward_seconds += elapsed
        _StandIn.total_forward_calls += 1
        _StandIn.nominal_forward_seconds += self.forward_ms / 1000.0
        counts = _StandIn.forward_calls_by_model
        counts[self.stands_for] = counts.get(self.stands_for, 0) + 1
        return elapsed


@models.register
class SyntheticNetwork(_StandIn, Model):
    """Fixed-latency stand-in for a network (see the module docstring); CPU only."""

    name: ClassVar[str] = "synthetic-network"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "box3d", "scribble", "mask"})

    def __init__(
        self,
        forward_ms: float = 10.0,
        leak_probability: float = 0.2,
        tolerance: float = 45.0,
        context_mm: float = 30.0,
        leak_radius_mm: float = 60.0,
        eraser_mm: float = 4.0,
        accepts: list[str] | None = None,
        setup_of: dict[str, Any] | None = None,
        stands_for: str | None = None,
    ) -> None:
        self._configure(forward_ms, leak_probability, tolerance, context_mm, leak_radius_mm)
        self.accepts = self.accepts_for({"accepts": accepts})
        self._configure_setup(setup_of)
        self._configure_stands_for(stands_for)
        self.eraser_mm = float(eraser_mm)
        self._image: Volume | None = None
        self._seconds = 0.0

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x)) and set up its simulated encoder state."""
        self._set_up_case(image)
        self._image = image

    def model_seconds(self) -> float:
        """Seconds spent predicting since :meth:`reset_timer`."""
        return self._seconds

    def reset_timer(self) -> None:
        """Set the model-seconds counter to zero."""
        self._seconds = 0.0

    # -- prediction -----------------------------------------------------------------------

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """The benchmark double's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous step's prediction (its mask and feedback), or None.
            update_slices: Unused (a 3D double).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the model's seconds and feedback.

        Raises:
            RuntimeError: :meth:`set_case` was not called.
        """
        if self._image is None:
            raise RuntimeError("synthetic-network: set_case() was not called")
        started = time.perf_counter()
        rng = np.random.default_rng(int.from_bytes(_digest(prompt)[:8], "little"))
        shape = self._image.shape
        mask = np.zeros(shape, dtype=bool)
        points, labels = prompt.model_points()
        # scribbles arrive as many points: a few seeds and erasers stand for them
        seeds = list(_spread(points[labels == 1], 8))
        if not seeds and prompt.box3d is not None:
            b = prompt.box3d
            seeds = [
                np.array(
                    [(b.z_min + b.z_max) // 2, (b.y_min + b.y_max) // 2, (b.x_min + b.x_max) // 2]
                )
            ]
        for z, box in prompt.boxes.items():
            seeds.append(np.array([z, (box.y_min + box.y_max) // 2, (box.x_min + box.x_max) // 2]))
        written = [self._grow(mask, np.asarray(seed, dtype=int), rng) for seed in seeds]
        if seeds and rng.random() < self.leak_probability:
            written.append(self._leak(mask, np.asarray(seeds[0], dtype=int), rng))
        for point in _spread(points[labels == 0], 32):
            self._erase(mask, np.asarray(point, dtype=int))
        # like a network that writes its crop into an empty volume, it knows where the mask is
        known = bounding_box_within(mask, union_of_boxes(written))
        self._seconds += self._finish_forward(started)
        return Prediction(mask, box=known)

    def _roi(self, centre: np.ndarray, radius_mm: float) -> tuple[slice, ...]:
        shape, spacing = self._image.shape, self._image.spacing
        return tuple(
            slice(
                max(0, int(c) - int(np.ceil(radius_mm / s))),
                min(n, int(c) + int(np.ceil(radius_mm / s)) + 1),
            )
            for c, s, n in zip(centre, spacing, shape)
        )

    def _grow(
        self, mask: np.ndarray, seed: np.ndarray, rng: np.random.Generator
    ) -> tuple[slice, ...]:
        """The structure under ``seed`` within ``tolerance``, perturbed, added to ``mask``."""
        roi = self._roi(seed, self.context_mm)
        local = tuple(int(c - s.start) for c, s in zip(seed, roi))
        region = _perturbed_region(self._image.array[roi], local, self.tolerance, rng)
        mask[roi] |= region
        return roi

    def _leak(
        self, mask: np.ndarray, seed: np.ndarray, rng: np.random.Generator
    ) -> tuple[slice, ...]:
        """A large ellipsoid of body (not air) voxels around ``seed`` joins the mask."""
        spacing = np.asarray(self._image.spacing, dtype=float)
        radii = self.leak_radius_mm * rng.uniform(0.5, 1.0, size=3) / spacing
        blob = _ellipsoid(radii)
        half = np.array(blob.shape) // 2
        low = seed - half
        target = tuple(
            slice(max(0, lo), min(n, lo + b)) for lo, b, n in zip(low, blob.shape, mask.shape)
        )
        source = tuple(slice(t.start - lo, t.stop - lo) for t, lo in zip(target, low))
        body = self._image.array[target] > -500.0
        mask[target] |= blob[source] & body
        return target

    def _erase(self, mask: np.ndarray, point: np.ndarray) -> None:
        spacing = np.asarray(self._image.spacing, dtype=float)
        roi = self._roi(point, self.eraser_mm)
        grids = np.ogrid[tuple(slice(s.start, s.stop) for s in roi)]
        distance2 = sum(((g - c) * s) ** 2 for g, c, s in zip(grids, point, spacing))
        mask[roi] &= distance2 > self.eraser_mm**2


def _digest(prompt: Prompt) -> bytes:
    """A stable digest of the prompt's content (points, labels, boxes, scribbles)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(prompt.points, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(prompt.point_labels, dtype=np.int8).tobytes())
    for z, box in prompt.boxes.items():
        h.update(repr((z, box)).encode())
    h.update(repr(prompt.box3d).encode())
    for scribble in prompt.scribbles:
        h.update(np.ascontiguousarray(scribble.points, dtype=np.int64).tobytes())
        h.update(bytes([int(scribble.label)]))
    return h.digest()


def _perturbed_region(
    data: np.ndarray, seed: tuple[int, ...], tolerance: float, rng: np.random.Generator
) -> np.ndarray:
    """The face-connected region of ``data`` (2D or 3D) around ``seed`` within ``tolerance``
    of the seed neighbourhood's median, then left as is, dilated, eroded or shifted by one
    voxel (one of the four drawn from ``rng``)."""
    neighbourhood = data[tuple(slice(max(0, c - 1), c + 2) for c in seed)]
    candidate = np.abs(data - float(np.median(neighbourhood))) <= tolerance
    candidate[seed] = True
    components = connected_components(candidate, connectivity=2 * data.ndim)
    region = components == components[seed]
    kind = int(rng.integers(4))
    if kind == 1:
        region = ndimage.binary_dilation(region)
    elif kind == 2:
        eroded = ndimage.binary_erosion(region)
        region = eroded if eroded.any() else region
    elif kind == 3:
        axis, step = int(rng.integers(data.ndim)), int(rng.choice([-1, 1]))
        region = np.roll(region, step, axis=axis)
    return region


def _spread(points: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``points`` (N, 3), evenly spaced along the list, the first kept."""
    if len(points) <= most:
        return points
    return points[np.linspace(0, len(points) - 1, most).round().astype(int)]


@models.register
class SyntheticNetwork2D(_StandIn, SliceModel):
    """Fixed-latency stand-in for a 2D network: every slice it predicts takes ``forward_ms``
    (like one image-encoder call per slice), masks grown from the slice's prompt as
    ``synthetic-network`` does in 3D; CPU only."""

    name: ClassVar[str] = "synthetic-network-2d"
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "scribble", "mask"})

    def __init__(
        self,
        forward_ms: float = 10.0,
        leak_probability: float = 0.1,
        tolerance: float = 45.0,
        context_mm: float = 30.0,
        leak_radius_mm: float = 60.0,
        accepts: list[str] | None = None,
        setup_of: dict[str, Any] | None = None,
        stands_for: str | None = None,
    ) -> None:
        super().__init__()
        self._configure(forward_ms, leak_probability, tolerance, context_mm, leak_radius_mm)
        self.accepts = self.accepts_for({"accepts": accepts})
        self._configure_setup(setup_of)
        self._configure_stands_for(stands_for)

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x)), set up its simulated encoder state and
        drop the slice caches.
        """
        self._set_up_case(image)
        SliceModel.set_case(self, image)

    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        """The double's mask of one slice, drawn from a generator seeded by the slice prompt.

        Args:
            prompt: The slice's clicks (y, x) with labels and box, in canonical voxels.
            feedback: Unused.

        Returns:
            The mask, bool (y, x) of the image's slice shape, and no feedback.
        """
        started = time.perf_counter()
        h = hashlib.blake2b(repr(prompt.key()).encode(), digest_size=8)
        rng = np.random.default_rng(int.from_bytes(h.digest(), "little"))
        plane = self.image.array[prompt.z]
        spacing = np.asarray(self.image.spacing[1:], dtype=float)
        mask = np.zeros(plane.shape, dtype=bool)
        seeds = [p for p, label in zip(prompt.points, prompt.labels) if label == 1][:8]
        if prompt.box is not None:
            b = prompt.box
            seeds.append(np.array([(b.y_min + b.y_max) // 2, (b.x_min + b.x_max) // 2]))
        for seed in seeds:
            reach = np.ceil(self.context_mm / spacing).astype(int)
            roi = tuple(
                slice(max(0, int(c) - r), min(n, int(c) + r + 1))
                for c, r, n in zip(seed, reach, plane.shape)
            )
            local = tuple(int(c - s.start) for c, s in zip(seed, roi))
            region = _perturbed_region(plane[roi], local, self.tolerance, rng)
            mask[roi] |= region
        if seeds and rng.random() < self.leak_probability:
            radii = self.leak_radius_mm * rng.uniform(0.5, 1.0, size=2) / spacing
            y, x = np.ogrid[: plane.shape[0], : plane.shape[1]]
            centre = seeds[0]
            mask |= (
                ((y - centre[0]) / radii[0]) ** 2 + ((x - centre[1]) / radii[1]) ** 2 <= 1.0
            ) & (plane > -500.0)
        for point, label in zip(prompt.points, prompt.labels):
            if label == 0:
                mask[max(0, point[0] - 2) : point[0] + 3, max(0, point[1] - 2) : point[1] + 3] = (
                    False
                )
        self._finish_forward(started)
        return SliceOutput(mask)
