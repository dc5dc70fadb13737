"""The simulated user beside the recorded people, on the same targets (docs/measuring-people.md).

Every statistic here is defined in docs/measuring-people.md, "Simulated against people"; in
short:

* **Dice per interaction**: step 0 is the initial prompt (a person's first interaction), step
  k the k-th correction. A session that ended (accepted) before step k keeps its last Dice,
  as a simulated episode that converged keeps its last prediction.
* **Interactions and seconds to reach a Dice**: the first step whose Dice is at least the
  threshold, counted as interactions (step + 1), and the seconds until its mask was on
  screen: for a person, the interaction's ``t`` plus the model's latency; for the simulated
  user, the time model's human seconds of steps 0..k plus the model latencies measured in
  the run (:mod:`intrabench.timing`). Targets that never reach it are counted apart.
* **Seconds per interaction kind**: every interaction a person made (undone ones too), from
  the mask on screen to the interaction (:meth:`Session.seconds_per_interaction`), with a
  Student t confidence interval of the mean.
* **Where clicks fall** (RClicks): a correction click against the error it corrects (the
  reference XOR the mask on screen): its distance to the error's border (mm, the Euclidean
  distance transform of its error component at the click; negative: the click is outside
  the error, by that distance to it) and to the error's centre (mm, to the component's
  distance-transform maximum). The simulated user's click is made on the same error (the
  ``center-error-click`` refiner by default) and measured the same way.
* **User shift** (after Marinov et al. 2024, "Rethinking annotator simulation"): the Dice
  shift at step k, mean simulated Dice minus mean people's Dice on the same targets and
  model (positive: the simulation overestimates); its mean over the steps; and the click
  shift, the 1-D Wasserstein distance between people's and simulated clicks' border
  distances (and centre distances).

Masks are boolean (z, y, x) arrays on a case's canonical grid; spacing is in mm (z, y, x).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from intrabench.people.replay import Identity, SessionLibrary, identity_of

if TYPE_CHECKING:
    import pandas as pd

    from intrabench.timing.human import TimeModel

#: the user label of the people's own sessions (with the model they used live)
PEOPLE = "people"


# -- statistics -----------------------------------------------------------------------------
def dice(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Dice of two boolean masks; 1.0 when both are empty (nothing to find, nothing found).

    Args:
        prediction: A mask of any shape; converted to bool.
        reference: The reference mask, same shape.

    Returns:
        Dice on a 0-1 scale.
    """
    prediction, reference = np.asarray(prediction, bool), np.asarray(reference, bool)
    total = int(prediction.sum()) + int(reference.sum())
    if total == 0:
        return 1.0
    return 2.0 * int(np.logical_and(prediction, reference).sum()) / total


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided Student t confidence interval (NaN bounds below 2 values)."""

    n: int
    mean: float
    low: float
    high: float


def t_interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    """The mean of ``values`` and its t interval: mean +- t_{(1+c)/2, n-1} s / sqrt(n), s the
    sample standard deviation (ddof 1).

    Args:
        values: The sample.
        confidence: The interval's two-sided confidence level (0-1).

    Returns:
        ``n``, the mean and the bounds; NaN bounds below 2 values, NaN mean for none.
    """
    from scipy import stats

    array = np.asarray([float(v) for v in values], dtype=float)
    n = len(array)
    if n == 0:
        return Interval(0, math.nan, math.nan, math.nan)
    mean = float(array.mean())
    if n < 2:
        return Interval(n, mean, math.nan, math.nan)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(array.std(ddof=1)) / math.sqrt(n)
    return Interval(n, mean, mean - half, mean + half)


def first_reaching(values: Sequence[float], threshold: float) -> int | None:
    """The first index whose value is at least ``threshold``, None when none is.

    Args:
        values: Values per step (Dice 0-1).
        threshold: The value to reach.

    Returns:
        The step index, or None.
    """
    for index, value in enumerate(values):
        if value >= threshold:
            return index
    return None


def carried(values: Sequence[float], steps: int) -> list[float]:
    """``values`` for steps 0..steps-1, the last one repeated past its end.

    Args:
        values: One episode's values per step (may be shorter than ``steps``).
        steps: How many steps to give.

    Returns:
        ``steps`` values; all NaN when ``values`` is empty.
    """
    if not values:
        return [math.nan] * steps
    return [float(values[min(step, len(values) - 1)]) for step in range(steps)]


# -- people ---------------------------------------------------------------------------------
def people_steps(
    library: SessionLibrary, references: Mapping[Identity, np.ndarray]
) -> pd.DataFrame:
    """One row per effective interaction of every session whose target is in ``references``.

    Args:
        library: The recorded sessions.
        references: The boolean reference mask of each target, by (dataset, case id, target
            id); sessions of other targets are left out.

    Returns:
        ``user`` (people), ``rater``, ``session_id``, ``dataset``, ``case``, ``target``,
        ``model`` (the one used live), ``step``, ``kind``, ``dice`` (0-1) and ``seconds`` (until
        the mask was on screen: ``t`` + latency).
    """
    import pandas as pd

    rows = []
    for session in library.sessions:
        identity = identity_of(session)
        reference = references.get(identity)
        if reference is None:
            continue
        events = session.effective_interactions()
        for step, (event, mask) in enumerate(zip(events, session.masks())):
            rows.append(
                {
                    "user": PEOPLE,
                    "rater": session.header["rater"],
                    "session_id": session.header["session_id"],
                    "dataset": identity[0],
                    "case": identity[1],
                    "target": identity[2],
                    "model": session.header["model"]["name"],
                    "step": step,
                    "kind": event["kind"],
                    "dice": dice(mask, reference),
                    "seconds": float(event["t"]) + float(event["latency_s"]),
                }
            )
    return pd.DataFrame(rows, columns=_STEP_COLUMNS)


_STEP_COLUMNS = [
    "user",
    "rater",
    "session_id",
    "dataset",
    "case",
    "target",
    "model",
    "step",
    "kind",
    "dice",
    "seconds",
]


def seconds_by_kind(library: SessionLibrary, confidence: float = 0.95) -> pd.DataFrame:
    """Seconds per interaction kind over every session.

    Args:
        library: The recorded sessions.
        confidence: The t interval's confidence level (0-1).

    Returns:
        ``kind`` (the time model's names: click, box2d, box3d, scribble, lasso), ``n``,
        ``mean``, ``low``, ``high`` (t interval at ``confidence``) and ``median``, in seconds.
    """
    import pandas as pd

    from intrabench.people.session_log import COST_KIND

    by_kind: dict[str, list[float]] = {}
    for session in library.sessions:
        for kind, seconds in session.seconds_per_interaction():
            by_kind.setdefault(COST_KIND[kind], []).append(float(seconds))
    rows = []
    for kind in sorted(by_kind):
        interval = t_interval(by_kind[kind], confidence)
        rows.append(
            {
                "kind": kind,
                "n": interval.n,
                "mean": interval.mean,
                "low": interval.low,
                "high": interval.high,
                "median": float(np.median(by_kind[kind])),
            }
        )
    return pd.DataFrame(rows, columns=["kind", "n", "mean", "low", "high", "median"])


# -- the simulated user ---------------------------------------------------------------------
def simulated_steps(
    results: pd.DataFrame, targets: Iterable[Identity], time_model: TimeModel
) -> pd.DataFrame:
    """The run's rows on ``targets`` as steps.

    Args:
        results: The run's result rows.
        targets: The (dataset, case id, target id) identities to keep.
        time_model: The time model giving each interaction's human seconds.

    Returns:
        ``user`` (``prompter`` or ``prompter + refiner``), ``seed``, ``dataset``, ``case``,
        ``target``, ``model``, ``step``, ``dice`` and ``seconds`` (the time model's human
        seconds of steps 0..step plus the measured latencies; a converged step adds none).
    """
    import pandas as pd

    from intrabench.timing.human import human_seconds

    wanted = {tuple(t) for t in targets}
    keys = list(zip(results["dataset"], results["case"].astype(str), results["target"]))
    rows = results[[key in wanted for key in keys]].copy()
    if rows.empty:
        return pd.DataFrame(columns=[*_STEP_COLUMNS, "seed"])
    refiner = rows["refiner"].fillna("").astype(str).replace("none", "")  # "none": not refined
    rows["user"] = np.where(refiner == "", rows["prompter"], rows["prompter"] + " + " + refiner)
    latency = rows["latency_seconds"].astype(float).fillna(0.0)
    rows["_cost"] = human_seconds(rows, time_model) + latency
    rows = rows.sort_values(["user", "model", "dataset", "case", "target", "seed", "step"])
    episode = ["user", "model", "dataset", "case", "target", "seed"]
    rows["seconds"] = rows.groupby(episode, sort=False)["_cost"].cumsum()
    rows["kind"] = ""
    rows["rater"] = ""
    rows["session_id"] = ""
    return rows[[*_STEP_COLUMNS, "seed"]].reset_index(drop=True)


# -- the comparison -------------------------------------------------------------------------
def _episodes(steps: pd.DataFrame) -> Iterable[tuple[tuple, pd.DataFrame]]:
    """Each episode (a session, or a simulated episode with its seed) of ``steps``, by step."""
    keys = ["user", "model", "dataset", "case", "target", "session_id"]
    if "seed" in steps:
        keys.append("seed")
    frame = steps.fillna({"session_id": "", **({"seed": -1} if "seed" in steps else {})})
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        yield key, group.sort_values("step")


def dice_per_step(steps: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """Mean Dice per (user, model) at steps 0..n_steps-1, each episode's last Dice carried
    past its end.

    Args:
        steps: Step rows of every user (:func:`people_steps`, :func:`simulated_steps`).
        n_steps: How many steps the curves have.

    Returns:
        ``user``, ``model``, ``step``, ``n`` (episodes), ``dice`` (0-1).
    """
    import pandas as pd

    curves: dict[tuple[str, str], list[list[float]]] = {}
    for key, group in _episodes(steps):
        curves.setdefault((key[0], key[1]), []).append(carried(list(group["dice"]), n_steps))
    rows = [
        {"user": user, "model": model, "step": step, "n": len(runs), "dice": float(np.mean(column))}
        for (user, model), runs in sorted(curves.items())
        for step, column in enumerate(zip(*runs))
    ]
    return pd.DataFrame(rows, columns=["user", "model", "step", "n", "dice"])


def reaching(steps: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per (user, model): ``episodes``, ``reached`` (how many reach Dice >= ``threshold``),
    and over those that do the mean ``interactions`` (step + 1) and ``seconds`` to reach it.

    Args:
        steps: Step rows of every user.
        threshold: The Dice to reach (0-1).

    Returns:
        One row per (user, model); NaN means where no episode reaches it.
    """
    import pandas as pd

    found: dict[tuple[str, str], list[tuple[int, float] | None]] = {}
    for key, group in _episodes(steps):
        index = first_reaching(list(group["dice"]), threshold)
        found.setdefault((key[0], key[1]), []).append(
            None if index is None else (index + 1, float(group["seconds"].iloc[index]))
        )
    rows = []
    for (user, model), outcomes in sorted(found.items()):
        reached = [o for o in outcomes if o is not None]
        rows.append(
            {
                "user": user,
                "model": model,
                "episodes": len(outcomes),
                "reached": len(reached),
                "interactions": float(np.mean([o[0] for o in reached])) if reached else math.nan,
                "seconds": float(np.mean([o[1] for o in reached])) if reached else math.nan,
            }
        )
    return pd.DataFrame(
        rows, columns=["user", "model", "episodes", "reached", "interactions", "seconds"]
    )


def dice_shift(curves: pd.DataFrame, simulated: str, model: str) -> list[float]:
    """Mean simulated Dice minus mean people's Dice at each step, for ``model``; positive: the
    simulated user overestimates.

    Args:
        curves: :func:`dice_per_step`'s rows.
        simulated: The simulated user's name in ``curves``.
        model: The model (people used it live; the simulated user ran on it).

    Returns:
        The differences (Dice 0-1) at the steps both have, in step order.
    """
    people = curves[(curves["user"] == PEOPLE) & (curves["model"] == model)]
    other = curves[(curves["user"] == simulated) & (curves["model"] == model)]
    steps = sorted(set(people["step"]) & set(other["step"]))
    by_people = dict(zip(people["step"], people["dice"]))
    by_other = dict(zip(other["step"], other["dice"]))
    return [float(by_other[step] - by_people[step]) for step in steps]


def wasserstein(a: Sequence[float], b: Sequence[float]) -> float:
    """The 1-D Wasserstein (earth mover's) distance between two samples, NaN if one is empty.

    Args:
        a: One sample.
        b: The other.

    Returns:
        The distance, in the samples' units.
    """
    from scipy.stats import wasserstein_distance

    if not len(a) or not len(b):
        return math.nan
    return float(wasserstein_distance(list(a), list(b)))


# -- where clicks fall ----------------------------------------------------------------------
@dataclass(frozen=True)
class ClickPosition:
    """A click against its error: ``border_mm`` (distance transform at the click; negative
    outside the error), ``centre_mm`` (to the component's distance-transform maximum) and
    whether it is ``in_error``."""

    border_mm: float
    centre_mm: float
    in_error: bool


def click_position(
    click: Sequence[int],
    previous: np.ndarray,
    reference: np.ndarray,
    spacing: Sequence[float],
) -> ClickPosition | None:
    """Where the voxel ``click`` (z, y, x) falls on the error ``reference XOR previous``.

    The error is split into 26-connected components; the component is the click's, or the
    largest when the click is outside the error; the centre is its distance-transform maximum
    (the first in C order on ties).

    Args:
        click: The clicked voxel, canonical (z, y, x).
        previous: The mask shown before the click, boolean (z, y, x).
        reference: The reference mask, same shape.
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The border and centre distances in mm and whether the click is in the error; None
        without an error.
    """
    import cc3d
    from scipy import ndimage

    error = np.logical_xor(np.asarray(previous, bool), np.asarray(reference, bool))
    if not error.any():
        return None
    components = cc3d.connected_components(error.astype(np.uint8), connectivity=26)
    zyx = tuple(int(v) for v in click)
    label = int(components[zyx])
    inside = label > 0
    if not inside:
        counts = np.bincount(components.reshape(-1))
        counts[0] = 0
        label = int(counts.argmax())
    component = components == label
    sampling = [float(v) for v in spacing]
    inner = _padded_edt(component, sampling)
    centre = np.unravel_index(int(np.argmax(inner)), inner.shape)
    if inside:
        border = float(inner[zyx])
    else:
        border = -float(ndimage.distance_transform_edt(~error, sampling=sampling)[zyx])
    offset = (np.array(zyx) - np.array(centre)) * np.array(sampling)
    return ClickPosition(border, float(np.sqrt((offset**2).sum())), inside)


def _padded_edt(component: np.ndarray, sampling: list[float]) -> np.ndarray:
    """The distance transform (mm) of ``component`` on the whole grid, computed on its
    bounding box with one voxel of background around it (exact: the nearest background
    voxel of any inside voxel is within that box); 0 outside the component."""
    from scipy import ndimage

    present = [
        np.flatnonzero(component.any(axis=tuple(a for a in range(3) if a != axis)))
        for axis in range(3)
    ]
    box = tuple(slice(int(p[0]), int(p[-1]) + 1) for p in present)
    crop = np.pad(component[box], 1)
    distances = ndimage.distance_transform_edt(crop, sampling=sampling)[1:-1, 1:-1, 1:-1]
    out = np.zeros(component.shape, dtype=float)
    out[box] = distances
    return out


def click_positions(
    library: SessionLibrary,
    references: Mapping[Identity, np.ndarray],
    simulated_refiner: str = "center-error-click",
) -> pd.DataFrame:
    """Every correction click of the sessions on ``references``' targets, and the simulated
    user's click on the same error (``simulated_refiner``, seeded with 0).

    Args:
        library: The recorded sessions.
        references: The boolean reference mask of each target, by identity.
        simulated_refiner: The registered refiner whose clicks are compared.

    Returns:
        ``session_id``, ``rater``, ``dataset``, ``case``, ``target``, ``step``, ``who`` (people
        / the refiner), ``z``, ``y``, ``x``, ``border_mm``, ``centre_mm``, ``in_error``.
    """
    import pandas as pd

    from intrabench import registry
    from intrabench.interfaces import RefineContext

    refiner = registry.refiners.create(simulated_refiner, {})
    rows = []
    for session in library.sessions:
        identity = identity_of(session)
        reference = references.get(identity)
        if reference is None:
            continue
        spacing = tuple(float(v) for v in session.header["spacing"])
        events, masks = session.effective_interactions(), session.masks()
        for step in range(1, len(events)):
            if events[step]["kind"] != "point":
                continue
            previous = masks[step - 1]
            simulated = refiner.refine(
                RefineContext(
                    ground_truth=reference,
                    prediction=previous,
                    spacing=spacing,  # type: ignore[arg-type]
                    rng=np.random.default_rng(0),
                    step=step,
                    model_dimension=3,
                    identity=identity,
                )
            )
            clicks = [(PEOPLE, events[step]["geometry"]["zyx"])]
            if simulated is not None and len(simulated.points):
                clicks.append((simulated_refiner, simulated.points[0].tolist()))
            for who, zyx in clicks:
                position = click_position(zyx, previous, reference, spacing)
                if position is None:
                    continue
                rows.append(
                    {
                        "session_id": session.header["session_id"],
                        "rater": session.header["rater"],
                        "dataset": identity[0],
                        "case": identity[1],
                        "target": identity[2],
                        "step": step,
                        "who": who,
                        "z": int(zyx[0]),
                        "y": int(zyx[1]),
                        "x": int(zyx[2]),
                        "border_mm": position.border_mm,
                        "centre_mm": position.centre_mm,
                        "in_error": position.in_error,
                    }
                )
    return pd.DataFrame(rows, columns=_CLICK_COLUMNS)


_CLICK_COLUMNS = [
    "session_id",
    "rater",
    "dataset",
    "case",
    "target",
    "step",
    "who",
    "z",
    "y",
    "x",
    "border_mm",
    "centre_mm",
    "in_error",
]


def click_shift(clicks: pd.DataFrame, simulated: str = "center-error-click") -> dict[str, float]:
    """The Wasserstein distances between people's and ``simulated``'s clicks: of their
    border distances (``border_w1_mm``) and centre distances (``centre_w1_mm``), with each
    side's means.

    Args:
        clicks: :func:`click_positions`'s rows.
        simulated: The refiner's name in the ``who`` column.

    Returns:
        ``clicks`` (people's count), the four means and the two distances, in mm.
    """
    people = clicks[clicks["who"] == PEOPLE]
    other = clicks[clicks["who"] == simulated]
    return {
        "clicks": int(len(people)),
        "people_border_mm": float(people["border_mm"].mean()) if len(people) else math.nan,
        "simulated_border_mm": float(other["border_mm"].mean()) if len(other) else math.nan,
        "people_centre_mm": float(people["centre_mm"].mean()) if len(people) else math.nan,
        "simulated_centre_mm": float(other["centre_mm"].mean()) if len(other) else math.nan,
        "border_w1_mm": wasserstein(list(people["border_mm"]), list(other["border_mm"])),
        "centre_w1_mm": wasserstein(list(people["centre_mm"]), list(other["centre_mm"])),
    }


# -- the table ------------------------------------------------------------------------------
@dataclass
class Comparison:
    """What the tables and the report show: Dice per step per (user, model), reaching the
    threshold, the user shift per simulated user and model, seconds per kind, clicks."""

    curves: pd.DataFrame
    reach: pd.DataFrame
    shift: pd.DataFrame
    seconds: pd.DataFrame
    clicks: pd.DataFrame
    threshold: float
    n_steps: int
    #: lines about session files or lines that were not read
    problems: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """One row per (user, model): Dice x100 at each step, reached, interactions and
        seconds to reach the threshold, and the mean Dice shift against people (x100).

        Returns:
            The table, people first, then simulated users, then replays.
        """
        wide = self.curves.pivot_table(index=["user", "model"], columns="step", values="dice")
        wide.columns = [f"dice@{int(step)}" for step in wide.columns]
        wide = (wide * 100).round(1).reset_index()
        table = wide.merge(self.reach, on=["user", "model"], how="left")
        table["reached"] = [f"{r}/{e}" for r, e in zip(table["reached"], table["episodes"])]
        table = table.drop(columns=["episodes"])
        table = table.rename(
            columns={
                "reached": f"reach {self.threshold:g}",
                "interactions": "interactions to reach",
                "seconds": "seconds to reach",
            }
        )
        shift = self.shift.set_index(["user", "model"])["mean_dice_shift"]
        table["dice shift x100"] = [
            round(100 * float(shift.get((u, m), math.nan)), 1)
            for u, m in zip(table["user"], table["model"])
        ]
        table["interactions to reach"] = table["interactions to reach"].round(2)
        table["seconds to reach"] = table["seconds to reach"].round(1)
        order = {PEOPLE: 0}
        table["_order"] = [
            (order.get(u, 2 if str(u).startswith("replay") else 1), u, m)
            for u, m in zip(table["user"], table["model"])
        ]
        return table.sort_values("_order").drop(columns=["_order"]).reset_index(drop=True)


def compare(
    library: SessionLibrary,
    references: Mapping[Identity, np.ndarray],
    results: pd.DataFrame | None,
    time_model: TimeModel,
    replays: pd.DataFrame | None = None,
    threshold: float = 0.8,
    simulated_refiner: str = "center-error-click",
) -> Comparison:
    """People's sessions beside the run's simulated users and the sessions replayed on other
    models, on the targets that have sessions.

    Args:
        library: The recorded sessions.
        references: The boolean reference mask of each target, by identity.
        results: The run's result rows; None or empty: no simulated users.
        time_model: The time model that gives the simulated users' seconds.
        replays: :func:`replay_library`'s rows, shown as user ``replayed``; None: none.
        threshold: The Dice to reach (0-1).
        simulated_refiner: The refiner whose clicks are compared with people's.

    Returns:
        Dice per step, reaching, the shift per simulated user and model, seconds per kind and
        the clicks.
    """
    import pandas as pd

    people = people_steps(library, references)
    parts = [people]
    if results is not None and not results.empty:
        parts.append(simulated_steps(results, library.targets(), time_model))
    if replays is not None and not replays.empty:
        parts.append(_replay_steps(replays))
    steps = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    n_steps = int(people["step"].max()) + 1 if not people.empty else 1
    curves = dice_per_step(steps, n_steps)
    shift_rows = []
    for user, model in sorted(set(zip(curves["user"], curves["model"]))):
        if user == PEOPLE:
            continue
        shifts = dice_shift(curves, user, model)
        if shifts:
            shift_rows.append(
                {
                    "user": user,
                    "model": model,
                    **{f"shift@{k}": s for k, s in enumerate(shifts)},
                    "mean_dice_shift": float(np.mean(shifts)),
                }
            )
    return Comparison(
        curves=curves,
        reach=reaching(steps, threshold),
        shift=pd.DataFrame(
            shift_rows, columns=None if shift_rows else ["user", "model", "mean_dice_shift"]
        ),
        seconds=beside_time_model(seconds_by_kind(library), time_model),
        clicks=click_positions(library, references, simulated_refiner),
        threshold=threshold,
        n_steps=n_steps,
        problems=list(library.problems),
    )


REPLAYED = "replayed"


def _replay_steps(replays: pd.DataFrame) -> pd.DataFrame:
    """The replay's rows as steps of user ``replayed`` (no seconds: a replay has no person's
    time; rows of sessions a model took nothing of are left out)."""
    rows = replays[replays["dice"].notna()].copy()
    rows["user"] = REPLAYED
    rows["seconds"] = math.nan
    return rows[[c for c in _STEP_COLUMNS if c in rows]].reindex(columns=_STEP_COLUMNS)


def beside_time_model(seconds: pd.DataFrame, time_model: TimeModel) -> pd.DataFrame:
    """:func:`seconds_by_kind`'s rows with ``time_model``, the seconds the run's time model
    gives each kind (what the simulated user's time is made of).

    Args:
        seconds: :func:`seconds_by_kind`'s rows.
        time_model: The run's time model.

    Returns:
        A copy with a ``time_model`` column (NaN for a kind the model does not price).
    """
    out = seconds.copy()
    out["time_model"] = [float(time_model.seconds.get(kind, math.nan)) for kind in out["kind"]]
    return out


def seconds_table(seconds: pd.DataFrame) -> dict[str, Any]:
    """The time model's ``seconds:`` mapping from :func:`seconds_by_kind`'s rows (the mean,
    rounded to 0.1 s), for a run config's ``time_model:``.

    Args:
        seconds: :func:`seconds_by_kind`'s rows.

    Returns:
        Kind -> mean seconds.
    """
    return {
        str(kind): round(float(mean), 1) for kind, mean in zip(seconds["kind"], seconds["mean"])
    }
