"""Faster image encoders for the segment_anything-based adapters (SAM, MedSAM, SAM-Med2D), same
function: fused attention, bf16 weights and ``torch.compile``.

* **Fused attention.** segment_anything's ViT attention materialises the (tokens x tokens)
  attention matrix, adds the decomposed relative-position terms to it and applies softmax in
  separate kernels. :class:`SdpaAttention` computes the same thing with
  ``torch.nn.functional.scaled_dot_product_attention``: the relative-position terms become the
  additive attention bias (they depend on the *unscaled* query, as upstream), and the kernel
  scales q by 1/sqrt(head dim), as upstream's ``self.scale``. Weights, parameter names and
  shapes are upstream's (the module's class is swapped), so checkpoints load unchanged.
  Outputs equal upstream's within float rounding (tests: 1e-5 in float32, bf16 tolerance
  under autocast, on tiny networks).
* **bf16 weights.** The image encoder's parameters are stored in bfloat16 and it runs without
  autocast (autocast re-casts float32 weights at every call, and runs LayerNorm in float32);
  its input is cast to bf16 and its output back to float32, so the embedding cache, the
  prompt encoder and the decoder see what they saw before.
* **compile.** ``torch.compile`` of the image encoder (the first call compiles: tens of
  seconds for ViT-H; shapes are fixed, so it compiles once per process).

SAM2's Hiera already uses ``scaled_dot_product_attention``; only compile and bf16 weights
apply there. torch is imported inside functions.
"""

from __future__ import annotations

import functools
from typing import Any

from intrabench.models.runtime._precision import check_choice

#: values of the adapters' ``attention`` parameter
ATTENTIONS: tuple[str, ...] = ("auto", "fused", "reference")
#: values of the adapters' ``encoder_weights`` parameter
ENCODER_WEIGHTS: tuple[str, ...] = ("float32", "bf16")


def resolve_attention(attention: str, device_kind: str) -> str:
    """'fused' or 'reference' for ``attention`` on a device of kind ``device_kind``: 'auto'
    is fused on CUDA (where it is faster) and the reference code elsewhere (CPU results stay
    bit-identical to upstream's)."""
    check_choice("attention", attention, ATTENTIONS)
    if attention == "auto":
        return "fused" if device_kind == "cuda" else "reference"
    return attention


@functools.cache
def sdpa_attention_class() -> type:
    """segment_anything's ViT ``Attention`` with its forward pass through fused attention."""
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's convention

    from intrabench.models.sam_family._segment_anything import modeling

    image_encoder = modeling().image_encoder
    Attention, get_rel_pos = image_encoder.Attention, image_encoder.get_rel_pos  # noqa: N806

    class SdpaAttention(Attention):
        """:class:`segment_anything.modeling.image_encoder.Attention` computed with
        ``scaled_dot_product_attention``; input and output (B, H, W, C) tokens."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            batch, height, width, _ = x.shape
            tokens = height * width
            # (3, B, heads, tokens, head dim)
            qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
            query, key, value = qkv.unbind(0)
            bias = None
            if self.use_rel_pos:
                head_dim = query.shape[-1]
                grid = query.reshape(batch * self.num_heads, height, width, head_dim)
                along_h = torch.einsum(
                    "bhwc,hkc->bhwk", grid, get_rel_pos(height, height, self.rel_pos_h)
                )
                along_w = torch.einsum(
                    "bhwc,wkc->bhwk", grid, get_rel_pos(width, width, self.rel_pos_w)
                )
                # bias[q=(h, w), k=(kh, kw)] = along_h[h, w, kh] + along_w[h, w, kw]
                bias = (
                    (along_h[..., :, None] + along_w[..., None, :])
                    .reshape(batch, self.num_heads, tokens, tokens)
                    .to(query.dtype)
                )
            out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias)
            out = out.reshape(batch, self.num_heads, height, width, -1)
            return self.proj(out.permute(0, 2, 3, 1, 4).reshape(batch, height, width, -1))

    SdpaAttention.__qualname__ = "SdpaAttention"
    return SdpaAttention


def use_fused_attention(module: Any) -> int:
    """Swap every segment_anything ViT ``Attention`` inside ``module`` for
    :class:`SdpaAttention` (in place); returns how many were swapped."""
    from intrabench.models.sam_family._segment_anything import modeling

    Attention = modeling().image_encoder.Attention  # noqa: N806
    fused = sdpa_attention_class()
    swapped = 0
    for sub in module.modules():
        if isinstance(sub, Attention) and not isinstance(sub, fused):
            sub.__class__ = fused
            swapped += 1
    return swapped


def use_bf16_weights(encoder: Any) -> Any:
    """Store ``encoder``'s weights in bfloat16 (in place) and make its forward pass cast the
    input to bf16, run with autocast off, and return float32 (a tensor, or a dict, tuple or
    list of them). The module's class is swapped for a subclass (names and shapes unchanged)."""
    import torch

    from intrabench.models.runtime._precision import autocast_disabled, swap_to_derived_class

    def namespace(base: type) -> dict[str, Any]:
        def forward(self: Any, images: Any, *args: Any, **kwargs: Any) -> Any:
            with autocast_disabled(images.device.type):
                output = base.forward(self, images.to(torch.bfloat16), *args, **kwargs)
            return _to_float32(output)

        return {"forward": forward}

    return swap_to_derived_class(encoder, "bf16-weights", "Bf16", namespace).to(torch.bfloat16)


def _to_float32(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: _to_float32(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_float32(v) for v in value)
    return value


def compile_in_place(module: Any) -> Any:
    """``module.compile()`` with fixed shapes (parameter names unchanged; the first call
    compiles)."""
    module.compile(dynamic=False)
    return module
