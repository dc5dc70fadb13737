"""A plugin that adds a prompt kind, imported on both sides of the wire: by the test (the
client) and by the server it starts (``intrabench serve-model --import
tests.serving.served_kinds``). It registers the ``disc`` element, a 3D model that takes it and
a prompter that gives one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from intrabench import prompt_elements, registry
from intrabench.interfaces import Model, Prompter
from intrabench.prompt_elements import PromptElement, Stroke
from intrabench.types import Interaction, Prediction, Prompt


@dataclass(frozen=True)
class Disc(PromptElement):
    """A disc of ``radius`` voxels around (z, y, x) on axial slice z."""

    kind: ClassVar[str] = "disc"
    interaction: ClassVar[str] = "disc"
    cost: ClassVar[int] = 2
    seconds: ClassVar[float] = 4.0
    z: int
    y: int
    x: int
    radius: int
    label: int = 1

    def slices(self) -> set[int]:
        """Its slice z."""
        return {self.z}

    def marks(self) -> list:
        """A closed stroke through four points of its rim."""
        r = self.radius
        rim = [
            (self.z, self.y - r, self.x),
            (self.z, self.y, self.x + r),
            (self.z, self.y + r, self.x),
        ]
        return [Stroke(np.array(rim + [(self.z, self.y, self.x - r)]), self.label, closed=True)]

    def to_json(self) -> dict[str, Any]:
        """``{"zyx": [z, y, x], "radius": r, "label": 1}``."""
        return {"zyx": [self.z, self.y, self.x], "radius": self.radius, "label": self.label}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Disc:
        """The disc :meth:`to_json` wrote."""
        return cls(*(int(v) for v in data["zyx"]), int(data["radius"]), int(data["label"]))


class DiscModel(Model):
    """Segments the discs it is given, each on its slice (and counts the discs it saw)."""

    name: ClassVar[str] = "test-disc-model"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"disc"})

    def set_case(self, image) -> None:
        """Remember the grid."""
        self.shape = image.shape

    def predict(self, prompt, previous=None, update_slices=None) -> Prediction:
        """The union of the prompt's discs."""
        mask = np.zeros(self.shape, dtype=bool)
        zz, yy, xx = np.indices(self.shape)
        for disc in prompt.elements_of("disc"):
            inside = (yy - disc.y) ** 2 + (xx - disc.x) ** 2 <= disc.radius**2
            mask |= (zz == disc.z) & inside
        return Prediction(mask)


class DiscPrompter(Prompter):
    """One disc of radius 3 on the target's median slice, around its median voxel."""

    name: ClassVar[str] = "test-disc"
    dimensions: ClassVar[frozenset[int]] = frozenset({3})
    kinds: ClassVar[frozenset[str]] = frozenset({"disc"})
    effort_rule: ClassVar[str] = "1 disc = 2"

    def initial(self, context) -> Prompt:
        """The disc, costing one ``disc`` interaction."""
        z, y, x = (int(np.median(a)) for a in np.nonzero(context.ground_truth))
        return Prompt(
            extras=(Disc(z, y, x, 3),),
            interactions=(Interaction("disc"),),  # type: ignore[arg-type]
            effort_label="2",
        )


def register() -> None:
    """Register the kind, the model and the prompter (once)."""
    if "disc" not in prompt_elements.ELEMENT_KINDS:
        prompt_elements.register_element(Disc)
    if DiscModel.name not in registry.models.names():
        registry.models.register(DiscModel)
    if DiscPrompter.name not in registry.prompters.names():
        registry.prompters.register(DiscPrompter)


def unregister() -> None:
    """Remove what :func:`register` added."""
    registry.models.unregister(DiscModel.name)
    registry.prompters.unregister(DiscPrompter.name)
    prompt_elements.unregister_element("disc")


register()
