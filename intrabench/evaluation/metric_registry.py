"""The per-step metrics and the evaluation protocols, each declared once.

A :class:`Metric` says everything the rest of IntraBench needs about one per-step metric: its
column name, the function that computes it, whether higher is better, its unit and the scale
tables show it at (Dice x100), whether it needs the surface distances, its label in tables and
figures, and which episode summaries and features take it. The per-step metric function
(:func:`intrabench.evaluation.metrics.step_metrics`), the episode summaries
(:func:`intrabench.evaluation.episode_metrics.episode_table`), the report's summary table, the
figures' axis labels, the attribute analysis, the time-aware curves, the review's rating
correlations and the click-robustness summaries all read :data:`METRICS`; adding a metric is
one :func:`register_metric` call with its function (docs/evaluation.md, "Adding a metric").

An :class:`EvaluationProtocol` is the config's ``protocol:``: whose definitions the step metrics
follow and which components it fills in when the config names none.

Array conventions: a metric function reads a :class:`StepPair`, the prediction and ground truth
of one target (boolean ``(z, y, x)`` masks, cropped to their union's bounding box and padded by
one voxel of background) with their voxel counts and the spacing in mm in ``(z, y, x)`` order,
and returns one float (NaN where the metric is undefined).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from intrabench.errors import UserError

if TYPE_CHECKING:  # numpy is imported where a metric is computed: the CLI's parser reads
    import numpy as np  # the declarations (--metric choices) without it

#: The episode summaries a metric may take (``<name>_<summary>`` columns of the episode table;
#: definitions in :mod:`intrabench.evaluation.episode_metrics`): its value at the initial prompt
#: and at the last step, the area under its refinement curve (``auc`` gives ``_auc`` and
#: ``_auc_norm``), and the step and effort at which it first reaches each threshold
#: (``reach``: ``reached_<name>_<t>``, ``steps_to_<name>_<t>``, ``effort_to_<name>_<t>``).
SUMMARIES = ("initial", "final", "auc", "reach")

#: The features that may read a metric: ``time`` (time-aware curves, :mod:`intrabench.timing.
#: budget`), ``review`` (ratings against metrics), ``robustness`` (click-robustness summaries),
#: ``attributes`` (per-target scores of the attribute analysis, by the summaries in
#: :attr:`Metric.attribute_scores`), ``supplement`` (its initial and final values in the
#: per-target table of ``intrabench tables --supplement``).
FEATURES = ("time", "review", "robustness", "attributes", "supplement")

#: How the report's tables name a summary.
SUMMARY_WORDS = {"initial": "initial", "final": "final", "auc_norm": "AUC (norm.)"}

#: CVPR 2025 rule: NSD counts as 0 when Dice <= this.
CVPR_NSD_DICE_FLOOR = 0.2


@dataclass
class StepPair:
    """One step's masks as the metric functions read them.

    ``prediction``, ``ground_truth``: boolean ``(z, y, x)`` masks cropped to their union's box
    and padded by one voxel (None when both are empty); ``counts``: (true positives, false
    positives, false negatives) voxels; ``spacing``: mm, ``(z, y, x)``; ``nsd_tolerance_mm``:
    the run's NSD tolerance. ``distances`` computes the two directed surface-distance arrays
    (mm) once, on first use (None when either mask is empty).
    """

    prediction: np.ndarray | None
    ground_truth: np.ndarray | None
    counts: tuple[int, int, int]
    spacing: tuple[float, float, float]
    nsd_tolerance_mm: float
    measure_distances: Callable[[], tuple[np.ndarray, np.ndarray] | None]
    _distances: tuple | None = field(default=None, repr=False)

    @property
    def distances(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(prediction -> ground-truth surface, ground-truth -> prediction surface) in mm."""
        if self._distances is None:
            self._distances = (self.measure_distances(),)
        return self._distances[0]

    @property
    def both_empty(self) -> bool:
        """Whether prediction and ground truth are both empty (TP + FP + FN == 0)."""
        true_positives, false_positives, false_negatives = self.counts
        return true_positives + false_positives + false_negatives == 0

    @property
    def one_empty(self) -> bool:
        """Exactly one of the two masks is empty."""
        true_positives, false_positives, false_negatives = self.counts
        return not self.both_empty and (
            true_positives + false_positives == 0 or true_positives + false_negatives == 0
        )


