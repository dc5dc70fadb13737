"""LiteMedSAM's per-slice pre-processing in torch, on the model's device, equal to the official
NumPy/OpenCV steps (:func:`models.litemedsam.network_input` of
:func:`models.litemedsam.to_uint8_like_pre_ct_mr`) to the bit.

On a GPU the encoder takes milliseconds per block of slices, and the official pre-processing on
the CPU (an 8-bit window computed in float64, OpenCV's ``INTER_AREA`` resize, a float64 min-max
and the padding, slice by slice) took as long again while the card waited. Here a
block of raw slices goes to the device once and every step runs there, batched:

1. **8-bit window**: float64 ``clip``, ``(v - low) / (high - low) * 255`` in the same order of
   operations as NumPy (IEEE-754 float64 gives the same bits on any device), truncated to
   uint8; MR voxels that were 0 stay 0.
2. **View**: the :class:`~intrabench.models.sam_family._slice_view.SliceView`'s flips and transpose.
3. **Resize**: only where OpenCV's ``INTER_AREA`` is an exact area mean: the longest side
   shrinks by a whole factor ``f`` in {1, 2, 4, 8, 16} on both axes (a 512 x 512 CT slice:
   ``f = 2``; 1024: 4; 256: 1). OpenCV rounds the 2 x 2 mean half up (``(s + 2) >> 2``) and
   larger means half to even (``rint(s * 1/f^2)``, exact for a power of two): both are
   reproduced and tested against ``cv2.resize``. Any other size returns None, and the adapter
   uses the official steps on the CPU.
4. **Min-max** over the resized slice in float64 (the uint8 difference over the range clipped
   at 1e-8), zero padding bottom and right to 256 x 256, float32.

Array conventions: ``raw`` is a (B, y, x) stack of canonical axial slices in the volume's own
dtype; the result is a float32 (B, 256, 256) tensor on ``raw``'s device.
"""

from __future__ import annotations

from typing import Any

from intrabench.modality import MR
from intrabench.models.sam_family._slice_view import SliceView

#: whole reduction factors whose OpenCV INTER_AREA result is reproduced exactly
EXACT_FACTORS = (1, 2, 4, 8, 16)


def area_factor(view_shape: tuple[int, int], size: int) -> int | None:
    """The whole factor by which the official resize shrinks a view of ``view_shape`` (rows,
    cols) so that its longest side is ``size``, when it is one of :data:`EXACT_FACTORS` on both
    axes; else None."""
    height, width = view_shape
    scale = size * 1.0 / max(height, width)
    new_height, new_width = int(height * scale + 0.5), int(width * scale + 0.5)
    for factor in EXACT_FACTORS:
        if new_height * factor == height and new_width * factor == width:
            return factor
    return None


def eight_bit(
    raw: Any, modality: str, bounds: tuple[float, float], volume_range: tuple[float, float]
) -> Any:
    """uint8 intensities of raw slices, as :func:`models.litemedsam.to_uint8_like_pre_ct_mr`."""
    import torch

    values = raw.to(torch.float64)
    low, high = volume_range
    clipped = values.clamp(bounds[0], bounds[1])
    scaled = (clipped - low) / (high - low) * 255.0 if high > low else torch.zeros_like(clipped)
    if modality == MR:
        scaled = scaled.masked_fill(values == 0, 0.0)
    return scaled.to(torch.uint8)  # truncation toward zero, as numpy's astype


def area_reduce(images: Any, factor: int) -> Any:
    """OpenCV ``INTER_AREA`` by a whole ``factor`` of a uint8 (B, H, W) stack."""
    import torch

    if factor == 1:
        return images
    batch, height, width = images.shape
    sums = (
        images.to(torch.int32)
        .reshape(batch, height // factor, factor, width // factor, factor)
        .sum(dim=(2, 4))
    )
    if factor == 2:
        return ((sums + 2) >> 2).to(torch.uint8)
    return torch.round(sums.to(torch.float64) / (factor * factor)).to(torch.uint8)


def device_network_inputs(
    raw: Any,
    modality: str,
    bounds: tuple[float, float],
    volume_range: tuple[float, float],
    view: SliceView,
    size: int,
) -> Any | None:
    """The float32 (B, size, size) encoder inputs of raw (B, y, x) slices on their device, or
    None when the resize is not one that is reproduced exactly (:func:`area_factor`)."""
    import torch

    images = eight_bit(raw, modality, bounds, volume_range)
    if view.flip_y:
        images = images.flip(1)
    if view.flip_x:
        images = images.flip(2)
    if view.transpose:
        images = images.transpose(1, 2)
    factor = area_factor(tuple(images.shape[1:]), size)
    if factor is None:
        return None
    resized = area_reduce(images.contiguous(), factor)
    flat = resized.reshape(resized.shape[0], -1)
    low = flat.amin(dim=1)
    span = (flat.amax(dim=1) - low).to(torch.float64).clamp(min=1e-8)
    normalised = (resized - low[:, None, None]).to(torch.float64) / span[:, None, None]
    padded = torch.zeros((resized.shape[0], size, size), dtype=torch.float64, device=raw.device)
    padded[:, : resized.shape[1], : resized.shape[2]] = normalised
    return padded.to(torch.float32)
