"""Helpers for the prompter tests: hand-made masks, contexts and a scripted 2D model."""

from __future__ import annotations

from typing import Any

import numpy as np

from intrabench.interfaces import Model, PromptContext, RefineContext, SliceModel, SliceOutput
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.seeding import derive_rng
from intrabench.types import Case, Prediction, Prompt, SlicePrompt, Target


def box_mask(
    shape: tuple[int, int, int], low: tuple[int, int, int], high: tuple[int, int, int]
) -> np.ndarray:
    """Boolean (z, y, x) volume with the inclusive box [low, high] set."""
    mask = np.zeros(shape, dtype=bool)
    mask[low[0] : high[0] + 1, low[1] : high[1] + 1, low[2] : high[2] + 1] = True
    return mask


def sphere_mask(
    shape: tuple[int, int, int], center: tuple[int, int, int], radius: float
) -> np.ndarray:
    z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
    return ((z - center[0]) ** 2 + (y - center[1]) ** 2 + (x - center[2]) ** 2) <= radius**2


def prompt_context(
    gt: np.ndarray,
    seed: int = 0,
    segment_slice: Any = None,
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> PromptContext:
    return PromptContext(
        ground_truth=gt,
        spacing=spacing,
        rng=derive_rng(seed, "test", "initial"),
        segment_slice=segment_slice,
    )


def refine_context(
    gt: np.ndarray,
    prediction: np.ndarray,
    seed: int = 0,
    dimension: int = 2,
    history: list[Prompt] | None = None,
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> RefineContext:
    return RefineContext(
        ground_truth=gt,
        prediction=prediction,
        spacing=spacing,
        rng=derive_rng(seed, "test", "refine"),
        step=1,
        model_dimension=dimension,
        history=list(history or []),
    )


class ScriptedSliceModel(SliceModel):
    """A 2D model that answers every slice prompt with a fixed mask: ``answer[z]``.

    Records every slice prompt it was asked to decode (after the SliceModel memo).
    """

    name = "scripted-slice-model"
    accepts = frozenset({"point", "box2d", "box3d", "scribble", "mask"})

    def __init__(self, answer: np.ndarray) -> None:
        super().__init__()
        self.answer = answer
        self.calls: list[SlicePrompt] = []
        self.set_case(blank_volume(answer.shape))

    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        self.calls.append(prompt)
        return SliceOutput(self.answer[prompt.z].copy(), None)


def points_set(prompt: Prompt, label: int | None = None) -> set[tuple[int, int, int]]:
    points, labels = prompt.points, prompt.point_labels
    if label is not None:
        points = points[labels == label]
    return {tuple(int(v) for v in p) for p in points}


def blank_volume(shape: tuple[int, ...]) -> Volume:
    nz, ny, nx = shape
    geometry = ImageGeometry(
        size=(nx, ny, nz),
        spacing=(1.0, 1.0, 1.0),
        origin=(0.0, 0.0, 0.0),
        direction=(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
    )
    return Volume(np.zeros(shape, np.float32), (1.0, 1.0, 1.0), geometry)


def one_target_case(gt: np.ndarray) -> tuple[Case, Target]:
    target = Target("t1", 1, "thing")
    case = Case("hand-made", "case0", blank_volume(gt.shape), gt.astype(np.int32), (target,))
    return case, target


class ScriptedVolumeModel(Model):
    """A 3D model that always predicts ``answer`` (whatever the prompt)."""

    name = "scripted-volume-model"
    dimension = 3
    accepts = frozenset({"point", "box3d", "scribble", "mask"})

    def __init__(self, answer: np.ndarray) -> None:
        self.answer = answer
        self.prompts: list[Prompt] = []

    def set_case(self, image: Volume) -> None:
        pass

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        self.prompts.append(prompt)
        return Prediction(self.answer.copy())
