"""SAM-Med2D's adapter layers: the :class:`SliceAdapter` of each ViT block and the
:class:`AdapterBlock` that carries it (segment_anything's ``Block`` plus the adapter), built on
first use so that torch is imported lazily.

A module of its own so that :func:`intrabench.models.sam_family._sam_common.build_sam` (which builds the
adapter ViT for SAM-Med2D) and :mod:`intrabench.models.sam_family.sam_med2d` both import it without
importing each other.
"""

from __future__ import annotations

from typing import Any

_CLASSES: dict[str, type] = {}


def adapter_classes() -> tuple[type, type]:
    """(SliceAdapter, AdapterBlock), built on first use (torch is imported lazily).

    They are also reachable as module attributes ``SliceAdapter`` and ``AdapterBlock``.
    """
    if _CLASSES:
        return _CLASSES["SliceAdapter"], _CLASSES["AdapterBlock"]
    import torch

    from intrabench.models.sam_family._segment_anything import modeling

    Block = modeling().image_encoder.Block  # noqa: N806
    from torch import nn

    class _SliceAdapter(nn.Module):
        """Channel (squeeze-excitation) then spatial (conv down / transposed conv up) adapter.

        Input and output are (B, H, W, C) tokens; H and W must be even. ``channel``:
        Linear(C, C/4) - ReLU - Linear(C/4, C) - Sigmoid on the average-pooled tokens,
        multiplied back; ``spatial``: Conv2d(C, C, 3, stride 2) - ReLU -
        ConvTranspose2d(C, C, 4, stride 2) - ReLU; then a skip connection from the input and
        LayerNorm ``norm``. No biases in the linear/conv layers.
        """

        def __init__(self, dim: int, ratio: float = 0.25) -> None:
            super().__init__()
            hidden = int(dim * ratio)
            self.norm = nn.LayerNorm(dim)
            self.channel = nn.Sequential(
                nn.Linear(dim, hidden, bias=False),
                nn.ReLU(),
                nn.Linear(hidden, dim, bias=False),
                nn.Sigmoid(),
            )
            self.spatial = nn.Sequential(
                nn.Conv2d(dim, dim, kernel_size=3, stride=2, padding=1, bias=False),
                nn.ReLU(),
                nn.ConvTranspose2d(dim, dim, kernel_size=4, stride=2, padding=1, bias=False),
                nn.ReLU(),
            )

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            features = tokens.permute(0, 3, 1, 2)
            weights = self.channel(features.mean(dim=(2, 3)))
            reweighted = features * weights[:, :, None, None]
            out = features + self.spatial(reweighted)
            return self.norm(out.permute(0, 2, 3, 1))

    class _AdapterBlock(Block):
        """segment_anything's ViT block plus an adapter fed with the MLP's input:
        ``x = x + attn(...)``; ``x = x + mlp(norm2(x)) + Adapter(norm2(x))``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.Adapter = _SliceAdapter(self.norm2.normalized_shape[0])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            from segment_anything.modeling.image_encoder import (
                window_partition,
                window_unpartition,
            )

            shortcut = x
            x = self.norm1(x)
            if self.window_size > 0:
                height, width = x.shape[1], x.shape[2]
                x, pad_hw = window_partition(x, self.window_size)
            x = self.attn(x)
            if self.window_size > 0:
                x = window_unpartition(x, self.window_size, pad_hw, (height, width))
            x = shortcut + x
            normed = self.norm2(x)
            return x + self.mlp(normed) + self.Adapter(normed)

    _SliceAdapter.__name__ = _SliceAdapter.__qualname__ = "SliceAdapter"
    _AdapterBlock.__name__ = _AdapterBlock.__qualname__ = "AdapterBlock"
    _CLASSES.update(SliceAdapter=_SliceAdapter, AdapterBlock=_AdapterBlock)
    return _SliceAdapter, _AdapterBlock


def __getattr__(name: str) -> Any:  # SliceAdapter / AdapterBlock, built when first asked for
    if name in ("SliceAdapter", "AdapterBlock"):
        adapter_classes()
        return _CLASSES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
