"""SegVol: zoom-out / zoom-in 3D segmentation from points and 3D boxes (paper Appendix A.7).

Pipeline on the file's own voxel order, (k, j, i) as SimpleITK gives the array (SegVol's
(D, H, W)): upstream's ``Orientationd`` gets no affine and is a no-op, so the network was
trained and is run on files as stored, not on RAS. Prompts are moved there from canonical
(z, y, x) with :func:`intrabench.io.volume.native_index`; the mask comes back with ``to_canonical``.

1. ``set_case``: foreground normalisation: voxels above the global mean are the foreground;
   the volume is clipped to their 0.05/99.95 percentiles and z-scored with their mean/std, then
   min-max scaled to [0, 1]. The volume is cropped to its foreground bounding box (voxels > 0;
   upstream pads to 32x256x256 first, padding that the foreground crop removes again).
   The zoom-out image is that crop resized to 32x256x256 (nearest-exact) and its encoding is
   computed once per case and reused for every target and prompt.
2. Zoom-out: prompt points (all of them, with their labels) and/or the 3D box are mapped onto the
   32x256x256 grid (voxel-centre convention, rounded); logits are upsampled to the crop (nearest,
   as upstream).
3. Zoom-in: ROI = bounding box of the zoom-out foreground (sigmoid > 0.5), padded to at least
   the window size (as upstream); if the zoom-out found nothing, the ROI is the prompts' bounding
   box padded the same way (upstream gives up there). ``monai.inferers.sliding_window_inference``
   (window 32x256x256, overlap 0.5) runs on the ROI, zero-padded evenly on both sides when it is
   smaller than the window (as upstream). Per window, **deterministically** (upstream
   draws random points here): the prompt points inside the window with their labels; plus a box:
   with a box prompt and a single window, the user's box clipped to the window; otherwise the
   box of the zoom-out prediction inside the window (upstream's rule). A window with neither
   points nor a box is background (no forward pass).
4. Output: zoom-in logits inside the ROI, zoom-out logits elsewhere in the crop, background
   outside the crop; mask = logits > 0 (sigmoid > 0.5). No resampling back is needed.

SegVol takes no previous mask (not refinable) and no text prompt here (the CLIP text encoder is
optional upstream and skipped; see ``_segvol_arch``). ``weights="random", tiny=True`` builds a
tiny random-weight variant of the same architecture: for tests and timing only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.io.volume import Volume, from_canonical, native_index, to_canonical
from intrabench.models.runtime._precision import forward_context
from intrabench.models.volumetric._3d_common import (
    CaseStateAhead,
    EncodingCache,
    NetworkModel3D,
    check_weights_mode,
    device_and_precision,
    map_to_grid,
    resize,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

BACKGROUND_LOGIT = -20.0


def segvol_state(path: str) -> Any:
    """The state dict in ``SegVol_v1.pth`` ({'model': 'module.'-prefixed, 'epoch'}).

    Args:
        path: The checkpoint file.

    Returns:
        The state dict (parameter name to tensor), prefix removed.
    """
    from intrabench.io.checkpoints import state_dict_in

    return state_dict_in(path, "model", "module.")


def load_segvol_weights(net: Any, path: str) -> None:
    """Strictly load ``SegVol_v1.pth`` into ``net``; only the CLIP text-encoder keys (an
    explicit list) are dropped.

    Args:
        net: The SegVol network.
        path: The checkpoint file.

    Raises:
        CheckpointError: The checkpoint's keys or shapes do not match the network.
    """
    from intrabench.io.checkpoints import load_state_dict_strict
    from intrabench.models.volumetric._segvol_arch import text_encoder_keys

    load_state_dict_strict(
        net, segvol_state(path), source=str(path), ignore_unexpected=text_encoder_keys()
    )


def foreground_normalise(array: np.ndarray) -> np.ndarray:
    """SegVol's foreground normalisation of a (z, y, x) volume, then min-max to [0, 1].

    Args:
        array: The volume's intensities, (z, y, x) in any voxel order.

    Returns:
        Float32 in [0, 1], of ``array``'s shape.
    """
    array = np.asarray(array, dtype=np.float32)
    foreground = array[array > array.mean()]
    if foreground.size < 2:
        foreground = array.ravel()
    low, high = np.percentile(foreground, [0.05, 99.95])
    mean, std = float(foreground.mean()), float(foreground.std())
    out = (np.clip(array, low, high) - mean) / max(std, 1e-8)
    span = float(out.max() - out.min())
    return ((out - out.min()) / span if span > 0 else np.zeros_like(out)).astype(np.float32)


def _box_of(mask: np.ndarray) -> np.ndarray | None:
    """Inclusive (min d0, d1, d2, max d0, d1, d2) of a boolean mask, or None when empty."""
    if not mask.any():
        return None
    coords = [
        np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != axis))) for axis in range(3)
    ]
    return np.array([c[0] for c in coords] + [c[-1] for c in coords])


def _padded_roi(
    box: np.ndarray, window: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[slice, ...]:
    """Upstream's ROI rule: grow a box by half the missing size towards the window, clip."""
    roi = []
    for a in range(3):
        lo, hi = int(box[a]), int(box[a + 3])
        pad = max(0, window[a] - (hi - lo + 1))
        roi.append(slice(max(0, lo - pad // 2), min(shape[a], hi + pad // 2 + 1)))
    return tuple(roi)


@models.register
class SegVol(CaseStateAhead, NetworkModel3D):
    """SegVol (ViT-B, zoom-out 32x256x256 then sliding-window zoom-in), checkpoint SegVol_v1.pth."""

    name: ClassVar[str] = "segvol"
    licence: ClassVar[str] = "MIT"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box3d", "scribble"})
    checkpoint_key: ClassVar[str] = "segvol"

    def __init__(
        self,
        checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        overlap: float = 0.5,
        precision: str = "auto",
    ) -> None:
        """``checkpoint``: explicit file; ``checkpoint_dir``: directory holding SegVol_v1.pth;
        ``weights="random"`` (+ ``tiny=True``): no checkpoint, tests and timing only;
        ``precision``: 'auto' (bf16 autocast on CUDA, else float32), 'fp32', 'bf16', 'fp16'
        (not on the CPU), applied to the encoder and decoder forward passes."""
        from intrabench.models.volumetric._segvol_arch import FULL, TINY, SegVolNet

        check_weights_mode(weights, tiny)
        self.device, self.precision = device_and_precision(device, precision)
        self.config = TINY if tiny else FULL
        self.window = tuple(self.config.spatial_size)
        self.overlap = float(overlap)
        self.net = self.load_network(
            lambda: SegVolNet(self.config),
            load_segvol_weights,
            weights,
            checkpoint,
            checkpoint_dir,
            seed,
        )
        self.encoder_calls = 0
        self._cache = EncodingCache()
        self._image: Volume | None = None
        self._crop: tuple[slice, ...] = ()
        self._volume: np.ndarray | None = None
        self._seconds = 0.0

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless ``path`` loads and fits the full network (on meta)."""
        import torch

        from intrabench.io.checkpoints import check_fits
        from intrabench.models.volumetric._segvol_arch import FULL, SegVolNet, text_encoder_keys

        with torch.device("meta"):
            net = SegVolNet(FULL)
        check_fits(net, segvol_state(str(path)), str(path), text_encoder_keys())

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x), float32); it is cropped and resampled as
        SegVol's official code does; the same image again does nothing.
        """
        if image is self._image:
            return
        self._native_shape, self._crop, self._volume = self.state_for(image)
        self._image = image
        self._cache.clear()

    def case_state(self, image: Volume) -> tuple[tuple[int, ...], tuple[slice, ...], np.ndarray]:
        """(the file-order shape, the foreground crop, the normalised crop) of ``image``.

        Args:
            image: The case's volume (canonical (z, y, x), with its file geometry).

        Returns:
            The file-order (k, j, i) shape, the crop (slices in that order) of the normalised
            foreground, and the normalised float32 crop.
        """
        # the file's own voxel order, (k, j, i): what SegVol was trained and run on (upstream's
        # Orientationd sees no affine and changes nothing)
        native = from_canonical(image.array, image.geometry)
        normalised = foreground_normalise(native)
        box = _box_of(normalised > 0)
        if box is None:
            box = np.array([0, 0, 0, *(n - 1 for n in native.shape)])
        crop = tuple(slice(int(box[a]), int(box[a + 3]) + 1) for a in range(3))
        return native.shape, crop, np.ascontiguousarray(normalised[crop])

    # -- model calls ---------------------------------------------------------------------
    def _encode(self, key: Any, data: Any) -> Any:
        cached = self._cache.get(key)
        if cached is None:
            with forward_context(self.device, self.precision):
                cached = self.net.encode(data.to(self.device))
            self.encoder_calls += 1
            self._cache.put(key, cached)
        return cached

    def _decode(
        self, embedding: Any, points: np.ndarray, labels: np.ndarray, box: np.ndarray | None
    ) -> Any:
        import torch

        pts = lab = boxes = None
        if len(points):
            pts = torch.as_tensor(points, dtype=torch.float32, device=self.device)[None]
            lab = torch.as_tensor(labels.astype(np.int64), device=self.device)[None]
        if box is not None:
            boxes = torch.as_tensor(box, dtype=torch.float32, device=self.device)[None]
        with forward_context(self.device, self.precision):
            return self.net.decode(embedding, pts, lab, boxes).float()

    # -- prediction ----------------------------------------------------------------------
    def _local_prompt(self, prompt: Prompt) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Points (N, 3) and labels inside the foreground crop, box clipped to it (crop coords).

        Points outside the foreground crop lie in the constant background that the crop removed;
        they are dropped (counted in ``feedback["points_outside"]``).
        """
        offset = np.array([s.start for s in self._crop])
        shape = np.array(self._volume.shape)
        geometry = self._image.geometry
        points, labels = prompt.model_points()
        local = (native_index(points, geometry) if len(points) else points) - offset
        keep = ((local >= 0) & (local < shape)).all(axis=1)
        box = None
        if prompt.box3d is not None:
            corners = native_index(np.array(prompt.box3d.as_tuple()).reshape(2, 3), geometry)
            native_box = np.concatenate([corners.min(axis=0), corners.max(axis=0)])
            raw = native_box - np.concatenate([offset, offset])
            low, high = np.maximum(raw[:3], 0), np.minimum(raw[3:], shape - 1)
            if (low <= high).all():
                box = np.concatenate([low, high])
        return local[keep], labels[keep], box

    def _zoom_out(
        self, points: np.ndarray, labels: np.ndarray, box: np.ndarray | None
    ) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        shape = self._volume.shape
        size = self.window
        embedding = self._cache.get(("zoom-out",))
        if embedding is None:
            image = resize(self._volume, size, mode="nearest-exact")
            embedding = self._encode(("zoom-out",), torch.from_numpy(image)[None, None])
        limit = np.array(size) - 1
        grid_points = (
            np.clip(np.rint(map_to_grid(points, shape, size)), 0, limit)
            if len(points)
            else np.zeros((0, 3))
        )
        grid_box = None
        if box is not None:
            corners = np.clip(np.rint(map_to_grid(box.reshape(2, 3), shape, size)), 0, limit)
            grid_box = corners.reshape(-1)
        logits = self._decode(embedding, grid_points, labels, grid_box)
        return F.interpolate(logits.cpu(), size=shape, mode="nearest")[0, 0].numpy()

    def _zoom_in(
        self,
        roi: tuple[slice, ...],
        points: np.ndarray,
        labels: np.ndarray,
        box: np.ndarray | None,
        zoom_out_fg: np.ndarray,
    ) -> np.ndarray:
        import torch
        from monai.inferers import sliding_window_inference

        roi_image = self._volume[roi]
        roi_shape = roi_image.shape
        padded = tuple(max(n, w) for n, w in zip(roi_shape, self.window))
        # an ROI smaller than the window is padded evenly on both sides, as upstream's
        # sliding-window inference does (half before, the rest after)
        before = np.array([(p - n) // 2 for p, n in zip(padded, roi_shape)])
        inner = tuple(slice(int(b), int(b) + n) for b, n in zip(before, roi_shape))
        image = np.zeros(padded, dtype=np.float32)
        image[inner] = roi_image
        foreground = np.zeros(padded, dtype=bool)
        foreground[inner] = zoom_out_fg[roi]
        roi_start = np.array([s.start for s in roi]) - before
        roi_points = points - roi_start
        roi_box = None if box is None else box - np.concatenate([roi_start, roi_start])
        n_windows = int(
            np.prod(
                [
                    1 + int(np.ceil(max(0, p - w) / max(1, int(w * (1 - self.overlap)))))
                    for p, w in zip(padded, self.window)
                ]
            )
        )

        def predictor(window_data: Any, locations: Any) -> Any:
            outputs = []
            for batch_index, location in enumerate(locations):
                spatial = location[-3:]
                lo = np.array([s.start for s in spatial])
                hi = np.array([s.stop for s in spatial])
                inside = ((roi_points >= lo) & (roi_points < hi)).all(axis=1)
                win_points, win_labels = roi_points[inside] - lo, labels[inside]
                win_box = None
                if roi_box is not None and n_windows == 1:
                    low = np.maximum(roi_box[:3], lo) - lo
                    high = np.minimum(roi_box[3:], hi - 1) - lo
                    if (low <= high).all():
                        win_box = np.concatenate([low, high])
                if win_box is None:
                    win_box = _box_of(foreground[tuple(spatial)])
                if len(win_points) == 0 and win_box is None:
                    outputs.append(torch.full((1, 1, *self.window), BACKGROUND_LOGIT))
                    continue
                key = ("window", *[int(s.start) + int(r) for s, r in zip(spatial, roi_start)])
                embedding = self._encode(key, window_data[batch_index : batch_index + 1])
                outputs.append(self._decode(embedding, win_points, win_labels, win_box).cpu())
            return torch.cat(outputs).to(window_data.device)

        tensor = torch.from_numpy(image)[None, None]
        logits = sliding_window_inference(
            tensor,
            self.window,
            1,
            predictor,
            overlap=self.overlap,
            mode="constant",
            with_coord=True,
        )
        return logits[0, 0].numpy()[inner]

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """SegVol's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous step's prediction (its mask and feedback), or None.
            update_slices: Unused by 3D models (2D models predict only these slices again).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the model's seconds and feedback.

        Raises:
            RuntimeError: :meth:`set_case` was not called.
            ValueError: The prompt has no kind the model takes.
        """
        if self._image is None:
            raise RuntimeError("SegVol: set_case() was not called")
        if prompt.is_empty or not ({"point", "box3d", "scribble"} & prompt.kinds):
            raise ValueError("SegVol needs point, scribble or 3D box prompts")
        started = time.perf_counter()
        points, labels, box = self._local_prompt(prompt)
        outside = len(prompt.model_points()[0]) - len(points)
        mask = np.zeros(self._image.shape, dtype=bool)  # canonical (z, y, x)
        if len(points) == 0 and box is None:
            self._seconds += time.perf_counter() - started
            return Prediction(mask, {"model": self.name, "points_outside": outside})
        logits = self._zoom_out(points, labels, box)
        zoom_out_fg = logits > 0.0
        anchor = _box_of(zoom_out_fg)
        if anchor is None:
            parts = [points] if len(points) else []
            if box is not None:
                parts.append(box.reshape(2, 3))
            stacked = np.concatenate(parts)
            anchor = np.concatenate([stacked.min(axis=0), stacked.max(axis=0)])
        roi = _padded_roi(anchor, self.window, self._volume.shape)
        logits[roi] = self._zoom_in(roi, points, labels, box, zoom_out_fg)
        native = np.zeros(self._native_shape, dtype=bool)  # (k, j, i), the file's order
        native[self._crop] = logits > 0.0
        mask = np.ascontiguousarray(to_canonical(native, self._image.geometry))
        self._seconds += time.perf_counter() - started
        return Prediction(
            mask,
            {
                "model": self.name,
                "roi": roi,
                "crop": self._crop,
                "points_used": int(len(points)),
                "points_outside": outside,
                "encoder_calls": self.encoder_calls,
            },
        )
