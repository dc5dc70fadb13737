"""``protocol: cvpr25``: the CVPR 2025 interactive challenge's numbers, exactly.

References: DeepMind's ``surface-distance`` package (the NSD the challenge's ``SurfaceDice.py``
ports), and the challenge's formulas written out here from ``CVPR25_iter_eval.py`` (the image's
Dice = mean over classes; NSD only when that mean is > 0.2; AUC = ``cumulative_trapezoid`` over
the last 5 steps; the click = seed-42 choice among the distance-transform maxima in C order).
"""

from __future__ import annotations

import cc3d
import numpy as np
import pandas as pd
import pytest
import surface_distance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, ndimage
from skimage.measure import block_reduce

from intrabench import registry
from intrabench.config import parse_config
from intrabench.evaluation.cvpr25 import image_table, leaderboard, step_metrics_cvpr25, surfel_nsd
from intrabench.evaluation.metrics import step_metrics
from intrabench.interfaces import RefineContext
from intrabench.prompters import cvpr25 as cvpr25_prompters
from intrabench.prompters.cvpr25 import challenge_click


@pytest.fixture(autouse=True)
def _numpy_inf_alias(monkeypatch):
    # surface-distance 0.1 still spells np.Inf (gone in NumPy 2) for an empty mask's surface
    monkeypatch.setattr(np, "Inf", np.inf, raising=False)


def deepmind_nsd(pred: np.ndarray, gt: np.ndarray, spacing, tolerance: float) -> float:
    distances = surface_distance.compute_surface_distances(gt, pred, spacing)
    return float(surface_distance.compute_surface_dice_at_tolerance(distances, tolerance))


