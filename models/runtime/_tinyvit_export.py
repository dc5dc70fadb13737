"""TinyViT's image encoder as it is exported: each attention's fused query-key-value projection
split into three projections.

TinyViT's ``Attention`` projects its tokens with one linear layer (``qkv``), views the result as
(batch, tokens, heads, key + key + value) and splits the last axis into the query, key and value.
Exported to ONNX, that split is a ``VariadicSplit`` that OpenVINO's CPU plugin runs with its
reference kernel, with the copies it makes (a few percent of LiteMedSAM's encoder pass:
docs/performance.md). Three linear layers whose weights are ``qkv``'s rows of each part (head by head) compute
the same dot products, so the same numbers (equal to the bit in PyTorch and in OpenVINO on
LiteMedSAM's and MobileSAM's trained weights, tests/models2d/test_litemedsam.py and
test_mobilesam.py), without the split, and a pass is a few percent faster for both models
(docs/performance.md).

Only the exported copy changes: :func:`with_split_qkv` returns a new module (the norms, output
projections and other layers shared with the original, which is left as it is). The adapters
that export this graph (:class:`._sam_common.TinyViTExport`: LiteMedSAM, MobileSAM) name it
``qkv3`` in their ``ENCODER_GRAPH``, which the export's file name carries, so an export of the
plain graph is not reused.

Array conventions: tokens are (batch, tokens, channels) float tensors, as TinyViT's.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


class SplitQKVAttention(torch.nn.Module):
    """TinyViT's window attention (eval mode) with the query, key and value projected apart."""

    def __init__(self, attention: Any) -> None:
        super().__init__()
        self.num_heads = int(attention.num_heads)
        self.key_dim = int(attention.key_dim)
        self.value_dim = int(attention.d)
        self.scale = float(attention.scale)
        self.norm = attention.norm
        self.proj = attention.proj
        bias = getattr(attention, "ab", None)
        if bias is None:  # eval mode keeps it as ``ab``; the parameter's gather otherwise
            bias = attention.attention_biases[:, attention.attention_bias_idxs]
        self.register_buffer("attention_bias", bias.detach().clone(), persistent=False)
        per_head = 2 * self.key_dim + self.value_dim
        self.query = self._rows_of(attention.qkv, per_head, 0, self.key_dim)
        self.key = self._rows_of(attention.qkv, per_head, self.key_dim, 2 * self.key_dim)
        self.value = self._rows_of(attention.qkv, per_head, 2 * self.key_dim, per_head)

    def _rows_of(
        self, fused: torch.nn.Linear, per_head: int, start: int, stop: int
    ) -> torch.nn.Linear:
        """A linear layer of ``fused``'s output rows ``start:stop`` of every head's block."""
        rows = torch.cat(
            [
                torch.arange(head * per_head + start, head * per_head + stop)
                for head in range(self.num_heads)
            ]
        )
        layer = torch.nn.Linear(
            fused.in_features,
            len(rows),
            bias=fused.bias is not None,
            dtype=fused.weight.dtype,
            device=fused.weight.device,
        )
        with torch.no_grad():
            layer.weight.copy_(fused.weight[rows])
            if fused.bias is not None:
                layer.bias.copy_(fused.bias[rows])
        return layer

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, count, _ = tokens.shape
        tokens = self.norm(tokens)

        def heads(values: torch.Tensor) -> torch.Tensor:  # (batch, heads, tokens, dim)
            return values.view(batch, count, self.num_heads, -1).permute(0, 2, 1, 3)

        query, key, value = (
            heads(self.query(tokens)),
            heads(self.key(tokens)),
            heads(self.value(tokens)),
        )
        attention = (query @ key.transpose(-2, -1)) * self.scale + self.attention_bias
        attention = attention.softmax(dim=-1)
        mixed = (
            (attention @ value)
            .transpose(1, 2)
            .reshape(batch, count, self.num_heads * self.value_dim)
        )
        return self.proj(mixed)


def is_tinyvit_attention(module: Any) -> bool:
    """Whether ``module`` is a TinyViT window attention (fused ``qkv``, ``key_dim``, ``d``)."""
    return (
        type(module).__name__ == "Attention"
        and isinstance(getattr(module, "qkv", None), torch.nn.Linear)
        and all(
            hasattr(module, name) for name in ("key_dim", "d", "num_heads", "scale", "norm", "proj")
        )
    )


def with_split_qkv(encoder: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``encoder`` (in eval mode) whose TinyViT attentions project query, key and
    value apart (:class:`SplitQKVAttention`); ``encoder`` is not changed. The copy shares
    every other layer's parameters."""
    copied = copy.copy(encoder)  # a shallow copy: its children are replaced below, not mutated
    _replace_attentions(copied)
    return copied.eval()


def _replace_attentions(module: torch.nn.Module) -> None:
    module._modules = dict(module._modules)  # this copy's own table of children
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        if is_tinyvit_attention(child):
            module._modules[name] = SplitQKVAttention(child)
        else:
            child = copy.copy(child)
            module._modules[name] = child
            _replace_attentions(child)
