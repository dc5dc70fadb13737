"""SAM (Kirillov et al. 2023) slice by slice: ViT-B/L/H through the ``segment-anything`` package.

Preprocessing (paper Appendix A.1): the volume is clipped to its 0.5th/99.5th percentiles and
scaled to 0..255 (8 bit), each axial slice is replicated to RGB, its longest side resized to
1024 (bilinear, antialiased, rounded to 8 bit like ``SamPredictor.set_image``), normalised with SAM's
pixel mean/std and padded bottom/right to 1024 x 1024 (``Sam.preprocess``).
Decoding: points and box together, previous low-res logits (256 x 256) as mask input when
refining; output logits upsampled to 1024, padding cropped, upsampled to the slice size,
threshold logits > 0 (``Sam.mask_threshold``). Multimask 'auto': the three-mask output with the
best predicted IoU for a single click without box or mask, else the single-mask output.
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
    feedback_tensor,
    logits_feedback,
    percentile_window,
    prompt_tensors,
    sam_decode,
    sam_embedding_nbytes,
    slice_batch,
    to_uint8,
)
from intrabench.registry import models
from intrabench.types import SlicePrompt


def longest_side_shape(height: int, width: int, size: int) -> tuple[int, int]:
    """(h, w) after resizing the longest side to ``size`` (SAM's ResizeLongestSide rounding).

    Args:
        height: The slice's rows.
        width: The slice's columns.
        size: The longest side after resizing, in pixels.

    Returns:
        (rows, cols) after resizing.
    """
    scale = size / max(height, width)
    return int(height * scale + 0.5), int(width * scale + 0.5)


@models.register
class SAM(SamFamilyModel):
    """Segment Anything (ViT-H default), slice by slice; points, boxes, mask refinement."""

    name: ClassVar[str] = "sam"
    licence: ClassVar[str] = "Apache-2.0"
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "box3d", "scribble", "mask"})
    #: variant -> checkpoint key, from the model's card (intrabench/resources/model_cards)
    VARIANTS: ClassVar[dict[str, str]] = variants_of("sam")
    DEFAULT_VARIANT: ClassVar[str] = "vit_h"
    AUTO_MULTIMASK: ClassVar[str] = "single-point"
    #: ``backend: onnxruntime | openvino`` on request; ``auto`` stays torch until measured
    EXPORTABLE_ENCODER: ClassVar[bool] = True

    def build_network(self, tiny: bool) -> Any:
        """The SAM torch module with random weights (the full architecture, or a tiny test
        configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of the ``variant``'s network.

        Returns:
            segment_anything's ``Sam`` module.
        """
        return build_sam(TINY_SAM if tiny else SAM_CONFIGS[self.variant])

    def _window(self) -> tuple[float, float]:
        return self.case_value("window", lambda: percentile_window(self.image.array))

    def _input_shape(self) -> tuple[int, int]:
        height, width = self.image.shape[1:]
        return longest_side_shape(height, width, self.net.image_encoder.img_size)

    def resized_input(self, zs: list[int]) -> Any:
        """Slices ``zs`` as 8-bit RGB resized so the longest side is the input size: a float
        tensor (B, 3, h', w') of integral values 0..255, before mean/std and padding.

        ``SamPredictor.set_image`` resizes the uint8 image with PIL (bilinear, antialiased)
        and gets uint8 back; this does the same in torch (batched, on the device) and rounds,
        matching PIL to within one grey level.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs``.
        """
        import torch.nn.functional as F

        window = self._window()
        batch = slice_batch((to_uint8(self.image.array[z], window) for z in zs), self.device)
        resized = F.interpolate(
            batch, self._input_shape(), mode="bilinear", align_corners=False, antialias=True
        )
        return resized.round().clamp(0, 255)

    def preprocess(self, zs: list[int]) -> Any:
        """Encoder input for axial slices ``zs``: each slice windowed, resized to the long side S
        and normalised as SAM's ``preprocess`` does; float32 (B, 3, S, S) on the model's
        device.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs`` (S = 1024 at full size).
        """
        return self.net.preprocess(self.resized_input(zs))

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
        embeddings = self.net.image_encoder(batch)
        return [embedding.clone() for embedding in embeddings]

    def decode(self, embedding: Any, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        """Mask and feedback of one slice prompt from its embedding.

        Args:
            embedding: The slice's embedding from :meth:`encode`.
            prompt: The slice's clicks (y, x) and box, in canonical voxels.
            feedback: The previous step's low-resolution logits of this slice, or None.

        Returns:
            The mask, bool (y, x) of the image's slice shape, and the feedback for the next step.
        """
        net = self.net
        height, width = self.image.shape[1:]
        input_h, input_w = self._input_shape()
        coords, labels, box = prompt_tensors(prompt, input_h / height, input_w / width, self.device)
        mask_input = feedback_tensor(feedback, self.device)
        low_res, _ = sam_decode(
            net,
            embedding,
            coords,
            labels,
            box,
            mask_input,
            self.use_multimask(prompt, mask_input is not None),
        )
        logits = net.postprocess_masks(low_res.float(), (input_h, input_w), (height, width))
        mask = (logits[0, 0] > net.mask_threshold).cpu().numpy().astype(bool)
        return SliceOutput(np.ascontiguousarray(mask), logits_feedback(low_res))
