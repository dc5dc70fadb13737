"""The simulated clinician of one episode: its initial prompt and its corrections.

:class:`SimulatedUser` bundles a target's prompter and refiner with everything that fixes
their random draws (run seed, dataset, case, target, component keys, step), so the same user
gives the same prompts whether it runs in the model loop or in a worker process (see
:mod:`intrabench.execution.user_worker`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from intrabench.clicks.policy import ClickPolicy
from intrabench.interfaces import PromptContext, Prompter, RefineContext, Refiner
from intrabench.masks import masks_equal
from intrabench.seeding import derive_rng
from intrabench.types import Prompt, SlicePrompt


@dataclass(eq=False)
class SimulatedUser:
    """Prompts one target. Masks are boolean (z, y, x) arrays of the whole canonical volume;
    ``spacing`` is in mm, (z, y, x); ``identity`` is (dataset, case, target)."""

    prompter: Prompter
    prompter_key: str
    refiner: Refiner | None
    refiner_key: str
    seed: int
    identity: tuple[str, str, str]
    spacing: tuple[float, float, float]
    model_dimension: int
    #: where clicks go in a robustness run (a clicking group or the baseline), else None
    clicks: ClickPolicy | None = None

    def initial(
        self,
        ground_truth: np.ndarray,
        segment_slice: Callable[[SlicePrompt], np.ndarray] | None = None,
    ) -> Prompt:
        """The first prompt; ``segment_slice`` lets propagation prompters query a 2D model."""
        clicks = self.clicks.at_step(0) if self.clicks is not None else None
        return _with_click_maps(
            checked_prompt(
                self.prompter.initial(
                    PromptContext(
                        ground_truth=ground_truth,
                        spacing=self.spacing,
                        rng=derive_rng(self.seed, *self.identity, self.prompter_key, "initial"),
                        segment_slice=segment_slice,
                        clicks=clicks,
                        identity=self.identity,
                    )
                ),
                ground_truth.shape,
                f"prompter '{self.prompter_key}'",
            ),
            clicks,
        )

    def refine(
        self, ground_truth: np.ndarray, prediction: np.ndarray, step: int, history: list[Prompt]
    ) -> Prompt | None:
        """The corrections of ``step`` (>= 1), or None when the prediction is already perfect or
        the refiner finds nothing to correct."""
        if self.refiner is None:
            raise ValueError("this simulated user has no refiner")
        if masks_equal(prediction, ground_truth):
            return None
        clicks = self.clicks.at_step(step) if self.clicks is not None else None
        return _with_click_maps(
            checked_prompt(
                self.refiner.refine(
                    RefineContext(
                        ground_truth=ground_truth,
                        prediction=prediction,
                        spacing=self.spacing,
                        rng=derive_rng(
                            self.seed, *self.identity, self.prompter_key, self.refiner_key, step
                        ),
                        step=step,
                        model_dimension=self.model_dimension,
                        history=history,
                        clicks=clicks,
                        identity=self.identity,
                    )
                ),
                ground_truth.shape,
                f"refiner '{self.refiner_key}'",
                may_be_none=True,
            ),
            clicks,
        )


class PromptError(ValueError):
    """A prompter or refiner returned something that is not a prompt on the case's grid: its
    unit fails with this one line, not an IndexError deep in a model (or, for a negative
    index, a click on the far side of the volume)."""


def checked_prompt(
    prompt: object, shape: tuple[int, ...], component: str, may_be_none: bool = False
) -> Prompt | None:
    """``prompt`` when it is a :class:`Prompt` whose every element lies on the (z, y, x)
    grid ``shape`` (None too, from a refiner: nothing left to correct), else PromptError.

    Args:
        prompt: What the prompter's ``initial`` or the refiner's ``refine`` returned.
        shape: The case's (z, y, x) shape, in voxels.
        component: The prompter or refiner, as named in the error line.
        may_be_none: Whether None is accepted (a refiner's "nothing left to correct").

    Returns:
        ``prompt`` itself, unchanged (None when it is None and ``may_be_none``).

    Raises:
        PromptError: ``prompt`` is not a :class:`Prompt`, or an element of it lies outside
            the grid.
    """
    if prompt is None and may_be_none:
        return None
    if not isinstance(prompt, Prompt):
        raise PromptError(f"{component} returned {type(prompt).__name__}, not a Prompt")
    where = prompt.outside(shape)
    if where is not None:
        raise PromptError(
            f"{component} put {where} outside the case's grid "
            f"{tuple(int(v) for v in shape)} (z, y, x)"
        )
    return prompt


def _with_click_maps(prompt: Prompt | None, clicks: ClickPolicy | None) -> Prompt | None:
    """``prompt`` carrying which clickability maps its clicks came from (robustness runs)."""
    if prompt is None or clicks is None or not clicks.sources:
        return prompt
    return replace(prompt, click_maps=tuple(sorted(clicks.sources.items())))
