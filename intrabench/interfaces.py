"""The small, stable protocols that models, prompters, refiners and datasets implement.

The engine depends only on these; concrete models, prompters and datasets depend on them and
never the other way round.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from intrabench.io.volume import Volume
from intrabench.masks import bounding_box, bounding_box_within, union_of_boxes
from intrabench.types import Case, Prediction, Prompt, SlicePrompt

if TYPE_CHECKING:
    from intrabench.clicks.policy import ClickPolicy

# --------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------


class Model(ABC):
    """A promptable segmentation model.

    Class attributes declare what the model is:

    * ``dimension``: 2 (predicts one axial slice at a time) or 3 (predicts a volume);
    * ``accepts``: prompt kinds it understands, a subset of
      {"point", "box2d", "box3d", "scribble", "lasso", "mask"}; "mask" means it takes its previous
      prediction back and can therefore be refined.

    The engine calls :meth:`set_case` once per case, then :meth:`predict` many times (for every
    target, prompter and refinement step of that case), so per-image work belongs in
    ``set_case`` or in caches keyed by the case.
    """

    name: ClassVar[str] = ""
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset()
    #: the licence of the model's weights (and its code, where they differ): ``models list``
    licence: ClassVar[str] = ""

    @abstractmethod
    def set_case(self, image: Volume) -> None:
        """Make ``image`` the current image.

        Args:
            image: The case's volume: ``array`` float32 (z, y, x) in the canonical orientation,
                ``spacing`` in mm in the same order.
        """

    @abstractmethod
    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """Segment the current image from ``prompt``.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxel indices (boxes
                inclusive on both ends).
            previous: The model's own previous prediction (refinement), or None; its mask is
                read-only (copy it to edit it).
            update_slices: For 2D models, the slices to predict again; the others keep
                ``previous``. 3D models ignore it.

        Returns:
            A prediction whose mask is a newly allocated bool (z, y, x) array on the full grid:
            the engine evaluates the steps of an episode after it ends, so a mask changed
            later would change earlier results.
        """

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Build the network and read its weights now, not at the first forward pass.

        Optional, for models that load lazily. The runner calls it for the run's first model
        in a thread, while it reads the first case, so that the two overlap (a checkpoint of
        a few GB and a CT read each take seconds). An error raised here is not reported: the
        runner uses the model as it would have, and the error comes again where it is used.
        """

    def prepare_case(self, image: Volume) -> None:  # noqa: B027 - optional hook
        """Compute now what :meth:`set_case` will need for ``image`` and keep it for that call
        (the next ``set_case(image)`` of the same object uses it instead of computing it).

        Optional, for models whose per-case set-up depends on the image alone (resampling,
        normalisation). The runner calls it in a thread while the model still predicts on the
        current case (:mod:`intrabench.execution._case_ahead`), so it must not change anything the
        current case's forward passes read. An error raised here is not reported: ``set_case``
        does the work again and reports it.

        Args:
            image: The volume the next :meth:`set_case` will be given (the same object): float32
                (z, y, x) in the canonical orientation, spacing in mm.
        """

    def set_target_class(self, class_name: str) -> None:  # noqa: B027 - optional hook
        """Told before every forward pass: the class (``Target.class_name``) of the target the
        next ``predict`` is for. Episodes of a case interleave, so it holds for that one call
        only. Only models that take class prompts need it (VISTA3D's ``class_map``).

        Args:
            class_name: The target's class name as the dataset names it (e.g. "liver"), the
                name results are grouped by.
        """

    def model_seconds(self) -> float:
        """Seconds spent in forward passes since :meth:`reset_timer` (optional).

        Returns:
            Wall-clock seconds of forward passes; NaN for a model that does not time itself.
        """
        return float("nan")

    @classmethod
    def needs_modality(cls, params: dict[str, Any]) -> bool:
        """Whether this model, built with ``params``, must be told each case's modality by
        its dataset (checked before the run: :mod:`intrabench.engine.model_needs`).

        Args:
            params: The model's parameters as the configuration gives them (name to value).

        Returns:
            True when every case must have a declared modality ('CT' or 'MR'); default False.
        """
        return False

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """Whether this model, built with ``params``, computes its forward passes off the CPU
        (on a GPU), leaving the model loop's core free while it waits for one.

        The runner then gives the simulated users a worker process even on a machine with
        fewer than four cores (:func:`intrabench.execution.runner.default_user_workers`). Default:
        False (a CPU model). The torch adapters' bases answer from their ``device`` parameter
        (:func:`intrabench.device.computes_off_cpu`).

        Args:
            params: The model's parameters as the configuration gives them (e.g. ``device``).

        Returns:
            True when the forward passes run on an accelerator, False for a CPU model.
        """
        return False

    # -- what the host asks a model's class (before building it) --------------------------
    #: why a prompter's kinds are not accepted and how to get them accepted (e.g. a parameter
    #: that adds a kind), appended to the skip reason; "" for none
    unaccepted_hint: ClassVar[str] = ""
    #: the kinds :attr:`unaccepted_hint` is about (None: every kind)
    unaccepted_hint_kinds: ClassVar[frozenset[str] | None] = None
    #: checkpoint keys of the model's variants (variant -> key of the checkpoint table) and
    #: the default variant; a model with one checkpoint sets :attr:`checkpoint_key` instead
    VARIANTS: ClassVar[dict[str, str]] = {}
    DEFAULT_VARIANT: ClassVar[str] = ""
    checkpoint_key: ClassVar[str] = ""

    @classmethod
    def accepts_for(cls, params: dict[str, Any]) -> frozenset[str]:
        """The prompt kinds the model takes when built with ``params`` (default:
        :attr:`accepts`; a parameter may add one, e.g. VISTA3D's ``box_as_centre_click``).

        Args:
            params: The model's parameters as the configuration gives them (name to value).

        Returns:
            Kinds among "point", "box2d", "box3d", "scribble", "lasso" and "mask".
        """
        return cls.accepts

    @classmethod
    def availability(cls) -> str:
        """'ready', or what is missing (a checkpoint, a package), for ``models list``.

        Returns:
            "ready", or one short line naming what is missing.
        """
        return "ready"

    @classmethod
    def checkpoint_keys(cls) -> tuple[str, ...]:
        """The checkpoint table's keys this model uses, its default first (empty: none).

        Returns:
            Keys of the checkpoint table (``checkpoint_key`` or the variants' keys), no repeats.
        """
        keys = [cls.VARIANTS[cls.DEFAULT_VARIANT]] if cls.DEFAULT_VARIANT in cls.VARIANTS else []
        keys += [key for key in cls.VARIANTS.values() if key not in keys]
        if cls.checkpoint_key and cls.checkpoint_key not in keys:
            keys.insert(0, cls.checkpoint_key)
        return tuple(keys)

    @classmethod
    def check_checkpoint(cls, path: Any, key: str) -> None:  # noqa: B027 - optional hook
        """Raise CheckpointError when the file at ``path`` (checkpoint ``key``) does not load
        into the full-size network (``models verify``); default: no check.

        Args:
            path: The downloaded checkpoint file (a path or str).
            key: Its key in the checkpoint table (one of :meth:`checkpoint_keys`).
        """
        return None

    def reset_timer(self) -> None:  # noqa: B027 - optional hook
        """Set the model-seconds counter to zero (an optional hook: a model without a timer does
        nothing).
        """
        pass


