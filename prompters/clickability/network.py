"""``network``: a learned clickability network plugged in as a component (RClicks section 4.2).

RClicks trains a segmentation network that takes the image, the ground-truth mask and the
error mask and predicts the clickability map (trained with a KL-divergence loss against maps
built from observed clicks, :mod:`intrabench.clicks.observed`). IntraBench ships no trained
network (RClicks' was trained on natural images); this component runs yours:

* ``factory``: ``"package.module:function"``, called as ``function(ndim=2 or 3)``, returning a
  ``torch.nn.Module`` that maps a (1, 3, *spatial) float32 tensor (channels: the image
  z-scored over the crop with missing values at 0, the target mask, the region mask) to
  (1, 1, *spatial) logits, fully convolutional (the crop's size varies);
* ``checkpoint``: optional state dict, loaded with ``torch.load(weights_only=True)``.

The map is ``exp(logit - max)`` over the region (a softmax restricted to it). The network
runs on the CPU in the simulated user's process, in float32, without gradients.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import ClassVar

import numpy as np

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.registry import clickability


def load_factory(factory: str):
    """The callable named ``"module:function"``; ValueError when it cannot be imported.

    Args:
        factory: ``"module:function"``, e.g. ``"my_package.nets:build"``.

    Returns:
        The named attribute of the imported module.

    Raises:
        ValueError: The text is not of that form, or the module or attribute is missing.
    """
    module_name, _, attribute = factory.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"factory must be 'module:function', got {factory!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name!r}: {error}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no {attribute!r}") from None


@clickability.register
class NetworkClickability(ClickabilityModel):
    """A learned clickability network (see the module docstring)."""

    name: ClassVar[str] = "network"
    needs_image: ClassVar[bool] = True
    description: ClassVar[str] = "a learned clickability network (image, target, region -> map)"

    def __init__(self, factory: str, checkpoint: str | None = None) -> None:
        self.factory = factory
        self.checkpoint = checkpoint
        self._build = load_factory(factory)
        self._networks: dict[int, object] = {}
        if checkpoint is not None and not Path(checkpoint).expanduser().is_file():
            raise ValueError(f"checkpoint not found: {checkpoint}")

    def __getstate__(self) -> dict:  # the workers rebuild the networks from the factory
        state = dict(self.__dict__)
        state["_networks"] = {}
        state["_build"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build = load_factory(self.factory)

    def network(self, ndim: int):
        """The network for ``ndim``-D regions, built (and its weights loaded) at first use.

        Args:
            ndim: 2 for (y, x) regions, 3 for (z, y, x) regions.

        Returns:
            The torch module in eval mode, float32, on the CPU.
        """
        if ndim not in self._networks:
            import torch

            network = self._build(ndim=ndim)
            if self.checkpoint is not None:
                state = torch.load(
                    Path(self.checkpoint).expanduser(), map_location="cpu", weights_only=True
                )
                network.load_state_dict(state)
            self._networks[ndim] = network.eval().float()
        return self._networks[ndim]

    @staticmethod
    def inputs(region: ClickRegion) -> np.ndarray:
        """(3, *spatial) float32 input channels: z-scored image (0 where missing), target,
        region.

        Args:
            region: The region: bool mask, and the target and image crops where given.

        Returns:
            Float32 (3, *mask.shape); the target channel is the mask when no target is given.
        """
        mask = region.mask
        image = (
            np.zeros(mask.shape)
            if region.image is None
            else np.asarray(region.image, dtype=np.float64)
        )
        known = np.isfinite(image)
        if known.any():
            values = image[known]
            spread = values.std() or 1.0
            image = np.where(known, (image - values.mean()) / spread, 0.0)
        target = region.target if region.target is not None else mask
        return np.stack([image, target, mask]).astype(np.float32)

    def weights(self, region: ClickRegion) -> np.ndarray:
        """Unnormalised click weights from the network's logits: float64 of the mask's shape, 0
        outside it.

        Args:
            region: The region to click in (mask, spacing in mm, target and image crops).

        Returns:
            ``exp(logit - max logit in the mask)`` inside the mask, in (0, 1].

        Raises:
            ValueError: The network gave non-finite logits in the mask.
        """
        import torch

        network = self.network(region.mask.ndim)
        with torch.no_grad():
            logits = network(torch.from_numpy(self.inputs(region))[None])
        logits = logits.detach().cpu().numpy().astype(np.float64).reshape(region.mask.shape)
        inside = logits[region.mask]
        if inside.size == 0 or not np.isfinite(inside).all():
            raise ValueError(f"clickability network {self.factory} gave non-finite logits")
        return np.where(region.mask, np.exp(logits - inside.max()), 0.0)
