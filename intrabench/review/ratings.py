"""Ratings from the review page joined with the result rows, and what they say.

* **Per configuration and step** (model, prompter, refiner, step): the mean rating, a mask's
  rating being the mean over its raters; a percentile-bootstrap 95% CI resampling masks (seeded);
  the number of masks and ratings; the mean Dice of those masks.
* **Agreement between raters**: Krippendorff's alpha (the ``krippendorff`` package), ordinal
  level, over every job rated by at least two people; NaN with fewer than two raters.
* **Ratings against metrics**: Spearman's rho (SciPy) of a mask's mean rating with its Dice and
  its NSD, over masks.
* **Disagreements**: the masks whose raters differ most (standard deviation), and those whose
  rating and Dice disagree most (difference of their percentile ranks among the rated masks).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.errors import UserError, quoted
from intrabench.evaluation.metric_registry import metrics_with
from intrabench.evaluation.statistics import bootstrap_mean_ci, spearman
from intrabench.review.sampling import MASK_KEYS
from intrabench.wording import listed

RATING_COLUMNS = ["review", "rater", "job", "rating"]
CONFIGURATION = ["model", "prompter", "refiner", "step"]


#: what a review id may be: the folder name ``review build`` gives (never a path)
REVIEW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _whole_rating(value: object) -> bool:
    """A rating as the page exports it: a whole number 1-10 (JSON 7, 7.0 or CSV "7"); never
    7.5 (it became 7) nor true (it became 1)."""
    if isinstance(value, bool) or value is None:
        return False
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return number.is_integer() and 1 <= number <= 10


#: how far ahead of this machine's clock a rating's time may be (another machine's clock)
FUTURE_SKEW = pd.Timedelta(days=1)


def _rating_times(path: Path, frame: pd.DataFrame) -> list[str]:
    """Each rating's ``rated_at`` as UTC ISO 8601 text (``2026-11-24T09:30:00.120Z``), or ""
    for all of them when the file has no such column (an import record written before it was
    kept). UserError naming the file on a value that is not a time."""
    if "rated_at" not in frame:
        return [""] * len(frame)
    values = frame["rated_at"].tolist()
    times = pd.to_datetime(
        pd.Series([v if isinstance(v, str) else None for v in values], dtype=object),
        utc=True,
        format="ISO8601",
        errors="coerce",
    )
    latest = pd.Timestamp.now(tz="UTC") + FUTURE_SKEW
    for value, time in zip(values, times):
        if not isinstance(value, str) or pd.isna(time):
            raise UserError(
                f"{path}: rated_at {quoted(value, 40)} is not a time (the page "
                "writes ISO 8601, e.g. 2026-11-24T09:30:00.120Z)"
            )
        if time > latest:
            # the newest rating wins: a time ahead would win over every later rating
            raise UserError(
                f"{path}: rated_at {quoted(value, 40)} is in the future (more than "
                f"{FUTURE_SKEW.days} day ahead of this machine's clock); fix the rating "
                "machine's clock or the file"
            )
    return [_iso(time) for time in times]


def _iso(time: pd.Timestamp) -> str:
    """UTC text as the page writes it: milliseconds (microseconds where a file has them)."""
    spec = (
        "milliseconds" if time.microsecond % 1000 == 0 and not time.nanosecond else "microseconds"
    )
    return time.tz_convert("UTC").tz_localize(None).isoformat(timespec=spec) + "Z"


def read_rating_files(paths: list[str | Path]) -> pd.DataFrame:
    """Every rating in exported files (the page's JSON or CSV), as they are.

    Args:
        paths: The exported files; a ``.json`` suffix is read as the page's JSON, any other as
            CSV.

    Returns:
        Columns ``review, rater, job, rating, rated_at, file``, one row per rating in the files
        (a mask rated twice appears twice); ``rating`` a whole number 1-10.

    Raises:
        UserError: A file that is not a ratings file, or a value a rater cannot have meant: a
            rating that is not a whole number 1-10, an empty rater, a review id that is not a
            plain name (it becomes a folder), a ``rated_at`` that is not a time.
    """
    frames = []
    for path in map(Path, paths):
        try:
            if path.suffix.lower() == ".json":
                data = json.loads(path.read_text(encoding="utf-8"))
                frame = pd.DataFrame(data["ratings"] if isinstance(data, dict) else data)
            else:
                frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
            raise UserError(
                f"{path}: not a ratings file exported by the review page "
                f"({type(error).__name__}: {str(error)[:100]})"
            ) from None
        missing = [c for c in RATING_COLUMNS if c not in frame]
        if missing:
            raise UserError(f"{path}: not a ratings file (no {', '.join(missing)} column)")
        wrong = [v for v in frame["rating"] if not _whole_rating(v)]
        if wrong:
            raise UserError(
                f"{path}: ratings must be whole numbers 1-10; found {quoted(wrong[0], 30)}"
            )
        raters = frame["rater"].map(lambda v: "" if v is None else str(v).strip())
        if (raters == "").any() or (raters.str.len() > 200).any():
            raise UserError(f"{path}: every rating needs a rater's name (1-200 characters)")
        reviews = frame["review"].map(lambda v: "" if v is None else str(v))
        bad = [r for r in reviews.unique() if not REVIEW_ID.match(r) or r in (".", "..")]
        if bad:
            raise UserError(
                f"{path}: review id {quoted(bad[0], 60)} is not one that review "
                "build writes (a plain name)"
            )
        frames.append(
            pd.DataFrame(
                {
                    "review": reviews,
                    "rater": raters.astype(str),
                    "job": frame["job"].map(str),
                    "rating": [int(float(v)) for v in frame["rating"]],
                    "rated_at": _rating_times(path, frame),
                    "file": path.name,
                }
            )
        )
    if not frames:
        raise UserError("give at least one ratings file")
    return pd.concat(frames, ignore_index=True)


def newest_ratings(ratings: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """One rating per (review, rater, job): the one rated last (``rated_at``), whatever the
    order of the files; a rating with no time is older than any with one.

    Args:
        ratings: Ratings as :func:`read_rating_files` gives them.

    Returns:
        ``(ratings, rated more than once)``: one row per (review, rater, job), and per rater how
        many masks they rated more than once.

    Raises:
        UserError: The newest two ratings of a mask differ and nothing tells them apart (the
            same time, or no time): which one the rater meant is unknown.
    """
    keys = ["review", "rater", "job"]
    times = pd.to_datetime(
        ratings["rated_at"].where(ratings["rated_at"] != ""), utc=True, format="ISO8601"
    )
    # microseconds since 1970 (exact in a float); no time: before every time
    order = np.full(len(times), -np.inf)
    known = times.notna().to_numpy()
    order[known] = times[known].dt.as_unit("us").astype("int64").to_numpy(dtype=float)
    frame = ratings.assign(_time=order)
    latest = frame.groupby(keys, sort=False)["_time"].transform("max")
    top = frame[frame["_time"] == latest]
    values = top.groupby(keys, sort=False)["rating"].nunique()
    if (values > 1).any():
        review, rater, job = values[values > 1].index[0]
        both = top[(top["rater"] == rater) & (top["job"] == job) & (top["review"] == review)]
        first = both.iloc[0]
        second = both[both["rating"] != first["rating"]].iloc[0]
        when = (
            f"at the same time ({first['rated_at']})"
            if first["rated_at"]
            else "with no rated_at to tell which is newer"
        )
        raise UserError(
            f"{rater} rated {job} {first['rating']} ({first['file']}) and "
            f"{second['rating']} ({second['file']}) {when}: leave out the file "
            "that is not meant"
        )
    counts = frame.groupby(keys, sort=False).size()
    repeated = counts[counts > 1].groupby(level="rater").size().to_dict()
    kept = top.drop_duplicates(keys, keep="last").drop(columns="_time")
    return kept.sort_index().reset_index(drop=True), {str(k): int(v) for k, v in repeated.items()}


def read_ratings(paths: list[str | Path]) -> pd.DataFrame:
    """The ratings in exported files (see :func:`read_rating_files`), one row per (review,
    rater, job): a mask rated twice keeps its newest rating (:func:`newest_ratings`).

    Args:
        paths: The exported files (the page's JSON or CSV).

    Returns:
        Columns ``review, rater, job, rating, rated_at, file``.

    Raises:
        UserError: As :func:`read_rating_files` and :func:`newest_ratings`.
    """
    return newest_ratings(read_rating_files(paths))[0]


def join_ratings(ratings: pd.DataFrame, run_dir: str | Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Each rating with its mask's identity (from the review's key in the run directory) and
    the result row's metrics that the review reads (``dice``, ``nsd``: the registered metrics
    with the ``review`` feature).

    Args:
        ratings: Ratings of one review, as :func:`read_ratings` gives them.
        run_dir: The run directory the review was built from (it holds
            ``reviews/<review id>/key.csv``).
        rows: The run's result rows (:func:`~intrabench.io.results.load_results`).

    Returns:
        One row per rating: rater, job, rating, the :data:`MASK_KEYS` of its mask and its
        metrics (Dice and NSD on a 0-1 scale, as in the rows).

    Raises:
        UserError: The ratings come from more than one review, the review was not built from
            ``run_dir``, or they name jobs the review does not have.
    """
    reviews = sorted(ratings["review"].astype(str).unique())
    if len(reviews) != 1:
        files = ratings.groupby("review")["file"].unique() if "file" in ratings else None
        named = "; ".join(
            f"{r}: {', '.join(sorted(files[r]))}" if files is not None else r for r in reviews
        )
        raise UserError(
            f"the ratings come from {len(reviews)} reviews ({named}); import one review at a time"
        )
    key_path = Path(run_dir) / "reviews" / reviews[0] / "key.csv"
    if not key_path.exists():
        raise UserError(f"review '{reviews[0]}' was not built from {run_dir} (no {key_path})")
    key = pd.read_csv(key_path, dtype={"case": str, "target": str})
    unknown = sorted(set(ratings["job"]) - set(key["job"]))
    if unknown:
        raise UserError(f"ratings for jobs this review does not have: {listed(unknown, limit=5)}")
    joined = ratings.drop(columns=["review"]).merge(key, on="job", how="left")
    metrics = [m.name for m in metrics_with("review") if m.name in rows]
    rows = rows.astype({"case": str, "target": str})
    return joined.merge(rows[MASK_KEYS + metrics], on=MASK_KEYS, how="left")


@dataclass
class RatingAnalysis:
    """What :func:`analyse_ratings` finds in ratings joined with metrics.

    Attributes:
        per_configuration: Per configuration: mean rating with its bootstrap 95% interval, the
            number of masks and ratings, the mean Dice.
        per_mask: Per rated mask: the mean and std of its ratings, its raters, Dice and NSD.
        alpha: Ordinal Krippendorff's alpha of the raters (NaN without two raters on one job).
        n_raters: The number of distinct raters.
        rho: Per metric the review reads (the registered metrics with the ``review`` feature:
            dice, nsd), in order: Spearman's rho of rating against it, its p-value and number
            of masks.
        rater_disagreement: The masks whose raters disagree most (largest rating std).
        metric_disagreement: The masks whose rating and Dice percentiles differ most.
    """

    per_configuration: pd.DataFrame
    per_mask: pd.DataFrame
    alpha: float
    n_raters: int
    rho: dict[str, tuple[float, float, int]]
    rater_disagreement: pd.DataFrame
    metric_disagreement: pd.DataFrame

    @property
    def rho_dice(self) -> tuple[float, float, int]:
        """Spearman's rho of rating against Dice, its p-value and number of masks."""
        return self.rho["dice"]

    @property
    def rho_nsd(self) -> tuple[float, float, int]:
        """Spearman's rho of rating against NSD, its p-value and number of masks."""
        return self.rho["nsd"]


def krippendorff_alpha(joined: pd.DataFrame) -> float:
    """Ordinal Krippendorff's alpha of raters x jobs; NaN without two raters on one job.

    Args:
        joined: Ratings as :func:`join_ratings` gives them (``rater``, ``job``, ``rating``); a
            rater's repeated ratings of a job are averaged.

    Returns:
        Alpha over the jobs rated by at least two raters (1 is full agreement); NaN without
        such a job, or when every rating is the same value.
    """
    import krippendorff

    matrix = joined.pivot_table(index="rater", columns="job", values="rating", aggfunc="mean")
    shared = matrix.notna().sum(axis=0) >= 2
    if matrix.shape[0] < 2 or not shared.any():
        return float("nan")
    values = matrix.loc[:, shared].to_numpy(dtype=float)
    if np.unique(values[np.isfinite(values)]).size < 2:
        return float("nan")  # one value everywhere: agreement is undefined
    return float(krippendorff.alpha(reliability_data=values, level_of_measurement="ordinal"))


def analyse_ratings(
    joined: pd.DataFrame, n_boot: int = 1000, seed: int = 0, top: int = 10
) -> RatingAnalysis:
    """Everything in the module docstring, from :func:`join_ratings`'s rows.

    Args:
        joined: Ratings joined with their masks and metrics (:func:`join_ratings`).
        n_boot: Bootstrap resamples of the masks for each configuration's 95% interval.
        seed: Seeds the bootstrap.
        top: How many masks each disagreement list keeps.

    Returns:
        Per configuration and per mask tables, the raters' agreement, the correlations with
        Dice and NSD, and the masks of most disagreement.
    """
    metrics = [m.name for m in metrics_with("review") if m.name in joined]
    per_mask = (
        joined.groupby(["job", *MASK_KEYS], dropna=False)
        .agg(
            rating=("rating", "mean"),
            rating_std=("rating", "std"),
            n_raters=("rater", "nunique"),
            **{m: (m, "first") for m in metrics},
        )
        .reset_index()
    )
    records = []
    for config, masks in per_mask.groupby(CONFIGURATION, sort=True, dropna=False):
        low, high = bootstrap_mean_ci(masks["rating"].to_numpy(), n_boot=n_boot, seed=seed)
        records.append(
            {
                **dict(zip(CONFIGURATION, config)),
                "mean_rating": masks["rating"].mean(),
                "ci_low": low,
                "ci_high": high,
                "n_masks": len(masks),
                "n_ratings": int(masks["n_raters"].sum()),
                "mean_dice": masks["dice"].mean() if "dice" in masks else np.nan,
            }
        )
    per_configuration = pd.DataFrame(records)
    rating_rank = per_mask["rating"].rank(pct=True)
    by_raters = per_mask[per_mask["n_raters"] >= 2].sort_values("rating_std", ascending=False)
    against = per_mask.assign(
        rating_percentile=rating_rank,
        dice_percentile=per_mask["dice"].rank(pct=True) if "dice" in per_mask else np.nan,
    )
    against["rank_gap"] = (against["rating_percentile"] - against["dice_percentile"]).abs()
    return RatingAnalysis(
        per_configuration=per_configuration,
        per_mask=per_mask,
        alpha=krippendorff_alpha(joined),
        n_raters=int(joined["rater"].nunique()),
        rho={
            m.name: spearman(per_mask["rating"], per_mask.get(m.name, pd.Series(dtype=float)))
            for m in metrics_with("review")
        },
        rater_disagreement=by_raters.head(top).reset_index(drop=True),
        metric_disagreement=against.sort_values("rank_gap", ascending=False)
        .head(top)
        .reset_index(drop=True),
    )
