"""MedSAM2 (Ma et al., 2025): SAM2.1 Hiera-tiny at 512 px, fine-tuned on 3D medical images and
videos, run as MedSAM2's 3D inference runs it, built from the official ``sam2`` package.

Network: the official ``configs/sam2.1/sam2.1_hiera_t.yaml`` with the overrides in
``models/configs/medsam2_hiera_t512.yaml`` (image size 512, memory-attention RoPE on a 32x32
grid: MedSAM2's ``sam2.1_hiera_t512.yaml``), instantiated as the official
``SAM2VideoPredictor`` with the post-processing options of ``build_sam2_video_predictor``.
MedSAM2's own repository ships a second top-level ``sam2`` package; it is never installed.

Pipeline (MedSAM2's ``medsam2_infer_3D_CT.py``):

1. Frames: the slices in the file's own voxel order (SimpleITK's array (k, j, i), what the
   script reads) when the file's slice axis k is the patient's superior-inferior axis; for
   other files (sagittal or coronal acquisitions) the canonical axial slices. Intensities:
   CT clipped to a window (default level 40, width 400; ``window``), MR to its 0.5-99.5th
   percentiles, then min-max over the volume to 0..255 and ``uint8``; each slice to RGB and
   resized to 512x512 by PIL (its default filter), scaled to [0, 1] and normalised with the
   ImageNet mean and std.
2. The predictor's state from those frames (``init_state`` with the frames handed in instead of
   read from a video file); the prompts added on their slices (the key-slice box: a 3D box's
   middle slice; 2D boxes; clicks and scribble voxels as clicks, with their sign), then
   propagation through the volume forward; the state reset, the prompts added again and
   propagation in reverse; the union of both (logits > 0), then the largest connected
   component.
   Where sam2's CUDA extension was not built (``SAM2_BUILD_CUDA=0``, every CPU install), the
   predictor's filling of holes up to 8 pixels in the low-resolution masks is done on the CPU
   with the same rule (8-connected background components) instead of being skipped.
3. Refinement adds prompts on slices: each step replays every prompt so far (the correction
   clicks on their slices) and propagates again both ways (the previous mask is not an input
   of MedSAM2's video inference). Needs ``keep_previous_prompts: true`` (the default).

Weights: ``MedSAM2_latest.pt`` (``{"model": state dict}``), loaded weights-only and strictly;
Apache 2.0. ``weights="random", tiny=True``: a tiny random network of the same kind (128 px).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml

from intrabench.io.volume import Volume, from_canonical, native_index, to_canonical
from intrabench.masks.components import largest_component
from intrabench.models.runtime._precision import forward_context
from intrabench.models.sam_family.sam2 import (
    DYNAMIC_MULTIMASK_OVERRIDES,
    IMAGENET_MEAN,
    IMAGENET_STD,
)
from intrabench.models.volumetric._3d_common import (
    NetworkModel3D,
    check_weights_mode,
    device_and_precision,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

CONFIG = Path(__file__).parents[1] / "configs" / "medsam2_hiera_t512.yaml"
#: the options ``sam2.build_sam.build_sam2_video_predictor`` adds (apply_postprocessing=True)
POSTPROCESSING = (
    *DYNAMIC_MULTIMASK_OVERRIDES,
    "++model.binarize_mask_from_pts_for_mem_enc=true",
    "++model.fill_hole_area=8",
)


def build_predictor(tiny: bool = False) -> Any:
    """The official SAM2VideoPredictor with MedSAM2's configuration (random weights).

    Args:
        tiny: Apply the configuration's ``tiny_overrides`` (a small network for tests).

    Returns:
        The ``SAM2VideoPredictor`` torch module.
    """
    import sam2.build_sam  # noqa: F401 - registers the sam2 package's configs with hydra
    from hydra import compose
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    spec = yaml.safe_load(CONFIG.read_text())
    overrides = [
        "++model._target_=sam2.sam2_video_predictor.SAM2VideoPredictor",
        *POSTPROCESSING,
        *(f"++{o}" for o in spec["overrides"]),
    ]
    if tiny:
        overrides += [f"++{o}" for o in spec["tiny_overrides"]]
    config = compose(config_name=spec["base"], overrides=overrides)
    OmegaConf.resolve(config)
    return instantiate(config.model, _recursive_=True)


def medsam2_state(path: str) -> Any:
    """The network's state dict in a MedSAM2 checkpoint file (its ``model`` entry).

    Args:
        path: The checkpoint file.

    Returns:
        The state dict (parameter name to tensor).
    """
    from intrabench.io.checkpoints import state_dict_in

    return state_dict_in(path, "model")


def load_medsam2_weights(net: Any, path: str) -> None:
    """Load a MedSAM2 checkpoint into ``net``, every key matched.

    Args:
        net: The network of :func:`build_predictor`.
        path: The checkpoint file.

    Raises:
        CheckpointError: The checkpoint's keys or shapes do not match the network.
    """
    from intrabench.io.checkpoints import load_state_dict_strict

    load_state_dict_strict(net, medsam2_state(path), source=str(path))


def to_uint8(volume: np.ndarray, is_ct: bool, window: tuple[float, float]) -> np.ndarray:
    """MedSAM2's intensity step: CT clipped to ``window`` (low, high HU), MR to its 0.5-99.5th
    percentiles; then min-max over the volume to 0..255, truncated to uint8.

    Args:
        volume: The case's intensities, (z, y, x) (HU for CT).
        is_ct: True for CT (the window), False for MR (the percentiles).
        window: The CT window (low, high) in HU.

    Returns:
        Uint8 volume of the same shape.
    """
    volume = np.asarray(volume, dtype=np.float64)
    low, high = window if is_ct else np.percentile(volume, [0.5, 99.5])
    clipped = np.clip(volume, low, high)
    span = clipped.max() - clipped.min()
    scaled = (clipped - clipped.min()) / span * 255.0 if span > 0 else np.zeros_like(clipped)
    return np.uint8(scaled)


def frames_tensor(slices_uint8: np.ndarray, size: int) -> Any:
    """(D, 3, size, size) float32: each slice to RGB, resized by PIL, /255, ImageNet-normalised.

    Args:
        slices_uint8: Uint8 (D, rows, cols) frames.
        size: The square frame side the network takes, in pixels.

    Returns:
        Float32 torch tensor (D, 3, size, size) on the CPU.
    """
    import torch
    from PIL import Image

    frames = np.zeros((len(slices_uint8), 3, size, size), dtype=np.float64)
    for index, plane in enumerate(slices_uint8):
        rgb = Image.fromarray(plane).convert("RGB").resize((size, size))
        frames[index] = np.asarray(rgb).transpose(2, 0, 1)
    frames /= 255.0
    mean = np.asarray(IMAGENET_MEAN)[:, None, None]
    std = np.asarray(IMAGENET_STD)[:, None, None]
    return torch.from_numpy(((frames - mean) / std).astype(np.float32))


def connected_components_cpu(mask: Any) -> tuple[Any, Any]:
    """What sam2's CUDA extension ``get_connected_componnets`` returns, on the CPU: per
    (N, 1, H, W) binary mask the 8-connected component labels of its foreground and, per
    foreground pixel, its component's area.

    Args:
        mask: Binary torch tensor (N, 1, H, W).

    Returns:
        (labels, areas): int32 tensors of ``mask``'s shape on its device.
    """
    import torch
    from scipy import ndimage

    binary = mask.detach().to("cpu", torch.uint8).numpy()
    labels = np.zeros(binary.shape, dtype=np.int32)
    areas = np.zeros(binary.shape, dtype=np.int32)
    for index in range(binary.shape[0]):
        found, _ = ndimage.label(binary[index, 0], structure=np.ones((3, 3), dtype=bool))
        sizes = np.bincount(found.ravel())
        sizes[0] = 0
        labels[index, 0], areas[index, 0] = found, sizes[found]
    return (torch.from_numpy(labels).to(mask.device), torch.from_numpy(areas).to(mask.device))


def _has_sam2_extension() -> bool:
    try:
        from sam2 import _C  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def frames_as_video(frames: Any, height: int, width: int):
    """Inside, the official predictor's ``init_state`` takes ``frames`` instead of reading a
    video file (what MedSAM2's scripts do with their copy of the predictor).

    Args:
        frames: The (D, 3, S, S) frames tensor of :func:`frames_tensor`.
        height: The frames' original rows.
        width: The frames' original columns.
    """
    import sam2.sam2_video_predictor as video

    original = video.load_video_frames
    video.load_video_frames = lambda **_: (frames, height, width)
    try:
        yield
    finally:
        video.load_video_frames = original


@contextlib.contextmanager
def quiet_faithful_predictor():
    """Inside: no progress bar from ``propagate_in_video``, and, where sam2's CUDA extension
    was not built, its small-hole filling (``fill_hole_area``) done by
    :func:`connected_components_cpu` instead of skipped with a warning."""
    import sam2.sam2_video_predictor as video
    import sam2.utils.misc as misc

    saved = (video.tqdm, misc.get_connected_components)
    video.tqdm = lambda iterable, **_: iterable
    if not _has_sam2_extension():
        misc.get_connected_components = connected_components_cpu
    try:
        yield
    finally:
        video.tqdm, misc.get_connected_components = saved


@models.register
class MedSam2(NetworkModel3D):
    """MedSAM2 (SAM2.1 Hiera-tiny, 512 px): key-slice box and clicks, propagated both ways."""

    name: ClassVar[str] = "medsam2"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"box2d", "box3d", "point", "scribble", "mask"})
    checkpoint_key: ClassVar[str] = "medsam2"
    licence: ClassVar[str] = "Apache-2.0"

    def __init__(
        self,
        checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        precision: str = "auto",
        window: tuple[float, float] = (-160.0, 240.0),
        modality: str = "auto",
    ) -> None:
        """``window``: the CT window (low, high HU; default level 40, width 400);
        ``modality``: 'auto' (CT when the image looks like HU), 'ct' or 'mr';
        ``precision``: 'auto' (bf16 autocast on CUDA, as MedSAM2's scripts), 'fp32', 'bf16'."""
        if modality not in ("auto", "ct", "mr"):
            raise ValueError(f"modality must be 'auto', 'ct' or 'mr', not {modality!r}")
        check_weights_mode(weights, tiny)
        self.device, self.precision = device_and_precision(device, precision)
        self.net = self.load_network(
            lambda: build_predictor(tiny),
            load_medsam2_weights,
            weights,
            checkpoint,
            checkpoint_dir,
            seed,
        )
        self.window = (float(window[0]), float(window[1]))
        self.modality = modality
        self._image: Volume | None = None
        self._seconds = 0.0

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless ``path`` loads and fits MedSAM2's full network (built on the
        meta device: names and shapes only)."""
        from intrabench.io.checkpoints import check_fits
        from intrabench.models.sam_family.sam2 import build_hiera_on_meta

        check_fits(
            build_hiera_on_meta(lambda: build_predictor(tiny=False)),
            medsam2_state(str(path)),
            str(path),
        )

    # -- frames ---------------------------------------------------------------------------
    def native_frames(self, image: Volume) -> bool:
        """True when the file's slice axis k runs along the patient's S-I axis (its stored
        slices are axial): the frames are then the file's own slices.

        Args:
            image: The case's volume, with its file geometry.

        Returns:
            True for the file's own slices, False for the canonical axial ones.
        """
        return int(image.geometry.orientation()[2][0]) == 2

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x), float32); its frames are windowed (CT or
        MR) and encoded lazily; the same image again does nothing.
        """
        if image is self._image:
            return
        from intrabench.modality import looks_like_ct

        started = time.perf_counter()
        self._image = image
        self._native = self.native_frames(image)
        volume = from_canonical(image.array, image.geometry) if self._native else image.array
        is_ct = self.modality == "ct" or (
            self.modality == "auto" and looks_like_ct(image.array, "")
        )
        slices = to_uint8(volume, is_ct, self.window)
        self._frame_shape = slices.shape
        self._frames = frames_tensor(slices, int(self.net.image_size))
        self._seconds += time.perf_counter() - started

    def to_frames(self, points_zyx: np.ndarray) -> np.ndarray:
        """(N, 3) canonical voxels -> (frame, row, column) of the frames.

        Args:
            points_zyx: Canonical (z, y, x) voxel indices, (N, 3).

        Returns:
            Int (N, 3) (frame, row, column) indices.
        """
        points = np.asarray(points_zyx).reshape(-1, 3)
        return native_index(points, self._image.geometry) if self._native else points

    def frame_prompts(self, prompt: Prompt) -> dict[int, dict[str, Any]]:
        """Per frame: clicks ``points`` (N, 2) as (x, y) = (column, row) with ``labels``, and a
        ``box`` [x_min, y_min, x_max, y_max] (a 3D box gives the box on its middle slice).

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.

        Returns:
            Frame index to ``{"points": [[x, y], ...], "labels": [1/0, ...], "box": [...]}`` (the
            box only on frames with one).
        """
        per_frame: dict[int, dict[str, Any]] = {}
        boxes = dict(prompt.boxes)
        if prompt.box3d is not None:
            cube = prompt.box3d
            boxes.setdefault((cube.z_min + cube.z_max) // 2, cube.slice_box())
        for z, box in boxes.items():
            corners = self.to_frames(
                np.array([[z, box.y_min, box.x_min], [z, box.y_max, box.x_max]])
            )
            low, high = corners.min(axis=0), corners.max(axis=0)
            entry = per_frame.setdefault(int(low[0]), {"points": [], "labels": []})
            entry["box"] = [float(low[2]), float(low[1]), float(high[2]), float(high[1])]
        points, labels = prompt.model_points()
        for (frame, row, column), label in zip(self.to_frames(points), labels):
            entry = per_frame.setdefault(int(frame), {"points": [], "labels": []})
            entry["points"].append([float(column), float(row)])
            entry["labels"].append(int(label))
        return per_frame

    # -- prediction -------------------------------------------------------------------------
    def _add_prompts(self, state: Any, per_frame: dict[int, dict[str, Any]]) -> None:
        for frame, entry in sorted(per_frame.items()):
            points = np.asarray(entry["points"], dtype=np.float32).reshape(-1, 2)
            self.net.add_new_points_or_box(
                inference_state=state,
                frame_idx=frame,
                obj_id=1,
                points=points if len(points) else None,
                labels=np.asarray(entry["labels"], dtype=np.int32) if len(points) else None,
                box=entry.get("box"),
            )

    def propagate(self, per_frame: dict[int, dict[str, Any]]) -> list[tuple[int, Any]]:
        """(frame, logits (H, W) on the CPU) of the forward, then the reverse propagation.

        Args:
            per_frame: The prompts of :meth:`frame_prompts`.

        Returns:
            (frame, float logits tensor (H, W) on the CPU) per propagated frame, forward pass first.
        """
        import torch

        height, width = self._frame_shape[1:]
        outputs = []
        with (
            torch.inference_mode(),
            forward_context(self.device, self.precision),
            quiet_faithful_predictor(),
        ):
            with frames_as_video(self._frames, height, width):
                state = self.net.init_state(video_path=None)
            for reverse in (False, True):
                self._add_prompts(state, per_frame)
                for frame, _ids, logits in self.net.propagate_in_video(state, reverse=reverse):
                    outputs.append((int(frame), logits[0, 0].float().cpu()))
                self.net.reset_state(state)
        return outputs

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """MedSAM2's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

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
            raise RuntimeError("MedSAM2: set_case() was not called")
        per_frame = self.frame_prompts(prompt)
        if not per_frame:
            raise ValueError("MedSAM2 needs a box or clicks")
        started = time.perf_counter()
        segmentation = np.zeros(self._frame_shape, dtype=bool)
        for frame, logits in self.propagate(per_frame):
            segmentation[frame] |= (logits > 0.0).numpy()
        segmentation = largest_component(segmentation)  # MedSAM2's getLargestCC: 26-connected
        mask = to_canonical(segmentation, self._image.geometry) if self._native else segmentation
        self._seconds += time.perf_counter() - started
        return Prediction(
            np.ascontiguousarray(mask), {"model": self.name, "prompted_frames": sorted(per_frame)}
        )