@dataclass(frozen=True)
class Metric:
    """One per-step metric, declared once.

    ``name``: the result column; ``compute``: ``StepPair -> float``; ``label``: how tables and
    figures name it; ``unit``: ``""`` for a fraction in [0, 1], else its unit (``"mm"``);
    ``scale``: the factor tables and figures show it at (100: Dice x100; 1: HD95 in mm);
    ``needs_surface``: computed from surface distances (NaN at steps the run's
    ``surface_metrics_at`` leaves out); ``summaries``: of :data:`SUMMARIES`; ``report``: the
    episode summaries the report's summary table shows (``initial``, ``final``, ``auc_norm``);
    ``count_missing``: the report also says how many episodes lack it (a NaN that is not an
    error, as HD95 of an empty prediction); ``features``: of :data:`FEATURES`;
    ``attribute_scores``: the attribute analysis's score name -> episode column;
    ``thresholds``: for ``reach``; ``curve``: the per-step values its ``auc`` is taken over,
    from the step columns (default: its own column); ``value_range``: (lowest, highest) value
    a run writes (``math.inf``: no upper bound), where reading results checks every value;
    ``may_be_nan``: its function returns NaN where it is undefined (a surface metric is also
    NaN at steps without surfaces); False: a NaN in the results means they are damaged.
    """

    name: str
    compute: Callable[[StepPair], float]
    label: str
    higher_is_better: bool = True
    unit: str = ""
    scale: float = 100.0
    needs_surface: bool = False
    summaries: tuple[str, ...] = ("initial", "final")
    report: tuple[str, ...] = ()
    count_missing: bool = False
    features: tuple[str, ...] = ()
    attribute_scores: tuple[tuple[str, str], ...] = ()
    thresholds: tuple[float, ...] = ()
    curve: Callable[[Mapping[str, np.ndarray]], np.ndarray] | None = None
    value_range: tuple[float, float] = (0.0, 1.0)
    may_be_nan: bool = True

    def __post_init__(self) -> None:
        unknown = [s for s in self.summaries if s not in SUMMARIES] + [
            f for f in self.features if f not in FEATURES
        ]
        if unknown:
            raise ValueError(f"metric {self.name!r}: unknown summaries/features {unknown}")
        low, high = self.value_range
        if not low <= high:
            raise ValueError(f"metric {self.name!r}: value_range {self.value_range} is empty")

    @property
    def value_check(self) -> tuple[float, float, bool]:
        """(lowest, highest, whether NaN is a value the run writes): what reading results
        checks in its column (:func:`intrabench.io.result_checks.checked_rows`)."""
        low, high = self.value_range
        return float(low), float(high), self.may_be_nan or self.needs_surface

    def curve_values(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The per-step values its ``auc`` summary integrates.

        Args:
            columns: An episode's step columns, column name -> (steps,) array in step order
                (at least this metric's column, and those its ``curve`` reads).

        Returns:
            (steps,) float64: its ``curve`` of the columns when it has one (NSD: with the CVPR
            2025 rule), else its own column.
        """
        import numpy as np

        if self.curve is not None:
            return np.asarray(self.curve(columns), dtype=np.float64)
        return np.asarray(columns[self.name], dtype=np.float64)

    def shown_label(self, summary: str | None = None) -> str:
        """``Dice final x100``, ``HD95 final (mm)``: a table column's header.

        Args:
            summary: The episode summary the column holds (``"initial"``, ``"final"``,
                ``"auc_norm"``; another is written as it is), or None for the metric alone.

        Returns:
            The label, the summary's words, then ``x<scale>`` when the scale is not 1, else
            ``(<unit>)`` when it has a unit.
        """
        words = [self.label] + ([SUMMARY_WORDS.get(summary, summary)] if summary else [])
        suffix = f"x{self.scale:g}" if self.scale != 1 else (f"({self.unit})" if self.unit else "")
        return " ".join(words + ([suffix] if suffix else []))


#: Every per-step metric, by name, in the order of the result columns.
METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` to :data:`METRICS` (its column comes after the ones registered before).

    Args:
        metric: The declaration; its ``name`` becomes the results' column.

    Returns:
        ``metric`` itself, so that a module can keep it (``DICE = register_metric(...)``).

    Raises:
        ValueError: When a metric of that name is already registered.
    """
    if metric.name in METRICS:
        raise ValueError(f"a metric named {metric.name!r} is already registered")
    METRICS[metric.name] = metric
    return metric


def unregister_metric(name: str) -> None:
    """Remove a metric registered by :func:`register_metric` (for tests and plugins).

    Args:
        name: The metric's column name; a name not registered is ignored.

    Raises:
        ValueError: When ``name`` is a built-in metric (``dice``, ``iou``, ``nsd``, ``hd95``).
    """
    if name in BUILT_IN:
        raise ValueError(f"{name!r} is a built-in metric")
    METRICS.pop(name, None)


def metric_names() -> list[str]:
    """The result columns of the registered metrics, in order.

    Returns:
        The metric names in registration order (the built-ins ``dice``, ``iou``, ``nsd``,
        ``hd95`` first).
    """
    return list(METRICS)


def metrics_with(feature: str) -> list[Metric]:
    """The registered metrics a feature (:data:`FEATURES`) or summary (:data:`SUMMARIES`)
    takes, in order.

    Args:
        feature: A name of :data:`FEATURES` (``"time"``, ``"review"``...) or of
            :data:`SUMMARIES` (``"auc"``, ``"reach"``...).

    Returns:
        The metrics that list it in their ``features`` or ``summaries``, in registration order.
    """
    return [m for m in METRICS.values() if feature in m.features or feature in m.summaries]


def primary_metric() -> Metric:
    """The first registered metric (Dice): the one the episode table lists first.

    Returns:
        Its declaration.
    """
    return next(iter(METRICS.values()))


def metric_label(column: str) -> str:
    """How a metric column is written in figures: ``dice`` -> Dice; another column as it is.

    Args:
        column: A results column name.

    Returns:
        The metric's ``label`` when ``column`` is a registered metric, else ``column``.
    """
    metric = METRICS.get(column)
    return metric.label if metric is not None else column


def require_metric(
    columns: Iterable[str], metric: str, numeric: Iterable[str] | None = None
) -> None:
    """UserError (one line, with the choices) unless ``metric`` is one of the results'
    ``columns`` (and of ``numeric`` ones when given).

    Args:
        columns: The results' column names.
        metric: The column the user asked for (``--metric``).
        numeric: The numeric columns among them, when the command needs a number; None:
            any column will do.

    Raises:
        UserError: When ``metric`` is not allowed; the message lists the registered metrics
            among the allowed columns and up to three ``attr_`` columns.
    """
    columns = list(columns)
    allowed = list(numeric) if numeric is not None else columns
    if metric not in allowed:
        choices = [c for c in METRICS if c in allowed] + sorted(
            c for c in allowed if c.startswith("attr_")
        )[:3]
        raise UserError(
            f"--metric {metric}: not a "
            f"{'numeric ' if numeric is not None else ''}column of these results; "
            f"choose one of {', '.join(choices) or 'dice'}"
            + (" ..." if len(allowed) > len(choices) else "")
        )


def metric_ranges() -> dict[str, tuple[float, float, bool]]:
    """What reading results checks in each registered metric's column.

    Returns:
        Per metric column, in order: (lowest, highest, whether NaN is a value the run writes)
        (:attr:`Metric.value_check`); the ranges :func:`intrabench.io.result_checks.
        checked_rows` takes (io does not read the declarations itself).
    """
    return {name: metric.value_check for name, metric in METRICS.items()}


def metrics_shown_per_target() -> list[Metric]:
    """The metrics whose initial and final values the supplement's per-target table shows.

    Returns:
        The registered metrics that take the ``supplement`` feature and the ``initial`` and
        ``final`` summaries, in order (Dice, NSD).
    """
    return [
        m
        for m in METRICS.values()
        if "supplement" in m.features and {"initial", "final"} <= set(m.summaries)
    ]


def metric_set_difference(recorded: Sequence[str], current: Sequence[str]) -> str:
    """``+added -removed`` between two metric sets ('' when they hold the same names).

    Args:
        recorded: The metric names a run was started with (e.g. read back on resume).
        current: The metric names registered now.

    Returns:
        ``+name`` for each name only in ``current`` (its order), then ``-name`` for each only
        in ``recorded``, joined by spaces; ``""`` when both hold the same names.
    """
    added = [f"+{name}" for name in current if name not in recorded]
    removed = [f"-{name}" for name in recorded if name not in current]
    return " ".join(added + removed)


# ------------------------------------------------------------------------------------------
# The built-in metrics (definitions: intrabench.evaluation.metrics' module docstring)
# ------------------------------------------------------------------------------------------

#: relative margin under which a distance counts as equal to the NSD tolerance: a distance
#: that equals it in exact arithmetic (3 voxels of 0.1 mm against 0.3 mm) computes as
#: 0.30000000000000004 and would fall outside; distances on a voxel grid that truly differ
#: from the tolerance differ by far more than 1e-9 of it
TIE_MARGIN = 1e-9


def dice_from_counts(tp: int, fp: int, fn: int) -> float:
    """2 TP / (2 TP + FP + FN); 1 when both masks are empty.

    Args:
        tp: True-positive voxels.
        fp: False-positive voxels.
        fn: False-negative voxels.

    Returns:
        The Dice coefficient in [0, 1].
    """
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2.0 * tp / denominator


def iou_from_counts(tp: int, fp: int, fn: int) -> float:
    """TP / (TP + FP + FN); 1 when both masks are empty.

    Args:
        tp: True-positive voxels.
        fp: False-positive voxels.
        fn: False-negative voxels.

    Returns:
        The intersection over union in [0, 1].
    """
    denominator = tp + fp + fn
    return 1.0 if denominator == 0 else tp / denominator


def nsd_from_distances(distances: tuple[np.ndarray, np.ndarray], tolerance_mm: float) -> float:
    """Share of both surfaces' voxels within ``tolerance_mm`` of the other surface.

    A distance within :data:`TIE_MARGIN` (relative) of the tolerance counts as within it.

    Args:
        distances: (prediction -> ground-truth surface, ground-truth -> prediction surface)
            distances in mm, one per surface voxel (:attr:`StepPair.distances`); not both
            empty.
        tolerance_mm: The NSD tolerance, mm.

    Returns:
        The normalised surface Dice in [0, 1].
    """
    import numpy as np

    pred_to_gt, gt_to_pred = distances
    total = len(pred_to_gt) + len(gt_to_pred)
    limit = tolerance_mm * (1.0 + TIE_MARGIN)
    within = int(np.count_nonzero(pred_to_gt <= limit) + np.count_nonzero(gt_to_pred <= limit))
    return within / total


def hd95_from_distances(distances: tuple[np.ndarray, np.ndarray]) -> float:
    """The larger of the two directed 95th percentiles (mm); NaN when not finite.

    Args:
        distances: (prediction -> ground-truth surface, ground-truth -> prediction surface)
            distances in mm (:attr:`StepPair.distances`), each non-empty.

    Returns:
        The 95th-percentile Hausdorff distance in mm, or NaN.
    """
    import numpy as np

    value = max(float(np.percentile(d, 95)) for d in distances)
    return value if np.isfinite(value) else float("nan")


def _dice(pair: StepPair) -> float:
    return dice_from_counts(*pair.counts)


def _iou(pair: StepPair) -> float:
    return iou_from_counts(*pair.counts)


def _nsd(pair: StepPair) -> float:
    if pair.both_empty:
        return 1.0
    if pair.one_empty:
        return 0.0
    return nsd_from_distances(pair.distances, pair.nsd_tolerance_mm)


def _hd95(pair: StepPair) -> float:
    if pair.both_empty or pair.one_empty:
        return float("nan")
    return hd95_from_distances(pair.distances)


def cvpr_nsd(dice: Sequence[float] | np.ndarray, nsd: Sequence[float] | np.ndarray) -> np.ndarray:
    """NSD with the CVPR 2025 rule applied: 0 where Dice <= 0.2.

    Args:
        dice: Dice values in [0, 1] (any shape).
        nsd: NSD values in [0, 1], the same shape, element by element with ``dice``.

    Returns:
        float64 array of that shape: ``nsd``, with 0 where ``dice`` <=
        :data:`CVPR_NSD_DICE_FLOOR`.
    """
    import numpy as np

    dice = np.asarray(dice, dtype=np.float64)
    return np.where(dice <= CVPR_NSD_DICE_FLOOR, 0.0, np.asarray(nsd, dtype=np.float64))


def _nsd_curve(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    return cvpr_nsd(columns["dice"], columns["nsd"])


DICE = register_metric(
    Metric(
        "dice",
        _dice,
        "Dice",
        summaries=("initial", "final", "auc", "reach"),
        report=("initial", "final", "auc_norm"),
        features=("time", "review", "robustness", "attributes", "supplement"),
        attribute_scores=(("dice", "dice_final"),),
        thresholds=(0.8, 0.9),
        may_be_nan=False,
    )
)
IOU = register_metric(Metric("iou", _iou, "IoU", features=("robustness",), may_be_nan=False))
NSD = register_metric(
    Metric(
        "nsd",
        _nsd,
        "NSD",
        needs_surface=True,
        summaries=("initial", "final", "auc"),
        report=("final",),
        features=("time", "review", "attributes", "supplement"),
        attribute_scores=(("nsd", "nsd_final"),),
        curve=_nsd_curve,
    )
)
HD95 = register_metric(
    Metric(
        "hd95",
        _hd95,
        "HD95",
        higher_is_better=False,
        unit="mm",
        scale=1.0,
        needs_surface=True,
        report=("final",),
        count_missing=True,
        value_range=(0.0, math.inf),
    )
)
#: the metrics IntraBench itself declares
BUILT_IN = frozenset(METRICS)


def attribute_scores() -> dict[str, str]:
    """The attribute analysis's per-target scores.

    Returns:
        CLI score name -> episode-table column: each metric's
        :attr:`Metric.attribute_scores`, then the primary metric's normalised AUC
        (``dice_auc`` -> ``dice_auc_norm``) and its effort to its first threshold
        (``effort_to_dice_0.8``).
    """
    scores = {
        name: column
        for metric in metrics_with("attributes")
        for name, column in metric.attribute_scores
    }
    primary = primary_metric()
    if "attributes" in primary.features and "auc" in primary.summaries:
        scores[f"{primary.name}_auc"] = f"{primary.name}_auc_norm"
    if "attributes" in primary.features and primary.thresholds:
        reach = f"effort_to_{primary.name}_{primary.thresholds[0]:g}"
        scores[reach] = reach
    return scores


# ------------------------------------------------------------------------------------------
# Evaluation protocols (the config's ``protocol:``)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationProtocol:
    """A config's ``protocol:``: whose definitions the step metrics follow.

    ``step_metrics``: ``"module:function"`` of its per-step metric function (imported on first
    use, with :func:`intrabench.evaluation.metrics.step_metrics`'s signature); ``defaults``:
    config keys it fills in when the config does not give them (prompters, refiners, steps);
    ``challenge_tables``: ``intrabench tables`` writes the CVPR 2025 challenge's tables for
    its rows.
    """

    name: str
    step_metrics: str
    defaults: Mapping[str, object] = field(default_factory=dict)
    challenge_tables: bool = False

    def metric_function(self) -> Callable[..., dict[str, float]]:
        """Its per-step metric function.

        Returns:
            The function named by ``step_metrics``, imported on first use (and cached).
        """
        return _import_function(self.step_metrics)


@functools.cache
def _import_function(path: str) -> Callable[..., dict[str, float]]:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


#: The protocols by name; the first is the default.
PROTOCOLS: dict[str, EvaluationProtocol] = {}


def register_protocol(protocol: EvaluationProtocol) -> EvaluationProtocol:
    """Add ``protocol`` to :data:`PROTOCOLS`.

    Args:
        protocol: The declaration; its ``name`` is what a config's ``protocol:`` names.

    Returns:
        ``protocol`` itself.

    Raises:
        ValueError: When a protocol of that name is already registered.
    """
    if protocol.name in PROTOCOLS:
        raise ValueError(f"a protocol named {protocol.name!r} is already registered")
    PROTOCOLS[protocol.name] = protocol
    return protocol


def protocol(name: str) -> EvaluationProtocol:
    """The registered protocol ``name``.

    Args:
        name: A config's ``protocol:`` (``"intrabench"``, ``"cvpr25"``,
            ``"cvpr25-corrected"`` or one a plugin registered).

    Returns:
        Its declaration.

    Raises:
        UserError: When no protocol has that name (the message names the choices).
    """
    found = PROTOCOLS.get(name)
    if found is None:
        raise UserError(f"protocol: {name!r} is not one of {', '.join(PROTOCOLS)}")
    return found


#: IntraBench's own definitions: the default protocol
DEFAULT_PROTOCOL = register_protocol(
    EvaluationProtocol("intrabench", "intrabench.evaluation.metrics:step_metrics")
).name
_CVPR25 = "intrabench.evaluation.cvpr25:step_metrics_cvpr25"
_CHALLENGE_CLICKS = {"refiners": ["cvpr25-click"], "refinement_steps": 5}
register_protocol(
    EvaluationProtocol("cvpr25", _CVPR25, {"prompters": ["cvpr25-box"], **_CHALLENGE_CLICKS}, True)
)
#: the same metrics and clicks, with the box around the whole target (docs/evaluation.md)
register_protocol(
    EvaluationProtocol(
        "cvpr25-corrected",
        _CVPR25,
        {"prompters": ["cvpr25-box-corrected"], **_CHALLENGE_CLICKS},
        True,
    )
)


def surface_metric_names() -> list[str]:
    """The registered metrics that need surface distances (NaN at steps without them).

    Returns:
        Their names, in registration order (``nsd``, ``hd95`` among the built-ins).
    """
    return [m.name for m in METRICS.values() if m.needs_surface]


def registered_protocols() -> dict[str, EvaluationProtocol]:
    """The registered protocols, by name, in order.

    Returns:
        A copy of :data:`PROTOCOLS`: what a job takes to a worker process, where a protocol
        a plugin registered in the parent process is not registered.
    """
    return dict(PROTOCOLS)


def registered_metrics() -> tuple[Metric, ...]:
    """The registered metric declarations, in order (what a job takes to a worker process).

    Returns:
        The :class:`Metric` of every entry of :data:`METRICS`.
    """
    return tuple(METRICS.values())
