"""Simulated users in a worker process, so prompting overlaps the model loop.

The runner's :class:`~intrabench.execution.scheduling.EpisodeScheduler` keeps several episodes in flight:
while one episode's next prompt is being computed here, the model loop predicts for another.
Each job is an :func:`answer` to a :class:`~intrabench.engine.episode.UserCall`; an episode's first
one also carries its :class:`~intrabench.engine.simulated_user.SimulatedUser` (pickled by the caller)
and ground truth, which this worker keeps for the episode's later calls (the most recent
``capacity`` episodes: far more than are ever in flight, each a cropped mask).

Masks travel as :class:`PackedMask` (the bounding-box crop of a boolean (z, y, x) volume) and are
rebuilt exactly here, so prompts are identical to those computed in the model loop.
"""

from __future__ import annotations

import importlib
import pickle
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from intrabench.engine.episode import Answer, UserCall, ask_user
from intrabench.engine.simulated_user import SimulatedUser
from intrabench.masks import bounding_box, with_box
from intrabench.types import Prompt


@dataclass(frozen=True)
class PackedMask:
    """A boolean (z, y, x) mask of ``shape`` as the crop ``values`` of its bounding ``box``
    (``box=None``: empty)."""

    shape: tuple[int, ...]
    box: tuple[slice, ...] | None
    values: np.ndarray | None

    @classmethod
    def pack(cls, mask: np.ndarray) -> PackedMask:
        """Pack a bool (z, y, x) mask as the crop of its bounding box (no values when empty).

        Args:
            mask: The boolean (z, y, x) mask.

        Returns:
            Its shape, its bounding box (half-open slices, None when empty) and the box's
            crop (a C-contiguous copy, None when empty).
        """
        box = bounding_box(mask)
        values = None if box is None else np.ascontiguousarray(mask[box])
        return cls(tuple(mask.shape), box, values)

    def unpack(self) -> np.ndarray:
        """The whole mask, read-only, its box known (no pass over the volume to find it).

        Returns:
            The boolean (z, y, x) mask of :attr:`shape`, False outside the box.
        """
        mask = np.zeros(self.shape, dtype=bool)
        if self.box is not None:
            mask[self.box] = self.values
        return with_box(mask, self.box)


class UserNotLoadable(RuntimeError):
    """This process cannot rebuild the episode's simulated user (e.g. a prompter class defined
    in a script's ``__main__``); the caller answers that episode itself."""


@dataclass(eq=False)
class _Episode:
    user: SimulatedUser | None
    problem: str
    ground_truth: PackedMask


@dataclass(frozen=True)
class Introduction:
    """What the worker needs to know of an episode before its first call: the run's plugin
    ``imports``, the pickled simulated ``user`` and the ``ground_truth``."""

    imports: tuple[str, ...]
    user: bytes
    ground_truth: PackedMask


#: episodes this worker knows, most recently used last
_EPISODES: OrderedDict[str, _Episode] = OrderedDict()
#: how many episodes are kept (the runner has a handful in flight)
capacity = 256
#: whole-volume ground truths of the most recently asked episodes (rebuilding one per call
#: would cost a pass over a large volume); about one per episode in flight
_UNPACKED: OrderedDict[str, np.ndarray] = OrderedDict()
unpacked_capacity = 8


def _meet(key: str, introduction: Introduction) -> None:
    rebuilt: SimulatedUser | None = None
    problem = ""
    try:
        for module in introduction.imports:
            importlib.import_module(module)
        rebuilt = pickle.loads(introduction.user)
    except Exception as error:  # noqa: BLE001 - reported by every answer of the episode
        problem = f"{type(error).__name__}: {error}"
    _EPISODES[key] = _Episode(rebuilt, problem, introduction.ground_truth)
    _UNPACKED.pop(key, None)
    while len(_EPISODES) > capacity:
        _EPISODES.popitem(last=False)


def answer(
    key: str,
    step: int,
    prediction: PackedMask | None,
    history: tuple[Prompt, ...],
    introduction: Introduction | None = None,
) -> Answer:
    """The prompt of ``step`` for episode ``key`` (see :func:`intrabench.engine.episode.ask_user`).

    Args:
        key: The episode's key (:attr:`~intrabench.engine.group.EpisodeTask.key`).
        step: The step to prompt for (0: the initial prompt; k: the k-th correction).
        prediction: The previous step's mask, packed; None at step 0.
        history: The episode's prompts so far, in step order.
        introduction: The episode's plugin imports, pickled user and ground truth, sent with
            its first call to this worker; None afterwards.

    Returns:
        The answer: the prompt (None: nothing left to correct) and the seconds spent.

    Raises:
        UserNotLoadable: This process cannot rebuild the episode's user, or was never told of
            the episode (the caller answers it itself).
    """
    if introduction is not None:
        _meet(key, introduction)
    episode = _EPISODES.get(key)
    if episode is None:
        raise UserNotLoadable(f"episode {key} was not introduced to this worker")
    _EPISODES.move_to_end(key)
    if episode.user is None:
        raise UserNotLoadable(episode.problem)
    call = UserCall(
        step=step, prediction=None if prediction is None else prediction.unpack(), history=history
    )
    return ask_user(episode.user, _ground_truth(key, episode), call)


def _ground_truth(key: str, episode: _Episode) -> np.ndarray:
    truth = _UNPACKED.get(key)
    if truth is None:
        # read-only: shared by the episode's calls, no user may edit it
        truth = _UNPACKED[key] = episode.ground_truth.unpack()
        while len(_UNPACKED) > unpacked_capacity:
            _UNPACKED.popitem(last=False)
    _UNPACKED.move_to_end(key)
    return truth