# --------------------------------------------------------------------------------------
# NSD: surface elements weighted by area (DeepMind), not surface voxels
# --------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_surfel_nsd_equals_deepminds(data):
    shape = tuple(data.draw(st.integers(1, 9), label=f"size{a}") for a in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    pred = rng.random(shape) > data.draw(st.sampled_from([0.3, 0.6, 0.9]), label="p")
    gt = rng.random(shape) > data.draw(st.sampled_from([0.3, 0.6, 0.9]), label="g")
    if not gt.any():
        return
    spacing = tuple(data.draw(st.sampled_from([0.4, 0.7, 0.8, 1.0, 2.5, 5.0])) for _ in range(3))
    tolerance = data.draw(st.sampled_from([0.7, 1.0, 2.0]), label="tolerance")
    embedded_pred = np.zeros((12, 13, 14), bool)
    embedded_gt = np.zeros_like(embedded_pred)
    embedded_pred[1 : 1 + shape[0], 2 : 2 + shape[1], 3 : 3 + shape[2]] = pred
    embedded_gt[1 : 1 + shape[0], 2 : 2 + shape[1], 3 : 3 + shape[2]] = gt
    expected = deepmind_nsd(embedded_pred, embedded_gt, spacing, tolerance)
    assert surfel_nsd(embedded_pred, embedded_gt, spacing, tolerance) == pytest.approx(
        expected, abs=1e-12
    )
    # touching the array's border: the same as the whole volume
    assert surfel_nsd(pred, gt, spacing, tolerance) == pytest.approx(
        deepmind_nsd(pred, gt, spacing, tolerance), abs=1e-12
    )


def test_surfel_and_voxel_nsd_differ():
    # A 4x6x8 box against itself shifted by one voxel along x (0.7 mm), 3 mm slices, 0.5 mm
    # tolerance. Counting surface voxels (IntraBench, MONAI's default), 7/9 of them lie on
    # both surfaces; weighting surface elements by area (DeepMind, the challenge), the thick
    # slices' large faces weigh more and fewer are within 0.5 mm: 0.674.
    gt = np.zeros((10, 12, 14), bool)
    gt[3:7, 3:9, 3:11] = True
    pred = np.roll(gt, 1, axis=2)
    spacing = (3.0, 0.7, 0.7)
    ours = step_metrics_cvpr25(pred, gt, spacing, nsd_tolerance_mm=0.5)
    voxel = step_metrics(pred, gt, spacing, nsd_tolerance_mm=0.5)
    assert voxel["nsd"] == pytest.approx(7 / 9)
    assert ours["nsd"] == pytest.approx(deepmind_nsd(pred, gt, spacing, 0.5), abs=1e-12)
    assert ours["nsd"] == pytest.approx(0.6737614617, abs=1e-9)
    assert {k: v for k, v in ours.items() if k != "nsd"} == pytest.approx(
        {k: v for k, v in voxel.items() if k != "nsd"}, nan_ok=True
    )


def test_surfel_nsd_of_empty_masks():
    gt = np.zeros((5, 5, 5), bool)
    gt[1:3, 1:3, 1:3] = True
    empty = np.zeros_like(gt)
    assert surfel_nsd(empty, gt, (1, 1, 1)) == 0.0 == deepmind_nsd(empty, gt, (1, 1, 1), 2.0)
    assert surfel_nsd(empty, empty, (1, 1, 1)) == 1.0


# --------------------------------------------------------------------------------------
# The image's numbers: mean over classes, the 0.2 rule per image, AUC over the clicks
# --------------------------------------------------------------------------------------


def _rows(
    dice_by_target: dict[str, list[float]], nsd_by_target: dict[str, list[float]], case: str = "img"
) -> list[dict]:
    rows = []
    for target, dices in dice_by_target.items():
        for step, (d, n) in enumerate(zip(dices, nsd_by_target[target])):
            rows.append(
                {
                    "run": "r",
                    "dataset": "d",
                    "case": case,
                    "target": target,
                    "model": "m",
                    "prompter": "cvpr25-box",
                    "refiner": "cvpr25-click",
                    "seed": 0,
                    "step": step,
                    "dice": d,
                    "nsd": n,
                }
            )
    return rows


def challenge_image_metrics(dice_by_target, nsd_by_target):
    """The challenge's loop over iterations, as in CVPR25_iter_eval.py."""
    dscs, nsds = [], []
    for step in range(6):
        dsc = np.mean([d[step] for d in dice_by_target.values()])
        nsd = np.mean([n[step] for n in nsd_by_target.values()]) if dsc > 0.2 else 0.0
        dscs.append(dsc)
        nsds.append(nsd)
    return {
        "DSC_AUC": integrate.cumulative_trapezoid(np.array(dscs[-5:]), np.arange(5))[-1],
        "NSD_AUC": integrate.cumulative_trapezoid(np.array(nsds[-5:]), np.arange(5))[-1],
        "DSC_Final": dscs[-1],
        "NSD_Final": nsds[-1],
        **{f"DSC_{k + 1}": v for k, v in enumerate(dscs)},
        **{f"NSD_{k + 1}": v for k, v in enumerate(nsds)},
    }


def test_image_table_applies_the_rule_to_the_images_mean_dice():
    # Two classes. At steps 0, 2 and 5 the image's mean Dice is <= 0.2 although class "a" is
    # above 0.2 on its own: the challenge zeroes the image's NSD there (a per-target rule would
    # keep a's NSD), the final step included.
    dice = {"a": [0.30, 0.5, 0.25, 0.6, 0.7, 0.35], "b": [0.05, 0.3, 0.10, 0.4, 0.5, 0.05]}
    nsd = {"a": [0.40, 0.6, 0.50, 0.7, 0.8, 0.45], "b": [0.10, 0.2, 0.20, 0.3, 0.4, 0.15]}
    table = image_table(pd.DataFrame(_rows(dice, nsd)))
    assert len(table) == 1
    got = table.iloc[0]
    expected = challenge_image_metrics(dice, nsd)
    for column, value in expected.items():
        assert got[column] == pytest.approx(value, abs=1e-12), column
    assert got["NSD_Final"] == 0.0 and got["NSD_1"] == 0.0 and got["NSD_3"] == 0.0
    assert got["NSD_2"] == pytest.approx(0.4)  # mean Dice 0.4 > 0.2: mean NSD (0.6 + 0.2) / 2
    assert got["num_class"] == 2
    # hand-computed: DSC over clicks 0.4, 0.175, 0.5, 0.6, 0.2 -> trapezoid 1.575
    assert got["DSC_AUC"] == pytest.approx(
        (0.4 + 0.175) / 2 + (0.175 + 0.5) / 2 + (0.5 + 0.6) / 2 + (0.6 + 0.2) / 2
    )


def test_leaderboard_means_over_images():
    first = _rows({"a": [0.9] * 6}, {"a": [0.8] * 6}, case="one")
    second = _rows({"a": [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]}, {"a": [0.5] * 6}, case="two")
    board = leaderboard(image_table(pd.DataFrame(first + second))).iloc[0]
    assert board["images"] == 2
    assert board["DSC_AUC"] == pytest.approx((3.6 + (0.4 + 0.6 + 0.8 + 0.95)) / 2)
    assert board["DSC_Final"] == pytest.approx(0.95)
    assert board["NSD_Final"] == pytest.approx(0.65)


# --------------------------------------------------------------------------------------
# Clicks: the challenge's tie-break and its downsampling of large error components
# --------------------------------------------------------------------------------------


def reference_click(error: np.ndarray, large_roi: int = 60_000_000) -> tuple[int, ...]:
    """The challenge's click on a full-volume error mask, step by step as its script does."""
    labels = cc3d.connected_components(error.astype(np.uint8), connectivity=26)
    sizes = np.bincount(labels.flat)
    sizes[0] = 0
    component = labels == np.argmax(sizes)
    coords = np.argwhere(component)
    low, high = coords.min(axis=0), coords.max(axis=0) + 1
    size = high - low
    pad = np.maximum((size * 0.25).astype(int), 1)
    box = np.zeros(size + 2 * pad, np.uint8)
    box[pad[0] : pad[0] + size[0], pad[1] : pad[1] + size[1], pad[2] : pad[2] + size[2]] = (
        component[low[0] : high[0], low[1] : high[1], low[2] : high[2]]
    )
    large = box.size > large_roi
    if large:
        box = block_reduce(box, block_size=(2, 2, 2), func=np.max)
    edt = ndimage.distance_transform_edt(box)
    if large:
        edt = edt.repeat(2, axis=0).repeat(2, axis=1).repeat(2, axis=2)
    full = np.zeros(error.shape)
    full[low[0] : high[0], low[1] : high[1], low[2] : high[2]] = edt[
        pad[0] : pad[0] + size[0], pad[1] : pad[1] + size[1], pad[2] : pad[2] + size[2]
    ]
    full *= component
    if np.sum(full) == 0:
        full = component
    np.random.seed(42)
    maxima = np.argwhere(full == full.max())
    return tuple(int(v) for v in maxima[np.random.choice(len(maxima))])


def test_click_on_a_hand_made_tie():
    # A 2x2x2 error cube at (3..4, 5..6, 7..8): all 8 voxels are 1 voxel from the background.
    # RandomState(42).choice(8) is 6 -> the 7th voxel in C order: (4, 6, 7).
    error = np.zeros((10, 12, 14), bool)
    error[3:5, 5:7, 7:9] = True
    assert np.random.RandomState(42).choice(8) == 6
    assert challenge_click(error) == (4, 6, 7) == reference_click(error)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_click_equals_the_challenges(data):
    shape = tuple(data.draw(st.integers(2, 16), label=f"size{a}") for a in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    error = ndimage.binary_dilation(
        rng.random(shape) > 0.93, iterations=data.draw(st.integers(0, 2), label="grow")
    )
    if not error.any():
        return
    # the 2x-downsampled path too: lower the challenge's 60 M-voxel threshold for small arrays
    threshold = data.draw(st.sampled_from([60_000_000, 64]), label="threshold")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cvpr25_prompters, "LARGE_ROI_VOXELS", threshold)
        assert challenge_click(registry_largest(error)) == reference_click(error, threshold)


def registry_largest(error: np.ndarray) -> np.ndarray:
    from intrabench.prompters._geometry import largest_component

    return largest_component(error)


def test_cvpr25_click_refiner_labels_and_places_the_click():
    gt = np.zeros((12, 12, 12), bool)
    gt[2:10, 2:10, 2:10] = True
    prediction = gt.copy()
    prediction[2:10, 2:10, 2:5] = False  # a 8x8x3 false-negative slab: the largest error
    prediction[0, 0, 0] = True  # and one false positive
    context = RefineContext(
        ground_truth=gt,
        prediction=prediction,
        spacing=(1.0, 1.0, 1.0),
        rng=np.random.default_rng(0),
        step=1,
        model_dimension=3,
    )
    prompt = registry.refiners.create("cvpr25-click").refine(context)
    expected = reference_click(gt != prediction)
    assert tuple(prompt.points[0]) == expected
    assert expected[2] == 3  # the slab's middle layer along x
    assert prompt.point_labels.tolist() == [1]
    assert prompt.effort == 1


# --------------------------------------------------------------------------------------
# The preset in a run config
# --------------------------------------------------------------------------------------


def test_protocol_fills_in_the_challenges_prompts():
    config = parse_config(
        {"protocol": "cvpr25", "datasets": ["demo-phantoms"], "models": ["region-growing-3d"]}
    )
    assert [p.name for p in config.prompters] == ["cvpr25-box"]
    assert [r.name for r in config.refiners] == ["cvpr25-click"]
    assert config.refinement_steps == 5 and config.nsd_tolerance_mm == 2.0
    own = parse_config(
        {
            "protocol": "cvpr25",
            "datasets": ["demo-phantoms"],
            "models": ["region-growing-3d"],
            "prompters": ["box-3d"],
            "refinement_steps": 2,
        }
    )
    assert [p.name for p in own.prompters] == ["box-3d"] and own.refinement_steps == 2
    with pytest.raises(Exception, match="protocol"):
        parse_config(
            {
                "protocol": "cvpr2025",
                "datasets": ["demo-phantoms"],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
            }
        )


def test_a_cvpr25_run_end_to_end(tmp_path, capsys):
    """A real run under the preset: rows carry the protocol, ``nsd`` is the surface-element
    NSD of the saved prediction, and ``intrabench tables`` writes the challenge's CSV whose
    numbers follow from the rows by the challenge's formulas. The same config under the default
    protocol is a different unit (not a stale row) in the same directory."""
    from intrabench.cli import main
    from intrabench.engine.finishing import prediction_path
    from intrabench.engine.plan import make_plan
    from intrabench.execution.runner import Runner
    from intrabench.io.volume import read_volume

    spec = {
        "name": "challenge",
        "protocol": "cvpr25",
        "seeds": [0],
        "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
        "models": ["region-growing-3d"],
        "save_predictions": True,
    }
    config = parse_config(spec)
    run_dir = tmp_path / "run"
    Runner(config, run_dir).run()
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert set(rows["protocol"]) == {"cvpr25"} and set(rows["step"]) == set(range(6))
    assert set(rows["refiner"]) == {"cvpr25-click"} and set(rows["prompter"]) == {"cvpr25-box"}
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 2})
    [unit] = [
        u
        for u in make_plan(config, {"demo-phantoms(n_cases=2)": dataset}).units
        if u.case_id == rows["case"].iloc[0]
    ]
    case = dataset.load(unit.case_id)
    final = rows[(rows["case"] == unit.case_id) & (rows["step"] == 5)]
    for target in case.targets:
        saved = read_volume(prediction_path(run_dir, unit, unit.case_id, target.target_id))
        expected = surfel_nsd(saved.array > 0, case.target_mask(target), case.image.spacing)
        row = final[final["target"] == target.target_id].iloc[0]
        assert row["nsd"] == pytest.approx(expected, abs=1e-12)

    assert main(["tables", str(run_dir), "--out", str(tmp_path / "tables")]) == 0
    images = pd.read_csv(tmp_path / "tables" / "cvpr25-images.csv")
    assert len(images) == 2 and "CVPR 2025 challenge metrics" in capsys.readouterr().out
    for _, image in images.iterrows():
        mine = rows[rows["case"] == image["case"]]
        dice = {t: g.sort_values("step")["dice"].tolist() for t, g in mine.groupby("target")}
        nsd = {t: g.sort_values("step")["nsd"].tolist() for t, g in mine.groupby("target")}
        for column, value in challenge_image_metrics(dice, nsd).items():
            assert image[column] == pytest.approx(value, abs=1e-6), column

    default = parse_config(
        {
            **spec,
            "protocol": "intrabench",
            "prompters": ["cvpr25-box"],
            "refiners": ["cvpr25-click"],
            "refinement_steps": 5,
        }
    )
    keys = {u.key for u in make_plan(config, {"demo-phantoms(n_cases=2)": dataset}).units}
    other = {u.key for u in make_plan(default, {"demo-phantoms(n_cases=2)": dataset}).units}
    assert keys.isdisjoint(other)


