"""MedSAM (Ma et al. 2024): SAM ViT-B fine-tuned on medical images, box prompts only.

Preprocessing (paper Appendix A.3 and MedSAM's own inference code): each axial slice is
clipped to its own 0.5th/99.5th percentiles and scaled to 0..255 (8 bit), replicated to RGB,
squashed to 1024 x 1024 as MedSAM's own scripts do (:func:`resize_like_medsam`: scikit-image's
cubic spline, clipped to the slice's range, truncated to 8 bit), min-max scaled to [0, 1]
*after* the resize, and fed to the image encoder directly (no pixel mean/std, no padding).
Decoding: the box only (points are ignored: MedSAM was not trained on them), box scaled per
axis by 1024/W and 1024/H, single-mask output, ``sigmoid(low-res logits)`` upsampled bilinearly
to the slice size, threshold > 0.5. No mask input, so the model cannot be refined.

Orientation: each slice is seen as the file stores it (``slice_view: stored``, the default;
:mod:`intrabench.models.sam_family._slice_view`), as MedSAM's ``pre_CT_MR.py`` reads its training images with
SimpleITK; ``slice_view: canonical`` gives IntraBench's RAS+ slices.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import SliceOutput
from intrabench.model_cards import variants_of
from intrabench.models.sam_family._sam_common import (
    SAM_CONFIGS,
    TINY_SAM,
    SamFamilyModel,
    build_sam,
    logits_feedback,
    percentile_window,
    prompt_tensors,
    sam_decode,
    sam_embedding_nbytes,
    to_uint8,
)
from intrabench.models.sam_family._slice_view import check_slice_view
from intrabench.registry import models
from intrabench.types import SlicePrompt


@models.register
class MedSAM(SamFamilyModel):
    """MedSAM (SAM ViT-B fine-tuned for medical images), slice by slice; box prompts only."""

    name: ClassVar[str] = "medsam"
    licence: ClassVar[str] = "Apache-2.0"
    accepts: ClassVar[frozenset[str]] = frozenset({"box2d", "box3d"})
    #: variant -> checkpoint key, from the model's card (intrabench/resources/model_cards)
    VARIANTS: ClassVar[dict[str, str]] = variants_of("medsam")
    DEFAULT_VARIANT: ClassVar[str] = "vit_b"
    AUTO_MULTIMASK: ClassVar[str] = "never"
    #: ``backend: onnxruntime | openvino`` on request; ``auto`` stays torch until measured
    EXPORTABLE_ENCODER: ClassVar[bool] = True

    def __init__(self, slice_view: str = "stored", **params: Any) -> None:
        check_slice_view(slice_view)
        super().__init__(**params)
        self.slice_view = slice_view

    def build_network(self, tiny: bool) -> Any:
        """The MedSAM (SAM ViT-B) torch module with random weights (the full architecture, or a
        tiny test configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of ViT-B.

        Returns:
            segment_anything's ``Sam`` module.
        """
        return build_sam(TINY_SAM if tiny else SAM_CONFIGS["vit_b"])

    def preprocess(self, zs: list[int]) -> Any:
        """Encoder input for axial slices ``zs``: each slice windowed to uint8 and resized as
        MedSAM's official code does; float32 (B, 3, S, S) on the model's device.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs`` (S = 1024 at full size).
        """
        import torch

        size = self.net.image_encoder.img_size
        slices = [
            resize_like_medsam(
                np.ascontiguousarray(self.view.image(to_uint8(s, percentile_window(s)))), size
            )
            for s in (self.image.array[z] for z in zs)
        ]
        batch = torch.from_numpy(np.stack(slices)).to(self.device)
        return batch[:, None].expand(-1, 3, -1, -1).contiguous()

    def embedding_nbytes(self) -> int:
        """Bytes of one slice embedding (float32), known from the architecture: sizes the cache's
        batches.

        Returns:
            Bytes of a float32 (256, 64, 64) embedding at full size.
        """
        return sam_embedding_nbytes(self.net)

    def encode(self, batch: Any) -> list[Any]:
        """Run the image encoder on a preprocessed batch (B, 3, S, S); one float32 embedding (C,
        h, w) per slice, (256, 64, 64) at full size.

        Args:
            batch: The encoder input of :meth:`preprocess`, (B, 3, S, S).

        Returns:
            B embedding tensors (C, h, w).
        """
        return [embedding.clone() for embedding in self.net.image_encoder(batch)]

    def decode(self, embedding: Any, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        """Mask and feedback of one slice prompt from its embedding.

        Args:
            embedding: The slice's embedding from :meth:`encode`.
            prompt: The slice's clicks (y, x) and box, in canonical voxels.
            feedback: The previous step's low-resolution logits of this slice, or None.

        Returns:
            The mask, bool (y, x) of the image's slice shape, and the feedback for the next step.

        Points alone give an empty mask: MedSAM segments from a box.
        """
        import torch
        import torch.nn.functional as F

        shape = tuple(self.image.shape[1:])
        if prompt.box is None:  # points alone: MedSAM has nothing to segment from
            return SliceOutput(np.zeros(shape, dtype=bool), None)
        height, width = self.view.shape(shape)
        size = self.net.image_encoder.img_size
        box_only = SlicePrompt(
            z=prompt.z,
            points=np.zeros((0, 2), np.int64),
            labels=np.zeros((0,), np.int8),
            box=self.view.box(prompt.box, shape),
        )
        _, _, box = prompt_tensors(box_only, size / height, size / width, self.device)
        low_res, _ = sam_decode(self.net, embedding, None, None, box, None, multimask=False)
        probability = F.interpolate(
            torch.sigmoid(low_res.float()), (height, width), mode="bilinear", align_corners=False
        )
        mask = self.view.to_canonical((probability[0, 0] > 0.5).cpu().numpy().astype(bool))
        return SliceOutput(np.ascontiguousarray(mask), logits_feedback(low_res))


def resize_like_medsam(slice_uint8: np.ndarray, size: int) -> np.ndarray:
    """A (y, x) 8-bit slice as MedSAM's inference scripts prepare it, float32 (size, size).

    ``skimage.transform.resize(order=3, preserve_range=True, anti_aliasing=True)`` (which clips
    the spline's overshoot to the input's range), ``astype(np.uint8)``, then min-max to [0, 1]
    with the denominator clipped at 1e-8. Resizing the one grey channel equals resizing its
    three identical RGB copies (the channel axis is not resampled). A bicubic resize on the
    device without the clip rescaled whole slices (mean 0.014, max 0.043 apart) and differs
    from the spline by up to 15.6 grey levels.

    Args:
        slice_uint8: Uint8 (y, x) slice, in the model's slice view.
        size: The encoder's input side, in pixels (1024 at full size).

    Returns:
        Float32 (size, size) in [0, 1].
    """
    from skimage.transform import resize

    resized = resize(
        slice_uint8, (size, size), order=3, preserve_range=True, anti_aliasing=True
    ).astype(np.uint8)
    low, high = float(resized.min()), float(resized.max())
    return ((resized - low) / max(high - low, 1e-8)).astype(np.float32)
