"""SAM-Med3D and SAM-Med3D Turbo: 3D promptable segmentation on a 128^3 crop at 1.5 mm.

Pipeline (paper Appendix A.5/A.6 and upstream's inference, with the reference implementation's
errors fixed):

1. ``set_case``: the canonical (z, y, x) volume is resampled to 1.5 mm isotropic on torchio's
   ``Resample(1.5)`` grid (``floor(n * s / 1.5)`` voxels centred on the original grid, linear
   interpolation, edges clamped: :class:`~intrabench.models.volumetric._3d_common.CentredGrid`), from
   ``Volume.spacing``, which is direction-aware. Intensities are not clipped (upstream's
   inference does not clip; a 0.5/99.5-percentile clip changed the network input by up to 4.9
   on a lung CT).
2. Crop: 128^3 voxels centred on the prompts: the centroid of all prompt points (clicks and
   scribble voxels). Never on the ground truth (the model never receives it; upstream crops
   around the label). Outside the image the crop is zero-padded. The crop is kept fixed for
   every refinement step of an episode (it travels in ``Prediction.feedback``).
3. The crop is z-normalised with the mean/std of its voxels > 0 (as upstream's
   ``ZNormalization(masking_method=x > 0)``; all voxels when fewer than 2 are > 0).
4. Model space: the crop is fed as (x, y, z), i.e. the canonical crop transposed, which is the
   RAS (C, R, A, S) layout of upstream's torchio ``ToCanonical`` data; point coordinates are
   mapped onto the 1.5 mm grid and rounded to its nearest voxel (upstream's clicks are voxels
   of the resampled image), shifted into the crop, reversed to (x, y, z) and given with their
   own labels: **all points are used**.
   Points outside the fixed crop cannot be shown to the model; they are dropped and counted in
   ``feedback["points_outside"]``. If no point at all lies inside the crop the previous
   prediction (or an empty mask) is returned unchanged.
5. Mask input: the previous step's 32^3 low-resolution *logits* (zeros at the first step, as
   upstream; carried as a float32 numpy array (1, 1, 32, 32, 32) in
   ``feedback["low_res_logits"]`` whatever the ``precision``), single-mask output; the image
   encoding of a crop is computed once per (case, crop) and reused for all refinement steps
   (and for other targets with the same crop).
6. Output: the 32^3 logits are upsampled trilinearly to 128^3 and thresholded (sigmoid > 0.5)
   on the 1.5 mm grid; the binary crop goes back to the original voxels by nearest neighbour
   (ITK's, as upstream resamples its prediction back). Voxels outside the crop are background.

Accepts points, scribbles (as points) and its own previous mask; no boxes (upstream has no box
prompt). ``weights="random", tiny=True`` builds a tiny random-weight variant of the same
architecture: for tests and timing only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.io.volume import Volume
from intrabench.models.runtime._precision import forward_context
from intrabench.models.runtime._preprocessing_place import check_preprocessing, on_device
from intrabench.models.volumetric._3d_common import (
    CaseStateAhead,
    CentredGrid,
    EncodingCache,
    NetworkModel3D,
    check_weights_mode,
    crop_with_padding,
    device_and_precision,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

TARGET_SPACING_MM = 1.5


def sammed3d_state(path: str) -> Any:
    """The state dict in a SAM-Med3D checkpoint (training dict with ``model_state_dict`` and a
    pickled argparse Namespace, or a plain state dict), ``module.`` prefix removed.

    Args:
        path: The checkpoint file.

    Returns:
        The state dict (parameter name to tensor).
    """
    from intrabench.io.checkpoints import state_dict_in

    return state_dict_in(path, "model_state_dict", "module.", allow_namespace=True)


def load_sammed3d_weights(net: Any, path: str) -> None:
    """Strictly load a SAM-Med3D checkpoint into ``net``.

    Args:
        net: The SAM-Med3D network.
        path: The checkpoint file.

    Raises:
        CheckpointError: The checkpoint's keys or shapes do not match the network.
    """
    from intrabench.io.checkpoints import load_state_dict_strict

    load_state_dict_strict(net, sammed3d_state(path), source=str(path))


class _SamMed3DBase(CaseStateAhead, NetworkModel3D):
    """Adapter shared by both checkpoints (see the module docstring)."""

    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "scribble", "mask"})
    checkpoint_key: ClassVar[str] = ""

    def __init__(
        self,
        checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        precision: str = "auto",
        preprocessing: str = "auto",
    ) -> None:
        """``checkpoint``: explicit file; ``checkpoint_dir``: directory holding the table's file
        name; ``weights="random"`` (+ ``tiny=True``): no checkpoint, tests and timing only;
        ``precision``: 'auto' (bf16 autocast on CUDA, else float32), 'fp32', 'bf16', 'fp16'
        (not on the CPU), applied to the encoder and decoder forward passes;
        ``preprocessing``: where a case is resampled to 1.5 mm: 'auto' (default: on the
        model's device when it is a GPU, else NumPy on the CPU), 'numpy', or 'device' (torch
        on the model's device); every way gives the same voxels to the bit
        (:meth:`CentredGrid.resample_with_torch`)."""
        from intrabench.models.volumetric._sammed3d_arch import FULL, TINY, SamMed3DNet

        self.preprocessing = check_preprocessing(preprocessing)
        check_weights_mode(weights, tiny)
        self.device, self.precision = device_and_precision(device, precision)
        self.config = TINY if tiny else FULL
        self.net = self.load_network(
            lambda: SamMed3DNet(self.config),
            load_sammed3d_weights,
            weights,
            checkpoint,
            checkpoint_dir,
            seed,
        )
        self.crop_size = self.config.image_size
        self.encoder_calls = 0
        self._cache = EncodingCache()
        self._image: Volume | None = None
        self._grid: np.ndarray | None = None
        self._seconds = 0.0

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless ``path`` loads and fits the full network (on meta)."""
        import torch

        from intrabench.io.checkpoints import check_fits
        from intrabench.models.volumetric._sammed3d_arch import FULL, SamMed3DNet

        with torch.device("meta"):
            net = SamMed3DNet(FULL)
        check_fits(net, sammed3d_state(str(path)), str(path))

    # -- case --------------------------------------------------------------------------
    def set_case(self, image: Volume) -> None:
        if image is self._image:
            return
        self._grid_map, self._grid = self.state_for(image)
        self._image = image
        self._cache.clear()

    def case_state(self, image: Volume) -> tuple[CentredGrid, np.ndarray]:
        """(the 1.5 mm grid's map, ``image`` resampled on it): torchio's Resample(1.5) grid
        and linear interpolation, no intensity clipping, what upstream's inference feeds the
        network."""
        grid_map = CentredGrid(image.shape, image.spacing, TARGET_SPACING_MM)
        return grid_map, self._resampled(image.array, grid_map)

    def resample_on_device(self) -> bool:
        """Whether a case is resampled by torch on the model's device: ``preprocessing``
        'device', or 'auto' on a GPU."""
        return on_device(self.preprocessing, self.device.type)

    def _resampled(self, array: np.ndarray, grid_map: CentredGrid) -> np.ndarray:
        """``array`` on the 1.5 mm grid, where ``preprocessing`` says; a card without the
        memory for it (a few volumes' worth) leaves it to NumPy, which gives the same voxels."""
        if self.resample_on_device():
            import torch

            try:
                return grid_map.resample_with_torch(array, self.device)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
        return grid_map.resample(array)

    # -- geometry ----------------------------------------------------------------------
    def grid_points(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) canonical (z, y, x) voxel indices -> the nearest voxels of the 1.5 mm grid
        (upstream's clicks are voxels of the resampled image: whole numbers)."""
        return np.floor(self._grid_map.to_grid(points) + 0.5)

    def crop_for(self, prompt: Prompt) -> tuple[int, int, int]:
        """Start (z, y, x) on the 1.5 mm grid of the crop centred on the prompt points."""
        points, labels = prompt.model_points()
        if len(points) == 0:
            raise ValueError(f"{self.name} needs at least one point (or scribble) prompt")
        on_grid = self.grid_points(points)
        half = self.crop_size / 2
        start = tuple(int(np.floor(c - half + 0.5)) for c in on_grid.mean(axis=0))
        if not self._inside(on_grid, start).any():
            anchor = on_grid[labels == 1][0] if (labels == 1).any() else on_grid[0]
            start = tuple(int(np.floor(c - half + 0.5)) for c in anchor)
        return start

    def _inside(self, on_grid: np.ndarray, start: tuple[int, int, int]) -> np.ndarray:
        local = on_grid - np.asarray(start)
        return ((local >= 0) & (local < self.crop_size)).all(axis=1)

    # -- model -------------------------------------------------------------------------
    def _encode(self, start: tuple[int, int, int]) -> Any:
        import torch

        cached = self._cache.get(start)
        if cached is not None:
            return cached
        size = (self.crop_size,) * 3
        crop = crop_with_padding(self._grid, start, size, 0.0)
        foreground = crop > 0
        values = crop[foreground] if foreground.sum() >= 2 else crop.ravel()
        crop = (crop - values.mean()) / max(float(values.std()), 1e-8)
        tensor = torch.from_numpy(np.ascontiguousarray(crop.transpose(2, 1, 0), np.float32))
        with forward_context(self.device, self.precision):
            embedding = self.net.image_encoder(tensor[None, None].to(self.device))
        self.encoder_calls += 1
        self._cache.put(start, embedding)
        return embedding

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        import torch

        if self._image is None:
            raise RuntimeError(f"{type(self).__name__}: set_case() was not called")
        started = time.perf_counter()
        feedback = previous.feedback if previous is not None else None
        reuse = (
            isinstance(feedback, dict)
            and feedback.get("model") == self.name
            and feedback.get("image_id") == id(self._image)
        )
        start = tuple(feedback["crop_start"]) if reuse else self.crop_for(prompt)
        points, labels = prompt.model_points()
        on_grid = self.grid_points(points) if len(points) else np.zeros((0, 3))
        inside = self._inside(on_grid, start) if len(points) else np.zeros(0, bool)
        if not inside.any():
            mask = (
                previous.mask.copy() if previous is not None else np.zeros(self._image.shape, bool)
            )
            self._seconds += time.perf_counter() - started
            return Prediction(mask, feedback)
        local = (on_grid[inside] - np.asarray(start))[:, ::-1].copy()  # (x, y, z) in the crop
        low_res = self.config.low_res_size
        mask_input = (
            torch.as_tensor(feedback["low_res_logits"])
            if reuse
            else torch.zeros((1, 1) + (low_res,) * 3)
        )
        embedding = self._encode(start)
        with forward_context(self.device, self.precision):
            logits = self.net.decode(
                embedding,
                torch.as_tensor(local, dtype=torch.float32, device=self.device)[None],
                torch.as_tensor(labels[inside].astype(np.int64), device=self.device)[None],
                mask_input.to(self.device, dtype=embedding.dtype),
            )
        logits = logits.float().cpu()
        full = torch.nn.functional.interpolate(
            logits, size=(self.crop_size,) * 3, mode="trilinear", align_corners=False
        )
        crop_mask = full[0, 0].numpy().transpose(2, 1, 0) > 0.0  # (z, y, x), sigmoid > 0.5
        mask = self._to_original(crop_mask, start)
        self._seconds += time.perf_counter() - started
        return Prediction(
            mask,
            {
                "model": self.name,
                "image_id": id(self._image),
                "crop_start": start,
                "low_res_logits": logits.numpy(),  # float32
                "points_used": int(inside.sum()),
                "points_outside": int((~inside).sum()),
            },
        )

    def _to_original(self, crop_mask: np.ndarray, start: tuple[int, int, int]) -> np.ndarray:
        """The binary crop (on the 1.5 mm grid at ``start``) on the original voxels, by nearest
        neighbour as upstream resamples its prediction back; background outside the crop."""
        mask = np.zeros(self._image.shape, dtype=bool)
        region, picks = [], []
        for axis in range(3):
            on_grid = self._grid_map.nearest_original(axis)  # -1: outside the grid
            nearest = on_grid - start[axis]
            valid = np.flatnonzero(
                (on_grid >= 0) & (nearest >= 0) & (nearest < crop_mask.shape[axis])
            )
            if len(valid) == 0:
                return mask
            region.append(slice(int(valid[0]), int(valid[-1]) + 1))
            picks.append(nearest[valid[0] : valid[-1] + 1])
        mask[tuple(region)] = crop_mask[np.ix_(*picks)]
        return mask


@models.register
class SamMed3D(_SamMed3DBase):
    """SAM-Med3D (ViT-B, 1.5 mm, 128^3 prompt-centred crop), checkpoint sam_med3d.pth."""

    name: ClassVar[str] = "sam-med3d"
    licence: ClassVar[str] = "Apache-2.0"
    checkpoint_key: ClassVar[str] = "sam-med3d"


@models.register
class SamMed3DTurbo(_SamMed3DBase):
    """SAM-Med3D Turbo: same architecture and pipeline, checkpoint sam_med3d_turbo.pth."""

    name: ClassVar[str] = "sam-med3d-turbo"
    licence: ClassVar[str] = "Apache-2.0"
    checkpoint_key: ClassVar[str] = "sam-med3d-turbo"