def test_cvpr25_mean_order_keeps_nsd_as_the_challenge_does():
    """Class Dice 0.1, 0.2, 0.3: the challenge's np.mean gives 0.20000000000000004 (> 0.2:
    NSD kept), pandas' grouped mean 0.19999999999999998 (NSD zeroed). The classes are averaged
    in ascending label order (``target_label``), not in the target ids' alphabetical order."""
    assert float(np.mean([0.1, 0.2, 0.3])) > 0.2
    assert (
        pd.DataFrame({"g": [1, 1, 1], "v": [0.1, 0.2, 0.3]}).groupby("g")["v"].mean().iloc[0] <= 0.2
    )
    dice = {"zeta": [0.1] * 6, "beta": [0.2] * 6, "alpha": [0.3] * 6}  # labels 1, 2, 3
    nsd = {"zeta": [0.5] * 6, "beta": [0.6] * 6, "alpha": [0.7] * 6}
    rows = pd.DataFrame(_rows(dice, nsd))
    rows["target_label"] = rows["target"].map({"zeta": 1, "beta": 2, "alpha": 3})
    got = image_table(rows.sample(frac=1.0, random_state=0)).iloc[0]  # row order scrambled
    assert got["DSC_1"] == np.mean([0.1, 0.2, 0.3]) == 0.20000000000000004
    assert got["NSD_1"] == np.mean([0.5, 0.6, 0.7]) > 0
    assert got["NSD_AUC"] == pytest.approx(4 * np.mean([0.5, 0.6, 0.7]), abs=1e-12)
    # in the alphabetical order (alpha, beta, zeta) np.mean gives 0.19999999999999998
    assert float(np.mean([0.3, 0.2, 0.1])) <= 0.2


