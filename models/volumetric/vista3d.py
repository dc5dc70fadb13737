"""VISTA3D (MONAI, NVIDIA): interactive 3D CT segmentation from point prompts.

The network is MONAI's ``monai.networks.nets.vista3d132`` (the bundle's ``network_def``); the
pipeline is the MONAI model-zoo bundle ``vista3d`` (``configs/inference.json``, version 0.5.x),
built from MONAI's own transforms and inferer:

1. ``set_case``: the image on its file's own voxel grid ((i, j, k), RAS affine, as
   ``LoadImaged`` gives it), then ``Spacingd`` to 1.5 mm isotropic (bilinear),
   ``CropForegroundd`` (voxels > 0 of the resampled image, margin 10, ``allow_smaller``),
   ``ScaleIntensityRanged`` (HU -963.82..1053.68 to 0..1, clipped: VISTA3D's CT window),
   ``Orientationd`` to RAS and float32. ``intensity="percentile"`` replaces the CT window by
   the 0.5-99.5th percentiles (for MR; VISTA3D was trained on CT only: not the bundle's).
2. ``predict``: canonical (z, y, x) points go to the file's voxel indices, then through the
   bundle evaluator's point transform (``inv(processed affine) @ original affine``); positive
   and negative labels 1/0 (3/2 for VISTA3D's "special" classes when ``prompt_class`` is one).
   ``monai.apps.vista3d.inferer.point_based_window_inferer`` runs 128^3 windows centred on the
   points (overlap 0.3, Gaussian blending), as the bundle's ``Vista3dInferer``.
3. Output: ``VistaPostTransformd`` (without a class prompt: only the components holding a
   positive point are kept), then ``Invertd`` with nearest interpolation back onto the file's
   grid, then to canonical (z, y, x).

Refinement: the previous step's logits (in the processed space, ``Prediction.feedback``) are
the inferer's ``prev_mask`` and only the new points' windows are recomputed (``point_start``),
as MONAI Label's VISTA3D app does. Prompts: clicks and scribbles (their voxels as clicks).
Boxes are not a VISTA3D prompt: with ``box_as_centre_click: true`` a 3D box becomes one
positive click at its centre (``accepts_for``); otherwise a box prompter is skipped as
incompatible. Class prompts: ``class_map`` maps a dataset's class names to VISTA3D's label
indices (``docs/labels.json`` of the bundle); the engine tells the model each target's class
before its forward pass (``set_target_class``) and that index goes with the clicks as the
bundle's ``label_prompt``; other classes get ``prompt_class`` (default None: clicks only).

Weights: the bundle's ``model.pt`` (NVIDIA NCLS v1 licence: non-commercial research and
evaluation only; the code is Apache 2.0). ``weights="random", tiny=True``: a tiny
random-weight network of the same kind (SegResNetDS2 encoder with 16 features), for tests.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.io.volume import Volume, from_canonical, native_index, to_canonical
from intrabench.models.runtime._precision import forward_context
from intrabench.models.volumetric._3d_common import (
    NetworkModel3D,
    check_weights_mode,
    device_and_precision,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

#: the bundle's CT window (ScaleIntensityRanged a_min / a_max)
CT_WINDOW = (-963.8247715525971, 1053.678477684517)
SPACING_MM = 1.5
#: classes whose clicks use the special labels 2 / 3: the default ``special_index`` of
#: ``monai.apps.vista3d.transforms.VistaPreTransformd``, the transform the bundle's inference
#: pipeline applies to user clicks (the bundle's own config file was not available here to
#: check for an override). The network's ``convert_point_label`` has another default, (23, 24,
#: 25, 26, 27, 57, 128), but is used only to sample validation points, never on user clicks.
SPECIAL_CLASSES = (25, 26, 27, 28, 29, 117)
LAST_SUPPORTED = 132


def tiny_network() -> Any:
    """A random-weight VISTA3D with a small SegResNetDS2 encoder (16 features, 3 levels).

    Returns:
        MONAI's ``VISTA3D`` torch module.
    """
    from monai.networks.nets.segresnet_ds import SegResNetDS2
    from monai.networks.nets.vista3d import VISTA3D, ClassMappingClassify, PointMappingSAM

    encoder = SegResNetDS2(
        in_channels=1,
        blocks_down=(1, 1, 1),
        norm="instance",
        out_channels=16,
        init_filters=16,
        dsdepth=1,
    )
    return VISTA3D(
        image_encoder=encoder,
        class_head=ClassMappingClassify(n_classes=512, feature_size=16, use_mlp=True),
        point_head=PointMappingSAM(feature_size=16, n_classes=512, last_supported=LAST_SUPPORTED),
    )


def full_network() -> Any:
    """VISTA3D's full network (MONAI's ``vista3d132``, one input channel) with random weights.

    Returns:
        MONAI's ``VISTA3D`` torch module.
    """
    from monai.networks.nets.vista3d import vista3d132

    return vista3d132(in_channels=1)


def vista3d_state(path: str) -> Any:
    """The state dict in the bundle's ``model.pt`` (a plain state dict, or under 'model' as
    MONAI's CheckpointSaver writes it).

    Args:
        path: The checkpoint file.

    Returns:
        The state dict (parameter name to tensor), ``module.`` prefix removed.
    """
    from intrabench.io.checkpoints import state_dict_in

    return state_dict_in(path, "model", "module.")


def load_vista3d_weights(net: Any, path: str) -> None:
    """Load a VISTA3D checkpoint into ``net``, every key matched.

    Args:
        net: The VISTA3D network.
        path: The checkpoint file.

    Raises:
        CheckpointError: The checkpoint's keys or shapes do not match the network.
    """
    from intrabench.io.checkpoints import load_state_dict_strict

    load_state_dict_strict(net, vista3d_state(path), source=str(path))


def preprocessing(intensity: str = "ct") -> Any:
    """The bundle's preprocessing after loading (dictionary transforms on key ``image``).

    Args:
        intensity: "ct" (the bundle's CT window to [0, 1]) or any other value for the 0.5-99.5
            percentiles (MR).

    Returns:
        The MONAI ``Compose``: 1.5 mm spacing, foreground crop, intensity scaling, RAS, float32.
    """
    import torch
    from monai.transforms import (
        CastToTyped,
        Compose,
        CropForegroundd,
        Orientationd,
        ScaleIntensityRanged,
        ScaleIntensityRangePercentilesd,
        Spacingd,
    )

    scale = (
        ScaleIntensityRanged(
            keys="image", a_min=CT_WINDOW[0], a_max=CT_WINDOW[1], b_min=0.0, b_max=1.0, clip=True
        )
        if intensity == "ct"
        else ScaleIntensityRangePercentilesd(
            keys="image", lower=0.5, upper=99.5, b_min=0.0, b_max=1.0, clip=True
        )
    )
    return Compose(
        [
            Spacingd(keys="image", pixdim=(SPACING_MM,) * 3, mode="bilinear"),
            CropForegroundd(keys="image", source_key="image", allow_smaller=True, margin=10),
            scale,
            Orientationd(keys="image", axcodes="RAS"),
            CastToTyped(keys="image", dtype=torch.float32),
        ]
    )


def loaded_image(image: Volume) -> Any:
    """What ``LoadImaged`` + ``EnsureChannelFirstd`` give for the case's file: a (1, i, j, k)
    MetaTensor on the file's voxel grid with its RAS affine.

    Args:
        image: The case's volume (canonical (z, y, x), with its file geometry).

    Returns:
        A float32 MetaTensor (1, i, j, k).
    """
    import torch
    from monai.data import MetaTensor

    native = from_canonical(image.array, image.geometry)  # (k, j, i)
    affine = torch.as_tensor(image.geometry.ras_affine(), dtype=torch.float64)
    array = np.ascontiguousarray(np.transpose(native, (2, 1, 0))[None], dtype=np.float32)
    return MetaTensor(
        torch.from_numpy(array),
        affine=affine,
        meta={"original_affine": affine.clone(), "space": "RAS"},
    )


@models.register
class Vista3D(NetworkModel3D):
    """VISTA3D (MONAI bundle: 1.5 mm, CT window, 128^3 point-centred windows), clicks only."""

    name: ClassVar[str] = "vista3d"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "scribble", "mask"})
    checkpoint_key: ClassVar[str] = "vista3d"
    licence: ClassVar[str] = "weights NVIDIA NCLS v1 (non-commercial); code Apache-2.0"
    #: appended to the reason a box prompter is skipped
    unaccepted_hint: ClassVar[str] = (
        "set box_as_centre_click: true to give a 3D box as one click at its centre"
    )
    #: the hint is about boxes: a lasso's refusal does not get it
    unaccepted_hint_kinds: ClassVar[frozenset[str]] = frozenset({"box3d", "box2d"})

    def __init__(
        self,
        checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        precision: str = "auto",
        patch_size: int = 128,
        overlap: float = 0.3,
        intensity: str = "ct",
        prompt_class: int | None = None,
        class_map: dict[str, int] | None = None,
        box_as_centre_click: bool = False,
    ) -> None:
        """``patch_size``: window side in voxels (the bundle's 128); ``overlap``: the
        inferer's (0.3); ``intensity``: 'ct' (the bundle) or 'percentile' (MR);
        ``prompt_class``: a VISTA3D class index for every target (None: points only, as the
        bundle without ``label_prompt``); ``class_map``: the VISTA3D class index of a dataset
        class (``{liver: 1, lesion: 133}``), given with the clicks as the bundle's
        ``label_prompt`` for that class's targets (others get ``prompt_class``);
        ``box_as_centre_click``: a 3D box becomes one
        positive click at its centre; ``precision``: 'auto' (bf16 autocast on CUDA, as the
        bundle's amp), 'fp32', 'bf16', 'fp16'."""
        if intensity not in ("ct", "percentile"):
            raise ValueError(f"intensity must be 'ct' or 'percentile', not {intensity!r}")
        check_weights_mode(weights, tiny)
        self.device, self.precision = device_and_precision(device, precision)
        self.net = self.load_network(
            tiny_network if tiny else full_network,
            load_vista3d_weights,
            weights,
            checkpoint,
            checkpoint_dir,
            seed,
        )
        self.roi_size = [int(patch_size)] * 3
        self.overlap = float(overlap)
        self.intensity = intensity
        self.prompt_class = prompt_class
        self.class_map = {str(k): int(v) for k, v in (class_map or {}).items()}
        self._target_class: str | None = None
        self.box_as_centre_click = bool(box_as_centre_click)
        self._image: Volume | None = None
        self._data: dict[str, Any] | None = None
        self._on_device: Any = None  # the processed image on the model's device, per case
        self._seconds = 0.0

    @classmethod
    def accepts_for(cls, params: dict[str, Any]) -> frozenset[str]:
        """The prompt kinds with these parameters: 3D boxes too with ``box_as_centre_click``."""
        return cls.accepts | ({"box3d"} if params.get("box_as_centre_click") else set())

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless ``path`` loads and fits ``vista3d132`` (on meta)."""
        import torch

        from intrabench.io.checkpoints import check_fits

        with torch.device("meta"):
            net = full_network()
        check_fits(net, vista3d_state(str(path)), str(path))

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x), float32); it is preprocessed as VISTA3D's
        official transforms do; the same image again does nothing.
        """
        if image is self._image:
            return
        started = time.perf_counter()
        self._image = image
        self._transform = preprocessing(self.intensity)
        self._data = self._transform({"image": loaded_image(image)})
        self._on_device = self._data["image"].to(self.device)  # once, not at every step
        self._seconds += time.perf_counter() - started

    def set_target_class(self, class_name: str) -> None:
        """The class of the next target (VISTA3D's class prompt)."""
        self._target_class = class_name

    def class_prompt(self) -> int | None:
        """The VISTA3D class given with the next call's clicks: the target's class through
        ``class_map``, else ``prompt_class`` (None: clicks only).

        Returns:
            The class index, or None for clicks only.
        """
        return self.class_map.get(self._target_class or "", self.prompt_class)

    # -- prompts ----------------------------------------------------------------------------
    def clicks(self, prompt: Prompt) -> tuple[np.ndarray, np.ndarray]:
        """Canonical (z, y, x) clicks and labels the model gets: points, scribble voxels and,
        with ``box_as_centre_click``, the 3D box's centre (positive), in that order.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.

        Returns:
            (points (N, 3) canonical (z, y, x) indices, labels (N,) int64, 1 positive 0 negative).
        """
        points, labels = prompt.model_points()
        points, labels = np.asarray(points).reshape(-1, 3), np.asarray(labels).reshape(-1)
        if self.box_as_centre_click and prompt.box3d is not None:
            box = np.array(prompt.box3d.as_tuple()).reshape(2, 3)
            centre = np.floor(box.mean(axis=0)).astype(points.dtype if len(points) else int)
            points = np.concatenate([points, centre[None]])
            labels = np.concatenate([labels, [1]])
        return points, labels.astype(np.int64)

    def processed_points(self, points_zyx: np.ndarray) -> np.ndarray:
        """(N, 3) canonical voxel indices -> coordinates in the processed image (RAS, 1.5 mm,
        cropped), by the bundle evaluator's rule: ``inv(affine) @ original_affine``.

        Args:
            points_zyx: Canonical (z, y, x) voxel indices, (N, 3).

        Returns:
            Float (N, 3) coordinates in the processed image's voxel grid.
        """
        image = self._data["image"]
        native = native_index(points_zyx, self._image.geometry)[:, ::-1]  # (i, j, k)
        homogeneous = np.concatenate([native, np.ones((len(native), 1))], axis=1).T
        move = np.linalg.inv(np.asarray(image.affine, dtype=np.float64)) @ np.asarray(
            image.meta["original_affine"], dtype=np.float64
        )
        return (move @ homogeneous)[:3].T

    # -- prediction ---------------------------------------------------------------------------
    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """VISTA3D's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

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
        import torch
        from monai.apps.vista3d.inferer import point_based_window_inferer

        if self._data is None:
            raise RuntimeError("VISTA3D: set_case() was not called")
        points, labels = self.clicks(prompt)
        if len(points) == 0 or not (labels == 1).any():
            raise ValueError("VISTA3D needs at least one positive click")
        started = time.perf_counter()
        chosen = self.class_prompt()
        if chosen in SPECIAL_CLASSES:
            labels = np.where(labels == 1, 3, 2)
        coords = torch.as_tensor(
            self.processed_points(points)[None], dtype=torch.float32, device=self.device
        )
        point_labels = torch.as_tensor(labels[None], device=self.device)
        prompt_class = class_vector = None
        if chosen is not None:
            prompt_class = torch.tensor([[int(chosen)]], device=self.device)
            class_vector = prompt_class if chosen <= LAST_SUPPORTED else None
        image = self._on_device
        feedback = previous.feedback if previous is not None else None
        prev_mask, start = None, 0
        if isinstance(feedback, dict) and feedback.get("model") == self.name:
            prev_mask = feedback["logits"].to(self.device)
            start = int(feedback["points_used"])
        with torch.no_grad(), forward_context(self.device, self.precision):
            logits = point_based_window_inferer(
                inputs=image[None],
                roi_size=self.roi_size,
                sw_batch_size=1,
                transpose=True,
                with_coord=True,
                predictor=self.net,
                mode="gaussian",
                sw_device=self.device,
                device=self.device,
                overlap=self.overlap,
                point_coords=coords,
                point_labels=point_labels,
                class_vector=class_vector,
                prompt_class=prompt_class,
                prev_mask=prev_mask,
                point_start=start,
            )
        logits = logits.float().cpu()  # once: the post-processing and the next step's feedback
        mask = self.to_canonical_mask(logits, coords, point_labels, chosen)
        self._seconds += time.perf_counter() - started
        return Prediction(
            mask, {"model": self.name, "logits": logits, "points_used": int(len(points))}
        )

    def to_canonical_mask(
        self, logits: Any, coords: Any, point_labels: Any, class_prompt: int | None = None
    ) -> np.ndarray:
        """The bundle's post-processing and inversion of (1, 1, H, W, D) processed-space
        logits (on the CPU), as a canonical (z, y, x) boolean mask.

        Args:
            logits: Torch tensor (1, 1, H, W, D) in the processed space, on the CPU.
            coords: The clicks in the processed space, a tensor.
            point_labels: Their labels, a tensor.
            class_prompt: The class given with the clicks, or None.

        Returns:
            Bool (z, y, x) mask on the case's canonical grid, C-contiguous.
        """
        import torch
        from monai.apps.vista3d.transforms import VistaPostTransformd
        from monai.data import MetaTensor
        from monai.transforms import Invertd

        image = self._data["image"]
        pred = MetaTensor(logits[0].clone(), affine=image.affine, meta=dict(image.meta))
        pred.applied_operations = list(image.applied_operations)
        data = {
            "image": image,
            "pred": pred,
            "points": coords.cpu(),
            "point_labels": point_labels.cpu(),
            "label_prompt": None if class_prompt is None else torch.tensor([class_prompt]),
        }
        data = VistaPostTransformd(keys="pred")(data)
        data = Invertd(
            keys="pred",
            transform=self._transform,
            orig_keys="image",
            nearest_interp=True,
            to_tensor=True,
        )(data)
        native_ijk = np.asarray(data["pred"][0].detach().cpu().numpy()) > 0.5
        native = np.transpose(native_ijk, (2, 1, 0))  # (k, j, i), a view: copied once below
        return np.ascontiguousarray(to_canonical(native, self._image.geometry))
