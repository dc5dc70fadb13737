"""The CVPR 2025 interactive challenge's evaluation, reproduced exactly (``protocol: cvpr25``).

The challenge ("Foundation Models for Interactive 3D Biomedical Image Segmentation", evaluation
script ``CVPR25_iter_eval.py`` of JunMa11/CVPR-MedSegFMCompetition at 748e862) scores an image,
not a target. IntraBench's own definitions (``docs/evaluation.md`` section 1) stay the default;
this preset gives the challenge's numbers on the same predictions. What differs:

* **NSD** is DeepMind's surface-element NSD (``surface-distance``): every surface element
  (a face of the marching-cubes-like 2x2x2 neighbourhood code) is weighted by its area in mm^2,
  where IntraBench counts surface voxels. Computed here in float64 from MONAI's table of the
  elements' normals (MONAI's ``compute_surface_dice(use_subvoxels=True)`` implements the same
  definition in float32: its surface areas are 2e-7 off, but a distance on the tolerance can be
  decided the other way in float32, which moved the NSD by up to 0.5 in a measured case).
* **The 0.2-Dice rule** is applied per image: the image's Dice is the mean over its targets
  (the challenge's classes), and the image's NSD is the mean over targets of the NSD when that
  mean Dice is > 0.2, else 0 (for every step, the final one included).
* **AUCs** are trapezoids over the click steps 1..K (unit spacing) of those image values:
  ``cumulative_trapezoid(dscs[-5:], arange(5))[-1]`` for K = 5.
* **Clicks**: :class:`intrabench.prompters.cvpr25.Cvpr25Click` (``cvpr25-click``) breaks ties
  as the challenge does (``np.random.seed(42)`` then ``choice`` over the maxima in C order) and
  downsamples large error components 2x.

Arrays are ``(z, y, x)`` and spacings are mm in the same order. The challenge passes the npz
file's ``spacing`` unchanged as DeepMind's ``spacing_mm``, which is in array-axis order: its
inference template documents that ``spacing`` as (z, y, x); IntraBench's spacing is (z, y, x)
by construction. (The challenge's own data-preparation script is not public; its CVPR 2024
predecessor's scripts saved SimpleITK's (x, y, z) ``GetSpacing()`` beside (z, y, x) arrays. If
the 2025 files did the same, their NSD used swapped spacings on anisotropic images: this module
does not reproduce that.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from intrabench.evaluation.episode_metrics import auc, cvpr_nsd
from intrabench.evaluation.metric_registry import Metric
from intrabench.evaluation.metrics import DEFAULT_NSD_TOLERANCE_MM, crop_pair, step_metrics
from intrabench.masks.distance import nearest_distances

#: Columns that identify one image under one configuration (the challenge's CSV row).
IMAGE_KEYS = ["run", "dataset", "case", "model", "prompter", "refiner", "seed"]


def _surface_area_table(spacing: Sequence[float]) -> np.ndarray:
    """Area in mm^2 of the surface inside each of the 256 2x2x2 neighbourhood codes, float64.

    The normals come from MONAI's table (DeepMind's, whose entries are multiples of 1/8 and so
    exact in float32); the areas are computed here in float64 as DeepMind's are (MONAI's own
    ``create_table_neighbour_code_to_surface_area`` works in float32: 2e-7 off).
    """
    from monai.metrics.utils import _get_neighbour_code_to_normals_table

    normals = _get_neighbour_code_to_normals_table(None).numpy().astype(np.float64)
    s0, s1, s2 = (float(v) for v in spacing)
    scale = np.array([s1 * s2, s0 * s2, s0 * s1], dtype=np.float64)
    return np.linalg.norm(normals * scale, axis=-1).sum(axis=-1)


def _surface_elements(mask: np.ndarray) -> np.ndarray:
    """Neighbourhood codes (0-255) of ``mask`` at the voxel corners (2x2x2 windows), one larger
    than ``mask`` along every axis (MONAI's encoding kernel, zeros outside)."""
    from monai.metrics.utils import ENCODING_KERNEL
    from scipy import ndimage

    padded = np.pad(mask.astype(np.uint8), ((0, 1), (0, 1), (0, 1)))
    kernel = np.asarray(ENCODING_KERNEL[3], dtype=np.int32)
    return ndimage.correlate(padded.astype(np.int32), kernel, mode="constant", cval=0)


def surfel_nsd(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: Sequence[float],
    tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM,
) -> float:
    """DeepMind's area-weighted normalised surface Dice of two boolean (z, y, x) masks.

    Surface elements sit at voxel corners: every 2x2x2 window whose
    code is neither 0 nor 255 is one, weighted by the area of the surface inside it
    (:func:`_surface_area_table`); its distance to the other mask's surface is the Euclidean
    distance transform (mm) to the other mask's surface-element positions. NSD = (area of the
    elements of either surface within ``tolerance_mm`` of the other) / (total area).
    Computed on the union bounding box padded by one voxel (the same elements as on the whole
    volume).

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool (z, y, x) mask of the same shape.
        spacing: Voxel spacing in mm, (z, y, x).
        tolerance_mm: The tolerance, in mm.

    Returns:
        NSD in [0, 1]. An empty prediction of a non-empty target scores 0 (as DeepMind's); two
        empty masks 1 (IntraBench's convention; DeepMind's is 0/0).
    """
    cropped = crop_pair(prediction, ground_truth, margin=1)
    if cropped is None:
        return 1.0
    pred, gt = cropped
    if not pred.any() or not gt.any():
        return 0.0
    sampling = np.asarray(spacing, dtype=np.float64)
    areas = _surface_area_table(sampling)
    codes_pred, codes_gt = _surface_elements(pred), _surface_elements(gt)
    border_pred = (codes_pred != 0) & (codes_pred != 255)
    border_gt = (codes_gt != 0) & (codes_gt != 255)
    pred_to_gt = nearest_distances(border_pred, border_gt, sampling)
    gt_to_pred = nearest_distances(border_gt, border_pred, sampling)
    area_pred, area_gt = areas[codes_pred[border_pred]], areas[codes_gt[border_gt]]
    within = np.sum(area_pred[pred_to_gt <= tolerance_mm]) + np.sum(
        area_gt[gt_to_pred <= tolerance_mm]
    )
    return float(within / (np.sum(area_pred) + np.sum(area_gt)))


def step_metrics_cvpr25(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: Sequence[float],
    nsd_tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM,
    with_surface: bool = True,
    metrics: Iterable[Metric] | None = None,
) -> dict[str, float]:
    """:func:`intrabench.evaluation.metrics.step_metrics` with ``nsd`` the challenge's surface-element NSD
    (:func:`surfel_nsd`); every other column is unchanged (``with_surface=False``: NaN, as there).

    Args:
        prediction: Bool (z, y, x) mask of the step.
        ground_truth: The target's bool mask, same shape.
        spacing: Voxel size in mm, (z, y, x).
        nsd_tolerance_mm: The NSD tolerance in mm.
        with_surface: Compute the surface metrics (NSD, HD95) at this step.
        metrics: The registered metrics to compute; None for all.

    Returns:
        Metric name to value (Dice, IoU, NSD in 0-1; HD95 in mm).
    """
    cropped = crop_pair(prediction, ground_truth, margin=1)  # once: both measures use it
    if cropped is not None:
        prediction, ground_truth = cropped
    values = step_metrics(
        prediction, ground_truth, spacing, nsd_tolerance_mm, with_surface, metrics
    )
    if with_surface:
        values["nsd"] = surfel_nsd(prediction, ground_truth, spacing, nsd_tolerance_mm)
    return values


def challenge_mean(values: pd.Series) -> float:
    """``np.mean`` of the values in their order (float64), as ``CVPR25_iter_eval.py``'s
    ``compute_multi_class_dsc`` / ``_nsd`` average a list of per-class values. pandas' mean
    sums in another order: for class Dice 0.1, 0.2, 0.3 it gives 0.19999999999999998, the
    challenge 0.20000000000000004, which keeps the image's NSD (> 0.2).

    Args:
        values: Per-class values of one image, in ascending label order.

    Returns:
        Their float64 mean, summed in that order.
    """
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def image_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The challenge's per-image metrics, one row per image and configuration.

    ``rows``: step rows (``results.parquet``) of a ``protocol: cvpr25`` run; each target is one
    of the challenge's classes. Per step k: ``DSC_{k+1}`` = mean over the image's targets of
    Dice, ``NSD_{k+1}`` = mean over targets of NSD if ``DSC_{k+1}`` > 0.2 else 0 (step 0 is
    the challenge's box step ``DSC_1``). ``DSC_AUC``, ``NSD_AUC``: trapezoids over the click
    steps 1..K; ``DSC_Final``, ``NSD_Final``: the values at step K; ``num_class``: targets.

    Args:
        rows: Step rows of a ``protocol: cvpr25`` run (Dice and NSD 0-1).

    Returns:
        One row per image and configuration with the columns above (empty, with the key
        columns, when ``rows`` is).
    """
    keys = [k for k in IMAGE_KEYS if k in rows]
    if rows.empty:
        return pd.DataFrame(columns=keys)
    # the challenge averages an image's classes with np.mean, in ascending label order: the
    # summation order decides the last bit, and the last bit decides the 0.2 rule
    order = [c for c in ("target_label", "target_number") if c in rows] or ["target"]
    rows = rows.sort_values(order, kind="stable")
    per_step = (
        rows.groupby(keys + ["step"], sort=True, dropna=False)
        .agg(
            dsc=("dice", challenge_mean),
            nsd=("nsd", challenge_mean),
            num_class=("target", "nunique"),
        )
        .reset_index()
    )
    per_step["nsd"] = cvpr_nsd(per_step["dsc"], per_step["nsd"])  # the rule, per image
    records = []
    for identity, image in per_step.groupby(keys, sort=True, dropna=False):
        image = image.sort_values("step")
        dsc = image["dsc"].to_numpy(dtype=np.float64)
        nsd = image["nsd"].to_numpy(dtype=np.float64)
        record = dict(zip(keys, identity if isinstance(identity, tuple) else (identity,)))
        record["num_class"] = int(image["num_class"].max())
        for step, (d, n) in enumerate(zip(dsc, nsd), start=1):
            record[f"DSC_{step}"] = float(d)
            record[f"NSD_{step}"] = float(n)
        record.update(
            {
                "DSC_AUC": auc(dsc),
                "NSD_AUC": auc(nsd),
                "DSC_Final": float(dsc[-1]),
                "NSD_Final": float(nsd[-1]),
            }
        )
        records.append(record)
    return pd.DataFrame.from_records(records)


def leaderboard(images: pd.DataFrame) -> pd.DataFrame:
    """Mean over images of DSC_AUC, NSD_AUC, DSC_Final and NSD_Final per configuration (the
    challenge ranks on these means), with the number of images.

    Args:
        images: :func:`image_table`'s rows.

    Returns:
        One row per configuration (run, model, prompter, refiner where present): the four
        means and ``images``.
    """
    config = [k for k in ("run", "model", "prompter", "refiner") if k in images]
    columns = ["DSC_AUC", "NSD_AUC", "DSC_Final", "NSD_Final"]
    if images.empty:
        return pd.DataFrame(columns=config + columns + ["images"])
    grouped = images.groupby(config, sort=True, dropna=False)
    table = grouped[columns].mean()
    table["images"] = grouped.size()
    return table.reset_index()