@pytest.mark.parametrize(
    ("spacing_y", "spacing_x", "tolerance"),
    [
        (0.20, 0.21, 0.29),  # 0.2^2 + 0.21^2 = 0.29^2 exactly; in float sqrt > 0.29
        (8 / 9, 15 / 9, 17 / 9),
        (0.1, 0.4 / 3, 0.5 / 3),
    ],
)
def test_surfel_nsd_on_a_rounded_up_tie_equals_deepminds(spacing_y, spacing_x, tolerance):
    """A diagonal shift by one voxel whose length equals the tolerance on paper, but whose
    float distance rounds above it: DeepMind leaves those surface elements out, and so does
    the surfel NSD (the same elements a hair more tolerance takes in)."""
    assert np.sqrt(spacing_y**2 + spacing_x**2) > tolerance
    gt = np.zeros((6, 10, 10), bool)
    gt[2:4, 3:6, 3:6] = True
    pred = np.roll(np.roll(gt, 1, axis=1), 1, axis=2)
    spacing = (2.0, spacing_y, spacing_x)
    expected = deepmind_nsd(pred, gt, spacing, tolerance)
    assert expected < deepmind_nsd(pred, gt, spacing, tolerance * (1 + 1e-12)) == 1.0
    assert surfel_nsd(pred, gt, spacing, tolerance) == pytest.approx(expected, abs=1e-12)