@dataclass(eq=False)
class SliceOutput:
    """A 2D model's output on one slice: boolean mask (y, x) and its feedback (e.g. logits)."""

    mask: np.ndarray
    feedback: Any = None


class SliceModel(Model):
    """Base class for 2D models: implement :meth:`predict_slice`, get volumes for free.

    Slices are predicted only where the prompt has something; the result on unprompted slices
    is empty (or, when refining, the previous prediction). Outputs are memoised per
    (slice, slice prompt) for the current case when no mask feedback is involved, so
    propagation prompters and repeated prompters do not pay twice for the same decoder call.
    Subclasses with an expensive image encoder should cache embeddings per slice; they may use
    :meth:`prepare_slices` (called with all slices about to be predicted). If they batch the
    encoder, a slice's batch must not depend on which slices were asked for (a network's output
    depends on its batch's shape, so results would depend on the order of episodes): encode
    fixed blocks of slices, as :meth:`models._sam_common.SamFamilyModel.encode_block` does.
    """

    dimension: ClassVar[int] = 2

    def __init__(self) -> None:
        self._image: Volume | None = None
        self._memo: dict[tuple, SliceOutput] = {}
        self._seconds = 0.0

    @property
    def image(self) -> Volume:
        """The case's image (canonical (z, y, x)).

        Raises:
            RuntimeError: :meth:`set_case` was not called.
        """
        if self._image is None:
            raise RuntimeError(f"{type(self).__name__}: set_case() was not called")
        return self._image

    def set_case(self, image: Volume) -> None:
        """Take a new case's image (canonical (z, y, x)): caches are dropped and
        :meth:`on_new_case` runs; the same image again does nothing.
        """
        if image is not self._image:
            self._image = image
            self._memo.clear()
            self.on_new_case(image)

    def on_new_case(self, image: Volume) -> None:  # noqa: B027 - optional hook
        """Drop per-case caches (embeddings); called when the image changes.

        Args:
            image: The new case's volume, float32 (z, y, x) canonical, spacing in mm.
        """

    def prepare_slices(self, zs: list[int]) -> None:  # noqa: B027 - optional hook
        """Encode these slices ahead of decoding (batch them); default: nothing.

        Args:
            zs: Axial slice indices (z) about to be predicted, sorted, within the image.
        """

    @abstractmethod
    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        """Predict axial slice ``prompt.z`` of the current image from a 2D prompt.

        Args:
            prompt: The slice's clicks (N, 2) as (y, x) with labels (1 positive, 0 negative)
                and its box (inclusive), in canonical voxel indices.
            feedback: This model's own feedback for that slice from the previous step, or None.

        Returns:
            The slice's bool (y, x) mask and the feedback for the next step.
        """

    def segment_slice(self, prompt: SlicePrompt) -> np.ndarray:
        """One slice from a 2D prompt, no feedback (used by propagation prompters).

        Args:
            prompt: The slice's clicks ((y, x), labels 1/0) and box, in canonical voxel
                indices; ``prompt.z`` is the slice.

        Returns:
            The slice's bool (y, x) mask (memoised: do not edit it).
        """
        return self._predict_one(prompt, None).mask

    def _predict_one(self, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        key = prompt.key() if feedback is None else None
        if key is not None and key in self._memo:
            return self._memo[key]
        started = time.perf_counter()
        output = self.predict_slice(prompt, feedback)
        self._seconds += time.perf_counter() - started
        if key is not None:
            self._memo[key] = output
        return output

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """The 3D mask of ``prompt`` assembled from :meth:`predict_slice` on its prompted slices.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous prediction: its mask is kept on the slices not predicted again
                and
                its per-slice feedback is passed back.
            update_slices: The slices to predict again (None: every prompted slice).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the seconds and per-slice feedback.
        """
        shape = self.image.shape
        mask = np.zeros(shape, dtype=bool)
        # only the previous mask's box is copied, and the result's box is found from what was
        # written: a large volume is never read whole (its box travels with the frozen mask)
        regions = []
        if previous is not None:
            kept = bounding_box(previous.mask)
            if kept is not None:
                mask[kept] = previous.mask[kept]
                regions.append(kept)
        feedback: dict[int, Any] = dict(previous.feedback or {}) if previous is not None else {}
        slices = prompt.slices() if update_slices is None else sorted(set(update_slices))
        slices = [z for z in slices if 0 <= z < shape[0]]
        started = time.perf_counter()
        self.prepare_slices(slices)  # an encoder's work counts as the model's time too
        self._seconds += time.perf_counter() - started
        for z in slices:
            slice_prompt = prompt.on_slice(z)
            if slice_prompt.is_empty:
                continue
            output = self._predict_one(slice_prompt, feedback.get(z) if previous else None)
            mask[z] = output.mask
            feedback[z] = output.feedback
            plane_box = bounding_box(np.asarray(output.mask, dtype=bool))
            if plane_box is not None:
                regions.append((slice(z, z + 1), *plane_box))
        box = bounding_box_within(mask, union_of_boxes(regions))
        return Prediction(mask=mask, feedback=feedback, box=box)

    def model_seconds(self) -> float:
        """Seconds spent in :meth:`predict_slice` (and the batched encoding) since
        :meth:`reset_timer`.
        """
        return self._seconds

    def reset_timer(self) -> None:
        """Set the model-seconds counter to zero."""
        self._seconds = 0.0


# --------------------------------------------------------------------------------------
# Simulated users
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class PromptContext:
    """What an initial prompter may look at.

    Attributes:
        ground_truth: The target's bool (z, y, x) mask.
        spacing: Voxel spacing in mm, (z, y, x).
        rng: The generator derived for this (run seed, dataset, case, target, prompter).
        segment_slice: Set when the model is 2D, for propagation schemes that query the model
            slice by slice: a slice prompt to the bool (y, x) mask.
        clicks: Set in robustness runs: prompters that declare ``takes_click_policy`` choose
            where to click in their region with it
            (:meth:`intrabench.clicks.policy.ClickPolicy.choose`).
        identity: (dataset, case id, target id) of the episode, for prompters that replay what
            people did on that target (``recorded``); never a hint about the ground truth.
    """

    ground_truth: np.ndarray
    spacing: tuple[float, float, float]
    rng: np.random.Generator
    segment_slice: Callable[[SlicePrompt], np.ndarray] | None = None
    clicks: ClickPolicy | None = None
    #: (dataset, case id, target id) of the episode, for prompters that replay what people
    #: did on that target (``recorded``); never a hint about the ground truth
    identity: tuple[str, str, str] = ("", "", "")


@dataclass(eq=False)
class RefineContext:
    """What a refiner may look at: ground truth vs current prediction, and the history.

    Attributes:
        ground_truth: The target's bool (z, y, x) mask.
        prediction: The current step's bool (z, y, x) mask.
        spacing: Voxel spacing in mm, (z, y, x).
        rng: The generator derived for this (run seed, dataset, case, target, prompter,
            refiner, step).
        step: The refinement step about to be prompted (1 for the first correction).
        model_dimension: 2 or 3, the model's dimension.
        history: The prompts of the earlier steps, initial first.
        clicks: As in :class:`PromptContext`.
        identity: (dataset, case id, target id), as in :class:`PromptContext`.
    """

    ground_truth: np.ndarray
    prediction: np.ndarray
    spacing: tuple[float, float, float]
    rng: np.random.Generator
    step: int
    model_dimension: int
    history: list[Prompt] = field(default_factory=list)
    clicks: ClickPolicy | None = None
    #: (dataset, case id, target id), as in :class:`PromptContext`
    identity: tuple[str, str, str] = ("", "", "")


class Prompter(ABC):
    """Produces the initial prompt for a target (a simulated clinician's first interaction)."""

    name: ClassVar[str] = ""
    #: model dimensions this prompter fits (2: slice models, 3: volume models)
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    #: prompt kinds it produces; the model must accept all of them
    kinds: ClassVar[frozenset[str]] = frozenset()
    #: how the effort is counted, for listings and docs
    effort_rule: ClassVar[str] = ""
    #: whether the prompter calls the model slice by slice (propagation)
    needs_model: ClassVar[bool] = False
    #: whether its clicks follow ``context.clicks`` in robustness runs (docs/realistic-clicks.md)
    takes_click_policy: ClassVar[bool] = False

    @abstractmethod
    def initial(self, context: PromptContext) -> Prompt:
        """The first prompt of an episode.

        Args:
            context: The target's mask, spacing and rng; only ``context.ground_truth`` may be
                read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxel indices, with its interactions (effort).
        """


class Refiner(ABC):
    """Produces the next prompt from the current prediction vs the ground truth."""

    name: ClassVar[str] = ""
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = ""
    #: whether its clicks follow ``context.clicks`` in robustness runs (docs/realistic-clicks.md)
    takes_click_policy: ClassVar[bool] = False

    @abstractmethod
    def refine(self, context: RefineContext) -> Prompt | None:
        """New interactions for this step.

        Args:
            context: Ground truth and current prediction, spacing, rng and history.

        Returns:
            The step's new interactions in canonical (z, y, x) voxel indices, or None when
            there is nothing left to correct.
        """


# --------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------


class Dataset(ABC):
    """A collection of cases. ``case_ids`` is cheap; ``load`` reads one case."""

    name: ClassVar[str] = ""
    modality: ClassVar[str] = ""
    description: ClassVar[str] = ""

    @abstractmethod
    def case_ids(self) -> list[str]:
        """Identifiers of the cases, sorted.

        Returns:
            The case ids, sorted; cheap (no image is read).
        """

    @abstractmethod
    def load(self, case_id: str) -> Case:
        """Read one case into canonical orientation.

        Args:
            case_id: One of :meth:`case_ids`.

        Returns:
            The case: its image float32 (z, y, x) with spacing in mm, its integer label of the
            same shape and its targets.

        Raises:
            DataError: The case's files cannot be read or do not match.
        """

    def __iter__(self) -> Iterator[Case]:
        for case_id in self.case_ids():
            yield self.load(case_id)

    #: what ``datasets list`` shows besides the name: the targets, the size, the licence
    targets: ClassVar[str] = ""
    size: ClassVar[str] = ""
    licence: ClassVar[str] = ""
    #: the recipe that downloads and prepares it (datasets/_recipe.py), None for datasets that
    #: read what is there (built-in data, your own folder)
    recipe: ClassVar[Any] = None

    @classmethod
    def availability(cls, root: str | None = None) -> str:
        """'ready', or what is missing ('not downloaded', ...) under the data ``root`` (the
        default data folder when None), for ``datasets list``.

        Args:
            root: The data folder to look in; None for the default one.

        Returns:
            "ready", or one short line naming what is missing.
        """
        return "ready"

    def declared_modality(self, case_id: str) -> str | None:
        """'CT', 'MR' or '' (declared as unknown) for ``case_id`` without reading it, as the
        dataset declares it (:mod:`intrabench.modality`); None when it cannot be told before
        the case is read (then nothing is checked ahead of the run).

        Args:
            case_id: One of :meth:`case_ids`.

        Returns:
            'CT', 'MR', '' or None, as above.
        """
        return None


def _unaccepted(produced: frozenset[str], accepts: frozenset[str]) -> set[str]:
    """Prompt kinds in ``produced`` the model cannot take (scribbles reach point models as points)."""
    missing = set(produced) - set(accepts)
    if "scribble" in missing and "point" in accepts:
        missing.discard("scribble")
    return missing


def model_accepts(model_cls: type[Model], params: dict[str, Any] | None = None) -> frozenset[str]:
    """The prompt kinds a model takes with these parameters (:meth:`Model.accepts_for`).

    Args:
        model_cls: The model's class (not built).
        params: Its parameters from the configuration; None for none.

    Returns:
        The kinds it accepts (e.g. {"point", "mask"}).
    """
    return frozenset(model_cls.accepts_for(dict(params or {})))


def incompatibility(
    model_cls: type[Model],
    prompter_cls: type[Prompter] | None,
    refiner_cls: type[Refiner] | None = None,
    params: dict[str, Any] | None = None,
) -> str | None:
    """Why this model (with these parameters) cannot run with this prompter/refiner, or None
    if it can.

    Args:
        model_cls: The model's class (not built).
        prompter_cls: The initial prompter's class; None to check the refiner alone.
        refiner_cls: The refiner's class; None for no refinement.
        params: The model's parameters from the configuration; None for none.

    Returns:
        One line for the skip reason (dimension or prompt kinds that do not fit, a model that
        cannot be refined), or None when the combination runs.
    """
    accepts = model_accepts(model_cls, params)
    hint = model_cls.unaccepted_hint
    if prompter_cls is not None:
        if model_cls.dimension not in prompter_cls.dimensions:
            return (
                f"prompter '{prompter_cls.name}' is for {_dims(prompter_cls.dimensions)} "
                f"models, '{model_cls.name}' is {model_cls.dimension}D"
            )
        missing = _unaccepted(prompter_cls.kinds, accepts)
        if missing:
            # the hint only where it helps: the kinds it is about (all, unless the model says)
            about = model_cls.unaccepted_hint_kinds
            shown = hint and (about is None or set(missing) & set(about))
            return (
                f"model '{model_cls.name}' does not accept {', '.join(sorted(missing))} "
                f"prompts produced by '{prompter_cls.name}'" + (f" ({hint})" if shown else "")
            )
    if refiner_cls is not None:
        if "mask" not in accepts:
            return f"model '{model_cls.name}' takes no previous mask, so it cannot be refined"
        if model_cls.dimension not in refiner_cls.dimensions:
            return (
                f"refiner '{refiner_cls.name}' is for {_dims(refiner_cls.dimensions)} "
                f"models, '{model_cls.name}' is {model_cls.dimension}D"
            )
        missing = _unaccepted(refiner_cls.kinds, accepts)
        if missing:
            return (
                f"model '{model_cls.name}' does not accept {', '.join(sorted(missing))} "
                f"prompts produced by refiner '{refiner_cls.name}'"
            )
    return None


def _dims(dimensions: frozenset[int]) -> str:
    return "/".join(f"{d}D" for d in sorted(dimensions))