def test_cvpr25_target_label_is_the_files_label_value(tmp_path):
    """Classes stored as 1, 3 and 4 in the label file: ``target_label`` holds 1, 3, 4 (the
    file's values), ``target_number`` the case's compacted 1, 2, 3 (#49 item 9)."""
    import SimpleITK as sitk

    from intrabench.execution.runner import Runner

    rng = np.random.default_rng(0)
    label = np.zeros((6, 20, 20), np.uint8)
    label[1:4, 2:7, 2:7] = 1
    label[2:5, 10:16, 3:8] = 3
    label[1:5, 4:9, 12:18] = 4
    for folder, array in (
        ("images", rng.normal(0, 1, label.shape).astype(np.float32)),
        ("labels", label),
    ):
        (tmp_path / folder).mkdir()
        sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / folder / "c1.nii.gz"))
    spec = tmp_path / "organs.yaml"
    spec.write_text(
        "name: organs\nimages: images/{case}.nii.gz\nlabels: labels/{case}.nii.gz\n"
        "classes: {spleen: 1, liver: 3, kidney: 4}\nmodality: CT\n"
        "target_types: {spleen: organ, liver: organ, kidney: organ}\n"
    )
    config = parse_config(
        {
            "name": "values",
            "protocol": "cvpr25",
            "seeds": [0],
            "datasets": [{"name": "folder", "spec": str(spec)}],
            "models": ["region-growing-3d"],
        }
    )
    Runner(config, tmp_path / "run").run()
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    by_target = rows.groupby("target")[["target_label", "target_number"]].first()
    assert by_target.to_dict("index") == {
        "spleen": {"target_label": 1, "target_number": 1},
        "liver": {"target_label": 3, "target_number": 2},
        "kidney": {"target_label": 4, "target_number": 3},
    }
